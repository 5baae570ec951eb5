"""Graph backends for the conformance suite: embedded in memory, embedded on a file, and Neo4j
(against the server ``deploy/services up neo4j`` starts: see ``services`` in tests/conftest.py;
its address and credentials come from the settings, as ``deploy/services env`` prints them)."""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evidence_graph import GraphStore, NetworkxGraphStore

needs_neo4j = pytest.mark.services("neo4j")


def open_neo4j_store(namespace: str) -> GraphStore:
    """A store on the settings' Neo4j server (URI and credentials) in ``namespace``."""
    from auditflow_app.settings import Settings
    from evidence_graph.neo4j_store import Neo4jGraphStore

    s = Settings()
    return Neo4jGraphStore(s.neo4j_uri, namespace=namespace, **s.neo4j_auth)


def new_neo4j_store() -> GraphStore:
    return open_neo4j_store("t" + uuid.uuid4().hex[:16])


class Backend:
    """Makes empty stores of one kind, and reopens them as another process would."""

    def __init__(self, kind: str, tmp: Path) -> None:
        self.kind = kind
        self.tmp = tmp
        self._made: list[GraphStore] = []
        self._n = 0

    def new(self) -> GraphStore:
        self._n += 1
        if self.kind == "memory":
            store: GraphStore = NetworkxGraphStore()
        elif self.kind == "file":
            store = NetworkxGraphStore(self.tmp / f"graph{self._n}.jsonl")
        else:
            store = new_neo4j_store()
        self._made.append(store)
        return store

    def reopen(self, store: GraphStore) -> GraphStore:
        """A second handle on the same graph: pickled for memory, a fresh open otherwise."""
        if self.kind == "memory":
            other = pickle.loads(pickle.dumps(store))
        elif self.kind == "file":
            assert isinstance(store, NetworkxGraphStore)
            store.flush()
            other = NetworkxGraphStore(store.path)
        else:
            other = pickle.loads(pickle.dumps(store))  # reconnects to the same namespace
        self._made.append(other)
        return other

    def cleanup(self) -> None:
        for store in self._made:
            store.close()
        if self.kind == "neo4j":
            for ns in sorted({s.namespace for s in self._made}):  # type: ignore[attr-defined]
                with open_neo4j_store(ns) as s:
                    s.drop()


BACKENDS = ["memory", "file", pytest.param("neo4j", marks=needs_neo4j)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = Backend(request.param, tmp_path)
    yield b
    b.cleanup()


@pytest.fixture
def store(backend: Backend) -> GraphStore:
    return backend.new()


@pytest.fixture(scope="session")
def neo4j_factory() -> Callable[[], GraphStore]:
    """Makes a Neo4j store in a fresh namespace (the caller drops it)."""
    return new_neo4j_store
