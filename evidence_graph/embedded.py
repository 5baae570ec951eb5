"""The embedded backend: a networkx ``MultiDiGraph`` in memory, optionally backed by a file.

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
from datetime import datetime
from pathlib import Path
from typing import Any

import networkx as nx

from auditflow.records import TransactionEvent
from evidence_graph.store import (
    Direction,
    Expansion,
    GraphEdge,
    GraphStore,
)

DEFAULT_FLUSH_EVERY = 10_000
_HEAD_BYTES = 256
_TAIL_CHUNK = 1 << 16

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
        self._graph = nx.MultiDiGraph()
        self._edges: dict[str, GraphEdge] = {}
        # (node, direction) -> (edges in cap order, their timestamps); dropped when a node changes
        self._sorted: dict[tuple[str, str], tuple[list[GraphEdge], list[datetime]]] = {}
        self._offset = 0  # bytes of the file already loaded
        self._lines = 0  # lines of the file already loaded
        self._file_id: tuple[int, int] | None = None
        self._head = b""  # the file's first bytes as loaded: tells a replaced file apart

    @property
    def graph(self) -> nx.MultiDiGraph:
        """The underlying graph (edge key = event id, attribute ``edge`` = :class:`GraphEdge`).
        Read it, don't write it: writes go through :meth:`add_transactions`."""
        return self._graph

    def _insert(self, edge: GraphEdge) -> bool:
        if edge.event_id in self._edges:
            return False
        self._edges[edge.event_id] = edge
        self._graph.add_edge(edge.src, edge.dst, key=edge.event_id, edge=edge)
        for key in ((edge.src, "out"), (edge.src, "both"), (edge.dst, "in"), (edge.dst, "both")):
            self._sorted.pop(key, None)
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
        return self._graph.number_of_nodes()

    def edge_count(self) -> int:
        return len(self._edges)

    def has_node(self, node_id: str) -> bool:
        return self._graph.has_node(node_id)

    def edges(self) -> Iterator[GraphEdge]:
        """Every stored edge, in event-id order."""
        for eid in sorted(self._edges):
            yield self._edges[eid]

    def _incident(self, node: str, direction: str) -> tuple[list[GraphEdge], list[datetime]]:
        key = (node, direction)
        cached = self._sorted.get(key)
        if cached is not None:
            return cached
        g = self._graph
        edges: dict[str, GraphEdge] = {}
        if g.has_node(node):
            if direction in ("out", "both"):
                for _, _, e in g.out_edges(node, data="edge"):
                    edges[e.event_id] = e
            if direction in ("in", "both"):
                for _, _, e in g.in_edges(node, data="edge"):
                    edges[e.event_id] = e  # a self-loop is listed once
        ordered = sorted(edges.values(), key=lambda e: e.cap_key)
        cached = (ordered, [e.timestamp for e in ordered])
        self._sorted[key] = cached
        return cached

    def _expand(
        self,
        requests: Sequence[Expansion],
        direction: Direction,
        limit: int | None,
        timeout: float | None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        out: dict[str, tuple[GraphEdge, ...]] = {}  # in memory: nothing to time out
        for node, start, end in requests:
            edges, stamps = self._incident(node, direction)
            lo = 0 if start is None else bisect_left(stamps, start)
            hi = len(stamps) if end is None else bisect_right(stamps, end)
            if limit is not None:
                hi = min(hi, lo + limit)
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
