"""Graph features of one transfer "as of" it: the shape of the money flow around its two accounts
in the graph of **strictly earlier minutes** (events of the transfer's own minute are not seen,
nor anything later), plus the transfer itself.

So a feature never changes when later events are added, and computing features while the graph
grows (the deep path: the stream writes each event as it comes) gives exactly what the full graph
gives (training, in batch: :func:`graph_feature_rows`). Names, windows and meaning are defined once
in :mod:`auditflow.features` (:data:`GRAPH_FEATURE_NAMES`, :data:`GRAPH_FEATURE_DESCRIPTIONS`), in
the spirit of the public Graph Feature Preprocessor (fan-in/out per window, temporal cycles,
scatter-gather, gather-scatter, neighbourhood amounts):

* degrees: distinct payees and payers of sender and receiver in each of :data:`GRAPH_WINDOWS`
  (24 h, 7 d, 28 d before), and how many of the last 7 days' are new (none in the 21 days before);
* ``g_cycle_len``: the shortest temporal cycle the transfer closes, from the shared temporal search
  (:func:`~evidence_graph.follow.follow_money` downstream from the receiver, stopping at the
  sender: money only moves forward in time along the path; per account and hop the 5 most
  relevant transfers, at most 100 accounts, hubs of more than 200 not expanded);
* ``g_sg_width`` / ``g_gs_width``: scatter-gather closed at the receiver (a source paid several
  intermediates, each before it paid the receiver; the sender, paying now, is one) and
  gather-scatter through the sender (payers, then payees after its first receipt);
* pass-through (:func:`auditflow.typologies.passes_on`: 90% to 101% of what arrived, within 24
  hours), the step of every layering shape, which the shapes above do not check:
  ``g_snd_funding_in`` (the sender's receipts this transfer passes on), ``g_up_chain_hops`` (the
  longest chain of such transfers ending in this one, at most 4 hops back) and
  ``g_sg_pass_width`` (a scatter-gather whose intermediates each passed the source's money on);
* similar amounts (within a factor 3, the typologies' split ratio): distinct payers of the
  receiver and payees of the sender in the 24 hours before (a fan being assembled), and how many
  of them are new (no transfer with the account in the 27 days before those 24 hours);
* departures from the account's own rate (``g_*_cp_spike``): distinct counterparties in the 24
  hours before over the distinct counterparties of the 28 days before per day of activity there
  (from the account's first transfer in those 28 days, at least one day; the rate at least 1).
  A merchant whose one-off customers accumulate day after day stays near 1; a person suddenly
  paid by a dozen accounts does not. So does a shop paid by the same regulars every day (its
  distinct payers do not accumulate): regulars are told apart by the "new" counts above;
* neighbourhood amounts in US dollars (exact cents summed as integers).

Windows are inclusive at the start: ``[t - W, t - 1 minute]``. Each account contributes at most
``neighbor_cap`` edges per query (default :data:`~auditflow.limits.GRAPH_FEATURE_NEIGHBOR_CAP`; earliest
first: on very busy accounts the counts saturate, deterministically).

>>> from datetime import datetime
>>> from auditflow.money import Money
>>> from auditflow.records import AccountRef, TransactionEvent
>>> from evidence_graph.embedded import NetworkxGraphStore
>>> def tx(i, a, b):
...     return TransactionEvent(f"t{i}", datetime(2022, 9, 1, 0, i), AccountRef("1", a),
...         AccountRef("1", b), Money("Euro", 100), Money("Euro", 100), "Wire", False, i)
>>> store = NetworkxGraphStore()
>>> _ = store.add_transactions([tx(1, "A", "B"), tx(2, "B", "C"), tx(3, "C", "A")])
>>> f = graph_features(store, tx(3, "C", "A"))   # its own minute is not seen: the store's copy neither
>>> f["g_cycle_len"], f["g_snd_in_cp_24h"], f["g_two_hop_out"]
(3.0, 1.0, 2.0)
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from functools import lru_cache
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from auditflow.features import (
    GRAPH_CYCLE_MAX_HOPS,
    GRAPH_FEATURE_DESCRIPTIONS,
    GRAPH_FEATURE_NAMES,
    GRAPH_SHAPE_MINUTES,
    GRAPH_WINDOWS,
)
from auditflow.limits import DEFAULT_HUB_DEGREE, DEFAULT_WINDOW_MINUTES, GRAPH_FEATURE_NEIGHBOR_CAP, LONG_WINDOW_MINUTES
from auditflow.money import usd_cents
from auditflow.records import TransactionEvent
from auditflow.typologies import AMOUNT_TOLERANCE_PERCENT, HOP_HORIZON, MAX_FEE_PERCENT, comparable, passes_on
from evidence_graph.follow import Budget, follow_money
from evidence_graph.store import GraphEdge, GraphStore

__all__ = ["GRAPH_FEATURE_DESCRIPTIONS", "GRAPH_FEATURE_NAMES", "graph_feature_rows", "graph_features"]

#: Model inputs must not depend on the machine's speed: the cycle search has no clock budget.
#: The cycle search follows, per account and hop, the 5 most relevant transfers (amount
#: discounted by delay, :func:`~evidence_graph.follow.follow_money`), reaches at most 100 accounts
#: and does not expand hubs (:data:`~auditflow.limits.DEFAULT_HUB_DEGREE`, the traces' bound): the
#: bulk of the money, at a bounded cost per transfer.
FEATURE_BUDGET = Budget(max_nodes=100, max_edges=400, max_seconds=None)
CYCLE_FANOUT_CAP = 5
#: Chains of pass-through transfers followed per level by ``g_up_chain_hops`` (bounded cost on hubs).
CHAIN_FRONTIER = 50
_cents = lru_cache(maxsize=1 << 18)(usd_cents)  # Money is immutable: its cents never change
_MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)
_LONGEST = max(m for _, m in GRAPH_WINDOWS)
#: "New" in the 7-day window: not seen in the 21 days before it, so 28 days back in all (minutes).
NEW_LOOKBACK_MINUTES = 28 * 24 * 60
_SHAPE = GRAPH_SHAPE_MINUTES


def _others(edges: Iterable[GraphEdge], node: str, direction: str, lo: datetime) -> set[str]:
    out = {e.dst if direction == "out" else e.src for e in edges if e.timestamp >= lo}
    out.discard(node)
    return out


def graph_features(
    store: GraphStore,
    event: TransactionEvent,
    window_minutes: int | None = None,
    neighbor_cap: int = GRAPH_FEATURE_NEIGHBOR_CAP,
) -> dict[str, float]:
    """The :data:`GRAPH_FEATURE_NAMES` of ``event`` as of it (see the module docstring).

    ``window_minutes`` (default :data:`GRAPH_SHAPE_MINUTES`, 7 days) is the window of the shape
    and amount features; the degree windows are fixed (:data:`GRAPH_WINDOWS`)."""
    shape = _SHAPE if window_minutes is None else window_minutes
    if shape < 1:
        raise ValueError(f"window_minutes={window_minutes!r}: expected >= 1")
    if neighbor_cap < 1:
        raise ValueError(f"neighbor_cap={neighbor_cap!r}: expected a positive int")
    t = event.timestamp
    end = t - _MINUTE  # strictly earlier minutes only
    snd, rcv = event.sender.node_id, event.receiver.node_id
    ends = sorted({snd, rcv})
    longest = max(_LONGEST, NEW_LOOKBACK_MINUTES, shape)
    start_all = t - timedelta(minutes=longest)
    outs = store.neighbors_batch(ends, "out", start_all, end, neighbor_cap)
    ins = store.neighbors_batch(ends, "in", start_all, end, neighbor_cap)
    v: dict[str, float] = {}
    for s, minutes in GRAPH_WINDOWS:
        lo = t - timedelta(minutes=minutes)
        v[f"g_snd_out_cp_{s}"] = len(_others(outs[snd], snd, "out", lo))
        v[f"g_snd_in_cp_{s}"] = len(_others(ins[snd], snd, "in", lo))
        v[f"g_rcv_in_cp_{s}"] = len(_others(ins[rcv], rcv, "in", lo))
        v[f"g_rcv_out_cp_{s}"] = len(_others(outs[rcv], rcv, "out", lo))
    week, before = t - timedelta(minutes=LONG_WINDOW_MINUTES), t - timedelta(minutes=NEW_LOOKBACK_MINUTES)
    old_payers = {e.src for e in ins[rcv] if before <= e.timestamp < week}
    old_payees = {e.dst for e in outs[snd] if before <= e.timestamp < week}
    v["g_rcv_new_payers_7d"] = len(_others(ins[rcv], rcv, "in", week) - old_payers)
    v["g_snd_new_payees_7d"] = len(_others(outs[snd], snd, "out", week) - old_payees)

    lo = t - timedelta(minutes=shape)
    # temporal cycle closed by this transfer: receiver -> ... -> sender, time-ordered, then sender -> receiver
    if snd == rcv:
        cycle = 1
    else:
        flow = follow_money(store, rcv, "out", max_hops=GRAPH_CYCLE_MAX_HOPS - 1, start=lo, end=end,
                            hop_horizon=None, fanout_cap=min(neighbor_cap, CYCLE_FANOUT_CAP),
                            hub_degree=DEFAULT_HUB_DEGREE, budget=FEATURE_BUDGET,
                            stop_at=snd)
        reached = flow.nodes.get(snd)
        cycle = reached.hop_depth + 1 if reached is not None else 0
    v["g_cycle_len"] = cycle

    # scatter-gather into the receiver: source x -> m (before m paid the receiver) -> receiver;
    # with pass-through: m paid on, within the horizon, what x paid it
    pays: dict[str, list[tuple[datetime, int]]] = defaultdict(list)  # m -> its payments to the receiver
    for e in ins[rcv]:
        if e.timestamp >= lo and e.src != rcv:
            pays[e.src].append((e.timestamp, e.paid_cents))
    paid = _cents(event.amount_paid)
    if snd != rcv:
        pays[snd].append((t, paid))
    for p in pays.values():
        p.sort()
    last_pay = {m: p[-1][0] for m, p in pays.items()}
    mids = sorted(pays)
    per_source: dict[str, set[str]] = defaultdict(set)
    passed: dict[str, set[str]] = {}
    if mids:
        for m, edges in store.neighbors_batch(mids, "in", lo, end, neighbor_cap).items():
            mine = pays[m]
            times: list[datetime] | None = None
            least, most = min(c for _, c in mine), max(c for _, c in mine)
            for e in edges:
                x = e.src
                if x not in (m, rcv) and e.timestamp <= last_pay[m] and (m != snd or e.timestamp < t):
                    per_source[x].add(m)
                    got_x = passed.get(x)
                    if got_x is not None and m in got_x:
                        continue
                    arrived = e.paid_cents
                    if (100 * least > arrived * (100 + AMOUNT_TOLERANCE_PERCENT)
                            or 100 * most < arrived * (100 - MAX_FEE_PERCENT)):
                        continue  # no payment of m to the receiver is in the pass-through band
                    if times is None:
                        times = [when for when, _ in mine]
                    for i in range(bisect_left(times, e.timestamp), len(times)):
                        if mine[i][0] > e.timestamp + HOP_HORIZON:
                            break
                        if passes_on(arrived, mine[i][1]):
                            passed.setdefault(x, set()).add(m)
                            break
    v["g_sg_width"] = max((len(ms) for ms in per_source.values()), default=0)
    v["g_sg_pass_width"] = max((len(ms) for ms in passed.values()), default=0)

    # gather-scatter through the sender: payers in the window, payees after its first receipt
    gathered = [e for e in ins[snd] if e.timestamp >= lo and e.src != snd]
    if gathered:
        first_in = min(e.timestamp for e in gathered)
        payers = {e.src for e in gathered}
        payees = {e.dst for e in outs[snd] if e.timestamp >= first_in and e.dst != snd}
        if rcv != snd:
            payees.add(rcv)
        v["g_gs_width"] = min(len(payers), len(payees)) if len(payers) >= 2 and len(payees) >= 2 else 0
    else:
        v["g_gs_width"] = 0

    first = _others(outs[snd], snd, "out", lo) | ({rcv} - {snd})
    reach = set(first)
    if first:
        for edges in store.neighbors_batch(sorted(first), "out", lo, end, neighbor_cap).values():
            reach |= {e.dst for e in edges}
    reach.discard(snd)
    v["g_two_hop_out"] = len(reach)

    # pass-through (:func:`auditflow.typologies.passes_on`): money that arrived shortly before and
    # leaves again, nearly whole -- the step of every layering shape
    recent = t - HOP_HORIZON
    v["g_snd_funding_in"] = sum(1 for e in ins[snd] if e.timestamp >= recent and e.src != snd
                                and passes_on(e.paid_cents, paid)) if snd != rcv else 0
    v["g_up_chain_hops"] = _pass_chain_hops(store, snd, t, paid, lo, end, neighbor_cap) if snd != rcv else 0
    day = t - timedelta(minutes=DEFAULT_WINDOW_MINUTES)
    got = _cents(event.amount_received)
    similar_payers = {e.src for e in ins[rcv] if e.timestamp >= day and e.src != rcv
                      and comparable((e.received_cents, got))}
    similar_payees = {e.dst for e in outs[snd] if e.timestamp >= day and e.dst != snd
                      and comparable((e.paid_cents, paid))}
    v["g_rcv_similar_payers_24h"] = len(similar_payers)
    v["g_snd_similar_payees_24h"] = len(similar_payees)
    # ... of which new: no transfer with the account in the 28 days before, except in the last 24 hours
    v["g_rcv_new_similar_payers_24h"] = len(similar_payers - {e.src for e in ins[rcv] if e.timestamp < day})
    v["g_snd_new_similar_payees_24h"] = len(similar_payees - {e.dst for e in outs[snd] if e.timestamp < day})
    # departures from the account's own rate: distinct counterparties in the 24 hours before over those
    # of the 28 days before per day of activity (from its first transfer there)
    for side, node in (("snd", snd), ("rcv", rcv)):
        history = _history_days(ins[node], outs[node], t)
        for d in ("in", "out"):
            per_day = v[f"g_{side}_{d}_cp_28d"] / history
            v[f"g_{side}_{d}_cp_spike"] = v[f"g_{side}_{d}_cp_24h"] / max(1.0, per_day)

    snd_in = sum(e.received_cents for e in gathered)
    v["g_snd_in_usd_7d"] = float(snd_in) / 100.0
    v["g_fwd_share_7d"] = float(paid) / float(snd_in) if snd_in > 0 else -1.0
    rcv_amounts = [e.received_cents for e in ins[rcv] if e.timestamp >= lo and e.src != rcv]
    v["g_rcv_in_usd_7d"] = float(sum(rcv_amounts)) / 100.0
    v["g_rcv_in_amt_cv_7d"] = (amount_cv([*rcv_amounts, _cents(event.amount_received)]) if snd != rcv
                               else amount_cv(rcv_amounts))
    return {name: float(v[name]) for name in GRAPH_FEATURE_NAMES}


def _pass_chain_hops(store: GraphStore, payer: str, t: datetime, paid: int, lo: datetime, end: datetime,
                     neighbor_cap: int) -> int:
    """The longest chain of pass-through transfers (:func:`auditflow.typologies.passes_on`, each
    within :data:`~auditflow.typologies.HOP_HORIZON` of the next, no account twice) that ends by
    paying ``payer`` and that this transfer (``paid`` US cents at ``t``) passes on, in transfers,
    at most :data:`GRAPH_CYCLE_MAX_HOPS` - 1; only transfers in ``[lo, end]``.

    Level by level over chains, not accounts; a level keeps at most :data:`CHAIN_FRONTIER` chains
    (the latest first, then by event id). Not the shared temporal search
    (:func:`~evidence_graph.follow.follow_money`), which answers another question:

    * it judges an account's inflows together, as parts of one sum (their running total within
      what the account sent on: ``amount_tolerance``), or each from below only (``min_share``);
      here each inflow is an alternative source of the money, judged alone by both bounds of
      ``passes_on``. With the band as ``min_share`` and ``amount_tolerance`` it keeps only the
      latest of two pass-through inflows and misses a longer chain through the earlier one (fewer
      hops for 3 of the 207 transfers with a chain in ``generate(accounts=300, days=3, seed=5)``);
    * it keeps one time and one amount per account (its fewest hops), where chains through the
      same account each carry their own."""
    # a chain: (account its money came into, the time it arrived, cents that arrived, accounts on it)
    frontier = [(payer, t, paid, frozenset((payer,)))]
    hops = 0
    while frontier and hops < GRAPH_CYCLE_MAX_HOPS - 1:
        accounts = sorted({a for a, _, _, _ in frontier})
        got = store.neighbors_batch(accounts, "in", lo, end, neighbor_cap)
        nxt = []
        for acc, at, left, seen in frontier:
            for e in got.get(acc, ()):
                arrived = e.paid_cents
                if (e.src not in seen and at - HOP_HORIZON <= e.timestamp <= at and (hops > 0 or e.timestamp < t)
                        and passes_on(arrived, left)):
                    nxt.append((e.timestamp, e.event_id, e.src, arrived, seen | {e.src}))
        if not nxt:
            break
        hops += 1
        nxt.sort(key=lambda c: c[1])
        nxt.sort(key=lambda c: c[0], reverse=True)  # the latest first, ties by event id
        frontier = [(src, when, arrived, seen) for when, _, src, arrived, seen in nxt[:CHAIN_FRONTIER]]
    return hops


def _history_days(ins: Sequence[GraphEdge], outs: Sequence[GraphEdge], t: datetime) -> float:
    """Days from the account's first transfer in the lookback (28 days) to ``t``, at least one."""
    first = min((e.timestamp for e in (*ins[:1], *outs[:1])), default=t)  # each list is earliest first
    return max(1.0, (t - first) / _DAY)


def amount_cv(cents: Sequence[int]) -> float:
    """Coefficient of variation (population standard deviation / mean), 0.0 under two amounts."""
    n = len(cents)
    total = sum(cents)
    if n < 2 or total <= 0:
        return 0.0
    # exact integer moments: n * sum(x^2) - (sum x)^2 = n^2 * variance
    var_n2 = n * sum(c * c for c in cents) - total * total
    return math.sqrt(max(0, var_n2)) / total


def graph_feature_rows(
    events: Sequence[TransactionEvent],
    store: GraphStore | None = None,
    *,
    neighbor_cap: int = GRAPH_FEATURE_NEIGHBOR_CAP,
) -> list[Mapping[str, float]]:
    """Graph features of every event, in batch (training): each as of itself against the full graph
    (``store``, else an in-memory graph of ``events``). Identical to computing them while the graph
    grows, since no feature sees its own minute or later."""
    if store is None:
        from evidence_graph.embedded import NetworkxGraphStore

        store = NetworkxGraphStore()
        store.add_transactions(events)
    return [graph_features(store, ev, neighbor_cap=neighbor_cap) for ev in events]
