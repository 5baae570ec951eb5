"""Multi-hop evidence traces: where the money of an account went (``direction="out"``) or where it
came from (``"in"``), as an :class:`~auditflow.records.EvidenceTrace`.

A trace is :func:`~evidence_graph.follow.follow_money` written down: money only flows forward in
time along each path, each hop within ``hop_horizon`` of the one before, inside ``window``; the
fan-out cap keeps each account's most relevant transfers per hop (largest amounts, soonest after
the money arrived); hubs are reported, not expanded; the global budgets (accounts, transfers, wall
time) stop it, and ``cuts`` records where and why (``truncated`` when anything was cut).

* **Nodes.** Every account reached, at the fewest hops of a time-ordered path (``hop_depth``),
  with ``upstream_ids`` (the accounts one hop closer whose transfer reached it at that depth) and
  ``path``: the event ids of the transfers that explain it, from the root (upstream: to the root).
* **Edges.** Every transfer followed, also those reaching an account already seen (a cycle
  closing on the root, an edge between two accounts at the same depth), once each, with ``hop`` =
  the hop it was first crossed at. Accounts at depth ``max_hops`` are not expanded.
  Edges are always written ``sender -> receiver``.

Nodes are ordered by ``(hop_depth, node_id)``, edges by ``(hop, event_id)``. ``trace_id`` is
:func:`~auditflow.records.trace_id_for` over the root, every parameter and the edge ids, so it does
not depend on the backend. A root the graph does not hold gives a trace of the root alone.

>>> from evidence_graph.embedded import NetworkxGraphStore
>>> t = trace_evidence(NetworkxGraphStore(), "010/A", max_hops=2)
>>> [(n.node_id, n.hop_depth) for n in t.nodes], t.edges, t.truncated
([('010/A', 0)], (), False)
"""

from __future__ import annotations

from datetime import datetime, timedelta
from operator import attrgetter, itemgetter

from auditflow.limits import DEFAULT_FANOUT_CAP, DEFAULT_HUB_DEGREE, MAX_TRACE_HOPS, TRACE_HOP_HORIZON
from auditflow.money import Money, format_amount
from auditflow.records import EvidenceTrace, TraceEdge, TraceNode, trace_id_for, ts_to_wire
from evidence_graph.follow import FLOW_DIRECTIONS, Budget, MoneyFlow, follow_money
from evidence_graph.store import GraphStore, check_window

_MINUTE = timedelta(minutes=1)
_EVENT_ID = attrgetter("event_id")
_NODE_ORDER = attrgetter("hop_depth", "node_id")
_EDGE_ORDER = itemgetter(1)  # by hop; sorted() is stable, so by event id within a hop


def trace_params(
    direction: str,
    max_hops: int,
    fanout_cap: int,
    start: datetime | None,
    end: datetime | None,
    *,
    hop_horizon: timedelta | None = TRACE_HOP_HORIZON,
    amount_tolerance: float | None = None,
    root_amount: Money | None = None,
    hub_degree: int | None = DEFAULT_HUB_DEGREE,
    budget: Budget = Budget(),
) -> dict[str, object]:
    """The parameters a trace id is computed over (backend-independent)."""
    return {
        "direction": direction,
        "max_hops": max_hops,
        "fanout_cap": fanout_cap,
        "window_start": ts_to_wire(start) if start else None,
        "window_end": ts_to_wire(end) if end else None,
        "hop_horizon_minutes": None if hop_horizon is None else int(hop_horizon / _MINUTE),
        "amount_tolerance": None if amount_tolerance is None else str(amount_tolerance),
        "root_amount": None if root_amount is None else f"{format_amount(root_amount)} {root_amount.currency}",
        "hub_degree": hub_degree,
        "max_nodes": budget.max_nodes,
        "max_edges": budget.max_edges,
        "max_seconds": None if budget.max_seconds is None else str(budget.max_seconds),
    }


def trace_evidence(
    store: GraphStore,
    root: str,
    max_hops: int = MAX_TRACE_HOPS,
    direction: str = "out",
    fanout_cap: int = DEFAULT_FANOUT_CAP,
    window: tuple[datetime | None, datetime | None] | None = None,
    *,
    hop_horizon: timedelta | None = TRACE_HOP_HORIZON,
    amount_tolerance: float | None = None,
    root_amount: Money | None = None,
    hub_degree: int | None = DEFAULT_HUB_DEGREE,
    budget: Budget = Budget(),
) -> EvidenceTrace:
    """Trace the money from ``root`` (see the module docstring)."""
    if direction not in FLOW_DIRECTIONS:
        raise ValueError(f"direction={direction!r}: expected one of {', '.join(FLOW_DIRECTIONS)}")
    start, end = window if window is not None else (None, None)
    check_window(start, end)
    flow = follow_money(
        store, root, direction, max_hops=max_hops, start=start, end=end, hop_horizon=hop_horizon,
        fanout_cap=fanout_cap, amount_tolerance=amount_tolerance, root_amount=root_amount,
        hub_degree=hub_degree, budget=budget,
    )
    params = trace_params(direction, max_hops, fanout_cap, start, end, hop_horizon=hop_horizon,
                          amount_tolerance=amount_tolerance, root_amount=root_amount,
                          hub_degree=hub_degree, budget=budget)
    return trace_from_flow(flow, store.backend, max_hops, fanout_cap, start, end, params)


def trace_from_flow(
    flow: MoneyFlow,
    backend: str,
    max_hops: int,
    fanout_cap: int,
    start: datetime | None,
    end: datetime | None,
    params: dict[str, object],
) -> EvidenceTrace:
    """The :class:`EvidenceTrace` record of a search."""
    nodes = tuple([
        TraceNode(r.node_id, r.hop_depth, r.upstream_ids, tuple(map(_EVENT_ID, r.path)))
        for r in sorted(flow.nodes.values(), key=_NODE_ORDER)
    ])
    ids = sorted(flow.edges)
    edges = tuple([
        TraceEdge(e.event_id, e.src, e.dst, e.amount_paid, e.timestamp, hop)
        for e, hop in sorted([flow.edges[i] for i in ids], key=_EDGE_ORDER)
    ])
    return EvidenceTrace(
        trace_id=trace_id_for(flow.root, params, ids),
        root=flow.root,
        direction=flow.direction,
        max_hops=max_hops,
        fanout_cap=fanout_cap,
        window_start=start,
        window_end=end,
        nodes=nodes,
        edges=edges,
        backend=backend,
        truncated=flow.truncated,
        hubs=tuple(sorted(flow.hubs)),
        cuts=tuple(sorted(flow.cuts, key=lambda c: (c.hop, c.node_id, c.reason))),
        params=tuple(sorted(params.items())),
    )
