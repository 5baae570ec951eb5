"""The JSON views of the analyst's answers, one implementation for the command line
(``auditflow graph ... --json``) and the analyst HTTP API (:mod:`auditflow_app.analyst_api`):
what a money path, an account's counterparties and an alert's evidence look like as JSON.

Plain functions from the typed results of :mod:`auditflow_app.flow` and :mod:`evidence_graph` to
dicts and lists of JSON values; they query nothing. Traces and typology findings are their
records' own ``to_dict()``. Amounts of money paths travel as decimal strings with their currency;
the evidence (the web view's data) carries exact integer ``units`` as a string of digits with their
``scale`` (JSON numbers in a browser are doubles).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from auditflow.money import CURRENCIES, Money
from auditflow.records import opt_ts_to_wire, ts_to_wire

if TYPE_CHECKING:
    from auditflow_app.flow import AlertEvidence
    from evidence_graph import GraphEdge
    from evidence_graph.queries import Neighborhood, NeighborRow

#: How the path and counterparty views write a time (to the minute).
MINUTE = "%Y-%m-%dT%H:%M"


def alert_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """A run's alert row as analysts see it: everything but the transfer's ground-truth label
    (``is_laundering``: the answer key of a labelled data set, for evaluation only).

    >>> alert_view({"alert_id": "a", "event": {"event_id": "e", "is_laundering": True}})
    {'alert_id': 'a', 'event': {'event_id': 'e'}}
    """
    out = dict(row)
    if isinstance(out.get("event"), Mapping):
        out["event"] = {k: v for k, v in out["event"].items() if k != "is_laundering"}
    return out


def transfer_view(e: GraphEdge) -> dict[str, Any]:
    """One transfer of a money path: its ends, the amount paid (a decimal string) and its time."""
    return {
        "event_id": e.event_id,
        "src": e.src,
        "dst": e.dst,
        "amount": str(e.amount_paid.to_decimal()),
        "currency": e.amount_paid.currency,
        "timestamp": e.timestamp.strftime(MINUTE),
    }


def paths_view(paths: Iterable[Sequence[GraphEdge]]) -> list[list[dict[str, Any]]]:
    """Money paths (``money_paths``' order kept), each the list of its transfers."""
    return [[transfer_view(e) for e in p] for p in paths]


def counterparty_view(r: NeighborRow) -> dict[str, Any]:
    """One counterparty of an account: transfers and US cents each way, first and last time."""
    return {
        "counterparty": r.counterparty,
        "sent": r.sent,
        "sent_usd_cents": r.sent_usd_cents,
        "received": r.received,
        "received_usd_cents": r.received_usd_cents,
        "first": r.first.strftime(MINUTE),
        "last": r.last.strftime(MINUTE),
    }


def neighborhood_view(nb: Neighborhood) -> dict[str, Any]:
    """An account's counterparties, most money first, and whether the list was cut."""
    return {"account": nb.account, "truncated": nb.truncated, "counterparties": [counterparty_view(r) for r in nb.rows]}


def money_view(m: Money) -> dict[str, Any]:
    """An amount as the web view gets it: exact integer units (as a string of digits) and scale."""
    return {"units": str(m.units), "scale": m.scale, "currency": m.currency, "code": CURRENCIES[m.currency][0]}


def _edge_view(e: Any, hop: int | None) -> dict[str, Any]:
    return {
        "event_id": e.event_id,
        "src": e.src,
        "dst": e.dst,
        "hop": hop,
        "timestamp": ts_to_wire(e.timestamp),
        **money_view(e.amount_paid),
    }


def evidence_view(ev: AlertEvidence, cap: int, *, view: str = "trail") -> dict[str, Any]:
    """An alert's evidence as the web view draws it: the alert, the trace's frame, the typology
    findings, and at most ``cap`` accounts with at most ``cap`` of the transfers between them.

    ``view="trail"`` (when the evidence has its money trail): the trail's headline accounts (the
    subject, the receiver, the typology's members, the largest traced amounts: ~30), each at its
    signed hop (upstream accounts before the subject, at minus their hops; members off the trail
    ``None``), and the trail's flows between them labelled with the traced amount, rounded, and
    time, plus the findings' transfers between them. ``view="trace"``: the root, then the
    findings' members, then the trace's accounts in its order, the trace's transfers, then the
    findings' others (``hop`` None). ``omitted`` counts what was left out."""
    if view == "trail" and ev.trail is not None:
        return _trail_view(ev, cap)
    trace, matches = ev.trace, ev.matches
    edges: dict[str, dict[str, Any]] = {}
    for e in trace.edges:
        edges[e.event_id] = _edge_view(e, e.hop)
    for g in ev.transfers:
        edges.setdefault(g.event_id, _edge_view(g, None))
    depth = {n.node_id: n for n in trace.nodes}
    member_of: dict[str, list[int]] = {}
    for i, m in enumerate(matches):
        for a in m.accounts:
            member_of.setdefault(a, []).append(i)
    # the root, then the typology members, then the trace's nodes in its order, up to the cap
    order = list(dict.fromkeys([trace.root, *sorted(member_of), *(n.node_id for n in trace.nodes)]))
    shown = order[:cap]
    kept = set(shown)
    shown_edges = [e for e in edges.values() if e["src"] in kept and e["dst"] in kept]
    hubs = set(trace.hubs)
    nodes = [
        {
            "id": n,
            "hop": depth[n].hop_depth if n in depth else None,
            "upstream": list(depth[n].upstream_ids) if n in depth else [],
            "root": n == trace.root,
            "hub": n in hubs,
            "typologies": member_of.get(n, []),
        }
        for n in shown
    ]
    return {
        **_frame(ev),
        "view": "trace",
        "nodes": nodes,
        "edges": shown_edges[:cap],
        "omitted": {"nodes": len(order) - len(shown), "edges": len(edges) - min(len(shown_edges), cap)},
    }


def _frame(ev: AlertEvidence) -> dict[str, Any]:
    """What every view of an alert's evidence carries: the alert, the trace's frame, the findings."""
    alert, trace = ev.alert, ev.trace
    return {
        "alert": {
            "alert_id": alert.alert_id,
            "account": alert.account.node_id,
            "event_id": alert.event.event_id,
            "timestamp": ts_to_wire(alert.event.timestamp),
            "score": alert.score,
            "threshold": alert.threshold,
            "amount": money_view(alert.event.amount_paid),
        },
        "trace": {
            "trace_id": trace.trace_id,
            "root": trace.root,
            "direction": trace.direction,
            "max_hops": trace.max_hops,
            "truncated": trace.truncated,
            "hubs": list(trace.hubs),
            "cuts": [c.to_wire() for c in trace.cuts],
            "window_start": opt_ts_to_wire(trace.window_start),
            "window_end": opt_ts_to_wire(trace.window_end),
        },
        "typologies": [m.to_dict() for m in ev.matches],
    }


def _trail_view(ev: AlertEvidence, cap: int) -> dict[str, Any]:
    from reports.plain import amount_text, money_plain, share_text

    trail = ev.trail
    unit = "USD" if trail.amount_paid.currency == "US Dollar" else "USD equiv."
    member_of: dict[str, list[int]] = {}
    for i, m in enumerate(ev.matches):
        for a in m.accounts:
            member_of.setdefault(a, []).append(i)
    rows: dict[str, list] = {}
    for a in trail.accounts:
        if a.headline:
            rows.setdefault(a.node_id, []).append(a)
    hop: dict[str, int | None] = {}
    for n, rs in rows.items():
        sides = {r.side for r in rs}
        r = next((r for r in rs if r.side in ("subject", "receiver")), rs[0])
        hop[n] = -r.hop if sides == {"upstream"} else r.hop
    order = list(dict.fromkeys([trail.subject, trail.receiver, *sorted(member_of), *rows]))
    shown = order[:cap]
    kept = set(shown)
    edges: dict[str, dict[str, Any]] = {}
    for f in trail.flows:
        if f.src in kept and f.dst in kept and f.event_id not in edges:
            label = f"{amount_text(f.traced_cents, unit)} · {f.timestamp:%m-%d %H:%M}"
            if f.side != "alerted":
                label = (
                    f"{amount_text(f.traced_cents, unit)} ({share_text(f.traced_cents, trail.amount_cents)}) · "
                    f"{f.timestamp:%m-%d %H:%M}"
                )
            edges[f.event_id] = {**_edge_view(f, None), "side": f.side, "traced_cents": f.traced_cents, "label": label}
    instance = {eid for m in ev.matches for eid in m.event_ids}
    candidates = {f.event_id for f in trail.flows} | (instance & {e.event_id for e in (*ev.trace.edges, *ev.transfers)})
    for e in [*ev.trace.edges, *ev.transfers]:
        if e.event_id in instance and e.src in kept and e.dst in kept and e.event_id not in edges:
            edges[e.event_id] = {
                **_edge_view(e, None),
                "side": "typology",
                "label": f"{money_plain(e.amount_paid)} · {e.timestamp:%m-%d %H:%M}",
            }
    # a column per account: its signed hop; a member off the trail next to the shown account it
    # paid or was paid by (a column before it, or after), else before every other column
    column = {n: h for n, h in hop.items() if n in kept and h is not None}
    for _ in range(len(kept)):
        placed = False
        for e in edges.values():
            if e["src"] in column and e["dst"] not in column:
                column[e["dst"]], placed = column[e["src"]] + 1, True
            elif e["dst"] in column and e["src"] not in column:
                column[e["src"]], placed = column[e["dst"]] - 1, True
        if not placed:
            break
    first = min(column.values(), default=0) - 1
    nodes = [
        {
            "id": n,
            "hop": hop.get(n),
            "column": column.get(n, first),
            "upstream": [],
            "root": n == trail.subject,
            "hub": any(r.hub for r in rows.get(n, ())),
            "typologies": member_of.get(n, []),
            "sides": sorted({r.side for r in rows.get(n, ())}),
        }
        for n in shown
    ]
    shown_edges = list(edges.values())
    dropped = {(side, why): (k, c) for side, why, k, c in trail.dropped}
    return {
        **_frame(ev),
        "view": "trail",
        "trail": {
            "trail_id": trail.trail_id,
            "subject": trail.subject,
            "receiver": trail.receiver,
            "amount": amount_text(trail.amount_cents, unit),
            "accounts": len({a.node_id for a in trail.accounts}),
            "flows": len(trail.flows),
            "not_followed": sum(k for k, _ in dropped.values()),
            "window_start": ts_to_wire(trail.window_start),
            "window_end": ts_to_wire(trail.window_end),
        },
        "nodes": nodes,
        "edges": shown_edges[:cap],
        "omitted": {
            "nodes": len(order) - len(shown) + len({a.node_id for a in trail.accounts} - set(rows)),
            "edges": len(candidates) - min(len(shown_edges), cap),
        },
    }
