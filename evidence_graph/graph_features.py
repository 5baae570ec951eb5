"""Graph features of one transaction: the shape of the money flow around its two accounts.

The graph an event sees is the store's edges inside ``[event time - window, event time]``
(inclusive) **plus the event itself** (whether or not it is stored yet), so a feature vector is
the same when computed before or after the event is written, and later edges never leak in.

Counterparties never include the account itself (self-transfers are not counterparties). Work is
bounded on hubs: each account contributes at most ``neighbor_cap`` edges (default 200) in cap
order (earliest first, then event id), so on hubs the counts saturate, deterministically.

The cycle feature follows the money: it is the shared temporal search
(:func:`~evidence_graph.follow.follow_money`) from the receiver, so the path back to the sender
is in time order inside the window (at most ``neighbor_cap`` transfers per account and hop, the
most relevant; the search's node and edge budgets, no clock).

>>> from datetime import datetime
>>> from auditflow.money import Money
>>> from auditflow.records import AccountRef, TransactionEvent
>>> from evidence_graph.embedded import NetworkxGraphStore
>>> def tx(i, a, b):
...     return TransactionEvent(f"t{i}", datetime(2022, 9, 1, 0, i), AccountRef("1", a),
...         AccountRef("1", b), Money("Euro", 100), Money("Euro", 100), "Wire", False, i)
>>> store = NetworkxGraphStore()
>>> _ = store.add_transactions([tx(1, "A", "B"), tx(2, "B", "C")])
>>> f = graph_features(store, tx(3, "C", "A"))
>>> f["g_cycle_len"], f["g_snd_in_degree"], f["g_two_hop_out"]
(3.0, 1.0, 2.0)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from auditflow.features import GRAPH_FEATURE_DESCRIPTIONS, GRAPH_FEATURE_NAMES
from auditflow.limits import CYCLE_MAX_PATH_HOPS, DEFAULT_WINDOW_MINUTES, GRAPH_FEATURE_NEIGHBOR_CAP
from auditflow.records import TransactionEvent
from evidence_graph.follow import Budget, follow_money
from evidence_graph.store import Direction, GraphEdge, GraphStore

FEATURE_NEIGHBOR_CAP = GRAPH_FEATURE_NEIGHBOR_CAP
#: Model inputs must not depend on the machine's speed: the cycle search has no clock budget.
FEATURE_BUDGET = Budget(max_seconds=None)

class _WindowView:
    """The event's view of the graph: windowed, capped, with the event itself merged in."""

    def __init__(self, store: GraphStore, event: TransactionEvent, start: datetime, cap: int):
        self.store = store
        self.me = GraphEdge.from_event(event)
        self.start = start
        self.end = event.timestamp
        self.cap = cap

    def counterparties(self, frontier: Sequence[str], direction: Direction) -> dict[str, set[str]]:
        """Per frontier node, its distinct counterparties in ``direction`` (itself excluded)."""
        if not frontier:
            return {}
        batch = self.store.neighbors_batch(frontier, direction, self.start, self.end, self.cap)
        me = self.me
        out: dict[str, set[str]] = {}
        for node in frontier:
            edges = batch.get(node, ())
            others = {e.dst if direction == "out" else e.src for e in edges}
            if (direction == "out" and me.src == node) or (direction == "in" and me.dst == node):
                others.add(me.dst if direction == "out" else me.src)
            others.discard(node)
            out[node] = others
        return out


def _cycle_path_hops(view: _WindowView, source: str, target: str, max_hops: int) -> int:
    """Hops of the shortest time-ordered path ``source -> target`` in the window (at most
    ``max_hops``), else 0: the shared search, followed downstream from ``source``."""
    flow = follow_money(view.store, source, "out", max_hops=max_hops, start=view.start, end=view.end,
                        hop_horizon=None, fanout_cap=view.cap, hub_degree=None, budget=FEATURE_BUDGET,
                        stop_at=target)
    reached = flow.nodes.get(target)
    return reached.hop_depth if reached is not None else 0


def _gs_width(payers: set[str], payees: set[str]) -> int:
    return min(len(payers), len(payees)) if len(payers) >= 2 and len(payees) >= 2 else 0


def graph_features(
    store: GraphStore,
    event: TransactionEvent,
    window_minutes: int = DEFAULT_WINDOW_MINUTES,
    neighbor_cap: int = FEATURE_NEIGHBOR_CAP,
) -> dict[str, float]:
    """The :data:`GRAPH_FEATURE_NAMES` features of ``event`` (see :data:`GRAPH_FEATURE_DESCRIPTIONS`)."""
    if window_minutes < 0:
        raise ValueError(f"window_minutes={window_minutes!r}: expected >= 0")
    if neighbor_cap < 1:
        raise ValueError(f"neighbor_cap={neighbor_cap!r}: expected a positive int")
    view = _WindowView(store, event, event.timestamp - timedelta(minutes=window_minutes), neighbor_cap)
    snd, rcv = event.sender.node_id, event.receiver.node_id
    ends = sorted({snd, rcv})
    outs = view.counterparties(ends, "out")
    ins = view.counterparties(ends, "in")

    if snd == rcv:
        cycle_len = 1
    else:
        path = _cycle_path_hops(view, rcv, snd, CYCLE_MAX_PATH_HOPS)
        cycle_len = path + 1 if path else 0

    # scatter-gather: sources s -> intermediate m -> receiver
    intermediates = sorted(ins[rcv])
    per_source: Counter[str] = Counter()
    for sources in view.counterparties(intermediates, "in").values():
        for s in sources:
            if s != rcv:
                per_source[s] += 1
    sg_width = max(per_source.values(), default=0)

    gs_width = max(_gs_width(ins[snd], outs[snd]), _gs_width(ins[rcv], outs[rcv]))

    first = outs[snd]
    reach = set(first)
    for payees in view.counterparties(sorted(first), "out").values():
        reach |= payees
    reach.discard(snd)

    values = {
        "g_snd_out_degree": len(outs[snd]),
        "g_rcv_in_degree": len(ins[rcv]),
        "g_snd_in_degree": len(ins[snd]),
        "g_rcv_out_degree": len(outs[rcv]),
        "g_cycle_len": cycle_len,
        "g_sg_width": sg_width,
        "g_gs_width": gs_width,
        "g_two_hop_out": len(reach),
    }
    return {name: float(values[name]) for name in GRAPH_FEATURE_NAMES}
