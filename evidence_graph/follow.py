"""Following the money: the temporal breadth-first search of traces, queries and graph features.

:func:`follow_money` searches the graph from a root account, hop by hop, **downstream**
(``direction="out"``: where the money went) or **upstream** (``"in"``: where it came from). Traces
(:mod:`evidence_graph.trace`), the analyst's paths (:mod:`evidence_graph.queries`) and the cycle
graph feature (:mod:`evidence_graph.graph_features`) call it; the typology detectors enumerate
several paths per account and judge each (:func:`evidence_graph.typologies._paths`), which this
search, one path per account, does not. It reads the graph only through
:meth:`GraphStore.expand`, one query per hop for the whole frontier, so every backend gives the
same answer.

Money only flows forward in time
    Every account carries a time: downstream, when money first reached it (the root: ``start``);
    upstream, when it last sent money on towards the root (the root: ``end``). An account is
    expanded over the transfers **not earlier** than its time and at most ``hop_horizon`` later
    (upstream: not later, at most ``hop_horizon`` earlier), inside ``[start, end]``. So along every
    path the transfers are in time order (times have minute resolution: the same minute counts
    as in order), each within the horizon of the one before. An account reached again at a later
    hop with an *earlier* arrival (upstream: a later departure) is expanded again with that time
    (a longer path may carry money that a shorter, later one cannot), so without a horizon and
    caps depths are exactly the fewest hops of a time-ordered path (with a horizon, an account's
    window starts at its earliest arrival); an account is expanded again only for a strictly
    earlier time, so no path repeats an account, and the search ends after ``max_hops`` (at most
    5) hops.

Amount consistency (``amount_tolerance``, off when ``None``)
    What an account passes on cannot exceed what reached it: its transfers are taken in time order
    (upstream: latest first) while their running total stays within what arrived at that hop
    (upstream: what it sent towards the root) times ``1 + amount_tolerance``, compared in US cents
    (:func:`auditflow.money.usd_cents`); a transfer that does not fit is dropped (cut ``amount``).
    The root is limited only by ``root_amount`` when given. ``min_share`` (off when ``None``)
    follows only transfers that each carry at least that share of what arrived (upstream: of
    what was sent on): the bulk of the money, as a layering chain moves it.

Fan-out cap: the most relevant transfers
    Of an account's candidate transfers at most ``fanout_cap`` are followed: the most relevant,
    ``usd_cents / (1 + hours between the account's time and the transfer)``; ties go to the
    closer transfer, then the smaller event id (cut ``fan-out cap``). Without a time (a root
    without a window) the first candidate is the reference.

Hubs, budgets and cuts
    An account with more than ``hub_degree`` candidate transfers in its window is a **hub**: it is
    reported (it is reached, and listed in ``hubs``) but not expanded (cut ``hub``) -- the root is
    still expanded, over its ``hub_degree`` earliest candidates. Global budgets bound the whole
    search: ``max_nodes`` accounts, ``max_edges`` transfers, ``max_seconds`` of wall time (the
    remaining time is the backend's query timeout). Reaching one stops the search there (cuts
    ``node budget``, ``edge budget``, ``time budget``). Every cut names its hop, account and what
    it dropped; the result is deterministic except for the time budget.

Self-transfers move no money between accounts and are never followed.

>>> from evidence_graph.embedded import NetworkxGraphStore
>>> from evidence_graph.testing import chain, tx
>>> store = NetworkxGraphStore()
>>> _ = store.add_transactions([*chain("ABC"), tx("early", "B", "D", -5)])
>>> flow = follow_money(store, "001/A")
>>> [(n.node_id, n.hop_depth, [e.event_id for e in n.path]) for n in flow.nodes.values()]
[('001/A', 0, []), ('001/B', 1, ['ch0']), ('001/C', 2, ['ch0', 'ch1'])]
"""

from __future__ import annotations

import heapq
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

from auditflow.limits import (
    DEFAULT_FANOUT_CAP,
    DEFAULT_HUB_DEGREE,
    DEFAULT_TRACE_MAX_EDGES,
    DEFAULT_TRACE_MAX_NODES,
    DEFAULT_TRACE_MAX_SECONDS,
    MAX_TRACE_HOPS,
)
from auditflow.money import Money, usd_cents
from auditflow.records import TraceCut
from auditflow.typologies import HOP_HORIZON, passes_on
from evidence_graph.store import (
    MICROS_PER_MINUTE,
    Direction,
    GraphEdge,
    GraphQueryTimeout,
    GraphStore,
    MicrosExpansion,
    check_window,
    to_micros,
)

__all__ = ["Budget", "MoneyFlow", "Reached", "follow_money", "pass_through_path"]

FLOW_DIRECTIONS = ("out", "in")
_UNSEEN = object()
_MICROSECOND = timedelta(microseconds=1)


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r}: expected a positive int")


@dataclass(frozen=True, slots=True)
class Budget:
    """Global bounds of one search (see the module docstring); ``max_seconds=None``: no clock."""

    max_nodes: int = DEFAULT_TRACE_MAX_NODES
    max_edges: int = DEFAULT_TRACE_MAX_EDGES
    max_seconds: float | None = DEFAULT_TRACE_MAX_SECONDS

    def __post_init__(self) -> None:
        _positive_int("max_nodes", self.max_nodes)
        _positive_int("max_edges", self.max_edges)
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"max_seconds={self.max_seconds!r}: expected a positive number or None")


UNBOUNDED = Budget(max_nodes=10**12, max_edges=10**12, max_seconds=None)


@dataclass(slots=True)
class Reached:
    """An account the money reached: first at ``hop_depth`` hops, from ``upstream_ids`` (the
    accounts one hop closer that reached it then), explained by ``path`` (the time-ordered
    transfers from the root; upstream: from it to the root); ``at`` is its time on that path."""

    node_id: str
    hop_depth: int
    upstream_ids: tuple[str, ...]
    path: tuple[GraphEdge, ...]
    at: datetime | None


@dataclass(frozen=True, slots=True)
class MoneyFlow:
    """What :func:`follow_money` found: ``nodes`` in discovery order (the root first), ``edges``
    (event id -> (edge, the hop it was first crossed at)), ``hubs`` and ``cuts``."""

    root: str
    direction: str
    nodes: dict[str, Reached]
    edges: dict[str, tuple[GraphEdge, int]]
    hubs: tuple[str, ...] = ()
    cuts: tuple[TraceCut, ...] = ()

    @property
    def truncated(self) -> bool:
        return bool(self.cuts)


@dataclass(slots=True)
class _Visit:
    """One account to expand at the next hop, with the time and amount that reached it."""

    node: str
    at: int | None  # its time, in microseconds since 1970 (store.to_micros); None: unbounded
    path: tuple[GraphEdge, ...]
    arrived: int | None  # US cents that reached it at this hop (None: no amount limit)


def _window_after(at: int | None, start_t: int | None, end_t: int | None,
                  horizon: int | None) -> tuple[int | None, int | None]:
    """Downstream: the transfers an account at time ``at`` can pass money on with, from ``at`` to
    ``horizon`` later, inside ``[start_t, end_t]`` (microseconds; ``None``: unbounded)."""
    lo = at if at is not None else start_t
    hi = end_t if at is None or horizon is None else at + horizon
    if end_t is not None and hi is not None and hi > end_t:
        hi = end_t
    return lo, hi


def _window_before(at: int | None, start_t: int | None, end_t: int | None,
                   horizon: int | None) -> tuple[int | None, int | None]:
    """Upstream: the transfers that can have funded an account sending at ``at``, from ``horizon``
    before ``at`` to ``at``, inside ``[start_t, end_t]`` (microseconds; ``None``: unbounded)."""
    hi = at if at is not None else end_t
    lo = start_t if at is None or horizon is None else at - horizon
    if start_t is not None and lo is not None and lo < start_t:
        lo = start_t
    return lo, hi


def _append(path: tuple[GraphEdge, ...], e: GraphEdge) -> tuple[GraphEdge, ...]:
    return path + (e,)


def _prepend(path: tuple[GraphEdge, ...], e: GraphEdge) -> tuple[GraphEdge, ...]:
    return (e,) + path


def _reversed_list(edges: Sequence[GraphEdge]) -> list[GraphEdge]:
    return list(reversed(edges))


_T = TypeVar("_T")


def _window_start(start: _T, end: _T) -> _T:
    return start


def _window_end(start: _T, end: _T) -> _T:
    return end


@dataclass(frozen=True, slots=True)
class _Direction:
    """Which way the money is followed, as the accessors that differ between downstream
    (``"out"``: where the money went) and upstream (``"in"``: where it came from).

    *Flow order* is the order the money moves in along a path: downstream, time order (from the
    root); upstream, reverse time order (from the root back to where the money came from). Of a
    transfer the search crosses, *here* is the end at the account being expanded, *next* the end
    at the account it leads to."""

    name: Direction  # the store's expansion direction: "out" or "in"
    downstream: bool
    #: the account a transfer leads to: its receiver (upstream: its sender)
    next_account: Callable[[GraphEdge], str]
    #: US cents at the account being expanded: what it paid (upstream: what it received)
    cents_here: Callable[[GraphEdge], int]
    #: US cents at the next account: what it received (upstream: what it paid)
    cents_next: Callable[[GraphEdge], int]
    #: whether time ``a`` comes strictly before time ``b`` in flow order: ``a < b`` (upstream: ``a > b``)
    before: Callable[[int, int], bool]
    #: of a window's bounds (start, end), the root's time: the start (upstream: the end)
    root_bound: Callable[[Any, Any], Any]
    #: (at, start, end, horizon) -> (lo, hi): the window an account at time ``at`` is expanded over
    window: Callable[[int | None, int | None, int | None, int | None], tuple[int | None, int | None]]
    #: of time-ordered transfers, the first in flow order: the earliest (upstream: the latest)
    first: Callable[[Sequence[GraphEdge]], GraphEdge]
    #: of a path, the transfer that reached its far account: its last (upstream: its first)
    last: Callable[[Sequence[GraphEdge]], GraphEdge]
    #: a path, one transfer further from the root: appended (upstream: prepended)
    extend: Callable[[tuple[GraphEdge, ...], GraphEdge], tuple[GraphEdge, ...]]
    #: time-ordered transfers in flow order, as a list (upstream: reversed; again: back in time order)
    in_flow_order: Callable[[Sequence[GraphEdge]], list[GraphEdge]]


_DOWNSTREAM = _Direction(
    name="out", downstream=True, next_account=attrgetter("dst"), cents_here=attrgetter("paid_cents"),
    cents_next=attrgetter("received_cents"), before=operator.lt, root_bound=_window_start, window=_window_after,
    first=itemgetter(0), last=itemgetter(-1), extend=_append, in_flow_order=list,
)
_UPSTREAM = _Direction(
    name="in", downstream=False, next_account=attrgetter("src"), cents_here=attrgetter("received_cents"),
    cents_next=attrgetter("paid_cents"), before=operator.gt, root_bound=_window_end, window=_window_before,
    first=itemgetter(-1), last=itemgetter(0), extend=_prepend, in_flow_order=_reversed_list,
)
_DIRECTIONS: dict[str, _Direction] = {d.name: d for d in (_DOWNSTREAM, _UPSTREAM)}


def _rank_key(e: GraphEdge, ref: int, downstream: bool) -> tuple[float, int, str]:
    """Sort key, most relevant first: the amount in US cents discounted by the hours after
    (upstream: before) ``ref`` (microseconds); ties: the closer transfer, then the event id."""
    # the same float operations as ``(e.timestamp - ref) / timedelta(minutes=1)``: an exact
    # integer count of microseconds divided by 60e6
    minutes = (e.micros - ref) / MICROS_PER_MINUTE
    if not downstream:
        minutes = -minutes
    return (-e.paid_cents / (1.0 + minutes / 60.0), int(minutes), e.event_id)


def follow_money(
    store: GraphStore,
    root: str,
    direction: str = "out",
    *,
    max_hops: int = MAX_TRACE_HOPS,
    start: datetime | None = None,
    end: datetime | None = None,
    hop_horizon: timedelta | None = None,
    fanout_cap: int = DEFAULT_FANOUT_CAP,
    amount_tolerance: float | None = None,
    min_share: float | None = None,
    root_amount: Money | None = None,
    hub_degree: int | None = DEFAULT_HUB_DEGREE,
    budget: Budget = Budget(),
    horizon_from_root: bool = True,
    stop_at: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> MoneyFlow:
    """Follow the money from ``root`` (see the module docstring). ``stop_at``: stop after the hop
    that first reaches this account (a shortest-path question). ``horizon_from_root=False``
    expands the root over the whole window (a shape around it, not after one transfer)."""
    if direction not in FLOW_DIRECTIONS:
        raise ValueError(f"direction={direction!r}: expected out (downstream) or in (upstream)")
    if isinstance(max_hops, bool) or not isinstance(max_hops, int) or not 1 <= max_hops <= MAX_TRACE_HOPS:
        raise ValueError(f"max_hops={max_hops!r}: expected an int from 1 to {MAX_TRACE_HOPS}")
    _positive_int("fanout_cap", fanout_cap)
    if hub_degree is not None:
        _positive_int("hub_degree", hub_degree)
    if hop_horizon is not None and hop_horizon < timedelta(0):
        raise ValueError(f"hop_horizon={hop_horizon!r}: expected a non-negative duration or None")
    if amount_tolerance is not None and not amount_tolerance >= 0:
        raise ValueError(f"amount_tolerance={amount_tolerance!r}: expected >= 0 or None")
    if min_share is not None and not 0 < min_share <= 1:
        raise ValueError(f"min_share={min_share!r}: expected a share in (0, 1] or None")
    check_window(start, end)

    # Everything below compares integers: times in microseconds since 1970 (exactly the
    # datetimes' order), amounts in US cents (exactly usd_cents), each computed once per edge.
    way = _DIRECTIONS[direction]
    next_account, cents_next, before, extend = way.next_account, way.cents_next, way.before, way.extend
    deadline = None if budget.max_seconds is None else clock() + budget.max_seconds
    start_t = None if start is None else to_micros(start)
    end_t = None if end is None else to_micros(end)
    horizon = None if hop_horizon is None else hop_horizon // _MICROSECOND
    root_t = way.root_bound(start_t, end_t)
    best: dict[str, int | None] = {root: root_t}  # None: the root, unbounded
    nodes: dict[str, Reached] = {root: Reached(root, 0, (), (), way.root_bound(start, end))}
    edges: dict[str, tuple[GraphEdge, int]] = {}
    hubs: dict[str, None] = {}
    cuts: list[TraceCut] = []
    limit = None if hub_degree is None else hub_degree + 1
    frontier = [_Visit(root, root_t, (), None if root_amount is None else usd_cents(root_amount))]
    stopped = False
    max_edges, max_nodes = budget.max_edges, budget.max_nodes
    by_amount = amount_tolerance is not None or min_share is not None

    for hop in range(1, max_hops + 1):
        if not frontier or stopped:
            break
        requests: list[MicrosExpansion] = []
        for v in frontier:
            at = None if hop == 1 and not horizon_from_root else v.at
            requests.append((v.node, *way.window(at, start_t, end_t, horizon)))
        remaining = None if deadline is None else deadline - clock()
        try:
            batch = store.expand_micros(requests, way.name, limit, timeout=remaining)
        except GraphQueryTimeout:
            cuts.append(TraceCut(hop, "", "time budget", len(frontier)))
            break
        last = hop == max_hops
        reached: dict[str, _Visit] = {}  # accounts to expand at the next hop, discovery order
        new: dict[str, list[str]] = {}  # accounts first reached at this hop -> who reached them
        new_dropped = 0
        for v in frontier:
            got = batch.get(v.node, ())
            if not got:
                continue
            cand = [e for e in got if e.src != e.dst]
            if hub_degree is not None and len(got) > hub_degree:
                hubs.setdefault(v.node)
                cuts.append(TraceCut(hop, v.node, "hub", len(got)))
                if v.node != root:
                    continue
                cand = cand[:hub_degree]
            if v.arrived is not None and by_amount:
                n = len(cand)
                if min_share is not None:  # only transfers carrying the bulk of the money on
                    floor = min_share * v.arrived
                    cand = [e for e in cand if way.cents_here(e) >= floor]
                if amount_tolerance is not None:
                    cand, _ = _fund(cand, v.arrived, amount_tolerance, way)
                if len(cand) < n:
                    cuts.append(TraceCut(hop, v.node, "amount", n - len(cand)))
            if not cand:
                continue
            n = len(cand)
            if (last and n <= fanout_cap and len(nodes) + len(new) >= max_nodes
                    and len(edges) + n <= max_edges
                    and not any(next_account(e) in new for e in cand)):
                # the last hop with the node budget spent: every transfer is crossed (no cap, no
                # edge budget), reaches an account seen at an earlier hop or is dropped, and its
                # rank decides nothing (the relevance sort is what the last hops of the largest
                # traces spent most of their time on)
                for e in cand:
                    if next_account(e) in nodes:
                        if e.event_id not in edges:
                            edges[e.event_id] = (e, hop)
                    else:
                        new_dropped += 1
                continue
            ref = v.at if v.at is not None else way.first(cand).micros
            if n > 1:
                cand = _most_relevant(cand, ref, way.downstream, fanout_cap)
            if n > fanout_cap:
                cuts.append(TraceCut(hop, v.node, "fan-out cap", n - fanout_cap))
            for i, e in enumerate(cand):
                w = next_account(e)
                eid = e.event_id
                crossed = eid in edges
                if not crossed and len(edges) >= max_edges:
                    cuts.append(TraceCut(hop, v.node, "edge budget", len(cand) - i))
                    stopped = True
                    break
                t = e.micros
                if w not in nodes:
                    ups = new.get(w)
                    if ups is None:
                        if len(nodes) + len(new) >= max_nodes:
                            new_dropped += 1
                            continue
                        new[w] = [v.node]
                    elif v.node not in ups:
                        ups.append(v.node)
                elif last:
                    if not crossed:
                        edges[eid] = (e, hop)
                    continue  # reached before, and nothing is expanded after the last hop
                if not crossed:
                    edges[eid] = (e, hop)
                prev = best.get(w, _UNSEEN)
                if prev is not _UNSEEN and (prev is None or not before(t, prev)):  # type: ignore[arg-type]
                    continue  # not earlier in flow order (upstream: not later) than before: nothing new to follow
                nxt = reached.get(w)
                if nxt is None or before(t, nxt.at):  # type: ignore[arg-type]
                    path = extend(v.path, e)
                    if nxt is None:
                        reached[w] = _Visit(w, t, path, cents_next(e))
                    else:
                        nxt.at, nxt.path, nxt.arrived = t, path, cents_next(e)
                elif t == nxt.at and nxt.arrived is not None:
                    nxt.arrived += cents_next(e)  # more money at the same time
            if stopped:
                break
        if new_dropped:
            cuts.append(TraceCut(hop, "", "node budget", new_dropped))
        for w, visit in reached.items():  # new accounts in discovery order (as in `new`)
            best[w] = visit.at
            ups = new.get(w)
            if ups is not None:  # first reached now: explained by its earliest (upstream: latest) path
                nodes[w] = Reached(w, hop, tuple(sorted(ups)), visit.path, way.last(visit.path).timestamp)
        frontier = list(reached.values())
        if stop_at is not None and stop_at in nodes:
            break
        if deadline is not None and clock() > deadline and hop < max_hops and frontier:
            cuts.append(TraceCut(hop + 1, "", "time budget", len(frontier)))
            break

    return MoneyFlow(root, direction, nodes, edges, tuple(hubs), tuple(cuts))


def _most_relevant(cand: list[GraphEdge], ref: int, downstream: bool, cap: int) -> list[GraphEdge]:
    """The ``cap`` most relevant of ``cand``, most relevant first (:func:`_rank_key`, written out
    here; keys are distinct: they end with the event id). A partial sort (``heapq.nsmallest``)
    where most are cut; below that a full sort of the keys is cheaper."""
    per_minute = MICROS_PER_MINUTE
    if downstream:
        keyed = [((-e.paid_cents / (1.0 + (m := (e.micros - ref) / per_minute) / 60.0), int(m), e.event_id), e)
                 for e in cand]
    else:
        keyed = [((-e.paid_cents / (1.0 + (m := -((e.micros - ref) / per_minute)) / 60.0), int(m), e.event_id), e)
                 for e in cand]
    if len(keyed) > 4 * cap:
        keyed = heapq.nsmallest(cap, keyed)
    else:
        keyed.sort()
        del keyed[cap:]
    return [e for _, e in keyed]


def _fund(
    cand: Sequence[GraphEdge], arrived: int, tolerance: float, way: _Direction
) -> tuple[list[GraphEdge], int]:
    """The transfers the money that arrived can pay for, taken in flow order (upstream: latest
    first): each is kept if the running total stays within ``arrived * (1 + tolerance)``. The
    kept ones come back in time order."""
    allowed = arrived * (1.0 + tolerance)
    kept, total = [], 0
    for e in way.in_flow_order(cand):
        amount = way.cents_here(e)
        if total + amount <= allowed:
            kept.append(e)
            total += amount
    return way.in_flow_order(kept), len(cand) - len(kept)


def pass_through_path(path: Sequence[GraphEdge]) -> bool:
    """Whether each transfer of a time-ordered ``path`` passes on the one before it
    (:func:`auditflow.typologies.passes_on`, US cents) within :data:`~auditflow.typologies.HOP_HORIZON`:
    a layering chain."""
    return all(passes_on(a.paid_cents, b.paid_cents)
               and a.timestamp <= b.timestamp <= a.timestamp + HOP_HORIZON
               for a, b in zip(path, path[1:]))
