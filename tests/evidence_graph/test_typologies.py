"""Typology detection on planted AMLworld shapes, and nothing on a plain chain."""

from __future__ import annotations

from datetime import timedelta

import pytest

from evidence_graph import TYPOLOGIES, NetworkxGraphStore, TypologyMatch, detect_typologies
from evidence_graph.testing import (
    T0,
    acct,
    bipartite,
    chain,
    cycle,
    fan_in,
    fan_out,
    gather_scatter,
    scatter_gather,
    stack,
    tx,
)


def detect(events, name: str, **kw) -> list[TypologyMatch]:
    store = NetworkxGraphStore()
    store.add_transactions(events)
    return detect_typologies(store, acct(name), **kw)


def names(matches: list[TypologyMatch]) -> list[str]:
    return [m.typology for m in matches]


def short(accounts) -> tuple[str, ...]:
    return tuple(a.split("/")[1] for a in accounts)


def test_plain_chain_matches_nothing() -> None:
    events = chain("ABCDEFG")
    for node in "ABCDEFG":
        assert detect(events, node) == []


def test_fan_out_and_fan_in() -> None:
    (m,) = detect(fan_out("H", ["X", "Y", "Z"]), "H")
    assert m.typology == "fan-out" and short(m.accounts) == ("H", "X", "Y", "Z")
    assert m.event_ids == ("fo0", "fo1", "fo2") and "3 distinct accounts" in m.explanation
    (m,) = detect(fan_in("H", ["X", "Y", "Z"]), "H")
    assert m.typology == "fan-in" and m.event_ids == ("fi0", "fi1", "fi2")
    assert detect(fan_out("H", ["X", "Y"]), "H") == []  # below min_fan
    assert names(detect(fan_out("H", ["X", "Y"]), "H", min_fan=2)) == ["fan-out"]


def test_cycle_follows_the_path_from_the_account() -> None:
    events = [*cycle("ABCD"), tx("noise", "B", "Q", 9)]
    (m,) = detect(events, "C")
    assert m.typology == "cycle"
    assert short(m.accounts) == ("C", "D", "A", "B") and m.event_ids == ("cy2", "cy3", "cy0", "cy1")
    assert detect([tx("self", "A", "A")], "A") == []  # a self-transfer is not a laundering cycle
    assert detect(cycle("ABCDEFGH"), "A") == []  # longer than 6 hops


def test_scatter_gather_from_every_role() -> None:
    events = scatter_gather("S", ["M1", "M2", "M3"], "T")
    expected = {
        "S": ["fan-out", "scatter-gather"],
        "T": ["fan-in", "scatter-gather"],
        "M2": ["scatter-gather"],
    }
    for node, shapes in expected.items():
        found = detect(events, node)
        assert names(found) == shapes, node
        found = [m for m in found if m.typology == "scatter-gather"]
        assert short(found[0].accounts) == ("M1", "M2", "M3", "S", "T")
        assert len(found[0].event_ids) == 6


def test_gather_scatter_needs_money_in_before_money_out() -> None:
    events = gather_scatter(["P1", "P2"], "H", ["Q1", "Q2"])
    (m,) = detect(events, "H")
    assert m.typology == "gather-scatter" and len(m.event_ids) == 4
    reversed_in_time = [
        tx(e.event_id, e.sender.account, e.receiver.account, 100 - i) for i, e in enumerate(events)
    ]
    assert detect(reversed_in_time, "H") == []
    # a bigger hub is also a fan-in and a fan-out
    big = gather_scatter(["P1", "P2", "P3"], "H", ["Q1", "Q2", "Q3"])
    assert names(detect(big, "H")) == ["fan-out", "fan-in", "gather-scatter"]


def test_bipartite_from_either_side() -> None:
    events = bipartite(["A1", "A2", "A3"], ["B1", "B2"])
    for node, shapes in (("A1", ["bipartite"]), ("B2", ["fan-in", "bipartite"])):
        found = detect(events, node)
        assert names(found) == shapes
        m = found[-1]
        assert short(m.accounts) == ("A1", "A2", "A3", "B1", "B2") and len(m.event_ids) == 6
    assert names(detect(bipartite(["A1", "A2"], ["B1", "B2"]), "B1")) == ["bipartite"]


def test_stack_from_any_layer() -> None:
    events = stack([["A1", "A2"], ["B1", "B2"], ["C1", "C2"]])
    for node in ("A1", "B2", "C1"):
        found = detect(events, node)
        assert "stack" in names(found) and "bipartite" in names(found), node
        (st,) = [m for m in found if m.typology == "stack"]
        assert short(st.accounts) == ("A1", "A2", "B1", "B2", "C1", "C2") and len(st.event_ids) == 8
        assert "3 layers" in st.explanation


def test_random_is_a_laundering_chain_matching_nothing_else() -> None:
    events = [*chain("ABCD", laundering=True), tx("clean", "D", "E", 9)]
    (m,) = detect(events, "B")
    assert m.typology == "random"
    assert short(m.accounts) == ("A", "B", "C", "D") and m.event_ids == ("ch0", "ch1", "ch2")
    assert detect(events, "E") == []  # only reached by an unlabelled transfer
    assert names(detect([*events, *fan_out("B", ["X", "Y", "Z"], laundering=True)], "B")) == ["fan-out"]


def test_window_restricts_detection() -> None:
    events = fan_out("H", ["X", "Y", "Z"])  # minutes 0, 1, 2
    assert detect(events, "H", window=(T0, T0 + timedelta(minutes=1))) == []
    assert names(detect(events, "H", window=(T0, T0 + timedelta(minutes=2)))) == ["fan-out"]


def test_results_are_deterministic_and_ordered() -> None:
    events = [
        *cycle(["H", "X"], prefix="c"),
        *scatter_gather("H", ["M1", "M2"], "T", prefix="s", start=10),
        *fan_out("H", ["F1", "F2"], prefix="f", start=20),
    ]
    found = detect(events, "H")
    assert names(found) == ["fan-out", "scatter-gather", "cycle"]  # the AMLworld order
    assert detect(list(reversed(events)), "H") == found
    assert [TYPOLOGIES.index(n) for n in names(found)] == sorted(
        TYPOLOGIES.index(n) for n in names(found)
    )
    assert found[0].to_dict()["typology"] == "fan-out"


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="min_fan"):
        detect([], "A", min_fan=1)


def test_tight_caps_stay_consistent() -> None:
    events = [
        *scatter_gather("S", ["M1", "M2", "M3"], "T"),
        *stack([["A1", "A2"], ["B1", "B2"], ["C1", "C2"]]),
        *cycle("WXYZ"),
        *gather_scatter(["P1", "P2"], "H", ["Q1", "Q2"]),
    ]
    store = NetworkxGraphStore()
    store.add_transactions(events)
    accounts = sorted({x for e in events for x in (e.sender.node_id, e.receiver.node_id)})
    for cap in (1, 2, 3):
        for a in accounts:
            for m in detect_typologies(store, a, neighbor_cap=cap):
                assert m.typology in TYPOLOGIES and m.accounts and m.event_ids
                assert set(m.event_ids) <= {e.event_id for e in events}
