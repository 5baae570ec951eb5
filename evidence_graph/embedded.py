"""The embedded backend: the graph in memory, optionally backed by a file.

In memory, each account keeps its outgoing and its incoming edges in cap order with their times
in integer microseconds beside them (kept sorted as edges arrive: an append when they come in
time order), so one frontier account's window is two bisections and a slice; every edge carries
its time and amounts as integers (:class:`~evidence_graph.store.GraphEdge`), computed once when
it is loaded. A networkx ``MultiDiGraph`` view (:attr:`NetworkxGraphStore.graph`) is built only
when asked for: keeping one per edge cost memory and load time and no query read it.

With a ``path`` the store is the file: an append-only JSON-lines log, one
:meth:`TransactionEvent.to_json` per line. Opening loads it; :meth:`NetworkxGraphStore.flush`
(also run by :meth:`~NetworkxGraphStore.close` and every ``flush_every`` new events) appends the
buffered new events under an exclusive ``flock`` and fsyncs; :meth:`~NetworkxGraphStore.reload`
reads whatever other processes appended since. So the stream job writes and the analyst CLI or
the deep-path worker, each with its own store on the same path, see the same graph. Replayed or
duplicated lines are harmless: loading is idempotent on ``event_id`` like every write.
A reader sees new events only when it calls ``reload()`` (or opens the file anew). One store
object is meant for one thread; processes share the file, not the object.

Durability and crashes:

* **When ``flush()`` returns, the events are durable**: written, then ``fsync``-ed before the lock
  is released (and the folder fsync-ed once per store, so a newly created file's name survives
  too). The stream job relies on this: its graph writer calls ``add_transactions`` then
  ``flush()`` per batch. Events not yet flushed (at most ``flush_every``) live only in memory.
  With ``fsync=False`` (tests, benchmarks) a returned ``flush()`` survives the death of the
  process (the bytes are in the OS page cache) but not of the machine.
* **A torn write is cut away.** A writer killed inside ``flush()`` can leave a last line without
  its newline. Readers never load such a line (it may be a live writer mid-append), and the next
  ``flush()`` by any process, holding the lock (so no live writer can be mid-append), truncates
  the file back to its last newline before appending: those bytes were never acknowledged. The
  bytes cut are counted in :attr:`NetworkxGraphStore.discarded_bytes` and logged as a warning.
  Whole lines of an interrupted flush stay: they are valid events, and a retry writes them again
  harmlessly. (A machine crash on a file system that can leave garbage inside unsynced whole lines
  is not covered: a malformed complete line raises ``ValueError`` naming it.)

Why a JSON-lines log rather than SQLite in WAL mode: ``bench/embedded_store.py`` measures both
on the same events. Queried in place, SQLite opens at once where this store parses the whole
file (about 7 s for 200k events on a 2-core machine), but its traces and neighbour batches are
5-13x slower and its writes about 2.5x slower; kept as a log only, it loads no faster (the
parsing dominates). Traces and graph features are what the deep path runs per alert, so the log
stays; past a few million events, use Neo4j.

>>> store = NetworkxGraphStore()
>>> store.node_count(), store.edge_count()
(0, 0)
"""

from __future__ import annotations

import fcntl
import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx

from auditflow.records import TransactionEvent
from evidence_graph.store import (
    Direction,
    Expansion,
    GraphEdge,
    GraphStore,
    MicrosExpansion,
    to_micros,
)

DEFAULT_FLUSH_EVERY = 10_000
_HEAD_BYTES = 256
_TAIL_CHUNK = 1 << 16
_NONE: tuple[list[int], list[GraphEdge]] = ([], [])  # a node without edges (never written to)

_log = logging.getLogger(__name__)


class NetworkxGraphStore(GraphStore):
    """In-process graph store; ``path=None`` keeps it in memory only."""

    backend = "networkx"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        flush_every: int = DEFAULT_FLUSH_EVERY,
        fsync: bool = True,
    ) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every={flush_every!r}: expected a positive int")
        self.path = Path(path) if path is not None else None
        self.flush_every = flush_every
        self.fsync = fsync
        self._closed = False
        self._dir_synced = False
        #: bytes of torn writes (a final line without its newline) this store's flushes cut away
        self.discarded_bytes = 0
        self._reset()
        self._pending: list[str] = []
        if self.path is not None:
            self.reload()

    # -- state ---------------------------------------------------------------------------------

    def _reset(self) -> None:
        self._graph: nx.MultiDiGraph | None = None  # built on first use of .graph
        self._nodes: dict[str, None] = {}  # every account an edge touches, in arrival order
        self._edges: dict[str, GraphEdge] = {}
        # node -> (edge times in microseconds, edges), both in cap order, kept sorted as edges
        # arrive (an append when they come in time order); "both" is merged from the two on
        # first use and dropped when a node changes
        self._out: dict[str, tuple[list[int], list[GraphEdge]]] = {}
        self._in: dict[str, tuple[list[int], list[GraphEdge]]] = {}
        self._both: dict[str, tuple[list[int], list[GraphEdge]]] = {}
        self._offset = 0  # bytes of the file already loaded
        self._lines = 0  # lines of the file already loaded
        self._file_id: tuple[int, int] | None = None
        self._head = b""  # the file's first bytes as loaded: tells a replaced file apart

    @property
    def graph(self) -> nx.MultiDiGraph:
        """The graph as a networkx ``MultiDiGraph`` (edge key = event id, attribute ``edge`` =
        :class:`GraphEdge`), built on first use and kept up to date after. Read it, don't write
        it: writes go through :meth:`add_transactions`. Queries never use it (see the module
        docstring)."""
        if self._graph is None:
            g = nx.MultiDiGraph()
            g.add_nodes_from(self._nodes)
            for e in self._edges.values():
                g.add_edge(e.src, e.dst, key=e.event_id, edge=e)
            self._graph = g
        return self._graph

    def _insert(self, edge: GraphEdge) -> bool:
        if edge.event_id in self._edges:
            return False
        self._edges[edge.event_id] = edge
        self._nodes[edge.src] = None
        self._nodes[edge.dst] = None
        if self._graph is not None:
            self._graph.add_edge(edge.src, edge.dst, key=edge.event_id, edge=edge)
        t = edge.micros
        eid = edge.event_id
        for node, index in ((edge.src, self._out), (edge.dst, self._in)):
            entry = index.get(node)
            if entry is None:
                index[node] = ([t], [edge])
                continue
            stamps, edges = entry
            if t > stamps[-1] or (t == stamps[-1] and eid > edges[-1].event_id):
                stamps.append(t)
                edges.append(edge)
                continue
            i = bisect_right(stamps, t)
            while i > 0 and stamps[i - 1] == t and edges[i - 1].event_id > eid:
                i -= 1
            stamps.insert(i, t)
            edges.insert(i, edge)
        self._both.pop(edge.src, None)
        self._both.pop(edge.dst, None)
        return True

    # -- GraphStore ----------------------------------------------------------------------------

    def add_transactions(self, events: Iterable[TransactionEvent]) -> int:
        if self._closed:
            raise ValueError("store is closed")
        added = 0
        for ev in events:
            if self._insert(GraphEdge.from_event(ev)):
                added += 1
                if self.path is not None:
                    self._pending.append(ev.to_json() + "\n")
                    if len(self._pending) >= self.flush_every:
                        self.flush()
        return added

    def node_count(self) -> int:
        return len(self._nodes)

    def edge_count(self) -> int:
        return len(self._edges)

    def has_node(self, node_id: str) -> bool:
        return node_id in self._nodes

    def edges(self) -> Iterator[GraphEdge]:
        """Every stored edge, in event-id order."""
        for eid in sorted(self._edges):
            yield self._edges[eid]

    def _incident(self, node: str, direction: str) -> tuple[list[int], list[GraphEdge]]:
        """``node``'s edges in ``direction`` in cap order, with their times in microseconds."""
        if direction == "out":
            return self._out.get(node, _NONE)
        if direction == "in":
            return self._in.get(node, _NONE)
        cached = self._both.get(node)
        if cached is not None:
            return cached
        merged: dict[str, GraphEdge] = {}
        for index in (self._out, self._in):
            for e in index.get(node, _NONE)[1]:
                merged[e.event_id] = e  # a self-loop is listed once
        ordered = sorted(merged.values(), key=lambda e: (e.micros, e.event_id))
        cached = ([e.micros for e in ordered], ordered)
        if ordered:
            self._both[node] = cached
        return cached

    def _expand(
        self,
        requests: Sequence[Expansion],
        direction: Direction,
        limit: int | None,
        timeout: float | None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        return self._lookup(
            [(n, None if lo is None else to_micros(lo), None if hi is None else to_micros(hi))
             for n, lo, hi in requests],
            direction, limit,
        )

    def _expand_micros(
        self, requests: Sequence[MicrosExpansion], direction: str, limit: int | None, timeout: float | None
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        if type(self)._expand is not NetworkxGraphStore._expand:  # a subclass sees every query
            return super()._expand_micros(requests, direction, limit, timeout)
        return self._lookup(requests, direction, limit)

    def _lookup(
        self, requests: Sequence[MicrosExpansion], direction: str, limit: int | None
    ) -> dict[str, tuple[GraphEdge, ...]]:
        out: dict[str, tuple[GraphEdge, ...]] = {}  # in memory: nothing to time out
        index = self._out if direction == "out" else self._in if direction == "in" else None
        for node, lo_t, hi_t in requests:
            if index is not None:
                stamps, edges = index.get(node, _NONE)
            else:
                stamps, edges = self._incident(node, direction)
            lo = 0 if lo_t is None else bisect_left(stamps, lo_t)
            hi = len(stamps) if hi_t is None else bisect_right(stamps, hi_t)
            if limit is not None and hi > lo + limit:
                hi = lo + limit
            out[node] = tuple(edges[lo:hi])
        return out

    # -- persistence ---------------------------------------------------------------------------

    def reload(self) -> int:
        """Load what was appended to the file since the last load; return the new edge count.

        A file that was replaced or truncated is loaded again from the start (this store's
        unflushed events are kept). A trailing line without its newline (a writer mid-append, or
        a torn write that the next flush cuts away) is not loaded. A malformed complete line
        raises ``ValueError`` naming it.
        """
        if self.path is None:
            return 0
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            if self._offset:
                self._reload_from_scratch()
            return 0
        with fh:
            st = os.fstat(fh.fileno())
            file_id = (st.st_dev, st.st_ino)
            head = fh.read(len(self._head))
            if (
                (self._file_id is not None and file_id != self._file_id)
                or st.st_size < self._offset
                or head != self._head
            ):
                self._reload_from_scratch()
            self._file_id = file_id
            fh.seek(self._offset)
            data = fh.read()
            end = data.rfind(b"\n") + 1
            if len(self._head) < _HEAD_BYTES:  # only complete lines: a torn tail may be cut away
                fh.seek(0)
                self._head = fh.read(min(_HEAD_BYTES, self._offset + end))
        added = 0
        for raw in data[:end].splitlines():
            self._lines += 1
            if not raw.strip():
                continue
            try:
                ev = TransactionEvent.from_json(raw)
            except ValueError as e:
                raise ValueError(f"{self.path}:{self._lines}: {e}") from None
            added += self._insert(GraphEdge.from_event(ev))
        self._offset += end
        return added

    def _reload_from_scratch(self) -> None:
        pending = [TransactionEvent.from_json(line) for line in self._pending]
        self._reset()
        for ev in pending:
            self._insert(GraphEdge.from_event(ev))

    def flush(self) -> None:
        """Append buffered new events to the file under an exclusive lock, then fsync: when this
        returns they are durable (see the module docstring). A torn last line left by a writer
        that died is cut away first."""
        if self.path is None or not self._pending:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = "".join(self._pending).encode()
        with open(self.path, "a+b") as fh:  # appends always go to the end; reads see the tail
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                self._cut_torn_tail(fh)
                st = os.fstat(fh.fileno())
                contiguous = st.st_size == self._offset and (
                    self._file_id is None or self._file_id == (st.st_dev, st.st_ino)
                )
                fh.write(payload)
                fh.flush()
                if self.fsync:
                    os.fsync(fh.fileno())
                if contiguous:  # nobody else appended: our own lines count as loaded
                    self._offset = st.st_size + len(payload)
                    self._lines += len(self._pending)
                    self._file_id = (st.st_dev, st.st_ino)
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        if self.fsync and not self._dir_synced:
            self._fsync_dir()
        self._pending.clear()

    def _cut_torn_tail(self, fh: Any) -> None:
        """Truncate the file back to its last newline. Called holding the exclusive lock, so a
        final line without its newline is no live writer's: it is a torn, unacknowledged write."""
        size = os.fstat(fh.fileno()).st_size
        end = size
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            fh.seek(start)
            chunk = fh.read(end - start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                end = start + nl + 1
                break
            end = start
        if end == size:
            return
        os.ftruncate(fh.fileno(), end)
        self.discarded_bytes += size - end
        _log.warning("%s: cut %d bytes of a torn write (a final line without its newline) at byte %d",
                     self.path, size - end, end)

    def _fsync_dir(self) -> None:
        assert self.path is not None
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dir_synced = True

    def close(self) -> None:
        if not self._closed:
            self.flush()
            self._closed = True

    # -- pickle: a file-backed store reopens its file; an in-memory one carries its edges -------

    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": None if self.path is None else str(self.path),
            "flush_every": self.flush_every,
            "fsync": self.fsync,
            "edges": list(self.edges()) if self.path is None else [],
            "pending": list(self._pending),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], flush_every=state["flush_every"], fsync=state["fsync"])  # type: ignore[misc]
        for edge in state["edges"]:
            self._insert(edge)
        for line in state["pending"]:
            if self._insert(GraphEdge.from_event(TransactionEvent.from_json(line))):
                self._pending.append(line)

    def __repr__(self) -> str:
        where = "memory" if self.path is None else str(self.path)
        return f"NetworkxGraphStore({where}, nodes={self.node_count()}, edges={self.edge_count()})"
