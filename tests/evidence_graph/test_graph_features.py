"""Graph features against brute-force computations straight from the event list."""

from __future__ import annotations

from datetime import timedelta

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from auditflow.records import TransactionEvent
from evidence_graph import (
    GRAPH_FEATURE_DESCRIPTIONS,
    GRAPH_FEATURE_NAMES,
    NetworkxGraphStore,
    graph_features,
)
from evidence_graph.testing import acct, chain, cycle, fan_out, gather_scatter, scatter_gather, tx


def brute_force(
    events: list[TransactionEvent], event: TransactionEvent, window_minutes: int
) -> dict[str, float]:
    lo, hi = event.timestamp - timedelta(minutes=window_minutes), event.timestamp
    seen = {e.event_id: e for e in events if lo <= e.timestamp <= hi}
    seen.setdefault(event.event_id, event)
    arcs = {(e.sender.node_id, e.receiver.node_id) for e in seen.values()}
    s, r = event.sender.node_id, event.receiver.node_id
    nodes = {x for a in arcs for x in a}

    def payees(v):
        return {b for a, b in arcs if a == v and b != v}

    def payers(v):
        return {a for a, b in arcs if b == v and a != v}

    g = nx.DiGraph(list(arcs))
    if s == r:
        cyc = 1
    else:
        try:
            d = nx.shortest_path_length(g, r, s)
        except nx.NetworkXNoPath:
            d = 0
        cyc = d + 1 if 0 < d <= 5 else 0
    sg = max(
        (
            len({m for m in nodes if m not in (x, r) and (x, m) in arcs and (m, r) in arcs})
            for x in nodes
            if x != r
        ),
        default=0,
    )

    def gs(v):
        i, o = payers(v), payees(v)
        return min(len(i), len(o)) if len(i) >= 2 and len(o) >= 2 else 0

    lengths = nx.single_source_shortest_path_length(g, s, cutoff=2)
    return {
        "g_snd_out_degree": len(payees(s)),
        "g_rcv_in_degree": len(payers(r)),
        "g_snd_in_degree": len(payers(s)),
        "g_rcv_out_degree": len(payees(r)),
        "g_cycle_len": cyc,
        "g_sg_width": sg,
        "g_gs_width": max(gs(s), gs(r)),
        "g_two_hop_out": sum(1 for v, d in lengths.items() if v != s and d in (1, 2)),
    }


@st.composite
def scenario(draw: st.DrawFn):
    names = [f"N{i}" for i in range(draw(st.integers(2, 8)))]
    pick = st.sampled_from(names)
    edges = draw(st.lists(st.tuples(pick, pick, st.integers(0, 120)), max_size=35))
    events = [tx(f"e{i:03d}", a, b, m) for i, (a, b, m) in enumerate(edges)]
    if events and draw(st.booleans()):
        event = draw(st.sampled_from(events))  # an event already stored
    else:
        event = tx("new", draw(pick), draw(pick), draw(st.integers(0, 120)))
    return events, event, draw(st.sampled_from([0, 30, 60, 1440]))


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_features_match_brute_force(case) -> None:
    events, event, window = case
    store = NetworkxGraphStore()
    store.add_transactions(events)
    got = graph_features(store, event, window_minutes=window)
    assert list(got) == list(GRAPH_FEATURE_NAMES)
    assert all(isinstance(v, float) for v in got.values())
    assert got == {k: float(v) for k, v in brute_force(events, event, window).items()}


def test_every_feature_is_described() -> None:
    assert set(GRAPH_FEATURE_DESCRIPTIONS) == set(GRAPH_FEATURE_NAMES)


def test_planted_shapes() -> None:
    store = NetworkxGraphStore()
    store.add_transactions(
        [
            *cycle(["A", "B", "C", "D"], start=0),
            *scatter_gather("S", ["M1", "M2", "M3"], "T", start=10),
            *gather_scatter(["P1", "P2"], "H", ["Q1", "Q2", "Q3"], start=20),
        ]
    )
    closing = tx("cy3", "D", "A", 3)
    f = graph_features(store, closing)
    assert f["g_cycle_len"] == 4 and f["g_two_hop_out"] == 2
    f = graph_features(store, tx("sg5", "M3", "T", 15))
    assert f["g_sg_width"] == 3 and f["g_rcv_in_degree"] == 3 and f["g_cycle_len"] == 0
    assert graph_features(store, tx("gs0", "P1", "H", 20))["g_gs_width"] == 0  # nothing scattered yet
    assert graph_features(store, tx("gs4", "H", "Q3", 24))["g_gs_width"] == 2
    f = graph_features(store, tx("self", "A", "A", 5))
    assert f["g_cycle_len"] == 1 and f["g_snd_out_degree"] == 1  # itself is not a payee


def test_later_edges_never_leak_into_an_earlier_event() -> None:
    store = NetworkxGraphStore()
    events = chain("ABCA")  # A->B at 0, B->C at 1, C->A at 2
    store.add_transactions(events)
    assert graph_features(store, events[0])["g_cycle_len"] == 0
    assert graph_features(store, events[2])["g_cycle_len"] == 3


def test_hub_work_is_capped_deterministically() -> None:
    store = NetworkxGraphStore()
    store.add_transactions(fan_out("HUB", [f"L{i:03d}" for i in range(500)]))
    ev = tx("late", "HUB", "NEW", 600)
    a, b = graph_features(store, ev), graph_features(store, ev)
    assert a == b and a["g_snd_out_degree"] == 201  # 200 earliest payees plus this event's
    assert graph_features(store, ev, neighbor_cap=1000)["g_snd_out_degree"] == 501
    assert acct("HUB") == "001/HUB"
