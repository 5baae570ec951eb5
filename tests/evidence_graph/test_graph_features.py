"""Graph features "as of" a transfer against brute-force computations straight from the event list;
no look-ahead (later events, the same minute included, never change a feature); incremental
(the graph growing as events come) == batch (the full graph)."""

from __future__ import annotations

import random
import statistics
from collections import Counter
from datetime import timedelta
from itertools import groupby

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditflow.features import GRAPH_SHAPE_MINUTES, GRAPH_WINDOWS, MULTI_HOP_GRAPH_FEATURES, ONE_HOP_GRAPH_FEATURES
from auditflow.limits import GRAPH_FEATURE_NEIGHBOR_CAP
from auditflow.money import Money, usd_cents
from auditflow.records import TransactionEvent
from evidence_graph import GRAPH_FEATURE_DESCRIPTIONS, GRAPH_FEATURE_NAMES, NetworkxGraphStore, graph_features
from evidence_graph.account_features import AccountFeatures, account_feature_rows
from evidence_graph.graph_features import CYCLE_FANOUT_CAP, graph_feature_rows
from evidence_graph.testing import cycle, gather_scatter, scatter_gather, tx
from ingest.synthetic import generate

DAY = 1440


def fewest_time_ordered_hops(events: list[TransactionEvent], source: str, target: str, max_hops: int) -> int:
    """Every walk ``source -> ... -> target`` of at most ``max_hops`` transfers, each no earlier
    than the one before, enumerated: the fewest hops, else 0."""
    found = []

    def walk(node: str, t, hops: int) -> None:
        for e in events:
            if e.sender.node_id == node and e.receiver.node_id != node and (t is None or e.timestamp >= t):
                if e.receiver.node_id == target:
                    found.append(hops + 1)
                elif hops + 1 < max_hops:
                    walk(e.receiver.node_id, e.timestamp, hops + 1)

    walk(source, None, 0)
    return min(found, default=0)


def brute_force(events: list[TransactionEvent], event: TransactionEvent, shape: int = GRAPH_SHAPE_MINUTES) -> dict:
    t, s, r = event.timestamp, event.sender.node_id, event.receiver.node_id

    def seen(minutes: int) -> list[TransactionEvent]:  # strictly earlier minutes, inside the window
        lo = t - timedelta(minutes=minutes)
        return [e for e in events if lo <= e.timestamp < t]

    def payees(v, es):
        return {e.receiver.node_id for e in es if e.sender.node_id == v and e.receiver.node_id != v}

    def payers(v, es):
        return {e.sender.node_id for e in es if e.receiver.node_id == v and e.sender.node_id != v}

    out: dict[str, float] = {}
    for suffix, minutes in GRAPH_WINDOWS:
        es = seen(minutes)
        out[f"g_snd_out_cp_{suffix}"] = len(payees(s, es))
        out[f"g_snd_in_cp_{suffix}"] = len(payers(s, es))
        out[f"g_rcv_in_cp_{suffix}"] = len(payers(r, es))
        out[f"g_rcv_out_cp_{suffix}"] = len(payees(r, es))
    week = seen(7 * DAY)
    older = [e for e in seen(28 * DAY) if e not in week]
    out["g_rcv_new_payers_7d"] = len(payers(r, week) - {e.sender.node_id for e in older if e.receiver.node_id == r})
    out["g_snd_new_payees_7d"] = len(payees(s, week) - {e.receiver.node_id for e in older if e.sender.node_id == s})
    es = seen(shape)
    if s == r:
        out["g_cycle_len"] = 1
    else:
        d = fewest_time_ordered_hops(es, r, s, 4)
        out["g_cycle_len"] = d + 1 if d else 0
    # scatter-gather: x -> m (no later than m's last payment to r) -> r; the sender pays r now
    last = {}
    for e in es:
        if e.receiver.node_id == r and e.sender.node_id != r:
            last[e.sender.node_id] = max(last.get(e.sender.node_id, e.timestamp), e.timestamp)
    if s != r:
        last[s] = t
    widths = {}
    for e in es:
        x, m = e.sender.node_id, e.receiver.node_id
        if m in last and x not in (m, r) and e.timestamp <= last[m]:
            widths.setdefault(x, set()).add(m)
    out["g_sg_width"] = max((len(v) for v in widths.values()), default=0)
    gathered = [e for e in es if e.receiver.node_id == s and e.sender.node_id != s]
    if gathered:
        first = min(e.timestamp for e in gathered)
        ins = {e.sender.node_id for e in gathered}
        outs = {e.receiver.node_id for e in es if e.sender.node_id == s and e.timestamp >= first} - {s}
        outs |= {r} - {s}
        out["g_gs_width"] = min(len(ins), len(outs)) if len(ins) >= 2 and len(outs) >= 2 else 0
    else:
        out["g_gs_width"] = 0
    first_hop = payees(s, es) | ({r} - {s})
    reach = first_hop | {e.receiver.node_id for e in es if e.sender.node_id in first_hop}
    out["g_two_hop_out"] = len(reach - {s})
    snd_in = sum(usd_cents(e.amount_received) for e in gathered)
    out["g_snd_in_usd_7d"] = snd_in / 100
    out["g_fwd_share_7d"] = usd_cents(event.amount_paid) / snd_in if snd_in else -1.0
    rcv = [usd_cents(e.amount_received) for e in es if e.receiver.node_id == r and e.sender.node_id != r]
    out["g_rcv_in_usd_7d"] = sum(rcv) / 100
    amounts = rcv + ([usd_cents(event.amount_received)] if s != r else [])
    out["g_rcv_in_amt_cv_7d"] = statistics.pstdev(amounts) / statistics.mean(amounts) if len(amounts) >= 2 else 0.0

    # pass-through, written from its definition: what leaves is 90% to 101% of what arrived
    def passes(arrived: Money, leaves: Money) -> bool:
        a, b = usd_cents(arrived), usd_cents(leaves)
        return 90 * a <= 100 * b <= 101 * a

    horizon = timedelta(hours=24)
    out["g_snd_funding_in"] = 0 if s == r else sum(
        1 for e in es if e.receiver.node_id == s and e.sender.node_id != s and e.timestamp >= t - horizon
        and passes(e.amount_paid, event.amount_paid))

    def longest(account: str, at, leaves: Money, on: set, depth: int) -> int:
        best = depth
        if depth == 4:
            return best
        for e in es:
            if (e.receiver.node_id == account and e.sender.node_id not in on and at - horizon <= e.timestamp <= at
                    and passes(e.amount_paid, leaves)):
                best = max(best, longest(e.sender.node_id, e.timestamp, e.amount_paid, on | {e.sender.node_id}, depth + 1))
        return best

    out["g_up_chain_hops"] = 0 if s == r else longest(s, t, event.amount_paid, {s}, 0)
    pays = [(e.sender.node_id, e.timestamp, e.amount_paid) for e in es
            if e.receiver.node_id == r and e.sender.node_id != r]
    if s != r:
        pays.append((s, t, event.amount_paid))
    passed: dict[str, set] = {}
    for e in es:
        x, m = e.sender.node_id, e.receiver.node_id
        if x in (m, r):
            continue
        if any(p == m and e.timestamp <= when <= e.timestamp + horizon and passes(e.amount_paid, amount)
               for p, when, amount in pays):
            passed.setdefault(x, set()).add(m)
    out["g_sg_pass_width"] = max((len(v) for v in passed.values()), default=0)

    def similar(a: Money, b: Money) -> bool:
        x, y = usd_cents(a), usd_cents(b)
        return x > 0 and y > 0 and max(x, y) <= 3 * min(x, y)

    day = seen(DAY)
    out["g_rcv_similar_payers_24h"] = len({e.sender.node_id for e in day if e.receiver.node_id == r
                                           and e.sender.node_id != r and similar(e.amount_received, event.amount_received)})
    out["g_snd_similar_payees_24h"] = len({e.receiver.node_id for e in day if e.sender.node_id == s
                                           and e.receiver.node_id != s and similar(e.amount_paid, event.amount_paid)})
    month = seen(28 * DAY)
    before_day = [e for e in month if e not in day]
    paid_r_before = {e.sender.node_id for e in before_day if e.receiver.node_id == r}
    paid_by_s_before = {e.receiver.node_id for e in before_day if e.sender.node_id == s}
    out["g_rcv_new_similar_payers_24h"] = len({
        e.sender.node_id for e in day if e.receiver.node_id == r and e.sender.node_id != r
        and e.sender.node_id not in paid_r_before and similar(e.amount_received, event.amount_received)})
    out["g_snd_new_similar_payees_24h"] = len({
        e.receiver.node_id for e in day if e.sender.node_id == s and e.receiver.node_id != s
        and e.receiver.node_id not in paid_by_s_before and similar(e.amount_paid, event.amount_paid)})
    for side, v in (("snd", s), ("rcv", r)):
        mine = [e.timestamp for e in month if v in (e.sender.node_id, e.receiver.node_id)]
        active_days = max(1.0, (t - min(mine)).total_seconds() / 86400) if mine else 1.0
        for d in ("in", "out"):
            daily = out[f"g_{side}_{d}_cp_28d"] / active_days
            out[f"g_{side}_{d}_cp_spike"] = out[f"g_{side}_{d}_cp_24h"] / max(1.0, daily)
    return out


def assert_cycle(got: dict, want: dict, events: list[TransactionEvent], event: TransactionEvent) -> None:
    """``g_cycle_len`` as the brute force finds it, unless an account has more transfers in the
    window than the search follows per account (``CYCLE_FANOUT_CAP``, the most relevant): then the
    search may miss the shortest cycle, but any cycle it reports is real and no shorter."""
    lo = event.timestamp - timedelta(minutes=GRAPH_SHAPE_MINUTES)
    outs = Counter(e.sender.node_id for e in events if lo <= e.timestamp < event.timestamp)
    if max(outs.values(), default=0) <= CYCLE_FANOUT_CAP:
        assert got["g_cycle_len"] == want["g_cycle_len"]
    else:
        assert got["g_cycle_len"] == 0 or got["g_cycle_len"] >= want["g_cycle_len"] > 0


def usd(cents: int) -> Money:
    return Money("US Dollar", cents)


#: Amounts that pass each other on exactly at the bounds (90%, 101%) and just outside them.
PASSING = [100_000, 90_000, 101_000, 89_999, 101_001, 95_000, 99_000, 81_000, 300_000]


@st.composite
def scenario(draw: st.DrawFn, step: int = 720, slots: int = 60, passing: bool = False, min_edges: int = 0):
    names = [f"N{i}" for i in range(draw(st.integers(2, 5 if passing else 7)))]
    pick = st.sampled_from(names)
    # times on a coarse grid (by default 30 days), so windows' edges and shared minutes are hit often
    when = st.integers(0, slots).map(lambda k: k * step)
    # amounts: arbitrary, or (``passing``) mostly a few that pass each other on, so that
    # pass-through chains and scatter-gathers are common
    amount = st.sampled_from(PASSING) if passing else st.one_of(st.integers(1, 10**7), st.sampled_from(PASSING))
    edges = draw(st.lists(st.tuples(pick, pick, when, amount), min_size=min_edges, max_size=30))
    events = [tx(f"e{i:03d}", a, b, m, amount=usd(c)) for i, (a, b, m, c) in enumerate(edges)]
    if events and draw(st.booleans()):
        event = draw(st.sampled_from(events))  # an event already stored (its own minute is not seen)
    else:
        event = tx("new", draw(pick), draw(pick), draw(when), amount=usd(draw(amount)))
    return events, event


@settings(max_examples=150, deadline=None)
@given(scenario(), st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 3000)), max_size=8))
def test_features_match_brute_force_and_later_events_change_nothing(case, later) -> None:
    events, event = case
    store = NetworkxGraphStore()
    store.add_transactions(events)
    got = graph_features(store, event)
    assert list(got) == list(GRAPH_FEATURE_NAMES) and all(isinstance(v, float) for v in got.values())
    want = brute_force(events, event)
    assert_cycle(got, want, events, event)
    ratios = {"g_rcv_in_amt_cv_7d", "g_cycle_len", *(k for k in got if k.endswith("_spike"))}
    assert {k: v for k, v in got.items() if k not in ratios} == {k: float(v) for k, v in want.items() if k not in ratios}
    assert {k: got[k] for k in ratios} == pytest.approx({k: want[k] for k in ratios}, rel=1e-12, abs=1e-12)
    # events at the same minute or later, anywhere in the graph, change nothing
    store.add_transactions([tx(f"late{i}", f"N{a}", f"N{b}", m, t0=event.timestamp) for i, (a, b, m) in enumerate(later)])
    store.add_transactions([tx(f"same{i}", f"N{i}", event.receiver.account, 0, t0=event.timestamp) for i in range(3)])
    assert graph_features(store, event) == got


@settings(max_examples=200, deadline=None)
@given(scenario(step=90, slots=24, passing=True, min_edges=12))
def test_pass_through_features_match_brute_force_on_dense_money_flows(case) -> None:
    # a day and a half, amounts that pass each other on: chains, funding and scatter-gathers
    events, event = case
    store = NetworkxGraphStore()
    store.add_transactions(events)
    got, want = graph_features(store, event), brute_force(events, event)
    for name in ("g_snd_funding_in", "g_up_chain_hops", "g_sg_pass_width", "g_rcv_similar_payers_24h",
                 "g_snd_similar_payees_24h", "g_rcv_new_similar_payers_24h", "g_snd_new_similar_payees_24h",
                 "g_sg_width"):
        assert got[name] == want[name], name
    assert_cycle(got, want, events, event)


def test_every_feature_is_described() -> None:
    assert set(GRAPH_FEATURE_DESCRIPTIONS) == set(GRAPH_FEATURE_NAMES)


def test_planted_shapes() -> None:
    store = NetworkxGraphStore()
    store.add_transactions(
        [
            *cycle(["A", "B", "C", "D"], start=0),  # A->B 0, B->C 1, C->D 2 (D->A closes it)
            *scatter_gather("S", ["M1", "M2", "M3"], "T", start=10),
            *gather_scatter(["P1", "P2"], "H", ["Q1", "Q2", "Q3"], start=20),
        ]
    )
    f = graph_features(store, tx("cy3", "D", "A", 3))
    assert f["g_cycle_len"] == 4 and f["g_two_hop_out"] == 2  # A and B
    # M3 -> T at minute 15 is in the store; as of a transfer in that same minute it is not seen
    f = graph_features(store, tx("sg5", "M3", "T", 15))
    assert f["g_sg_width"] == 3 and f["g_rcv_in_cp_24h"] == 2 and f["g_cycle_len"] == 0
    assert graph_features(store, tx("gs0", "P1", "H", 20))["g_gs_width"] == 0  # nothing gathered yet
    assert graph_features(store, tx("gs4", "H", "Q3", 24))["g_gs_width"] == 2
    f = graph_features(store, tx("self", "A", "A", 5))
    assert f["g_cycle_len"] == 1 and f["g_snd_out_cp_24h"] == 1  # itself is not a payee


def test_pass_through_chains_follow_amounts_and_time() -> None:
    # A -> B -> C -> D -> E -> F, each passing on 97% of what arrived, an hour apart
    names, cents, events = "ABCDEF", 1_000_000, []
    for i, (a, b) in enumerate(zip(names, names[1:])):
        events.append(tx(f"c{i}", a, b, 60 * i, amount=usd(cents)))
        cents = cents * 97 // 100
    store = NetworkxGraphStore()
    store.add_transactions(events)
    f = graph_features(store, tx("next", "F", "G", 400, amount=usd(cents)))
    assert f["g_up_chain_hops"] == 4 and f["g_snd_funding_in"] == 1  # five hops back, capped at four
    assert graph_features(store, tx("c2", "C", "D", 120, amount=usd(940_900)))["g_up_chain_hops"] == 2
    # too little passed on (85%), too much (102%), or more than 24 hours later: no chain
    last = usd_cents(events[-1].amount_paid)  # what reached F
    for amount, minute in ((last * 85 // 100, 400), (last * 102 // 100, 400), (cents, 60 * 4 + 24 * 60 + 1)):
        f = graph_features(store, tx("x", "F", "G", minute, amount=usd(amount)))
        assert f["g_up_chain_hops"] == 0 and f["g_snd_funding_in"] == 0
    # a chain that broke upstream (Q kept 20%) is as long as its unbroken end
    broken = [tx("b0", "P", "Q", 0, amount=usd(100_000)), tx("b1", "Q", "R", 60, amount=usd(80_000)),
              tx("b2", "R", "S", 120, amount=usd(79_000))]
    store.add_transactions(broken)
    assert graph_features(store, tx("b3", "S", "T", 180, amount=usd(78_000)))["g_up_chain_hops"] == 2


def test_scatter_gather_with_the_money_passed_on() -> None:
    store = NetworkxGraphStore()
    parts = {"M1": 300_000, "M2": 250_000, "M3": 200_000}
    store.add_transactions([tx(f"s{m}", "S", m, i, amount=usd(c)) for i, (m, c) in enumerate(parts.items())])
    store.add_transactions([tx("gM1", "M1", "T", 100, amount=usd(291_000)),   # 97%: passed on
                            tx("gM2", "M2", "T", 110, amount=usd(120_000))])  # 48%: not
    f = graph_features(store, tx("gM3", "M3", "T", 120, amount=usd(196_000)))
    assert f["g_sg_width"] == 3 and f["g_sg_pass_width"] == 2  # M1 and M3 (this transfer)
    late = graph_features(store, tx("gM3", "M3", "T", 2 + 24 * 60 + 1, amount=usd(196_000)))
    assert late["g_sg_pass_width"] == 1  # M3 waited more than 24 hours; M1 still passed it on


def test_a_cycle_closes_only_with_strictly_earlier_money() -> None:
    store = NetworkxGraphStore()
    store.add_transactions([tx("ab", "A", "B", 0), tx("bc", "B", "C", 5), tx("ca", "C", "A", 5)])
    assert graph_features(store, tx("ca", "C", "A", 5))["g_cycle_len"] == 0  # B->C is the same minute
    assert graph_features(store, tx("ca2", "C", "A", 6))["g_cycle_len"] == 3
    assert graph_features(store, tx("ab0", "A", "B", 0))["g_cycle_len"] == 0


def test_counts_saturate_at_the_cap_deterministically() -> None:
    rng = random.Random(3)
    events = [tx(f"h{rng.randrange(10**6):06d}-{i:03d}", "HUB", f"L{i:03d}", rng.randrange(0, 300)) for i in range(60)]
    ev = tx("late", "HUB", "NEW", 600)
    store = NetworkxGraphStore()
    store.add_transactions(events)
    full = graph_features(store, ev)
    assert full["g_snd_out_cp_24h"] == 60
    capped = graph_features(store, ev, neighbor_cap=7)
    assert capped["g_snd_out_cp_24h"] == 7  # the 7 earliest payments
    for order in (sorted(events, key=lambda e: e.event_id), events[::-1]):
        other = NetworkxGraphStore()
        for e in order:
            other.add_transactions([e])
        assert graph_features(other, ev, neighbor_cap=7) == capped


@pytest.mark.parametrize("days", [5, 16])
def test_incremental_equals_batch_on_generated_data(days) -> None:
    # The deep path's view: the graph grows minute by minute and each event is scored before its
    # minute is written; training's view: the full graph at once (graph_feature_rows).
    ds = generate(accounts=120, days=days, laundering_rate=0.02, seed=days)
    events = sorted(ds.events, key=lambda e: (e.timestamp, e.source_offset))[:1500]
    batch = graph_feature_rows(events)
    store = NetworkxGraphStore()
    incremental = []
    for _, group in groupby(events, key=lambda e: e.timestamp):
        group = list(group)
        incremental += [graph_features(store, e) for e in group]
        store.add_transactions(group)
    assert incremental == batch
    assert any(r["g_cycle_len"] >= 2 for r in batch) and any(r["g_sg_width"] >= 2 for r in batch)


def test_a_sudden_fan_in_of_new_payers_stands_out_from_the_accounts_own_rate() -> None:
    # R was paid by one regular payer (P0) every day for 20 days; then, within the 24 hours before
    # the alerted transfer, by P0 once more, by 5 new payers with similar amounts and by 1 new
    # payer with a far larger amount. S, the alerted sender, is new too (its first transfer).
    events = [tx(f"reg{d}", "P0", "R", d * DAY, amount=usd(50_000)) for d in range(20)]
    t = 21 * DAY
    events.append(tx("reg20", "P0", "R", t - 600, amount=usd(50_000)))
    events += [tx(f"new{i}", f"N{i}", "R", t - 500 + 60 * i, amount=usd(90_000 + 10_000 * i)) for i in range(5)]
    events.append(tx("big", "BIG", "R", t - 30, amount=usd(10_000_000)))
    store = NetworkxGraphStore()
    store.add_transactions(events)
    f = graph_features(store, tx("alert", "S", "R", t, amount=usd(100_000)))
    # within a factor 3 of USD 1,000: P0 (USD 500) and the five N (900-1,300); BIG is 100x
    assert f["g_rcv_similar_payers_24h"] == 6
    assert f["g_rcv_new_similar_payers_24h"] == 5  # P0 paid R before the last 24 hours
    # 7 distinct payers in the last 24 hours; 7 in 28 days over 21 days of activity: 1/3 a day
    assert f["g_rcv_in_cp_24h"] == 7 and f["g_rcv_in_cp_28d"] == 7
    assert f["g_rcv_in_cp_spike"] == 7.0  # the daily average is taken as at least one
    assert f["g_snd_out_cp_spike"] == 0.0 and f["g_snd_new_similar_payees_24h"] == 0  # S has no history
    # a shop: the same 30 customers pay R2 every day for 21 days. Its distinct payers do not accumulate,
    # so its rate is 30 over 21 active days and the spike is high; no payer is new
    busy = [tx(f"b{d}_{k}", f"Q{k}", "R2", d * DAY + k, amount=usd(50_000)) for d in range(21) for k in range(30)]
    store.add_transactions(busy)
    f = graph_features(store, tx("alert2", "S", "R2", t, amount=usd(50_000)))
    assert f["g_rcv_in_cp_24h"] == 30 and f["g_rcv_in_cp_28d"] == 30
    assert f["g_rcv_in_cp_spike"] == pytest.approx(21.0)  # 30 / (30 distinct / 21 active days)
    assert f["g_rcv_new_similar_payers_24h"] == 0 and f["g_rcv_similar_payers_24h"] == 30
    # a merchant: 10 one-off customers a day for 21 days, as many distinct payers a day as in its last 24 hours
    merchant = [tx(f"m{d}_{k}", f"C{d}_{k}", "R3", d * DAY + 60 * k, amount=usd(50_000))
                for d in range(21) for k in range(10)]
    store.add_transactions(merchant)
    f = graph_features(store, tx("alert3", "S", "R3", t, amount=usd(50_000)))
    assert f["g_rcv_in_cp_24h"] == 10 and f["g_rcv_in_cp_28d"] == 210 and f["g_rcv_in_cp_spike"] == pytest.approx(1.0)
    assert f["g_rcv_new_similar_payers_24h"] == 10  # every customer is new: the spike tells this one apart


# ------------------------------------------------------------ the one-hop family, kept incrementally


def account_rows(events: list[TransactionEvent], event: TransactionEvent, **kw) -> dict:
    """``event``'s row from :class:`AccountFeatures` fed the events (and ``event``) in time order."""
    feed = sorted({e.event_id: e for e in [*events, event]}.values(), key=lambda e: (e.timestamp, e.event_id))
    rows = AccountFeatures(**kw).rows(feed)
    return rows[[e.event_id for e in feed].index(event.event_id)]


@settings(max_examples=150, deadline=None)
@given(scenario())
def test_account_features_match_brute_force(case) -> None:
    events, event = case
    if event.event_id != "new":  # a stored event: its row is the one it gets where it stands
        event = next(e for e in events if e.event_id == event.event_id)
    got, want = account_rows(events, event), brute_force(events, event)
    assert list(got) == list(ONE_HOP_GRAPH_FEATURES)
    ratios = {"g_rcv_in_amt_cv_7d", *(k for k in got if k.endswith("_spike"))}
    assert {k: v for k, v in got.items() if k not in ratios} == {k: float(want[k]) for k in got if k not in ratios}
    assert {k: got[k] for k in ratios} == pytest.approx({k: want[k] for k in ratios}, rel=1e-12, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(scenario(step=90, slots=24, passing=True, min_edges=12))
def test_account_features_match_brute_force_on_dense_money_flows(case) -> None:
    events, event = case
    got, want = account_rows(events, event), brute_force(events, event)
    for name in (
        "g_snd_funding_in",
        "g_gs_width",
        "g_rcv_similar_payers_24h",
        "g_snd_similar_payees_24h",
        "g_rcv_new_similar_payers_24h",
        "g_snd_new_similar_payees_24h",
        "g_snd_in_usd_7d",
    ):
        assert got[name] == want[name], name


@pytest.mark.parametrize(("profile", "cap"), [("default", GRAPH_FEATURE_NEIGHBOR_CAP), ("default", 6), ("slow", 12)])
def test_account_features_equal_the_stores_on_generated_data(profile, cap) -> None:
    # 35 days, so the 28-day windows fill; a small cap makes busy accounts saturate (earliest first)
    ds = generate(accounts=80, days=35, laundering_rate=0.02, seed=11, profile=profile)
    events = sorted(ds.events, key=lambda e: (e.timestamp, e.source_offset))
    rows = AccountFeatures(neighbor_cap=cap).rows(events)
    store = NetworkxGraphStore()
    store.add_transactions(events)  # the whole graph: a feature sees only strictly earlier minutes
    picked = sorted(random.Random(cap).sample(range(len(events)), 250)) + list(range(len(events) - 50, len(events)))
    for i in picked:
        want = graph_features(store, events[i], neighbor_cap=cap)
        assert rows[i] == {k: want[k] for k in ONE_HOP_GRAPH_FEATURES}, events[i].event_id
    busiest = max(max(r["g_rcv_in_cp_28d"], r["g_snd_out_cp_28d"]) for r in rows)
    assert busiest == cap if cap < 20 else busiest >= 20  # a small cap saturates; the big one is not reached


def test_account_features_carry_over_calls_and_refuse_an_earlier_transfer() -> None:
    events = [tx(f"e{i}", f"N{i % 3}", f"N{(i + 1) % 4}", 30 * i) for i in range(12)]
    whole = AccountFeatures().rows(events)
    parts = AccountFeatures()
    assert parts.rows(events[:5]) + parts.rows(events[5:]) == whole
    assert whole[11]["g_rcv_in_cp_24h"] > 0
    with pytest.raises(ValueError, match=r"^timestamp=2022-09-01T00:00:00: earlier than a transfer already fed"):
        parts.rows([events[0]])
    with pytest.raises(ValueError, match="neighbor_cap=0"):
        AccountFeatures(neighbor_cap=0)


def test_the_graph_features_split_into_one_hop_and_multi_hop() -> None:
    assert set(ONE_HOP_GRAPH_FEATURES).isdisjoint(MULTI_HOP_GRAPH_FEATURES)
    assert sorted(ONE_HOP_GRAPH_FEATURES + MULTI_HOP_GRAPH_FEATURES) == sorted(GRAPH_FEATURE_NAMES)
    assert "g_cycle_len" in MULTI_HOP_GRAPH_FEATURES and "g_gs_width" in ONE_HOP_GRAPH_FEATURES


def test_account_feature_rows_read_the_stores_history_and_the_events_themselves() -> None:
    # the deep path's view: a store holding earlier days (and perhaps the run's events), the run's
    # events given in any order; each row is graph_features' one-hop part over the whole graph
    ds = generate(accounts=60, days=33, laundering_rate=0.02, seed=4)
    events = sorted(ds.events, key=lambda e: (e.timestamp, e.source_offset))
    cut = next(i for i, e in enumerate(events) if e.timestamp >= events[0].timestamp + timedelta(days=30))
    history, run = events[:cut], events[cut:]
    whole = NetworkxGraphStore()
    whole.add_transactions(events)
    want = [{k: graph_features(whole, e)[k] for k in ONE_HOP_GRAPH_FEATURES} for e in run]
    shuffled = list(range(len(run)))
    random.Random(1).shuffle(shuffled)
    only_history = NetworkxGraphStore()
    only_history.add_transactions(history)
    for store in (whole, only_history):
        got = account_feature_rows([run[i] for i in shuffled], store)
        assert got == [want[i] for i in shuffled]
    assert any(w["g_snd_out_cp_28d"] > 5 for w in want)  # the history counts
    # without the store, the run's own events only
    alone = NetworkxGraphStore()
    alone.add_transactions(run)
    assert account_feature_rows(run) == [{k: graph_features(alone, e)[k] for k in ONE_HOP_GRAPH_FEATURES} for e in run]
    assert account_feature_rows([]) == []
