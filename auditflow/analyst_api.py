"""The analyst HTTP API (FastAPI; OpenAPI at ``/docs``): the ``auditflow graph`` queries, the
run's alerts and reports, read-only, authenticated, bounded.

* **Read-only.** Only ``GET`` routes exist (anything else is ``405``); they call the read paths of
  the evidence graph and read the run's files. There is no raw Cypher endpoint: nothing a caller
  sends becomes query text -- account ids are validated (``422`` naming the field) and travel as
  query parameters.
* **Tokens.** Every route but ``/health`` needs ``Authorization: Bearer <token>``, one of
  ``AUDITFLOW_ANALYST_TOKENS_FILE``'s, compared in constant time against every configured token
  (:func:`hmac.compare_digest`); a missing or wrong token is ``401``.
* **Bounds.** Each query runs under ``AUDITFLOW_ANALYST_TIMEOUT_S`` (the trace's time budget and
  the Neo4j transaction timeout; past it, ``504``); pages hold at most
  ``AUDITFLOW_ANALYST_MAX_RESULTS`` items (``limit`` above it is ``422``), ``offset``/``limit``
  paginate and each page says the ``total`` and the ``next_offset``.
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
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from auditflow.errors import FieldError
from auditflow.limits import MAX_TRACE_HOPS
from auditflow.records import AccountRef
from auditflow.settings import Settings

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


def create_app(settings: Settings, store: Any = None) -> FastAPI:
    """The API over ``settings``' graph (or ``store``, for tests) and run folder."""
    from auditflow import flow
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
        if not path.exists():
            return []
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

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

    @app.exception_handler(FieldError)
    async def field_error(_: Request, e: FieldError) -> JSONResponse:
        return JSONResponse({"detail": str(e)}, status_code=422)

    return app
