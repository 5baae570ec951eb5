"""The analyst HTTP API (FastAPI; OpenAPI at ``/docs``): the ``auditflow graph`` queries, the
run's alerts and reports, read-only, authenticated, bounded; and, with ``AUDITFLOW_USERS_FILE``,
the cases (:mod:`auditflow_app.cases_api`).

* **Read-only.** The analyst routes are ``GET`` routes only (anything else is ``405``); they call
  the read paths of the evidence graph and read the run's files. There is no raw Cypher endpoint:
  nothing a caller sends becomes query text -- account ids are validated (``422`` naming the
  field) and travel as query parameters; an account the graph does not hold is ``404`` ("no such
  account"). Only the cases routes (``/me``, ``/cases/...``, ``/users``) take ``POST``: each
  action by a named user, under the workflow's rules.
* **Tokens.** Every route but ``/health`` and the web view's static files (``/view/``, below)
  needs ``Authorization: Bearer <token>``: one of ``AUDITFLOW_ANALYST_TOKENS_FILE``'s, compared
  in constant time against every configured token (:func:`hmac.compare_digest`), or the token of
  a user of ``AUDITFLOW_USERS_FILE`` (its hash compared in constant time with every user's) whose
  role reads evidence (analyst, approver, auditor; an admin's token is ``403`` here); a missing or
  wrong token is ``401``. Either file is enough for the API to start; the cases routes need the
  users file.
* **Bounds.** Each request runs under its own budget of ``AUDITFLOW_ANALYST_TIMEOUT_S`` (past
  it, ``504``): the trace's time budget, and each store call's (the Neo4j transaction timeout is
  what is left of it). A query past its budget is abandoned: its next store call raises, so it
  stops there, and it holds nothing another query waits on (queries read the store side by side,
  see :class:`StoreAccess`): one slow query does not make the next ones time out. Pages hold at
  most ``AUDITFLOW_ANALYST_MAX_RESULTS`` items (``limit`` above it is ``422``), ``offset``/``limit``
  paginate and each page says the ``total`` and the ``next_offset``. ``hops`` and ``max_hops``
  default to ``AUDITFLOW_TRACE_HOPS``, like the command line's.

The web view (``/view/``)
    An alert's evidence drawn as a graph (cytoscape.js, from ``web/``'s npm lock file, installed
    by ``make setup`` with ``npm ci``; served from the installed package, nothing is fetched from
    the internet). By default the alert's money trail: the subject (a star) with the accounts its
    money came from on its left and those it went to on its right, in hop columns, at most ~30
    accounts, each flow labelled with the traced amount (4 significant digits), its share and its
    time, legible at 1400x900; the typology instance's members and transfers highlighted. The
    complete trace is the other view (``view=trace``): hop 0, the alert's root account, on the
    left, the typology members the trace did not reach in a column of their own before it, each
    transfer labelled with its exact amount and its time. A click on an account expands it with
    its counterparties (``/neighborhood``).

    **How the page authenticates.** The page and its scripts are public static files (they hold
    no data); every data call the page makes sends ``Authorization: Bearer <token>`` and is
    checked like any API call (a missing or wrong token shows the ``401``, not data). The analyst
    types the token into the page's login field; the page keeps it in the tab's session storage
    (gone when the tab closes; never a cookie, so nothing a cookie-based CSRF could ride on) and
    ``/view/#alert=ALERT_ID`` opens an alert with it. A token in the URL *fragment*
    (``#alert=ALERT_ID&token=TOKEN``) is still read once: a browser never sends the fragment to the
    server, and the page removes it from the address bar and history entry at once. The page
    is served with a Content-Security-Policy that lets it load scripts and connect only to this
    server.

    The view's data call is ``GET /evidence?alert_id=ID``: the alert's evidence as its report
    shows it: by default its money trail (the report's ~30 headline accounts, the flows between
    them labelled with the traced amount, rounded, and the typology findings' members and
    transfers), or with ``view=trace`` the complete trace and the typology findings of
    :func:`auditflow_app.flow.trace_and_typologies` with the transfers of the findings; at most
    ``AUDITFLOW_ANALYST_MAX_RESULTS`` accounts and as many transfers (what was left out is
    counted), under the same timeout
    (:func:`auditflow_app.views.evidence_view`). Amounts travel as the exact integer ``units`` (a
    string of digits: JSON numbers in a browser are doubles) with their ``scale``; the page formats
    them with string arithmetic, never floats.

The cases pages (``/view/cases.html``, ``/view/case.html``)
    With ``AUDITFLOW_USERS_FILE``, the case queue (filters by state, priority, assignee and age; a
    row per case) and a case's page (its header, alerts, the first alert's evidence graph drawn
    by this view's own script, its timeline, notes and proposal, and a button or form for each
    action the user may take now, as the case's ``allowed`` says). They log in and keep the token
    as the evidence page does (the same session-storage entry: one login serves all three pages)
    and send every action with the version of the case they show (a ``409`` shows its message and
    reloads the case).

The routes, one router per resource: the graph queries (:func:`graph_router`), the run's alerts
(:func:`alerts_router`) and reports (:func:`reports_router`), an alert's evidence
(:func:`evidence_router`), all behind the token; the cases (:func:`auditflow_app.cases_api.
cases_router`) behind a users-file token; the web view's files (:func:`view_router`) and
``/health`` without. What the analyst routes share (settings, the store, the budget) is one
:class:`Analyst`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from auditflow.errors import ConfigError, FieldError, NoSuchAccount
from auditflow.jsonlines import read_json_lines
from auditflow.limits import MAX_TRACE_HOPS
from auditflow.records import AccountRef, TransactionEvent
from auditflow_app import flow, views
from auditflow_app.cases_api import READERS, CasesApi, UsersFile, cases_router, page_limit
from auditflow_app.settings import Settings
from evidence_graph.store import Direction, Expansion, GraphEdge, GraphStore, MicrosExpansion

_bearer = HTTPBearer(auto_error=False)
Limit = Annotated[int, Query(ge=1, description="items per page (at most AUDITFLOW_ANALYST_MAX_RESULTS)")]
Offset = Annotated[int, Query(ge=0)]
Hops = Annotated[int | None, Query(ge=1, le=MAX_TRACE_HOPS, description="[default: AUDITFLOW_TRACE_HOPS]")]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
T = TypeVar("T")


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


def _window(lo: datetime | None, hi: datetime | None) -> tuple[datetime | None, datetime | None] | None:
    return (lo, hi) if lo or hi else None


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
    "cases.html": ("view/cases.html", "text/html; charset=utf-8"),
    "case.html": ("view/case.html", "text/html; charset=utf-8"),
    "cases.js": ("view/cases.js", "text/javascript; charset=utf-8"),
    "cases.css": ("view/cases.css", "text/css; charset=utf-8"),
    "cytoscape.min.js": ("node_modules/cytoscape/dist/cytoscape.min.js", "text/javascript; charset=utf-8"),
}
#: Swagger UI's files for ``/docs``, served from here (npm ``swagger-ui-dist``, pinned in
#: web/package.json): the API's documentation renders with no internet (FastAPI's default page
#: loads them from a CDN).
DOCS_FILES = {
    "swagger-ui-bundle.js": ("node_modules/swagger-ui-dist/swagger-ui-bundle.js", "text/javascript; charset=utf-8"),
    "swagger-ui.css": ("node_modules/swagger-ui-dist/swagger-ui.css", "text/css; charset=utf-8"),
    "favicon-32x32.png": ("node_modules/swagger-ui-dist/favicon-32x32.png", "image/png"),
}
#: The page may load scripts and styles from this server and talk to it, and nothing else.
VIEW_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
AlertId = Annotated[str, Query(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:@/-]+$")]


# ---------------------------------------------------------------------------- the store, shared


class QueryTimeout(TimeoutError):
    """A request's budget ran out: it was answered ``504`` and its query stops at its next store
    call. Not a :class:`~evidence_graph.store.GraphQueryTimeout`, which a trace turns into a cut
    and carries on from: an abandoned query has nothing left to answer."""


class BudgetedStore(GraphStore):
    """One query's read-only view of the API's store: every call first checks the query's
    ``deadline`` (:func:`time.monotonic` seconds; past it, :class:`QueryTimeout`) and gives the
    backend at most the time left (Neo4j: the transaction timeout). Writes are refused."""

    def __init__(self, store: GraphStore, deadline: float) -> None:
        self.store, self.deadline = store, deadline
        self.backend = store.backend  # what a trace records

    def time_left(self) -> float:
        """Seconds left of the budget; :class:`QueryTimeout` when none are."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise QueryTimeout("the query's time budget ran out")
        return left

    def add_transactions(self, events: Iterable[TransactionEvent]) -> int:
        raise TypeError("the analyst API only reads the graph")

    def node_count(self) -> int:
        self.time_left()
        return self.store.node_count()

    def edge_count(self) -> int:
        self.time_left()
        return self.store.edge_count()

    def has_node(self, node_id: str) -> bool:
        self.time_left()
        return self.store.has_node(node_id)

    def _expand(
        self, requests: Sequence[Expansion], direction: Direction, limit: int | None, timeout: float | None
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        left = self.time_left()
        return self.store.expand(requests, direction, limit, timeout=left if timeout is None else min(timeout, left))

    def _expand_micros(
        self, requests: Sequence[MicrosExpansion], direction: Direction, limit: int | None, timeout: float | None
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        left = self.time_left()
        return self.store.expand_micros(
            requests, direction, limit, timeout=left if timeout is None else min(timeout, left)
        )


class StoreAccess:
    """How the API's requests share its one store object: side by side, each through its own
    :class:`BudgetedStore`, so that a query past its budget holds up no other.

    Reads never change a store. The embedded store (one with ``reload``) changes its indexes when
    it takes in what the stream job appended since, so a query reloads it first only when no other
    query is reading it (one still running, if past its budget, until its next store call): a query
    that starts beside others reads the graph as of the last reload. The lock guarding the count of
    readers and the reload is taken within the query's budget and never held while a query runs.
    The Neo4j store has no ``reload``: each of its calls opens its own session on the driver, which
    is thread-safe (sessions are not, and are not shared)."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self._reload: Callable[[], Any] | None = getattr(store, "reload", None)
        self._lock = threading.Lock()
        self._readers = 0

    @contextmanager
    def reading(self, deadline: float) -> Iterator[BudgetedStore]:
        """The store for one query with budget up to ``deadline`` (:func:`time.monotonic`)."""
        if not self._lock.acquire(timeout=max(deadline - time.monotonic(), 0)):
            raise QueryTimeout("the store's reload outlasted the query's time budget")
        try:
            if self._reload is not None and self._readers == 0:
                self._reload()  # what the stream job appended since
            self._readers += 1
        finally:
            self._lock.release()
        try:
            yield BudgetedStore(self.store, deadline)
        finally:
            with self._lock:
                self._readers -= 1


class Analyst:
    """What the routers share: the settings, the run's files, the store and the per-request budget
    (``AUDITFLOW_ANALYST_TIMEOUT_S``), the page cap (``AUDITFLOW_ANALYST_MAX_RESULTS``) and the
    accepted tokens (those of the tokens file, and the users file's when there is one)."""

    def __init__(
        self, settings: Settings, store: GraphStore, tokens: Sequence[bytes], users: UsersFile | None = None
    ) -> None:
        self.settings = settings
        self.access = StoreAccess(store)
        self.tokens = tuple(tokens)
        self.users = users
        self.cap, self.timeout = settings.analyst_max_results, settings.analyst_timeout_s
        self.paths = flow.RunPaths.under(settings.out_dir)

    def authorized(self, cred: Credentials) -> None:
        """The routers' dependency: ``401`` unless the bearer token is one of the accepted ones, or
        a users-file user's; ``403`` for a user whose role reads no evidence (an admin)."""
        given = (cred.credentials if cred is not None else "").encode()
        ok = False
        for t in self.tokens:  # every token compared, in constant time: no early exit to time
            ok |= hmac.compare_digest(given, t)
        user = self.users.authenticate(cred.credentials) if self.users is not None and cred is not None else None
        if cred is None or not (ok or user is not None):
            raise HTTPException(401, "missing or wrong token", headers={"WWW-Authenticate": "Bearer"})
        if not ok and user is not None and user.role not in READERS:
            raise HTTPException(403, f"an {user.role} reads no evidence (admins manage users, they work no case)")

    def check_limit(self, limit: int | None) -> int:
        return page_limit(limit, self.cap)

    async def run(self, work: Callable[[float], T]) -> T:
        """``work(deadline)`` in a worker thread within the request's budget: past it, ``504``
        (the worker, abandoned, stops at its next store call); ``ValueError``, ``422``; an account the
        graph does not hold, ``404``."""
        deadline = time.monotonic() + self.timeout
        try:
            return await asyncio.wait_for(asyncio.to_thread(work, deadline), max(deadline - time.monotonic(), 0))
        except TimeoutError:  # asyncio's, QueryTimeout, a backend's GraphQueryTimeout
            raise HTTPException(504, f"query ran past the {self.timeout:g} s limit") from None
        except NoSuchAccount as e:
            raise HTTPException(404, str(e)) from None
        except ValueError as e:
            raise HTTPException(422, str(e)) from None

    async def query(self, call: Callable[[GraphStore], T]) -> T:
        """:meth:`run` of ``call(store)``, the store read within the request's budget."""

        def work(deadline: float) -> T:
            with self.access.reading(deadline) as store:
                return call(store)

        return await self.run(work)


# ---------------------------------------------------------------------------- the routers


def graph_router(api: Analyst) -> APIRouter:
    """The graph queries, the ``auditflow graph`` commands' JSON: ``/trace``, ``/paths``,
    ``/neighborhood``, ``/typologies``."""
    from evidence_graph import Budget, detect_typologies, trace_evidence
    from evidence_graph.queries import money_paths, neighborhood, require_account

    router = APIRouter()
    settings, cap = api.settings, api.cap

    def known(store, node: str) -> str:  # an account the graph does not hold: 404 (NoSuchAccount)
        return require_account(store, node)

    @router.get("/trace")
    async def trace(
        account: str,
        direction: str = "out",
        hops: Hops = None,
        start: str | None = None,
        end: str | None = None,
        offset: Offset = 0,
        limit: Limit | None = None,
    ):
        """Where the money of an account went (``out``) or came from (``in``): a page of its nodes,
        and every edge, cut and hub of the trace."""
        node, lo, hi, limit = _account(account), _when(start, "start"), _when(end, "end"), api.check_limit(limit)
        budget = Budget(max_seconds=api.timeout)
        t = await api.query(
            lambda store: trace_evidence(
                store,
                known(store, node),
                hops or settings.trace_hops,
                direction,
                settings.trace_fanout_cap,
                _window(lo, hi),
                budget=budget,
            )
        )
        d = t.to_dict()
        nodes = d.pop("nodes")
        return {**d, "nodes": _page(nodes, offset, limit)}

    @router.get("/paths")
    async def paths_(
        source: str,
        target: str,
        max_hops: Hops = None,
        start: str | None = None,
        end: str | None = None,
        offset: Offset = 0,
        limit: Limit | None = None,
    ):
        """Time-ordered money paths from ``source`` to ``target``, fewest hops first."""
        a, b, lo, hi = _account(source), _account(target), _when(start, "start"), _when(end, "end")
        limit = api.check_limit(limit)
        found = await api.query(
            lambda store: money_paths(
                store,
                known(store, a),
                known(store, b),
                max_hops or settings.trace_hops,
                window=_window(lo, hi),
                budget=Budget(max_seconds=api.timeout),
                limit=cap,
            )
        )
        return _page(views.paths_view(found), offset, limit)

    @router.get("/neighborhood")
    async def neighborhood_(
        account: str, start: str | None = None, end: str | None = None, offset: Offset = 0, limit: Limit | None = None
    ):
        """An account's counterparties, most money first."""
        node, lo, hi, limit = _account(account), _when(start, "start"), _when(end, "end"), api.check_limit(limit)
        nb = await api.query(lambda store: neighborhood(store, known(store, node), window=_window(lo, hi), limit=cap))
        return {**_page([views.counterparty_view(r) for r in nb.rows], offset, limit), "truncated": nb.truncated}

    @router.get("/typologies")
    async def typologies(
        account: str, start: str | None = None, end: str | None = None, offset: Offset = 0, limit: Limit | None = None
    ):
        """The typology instances an account takes part in."""
        node, lo, hi, limit = _account(account), _when(start, "start"), _when(end, "end"), api.check_limit(limit)
        found = await api.query(lambda store: detect_typologies(store, known(store, node), _window(lo, hi)))
        return _page([m.to_dict() for m in found], offset, limit)

    return router


def alerts_router(api: Analyst) -> APIRouter:
    """The run's alerts: ``/alerts``."""
    router = APIRouter()

    @router.get("/alerts")
    async def alerts(offset: Offset = 0, limit: Limit | None = None):
        """The run's alerts (``OUT_DIR/alerts.jsonl``), in file order, without the ground-truth label."""
        limit = api.check_limit(limit)
        rows = await api.run(lambda _: read_json_lines(api.paths.alerts, missing_ok=True))
        return _page([views.alert_view(r) for r in rows], offset, limit)

    return router


def reports_router(api: Analyst) -> APIRouter:
    """The run's report manifests: ``/reports``."""
    router = APIRouter()

    @router.get("/reports")
    async def reports(offset: Offset = 0, limit: Limit | None = None):
        """The run's report manifests (``OUT_DIR/reports/*.manifest.json``), by name."""
        limit = api.check_limit(limit)

        def manifests(_: float) -> list[dict]:
            folder = api.paths.reports_dir
            if not folder.is_dir():
                return []
            return [json.loads(p.read_text()) for p in sorted(folder.glob("*.manifest.json"))]

        return _page(await api.run(manifests), offset, limit)

    return router


def evidence_router(api: Analyst) -> APIRouter:
    """An alert's evidence, the web view's data: ``/evidence``."""
    router = APIRouter()

    @router.get("/evidence")
    async def evidence(alert_id: AlertId, view: Literal["trail", "trace"] = "trail"):
        """An alert's evidence as its report shows it (the web view's data): by default its money
        trail (the report's headline accounts and the flows between them, the typology findings'
        members and transfers); ``view=trace``: the complete trace from the alert's account, with
        the findings' transfers; at most the result cap of accounts and of transfers (``omitted``
        counts the rest)."""

        def build(deadline: float) -> dict[str, Any] | None:
            row = flow.find_alert_row(api.paths.alerts, alert_id)
            if row is None:
                return None
            alert = flow.alert_from_row(row)
            with api.access.reading(deadline) as store:
                return views.evidence_view(flow.alert_evidence(store, alert, api.settings), api.cap, view=view)

        found = await api.run(build)
        if found is None:
            raise HTTPException(404, f"no alert {alert_id!r} in the run's alerts.jsonl")
        return found

    return router


def view_router(web: Path) -> APIRouter:
    """The web view's static files under ``/view/``, from ``web`` (public: they hold no data)."""
    router = APIRouter()

    @router.get("/view", include_in_schema=False)
    def view_root() -> RedirectResponse:
        return RedirectResponse("view/", status_code=307)  # relative: the page's own links resolve under it

    @router.get("/view/", include_in_schema=False)
    def view_page() -> FileResponse:
        return view_file("index.html")

    @router.get("/view/{name}", include_in_schema=False)
    def view_file(name: str) -> FileResponse:
        """The view's static files (public: they hold no data; every data call needs the token)."""
        return _installed_file(
            web, VIEW_FILES, name, "view file", "the web view", "make setup (npm ci in web/)", VIEW_HEADERS
        )

    return router


def _installed_file(
    web: Path,
    files: dict[str, tuple[str, str]],
    name: str,
    kind: str,
    what: str,
    fix: str,
    headers: dict[str, str] | None = None,
) -> FileResponse:
    """One of ``files`` (name -> (path under ``web``, media type)): ``404`` for a name not listed,
    ``503`` when ``what`` is not installed (saying how to ``fix`` it)."""
    if name not in files:
        raise HTTPException(404, f"no {kind} {name[:80]!r}")
    rel, media = files[name]
    path = web / rel
    if not path.is_file():
        raise HTTPException(503, f"{what} is not installed ({rel} missing under web/): run {fix}")
    return FileResponse(path, media_type=media, headers=headers)


def docs_router(web: Path, title: str) -> APIRouter:
    """``/docs``: Swagger UI over ``/openapi.json`` with its files from ``web`` (:data:`DOCS_FILES`),
    nothing loaded from elsewhere (public, as the OpenAPI document is)."""
    from fastapi.openapi.docs import get_swagger_ui_html

    router = APIRouter()

    @router.get("/docs", include_in_schema=False)
    def docs_page() -> Any:
        return get_swagger_ui_html(
            openapi_url="openapi.json",
            title=f"{title}: docs",
            swagger_js_url="docs/swagger-ui-bundle.js",
            swagger_css_url="docs/swagger-ui.css",
            swagger_favicon_url="docs/favicon-32x32.png",
        )

    @router.get("/docs/{name}", include_in_schema=False)
    def docs_file(name: str) -> FileResponse:
        return _installed_file(web, DOCS_FILES, name, "docs file", "Swagger UI", "make setup")

    return router


def create_app(settings: Settings, store: Any = None, *, web_dir: Path | None = None) -> FastAPI:
    """The API over ``settings``' graph (or ``store``, for tests) and run folder; the web view's
    files from ``web_dir`` (default :data:`WEB_DIR`). With ``AUDITFLOW_USERS_FILE``, the cases
    routes too, over the cases store (opened here, once, and closed when the app shuts down)."""
    if settings.analyst_tokens_file is None and settings.users_file is None:
        raise ConfigError(
            "the analyst API needs tokens: write read-only tokens (comma-separated, one line, mode 0600) to a "
            "file and set AUDITFLOW_ANALYST_TOKENS_FILE, or set AUDITFLOW_USERS_FILE to the cases' users file "
            "(`auditflow case user-add`)"
        )
    tokens = [t.get_secret_value().encode() for t in settings.analyst_tokens()] if settings.analyst_tokens_file else []
    if not tokens and settings.users_file is None:
        raise ValueError("AUDITFLOW_ANALYST_TOKENS_FILE holds no token")
    cases = CasesApi.open(settings) if settings.users_file is not None else None
    try:
        graph = store if store is not None else flow.open_graph(settings)
    except BaseException:
        if cases is not None:
            cases.close()
        raise
    api = Analyst(settings, graph, tokens, cases.users if cases is not None else None)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if cases is not None:
                cases.close()

    app = FastAPI(
        title="auditflow analyst API", version="1", description=__doc__, docs_url=None, redoc_url=None,
        lifespan=lifespan,
    )  # fmt: skip

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    auth = [Depends(api.authorized)]
    for router in (graph_router(api), alerts_router(api), reports_router(api), evidence_router(api)):
        app.include_router(router, dependencies=auth)
    if cases is not None:
        app.include_router(cases_router(cases))  # each route checks its user itself
        app.add_exception_handler(RequestValidationError, cases.validation_error)
    web = (web_dir if web_dir is not None else WEB_DIR).resolve()
    app.include_router(view_router(web))
    app.include_router(docs_router(web, app.title))

    @app.exception_handler(FieldError)
    async def field_error(_: Request, e: FieldError) -> JSONResponse:
        return JSONResponse({"detail": str(e)}, status_code=422)

    return app
