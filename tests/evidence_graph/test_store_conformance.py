"""One suite every GraphStore backend passes: same inputs, same answers, same trace ids."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from auditflow.money import Money
from auditflow.records import EvidenceTrace
from evidence_graph import TYPOLOGIES, GraphStore, trace_evidence
from evidence_graph.testing import T0, acct, chain, cycle, fan_out, scatter_gather, tx


def depths(trace: EvidenceTrace) -> dict[str, int]:
    return {k.split("/")[1]: v for k, v in trace.depths().items()}


def upstream(trace: EvidenceTrace, name: str) -> tuple[str, ...]:
    return tuple(u.split("/")[1] for u in trace.node(acct(name)).upstream_ids)


def edge_ids(trace: EvidenceTrace) -> list[str]:
    return [e.event_id for e in trace.edges]


# -- storage ------------------------------------------------------------------------------------


def test_empty_graph(store: GraphStore) -> None:
    assert (store.node_count(), store.edge_count()) == (0, 0)
    assert not store.has_node(acct("A"))
    assert store.out_edges(acct("A")) == () and store.in_edges(acct("A")) == ()
    assert store.neighbors_batch([acct("A"), acct("B")], "both") == {acct("A"): (), acct("B"): ()}
    assert store.add_transactions([]) == 0
    t = trace_evidence(store, acct("A"))
    assert [(n.node_id, n.hop_depth, n.upstream_ids) for n in t.nodes] == [(acct("A"), 0, ())]
    assert t.edges == () and not t.truncated


def test_idempotent_re_add(store: GraphStore) -> None:
    events = [*chain("ABC"), tx("self", "A", "A", 5), tx("par", "A", "B", 6)]
    assert store.add_transactions(events) == 4
    assert (store.node_count(), store.edge_count()) == (3, 4)  # multi-edge and self-loop kept
    assert store.add_transactions(events) == 0
    assert store.add_transactions(reversed(events)) == 0
    assert store.add_transactions([tx("dup", "C", "A", 9), tx("dup", "C", "A", 9)]) == 1
    assert (store.node_count(), store.edge_count()) == (3, 5)
    assert store.has_node(acct("C"))


def test_edges_round_trip_exactly(store: GraphStore) -> None:
    btc = Money("Bitcoin", 2_585_200)
    ev = tx("btc", "A", "B", 3, amount=btc, laundering=True, fmt="Bitcoin")
    store.add_transactions([ev])
    (edge,) = store.out_edges(acct("A"))
    assert edge.to_event(source_offset=ev.source_offset) == ev
    assert edge.amount_paid == btc and edge.amount_paid.units == 2_585_200
    assert store.in_edges(acct("B")) == (edge,)


def test_cap_order_limit_and_self_loop_listed_once(store: GraphStore) -> None:
    store.add_transactions(
        [
            tx("e3", "A", "C", 1),
            tx("e1", "A", "B", 1),
            tx("e0", "A", "D", 2),
            tx("loop", "A", "A", 0),
            tx("in", "Z", "A", 1),
        ]
    )
    a = acct("A")
    assert [e.event_id for e in store.out_edges(a)] == ["loop", "e1", "e3", "e0"]
    both = store.neighbors_batch([a, a], "both", limit=3)
    assert list(both) == [a] and [e.event_id for e in both[a]] == ["loop", "e1", "e3"]
    assert [e.event_id for e in store.neighbors_batch([a], "both")[a]] == [
        "loop",
        "e1",
        "e3",
        "in",
        "e0",
    ]
    assert [e.event_id for e in store.in_edges(a)] == ["loop", "in"]


def test_expand_gives_each_account_its_own_window(store: GraphStore) -> None:
    store.add_transactions([tx(f"a{i}", "A", "B", i) for i in range(5)] + [tx(f"c{i}", "C", "B", i) for i in range(5)])
    at = lambda m: T0 + timedelta(minutes=m)  # noqa: E731
    got = store.expand([(acct("A"), at(1), at(2)), (acct("C"), at(3), None), (acct("Z"), None, None)], "out")
    assert {k: [e.event_id for e in v] for k, v in got.items()} == {
        acct("A"): ["a1", "a2"], acct("C"): ["c3", "c4"], acct("Z"): []}
    got = store.expand([(acct("B"), at(2), at(4))], "in", limit=3)
    assert [e.event_id for e in got[acct("B")]] == ["a2", "c2", "a3"]
    with pytest.raises(ValueError, match="twice"):
        store.expand([(acct("A"), None, None), (acct("A"), at(1), None)])
    with pytest.raises(ValueError):
        store.expand([(acct("A"), at(3), at(1))])


def test_a_frontier_of_more_accounts_than_one_query_takes_is_answered_whole(store: GraphStore) -> None:
    # 1,200 payers (Neo4j asks 500 accounts a query), each paying twice, and 50 unknown accounts;
    # each account its own window, both directions, with and without a limit
    events = [tx(f"p{i}-{k}", f"A{i}", f"B{i % 40}", (i % 50) + 40 * k) for i in range(1200) for k in range(2)]
    store.add_transactions(events)
    at = lambda m: T0 + timedelta(minutes=m)  # noqa: E731
    windows = {acct(f"A{i}"): (i % 45, i % 45 + 30) for i in range(1200)}
    windows.update({acct(f"Z{i}"): (0, 100) for i in range(50)})
    requests = [(n, at(lo), at(hi)) for n, (lo, hi) in windows.items()]
    minute = {ev.event_id: (ev.timestamp - T0) // timedelta(minutes=1) for ev in events}
    paid: dict[str, list[tuple[int, str]]] = {}
    for ev in events:
        paid.setdefault(ev.sender.node_id, []).append((minute[ev.event_id], ev.event_id))
    for limit in (None, 1):
        got = store.expand(requests, "out", limit)
        want = {}
        for n, (lo, hi) in windows.items():
            mine = sorted(x for x in paid.get(n, ()) if lo <= x[0] <= hi)
            want[n] = [eid for _, eid in mine][:limit]
        assert {n: [e.event_id for e in es] for n, es in got.items()} == want
    payees = [(acct(f"B{j}"), at(10), at(20)) for j in range(40)] + [(n, None, None) for n in windows]
    got = store.expand(payees, "in")
    assert sum(len(es) for es in got.values()) == sum(1 for ev in events if 10 <= minute[ev.event_id] <= 20)
    assert all(e.dst == n for n, es in got.items() for e in es)


def test_window_filter_is_inclusive(store: GraphStore) -> None:
    store.add_transactions([tx(f"w{i}", "A", "B", i) for i in range(5)] + chain("BCD", start=10))
    a = acct("A")
    lo, hi = T0 + timedelta(minutes=1), T0 + timedelta(minutes=3)
    assert [e.event_id for e in store.out_edges(a, lo, hi)] == ["w1", "w2", "w3"]
    assert [e.event_id for e in store.out_edges(a, start=hi)] == ["w3", "w4"]
    assert [e.event_id for e in store.in_edges(acct("B"), end=lo)] == ["w0", "w1"]
    t = trace_evidence(store, a, window=(lo, hi))
    assert depths(t) == {"A": 0, "B": 1} and edge_ids(t) == ["w1", "w2", "w3"]
    t = trace_evidence(store, a, window=(T0, T0 + timedelta(minutes=10)))
    assert depths(t) == {"A": 0, "B": 1, "C": 2}
    with pytest.raises(ValueError):
        trace_evidence(store, a, window=(hi, lo))


def test_reopen_sees_the_same_graph(backend, store: GraphStore) -> None:
    events = [*cycle("ABCD"), tx("x", "D", "E", 7)]
    store.add_transactions(events)
    before = trace_evidence(store, acct("A"))
    other = backend.reopen(store)
    assert (other.node_count(), other.edge_count()) == (5, 5)
    assert trace_evidence(other, acct("A")) == before
    assert other.add_transactions(events) == 0


# -- traces -------------------------------------------------------------------------------------


def test_planted_cycle_depths_upstream_and_closing_edge(store: GraphStore) -> None:
    store.add_transactions(cycle("ABCD"))  # cy0 A->B, cy1 B->C, cy2 C->D, cy3 D->A
    t = trace_evidence(store, acct("A"))
    assert depths(t) == {"A": 0, "B": 1, "C": 2, "D": 3}
    assert [upstream(t, n) for n in "ABCD"] == [(), ("A",), ("B",), ("C",)]
    # the edge closing the cycle on the root is included, at the hop it was crossed
    assert [(e.event_id, e.hop) for e in t.edges] == [("cy0", 1), ("cy1", 2), ("cy2", 3), ("cy3", 4)]

    t = trace_evidence(store, acct("A"), direction="in")
    assert depths(t) == {"A": 0, "D": 1, "C": 2, "B": 3}
    assert upstream(t, "B") == ("C",)
    assert t.edges[0].src == acct("D") and t.edges[0].dst == acct("A")  # written sender -> receiver

    # each node is explained by the time-ordered transfers that brought the money to it
    assert trace_evidence(store, acct("A")).node(acct("D")).path == ("cy0", "cy1", "cy2")
    assert t.node(acct("B")).path == ("cy1", "cy2", "cy3")  # upstream: from B to the root
    with pytest.raises(ValueError, match="direction"):
        trace_evidence(store, acct("A"), direction="both")


def test_planted_scatter_gather_depths_and_upstream(store: GraphStore) -> None:
    store.add_transactions([*scatter_gather("S", ["M1", "M2", "M3"], "T"), *chain("TU", prefix="u", start=10)])
    t = trace_evidence(store, acct("S"))
    assert depths(t) == {"S": 0, "M1": 1, "M2": 1, "M3": 1, "T": 2, "U": 3}
    assert upstream(t, "T") == ("M1", "M2", "M3")
    assert [n.node_id for n in t.nodes] == [acct(x) for x in ("S", "M1", "M2", "M3", "T", "U")]
    assert len(t.edges) == 7
    t = trace_evidence(store, acct("T"), direction="in", max_hops=1)
    assert depths(t) == {"T": 0, "M1": 1, "M2": 1, "M3": 1}
    assert all(upstream(t, m) == ("T",) for m in ("M1", "M2", "M3"))


def test_planted_fan_out_with_cross_edges(store: GraphStore) -> None:
    store.add_transactions(
        [*fan_out("H", ["L1", "L2", "L3"]), tx("x", "L1", "L2", 9), tx("back", "L3", "H", 9)]
    )
    t = trace_evidence(store, acct("H"), max_hops=2)
    assert depths(t) == {"H": 0, "L1": 1, "L2": 1, "L3": 1}
    assert upstream(t, "L2") == ("H",)  # the L1 -> L2 edge is same-depth: not upstream...
    assert {(e.event_id, e.hop) for e in t.edges} >= {("x", 2), ("back", 2)}  # ...but included


def test_max_hops_bound(store: GraphStore) -> None:
    store.add_transactions(chain("ABCDEFGH"))
    assert max(trace_evidence(store, acct("A"), max_hops=3).depths().values()) == 3
    t = trace_evidence(store, acct("A"), max_hops=5)
    assert depths(t) == {x: i for i, x in enumerate("ABCDEF")}
    assert edge_ids(t) == [f"ch{i}" for i in range(5)]  # depth-5 nodes are not expanded
    for bad in (0, 6, -1, 2.0, True):
        with pytest.raises(ValueError, match="max_hops"):
            trace_evidence(store, acct("A"), max_hops=bad)
    with pytest.raises(ValueError, match="direction"):
        trace_evidence(store, acct("A"), direction="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fanout_cap"):
        trace_evidence(store, acct("A"), fanout_cap=0)


def test_fanout_cap_keeps_the_most_relevant_edges_and_records_the_cut(store: GraphStore) -> None:
    # H pays ten leaves one minute apart; L07 and L08 get far more than the others
    leaves = [f"L{i:02d}" for i in range(10)]
    big = {"L07": 900_000, "L08": 500_000}
    store.add_transactions([tx(f"fo{i}", "H", x, i, amount=Money("US Dollar", big.get(x, 10_000)))
                            for i, x in enumerate(leaves)])
    t = trace_evidence(store, acct("H"), fanout_cap=4)
    assert t.truncated
    # relevance = amount / (1 + hours since the first payment): the two big ones, then the soonest
    assert depths(t) == {"H": 0, "L07": 1, "L08": 1, "L00": 1, "L01": 1}
    assert [(c.hop, c.node_id, c.reason, c.dropped) for c in t.cuts] == [(1, acct("H"), "fan-out cap", 6)]
    assert not trace_evidence(store, acct("H"), fanout_cap=10).truncated
    assert (
        trace_evidence(store, acct("H"), fanout_cap=4).trace_id
        != trace_evidence(store, acct("H")).trace_id
    )


def test_money_only_flows_forward_in_time(store: GraphStore) -> None:
    # B pays C before A's money reached B (minute 5): not followed; B -> D after it is
    store.add_transactions([tx("ab", "A", "B", 5), tx("bc", "B", "C", 3), tx("bd", "B", "D", 8),
                            tx("de", "D", "E", 8), tx("late", "D", "F", 8 + 3 * 24 * 60)])
    t = trace_evidence(store, acct("A"), hop_horizon=timedelta(days=2))
    assert depths(t) == {"A": 0, "B": 1, "D": 2, "E": 3}  # F is past the horizon after D
    assert t.node(acct("E")).path == ("ab", "bd", "de")
    t = trace_evidence(store, acct("E"), direction="in")  # where E's money came from
    assert depths(t) == {"E": 0, "D": 1, "B": 2, "A": 3}
    # an account reached later by a longer path with earlier money is followed from that time
    store.add_transactions([tx("ax", "A", "X", 0), tx("xb", "X", "B", 1), tx("bz", "B", "Z", 2)])
    t = trace_evidence(store, acct("A"))
    assert depths(t)["B"] == 1 and depths(t)["Z"] == 3
    assert t.node(acct("Z")).path == ("ax", "xb", "bz")


def test_amount_consistency_drops_what_the_money_cannot_pay(store: GraphStore) -> None:
    usd = lambda cents: Money("US Dollar", cents)  # noqa: E731
    store.add_transactions([
        tx("in", "A", "B", 0, amount=usd(100_000)),
        tx("o1", "B", "C", 1, amount=usd(60_000)),
        tx("o2", "B", "D", 2, amount=usd(50_000)),  # 60k + 50k > 100k * 1.05: dropped
        tx("o3", "B", "E", 3, amount=usd(40_000)),  # 60k + 40k fits
    ])
    t = trace_evidence(store, acct("A"), amount_tolerance=0.05)
    assert depths(t) == {"A": 0, "B": 1, "C": 2, "E": 2}
    assert [(c.node_id, c.reason, c.dropped) for c in t.cuts] == [(acct("B"), "amount", 1)]
    assert depths(trace_evidence(store, acct("A")))["D"] == 2  # without the check


def test_hubs_are_reported_not_expanded(store: GraphStore) -> None:
    # A -> HUB -> 300 leaves: HUB is above the hub degree
    leaves = [f"L{i:03d}" for i in range(300)]
    store.add_transactions([tx("in", "A", "HUB", 0), *fan_out("HUB", leaves, start=1)])
    t = trace_evidence(store, acct("A"), max_hops=3, hub_degree=200)
    assert depths(t) == {"A": 0, "HUB": 1} and t.hubs == (acct("HUB"),)
    assert [(c.hop, c.node_id, c.reason) for c in t.cuts] == [(2, acct("HUB"), "hub")]
    t = trace_evidence(store, acct("A"), max_hops=3, hub_degree=None, fanout_cap=50)
    assert len(t.nodes) == 52 and t.hubs == ()


def test_global_budgets_stop_the_trace_and_say_where(store: GraphStore) -> None:
    from evidence_graph.follow import Budget

    store.add_transactions(fan_out("H", [f"L{i}" for i in range(8)]) + chain(["L0", "M", "N"], start=20))
    t = trace_evidence(store, acct("H"), budget=Budget(max_nodes=4))
    assert len(t.nodes) == 4 and t.truncated
    # 5 leaves left out at hop 1, and M (L0's payee) at hop 2
    assert [(c.hop, c.reason, c.dropped) for c in t.cuts] == [(1, "node budget", 5), (2, "node budget", 1)]
    t = trace_evidence(store, acct("H"), budget=Budget(max_edges=8))
    assert len(t.edges) == 8 and [(c.hop, c.reason) for c in t.cuts] == [(2, "edge budget")]


def test_the_last_hop_with_the_node_budget_spent_still_crosses_transfers_to_accounts_already_reached(backend) -> None:
    # R -> A -> B, then B pays the root and A back (both reached before) and two accounts not
    # yet reached; with room for three accounts and three hops, the last hop crosses the two
    # transfers back and leaves out the two new accounts
    from evidence_graph.follow import Budget

    store = backend.new()
    store.add_transactions([tx("r", "R", "A", 1), tx("a", "A", "B", 2), tx("b1", "B", "R", 3),
                            tx("b2", "B", "C", 4), tx("b3", "B", "A", 5), tx("b4", "B", "D", 6)])
    t = trace_evidence(store, acct("R"), max_hops=3, budget=Budget(max_nodes=3))
    assert [(n.node_id, n.hop_depth) for n in t.nodes] == [(acct("R"), 0), (acct("A"), 1), (acct("B"), 2)]
    assert [(e.event_id, e.hop) for e in t.edges] == [("r", 1), ("a", 2), ("b1", 3), ("b3", 3)]
    assert [(c.hop, c.reason, c.dropped) for c in t.cuts] == [(3, "node budget", 2)]


def test_same_graph_same_trace_id_whatever_the_insertion_order(backend) -> None:
    events = [*cycle("ABCD"), *scatter_gather("A", ["X", "Y"], "Z", prefix="s"), tx("z", "Z", "A", 30)]
    one, two = backend.new(), backend.new()
    one.add_transactions(events)
    for ev in reversed(events):
        two.add_transactions([ev])
    for direction in ("out", "in"):
        for cap in (1, 2, 50):
            a = trace_evidence(one, acct("A"), direction=direction, fanout_cap=cap)
            b = trace_evidence(two, acct("A"), direction=direction, fanout_cap=cap)
            assert a == b and a.to_json() == b.to_json()
            assert EvidenceTrace.from_dict(json.loads(a.to_json())) == a
    assert trace_evidence(one, acct("A")).backend == BACKEND_NAME[backend.kind]


BACKEND_NAME = {"memory": "networkx", "file": "networkx", "neo4j": "neo4j"}


def test_trace_id_is_the_content_address_of_root_parameters_and_edges(backend) -> None:
    """Unreachable edges leave the id alone; a reachable edge, another root or parameter change it."""
    base = [*chain("ABC"), tx("side", "X", "Y", 1)]
    one, two, three = backend.new(), backend.new(), backend.new()
    one.add_transactions(base)
    two.add_transactions([*base, tx("far", "Y", "Z", 2), tx("into", "Z", "A", 3)])  # A -> ... unchanged
    three.add_transactions([*base, tx("more", "C", "D", 4)])  # reachable from A: one more edge
    ids = {
        name: trace_evidence(store, acct("A")).trace_id for name, store in (("one", one), ("two", two), ("three", three))
    }
    assert ids["one"] == ids["two"]
    assert ids["three"] != ids["one"]
    assert trace_evidence(one, acct("B")).trace_id != ids["one"]
    assert trace_evidence(one, acct("A"), max_hops=1).trace_id != ids["one"]
    assert trace_evidence(one, acct("A"), direction="in").trace_id not in (ids["one"], ids["three"])
    assert edge_ids(trace_evidence(two, acct("A"))) == ["ch0", "ch1"]  # the same edges: hence the same id


def test_context_manager_closes(backend) -> None:
    store = backend.new()
    with store as s:
        assert s is store
        assert s.add_transactions(chain("AB")) == 1
    with pytest.raises(ValueError, match="closed"):
        store.add_transactions([tx("late", "B", "C", 5)])
    store.close()  # idempotent: a second close neither raises nor reopens
    with pytest.raises(ValueError, match="closed"):
        store.add_transactions([tx("late", "B", "C", 5)])
    # what was written inside the block is there for the next handle (flushed on close)
    other = backend.reopen(store)
    assert (other.node_count(), other.edge_count()) == (2, 1)
    assert [e.event_id for e in other.out_edges(acct("A"))] == ["ch0"]


def test_context_manager_closes_on_error(backend) -> None:
    store = backend.new()
    with pytest.raises(RuntimeError, match="boom"):
        with store:
            store.add_transactions(chain("AB"))
            raise RuntimeError("boom")
    with pytest.raises(ValueError, match="closed"):
        store.add_transactions([tx("late", "B", "C", 5)])


def test_features_and_typologies_agree_with_the_in_memory_store(store: GraphStore) -> None:
    from evidence_graph import NetworkxGraphStore, detect_typologies, graph_features

    from .test_typologies import DAY, cycle_events, everyday, fan_out_events, layer, move

    shapes = [
        *cycle_events(["CA", "CB", "CC", "CD"]),
        *fan_out_events(),
        *(move(f"fi{i}", f"F{i}", "FS", 5000 + 45 * i, 900 + 11 * i) for i in range(6)),
        *(move(f"sc{i}", "S", f"M{i}", 100 + i, 3000) for i in range(3)),
        *(move(f"ga{i}", f"M{i}", "T", 300 + i, 2950) for i in range(3)),
        *(move(f"gi{i}", f"P{i}", "G", 900 + 30 * i, 2000) for i in range(3)),
        *(move(f"go{i}", "G", f"Q{i}", 1100 + 30 * i, 2900) for i in range(2)),
        *layer(["K1", "K2", "K3"], ["J1", "J2"], "bp", 2000, 1500),
        *layer(["S1", "S2", "S3"], ["R1", "R2"], "s1", 3000, 1700),
        *layer(["R1", "R2"], ["U1", "U2"], "s2", 3100, 2400),
        *(move(f"ch{i}", a, b, 4000 + 120 * i, 7000 * 0.98**i) for i, (a, b) in enumerate(zip("VWXY", "WXYZ"))),
    ]
    accounts = sorted({x.split("/")[1] for e in shapes for x in (e.sender.node_id, e.receiver.node_id)})
    events = [*everyday(accounts, start=-10 * DAY), *shapes]
    store.add_transactions(events)
    ref = NetworkxGraphStore()
    ref.add_transactions(events)
    for ev in shapes:
        assert graph_features(store, ev, window_minutes=30) == graph_features(ref, ev, window_minutes=30)
    window = (T0, T0 + timedelta(days=6))
    found = set()
    for name in accounts:
        got = detect_typologies(store, acct(name), window)
        assert got == detect_typologies(ref, acct(name), window)
        found |= {m.typology for m in got}
    assert found == set(TYPOLOGIES)


def test_the_time_budget_stops_a_trace_and_says_where(store: GraphStore) -> None:
    from evidence_graph.follow import Budget, follow_money
    from evidence_graph.store import GraphQueryTimeout

    store.add_transactions(chain("ABCDEF"))
    ticks = iter([0.0, 0.0, 0.0, 5.0, 5.0, 5.0, 5.0])  # the clock jumps past the budget after hop 1

    flow = follow_money(store, acct("A"), budget=Budget(max_seconds=1.0), clock=lambda: next(ticks))
    assert {n.split("/")[1] for n in flow.nodes} == {"A", "B"}
    assert [(c.hop, c.reason, c.dropped) for c in flow.cuts] == [(2, "time budget", 1)]
    with pytest.raises(GraphQueryTimeout):  # no time left: the backend is not even asked
        store.expand([(acct("A"), None, None)], timeout=0.0)
