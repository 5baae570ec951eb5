"""The cases API: the case queue, a case, its actions, its files and its SAR, and the users, over
HTTP for the people of the users file (FastAPI; mounted by
:func:`auditflow_app.analyst_api.create_app` when ``AUDITFLOW_USERS_FILE`` is set). The work is
:mod:`auditflow_app.case_flow`'s, as for ``auditflow case``; this module checks who asks and
renders what it returns.

* **Who.** Every route needs ``Authorization: Bearer <token>``, the token of a user of
  ``AUDITFLOW_USERS_FILE``; its SHA-256 is compared with every user's in constant time
  (:meth:`cases.users.Users.authenticate`). A missing or unknown token is ``401``. The file is
  read again whenever it changes on disk (a user added, a token replaced), so a replaced token
  stops working at once.
* **Roles.** The workflow's rules decide (:mod:`cases.workflow`); a refusal keeps its status:
  ``403`` not the user's role or not their case, ``404`` no such case, ``409`` the action does not
  fit the case's state or the case moved on, ``422`` the action's content is wrong. On top of
  them: an **admin** gets ``403`` on every case route (admins manage users, they work no case) and
  is the only one who lists and adds users; an **auditor** only reads (``GET``; every ``POST`` is
  ``403``). Every error's body is ``{"detail": "<one line>"}``.
* **Versions.** A case's version is its number of entries; ``GET /cases/{id}`` sends it as the
  ``ETag`` (``"<version>"``). An action may name the version its user saw, as ``expected_version``
  in the body or as ``If-Match: "<version>"`` (both: they must agree): when the case has moved on
  since, the action is refused with ``409`` saying what changed, and nothing is written. Two
  users acting on the same version: one succeeds, the other gets the ``409``.
* **Threads.** The routes are plain functions: FastAPI runs them in its thread pool, so a request
  waiting on the store (an append waits for the one before it) holds up no other. The store is
  opened once per app (:func:`auditflow_app.case_flow.open_case_store`, signing each new tree head
  with ``AUDITFLOW_SIGNING_KEY_FILE``). Without a signing key the store is read only: cases are
  read, and every action is ``503`` saying so.

Routes
    ``GET /me``: the user's name and role (any user).
    ``GET /cases``: the queue (``state`` and ``priority`` repeatable, ``assignee``,
    ``min_age_days``; ``offset``/``limit`` paginate, at most ``AUDITFLOW_ANALYST_MAX_RESULTS``):
    ``{total, offset, items, next_offset}``, an item a :func:`auditflow_app.case_views.case_row`.
    ``GET /cases/{id}``: the case (:func:`auditflow_app.case_views.case_document`: its alerts,
    proposal, timeline, and the actions the user may take now, ``allowed``), with the SAR
    activity categories a proposal may name and those its alerts suggest (``sar_categories``).
    ``POST /cases/{id}/{action}``, action one of ``assign``, ``start``, ``note``, ``escalate``,
    ``close``, ``propose``, ``approve``, ``reject``, ``reopen``: the body is the action's content
    (``assignee``; ``text``; ``reason``; ``narrative``, ``categories`` ``[[8, 824], ...]`` and
    ``alert_ids``; nothing) and the optional ``expected_version``; the answer is the case after it,
    the entry, its index in the cases log and the log's signed tree head with it (the receipt).
    ``POST /cases/{id}/attachments`` ``{name, content_base64, media_type}`` (at most 10 MiB, else
    ``413``) keeps a file with the case (its version, when given, is checked as the request comes
    in: attaching fits every state, so an entry added meanwhile changes nothing it relies on);
    ``GET /cases/{id}/attachments/{sha256}`` gives it back (only a file that case lists; always as
    a download, never rendered by the browser).
    ``POST /cases/{id}/export-sar``: the FinCEN SAR batch XML (``application/xml``, as a download
    named ``<case>.sar.xml``), validated against FinCEN's schema; exporting an approved SAR files it
    (a log entry). ``GET /cases/{id}/sar.xml``: a filed SAR again, the same bytes, changing nothing
    (auditors too).
    ``GET /users``, ``POST /users`` ``{name, role}`` (admins only): the users, and a new user (or a
    new token for one already there, whose old token stops working): ``{name, role, token}``, the
    token shown once (the file keeps its hash).
"""

import base64
import binascii
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path as FilePath
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Body, Depends, Header, HTTPException, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from auditflow.errors import ConfigError
from auditflow_app import case_flow
from auditflow_app.case_views import case_document, case_row, entry_text
from auditflow_app.settings import Settings
from cases.store import CaseStore, Receipt, age_days
from cases.users import User, Users, UsersError
from cases.workflow import ROLES, STATES, TIERS, Actor, Case, CaseError, Conflict, NotFound, Queue

#: an attachment's size cap (bytes, decoded)
MAX_ATTACHMENT = 10 * 1024 * 1024
#: a request body's cap besides an attachment's (a narrative is at most 20,000 characters)
MAX_BODY = 1024 * 1024
DEFAULT_PAGE = 100  # items per page when no limit is given (at most the cap)


def page_limit(limit: int | None, cap: int) -> int:
    """A page's size: ``limit``, at most ``cap`` (``AUDITFLOW_ANALYST_MAX_RESULTS``; above it
    ``422``); ``DEFAULT_PAGE`` (or the cap) when not given."""
    if limit is None:
        return min(cap, DEFAULT_PAGE)
    if limit > cap:
        raise HTTPException(422, f"limit={limit}: at most {cap} (AUDITFLOW_ANALYST_MAX_RESULTS)")
    return limit


#: the roles that read cases, and those that change them
READERS = frozenset({"analyst", "approver", "auditor"})
WORKERS = frozenset({"analyst", "approver"})
#: the actions ``POST /cases/{id}/{action}`` takes (attachments have their own route)
ACTIONS = tuple(a for a in case_flow.USER_ACTIONS if a != "attach")
#: the paths this module serves (its validation errors are one line, like its other errors)
PATH_PREFIXES = ("/me", "/cases", "/users")

_bearer = HTTPBearer(
    auto_error=False, scheme_name="UsersToken", description="a users-file token (`auditflow case user-add`)"
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
CaseId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
IfMatch = Annotated[str | None, Header(description='the case\'s ETag as read: "<version>"')]
_ETAG = re.compile(r'^(?:W/)?"?([0-9]{1,9})"?$')
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}$")


def one_line(text: str) -> str:
    return " ".join(str(text).split())


class UsersFile:
    """The users file, read again whenever it changes on disk (its inode, size or modification
    time: :func:`cases.users.add_user` replaces the file whole)."""

    def __init__(self, path: FilePath) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._key: tuple[int, int, int] | None = None
        self._users: Users | None = None

    def load(self) -> Users:
        """The users as the file holds them now (:class:`cases.users.UsersError` when it cannot be
        read)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return Users.load(self.path)  # the error naming the file and what to do
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            if key != self._key or self._users is None:
                self._users = Users.load(self.path)
                self._key = key
            return self._users

    def authenticate(self, token: str | None) -> User | None:
        """The user whose token ``token`` is (None: nobody's; compared in constant time). An
        unreadable users file is ``503``: nobody is let in."""
        try:
            users = self.load()
        except UsersError as e:
            raise HTTPException(503, one_line(str(e))) from None
        return users.authenticate(token)


def unauthenticated() -> HTTPException:
    return HTTPException(401, "missing or wrong token", headers={"WWW-Authenticate": "Bearer"})


@contextmanager
def refusals() -> Iterator[None]:
    """The workflow's refusals and the errors of what a user sends as ``HTTPException``, one line:
    a :class:`cases.workflow.CaseError` with its own status; a setting missing for what was asked
    (no SAR filer file, no signing key) ``503``; any other ``ValueError`` (a users file name, a SAR
    that fails FinCEN's schema) ``422``."""
    from reports.signing import DevelopmentKeyRefused

    try:
        yield
    except CaseError as e:
        raise HTTPException(e.status, one_line(str(e))) from None
    except (ConfigError, DevelopmentKeyRefused) as e:
        raise HTTPException(503, one_line(str(e))) from None
    except ValueError as e:
        raise HTTPException(422, one_line(str(e))) from None


# ---------------------------------------------------------------------------- request bodies


class Versioned(BaseModel):
    """What every action's body may carry: the version of the case its user saw."""

    model_config = ConfigDict(extra="forbid", strict=True)

    expected_version: int | None = Field(
        default=None, ge=0, description="refuse (409) unless the case is still at this version"
    )


class AssignBody(Versioned):
    assignee: str | None = Field(default=None, description="who works the case [default: the user]")


class NoteBody(Versioned):
    text: str


class ReasonBody(Versioned):
    reason: str


class ProposeBody(Versioned):
    narrative: str
    categories: list[Annotated[list[int], Field(min_length=2, max_length=2)]] | None = Field(
        default=None, description="FinCEN activity categories [type id, subtype id] [default: what the alerts suggest]"
    )
    alert_ids: list[str] | None = Field(default=None, description="the alerts the SAR covers [default: all]")


BODIES: dict[str, type[Versioned]] = {
    "assign": AssignBody,
    "start": Versioned,
    "note": NoteBody,
    "escalate": ReasonBody,
    "close": ReasonBody,
    "propose": ProposeBody,
    "approve": Versioned,
    "reject": ReasonBody,
    "reopen": ReasonBody,
}


class AttachmentBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(description="the file's name (no '/', at most 255 characters)")
    content_base64: str = Field(description="the file's bytes, base64 (at most 10 MiB decoded)")
    media_type: str = ""
    expected_version: int | None = Field(default=None, ge=0, description="refuse (409) unless the case is at it")


class UserBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    role: Literal["analyst", "approver", "auditor", "admin"]


# ---------------------------------------------------------------------------- the API's state


class CasesApi:
    """What the cases routes share: the settings, the users file and the store (opened once)."""

    def __init__(self, settings: Settings, store: CaseStore, users: UsersFile) -> None:
        self.settings, self.store, self.users = settings, store, users
        self.cap = settings.analyst_max_results
        self._users_lock = threading.Lock()  # one users-file rewrite at a time

    @classmethod
    def open(cls, settings: Settings) -> "CasesApi":
        """The API over ``settings``' users file and cases store; a ``ValueError`` naming what is
        missing or unreadable (the users file, the signing key file when one is set)."""
        if settings.users_file is None:
            raise ConfigError("the cases API needs AUDITFLOW_USERS_FILE (add users with `auditflow case user-add`)")
        users = UsersFile(settings.users_file)
        users.load()  # a missing or broken users file stops the app now, not its first request
        return cls(settings, case_flow.open_case_store(settings), users)

    def close(self) -> None:
        self.store.close()

    # ------------------------------------------------------------------ who asks

    def user(self, cred: Credentials) -> User:
        """Dependency: the user of the bearer token, or ``401``."""
        user = self.users.authenticate(cred.credentials if cred is not None else None)
        if user is None:
            raise unauthenticated()
        return user

    def reader(self, cred: Credentials) -> User:
        """Dependency: a user who reads cases (``403`` for an admin)."""
        user = self.user(cred)
        if user.role not in READERS:
            raise HTTPException(403, f"an {user.role} may not read cases (admins manage users, they work no case)")
        return user

    def worker(self, cred: Credentials) -> User:
        """Dependency: a user who works cases (``403`` for an auditor or an admin)."""
        user = self.user(cred)
        if user.role == "auditor":
            raise HTTPException(403, "an auditor may not change a case (auditors read, they change nothing)")
        if user.role not in WORKERS:
            raise HTTPException(403, f"an {user.role} may not work a case (admins manage users, they work no case)")
        if self.store.signer is None:
            raise HTTPException(
                503, "the cases store is open read only: every action is signed, set AUDITFLOW_SIGNING_KEY_FILE"
            )
        return user

    def admin(self, cred: Credentials) -> User:
        """Dependency: an admin (``403`` for anyone else)."""
        user = self.user(cred)
        if user.role != "admin":
            raise HTTPException(403, f"only an admin manages users ({user.name} is an {user.role})")
        return user

    # ------------------------------------------------------------------ what it answers

    def document(self, case: Case, user: User) -> dict[str, Any]:
        """:func:`auditflow_app.case_views.case_document` and the SAR activity categories: every one
        a proposal may name, those the case's alerts suggest marked."""
        from auditflow.fincen import CATEGORIES

        suggested = set(case_flow.suggested_categories(case))
        cats = [
            {"type_id": c.type_id, "subtype_id": c.subtype_id, "code": c.code, "text": c.text,
             "suggested": (c.type_id, c.subtype_id) in suggested}
            for c in CATEGORIES
        ]  # fmt: skip
        return {**case_document(case, Actor(user.name, user.role)), "sar_categories": cats}

    def receipt(self, r: Receipt, user: User) -> JSONResponse:
        head = r.tree_head
        body = {
            "case": self.document(r.case, user),
            "entry": {**r.entry.to_dict(), "kind": r.entry.kind, "line": entry_text(r.entry)},
            "log_index": r.index,
            "tree_head": {
                "tree_size": head.tree_size, "root_hash": head.root_hash, "key_id": head.key_id,
                "signature": head.signature,
            },
        }  # fmt: skip
        return JSONResponse(body, headers={"ETag": etag(r.case.version)})

    def check_limit(self, limit: int | None) -> int:
        return page_limit(limit, self.cap)

    async def validation_error(self, request: Request, exc: Exception) -> Response:
        """The app's handler of FastAPI's request validation errors: on this module's paths, ``401``
        first when the token is not a user's (a request's body is parsed before its user is
        known), else ``422`` with one line naming the field and the value; elsewhere FastAPI's
        own answer."""
        assert isinstance(exc, RequestValidationError)
        if not request.url.path.startswith(PATH_PREFIXES):
            return await request_validation_exception_handler(request, exc)
        auth = request.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        user = await run_in_threadpool(self.users.authenticate, token.strip() if scheme.lower() == "bearer" else None)
        if user is None:
            e = unauthenticated()
            return JSONResponse({"detail": e.detail}, status_code=401, headers=e.headers)
        return JSONResponse({"detail": validation_text(exc)}, status_code=422)


def small_body(content_length: Annotated[str | None, Header(include_in_schema=False)] = None) -> None:
    """Dependency: ``413`` for a body declared larger than :data:`MAX_BODY` (an action's content
    is text of at most 20,000 characters)."""
    if content_length is not None and content_length.isdigit() and int(content_length) > MAX_BODY:
        raise HTTPException(413, f"the request has {int(content_length):,} bytes, at most {MAX_BODY:,}")


def etag(version: int) -> str:
    return f'"{version}"'


def validation_text(exc: RequestValidationError) -> str:
    """FastAPI's validation errors as one line: ``where.field=value: what is wrong``, ``;``
    between several."""
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ())]
        where = ".".join(loc[1:]) if len(loc) > 1 and loc[0] in ("query", "path", "header") else ".".join(loc)
        value = err.get("input")
        hidden = value is None or isinstance(value, dict | bytes) or err.get("type") in ("missing", "json_invalid")
        shown = "" if hidden else f"={value!r}"[:120]
        parts.append(f"{where or 'body'}{shown}: {err.get('msg', 'invalid')}")
    return one_line("; ".join(parts)) or "the request is not valid"


def expected_version(body_version: int | None, if_match: str | None) -> int | None:
    """The version the user saw: the body's ``expected_version`` or ``If-Match`` (``*``: any),
    ``422`` when they disagree or ``If-Match`` is not a version's ETag."""
    header = None
    if if_match is not None and if_match.strip() != "*":
        m = _ETAG.match(if_match.strip())
        if m is None:
            raise HTTPException(422, f'If-Match={if_match[:40]!r}: expected the case\'s ETag, "<version>"')
        header = int(m.group(1))
    if body_version is not None and header is not None and body_version != header:
        raise HTTPException(
            422, f"expected_version={body_version} but If-Match names version {header}: give one, or the same"
        )
    return body_version if body_version is not None else header


def check_version(case: Case, expected: int | None) -> None:
    """``409`` when the case moved on from ``expected`` (worded as the store words it)."""
    if expected is not None and case.version != expected:
        last = case.entries[-1]
        raise Conflict(
            f"case {case.case_id} changed since version {expected}: it is at version {case.version} "
            f"({last.kind} by {last.actor} at {last.at}); reload it and try again"
        )


def download_headers(filename: str) -> dict[str, str]:
    """A download, never rendered here: ``Content-Disposition: attachment`` (the name in ASCII,
    and exactly in RFC 5987 form), no sniffing, a sandbox with nothing allowed."""
    ascii_name = re.sub(r"[^A-Za-z0-9._ -]", "_", filename) or "file"
    return {
        "Content-Disposition": f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename, safe='')}",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cache-Control": "no-store",
    }


# ---------------------------------------------------------------------------- the routes


def cases_router(api: CasesApi) -> APIRouter:
    """The cases routes over ``api`` (see the module's text)."""
    router = APIRouter(tags=["cases"])
    settings, store = api.settings, api.store
    AnyUser = Annotated[User, Depends(api.user)]
    Reader = Annotated[User, Depends(api.reader)]
    Worker = Annotated[User, Depends(api.worker)]
    Admin = Annotated[User, Depends(api.admin)]

    @router.get("/me")
    def me(user: AnyUser) -> dict[str, str]:
        """Who the token is: the user's name and role."""
        return {"name": user.name, "role": user.role}

    @router.get("/cases")
    def queue(
        user: Reader,
        state: Annotated[list[str] | None, Query(description="only these states (repeat)")] = None,
        priority: Annotated[list[str] | None, Query(description="only these tiers (repeat): critical, ...")] = None,
        assignee: Annotated[str | None, Query(max_length=64, description="only this user's cases")] = None,
        min_age_days: Annotated[int | None, Query(ge=0, description="only cases open at least this many days")] = None,
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int | None, Query(ge=1, description="at most AUDITFLOW_ANALYST_MAX_RESULTS")] = None,
    ) -> dict[str, Any]:
        """The case queue, in the order the cases were opened."""
        for s in state or ():
            if s not in STATES:
                raise HTTPException(422, f"state={s[:40]!r}: expected one of {', '.join(STATES)}")
        for p in priority or ():
            if p not in TIERS:
                raise HTTPException(422, f"priority={p[:40]!r}: expected one of {', '.join(TIERS)}")
        limit = api.check_limit(limit)
        now = case_flow.now_utc()
        with refusals():
            q = Queue(frozenset(state or ()), frozenset(priority or ()), assignee, min_age_days)
            found = store.cases(q, now=now)
        page = found[offset : offset + limit]
        nxt = offset + len(page)
        return {
            "total": len(found),
            "offset": offset,
            "items": [case_row(c, age_days(c, now)) for c in page],
            "next_offset": nxt if nxt < len(found) else None,
        }

    @router.get("/cases/{case_id}")
    def case(case_id: CaseId, user: Reader) -> JSONResponse:
        """A case: its alerts, proposal, timeline and what the user may do now (``allowed``);
        ``ETag`` is its version."""
        with refusals():
            c = store.case(case_id)
        return JSONResponse(api.document(c, user), headers={"ETag": etag(c.version)})

    def action_route(action: str, model: type[Versioned]) -> None:
        def act(
            case_id: CaseId,
            user: Worker,
            if_match: IfMatch = None,
            body: Annotated[model | None, Body()] = None,  # type: ignore[valid-type]
        ) -> JSONResponse:
            payload: dict[str, Any] = body.model_dump(exclude_unset=True) if body is not None else {}
            expected = expected_version(payload.pop("expected_version", None), if_match)
            with refusals():
                r = case_flow.act(store, user, case_id, action, payload, settings=settings, expected_version=expected)
            return api.receipt(r, user)

        act.__name__ = f"case_{action}"
        act.__doc__ = f"{action.capitalize()} the case (the workflow's rules decide who may, in which state)."
        path, small = f"/cases/{{case_id}}/{action}", [Depends(small_body)]
        router.add_api_route(path, act, methods=["POST"], name=f"case_{action}", dependencies=small)

    @router.post(
        "/cases/{case_id}/attachments",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": AttachmentBody.model_json_schema()}},
            }
        },
    )
    async def attach(case_id: CaseId, request: Request, user: Worker, if_match: IfMatch = None) -> JSONResponse:
        """Keep a file with the case (by its SHA-256; the log names it, its hash and size), in any
        state."""
        size_cap = 4 * -(-MAX_ATTACHMENT // 3) + 64 * 1024  # the base64 of the cap, and the rest of the JSON
        raw = await read_body(request, size_cap, f"an attachment is at most {MAX_ATTACHMENT:,} bytes")
        try:
            body = AttachmentBody.model_validate_json(raw)
        except ValidationError as e:  # worded as FastAPI's own validation errors are here
            errors = [{**err, "loc": ("body", *err["loc"])} for err in e.errors()]
            raise HTTPException(422, validation_text(RequestValidationError(errors))) from None
        try:
            data = base64.b64decode(body.content_base64, validate=True)
        except (binascii.Error, ValueError):
            raise HTTPException(422, "content_base64: not base64 (RFC 4648, standard alphabet, padded)") from None
        if len(data) > MAX_ATTACHMENT:
            raise HTTPException(413, f"the attachment has {len(data):,} bytes, at most {MAX_ATTACHMENT:,}")
        expected = expected_version(body.expected_version, if_match)

        def work() -> Receipt:
            with refusals():
                if expected is not None:
                    check_version(store.case(case_id), expected)
                return case_flow.attach(
                    store, user, case_id, body.name, data, settings=settings, media_type=body.media_type
                )

        return api.receipt(await run_in_threadpool(work), user)

    @router.get("/cases/{case_id}/attachments/{sha256}", response_class=Response)
    def attachment(case_id: CaseId, sha256: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")], user: Reader) -> Response:
        """A file the case lists, as a download."""
        with refusals():
            c = store.case(case_id)
            listed = [a for a in c.attachments if a.get("sha256") == sha256]
            if not listed:
                raise NotFound(f"case {case_id} has no attachment {sha256}")
            data = store.attachment(sha256)
        media = str(listed[-1].get("media_type") or "")
        media = media if _MEDIA_TYPE.match(media) else "application/octet-stream"
        return Response(data, media_type=media, headers=download_headers(str(listed[-1]["name"])))

    @router.post("/cases/{case_id}/export-sar", response_class=Response, dependencies=[Depends(small_body)])
    def export_sar(
        case_id: CaseId, user: Worker, if_match: IfMatch = None, body: Annotated[Versioned | None, Body()] = None
    ) -> Response:
        """The case's FinCEN SAR batch XML (validated against FinCEN's schema), as a download;
        exporting an approved SAR files it (an entry: the XML's SHA-256, by the user)."""
        expected = expected_version(body.expected_version if body is not None else None, if_match)
        with refusals():
            if expected is not None:
                check_version(store.case(case_id), expected)
            got = case_flow.export_sar(store, user, case_id, settings=settings)
        return sar_response(got)

    @router.get("/cases/{case_id}/sar.xml", response_class=Response)
    def sar_xml(case_id: CaseId, user: Reader) -> Response:
        """A filed SAR's XML again (the same bytes as when it was filed); changes nothing."""
        with refusals():
            c = store.case(case_id)
            if c.filed is None:
                raise NotFound(
                    f"case {case_id} has no filed SAR (it is {c.state}): an approved SAR is filed by exporting it"
                )
            got = case_flow.export_sar(store, user, case_id, settings=settings)
        return sar_response(got)

    def sar_response(got: case_flow.SarExport) -> Response:
        headers = {**download_headers(f"{got.case_id}.sar.xml"), "X-SAR-SHA256": got.sha256}
        if got.receipt is not None:
            headers |= {"X-Log-Index": str(got.receipt.index), "ETag": etag(got.receipt.case.version)}
        return Response(got.xml, media_type="application/xml", headers=headers)

    @router.get("/users")
    def list_users(user: Admin) -> dict[str, Any]:
        """The users of the users file: names and roles (never their tokens' hashes)."""
        with refusals():
            found = api.users.load()
        return {"items": [{"name": u.name, "role": u.role} for u in found]}

    @router.post("/users", dependencies=[Depends(small_body)])
    def add_user(body: UserBody, user: Admin) -> dict[str, str]:
        """Add a user (or give one already there a new token and this role): the answer holds the
        token, shown once (the file keeps its hash)."""
        assert body.role in ROLES
        with refusals(), api._users_lock:
            token = case_flow.user_add(settings, user, body.name, body.role)
        return {"name": body.name, "role": body.role, "token": token}

    for action in ACTIONS:
        action_route(action, BODIES[action])
    return router


async def read_body(request: Request, cap: int, what: str) -> bytes:
    """The request's body, ``413`` (saying ``what``) past ``cap`` bytes, read no further."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise HTTPException(413, f"the request has {int(declared):,} bytes: {what}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise HTTPException(413, f"the request has more than {cap:,} bytes: {what}")
        chunks.append(chunk)
    return b"".join(chunks)


__all__ = ["CasesApi", "UsersFile", "cases_router"]
