"""Random graphs (cycles, self-loops, parallel edges, hubs): the trace agrees with independent
computations, and every backend gives the identical trace."""

from __future__ import annotations

import itertools
import tempfile
from datetime import timedelta
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditflow.records import TransactionEvent
from evidence_graph import GraphStore, NetworkxGraphStore, trace_evidence
from evidence_graph.testing import T0, tx

_example = itertools.count()


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[TransactionEvent], list[str]]:
    n = draw(st.integers(1, 9))
    names = [f"N{i}" for i in range(n)]
    pick = st.sampled_from(names)
    edges = draw(st.lists(st.tuples(pick, pick, st.integers(0, 20)), max_size=30))
    if n > 2 and draw(st.booleans()):  # a hub touching many accounts both ways
        hub = draw(pick)
        edges += [(hub, x, m) for m, x in enumerate(names)] + [
            (x, hub, 30 + m) for m, x in enumerate(names)
        ]
    events = [tx(f"e{i:03d}", a, b, m) for i, (a, b, m) in enumerate(edges)]
    return events, names


params = st.fixed_dictionaries(
    {
        "direction": st.sampled_from(["out", "in", "both"]),
        "max_hops": st.integers(1, 5),
        "fanout_cap": st.integers(1, 6),
        "window": st.one_of(st.none(), st.tuples(st.integers(0, 25), st.integers(0, 25)).map(sorted)),
    }
)


def _window(p: dict) -> tuple | None:
    w = p["window"]
    return None if w is None else (T0 + timedelta(minutes=w[0]), T0 + timedelta(minutes=w[1]))


def reference_trace(events, root, direction, max_hops, fanout_cap, window):
    """A plain re-statement of the documented semantics, straight from the event list."""
    lo, hi = window if window else (None, None)
    kept: dict[str, list[TransactionEvent]] = {}
    truncated_nodes = set()
    nodes = {e.sender.node_id for e in events} | {e.receiver.node_id for e in events} | {root}
    for node in nodes:
        inc = [
            e
            for e in events
            if (lo is None or e.timestamp >= lo)
            and (hi is None or e.timestamp <= hi)
            and (
                (direction in ("out", "both") and e.sender.node_id == node)
                or (direction in ("in", "both") and e.receiver.node_id == node)
            )
        ]
        inc = sorted({e.event_id: e for e in inc}.values(), key=lambda e: (e.timestamp, e.event_id))
        kept[node] = inc[:fanout_cap]
        if len(inc) > fanout_cap:
            truncated_nodes.add(node)

    def far(e, node):
        return e.receiver.node_id if e.sender.node_id == node else e.sender.node_id

    h = nx.DiGraph()
    h.add_node(root)
    for node, es in kept.items():
        h.add_edges_from((node, far(e, node)) for e in es)
    depth = nx.single_source_shortest_path_length(h, root, cutoff=max_hops)
    expanded = {n for n, d in depth.items() if d < max_hops}
    edges: dict[str, int] = {}  # an edge kept from both of its ends counts at its first crossing
    for n in expanded:
        for e in kept[n]:
            edges[e.event_id] = min(edges.get(e.event_id, 99), depth[n] + 1)
    ups = {
        v: tuple(
            sorted(u for u in expanded if depth[u] == d - 1 and any(far(e, u) == v for e in kept[u]))
        )
        for v, d in depth.items()
    }
    return depth, ups, edges, bool(truncated_nodes & expanded)


def _load(store: GraphStore, events) -> GraphStore:
    store.add_transactions(events)
    return store


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), params, st.data())
def test_trace_matches_reference_semantics(g, p, data) -> None:
    events, names = g
    root = "001/" + data.draw(st.sampled_from(names))
    window = _window(p)
    store = _load(NetworkxGraphStore(), events)
    t = trace_evidence(store, root, p["max_hops"], p["direction"], p["fanout_cap"], window)
    depth, ups, edges, truncated = reference_trace(
        events, root, p["direction"], p["max_hops"], p["fanout_cap"], window
    )
    assert t.depths() == depth
    assert {n.node_id: n.upstream_ids for n in t.nodes} == ups
    assert {e.event_id: e.hop for e in t.edges} == edges
    assert t.truncated == truncated
    assert [(n.hop_depth, n.node_id) for n in t.nodes] == sorted(
        (n.hop_depth, n.node_id) for n in t.nodes
    )


@settings(max_examples=100, deadline=None)
@given(graphs(), st.sampled_from(["out", "in", "both"]), st.integers(1, 5), st.data())
def test_uncapped_depths_equal_networkx_shortest_paths(g, direction, max_hops, data) -> None:
    events, names = g
    root = "001/" + data.draw(st.sampled_from(names))
    store = _load(NetworkxGraphStore(), events)
    t = trace_evidence(store, root, max_hops, direction, fanout_cap=10_000)
    assert not t.truncated
    dg = nx.DiGraph([(e.sender.node_id, e.receiver.node_id) for e in events])
    dg.add_node(root)
    view = {"out": dg, "in": dg.reverse(copy=False), "both": dg.to_undirected(as_view=True)}[direction]
    assert t.depths() == nx.single_source_shortest_path_length(view, root, cutoff=max_hops)


@settings(max_examples=30, deadline=None)
@given(graphs(), params, st.data())
def test_file_backed_store_gives_identical_traces(g, p, data) -> None:
    events, names = g
    root = "001/" + data.draw(st.sampled_from(names))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.jsonl"
        with NetworkxGraphStore(path) as w:
            w.add_transactions(events)
        reopened = NetworkxGraphStore(path)
        memory = _load(NetworkxGraphStore(), events)
        args = (p["max_hops"], p["direction"], p["fanout_cap"], _window(p))
        assert trace_evidence(reopened, root, *args) == trace_evidence(memory, root, *args)


@pytest.fixture(scope="module")
def neo4j_store(neo4j_factory):
    store = neo4j_factory()
    yield store
    store.drop()
    store.close()


@pytest.mark.services("neo4j")
@settings(max_examples=60, deadline=None)
@given(g=graphs(), p=params, data=st.data())
def test_neo4j_and_embedded_traces_are_identical(neo4j_store, g, p, data) -> None:
    events, names = g
    # every example gets its own accounts and event ids inside the shared namespace
    pre = f"x{next(_example)}"
    events = [
        tx(
            f"{pre}-{e.event_id}",
            f"{pre}/{e.sender.account}",
            f"{pre}/{e.receiver.account}",
            int((e.timestamp - T0).total_seconds() // 60),
        )
        for e in events
    ]
    root = f"{pre}/" + data.draw(st.sampled_from(names))
    assert neo4j_store.add_transactions(events) == len(events)
    assert neo4j_store.add_transactions(events) == 0
    memory = _load(NetworkxGraphStore(), events)
    args = (p["max_hops"], p["direction"], p["fanout_cap"], _window(p))
    a, b = trace_evidence(neo4j_store, root, *args), trace_evidence(memory, root, *args)
    assert (a.backend, b.backend) == ("neo4j", "networkx")
    assert a.to_dict() | {"backend": ""} == b.to_dict() | {"backend": ""}
