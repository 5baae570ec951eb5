"""The Neo4j backend's frontier query, as the server plans and answers it (real server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evidence_graph import GraphStore
from evidence_graph.testing import tx

from .conftest import needs_neo4j, new_neo4j_store

pytestmark = needs_neo4j

#: Plan operators that read every account of the label instead of finding one by its id.
SCANS = ("NodeIndexScan", "NodeByLabelScan", "AllNodesScan", "NodeUniqueIndexScan")


@pytest.fixture
def store() -> Iterator[GraphStore]:
    s = new_neo4j_store()
    # a few hundred accounts: enough for a scan per frontier row to be a real cost
    s.add_transactions(tx(f"e{i}", f"A{i}", f"A{(i * 7 + 1) % 300}", i % 90) for i in range(600))
    try:
        yield s
    finally:
        s.drop()
        s.close()


def _operators(plan: dict) -> list[str]:
    name = plan["operatorType"].split("@")[0]
    return [name] + [op for child in plan.get("children", []) for op in _operators(child)]


@pytest.mark.parametrize("direction", ["out", "in", "both"])
def test_each_frontier_account_is_found_by_an_index_seek_not_a_scan(store: GraphStore, direction: str) -> None:
    text = store._read_query(direction, True)  # type: ignore[attr-defined]
    frontier = [[f"001/A{i}", 0, 10**9] for i in range(0, 300, 3)]
    result = store._driver.execute_query("EXPLAIN " + text, {"frontier": frontier, "limit": 201})  # type: ignore[attr-defined]
    ops = _operators(result.summary.plan)
    assert "NodeUniqueIndexSeek" in ops, " ".join(ops)
    assert not [op for op in ops if op in SCANS], ops
