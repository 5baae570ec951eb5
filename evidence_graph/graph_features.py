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
* neighbourhood amounts in US dollars (exact cents summed as integers).

Windows are inclusive at the start: ``[t - W, t - 1 minute]``. Each account contributes at most
``neighbor_cap`` edges per query (earliest first: on very busy accounts the counts saturate,
deterministically).

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
from auditflow.limits import DEFAULT_HUB_DEGREE
from auditflow.money import usd_cents
from auditflow.records import TransactionEvent
from evidence_graph.follow import Budget, follow_money
from evidence_graph.store import GraphEdge, GraphStore

__all__ = ["FEATURE_NEIGHBOR_CAP", "GRAPH_FEATURE_DESCRIPTIONS", "GRAPH_FEATURE_NAMES", "graph_feature_rows",
           "graph_features"]

#: Edges each account contributes to one query (earliest first). Generous: degrees over 28 days.
FEATURE_NEIGHBOR_CAP = 2000
#: Model inputs must not depend on the machine's speed: the cycle search has no clock budget.
#: The cycle search follows, per account and hop, the 5 most relevant transfers (amount
#: discounted by delay, :func:`~evidence_graph.follow.follow_money`), reaches at most 100 accounts
#: and does not expand hubs: the bulk of the money, at a bounded cost per transfer.
FEATURE_BUDGET = Budget(max_nodes=100, max_edges=400, max_seconds=None)
CYCLE_FANOUT_CAP = 5
CYCLE_HUB_DEGREE = DEFAULT_HUB_DEGREE
_cents = lru_cache(maxsize=1 << 18)(usd_cents)  # Money is immutable: its cents never change
_MINUTE = timedelta(minutes=1)
_LONGEST = max(m for _, m in GRAPH_WINDOWS)
_NEW_LOOKBACK = 28 * 24 * 60  # "new" in the 7-day window: not seen in the 21 days before it
_SHAPE = GRAPH_SHAPE_MINUTES


def _others(edges: Iterable[GraphEdge], node: str, direction: str, lo: datetime) -> set[str]:
    out = {e.dst if direction == "out" else e.src for e in edges if e.timestamp >= lo}
    out.discard(node)
    return out


def graph_features(
    store: GraphStore,
    event: TransactionEvent,
    window_minutes: int | None = None,
    neighbor_cap: int = FEATURE_NEIGHBOR_CAP,
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
    longest = max(_LONGEST, _NEW_LOOKBACK, shape)
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
    week, before = t - timedelta(days=7), t - timedelta(minutes=_NEW_LOOKBACK)
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
                            hub_degree=CYCLE_HUB_DEGREE, budget=FEATURE_BUDGET,
                            stop_at=snd)
        reached = flow.nodes.get(snd)
        cycle = reached.hop_depth + 1 if reached is not None else 0
    v["g_cycle_len"] = cycle

    # scatter-gather into the receiver: source x -> m (before m paid the receiver) -> receiver
    last_pay: dict[str, datetime] = {}
    for e in ins[rcv]:
        if e.timestamp >= lo and e.src != rcv:
            last_pay[e.src] = max(last_pay.get(e.src, e.timestamp), e.timestamp)
    if snd != rcv:
        last_pay[snd] = t
    mids = sorted(last_pay)
    per_source: dict[str, set[str]] = defaultdict(set)
    if mids:
        for m, edges in store.neighbors_batch(mids, "in", lo, end, neighbor_cap).items():
            for e in edges:
                if e.src not in (m, rcv) and e.timestamp <= last_pay[m] and (m != snd or e.timestamp < t):
                    per_source[e.src].add(m)
    v["g_sg_width"] = max((len(ms) for ms in per_source.values()), default=0)

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

    snd_in = sum(_cents(e.amount_received) for e in gathered)
    v["g_snd_in_usd_7d"] = float(snd_in) / 100.0
    paid = _cents(event.amount_paid)
    v["g_fwd_share_7d"] = float(paid) / float(snd_in) if snd_in > 0 else -1.0
    rcv_amounts = [_cents(e.amount_received) for e in ins[rcv] if e.timestamp >= lo and e.src != rcv]
    v["g_rcv_in_usd_7d"] = float(sum(rcv_amounts)) / 100.0
    v["g_rcv_in_amt_cv_7d"] = _cv([*rcv_amounts, _cents(event.amount_received)]) if snd != rcv else _cv(rcv_amounts)
    return {name: float(v[name]) for name in GRAPH_FEATURE_NAMES}


def _cv(cents: Sequence[int]) -> float:
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
    neighbor_cap: int = FEATURE_NEIGHBOR_CAP,
) -> list[Mapping[str, float]]:
    """Graph features of every event, in batch (training): each as of itself against the full graph
    (``store``, else an in-memory graph of ``events``). Identical to computing them while the graph
    grows, since no feature sees its own minute or later."""
    if store is None:
        from evidence_graph.embedded import NetworkxGraphStore

        store = NetworkxGraphStore()
        store.add_transactions(events)
    return [graph_features(store, ev, neighbor_cap=neighbor_cap) for ev in events]
