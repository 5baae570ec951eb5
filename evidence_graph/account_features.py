"""The one-hop graph features, kept as the stream goes: each account's own transfers in and out,
with no graph store and no search.

:func:`evidence_graph.graph_features.graph_features` answers every feature of
:data:`~auditflow.features.GRAPH_FEATURE_NAMES` from a store, a query per account and several
searches per transfer (~200 transfers/s on our generator's dense graph). Most of those features read
only the two accounts' own transfers: their distinct counterparties per window, new payers and
payees, gather-scatter through the sender, the sender's funding, similar amounts, the departures
from the account's own rate and the neighbourhood amounts
(:data:`~auditflow.features.ONE_HOP_GRAPH_FEATURES`). :class:`AccountFeatures` keeps each account's
transfers of the last 28 days in time order, as they come, and computes those features from them
with exactly the rules of ``graph_features``: the same windows ("strictly earlier minutes": a
transfer sees what happened at least a minute before it), the same cap on edges per account
(the earliest ``neighbor_cap`` in the 28 days), the same amounts in US cents. Tested equal to
``graph_features`` on every feature it gives.

The features that search beyond the two accounts (``g_cycle_len``, ``g_sg_width``,
``g_sg_pass_width``, ``g_two_hop_out``, ``g_up_chain_hops``:
:data:`~auditflow.features.MULTI_HOP_GRAPH_FEATURES`) are not here.

>>> from datetime import datetime
>>> from auditflow.money import Money
>>> from auditflow.records import AccountRef, TransactionEvent
>>> def tx(i, a, b, minute):
...     return TransactionEvent(f"t{i}", datetime(2022, 9, 1, 0, minute), AccountRef("1", a),
...         AccountRef("1", b), Money("US Dollar", 100), Money("US Dollar", 100), "Wire", False, i)
>>> rows = AccountFeatures().rows([tx(1, "A", "B", 0), tx(2, "C", "B", 0), tx(3, "D", "B", 1)])
>>> [r["g_rcv_in_cp_24h"] for r in rows]   # the third sees the first two; they do not see each other
[0.0, 0.0, 2.0]
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Sequence
from datetime import timedelta

from auditflow.features import GRAPH_SHAPE_MINUTES, GRAPH_WINDOWS, ONE_HOP_GRAPH_FEATURES
from auditflow.limits import DEFAULT_WINDOW_MINUTES, GRAPH_FEATURE_NEIGHBOR_CAP, LONG_WINDOW_MINUTES
from auditflow.money import usd_cents
from auditflow.records import TransactionEvent
from auditflow.typologies import HOP_HORIZON, comparable, passes_on
from evidence_graph.graph_features import NEW_LOOKBACK_MINUTES, amount_cv
from evidence_graph.store import GraphEdge, GraphStore, to_micros

__all__ = ["ONE_HOP_GRAPH_FEATURES", "AccountFeatures", "account_feature_rows"]

_MIN = 60_000_000  # a minute in microseconds
_DAY = 24 * 60 * _MIN
#: Where "new" counterparties are looked for (7 days, none in the 21 before), as ``graph_features``
#: does; and the longest look back of any feature here, as ``graph_features`` queries.
_NEW_LOOKBACK = NEW_LOOKBACK_MINUTES * _MIN
_LOOKBACK = max(max(m for _, m in GRAPH_WINDOWS), NEW_LOOKBACK_MINUTES, GRAPH_SHAPE_MINUTES) * _MIN
_WINDOWS = tuple((s, m * _MIN) for s, m in GRAPH_WINDOWS)
_SHAPE = GRAPH_SHAPE_MINUTES * _MIN
_WEEK = LONG_WINDOW_MINUTES * _MIN
_DAY_WINDOW = DEFAULT_WINDOW_MINUTES * _MIN
_HORIZON = HOP_HORIZON // timedelta(microseconds=1)


class _Side:
    """One account's transfers in one direction, in cap order (time, then event id): parallel lists,
    oldest first (``start`` skips what no later transfer can see any more); and, over every transfer
    seen, each counterparty's times and latest time, the latest times also as a sorted list, so that
    "distinct counterparties since ``lo``" is one bisection."""

    __slots__ = ("stamps", "eids", "other", "paid", "received", "start", "latest", "lasts", "times")

    def __init__(self) -> None:
        self.stamps: list[int] = []  # micros
        self.eids: list[str] = []
        self.other: list[str] = []  # the counterparty
        self.paid: list[int] = []  # US cents paid
        self.received: list[int] = []  # US cents received
        self.start = 0
        self.latest: dict[str, int] = {}  # counterparty -> its latest time
        self.lasts: list[int] = []  # the values of ``latest``, sorted
        self.times: dict[str, list[int]] = {}  # counterparty -> its times, sorted

    def add(self, t: int, eid: str, other: str, paid: int, received: int) -> None:
        stamps, eids = self.stamps, self.eids
        i = len(stamps)
        if i and (t < stamps[-1] or (t == stamps[-1] and eid < eids[-1])):  # keep the cap order
            i = bisect_right(stamps, t)
            while i > self.start and stamps[i - 1] == t and eids[i - 1] > eid:
                i -= 1
        for name, value in (("stamps", t), ("eids", eid), ("other", other), ("paid", paid), ("received", received)):
            getattr(self, name).insert(i, value)
        old = self.latest.get(other)
        if old is None or t > old:
            if old is not None:
                del self.lasts[bisect_left(self.lasts, old)]
            insort(self.lasts, t)
            self.latest[other] = t
        insort(self.times.setdefault(other, []), t)

    def view(self, lo: int, cap: int) -> tuple[int, int, bool]:
        """The positions ``[i, j)`` of the earliest ``cap`` transfers at or after ``lo``, and whether
        the cap cut any off."""
        stamps = self.stamps
        self._forget_before(lo)
        i = bisect_left(stamps, lo, self.start)
        n = len(stamps)
        return i, min(n, i + cap), n - i > cap

    def since(self, lo: int, i: int, j: int) -> range:
        """The positions in ``[i, j)`` at or after ``lo``."""
        return range(max(i, bisect_left(self.stamps, lo, i, j)), j)

    def distinct_since(self, node: str, lo: int, i: int, j: int, capped: bool) -> int:
        """Distinct counterparties (``node`` left out) in ``[i, j)`` at or after ``lo``."""
        if capped:
            other = self.other
            found = {other[k] for k in self.since(lo, i, j)}
            found.discard(node)
            return len(found)
        n = len(self.lasts) - bisect_left(self.lasts, lo)
        return n - 1 if self.latest.get(node, -1) >= lo and n else n

    def seen_between(self, other: str, lo: int, hi: int) -> bool:
        """Whether ``other`` has a transfer in ``[lo, hi)`` (uncapped views only)."""
        times = self.times.get(other)
        if not times:
            return False
        k = bisect_left(times, lo)
        return k < len(times) and times[k] < hi

    def _forget_before(self, lo: int) -> None:
        """Drop what is older than ``lo`` once it is half the list (amortised)."""
        i = bisect_left(self.stamps, lo, self.start)
        self.start = i
        if i > 1024 and 2 * i > len(self.stamps):
            for name in ("stamps", "eids", "other", "paid", "received"):
                del getattr(self, name)[:i]
            self.start = 0


_EMPTY = _Side()


class AccountFeatures:
    """:data:`~auditflow.features.ONE_HOP_GRAPH_FEATURES` of each transfer as of it (module
    docstring), kept incrementally: feed transfers in time order with :meth:`rows` (one call or
    many: the state carries over); a transfer earlier than one already fed is refused."""

    def __init__(self, neighbor_cap: int = GRAPH_FEATURE_NEIGHBOR_CAP) -> None:
        if isinstance(neighbor_cap, bool) or not isinstance(neighbor_cap, int) or neighbor_cap < 1:
            raise ValueError(f"neighbor_cap={neighbor_cap!r}: expected a positive int")
        self.cap = neighbor_cap
        self._out: dict[str, _Side] = {}
        self._in: dict[str, _Side] = {}
        self._pending: list[tuple[int, str, str, str, int, int]] = []  # fed, not yet visible
        self._seen: set[str] = set()
        self._last = -(1 << 62)

    def rows(self, events: Iterable[TransactionEvent]) -> list[dict[str, float]]:
        """The features of each event, in the order given (time order, else ``ValueError``). An
        event id fed before is counted once in the graph (as the store keeps it) but still gets
        its row."""
        out = []
        for ev in events:
            t = to_micros(ev.timestamp)
            if t < self._last:
                raise ValueError(
                    f"timestamp={ev.timestamp.isoformat()}: earlier than a transfer already fed "
                    f"({ev.event_id}); feed transfers in time order"
                )
            self._last = t
            self._reveal(t - _MIN)
            paid, got = usd_cents(ev.amount_paid), usd_cents(ev.amount_received)
            out.append(self._features(ev.sender.node_id, ev.receiver.node_id, t, paid, got))
            self._add(t, ev.event_id, ev.sender.node_id, ev.receiver.node_id, paid, got)
        return out

    def add_edges(self, edges: Iterable[GraphEdge]) -> None:
        """Transfers already in a graph (a store's history), any order; each becomes visible a
        minute after its time, as a fed one does. An event id seen before is left out."""
        for e in edges:
            self._add(e.micros, e.event_id, e.src, e.dst, e.paid_cents, e.received_cents)

    def _add(self, t: int, eid: str, src: str, dst: str, paid: int, received: int) -> None:
        if eid in self._seen:
            return
        self._seen.add(eid)
        item = (t, eid, src, dst, paid, received)
        pending = self._pending
        if not pending or item[:2] > pending[-1][:2]:
            pending.append(item)
        else:
            insort(pending, item)

    def _reveal(self, upto: int) -> None:
        """Make visible every fed transfer at or before ``upto`` (one minute before the next)."""
        pending = self._pending
        n = 0
        while n < len(pending) and pending[n][0] <= upto:
            n += 1
        if not n:
            return
        for t, eid, src, dst, paid, received in pending[:n]:
            self._side(self._out, src).add(t, eid, dst, paid, received)
            self._side(self._in, dst).add(t, eid, src, paid, received)
        del pending[:n]

    @staticmethod
    def _side(index: dict[str, _Side], node: str) -> _Side:
        side = index.get(node)
        if side is None:
            side = index[node] = _Side()
        return side

    def _features(self, snd: str, rcv: str, t: int, paid: int, got: int) -> dict[str, float]:
        """The row of a transfer ``snd -> rcv`` at ``t`` of ``paid`` and ``got`` US cents."""
        start_all, cap = t - _LOOKBACK, self.cap
        sides = {  # (side, node): the account's transfers in the lookback, the cap applied
            (way, who): (side, *side.view(start_all, cap))
            for way, who, side in (
                ("out", "snd", self._out.get(snd, _EMPTY)),
                ("in", "snd", self._in.get(snd, _EMPTY)),
                ("in", "rcv", self._in.get(rcv, _EMPTY)),
                ("out", "rcv", self._out.get(rcv, _EMPTY)),
            )
        }
        node = {"snd": snd, "rcv": rcv}
        v: dict[str, float] = {}
        for (way, who), (side, i, j, capped) in sides.items():
            for s, width in _WINDOWS:
                v[f"g_{who}_{way}_cp_{s}"] = side.distinct_since(node[who], t - width, i, j, capped)
        week, before = t - _WEEK, t - _NEW_LOOKBACK
        v["g_rcv_new_payers_7d"] = _new_since(*sides["in", "rcv"], rcv, week, before)
        v["g_snd_new_payees_7d"] = _new_since(*sides["out", "snd"], snd, week, before)

        lo = t - _SHAPE
        s_in, si, sj, s_in_capped = sides["in", "snd"]
        s_out, oi, oj, s_out_capped = sides["out", "snd"]
        r_in, ri, rj, r_in_capped = sides["in", "rcv"]
        # gather-scatter through the sender: its receipts in the window (also its funding), then its payees
        gathered = [k for k in s_in.since(lo, si, sj) if s_in.other[k] != snd]
        if gathered:
            first_in = s_in.stamps[gathered[0]]
            payers = len({s_in.other[k] for k in gathered})
            if s_out_capped:
                payees_set = {s_out.other[k] for k in s_out.since(first_in, oi, oj)}
                payees_set.discard(snd)
                if rcv != snd:
                    payees_set.add(rcv)
                payees = len(payees_set)
            else:
                payees = s_out.distinct_since(snd, first_in, oi, oj, False)
                if rcv != snd and s_out.latest.get(rcv, -1) < first_in:
                    payees += 1
            v["g_gs_width"] = min(payers, payees) if payers >= 2 and payees >= 2 else 0
        else:
            v["g_gs_width"] = 0
        recent = t - _HORIZON
        v["g_snd_funding_in"] = (
            sum(1 for k in s_in.since(recent, si, sj) if s_in.other[k] != snd and passes_on(s_in.paid[k], paid))
            if snd != rcv
            else 0
        )
        day = t - _DAY_WINDOW
        similar_payers = {
            r_in.other[k]
            for k in r_in.since(day, ri, rj)
            if r_in.other[k] != rcv and comparable((r_in.received[k], got))
        }
        similar_payees = {
            s_out.other[k]
            for k in s_out.since(day, oi, oj)
            if s_out.other[k] != snd and comparable((s_out.paid[k], paid))
        }
        v["g_rcv_similar_payers_24h"] = len(similar_payers)
        v["g_snd_similar_payees_24h"] = len(similar_payees)
        v["g_rcv_new_similar_payers_24h"] = _not_seen_before(r_in, ri, rj, r_in_capped, similar_payers, day)
        v["g_snd_new_similar_payees_24h"] = _not_seen_before(s_out, oi, oj, s_out_capped, similar_payees, day)
        for who in ("snd", "rcv"):
            firsts = [side.stamps[i] for way in ("in", "out") for side, i, j, _ in (sides[way, who],) if j > i]
            history = max(1.0, (t - min(firsts, default=t)) / _DAY)
            for d in ("in", "out"):
                per_day = v[f"g_{who}_{d}_cp_28d"] / history
                v[f"g_{who}_{d}_cp_spike"] = v[f"g_{who}_{d}_cp_24h"] / max(1.0, per_day)
        snd_in = sum(s_in.received[k] for k in gathered)
        v["g_snd_in_usd_7d"] = float(snd_in) / 100.0
        v["g_fwd_share_7d"] = float(paid) / float(snd_in) if snd_in > 0 else -1.0
        rcv_amounts = [r_in.received[k] for k in r_in.since(lo, ri, rj) if r_in.other[k] != rcv]
        v["g_rcv_in_usd_7d"] = float(sum(rcv_amounts)) / 100.0
        v["g_rcv_in_amt_cv_7d"] = amount_cv([*rcv_amounts, got]) if snd != rcv else amount_cv(rcv_amounts)
        return {name: float(v[name]) for name in ONE_HOP_GRAPH_FEATURES}


def _new_since(side: _Side, i: int, j: int, capped: bool, node: str, since: int, before: int) -> int:
    """Counterparties (``node`` left out) in ``[i, j)`` since ``since`` that have none in
    ``[before, since)`` there."""
    other = side.other
    recent = {other[k] for k in side.since(since, i, j)}
    recent.discard(node)
    if not recent:
        return 0
    if capped:
        old = {other[k] for k in range(max(i, bisect_left(side.stamps, before, i, j)), j) if side.stamps[k] < since}
        return len(recent - old)
    return sum(1 for c in recent if not side.seen_between(c, before, since))


def _not_seen_before(side: _Side, i: int, j: int, capped: bool, found: set[str], day: int) -> int:
    """How many of ``found`` have no transfer in ``[i, j)`` before ``day``."""
    if not found:
        return 0
    if capped:
        old = {side.other[k] for k in range(i, j) if side.stamps[k] < day}
        return len(found - old)
    lo = side.stamps[i] if j > i else day
    return sum(1 for c in found if not side.seen_between(c, lo, day))


def account_feature_rows(
    events: Sequence[TransactionEvent],
    store: GraphStore | None = None,
    *,
    neighbor_cap: int = GRAPH_FEATURE_NEIGHBOR_CAP,
) -> list[dict[str, float]]:
    """The one-hop features of ``events`` (any order; rows in that order) over the graph of the
    events themselves and, with ``store``, its transfers of the events' accounts in the 28 days
    before the first of them up to the last (the deep path: the history the store holds, and the
    run's own events whether or not the store has them yet). With a store that holds every event,
    each row is :func:`~evidence_graph.graph_features.graph_features`' one-hop part, exactly."""
    if not events:
        return []
    order = sorted(range(len(events)), key=lambda i: (events[i].timestamp, events[i].source_offset, events[i].event_id))
    features = AccountFeatures(neighbor_cap)
    if store is not None:
        first, last = events[order[0]].timestamp, events[order[-1]].timestamp
        accounts = sorted({a for ev in events for a in (ev.sender.node_id, ev.receiver.node_id)})
        lo, hi = first - timedelta(microseconds=_LOOKBACK), last - timedelta(microseconds=_MIN)
        for way in ("out", "in"):
            if hi >= lo:
                for edges in store.neighbors_batch(accounts, way, lo, hi, None).values():
                    features.add_edges(edges)
    rows = features.rows([events[i] for i in order])
    out: list[dict[str, float]] = [{}] * len(events)
    for i, row in zip(order, rows, strict=True):
        out[i] = row
    return out
