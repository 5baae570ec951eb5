"""The analyst HTTP API (FastAPI; OpenAPI at ``/docs``): the ``auditflow graph`` queries, the
run's alerts and reports, read-only, authenticated, bounded.

* **Read-only.** Only ``GET`` routes exist (anything else is ``405``); they call the read paths of
  the evidence graph and read the run's files. There is no raw Cypher endpoint: nothing a caller
  sends becomes query text -- account ids are validated (``422`` naming the field) and travel as
  query parameters.
* **Tokens.** Every route but ``/health`` and the web view's static files (``/view/``, below) needs ``Authorization: Bearer <token>``, one of
  ``AUDITFLOW_ANALYST_TOKENS_FILE``'s, compared in constant time against every configured token
  (:func:`hmac.compare_digest`); a missing or wrong token is ``401``.
* **Bounds.** Each query runs under ``AUDITFLOW_ANALYST_TIMEOUT_S`` (the trace's time budget and
  the Neo4j transaction timeout; past it, ``504``); pages hold at most
  ``AUDITFLOW_ANALYST_MAX_RESULTS`` items (``limit`` above it is ``422``), ``offset``/``limit``
  paginate and each page says the ``total`` and the ``next_offset``.

The web view (``/view/``)
    An alert's evidence drawn as a graph (cytoscape.js, from ``web/``'s npm lock file, installed
    by ``make setup`` with ``npm ci``; served from the installed package, nothing is fetched from
    the internet): the accounts in hop columns (hop 0, the alert's root account, on the left; the
    typology members the trace did not reach in a column of their own before it), each transfer
    an edge labelled with its exact amount and its time, the typology members highlighted, and a
    click on an account expands it with its counterparties (``/neighborhood``).

    **How the page authenticates.** The page and its scripts are public static files (they hold
    no data); every data call the page makes sends ``Authorization: Bearer <token>`` and is
    checked like any API call (a missing or wrong token shows the ``401``, not data). The analyst
    types the token into the page, or passes it in the URL *fragment*
    (``/view/#alert=ALERT_ID&token=TOKEN``): a browser never sends the fragment to the server, so
    the token appears in no request line and no server or proxy log, and the page removes it from
    the address bar and history entry as soon as it has read it. The token is kept in the page's
    memory only (not in storage or cookies: nothing a cookie-based CSRF could ride on). The page
    is served with a Content-Security-Policy that lets it load scripts and connect only to this
    server.

    The view's data call is ``GET /evidence?alert_id=ID``: the alert's evidence as its report
    shows it (the trace and the typology findings of :func:`auditflow_app.flow.trace_and_typologies`)
    with the transfers of the findings, at most ``AUDITFLOW_ANALYST_MAX_RESULTS`` accounts and as
    many transfers (what was left out is counted), under the same timeout. Amounts travel as the
    exact integer ``units`` (a string of digits: JSON numbers in a browser are doubles) with their
    ``scale``; the page formats them with string arithmetic, never floats.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from auditflow.errors import FieldError
from auditflow.jsonlines import read_json_lines
from auditflow.limits import MAX_TRACE_HOPS
from auditflow.money import CURRENCIES, Money
from auditflow.records import AccountRef, Alert, ts_to_wire
from auditflow_app.settings import Settings

_bearer = HTTPBearer(auto_error=False)
Limit = Annotated[int, Query(ge=1, description="items per page (at most AUDITFLOW_ANALYST_MAX_RESULTS)")]
Offset = Annotated[int, Query(ge=0)]
DEFAULT_PAGE = 100  # items per page when no limit is given (at most the cap)
Hops = Annotated[int, Query(ge=1, le=MAX_TRACE_HOPS)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _account(node_id: str) -> str:
    try:
        return AccountRef.from_node_id(node_id).node_id
    except (FieldError, ValueError) as e:
        raise HTTPException(422, f"account {node_id[:80]!r}: {e}") from None


def _when(text: str | None, name: str) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M")
    except ValueError:
        raise HTTPException(422, f"{name}={text[:40]!r}: expected YYYY-MM-DDTHH:MM") from None


def _page(items: list, offset: int, limit: int) -> dict[str, Any]:
    page = items[offset : offset + limit]
    nxt = offset + len(page)
    return {"total": len(items), "offset": offset, "items": page, "next_offset": nxt if nxt < len(items) else None}


#: The web view's front-end: ``web/`` of the source tree (``npm ci`` there installs cytoscape).
WEB_DIR = Path(__file__).resolve().parent.parent / "web"
#: What ``/view/`` serves: its own files, and the installed cytoscape build. Nothing else.
VIEW_FILES = {
    "index.html": ("view/index.html", "text/html; charset=utf-8"),
    "app.js": ("view/app.js", "text/javascript; charset=utf-8"),
    "app.css": ("view/app.css", "text/css; charset=utf-8"),
    "cytoscape.min.js": ("node_modules/cytoscape/dist/cytoscape.min.js", "text/javascript; charset=utf-8"),
}
#: The page may load scripts and styles from this server and talk to it, and nothing else.
VIEW_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                                "frame-ancestors 'none'"),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
AlertId = Annotated[str, Query(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:@/-]+$")]


def _money_view(m: Money) -> dict[str, Any]:
    """An amount as the view gets it: exact integer units (as a string of digits) and scale."""
    return {"units": str(m.units), "scale": m.scale, "currency": m.currency, "code": CURRENCIES[m.currency][0]}


def create_app(settings: Settings, store: Any = None, *, web_dir: Path | None = None) -> FastAPI:
    """The API over ``settings``' graph (or ``store``, for tests) and run folder; the web view's
    files from ``web_dir`` (default :data:`WEB_DIR`)."""
    from auditflow_app import flow
    from evidence_graph import Budget, detect_typologies, trace_evidence
    from evidence_graph.queries import money_paths, neighborhood

    tokens = [t.get_secret_value().encode() for t in settings.analyst_tokens()]
    if not tokens:
        raise ValueError("AUDITFLOW_ANALYST_TOKENS_FILE holds no token")
    graph = store if store is not None else flow.open_graph(settings)
    lock = threading.Lock()  # one store object, one query at a time
    cap, timeout = settings.analyst_max_results, settings.analyst_timeout_s
    paths = flow.RunPaths.under(settings.out_dir)
    app = FastAPI(title="auditflow analyst API", version="1", description=__doc__)

    def authorized(cred: Credentials) -> None:
        given = (cred.credentials if cred is not None else "").encode()
        ok = False
        for t in tokens:  # every token compared, in constant time: no early exit to time
            ok |= hmac.compare_digest(given, t)
        if cred is None or not ok:
            raise HTTPException(401, "missing or wrong token", headers={"WWW-Authenticate": "Bearer"})

    async def run(call: Callable[[], Any]) -> Any:
        def locked() -> Any:
            with lock:
                reload = getattr(graph, "reload", None)
                if reload is not None:
                    reload()  # what the stream job appended since
                return call()

        try:
            return await asyncio.wait_for(asyncio.to_thread(locked), timeout)
        except asyncio.TimeoutError:
            raise HTTPException(504, f"query ran past the {timeout:g} s limit") from None
        except ValueError as e:
            raise HTTPException(422, str(e)) from None

    def check_limit(limit: int | None) -> int:
        if limit is None:
            return min(cap, DEFAULT_PAGE)
        if limit > cap:
            raise HTTPException(422, f"limit={limit}: at most {cap} (AUDITFLOW_ANALYST_MAX_RESULTS)")
        return limit

    auth = [Depends(authorized)]

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/trace", dependencies=auth)
    async def trace(account: str, direction: str = "out", hops: Hops = 5,
                    start: str | None = None, end: str | None = None, offset: Offset = 0, limit: Limit | None = None):
        """Where the money of an account went (``out``) or came from (``in``): a page of its nodes,
        and every edge, cut and hub of the trace."""
        node, lo, hi, limit = _account(account), _when(start, "start"), _when(end, "end"), check_limit(limit)
        budget = Budget(max_seconds=timeout)
        t = await run(lambda: trace_evidence(graph, node, hops, direction, settings.trace_fanout_cap,
                                             (lo, hi) if lo or hi else None, budget=budget))
        d = t.to_dict()
        nodes = d.pop("nodes")
        return {**d, "nodes": _page(nodes, offset, limit)}

    @app.get("/paths", dependencies=auth)
    async def paths_(source: str, target: str, max_hops: Hops = 5,
                     start: str | None = None, end: str | None = None, offset: Offset = 0, limit: Limit | None = None):
        """Time-ordered money paths from ``source`` to ``target``, fewest hops first."""
        a, b, lo, hi, limit = _account(source), _account(target), _when(start, "start"), _when(end, "end"), check_limit(limit)
        found = await run(lambda: money_paths(graph, a, b, max_hops, window=(lo, hi) if lo or hi else None,
                                              budget=Budget(max_seconds=timeout), limit=cap))
        items = [[{"event_id": e.event_id, "src": e.src, "dst": e.dst, "amount": str(e.amount_paid.to_decimal()),
                   "currency": e.amount_paid.currency, "timestamp": e.timestamp.strftime("%Y-%m-%dT%H:%M")}
                  for e in p] for p in found]
        return _page(items, offset, limit)

    @app.get("/neighborhood", dependencies=auth)
    async def neighborhood_(account: str, start: str | None = None, end: str | None = None,
                            offset: Offset = 0, limit: Limit | None = None):
        """An account's counterparties, most money first."""
        node, lo, hi, limit = _account(account), _when(start, "start"), _when(end, "end"), check_limit(limit)
        nb = await run(lambda: neighborhood(graph, node, window=(lo, hi) if lo or hi else None, limit=cap))
        items = [{"counterparty": r.counterparty, "sent": r.sent, "sent_usd_cents": r.sent_usd_cents,
                  "received": r.received, "received_usd_cents": r.received_usd_cents,
                  "first": r.first.strftime("%Y-%m-%dT%H:%M"), "last": r.last.strftime("%Y-%m-%dT%H:%M")}
                 for r in nb.rows]
        return {**_page(items, offset, limit), "truncated": nb.truncated}

    @app.get("/typologies", dependencies=auth)
    async def typologies(account: str, start: str | None = None, end: str | None = None,
                         offset: Offset = 0, limit: Limit | None = None):
        """The typology instances an account takes part in."""
        node, lo, hi, limit = _account(account), _when(start, "start"), _when(end, "end"), check_limit(limit)
        found = await run(lambda: detect_typologies(graph, node, (lo, hi) if lo or hi else None))
        return _page([m.to_dict() for m in found], offset, limit)

    def _lines(path: Path) -> list[dict]:
        return read_json_lines(path, missing_ok=True)

    @app.get("/alerts", dependencies=auth)
    async def alerts(offset: Offset = 0, limit: Limit | None = None):
        """The run's alerts (``OUT_DIR/alerts.jsonl``), in file order."""
        limit = check_limit(limit)
        return _page(await run(lambda: _lines(paths.alerts)), offset, limit)

    @app.get("/reports", dependencies=auth)
    async def reports(offset: Offset = 0, limit: Limit | None = None):
        """The run's report manifests (``OUT_DIR/reports/*.manifest.json``), by name."""
        limit = check_limit(limit)

        def manifests() -> list[dict]:
            folder = paths.reports_dir
            return [json.loads(p.read_text()) for p in sorted(folder.glob("*.manifest.json"))] if folder.is_dir() else []

        return _page(await run(manifests), offset, limit)

    def alert_row(alert_id: str) -> dict | None:
        for d in _lines(paths.alerts):
            if d.get("alert_id") == alert_id:
                return d
        return None

    @app.get("/evidence", dependencies=auth)
    async def evidence(alert_id: AlertId):
        """An alert's evidence as its report shows it (the web view's data): the trace from the
        alert's account and the typology findings around it, with the findings' transfers; at
        most the result cap of accounts and of transfers (``omitted`` counts the rest)."""
        from evidence_graph.typologies import TYPOLOGY_NEIGHBOR_CAP

        row = await run(lambda: alert_row(alert_id))
        if row is None:
            raise HTTPException(404, f"no alert {alert_id!r} in the run's alerts.jsonl")
        alert = Alert.from_dict({k: row[k] for k in ("schema", "alert_id", "event", "score", "threshold",
                                                      "model_digest", "features")})

        def build() -> dict[str, Any]:
            trace, matches = flow.trace_and_typologies(graph, alert, settings)
            edges: dict[str, dict[str, Any]] = {}
            for e in trace.edges:
                edges[e.event_id] = {"event_id": e.event_id, "src": e.src, "dst": e.dst, "hop": e.hop,
                                     "timestamp": ts_to_wire(e.timestamp), **_money_view(e.amount_paid)}
            wanted = {eid for m in matches for eid in m.event_ids} - edges.keys()
            if wanted:  # the findings' transfers the trace did not cross, read as the detector did
                t, around = alert.event.timestamp, settings.typology_window
                members = sorted({a for m in matches for a in m.accounts})
                found = graph.expand([(a, t - around, t + around) for a in members], "out", TYPOLOGY_NEIGHBOR_CAP)
                for a in members:
                    for g in found[a]:
                        if g.event_id in wanted and g.event_id not in edges:
                            edges[g.event_id] = {"event_id": g.event_id, "src": g.src, "dst": g.dst, "hop": None,
                                                 "timestamp": ts_to_wire(g.timestamp), **_money_view(g.amount_paid)}
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
            nodes = [{"id": n, "hop": depth[n].hop_depth if n in depth else None,
                      "upstream": list(depth[n].upstream_ids) if n in depth else [],
                      "root": n == trace.root, "hub": n in hubs, "typologies": member_of.get(n, [])}
                     for n in shown]
            return {
                "alert": {"alert_id": alert.alert_id, "account": alert.account.node_id,
                          "event_id": alert.event.event_id, "timestamp": ts_to_wire(alert.event.timestamp),
                          "score": alert.score, "threshold": alert.threshold,
                          "amount": _money_view(alert.event.amount_paid)},
                "trace": {"trace_id": trace.trace_id, "root": trace.root, "direction": trace.direction,
                          "max_hops": trace.max_hops, "truncated": trace.truncated, "hubs": list(trace.hubs),
                          "cuts": [[c.hop, c.node_id, c.reason, c.dropped] for c in trace.cuts],
                          "window_start": ts_to_wire(trace.window_start) if trace.window_start else None,
                          "window_end": ts_to_wire(trace.window_end) if trace.window_end else None},
                "typologies": [m.to_dict() for m in matches],
                "nodes": nodes,
                "edges": shown_edges[:cap],
                "omitted": {"nodes": len(order) - len(shown), "edges": len(edges) - min(len(shown_edges), cap)},
            }

        return await run(build)

    web = (web_dir if web_dir is not None else WEB_DIR).resolve()

    @app.get("/view", include_in_schema=False)
    def view_root() -> RedirectResponse:
        return RedirectResponse("view/", status_code=307)  # relative: the page's own links resolve under it

    @app.get("/view/", include_in_schema=False)
    def view_page() -> FileResponse:
        return view_file("index.html")

    @app.get("/view/{name}", include_in_schema=False)
    def view_file(name: str) -> FileResponse:
        """The view's static files (public: they hold no data; every data call needs the token)."""
        if name not in VIEW_FILES:
            raise HTTPException(404, f"no view file {name[:80]!r}")
        rel, media = VIEW_FILES[name]
        path = web / rel
        if not path.is_file():
            raise HTTPException(503, f"the web view is not installed ({rel} missing under web/): run make setup "
                                     "(npm ci in web/)")
        return FileResponse(path, media_type=media, headers=VIEW_HEADERS)

    @app.exception_handler(FieldError)
    async def field_error(_: Request, e: FieldError) -> JSONResponse:
        return JSONResponse({"detail": str(e)}, status_code=422)

    return app
