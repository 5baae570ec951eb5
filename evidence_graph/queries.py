"""The analyst's questions to the graph, read-only, bounded, on any backend: the money paths
between two accounts and an account's neighbourhood (traces: :mod:`evidence_graph.trace`,
typologies: :mod:`evidence_graph.typologies`).

>>> from evidence_graph.embedded import NetworkxGraphStore
>>> from evidence_graph.testing import chain
>>> store = NetworkxGraphStore()
>>> _ = store.add_transactions(chain("ABCD"))
>>> [[e.event_id for e in p] for p in money_paths(store, "001/A", "001/D")]
[['ch0', 'ch1', 'ch2']]
>>> [(r.counterparty, r.sent, r.received) for r in neighborhood(store, "001/B").rows]
[('001/A', 0, 1), ('001/C', 1, 0)]
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from auditflow.limits import DEFAULT_FANOUT_CAP, MAX_TRACE_HOPS, TRACE_HOP_HORIZON
from auditflow.errors import NoSuchAccount
from auditflow.money import usd_cents
from auditflow.records import AccountActivity, AccountRef
from evidence_graph.follow import Budget, follow_money
from evidence_graph.store import GraphEdge, GraphStore, check_window

#: Most paths :func:`money_paths` returns, and most counterparties :func:`neighborhood` lists.
MAX_PATHS = 50
MAX_NEIGHBORS = 200


def require_account(store: GraphStore, account: str, graph: str = "") -> str:
    """``account`` (``BANK/ACCOUNT``) when the graph holds it; :class:`~auditflow.errors.FieldError`
    when it is not of that form, :class:`~auditflow.errors.NoSuchAccount` when the graph has no
    such account (``graph`` names the graph in the message)."""
    node_id = AccountRef.from_node_id(account).node_id
    if not store.has_node(node_id):
        raise NoSuchAccount(node_id, graph)
    return node_id


def money_paths(
    store: GraphStore,
    source: str,
    target: str,
    max_hops: int = MAX_TRACE_HOPS,
    *,
    window: tuple[datetime | None, datetime | None] | None = None,
    hop_horizon: timedelta | None = TRACE_HOP_HORIZON,
    fanout_cap: int = DEFAULT_FANOUT_CAP,
    budget: Budget = Budget(),
    limit: int = MAX_PATHS,
) -> list[tuple[GraphEdge, ...]]:
    """Time-ordered paths of at most ``max_hops`` transfers carrying money from ``source`` to
    ``target`` (no account twice), fewest hops first, then earliest: the shared search run
    downstream from ``source`` and upstream from ``target``, joined where they meet."""
    if source == target:
        raise ValueError("paths: source and target are the same account")
    start, end = window if window is not None else (None, None)
    check_window(start, end)
    kw = dict(start=start, end=end, hop_horizon=hop_horizon, fanout_cap=fanout_cap, budget=budget)
    down = follow_money(store, source, "out", max_hops=max_hops, **kw)
    up = follow_money(store, target, "in", max_hops=max_hops, **kw)
    found: dict[tuple[str, ...], tuple[GraphEdge, ...]] = {}
    for m, there in down.nodes.items():
        back = up.nodes.get(m)
        if back is None:
            continue
        path = (*there.path, *back.path)
        accounts = [source, *(e.dst for e in path)]
        if (1 <= len(path) <= max_hops and len(set(accounts)) == len(accounts)
                and all(a.timestamp <= b.timestamp and (hop_horizon is None or b.timestamp - a.timestamp <= hop_horizon)
                        for a, b in zip(path, path[1:]))):
            found.setdefault(tuple(e.event_id for e in path), path)
    ordered = sorted(found.values(), key=lambda p: (len(p), p[0].timestamp, [e.event_id for e in p]))
    return ordered[:limit]


@dataclass(frozen=True, slots=True)
class NeighborRow:
    """One counterparty of an account in the window: transfers each way and their US cents."""

    counterparty: str
    sent: int
    sent_usd_cents: int
    received: int
    received_usd_cents: int
    first: datetime
    last: datetime


@dataclass(frozen=True, slots=True)
class Neighborhood:
    """An account's counterparties (most money first), and whether the list was cut."""

    account: str
    rows: tuple[NeighborRow, ...]
    truncated: bool


def neighborhood(
    store: GraphStore,
    account: str,
    *,
    window: tuple[datetime | None, datetime | None] | None = None,
    edge_limit: int = 5_000,
    limit: int = MAX_NEIGHBORS,
) -> Neighborhood:
    """The counterparties of ``account`` in ``window`` (its first ``edge_limit`` transfers each
    way in cap order), most money first, at most ``limit``."""
    start, end = window if window is not None else (None, None)
    rows: dict[str, list] = {}
    cut = False
    for direction in ("out", "in"):
        edges = store.neighbors_batch([account], direction, start, end, edge_limit + 1)[account]
        cut |= len(edges) > edge_limit
        for e in edges[:edge_limit]:
            other = e.dst if direction == "out" else e.src
            r = rows.setdefault(other, [0, 0, 0, 0, e.timestamp, e.timestamp])
            if direction == "out":
                r[0] += 1
                r[1] += usd_cents(e.amount_paid)
            else:
                r[2] += 1
                r[3] += usd_cents(e.amount_received)
            r[4], r[5] = min(r[4], e.timestamp), max(r[5], e.timestamp)
    out = sorted((NeighborRow(k, *v) for k, v in rows.items()),
                 key=lambda r: (-(r.sent_usd_cents + r.received_usd_cents), r.counterparty))
    if len(out) > limit:
        out, cut = out[:limit], True
    return Neighborhood(account, tuple(out), cut)


def account_activity(store: GraphStore, account: str, start: datetime, end: datetime, *,
                     edge_limit: int = 10_000) -> AccountActivity:
    """What ``account`` received and sent in ``[start, end]`` (its first ``edge_limit``
    transfers each way; ``capped`` when it had more): a SAR's subject block."""
    check_window(start, end)
    got = {d: store.neighbors_batch([account], d, start, end, edge_limit + 1)[account] for d in ("in", "out")}
    ins, outs = got["in"][:edge_limit], got["out"][:edge_limit]
    both = [*ins, *outs]
    return AccountActivity(
        node_id=account,
        window_start=start,
        window_end=end,
        transfers_in=len(ins),
        transfers_out=len(outs),
        usd_in_cents=sum(e.received_cents for e in ins),
        usd_out_cents=sum(e.paid_cents for e in outs),
        first_seen=min((e.timestamp for e in both), default=None),
        last_seen=max((e.timestamp for e in both), default=None),
        capped=len(got["in"]) > edge_limit or len(got["out"]) > edge_limit,
    )
