"""Graph features against brute-force computations straight from the event list."""

from __future__ import annotations

import random
from datetime import timedelta

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditflow.records import TransactionEvent
from evidence_graph import (
    GRAPH_FEATURE_DESCRIPTIONS,
    GRAPH_FEATURE_NAMES,
    NetworkxGraphStore,
    graph_features,
)
from evidence_graph.graph_features import FEATURE_NEIGHBOR_CAP
from evidence_graph.testing import acct, chain, cycle, gather_scatter, scatter_gather, tx


def fewest_time_ordered_hops(events: list[TransactionEvent], source: str, target: str, max_hops: int) -> int:
    """Every walk ``source -> ... -> target`` of at most ``max_hops`` transfers, each no earlier
    than the one before, enumerated: the fewest hops, else 0."""
    found = []

    def walk(node: str, t, hops: int) -> None:
        for e in events:
            if e.sender.node_id == node and (t is None or e.timestamp >= t):
                if e.receiver.node_id == target:
                    found.append(hops + 1)
                elif hops + 1 < max_hops:
                    walk(e.receiver.node_id, e.timestamp, hops + 1)

    walk(source, None, 0)
    return min(found, default=0)


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
        d = fewest_time_ordered_hops(list(seen.values()), r, s, 5)
        cyc = d + 1 if d else 0
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


def _hub_events(n_leaves: int, seed: int) -> list[TransactionEvent]:
    """HUB pays n_leaves leaves at shuffled minutes (so cap order is neither name nor insertion
    order), several in the same minute (ties broken by event id); every third leaf pays onward."""
    rng = random.Random(seed)
    minutes = [rng.randrange(0, 300) for _ in range(n_leaves)]
    events = [tx(f"h{rng.randrange(10**6):06d}-{i:03d}", "HUB", f"L{i:03d}", m) for i, m in enumerate(minutes)]
    events += [tx(f"on{i:03d}", f"L{i:03d}", f"Y{i:03d}", 400) for i in range(0, n_leaves, 3)]
    rng.shuffle(events)
    return events


def _earliest(events: list[TransactionEvent], account: str, cap: int) -> list[TransactionEvent]:
    """Each account keeps its ``cap`` earliest edges per direction (event id breaks ties)."""
    node = acct(account)
    mine = sorted((e for e in events if e.sender.node_id == node), key=lambda e: (e.timestamp, e.event_id))
    return mine[:cap]


@pytest.mark.parametrize("cap", [1, 7, 40, 200])
def test_hub_counts_saturate_at_the_cap_on_the_earliest_edges(cap) -> None:
    events = _hub_events(120 if cap < 200 else 500, seed=cap)
    ev = tx("late", "HUB", "NEW", 600)
    n_leaves = sum(e.sender.node_id == acct("HUB") for e in events)
    # the oracle: brute force over the graph the cap allows, the HUB's `cap` earliest payments
    # (leaves and Y accounts pay at most once each, so only the hub is ever capped)
    kept = _earliest(events, "HUB", cap)
    others = [e for e in events if e.sender.node_id != acct("HUB")]
    want = {k: float(v) for k, v in brute_force([*kept, *others], ev, 1440).items()}
    store = NetworkxGraphStore()
    store.add_transactions(events)
    got = graph_features(store, ev, neighbor_cap=cap)
    assert got == want
    # saturation: the hub's payees are the cap (plus this event's own payee), far below the truth
    assert got["g_snd_out_degree"] == min(cap, n_leaves) + 1
    assert got["g_two_hop_out"] == want["g_two_hop_out"] >= got["g_snd_out_degree"]
    # the same answer whatever the insertion order (one batch, one by one, reversed)
    for order in (sorted(events, key=lambda e: e.event_id), list(reversed(events))):
        other = NetworkxGraphStore()
        for e in order:
            other.add_transactions([e])
        assert graph_features(other, ev, neighbor_cap=cap) == got


def test_default_cap_bounds_hub_work_and_a_larger_cap_sees_everything() -> None:
    events = _hub_events(500, seed=3)
    store = NetworkxGraphStore()
    store.add_transactions(events)
    ev = tx("late", "HUB", "NEW", 600)
    capped = graph_features(store, ev)
    assert capped["g_snd_out_degree"] < 500
    assert capped == graph_features(store, ev, neighbor_cap=FEATURE_NEIGHBOR_CAP)
    # without saturation the counts are the brute-force ones over the whole graph
    full = graph_features(store, ev, neighbor_cap=1000)
    assert full == {k: float(v) for k, v in brute_force(events, ev, 1440).items()}
    assert full["g_snd_out_degree"] == 501


def test_cap_ties_in_one_minute_go_to_the_smaller_event_id() -> None:
    # HUB pays L1 at minute 0, then L2 ("h-b") and L3 ("h-c") in the same minute 5; with a cap
    # of 2 the hub keeps h-a and h-b. L3 pays onward twice, so keeping it would show.
    events = [
        tx("y1", "L1", "Y1", 8),
        tx("h-c", "HUB", "L3", 5),
        tx("y3", "L3", "Y3", 9),
        tx("y3b", "L3", "Y3b", 9),
        tx("h-b", "HUB", "L2", 5),
        tx("h-a", "HUB", "L1", 0),
    ]
    ev = tx("late", "HUB", "NEW", 20)
    for order in (events, events[::-1]):
        store = NetworkxGraphStore()
        for e in order:
            store.add_transactions([e])
        f = graph_features(store, ev, neighbor_cap=2)
        assert f["g_snd_out_degree"] == 3  # L1, L2 and this event's NEW
        assert f["g_two_hop_out"] == 4  # L1, L2, NEW and Y1 (L1's payee); not L3, Y3, Y3b
        assert graph_features(store, ev, neighbor_cap=3)["g_two_hop_out"] == 7
