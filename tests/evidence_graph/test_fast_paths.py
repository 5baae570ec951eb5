"""The integer forms the searches run on agree with the exact forms they replace: an edge's US
cents with ``usd_cents`` (itself checked against Decimal in tests/auditflow/test_money.py),
microsecond windows with datetime windows, the fan-out ranking with the same ranking computed
from Money and datetimes."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from auditflow.money import CURRENCIES, MAX_UNIT_DIGITS, Money, usd_cents
from auditflow.records import EPOCH, AccountRef, TransactionEvent
from evidence_graph import NetworkxGraphStore
from evidence_graph.follow import follow_money
from evidence_graph.store import GraphEdge, to_micros
from evidence_graph.testing import T0, acct, tx

currencies = st.sampled_from(sorted(CURRENCIES))


@st.composite
def amounts(draw: st.DrawFn) -> Money:
    c = draw(currencies)
    digits = draw(st.integers(1, MAX_UNIT_DIGITS[c]))
    return Money(c, draw(st.integers(0, 10**digits - 1)))


def test_edges_carry_exact_integer_time_and_amounts_outside_their_value() -> None:
    ev = tx("x", "A", "B", 90, amount=Money("Euro", 12345))
    e = GraphEdge.from_event(ev)
    assert e.micros == (ev.timestamp - EPOCH) // timedelta(microseconds=1) == to_micros(ev.timestamp)
    assert (e.paid_cents, e.received_cents) == (usd_cents(ev.amount_paid), usd_cents(ev.amount_received))
    twin = GraphEdge(e.event_id, e.src, e.dst, e.amount_paid, e.amount_received, e.timestamp,
                     e.payment_format, e.is_laundering)
    assert twin == e and hash(twin) == hash(e) and "micros" not in repr(e)


def _events(draw: st.DrawFn, n: int) -> list[TransactionEvent]:
    out = []
    for i in range(n):
        paid = draw(amounts())
        seconds = draw(st.sampled_from([0, 0, 0, 30]))  # mostly whole minutes, some not
        out.append(TransactionEvent(
            f"e{i:03d}", T0 + timedelta(minutes=draw(st.integers(0, 3000)), seconds=seconds),
            AccountRef("001", draw(st.sampled_from("ABCD"))), AccountRef("001", draw(st.sampled_from("ABCDEFGH"))),
            amount_received=draw(amounts()), amount_paid=paid, payment_format="Wire", is_laundering=False,
            source_offset=i))
    return out


@st.composite
def graphs(draw: st.DrawFn) -> list[TransactionEvent]:
    return _events(draw, draw(st.integers(1, 60)))


class _ViaDatetimes(NetworkxGraphStore):
    """Overrides _expand: every query goes through the datetime form (GraphStore's default)."""

    def _expand(self, requests, direction, limit, timeout):  # type: ignore[no-untyped-def]
        return super()._expand(requests, direction, limit, timeout)


bounds = st.one_of(st.none(), st.integers(-5, 3100).map(lambda m: T0 + timedelta(minutes=m, seconds=15 * (m % 3))))


@given(graphs(), st.lists(st.tuples(st.sampled_from("ABCDEFGHZ"), bounds, bounds), max_size=6),
       st.sampled_from(["out", "in", "both"]), st.sampled_from([None, 1, 3]))
@settings(max_examples=200, deadline=None)
def test_microsecond_windows_answer_as_datetime_windows(events, reqs, direction, limit) -> None:
    store, slow = NetworkxGraphStore(), _ViaDatetimes()
    store.add_transactions(events)
    slow.add_transactions(events)
    reqs = list({acct(n): (acct(n), lo, hi) for n, lo, hi in reqs if lo is None or hi is None or lo <= hi}.values())
    micros = [(n, None if lo is None else to_micros(lo), None if hi is None else to_micros(hi)) for n, lo, hi in reqs]
    want = {}  # by hand: every edge of the node inside the window, in cap order, cut at limit
    for n, lo, hi in reqs:
        es = sorted((GraphEdge.from_event(ev) for ev in events
                     if (direction in ("out", "both") and ev.sender.node_id == n)
                     or (direction in ("in", "both") and ev.receiver.node_id == n)),
                    key=lambda e: e.cap_key)
        es = [e for e in es if (lo is None or e.timestamp >= lo) and (hi is None or e.timestamp <= hi)]
        want[n] = tuple(es[:limit] if limit else es)
    assert store.expand(reqs, direction, limit) == want
    assert store.expand_micros(micros, direction, limit) == want
    assert slow.expand_micros(micros, direction, limit) == want


def _old_rank(e: GraphEdge, ref, downstream: bool):  # the ranking as written before, from Money/datetimes
    minutes = (e.timestamp - ref) / timedelta(minutes=1)
    minutes = minutes if downstream else -minutes
    return (-usd_cents(e.amount_paid) / (1.0 + minutes / 60.0), int(minutes), e.event_id)


@given(graphs(), st.integers(1, 6), st.booleans())
@settings(max_examples=200, deadline=None)
def test_the_fan_out_cap_keeps_the_transfers_the_money_and_datetime_ranking_keeps(events, cap, downstream):
    store = NetworkxGraphStore()
    store.add_transactions(events)
    root = acct("A")
    start, end = T0 + timedelta(minutes=100), T0 + timedelta(minutes=2900)
    flow = follow_money(store, root, "out" if downstream else "in", max_hops=1, start=start, end=end,
                        fanout_cap=cap, hub_degree=None)
    cand = [GraphEdge.from_event(ev) for ev in events if start <= ev.timestamp <= end
            and ev.sender != ev.receiver and (ev.sender if downstream else ev.receiver).node_id == root]
    ref = start if downstream else end
    kept = sorted(cand, key=lambda e: _old_rank(e, ref, downstream))[:cap]
    assert sorted(flow.edges) == sorted(e.event_id for e in kept)
    hop1 = [n for n, r in flow.nodes.items() if r.hop_depth == 1]  # discovery order = ranking order
    want = list(dict.fromkeys((e.dst if downstream else e.src) for e in kept))
    assert hop1 == want

