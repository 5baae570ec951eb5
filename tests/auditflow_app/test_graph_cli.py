"""``auditflow graph trace|paths|neighborhood|typology`` on a hand-built graph: JSON against what
the graph holds, tables that name what they found, bad arguments refused with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditflow_app import cli
from auditflow.money import Money, usd_cents
from evidence_graph import NetworkxGraphStore
from evidence_graph.testing import acct, tx

runner = CliRunner()
DAY = 24 * 60


def usd(d: float) -> Money:
    return Money("US Dollar", round(d * 100))


EVENTS = [
    # A -> B -> D and A -> C -> D in time order; A -> E -> D with E paying before it was paid
    tx("ab", "A", "B", 10, amount=usd(5000)), tx("bd", "B", "D", 20, amount=usd(4900)),
    tx("ac", "A", "C", 11, amount=usd(3000)), tx("cd", "C", "D", 30, amount=usd(2950)),
    tx("ae", "A", "E", 40, amount=usd(1000)), tx("ed", "E", "D", 35, amount=usd(990)),
    # a cycle K -> L -> M -> K passing the money on, with the members' ordinary life before it
    tx("kl", "K", "L", 100, amount=usd(9000)), tx("lm", "L", "M", 200, amount=usd(8800)),
    tx("mk", "M", "K", 300, amount=usd(8600)),
    *(tx(f"life-{n}-{k}", n, "GROCER", -10 * DAY + k * DAY, amount=usd(60 + k)) for n in "KLM" for k in range(4)),
    # the ordinary life of the scatter-gather's intermediates before it: habits to judge
    # their passing the money on by (accounts with no history at all give no evidence either way)
    *(tx(f"life-{n}-{k}", n, "GROCER", -10 * DAY + k * DAY, amount=usd(60 + k)) for n in "BC" for k in range(4)),
]


@pytest.fixture
def run_dir(tmp_path) -> Path:
    store = NetworkxGraphStore(tmp_path / "graph.jsonl")
    store.add_transactions(EVENTS)
    store.close()
    return tmp_path


def invoke(run_dir: Path, *args: str):
    result = runner.invoke(cli.app, ["graph", *args, "--out", str(run_dir)])
    return result


def as_json(run_dir: Path, *args: str):
    result = invoke(run_dir, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_trace_follows_the_money_in_time_order(run_dir) -> None:
    t = as_json(run_dir, "trace", acct("A"))
    depths = {n: d for n, d, _, _ in t["nodes"]}
    assert depths == {acct("A"): 0, acct("B"): 1, acct("C"): 1, acct("E"): 1, acct("D"): 2}
    paths = {n: p for n, _, _, p in t["nodes"]}
    assert paths[acct("D")] == ["ab", "bd"]  # the earliest money reaching D; E paid D before it was paid
    assert "ed" not in {e[0] for e in t["edges"]}
    t = as_json(run_dir, "trace", acct("D"), "--direction", "in", "--hops", "1")
    assert {n for n, *_ in t["nodes"]} == {acct(x) for x in "DBCE"}
    table = invoke(run_dir, "trace", acct("A"))
    assert table.exit_code == 0 and acct("D") in table.output and "ab > bd" in table.output


def test_paths_are_time_ordered(run_dir) -> None:
    paths = as_json(run_dir, "paths", acct("A"), acct("D"))
    assert [[e["event_id"] for e in p] for p in paths] == [["ab", "bd"], ["ac", "cd"]]
    assert paths[0][0]["amount"] == "5000.00" and paths[0][0]["currency"] == "US Dollar"
    assert as_json(run_dir, "paths", acct("D"), acct("A")) == []
    table = invoke(run_dir, "paths", acct("A"), acct("D"))
    assert "2 paths" in table.output


def test_neighborhood_counts_and_sums(run_dir) -> None:
    got = as_json(run_dir, "neighborhood", acct("D"))
    want = {}
    for e in EVENTS:
        if acct("D") in (e.sender.node_id, e.receiver.node_id):
            other = e.sender.node_id if e.receiver.node_id == acct("D") else e.receiver.node_id
            want[other] = want.get(other, 0) + usd_cents(e.amount_paid)
    assert {r["counterparty"]: r["received_usd_cents"] for r in got["counterparties"]} == want
    assert [r["counterparty"] for r in got["counterparties"]] == sorted(want, key=lambda k: -want[k])
    assert not got["truncated"]


def test_typology_finds_the_cycle_once_from_each_member(run_dir) -> None:
    for member in "KLM":
        (m,) = as_json(run_dir, "typology", acct(member))
        assert m["typology"] == "cycle" and m["event_ids"] == ["kl", "lm", "mk"]
        assert m["hops"] == [["kl"], ["lm"], ["mk"]]
    # A -> {B, C} -> D passing the money on is a scatter-gather; E paid D before A paid E: not in it
    (m,) = as_json(run_dir, "typology", acct("A"))
    assert m["typology"] == "scatter-gather" and m["event_ids"] == ["ab", "ac", "bd", "cd"]
    assert "cycle" in invoke(run_dir, "typology", acct("K")).output


@pytest.mark.parametrize("args", [
    ["trace", "001/A", "--direction", "sideways"],
    ["trace", "001/A", "--start", "yesterday"],
    ["paths", "001/A", "001/A"],
    ["trace", "001/A", "--start", "2022-09-02T00:00", "--end", "2022-09-01T00:00"],
])
def test_bad_arguments_exit_2(run_dir, args) -> None:
    result = invoke(run_dir, *args)
    assert result.exit_code == 2, result.output
