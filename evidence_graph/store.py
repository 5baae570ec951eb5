"""The graph-store interface every backend implements, and the edge record they all return.

Accounts are nodes, identified by :attr:`AccountRef.node_id` (``"010/8000EBD30"``). Each
:class:`~auditflow.records.TransactionEvent` is one directed edge ``sender -> receiver`` keyed by
its ``event_id``: parallel edges between the same accounts and self-loops are kept. A node exists
once an edge touches it.

Every read goes through :meth:`GraphStore.expand`, which answers a whole BFS frontier at once,
each account with its own time window (the temporal search of :mod:`evidence_graph.follow` asks
for the transfers after the money reached each account), or :meth:`GraphStore.neighbors_batch`,
the same with one window for all, or :meth:`GraphStore.expand_micros`, :meth:`expand` with the
windows in integer microseconds (what the searches compute in: every :class:`GraphEdge` carries
its time in microseconds and its amounts in US cents as integers, computed once when it is made,
so the inner loops of the searches neither build datetimes nor touch Decimal). The contract
fixes what every backend returns, so the
algorithms written on top of it (traces, graph features, typologies) give identical answers on
every backend:

* time windows are inclusive at both ends: ``start <= edge.timestamp <= end``;
* a node's incident edges come in **cap order**: ``(timestamp, event_id)`` ascending;
* ``limit`` keeps the first ``limit`` edges of that order, per frontier node;
* with ``direction="both"`` a self-loop is listed once.

>>> from datetime import datetime
>>> from auditflow.money import Money
>>> from auditflow.records import AccountRef, TransactionEvent
>>> ev = TransactionEvent("tx-1", datetime(2022, 9, 1, 0, 20), AccountRef("010", "A"),
...     AccountRef("020", "B"), Money("Euro", 500), Money("Euro", 500), "Wire", False, 2)
>>> e = GraphEdge.from_event(ev)
>>> e.src, e.dst, e.other_end("020/B")
('010/A', '020/B', '010/A')
>>> e.to_trace_edge(hop=1).hop
1
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import TracebackType
from typing import Literal, Self

from auditflow.money import Money, usd_cents
from auditflow.records import EPOCH, AccountRef, TraceEdge, TransactionEvent

Direction = Literal["out", "in", "both"]
DIRECTIONS: tuple[str, ...] = ("out", "in", "both")

_MICROSECOND = timedelta(microseconds=1)
#: Microseconds per minute (edge times have minute resolution on every backend).
MICROS_PER_MINUTE = 60_000_000


def to_micros(ts: datetime) -> int:
    """``ts`` as integer microseconds since 1970-01-01 (exact: a datetime's own resolution), so
    windows and time order are integer comparisons that agree with comparing the datetimes."""
    return (ts - EPOCH) // _MICROSECOND


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """One transaction as the graph stores it (always written ``src -> dst``)."""

    event_id: str
    src: str
    dst: str
    amount_paid: Money
    amount_received: Money
    timestamp: datetime
    payment_format: str
    is_laundering: bool
    #: integer forms the searches compare and rank by, computed once when the edge is made (not
    #: part of the value: equality, hashing and repr ignore them): :attr:`timestamp` in
    #: microseconds since 1970-01-01 (:func:`to_micros`), the amounts in US cents (exactly
    #: :func:`auditflow.money.usd_cents`)
    micros: int = field(init=False, repr=False, compare=False)
    paid_cents: int = field(init=False, repr=False, compare=False)
    received_cents: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "micros", (self.timestamp - EPOCH) // _MICROSECOND)
        setattr_(self, "paid_cents", usd_cents(self.amount_paid))
        setattr_(self, "received_cents", usd_cents(self.amount_received))

    @classmethod
    def from_event(cls, ev: TransactionEvent) -> GraphEdge:
        return cls(
            event_id=ev.event_id,
            src=ev.sender.node_id,
            dst=ev.receiver.node_id,
            amount_paid=ev.amount_paid,
            amount_received=ev.amount_received,
            timestamp=ev.timestamp,
            payment_format=ev.payment_format,
            is_laundering=ev.is_laundering,
        )

    @property
    def cap_key(self) -> tuple[datetime, str]:
        """The order in which the fan-out cap keeps edges: earliest first, then by event id."""
        return (self.timestamp, self.event_id)

    def other_end(self, node_id: str) -> str:
        """The counterparty of ``node_id`` on this edge (``node_id`` itself for a self-loop)."""
        return self.dst if self.src == node_id else self.src

    def in_window(self, start: datetime | None, end: datetime | None) -> bool:
        return (start is None or self.timestamp >= start) and (end is None or self.timestamp <= end)

    def to_trace_edge(self, hop: int) -> TraceEdge:
        return TraceEdge(self.event_id, self.src, self.dst, self.amount_paid, self.timestamp, hop)

    def to_event(self, source_offset: int = -1) -> TransactionEvent:
        """Back to a record (the graph does not keep source offsets: pass one if known)."""
        return TransactionEvent(
            event_id=self.event_id,
            timestamp=self.timestamp,
            sender=AccountRef.from_node_id(self.src),
            receiver=AccountRef.from_node_id(self.dst),
            amount_received=self.amount_received,
            amount_paid=self.amount_paid,
            payment_format=self.payment_format,
            is_laundering=self.is_laundering,
            source_offset=source_offset,
        )


#: One account of a frontier and its own time window (``None``: unbounded on that side).
Expansion = tuple[str, "datetime | None", "datetime | None"]
#: The same with the window in integer microseconds since 1970-01-01 (:func:`to_micros`).
MicrosExpansion = tuple[str, "int | None", "int | None"]


class GraphQueryTimeout(TimeoutError):
    """A backend query ran past its timeout (the Neo4j transaction timeout)."""


def check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r}: expected one of {', '.join(DIRECTIONS)}")


def check_window(start: datetime | None, end: datetime | None) -> None:
    if start is not None and end is not None and start > end:
        raise ValueError(f"window start {start} is after its end {end}")


def check_limit(limit: int | None) -> None:
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit={limit!r}: expected a positive int or None")


class GraphStore(ABC):
    """A transaction graph: accounts as nodes, transactions as directed edges keyed by event id.

    Subclasses implement the five abstract methods; the single-node helpers are defined here on
    top of :meth:`neighbors_batch` so that they mean the same thing on every backend.
    """

    #: Short backend name recorded in :attr:`EvidenceTrace.backend`.
    backend: str = ""

    @abstractmethod
    def add_transactions(self, events: Iterable[TransactionEvent]) -> int:
        """Add events as edges; return how many were new. Idempotent on ``event_id``: an event
        whose id is already stored (or repeated in ``events``) is skipped, first write wins."""

    @abstractmethod
    def node_count(self) -> int: ...

    @abstractmethod
    def edge_count(self) -> int: ...

    @abstractmethod
    def has_node(self, node_id: str) -> bool: ...

    def neighbors_batch(
        self,
        frontier: Sequence[str],
        direction: Direction = "out",
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int | None = None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        """For each distinct node of ``frontier``, its edges in ``direction`` inside the window,
        in cap order, at most ``limit`` of them. Every frontier node is a key (unknown nodes and
        nodes without edges map to ``()``). Arguments are checked here, once for every backend."""
        check_direction(direction)
        check_window(start, end)
        check_limit(limit)
        return self._expand([(n, start, end) for n in dict.fromkeys(frontier)], direction, limit, None)

    def expand(
        self,
        requests: Sequence[Expansion],
        direction: Direction = "out",
        limit: int | None = None,
        *,
        timeout: float | None = None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        """For each ``(node, start, end)`` of ``requests`` (distinct nodes), its edges in
        ``direction`` inside its own window, in cap order, at most ``limit`` of them; every
        requested node is a key. ``timeout`` (seconds) bounds the query where the backend can
        (Neo4j: the transaction timeout), else :class:`GraphQueryTimeout`."""
        check_direction(direction)
        check_limit(limit)
        seen: set[str] = set()
        for node, start, end in requests:
            check_window(start, end)
            if node in seen:
                raise ValueError(f"expand: {node!r} requested twice")
            seen.add(node)
        if timeout is not None and not timeout > 0:
            raise GraphQueryTimeout(f"no time left for the query (timeout={timeout!r})")
        return self._expand(requests, direction, limit, timeout)

    def expand_micros(
        self,
        requests: Sequence[MicrosExpansion],
        direction: Direction = "out",
        limit: int | None = None,
        *,
        timeout: float | None = None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        """:meth:`expand` with each window in integer microseconds since 1970-01-01
        (:func:`to_micros`; ``None``: unbounded), the form the searches of
        :mod:`evidence_graph.follow` compute windows in. The caller guarantees distinct nodes and
        ``lo <= hi``. Arguments are checked here, once for every backend; backends override
        :meth:`_expand_micros` to skip the datetime round trip."""
        check_direction(direction)
        check_limit(limit)
        if timeout is not None and not timeout > 0:
            raise GraphQueryTimeout(f"no time left for the query (timeout={timeout!r})")
        return self._expand_micros(requests, direction, limit, timeout)

    def _expand_micros(
        self,
        requests: Sequence[MicrosExpansion],
        direction: Direction,
        limit: int | None,
        timeout: float | None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        """The backend's query for :meth:`expand_micros`, with arguments already checked; this
        default converts the windows and asks :meth:`_expand`, so both forms give the same answer."""
        return self._expand(
            [(n, None if lo is None else EPOCH + lo * _MICROSECOND, None if hi is None else EPOCH + hi * _MICROSECOND)
             for n, lo, hi in requests],
            direction, limit, timeout,
        )

    @abstractmethod
    def _expand(
        self,
        requests: Sequence[Expansion],
        direction: Direction,
        limit: int | None,
        timeout: float | None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        """The backend's query for :meth:`expand`, with arguments already checked."""

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Make the writes so far durable and visible to other readers (a no-op where every
        write already is)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (flush pending writes, close connections). Idempotent."""

    def out_edges(
        self, node_id: str, start: datetime | None = None, end: datetime | None = None
    ) -> tuple[GraphEdge, ...]:
        """Edges paid by ``node_id`` inside the window, in cap order."""
        return self.neighbors_batch([node_id], "out", start, end)[node_id]

    def in_edges(
        self, node_id: str, start: datetime | None = None, end: datetime | None = None
    ) -> tuple[GraphEdge, ...]:
        """Edges received by ``node_id`` inside the window, in cap order."""
        return self.neighbors_batch([node_id], "in", start, end)[node_id]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def unique_events(events: Iterable[TransactionEvent]) -> list[TransactionEvent]:
    """``events`` with repeated event ids dropped (first occurrence wins), order kept."""
    seen: set[str] = set()
    out: list[TransactionEvent] = []
    for ev in events:
        if ev.event_id not in seen:
            seen.add(ev.event_id)
            out.append(ev)
    return out
