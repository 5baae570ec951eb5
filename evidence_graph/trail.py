"""The money trail of one alerted transfer: where its money came from (**upstream**) and where it
went (**downstream**), amount by amount, as a :class:`~auditflow.records.MoneyTrail`.

A trace (:mod:`evidence_graph.trace`) follows every transfer an account made after the money
arrived, whatever its size; a trail follows the alerted money itself, so a 48,000 USD deposit is
not explained by the 8 CHF card payments the account also made.

Attribution: pro rata (proportional), not FIFO
    Each account is a pool. Its balance is what arrived in the window less what left; nothing
    is known before the window (an account's balance starts at zero at ``window_start``). Every
    transfer out takes the same share of every unit in the pool: if 40 % of what the pool holds
    is traced money, 40 % of each transfer out is. A transfer out larger than the pool takes the
    whole pool, the rest is older money (upstream: that part is ``held_cents``, not explained by
    the window). Pro rata, because money in an account is fungible and minutes tie: FIFO would
    decide by the order of transfers within a minute and by an opening balance nobody knows,
    and would call a transfer wholly clean or wholly traced where the pool was mixed. Upstream
    is the same attribution read backwards: the part of the alerted transfer that each earlier
    transfer into the subject still made up when it left, and so on back.

Time
    The window is ``horizon`` before and after the alerted transfer. Transfers are taken in time
    order; within a minute, a transfer into an account comes before one out of it (money can pass
    through within its minute), and a cycle of transfers inside one minute is broken by event id.

What is followed
    A transfer carrying at least ``min_share`` of the alerted amount is followed to its other
    end; the smaller ones are counted and totalled per side (``dropped``, ``small``), never listed. An
    account with more than ``hub_degree`` transfers in or out within the window is a **hub**
    (an exchange, a merchant, a payroll bank): the money reaching it is shown, not followed.
    ``max_hops`` from the subject each way; ``budget`` bounds accounts, transfers fetched and
    wall time (cuts ``hop limit``, ``node budget``, ``edge budget``, ``time budget``; the flows they
    left unfollowed are counted and totalled in ``dropped`` as ``limit``).

Amounts are exact shares (fractions of US cents at the reference rates of
:func:`auditflow.money.usd_cents`), rounded half-even to cents only when written down; a
transfer between currencies carries the same share of what was paid and of what was received.

>>> from evidence_graph.embedded import NetworkxGraphStore
>>> from evidence_graph.testing import tx
>>> from auditflow.money import Money
>>> usd = lambda d: Money("US Dollar", d * 100)
>>> store = NetworkxGraphStore()
>>> _ = store.add_transactions([tx("in", "X", "M", 0, amount=usd(300)), tx("alert", "A", "M", 1, amount=usd(100)),
...                             tx("out", "M", "B", 2, amount=usd(200))])
>>> trail = money_trail(store, store.out_edges("001/A")[0])
>>> trail.account("001/B").received_cents   # a quarter of the pool was the alerted money
5000
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from fractions import Fraction

from auditflow.limits import (
    DEFAULT_HUB_DEGREE,
    DEFAULT_TRACE_HORIZON,
    DEFAULT_TRAIL_HEADLINE,
    DEFAULT_TRAIL_MIN_SHARE,
    MAX_TRACE_HOPS,
)
from auditflow.money import round_half_even
from auditflow.records import (
    MoneyTrail,
    TraceCut,
    TrailAccount,
    TrailFlow,
    TransactionEvent,
    trail_id_for,
    ts_to_wire,
)
from evidence_graph.follow import Budget
from evidence_graph.store import GraphEdge, GraphQueryTimeout, GraphStore, to_micros

__all__ = ["DEFAULT_TRAIL_BUDGET", "DEFAULT_TRAIL_HEADLINE", "DEFAULT_TRAIL_MIN_SHARE", "flow_order", "money_trail"]

#: A trail fetches every transfer of each account it follows (the pools need them all).
DEFAULT_TRAIL_BUDGET = Budget(max_nodes=300, max_edges=30_000, max_seconds=5.0)

_ZERO = Fraction(0)
_ONE = Fraction(1)


def flow_order(edges: Iterable[GraphEdge]) -> list[GraphEdge]:
    """``edges`` (self-transfers left out) in the order money moves: by time; within one minute,
    a transfer into an account before the transfers out of it, the rest by event id (a cycle
    inside the minute is broken at its smallest event id).

    >>> from evidence_graph.testing import tx
    >>> es = [GraphEdge.from_event(e) for e in (tx("a", "B", "C", 0), tx("b", "A", "B", 0), tx("c", "C", "C", 0))]
    >>> [e.event_id for e in flow_order(es)]
    ['b', 'a']
    """
    by_time: dict[int, list[GraphEdge]] = defaultdict(list)
    for e in edges:
        if e.src != e.dst:
            by_time[e.micros].append(e)
    out: list[GraphEdge] = []
    for t in sorted(by_time):
        group = sorted(by_time[t], key=lambda e: e.event_id)
        if len(group) == 1:
            out.extend(group)
            continue
        into: dict[str, list[GraphEdge]] = defaultdict(list)
        out_of: dict[str, list[GraphEdge]] = defaultdict(list)
        for e in group:
            into[e.dst].append(e)
            out_of[e.src].append(e)
        waiting = {e.event_id: e for e in group}
        before = {e.event_id: len(into.get(e.src, ())) for e in group}
        ready = [eid for eid, n in before.items() if n == 0]
        heapq.heapify(ready)
        while waiting:
            eid = heapq.heappop(ready) if ready else min(waiting)
            e = waiting.pop(eid, None)
            if e is None:
                continue
            out.append(e)
            for nxt in out_of.get(e.dst, ()):
                if nxt.event_id in waiting:
                    before[nxt.event_id] -= 1
                    if before[nxt.event_id] == 0:
                        heapq.heappush(ready, nxt.event_id)
    return out


@dataclass(slots=True)
class _Pool:
    """One account's balance in the window: ``balance`` US cents, ``traced`` of them the alerted
    money (downstream), ``decay`` what is left of a unit that was in it at the start of ``epoch``
    (an epoch ends when a transfer out empties the pool)."""

    balance: int = 0
    traced: Fraction = _ZERO
    decay: Fraction = _ONE
    epoch: int = 0


@dataclass(slots=True)
class _Sweep:
    """What one pass over the window found: traced cents per transfer (paid side) each way, what
    stayed in each pool (downstream) and what older money paid (upstream)."""

    down: dict[str, Fraction] = field(default_factory=dict)
    up: dict[str, Fraction] = field(default_factory=dict)
    held: dict[str, Fraction] = field(default_factory=dict)
    older: dict[str, Fraction] = field(default_factory=dict)


def _sweep(order: Sequence[GraphEdge], pooled: set[str], root: GraphEdge) -> _Sweep:
    """Pro-rata attribution over ``order`` for the accounts in ``pooled`` (see the module
    docstring); other accounts are ends: money reaching them stays, money from them is theirs."""
    pools = {a: _Pool() for a in pooled}
    sent: dict[str, tuple[int, int, Fraction, int]] = {}  # eid -> (carried, pool before, decay, epoch)
    arrived: dict[str, tuple[Fraction, int]] = {}  # eid -> (decay, epoch) of its receiver's pool
    res = _Sweep()
    root_at = -1
    for i, e in enumerate(order):
        tau = _ZERO
        x = pools.get(e.src)
        if x is not None:
            p = x.balance
            c = min(e.paid_cents, p) if p > 0 else 0
            sent[e.event_id] = (c, p, x.decay, x.epoch)
            if c > 0:
                tau = x.traced * c / p
                x.traced -= tau
                if c == p:
                    x.balance, x.decay, x.epoch = 0, _ONE, x.epoch + 1
                else:
                    x.balance, x.decay = p - c, x.decay * Fraction(p - c, p)
        if e.event_id == root.event_id:
            tau, root_at = Fraction(e.paid_cents), i
        if tau:
            res.down[e.event_id] = tau
        y = pools.get(e.dst)
        if y is not None:
            arrived[e.event_id] = (y.decay, y.epoch)
            y.balance += e.received_cents
            if tau and e.paid_cents:
                y.traced += tau * e.received_cents / e.paid_cents
    res.held = {a: p.traced for a, p in pools.items() if p.traced}
    # upstream: the alerted transfer's money, back through the pools that paid it
    acc: dict[str, Fraction] = defaultdict(Fraction)  # per account: its later outflows' weight
    acc_epoch: dict[str, int] = {}
    older: dict[str, Fraction] = defaultdict(Fraction)
    for e in reversed(order[: root_at + 1]):
        if e.event_id == root.event_id:
            tau = Fraction(e.paid_cents)
        else:
            tau = _ZERO
            got = arrived.get(e.event_id)
            if got is not None and acc_epoch.get(e.dst) == got[1] and acc[e.dst] and e.received_cents:
                tau = acc[e.dst] / got[0] * e.paid_cents  # the lot's share of later outflows
        if not tau:
            continue
        res.up[e.event_id] = tau
        if e.src in pools and e.paid_cents:
            c, p, d, ep = sent[e.event_id]
            if c > 0:
                if acc_epoch.get(e.src) != ep:
                    acc[e.src], acc_epoch[e.src] = _ZERO, ep
                acc[e.src] += tau * c * d / (e.paid_cents * p)
            if c < e.paid_cents:
                older[e.src] += tau * (e.paid_cents - c) / e.paid_cents
    res.older = dict(older)
    return res


def _hops(start: dict[str, int], flows: dict[str, Fraction], edges: dict[str, GraphEdge], threshold: Fraction,
          members: set[str], downstream: bool) -> dict[str, int]:
    """Fewest followed flows from ``start`` (the subject upstream, the receiver downstream) to each
    member, one side: how many transfers the money took."""
    step: dict[str, list[str]] = defaultdict(list)
    for eid, tau in flows.items():
        if tau >= threshold:
            e = edges[eid]
            a, b = (e.src, e.dst) if downstream else (e.dst, e.src)
            if b in members:
                step[a].append(b)
    hops = dict(start)
    frontier = sorted(start)
    while frontier:
        nxt = []
        for a in frontier:
            for b in step.get(a, ()):
                if b not in hops:
                    hops[b] = hops[a] + 1
                    nxt.append(b)
        frontier = sorted(nxt)
    return hops


def _cents(x: Fraction) -> int:
    return round_half_even(x.numerator, x.denominator)


def money_trail(
    store: GraphStore,
    alerted: GraphEdge | TransactionEvent,
    *,
    horizon: timedelta = DEFAULT_TRACE_HORIZON,
    max_hops: int = MAX_TRACE_HOPS,
    min_share: str = DEFAULT_TRAIL_MIN_SHARE,
    hub_degree: int = DEFAULT_HUB_DEGREE,
    headline: int = DEFAULT_TRAIL_HEADLINE,
    keep: Sequence[str] = (),
    budget: Budget = DEFAULT_TRAIL_BUDGET,
) -> MoneyTrail:
    """The money trail of the ``alerted`` transfer (see the module docstring). ``keep``: accounts
    the headline must make room for (the typology instance's members); they take headline places
    whether or not the money reached them."""
    root = alerted if isinstance(alerted, GraphEdge) else GraphEdge.from_event(alerted)
    share = Fraction(min_share)
    if not 0 < share <= 1:
        raise ValueError(f"min_share={min_share!r}: expected a share in (0, 1]")
    if max_hops < 1:
        raise ValueError(f"max_hops={max_hops!r}: expected a positive int")
    clock = time.monotonic()
    t0 = root.timestamp
    start, end = t0 - horizon, t0 + horizon
    lo, hi = to_micros(start), to_micros(end)
    threshold = share * root.paid_cents
    subject, receiver = root.src, root.dst

    edges: dict[str, GraphEdge] = {root.event_id: root}
    members: set[str] = set()
    hubs: set[str] = set()
    seen_at: dict[str, tuple[datetime, datetime]] = {}
    cuts: list[TraceCut] = []
    room_edges = budget.max_edges

    def left() -> float | None:
        return None if budget.max_seconds is None else budget.max_seconds - (time.monotonic() - clock)

    def fetch(nodes: list[str], hop: int) -> bool:
        """Add ``nodes`` with all their transfers in the window; False when out of time."""
        nonlocal room_edges
        timeout = left()
        try:
            got = [store.expand_micros([(n, lo, hi) for n in nodes], d, hub_degree + 1, timeout=timeout)
                   for d in ("out", "in")]
        except GraphQueryTimeout:
            cuts.append(TraceCut(hop, "", "time budget", len(nodes)))
            return False
        for n in nodes:
            members.add(n)
            outs, ins = got[0][n], got[1][n]
            both = [*outs, *ins]
            if both:
                seen_at[n] = (min(e.timestamp for e in both), max(e.timestamp for e in both))
            if len(outs) > hub_degree or len(ins) > hub_degree:
                hubs.add(n)
                continue
            new = [e for e in both if e.event_id not in edges]
            if len(new) > room_edges:
                cuts.append(TraceCut(hop, n, "edge budget", len(new)))
                hubs.add(n)  # not followed: its pool would be incomplete
                continue
            room_edges -= len(new)
            for e in new:
                edges[e.event_id] = e
        return True

    fetch(sorted({subject, receiver}), 0)
    while True:
        pooled = members - hubs
        sweep = _sweep(flow_order(edges.values()), pooled, root)
        down_hops = _hops({receiver: 1}, sweep.down, edges, threshold, members, True)
        up_hops = _hops({subject: 0}, sweep.up, edges, threshold, members, False)
        wanted: dict[str, tuple[Fraction, int]] = {}
        for flows, hops, downstream in ((sweep.down, down_hops, True), (sweep.up, up_hops, False)):
            for eid, tau in flows.items():
                e = edges[eid]
                here, there = (e.src, e.dst) if downstream else (e.dst, e.src)
                if tau < threshold or there in members or here not in hops or here in hubs:
                    continue
                if hops[here] + 1 > max_hops:
                    continue  # counted as a cut below, once the trail is final
                best = wanted.get(there)
                if best is None or tau > best[0]:
                    wanted[there] = (tau, hops[here] + 1)
        if not wanted:
            break
        ranked = sorted(wanted, key=lambda n: (-wanted[n][0], n))
        room = budget.max_nodes - len(members)
        if len(ranked) > room:
            cuts.append(TraceCut(min(wanted[n][1] for n in ranked[room:]), "", "node budget", len(ranked) - room))
            ranked = ranked[:room]
        if not ranked:
            break
        t = left()
        if t is not None and t <= 0:
            cuts.append(TraceCut(min(wanted[n][1] for n in ranked), "", "time budget", len(ranked)))
            break
        if not fetch(sorted(ranked), min(wanted[n][1] for n in ranked)):
            break

    # the trail, written down
    limit_cut: dict[str, int] = defaultdict(int)
    listed: list[TrailFlow] = []
    # (side, why) -> [transfers, cents]: under the share, or past a limit (hop limit, budgets)
    dropped: dict[tuple[str, str], list] = {(side, why): [0, _ZERO] for side in ("upstream", "downstream")
                                            for why in ("small", "limit")}
    recv: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    gave: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for side, flows, hops, downstream in (("downstream", sweep.down, down_hops, True),
                                          ("upstream", sweep.up, up_hops, False)):
        for eid, tau in flows.items():
            e = edges[eid]
            if eid == root.event_id:
                continue
            here, there = (e.src, e.dst) if downstream else (e.dst, e.src)
            why = "small" if tau < threshold else "limit" if there not in members else None
            if why is not None:
                dropped[(side, why)][0] += 1
                dropped[(side, why)][1] += tau
                if why == "limit" and hops.get(here, 0) >= max_hops:
                    limit_cut[here] += 1
                continue
            listed.append(TrailFlow(eid, e.src, e.dst, e.amount_paid, e.timestamp, side, _cents(tau)))
            gave[(e.src, side)] += tau
            recv[(e.dst, side)] += tau * e.received_cents / e.paid_cents if e.paid_cents else _ZERO
    for n, k in sorted(limit_cut.items()):
        cuts.append(TraceCut(max_hops, n, "hop limit", k))
    amount = Fraction(root.paid_cents)
    listed.append(TrailFlow(root.event_id, subject, receiver, root.amount_paid, root.timestamp, "alerted",
                            root.paid_cents))
    listed.sort(key=lambda f: (f.timestamp, f.event_id, f.side))

    rows: list[TrailAccount] = []

    def row(n: str, side: str, hop: int, received: Fraction, sent: Fraction, held: Fraction) -> None:
        first, last = seen_at.get(n, (None, None))
        rows.append(TrailAccount(n, side, hop, _cents(received), _cents(sent), _cents(held), n in hubs, False,
                                 first, last))

    older = sweep.older
    row(subject, "subject", 0, recv[(subject, "upstream")], amount, older.get(subject, _ZERO))
    if receiver != subject:
        arrived = amount * root.received_cents / root.paid_cents if root.paid_cents else _ZERO
        row(receiver, "receiver", 1, arrived + recv[(receiver, "downstream")], gave[(receiver, "downstream")],
            sweep.held.get(receiver, _ZERO))
    for side, hops, kept in (("upstream", up_hops, older), ("downstream", down_hops, sweep.held)):
        for n in sorted(members, key=lambda n: (hops.get(n, max_hops + 1), n)):
            if (n, side) not in recv and (n, side) not in gave:
                continue
            if (n, side) in (((subject, "upstream"), (receiver, "downstream"))):
                continue  # their rows above
            row(n, side, hops.get(n, max_hops), recv[(n, side)], gave[(n, side)], kept.get(n, _ZERO))
    rows = _headline(rows, subject, receiver, keep, headline)

    params = {
        "method": "pro-rata",
        "horizon_minutes": int(horizon / timedelta(minutes=1)),
        "max_hops": max_hops,
        "min_share": str(share),
        "hub_degree": hub_degree,
        "max_nodes": budget.max_nodes,
        "max_edges": budget.max_edges,
        "max_seconds": None if budget.max_seconds is None else str(budget.max_seconds),
        "window_start": ts_to_wire(start),
        "window_end": ts_to_wire(end),
    }
    return MoneyTrail(
        trail_id=trail_id_for(root.event_id, params, [(f.event_id, f.side, f.traced_cents) for f in listed]),
        event_id=root.event_id,
        subject=subject,
        receiver=receiver,
        amount_paid=root.amount_paid,
        amount_cents=root.paid_cents,
        window_start=start,
        window_end=end,
        accounts=tuple(rows),
        flows=tuple(listed),
        dropped=tuple((side, why, n, _cents(c)) for (side, why), (n, c) in dropped.items()),
        cuts=tuple(sorted(cuts, key=lambda c: (c.hop, c.node_id, c.reason))),
        params=tuple(sorted(params.items())),
        backend=store.backend,
        members=tuple(sorted(set(keep))),
    )


def _headline(rows: list[TrailAccount], subject: str, receiver: str, keep: Sequence[str],
              limit: int) -> list[TrailAccount]:
    """Mark the accounts the report shows first: the subject and the receiver, room for ``keep``
    (whether or not they are on the trail), then the largest traced amounts, at most ``limit``
    accounts in all."""
    chosen: list[str] = [subject, receiver]
    reserved = [k for k in dict.fromkeys(keep) if k not in chosen]
    by_size = sorted(rows, key=lambda r: (-max(r.received_cents, r.sent_cents), r.node_id))
    room = max(0, limit - len(chosen) - len(reserved))
    for r in by_size:
        if room <= 0:
            break
        if r.node_id not in chosen and r.node_id not in reserved:
            chosen.append(r.node_id)
            room -= 1
    shown = set(chosen) | set(reserved)
    return [replace(r, headline=r.node_id in shown) for r in rows]

