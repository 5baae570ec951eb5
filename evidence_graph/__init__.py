"""Evidence graph: the transaction graph behind one GraphStore interface (embedded networkx or
Neo4j), multi-hop evidence traces, graph features and laundering typologies.

This package owns:

* :class:`GraphStore` and its edge record :class:`GraphEdge` (``store``): accounts are nodes,
  each transaction a directed edge keyed by its event id; writes are idempotent.
* The backends: :class:`NetworkxGraphStore` (in memory, or file-backed JSON lines shared across
  processes) and :class:`Neo4jGraphStore` (a Neo4j 5 server; the driver is imported on first use).
  :func:`open_store` picks one from a URL.
* :func:`follow_money` (``follow``): the temporal BFS of traces -- downstream or upstream, money only
  flowing forward in time, per-hop horizon, fan-out caps, hubs, global budgets (:class:`Budget`)
  -- that traces, the analyst queries and the graph features' reach run. Two searches answer
  other questions and are not it: the typology detectors enumerate several time-ordered paths
  per account (``typologies._paths``: cycles and chains, judged path by path), and the chain
  feature judges each inflow alone (``graph_features``, its docstring says why).
* :func:`trace_evidence`: a search written down as an :class:`~auditflow.records.EvidenceTrace`
  with the same ``trace_id`` on any backend.
* :func:`graph_features` (:data:`GRAPH_FEATURE_NAMES`, :data:`GRAPH_FEATURE_DESCRIPTIONS`),
  :func:`detect_typologies` (:class:`TypologyMatch`, :data:`TYPOLOGIES`), and the analyst's
  :func:`money_paths` and :func:`neighborhood` (``queries``).

>>> with open_store("memory:") as store:
...     trace_evidence(store, "010/A").nodes[0].hop_depth
0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from auditflow.graph_url import graph_backend  # the URL rule Settings validates with
from evidence_graph.embedded import NetworkxGraphStore
from evidence_graph.graph_features import (
    GRAPH_FEATURE_DESCRIPTIONS,
    GRAPH_FEATURE_NAMES,
    graph_features,
)
from evidence_graph.follow import Budget, follow_money
from evidence_graph.queries import money_paths, neighborhood
from evidence_graph.store import GraphEdge, GraphStore
from evidence_graph.trace import trace_evidence
from evidence_graph.typologies import TYPOLOGIES, TypologyMatch, detect_typologies

if TYPE_CHECKING:
    from evidence_graph.neo4j_store import Neo4jGraphStore

__all__ = [
    "Budget",
    "GRAPH_FEATURE_DESCRIPTIONS",
    "GRAPH_FEATURE_NAMES",
    "TYPOLOGIES",
    "GraphEdge",
    "GraphStore",
    "Neo4jGraphStore",
    "NetworkxGraphStore",
    "TypologyMatch",
    "detect_typologies",
    "follow_money",
    "graph_features",
    "money_paths",
    "neighborhood",
    "open_store",
    "trace_evidence",
]

def __getattr__(name: str) -> Any:
    if name == "Neo4jGraphStore":  # lazy: the driver takes half a second to import
        from evidence_graph.neo4j_store import Neo4jGraphStore

        return Neo4jGraphStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(url: str, **options: Any) -> GraphStore:
    """Open a store from a URL: ``memory:``, ``embedded:PATH`` or a Neo4j URI (``bolt://``,
    ``bolt+s://``, ``bolt+ssc://``, ``neo4j://``, ``neo4j+s://``, ``neo4j+ssc://``; see
    :mod:`auditflow.graph_url`). ``options`` go to the backend's constructor."""
    backend = graph_backend(url)  # ValueError naming the URL when it names no backend
    if backend == "memory":
        return NetworkxGraphStore(**options)
    if backend == "embedded":
        return NetworkxGraphStore(url.removeprefix("embedded:"), **options)
    from evidence_graph.neo4j_store import Neo4jGraphStore

    return Neo4jGraphStore(url, **options)
