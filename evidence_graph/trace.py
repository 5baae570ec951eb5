"""Multi-hop evidence traces: one breadth-first search, written once against
:meth:`GraphStore.neighbors_batch`, so every backend gives the same trace.

The search, hop by hop (``hop`` = 1 .. ``max_hops``):

* The *frontier* is the set of accounts first reached at depth ``hop - 1`` (the root at 0).
  All of it is answered by one ``neighbors_batch`` call: per account, its edges in
  ``direction`` inside the window (inclusive bounds).
* **Fan-out cap.** Of each frontier account's edges only the first ``fanout_cap`` in cap order
  (earliest ``timestamp`` first, then ``event_id``) are *kept*; dropping any sets
  ``truncated=True``. The cap counts edges, not counterparties, and depends only on the account's
  own edges, never on the order of the search, so it is deterministic.
* **Nodes.** Every account is reached once, at its shortest depth. A counterparty not yet seen
  gets ``hop_depth = hop`` and ``upstream_ids`` = every frontier account with a kept edge to it
  (sorted).
* **Edges.** A trace includes *every kept edge of every expanded account*: the edges that
  discover new accounts and also the ones that lead back to accounts already seen (a cycle
  closing on the root, an edge between two accounts at the same depth, a self-loop). Each is
  recorded once, with ``hop`` = the depth of the account it was expanded from + 1. Accounts at
  depth ``max_hops`` are not expanded, so their further edges are not included.
* ``direction="in"`` follows edges backwards (who paid this account); ``"both"`` ignores
  direction. Edges are always written ``sender -> receiver``.

Nodes are ordered by ``(hop_depth, node_id)``, edges by ``(hop, event_id)``. ``trace_id`` is
:func:`~auditflow.records.trace_id_for` over the root, the parameters and the edge ids, so it
does not depend on the backend. A root the graph does not hold gives a trace of the root alone.

>>> from evidence_graph.embedded import NetworkxGraphStore
>>> t = trace_evidence(NetworkxGraphStore(), "010/A", max_hops=2)
>>> [(n.node_id, n.hop_depth) for n in t.nodes], t.edges, t.truncated
([('010/A', 0)], (), False)
"""

from __future__ import annotations

from datetime import datetime

from auditflow.limits import DEFAULT_FANOUT_CAP, MAX_TRACE_HOPS
from auditflow.records import EvidenceTrace, TraceEdge, TraceNode, trace_id_for, ts_to_wire
from evidence_graph.store import Direction, GraphStore, check_direction, check_window

MAX_HOPS_LIMIT = MAX_TRACE_HOPS


def trace_params(
    direction: str,
    max_hops: int,
    fanout_cap: int,
    start: datetime | None,
    end: datetime | None,
) -> dict[str, object]:
    """The parameters a trace id is computed over (backend-independent)."""
    return {
        "direction": direction,
        "max_hops": max_hops,
        "fanout_cap": fanout_cap,
        "window_start": ts_to_wire(start) if start else None,
        "window_end": ts_to_wire(end) if end else None,
    }


def trace_evidence(
    store: GraphStore,
    root: str,
    max_hops: int = 5,
    direction: Direction = "out",
    fanout_cap: int = DEFAULT_FANOUT_CAP,
    window: tuple[datetime | None, datetime | None] | None = None,
) -> EvidenceTrace:
    """Trace the accounts within ``max_hops`` of ``root`` (see the module docstring)."""
    if (
        isinstance(max_hops, bool)
        or not isinstance(max_hops, int)
        or not 1 <= max_hops <= MAX_HOPS_LIMIT
    ):
        raise ValueError(f"max_hops={max_hops!r}: expected an int from 1 to {MAX_HOPS_LIMIT}")
    if isinstance(fanout_cap, bool) or not isinstance(fanout_cap, int) or fanout_cap < 1:
        raise ValueError(f"fanout_cap={fanout_cap!r}: expected a positive int")
    check_direction(direction)
    start, end = window if window is not None else (None, None)
    check_window(start, end)

    depth: dict[str, int] = {root: 0}
    upstream: dict[str, set[str]] = {}
    edges: dict[str, TraceEdge] = {}
    truncated = False
    frontier = [root]
    for hop in range(1, max_hops + 1):
        if not frontier:
            break
        # one more than the cap tells whether anything was dropped
        batch = store.neighbors_batch(frontier, direction, start, end, limit=fanout_cap + 1)
        reached: set[str] = set()
        for node in frontier:
            incident = batch.get(node, ())
            if len(incident) > fanout_cap:
                truncated = True
                incident = incident[:fanout_cap]
            for e in incident:
                other = (
                    e.dst if direction == "out" else e.src if direction == "in" else e.other_end(node)
                )
                if other not in depth:
                    depth[other] = hop
                    reached.add(other)
                if depth[other] == hop:
                    upstream.setdefault(other, set()).add(node)
                if e.event_id not in edges:
                    edges[e.event_id] = e.to_trace_edge(hop)
        frontier = sorted(reached)

    nodes = tuple(
        TraceNode(n, d, tuple(sorted(upstream.get(n, ()))))
        for n, d in sorted(depth.items(), key=lambda item: (item[1], item[0]))
    )
    ordered_edges = tuple(sorted(edges.values(), key=lambda e: (e.hop, e.event_id)))
    params = trace_params(direction, max_hops, fanout_cap, start, end)
    return EvidenceTrace(
        trace_id=trace_id_for(root, params, [e.event_id for e in ordered_edges]),
        root=root,
        direction=direction,
        max_hops=max_hops,
        fanout_cap=fanout_cap,
        window_start=start,
        window_end=end,
        nodes=nodes,
        edges=ordered_edges,
        backend=store.backend,
        truncated=truncated,
    )
