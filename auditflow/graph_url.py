"""Graph store URLs, understood once: :func:`evidence_graph.open_store` opens them and
:class:`auditflow_app.settings.Settings` validates ``AUDITFLOW_GRAPH_URL`` with the same rule, so a URL
the settings accept is one the store opens.

=======================  =================================================================
``memory:``              an in-memory networkx store (this process only)
``embedded:PATH``        a networkx store kept in a JSON-lines file shared across processes
``bolt://HOST:PORT``     Neo4j over Bolt; also ``neo4j://`` (routing) and the TLS variants
                         ``+s`` (verified certificate) and ``+ssc`` (self-signed certificate)
=======================  =================================================================

>>> graph_backend("bolt+ssc://db.example:7687"), graph_backend("embedded:/tmp/g.jsonl")
('neo4j', 'embedded')
>>> graph_backend("embedded:")
Traceback (most recent call last):
ValueError: graph url 'embedded:': expected embedded:PATH (a file path after the colon)
"""

from __future__ import annotations

from typing import Literal

#: The Neo4j driver's URI schemes: direct (bolt) or routing (neo4j), plain, TLS with a verified
#: certificate (+s) or TLS accepting a self-signed certificate (+ssc).
BOLT_SCHEMES: tuple[str, ...] = ("bolt://", "bolt+s://", "bolt+ssc://", "neo4j://", "neo4j+s://", "neo4j+ssc://")

GraphBackend = Literal["memory", "embedded", "neo4j"]

EXPECTED = f"expected memory:, embedded:PATH or a Neo4j URI ({', '.join(s + 'HOST:PORT' for s in BOLT_SCHEMES)})"


def graph_backend(url: str) -> GraphBackend:
    """Which backend ``url`` names; ``ValueError`` naming the URL when it names none."""
    if url == "memory:":
        return "memory"
    if url.startswith("embedded:"):
        if not url.removeprefix("embedded:"):
            raise ValueError(f"graph url {url!r}: expected embedded:PATH (a file path after the colon)")
        return "embedded"
    if url.startswith(BOLT_SCHEMES):
        if not url.split("://", 1)[1]:
            raise ValueError(f"graph url {url!r}: expected a host after the scheme")
        return "neo4j"
    raise ValueError(f"graph url {url!r}: {EXPECTED}")
