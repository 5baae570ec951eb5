"""Cases, orchestrated: the store the settings name, who acts (the users file and a token),
alerts into cases, actions, the SAR batch XML, and the cases log's verification.

The CLI (``auditflow case``) and the cases API call these and render what they return.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from auditflow.errors import ConfigError
from auditflow.jsonlines import iter_json_lines
from auditflow.money import usd_cents
from auditflow_app.settings import Settings
from cases.store import CaseStore, Receipt, verify_cases_log
from cases.users import User, Users, add_user
from cases.workflow import Actor, Case, CaseError, Conflict, Forbidden, Invalid, NotFound

#: the actions a user takes through ``act`` (the system's own: ``open``, ``join``)
USER_ACTIONS = ("assign", "start", "note", "attach", "escalate", "close", "propose", "approve", "reject", "reopen")


class Unauthenticated(CaseError):
    """No token, or one no user has."""

    status = 401


def now_utc() -> datetime:
    return datetime.now(UTC)


def open_case_store(settings: Settings, *, development_key: bool = False, pool_size: int = 10) -> CaseStore:
    """The cases store of ``AUDITFLOW_CASES_URL`` (default: ``OUT_DIR/cases.sqlite``), signing with
    the report signing key. Without one it reads, and writes only where ``development_key`` (the
    demo) or where its log is already signed with the development key (the demo's cases: acting on
    them signs as the demo did, and ``verify`` says such signatures prove nothing)."""
    from auditflow_app.flow import report_signer
    from reports.signing import development_signer

    url = settings.effective_cases_url
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    signing = settings.signing_key_file is not None or development_key
    store = CaseStore(url, report_signer(settings, development_key=development_key) if signing else None,
                      pool_size=pool_size)  # fmt: skip
    if store.signer is None:
        head = store.tree_head()
        if head is not None and head.key_id == development_signer().key_id:
            store.signer = development_signer()
    return store


def users(settings: Settings) -> Users:
    if settings.users_file is None:
        raise ConfigError(
            "cases need users: add one with `auditflow case user-add NAME --role admin` "
            "after setting AUDITFLOW_USERS_FILE=PATH"
        )
    return Users.load(settings.users_file)


def authenticate(settings: Settings, token: str | None) -> User:
    """The user whose token ``token`` is (``AUDITFLOW_TOKEN`` on the command line)."""
    if not token:
        raise Unauthenticated("no token: set AUDITFLOW_TOKEN to your token (`auditflow case user-add` made it)")
    user = users(settings).authenticate(token)
    if user is None:
        raise Unauthenticated("the token is not any user's (a new token replaces the old one)")
    return user


def user_add(settings: Settings, acting: User | None, name: str, role: str) -> str:
    """Add (or re-key) a user; only an admin may, except the first user of a new file, who must be
    an admin. Returns the new token."""
    if settings.users_file is None:
        raise ConfigError("set AUDITFLOW_USERS_FILE=PATH (the users file to write) first")
    path = settings.users_file
    existing = Users.load(path) if path.exists() else None
    if existing is not None and len(existing):
        if acting is None or acting.role != "admin":
            raise Forbidden("only an admin adds users (set AUDITFLOW_TOKEN to an admin's token)")
    elif role != "admin":
        raise Invalid(f"the first user must be an admin (got role {role!r}): the admin then adds the others")
    return add_user(path, name, role)


# ---------------------------------------------------------------------------- alerts into cases


def alert_ref(row: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """What a case keeps of one ``alerts.jsonl`` row, and its subject (the paying account). Never
    the ground-truth label."""
    from auditflow_app.flow import alert_from_row

    alert = alert_from_row(dict(row))
    ev = alert.event
    report = Path(row["report"]).name if row.get("report") else None
    ref = {
        "alert_id": alert.alert_id,
        "event_id": ev.event_id,
        "time": ev.timestamp.isoformat(timespec="seconds") + "Z",
        "amount": {"units": str(ev.amount_paid.units), "currency": ev.amount_paid.currency},
        "usd_cents": usd_cents(ev.amount_paid),
        "payment_format": ev.payment_format,
        "cross_currency": ev.amount_paid.currency != ev.amount_received.currency,
        "counterparty": {"bank": ev.receiver.bank, "account": ev.receiver.account},
        "score": round(alert.score, 6),
        "tier": row.get("tier") or "",
        "typologies": list(row.get("typologies") or ()),
        "report": report,
        "input_sha256": row.get("input_sha256") or "",
    }
    return ref, {"bank": ev.sender.bank, "account": ev.sender.account}


@dataclass(frozen=True)
class CasesOpened:
    """``auditflow case open``: how many alerts opened a case, joined one, or were in one already."""

    alerts: int
    opened: int
    joined: int
    receipts: list[Receipt] = field(default_factory=list)

    @property
    def already(self) -> int:
        return self.alerts - self.opened - self.joined


def open_cases(
    settings: Settings, alerts_path: str | Path, *, now: datetime | None = None, development_key: bool = False
) -> CasesOpened:
    """Every alert of a run's ``alerts.jsonl`` into a case (:meth:`cases.store.CaseStore.take_alert`),
    in the file's order; the SAR due ``AUDITFLOW_SAR_DUE_DAYS`` after ``now`` (detection)."""
    now = now or now_utc()
    rows = list(iter_json_lines(alerts_path))
    due = (now.date() + timedelta(days=settings.sar_due_days)).isoformat()
    with open_case_store(settings, development_key=development_key) as store:
        receipts = store.take_alerts((alert_ref(r) for r in rows), now, due)
    opened = sum(1 for r in receipts if r.entry.kind == "opened")
    return CasesOpened(len(rows), opened, len(receipts) - opened, receipts)


# ---------------------------------------------------------------------------- actions


def act(
    store: CaseStore,
    user: User,
    case_id: str,
    action: str,
    payload: Mapping[str, Any],
    *,
    settings: Settings,
    now: datetime | None = None,
    expected_version: int | None = None,
) -> Receipt:
    """``user`` takes ``action`` on the case. An assignee must be a user of the users file, with a
    role that works cases."""
    if action not in USER_ACTIONS:
        raise Invalid(f"unknown action {action!r}; expected one of {', '.join(USER_ACTIONS)}")
    payload = dict(payload)
    if action == "assign":
        name = payload.get("assignee") or user.name
        other = users(settings).get(name)
        if other is None:
            raise Invalid(f"assignee {name!r} is not a user")
        payload.update(assignee=name, assignee_role=other.role)
    elif action == "propose":
        from auditflow.fincen import category

        ids = payload.get("alert_ids") or None
        case = store.case(case_id)
        stray = [a for a in ids or () if a not in case.alert_ids]
        if stray:
            raise Invalid(f"alert {stray[0]!r} is not in case {case_id}")
        cats = payload.get("categories") or suggested_categories(case, ids)
        try:
            payload["categories"] = [[category(*c).type_id, category(*c).subtype_id] for c in cats]
        except (TypeError, ValueError) as e:
            raise Invalid(str(e)) from None
        if ids is None:
            payload.pop("alert_ids", None)
    return store.act(
        case_id, Actor(user.name, user.role), action, payload, now or now_utc(), expected_version=expected_version
    )


def attach(
    store: CaseStore, user: User, case_id: str, name: str, data: bytes, *, settings: Settings, media_type: str = ""
) -> Receipt:
    """Keep a file with the case (by content) and log its name, hash and size."""
    case = store.case(case_id)
    if user.role not in ("analyst", "approver"):
        raise Forbidden(f"a {user.role} may not attach files to a case")
    if "attach" not in case.allowed(Actor(user.name, user.role)):
        raise Conflict(f"case {case_id} is {case.state}: nothing can be attached")
    sha = store.put_attachment(data)
    payload = {"name": name, "sha256": sha, "size": len(data), "media_type": media_type}
    return act(store, user, case_id, "attach", payload, settings=settings)


def suggested_categories(case: Case, alert_ids: Iterable[str] | None = None) -> list[tuple[int, int]]:
    """FinCEN activity categories the case's alerts point to (:func:`auditflow.fincen.activity_categories`),
    for the analyst to confirm."""
    from auditflow.fincen import activity_categories

    ids = set(alert_ids or case.alert_ids)
    found: set[tuple[int, int]] = set()
    for a in case.alerts:
        if a["alert_id"] in ids:
            for c in activity_categories(a.get("typologies") or [], a.get("payment_format", ""),
                                         cross_currency=bool(a.get("cross_currency"))):  # fmt: skip
                found.add((c.type_id, c.subtype_id))
    return sorted(found)


# ---------------------------------------------------------------------------- the SAR


@dataclass(frozen=True)
class SarExport:
    """``auditflow case export-sar``: the XML, its SHA-256, and the receipt when exporting filed it."""

    case_id: str
    xml: bytes
    sha256: str
    receipt: Receipt | None


def sar_filing(case: Case, on: date) -> Any:
    """The :class:`cases.sar_xml.SarFiling` of a case's approved proposal: its narrative and
    categories, the alerts it covers (their total in US cents, first and last day), the subject."""
    from auditflow.fincen import ActivityCategory, category
    from cases.sar_xml import SarFiling, SarSubject

    p = case.proposal
    if p is None or case.state not in ("sar_approved", "sar_filed"):
        raise Conflict(f"case {case.case_id} is {case.state}: only an approved SAR is exported")
    covered = [a for a in case.alerts if a["alert_id"] in p.alert_ids]
    days = sorted(date.fromisoformat(a["time"][:10]) for a in covered)
    cats: list[ActivityCategory] = [category(t, s) for t, s in p.categories]
    subject = SarSubject(account_id=case.subject["account"], bank_id=case.subject.get("bank", ""), name=None)
    return SarFiling(
        case_id=case.case_id,
        filing_date=on,
        activity_start=days[0],
        activity_end=days[-1],
        amount_cents=sum(int(a["usd_cents"]) for a in covered),
        categories=tuple(cats),
        subjects=(subject,),
        narrative=p.narrative,
    )


def export_sar(
    store: CaseStore, user: User, case_id: str, *, settings: Settings, now: datetime | None = None
) -> SarExport:
    """The case's SAR batch XML, validated against FinCEN's schema (:class:`cases.sar_xml.SarInvalid`
    naming the element and value otherwise). Exporting an approved SAR files it (an entry with the
    XML's SHA-256, by ``user``); a filed one exports again to the same bytes on its filing date."""
    from cases.sar_xml import Filer, check_sar_xml, sar_batch_xml

    if settings.sar_filer_file is None:
        raise ConfigError(
            "a SAR names the filing institution: set AUDITFLOW_SAR_FILER_FILE to its fixed fields "
            "(JSON, as deploy/filer.example.json)"
        )
    if user.role not in ("analyst", "approver", "auditor"):
        raise Forbidden(f"a {user.role} may not export a SAR")
    case = store.case(case_id)
    now = now or now_utc()
    filed_on = date.fromisoformat(case.filed["at"][:10]) if case.filed else now.date()
    try:
        filer = Filer.load(settings.sar_filer_file)
    except ValueError as e:  # the institution's fixed fields are a setting, not the user's input
        raise ConfigError(f"AUDITFLOW_SAR_FILER_FILE: {e}") from None
    xml = sar_batch_xml(sar_filing(case, filed_on), filer)
    check_sar_xml(xml)
    sha = hashlib.sha256(xml).hexdigest()
    receipt = None
    if case.state == "sar_approved":
        if user.role == "auditor":
            raise Forbidden("an auditor may download a filed SAR, not file one")
        payload = {"xml_sha256": sha, "file_name": f"{case_id}.sar.xml"}
        receipt = store.act(case_id, Actor(user.name, user.role), "file", payload, now, expected_version=case.version)
    elif case.filed and case.filed["xml_sha256"] != sha:
        raise Conflict(
            f"case {case_id}'s SAR was filed as {case.filed['xml_sha256'][:16]}..., this export gives "
            f"{sha[:16]}... (the filer file changed since): the filed XML is not reproduced"
        )
    return SarExport(case_id, xml, sha, receipt)


# ---------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class CasesVerified:
    entries: int
    cases: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_cases(
    settings: Settings, *, tree_head_file: str | Path | None = None, allow_dev_key: bool = False
) -> CasesVerified:
    """:func:`cases.store.verify_cases_log` of the configured store, against the trusted keys."""
    from auditflow_app.flow import trusted_keys
    from reports.audit_log import TreeHead

    head = TreeHead.load(tree_head_file) if tree_head_file is not None else None
    store = CaseStore(settings.effective_cases_url)
    try:
        lines, heads = store.log_lines(), store.tree_heads()
    finally:
        store.close()
    problems = verify_cases_log(lines, heads, trusted_keys(settings, development_key=allow_dev_key), trusted_head=head)
    cases = len({_case_of(line) for _, line in lines} - {None})
    return CasesVerified(len(lines), cases, problems)


def _case_of(line: bytes) -> str | None:
    try:
        return json.loads(line)["payload"]["case_id"]
    except (ValueError, KeyError, TypeError):
        return None


def cases_store_exists(settings: Settings) -> bool:
    url = settings.effective_cases_url
    return not url.startswith("sqlite:///") or Path(url.removeprefix("sqlite:///")).exists()


__all__ = [
    "CaseError",
    "CasesOpened",
    "CasesVerified",
    "Conflict",
    "Forbidden",
    "Invalid",
    "NotFound",
    "SarExport",
    "Unauthenticated",
    "act",
    "alert_ref",
    "attach",
    "authenticate",
    "export_sar",
    "open_case_store",
    "open_cases",
    "sar_filing",
    "suggested_categories",
    "user_add",
    "users",
    "verify_cases",
]
