"""Random graphs (cycles, self-loops, parallel edges, hubs, random amounts and times): traces never
loop, respect the fan-out cap, the budgets, the hop limit and time order; uncapped, their depths
are the fewest hops of a time-ordered path, found by enumerating every walk; every backend gives
the identical trace."""

from __future__ import annotations

import itertools
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditflow.money import Money
from auditflow.records import EvidenceTrace, TransactionEvent
from evidence_graph import GraphStore, NetworkxGraphStore, trace_evidence
from evidence_graph.follow import UNBOUNDED, Budget
from evidence_graph.testing import T0, tx

_example = itertools.count()


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[TransactionEvent], list[str]]:
    n = draw(st.integers(1, 9))
    names = [f"N{i}" for i in range(n)]
    pick = st.sampled_from(names)
    edges = draw(st.lists(st.tuples(pick, pick, st.integers(0, 40), st.integers(1, 50)), max_size=30))
    if n > 2 and draw(st.booleans()):  # a hub touching many accounts both ways
        hub = draw(pick)
        edges += [(hub, x, m, 5) for m, x in enumerate(names)] + [(x, hub, 30 + m, 5) for m, x in enumerate(names)]
    events = [tx(f"e{i:03d}", a, b, m, amount=Money("US Dollar", 100 * k)) for i, (a, b, m, k) in enumerate(edges)]
    return events, names


params = st.fixed_dictionaries(
    {
        "direction": st.sampled_from(["out", "in"]),
        "max_hops": st.integers(1, 5),
        "fanout_cap": st.integers(1, 6),
        "window": st.one_of(st.none(), st.tuples(st.integers(0, 45), st.integers(0, 45)).map(sorted)),
        "hop_horizon": st.one_of(st.none(), st.integers(0, 30).map(lambda m: timedelta(minutes=m))),
        "amount_tolerance": st.one_of(st.none(), st.sampled_from([0.0, 0.05, 0.5])),
        "hub_degree": st.one_of(st.none(), st.integers(1, 8)),
        "budget": st.builds(Budget, st.integers(1, 12), st.integers(1, 20), st.none()),
    }
)


def _window(p: dict) -> tuple | None:
    w = p["window"]
    return None if w is None else (T0 + timedelta(minutes=w[0]), T0 + timedelta(minutes=w[1]))


def _trace(store: GraphStore, root: str, p: dict) -> EvidenceTrace:
    return trace_evidence(store, root, p["max_hops"], p["direction"], p["fanout_cap"], _window(p),
                          hop_horizon=p["hop_horizon"], amount_tolerance=p["amount_tolerance"],
                          hub_degree=p["hub_degree"], budget=p["budget"])


def _load(store: GraphStore, events) -> GraphStore:
    store.add_transactions(events)
    return store


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), params, st.data())
def test_traces_never_loop_and_respect_caps_budgets_hops_and_time(g, p, data) -> None:
    events, names = g
    root = "001/" + data.draw(st.sampled_from(names))
    t = _trace(_load(NetworkxGraphStore(), events), root, p)
    by_id = {e.event_id: e for e in events}
    down = p["direction"] == "out"
    lo, hi = _window(p) or (None, None)
    depth = t.depths()
    trace_edges = {e.event_id: e for e in t.edges}

    assert len(depth) == len(t.nodes) and depth[root] == 0
    assert len(t.nodes) <= p["budget"].max_nodes and len(t.edges) <= p["budget"].max_edges
    assert max(depth.values()) <= p["max_hops"] and all(1 <= e.hop <= p["max_hops"] for e in t.edges)
    for node in t.nodes:
        path = [by_id[eid] for eid in node.path]
        assert len(path) == node.hop_depth and set(node.path) <= set(trace_edges)
        # the path runs from the root (upstream: to the root), one account after another
        accounts = ([root] + [e.receiver.node_id for e in path]) if down else (
            [e.sender.node_id for e in path] + [root])
        if path:
            assert accounts[-1 if down else 0] == node.node_id
            assert all((a.receiver == b.sender) for a, b in zip(path, path[1:]))
        assert len(set(accounts)) == len(accounts), "a path repeats an account"  # never loops
        stamps = [e.timestamp for e in path]
        assert stamps == sorted(stamps), "money moved backwards in time"
        if p["hop_horizon"] is not None:
            assert all(b - a <= p["hop_horizon"] for a, b in zip(stamps, stamps[1:]))
        if path and node.upstream_ids:
            assert all(depth[u] <= node.hop_depth - 1 for u in node.upstream_ids)  # re-expanded: closer
    for e in t.edges:
        assert (lo is None or e.timestamp >= lo) and (hi is None or e.timestamp <= hi)
        near, far = (e.src, e.dst) if down else (e.dst, e.src)
        assert near != far, "a self-transfer was followed"
        assert near in depth and far in depth and depth[near] < e.hop
        # money leaves an account only after some money reached it (upstream: mirrored)
        if near != root:
            into = [x.timestamp for x in t.edges if (x.dst if down else x.src) == near]
            assert into and (min(into) <= e.timestamp if down else max(into) >= e.timestamp)
    # the fan-out cap: per account and hop, at most fanout_cap transfers followed
    per = {}
    for e in t.edges:
        key = (e.hop, e.src if down else e.dst)
        per[key] = per.get(key, 0) + 1
    assert max(per.values(), default=0) <= p["fanout_cap"]
    # hubs are not expanded at the hop they were found; a hub has more candidates than the degree
    for c in t.cuts:
        if c.reason == "hub":
            assert c.node_id in t.hubs and c.dropped > p["hub_degree"]
            if c.node_id != root:
                assert (c.hop, c.node_id) not in per
    assert t.truncated == bool(t.cuts)


def all_time_ordered_depths(events, root, direction, max_hops, window, horizon):
    """The fewest hops of a time-ordered walk to every account, by enumerating every walk."""
    lo, hi = window if window else (None, None)
    usable = [e for e in events if e.sender != e.receiver and (lo is None or e.timestamp >= lo)
              and (hi is None or e.timestamp <= hi)]
    down = direction == "out"
    best = {root: 0}

    def walk(node, t, hops):
        if hops == max_hops:
            return
        for e in usable:
            near, far = (e.sender.node_id, e.receiver.node_id) if down else (e.receiver.node_id, e.sender.node_id)
            if near != node:
                continue
            if t is not None and (e.timestamp < t if down else e.timestamp > t):
                continue
            if t is not None and horizon is not None and abs(e.timestamp - t) > horizon:
                continue
            best[far] = min(best.get(far, 99), hops + 1)
            walk(far, e.timestamp, hops + 1)

    walk(root, lo if down else hi, 0)
    return best


@settings(max_examples=150, deadline=None)
@given(graphs(), st.sampled_from(["out", "in"]), st.integers(1, 4), st.data())
def test_uncapped_depths_are_the_fewest_hops_of_a_time_ordered_walk(g, direction, max_hops, data) -> None:
    events, names = g
    root = "001/" + data.draw(st.sampled_from(names))
    window = data.draw(st.one_of(st.none(), st.tuples(st.integers(0, 45), st.integers(0, 45)).map(sorted)))
    window = None if window is None else (T0 + timedelta(minutes=window[0]), T0 + timedelta(minutes=window[1]))
    t = trace_evidence(_load(NetworkxGraphStore(), events), root, max_hops, direction, fanout_cap=10_000,
                       window=window, hop_horizon=None, hub_degree=None, budget=UNBOUNDED)
    assert not t.truncated
    assert t.depths() == all_time_ordered_depths(events, root, direction, max_hops, window, None)


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
        assert _trace(reopened, root, p) == _trace(memory, root, p)


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
            amount=e.amount_paid,
        )
        for e in events
    ]
    root = f"{pre}/" + data.draw(st.sampled_from(names))
    assert neo4j_store.add_transactions(events) == len(events)
    assert neo4j_store.add_transactions(events) == 0
    memory = _load(NetworkxGraphStore(), events)
    a, b = _trace(neo4j_store, root, p), _trace(memory, root, p)
    assert (a.backend, b.backend) == ("neo4j", "networkx")
    assert a.to_dict() | {"backend": ""} == b.to_dict() | {"backend": ""}
