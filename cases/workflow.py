"""A case's life: its states, who may do what, and its state as the fold of its entries.

A case is the list of its entries (:class:`CaseEntry`), each one action by one user (or by
``system``: the case opened, an alert joined). Nothing is stored besides them: :func:`fold`
replays the entries through :func:`decide`, the one place the rules live, so a history that
breaks a rule cannot even be folded (:class:`CaseError`).

States::

    new -> assigned -> investigating -> escalated
                       investigating | escalated -> closed_no_action
                       investigating | escalated -> sar_proposed -> sar_approved -> sar_filed
                                                    sar_proposed -> investigating (rejected)
    closed_no_action | sar_filed -> reopened -> assigned

The rules (``ROLE_ACTIONS``, ``decide``):

* **analyst** works cases: takes a case (assigns it to themself), starts, notes, attaches,
  escalates, closes with no action, proposes a SAR, marks an approved SAR filed;
* **approver** does what an analyst does, assigns a case to anyone who works cases, approves or
  rejects a proposed SAR -- never one they proposed themselves (four eyes) -- and reopens a
  closed case;
* **auditor** reads everything and changes nothing; **admin** manages users and works no case;
* only the case's assignee starts, escalates, closes or proposes (an approver may close or
  propose on an escalated case they took over by assigning it to themself);
* a closing, a rejection and a reopening state their reason; a proposal states its narrative,
  its activity categories and the alerts it covers (alerts of this case).

An alert joins its subject's open case (``alert_joined``); a subject with no open case (none yet,
or all closed or filed) gets a new one (``opened``). The case's priority is the most urgent tier
of its alerts, its SAR due date ``due_days`` days after its first alert was detected (fixed when
the case opens).

>>> opened = CaseEntry("c-1", 0, "opened", "system", "system", "2026-12-01T09:00:00Z",
...     {"subject": {"bank": "0001", "account": "8000A"}, "due": "2026-12-31",
...      "alert": {"alert_id": "alert-e1", "tier": "normal", "usd_cents": 120000}})
>>> case = fold([opened])
>>> case.state, case.priority, case.due
('new', 'normal', '2026-12-31')
>>> decide(case, Actor("ana", "analyst"), "assign", {"assignee": "ana", "assignee_role": "analyst"}).payload
{'assignee': 'ana', 'assignee_role': 'analyst'}
>>> decide(case, Actor("ana", "auditor"), "note", {"text": "x"})
Traceback (most recent call last):
...
cases.workflow.Forbidden: an auditor may not note a case (auditors read, they change nothing)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from auditflow.tiers import TIERS  # a case's priority: its most urgent alert's tier

STATES = (
    "new",
    "assigned",
    "investigating",
    "escalated",
    "closed_no_action",
    "sar_proposed",
    "sar_approved",
    "sar_filed",
    "reopened",
)
#: a case in one of these is closed: a new alert on its subject opens a new case
CLOSED = frozenset({"closed_no_action", "sar_filed"})
ROLES = ("analyst", "approver", "auditor", "admin")
#: the roles that work cases (may be assigned one)
WORKING_ROLES = frozenset({"analyst", "approver"})
#: the system's own entries (``opened``, ``alert_joined``) carry this actor and role
SYSTEM = "system"

#: action -> entry kind
KINDS = {
    "open": "opened",
    "join": "alert_joined",
    "assign": "assigned",
    "start": "started",
    "note": "noted",
    "attach": "attached",
    "escalate": "escalated",
    "close": "closed",
    "propose": "sar_proposed",
    "approve": "sar_approved",
    "reject": "sar_rejected",
    "file": "sar_filed",
    "reopen": "reopened",
}
ACTIONS = {kind: action for action, kind in KINDS.items()}

_WORK = frozenset({"assign", "start", "note", "attach", "escalate", "close", "propose", "file"})
ROLE_ACTIONS: Mapping[str, frozenset[str]] = {
    "analyst": _WORK,
    "approver": _WORK | {"approve", "reject", "reopen"},
    "auditor": frozenset(),
    "admin": frozenset(),
    SYSTEM: frozenset({"open", "join"}),
}
_WHY_NOT = {
    "auditor": "auditors read, they change nothing",
    "admin": "admins manage users, they work no case",
}

#: action -> the states it may be taken in
FROM_STATES: Mapping[str, frozenset[str]] = {
    "open": frozenset(),  # only as a case's first entry
    "join": frozenset(STATES) - CLOSED,
    "assign": frozenset({"new", "assigned", "investigating", "escalated", "reopened"}),
    "start": frozenset({"assigned"}),
    "note": frozenset(STATES),
    "attach": frozenset(STATES),
    "escalate": frozenset({"investigating"}),
    "close": frozenset({"investigating", "escalated"}),
    "propose": frozenset({"investigating", "escalated"}),
    "approve": frozenset({"sar_proposed"}),
    "reject": frozenset({"sar_proposed"}),
    "file": frozenset({"sar_approved"}),
    "reopen": CLOSED,
}
_TO_STATE = {
    "start": "investigating",
    "escalate": "escalated",
    "close": "closed_no_action",
    "propose": "sar_proposed",
    "approve": "sar_approved",
    "reject": "investigating",
    "file": "sar_filed",
    "reopen": "reopened",
}
#: actions only the case's assignee takes
_ASSIGNEE_ONLY = frozenset({"start", "escalate", "close", "propose"})
MAX_TEXT = 20_000  # a note, a reason, a narrative: characters


class CaseError(ValueError):
    """An action refused: ``status`` is the HTTP status it maps to."""

    status = 422


class Forbidden(CaseError):
    """The user's role may not take this action (or not on this case)."""

    status = 403


class Conflict(CaseError):
    """The action does not fit the case's state, or the case changed since the user read it."""

    status = 409


class Invalid(CaseError):
    """The action's content is wrong (a missing reason, an alert not in the case)."""

    status = 422


class NotFound(CaseError):
    status = 404


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts: a user's name and role (``system`` for the product's own entries)."""

    name: str
    role: str


@dataclass(frozen=True, slots=True)
class CaseEntry:
    """One action on one case: the ``seq``-th entry of ``case_id``, by ``actor`` in ``role``, at
    ``at`` (ISO 8601 UTC, ``Z``), with the action's ``payload``."""

    case_id: str
    seq: int
    kind: str
    actor: str
    role: str
    at: str
    payload: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "seq": self.seq,
            "actor": self.actor,
            "role": self.role,
            "at": self.at,
            **self.payload,
        }

    @classmethod
    def from_log(cls, kind: str, payload: Mapping[str, Any]) -> CaseEntry:
        """An entry from its log form (kind ``case.<kind>``, :meth:`to_dict` as payload)."""
        rest = {k: v for k, v in payload.items() if k not in ("case_id", "seq", "actor", "role", "at")}
        return cls(
            payload["case_id"], payload["seq"], kind.removeprefix("case."), payload["actor"], payload["role"],
            payload["at"], rest,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Proposal:
    """A SAR proposal: by whom (entry ``seq``), its narrative, categories and covered alerts."""

    seq: int
    actor: str
    at: str
    narrative: str
    categories: tuple[tuple[int, int], ...]
    alert_ids: tuple[str, ...]


@dataclass(frozen=True)
class Case:
    """A case as its entries make it (:func:`fold`); ``version`` is its number of entries."""

    case_id: str
    subject: dict[str, str]
    state: str
    opened_at: str
    due: str
    alerts: tuple[dict[str, Any], ...]
    entries: tuple[CaseEntry, ...]
    assignee: str | None = None
    proposal: Proposal | None = None
    approved_by: str | None = None
    filed: dict[str, Any] | None = None
    notes: tuple[CaseEntry, ...] = ()
    attachments: tuple[dict[str, Any], ...] = ()
    reason: str | None = None  # the last closing, rejection or reopening reason

    @property
    def version(self) -> int:
        return len(self.entries)

    @property
    def priority(self) -> str:
        tiers = [a.get("tier") for a in self.alerts]
        return next((t for t in TIERS if t in tiers), TIERS[-1])

    @property
    def is_open(self) -> bool:
        return self.state not in CLOSED

    @property
    def alert_ids(self) -> tuple[str, ...]:
        return tuple(a["alert_id"] for a in self.alerts)

    def allowed(self, actor: Actor) -> list[str]:
        """The actions ``actor`` may take on the case now (what a page offers them)."""
        out = []
        for action in ROLE_ACTIONS.get(actor.role, ()):
            if action in ("open", "join") or self.state not in FROM_STATES[action]:
                continue
            if _who_refuses(self, actor, action, {}) is None:
                out.append(action)
        return sorted(out)


def _text(payload: Mapping[str, Any], key: str, what: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f"{what} needs {key!r}: a non-empty text, got {value!r}")
    if len(value) > MAX_TEXT:
        raise Invalid(f"{key} has {len(value):,} characters, at most {MAX_TEXT:,}")
    return value


def _who_refuses(case: Case, actor: Actor, action: str, payload: Mapping[str, Any]) -> str | None:
    """Why ``actor`` may not take ``action`` on ``case`` for who they are (None: they may)."""
    if action in _ASSIGNEE_ONLY and case.assignee != actor.name:
        return f"only the case's assignee ({case.assignee or 'nobody yet'}) may {action} it"
    if action in ("approve", "reject") and case.proposal is not None and case.proposal.actor == actor.name:
        return f"{actor.name} proposed this SAR: another approver must {action} it (four eyes)"
    if action == "assign" and actor.role == "analyst" and payload.get("assignee", actor.name) != actor.name:
        return "an analyst may assign a case only to themself; an approver assigns it to others"
    return None


def decide(case: Case | None, actor: Actor, action: str, payload: Mapping[str, Any]) -> CaseEntry:
    """The entry ``actor`` taking ``action`` with ``payload`` adds to ``case`` (None: no case yet,
    for ``open``), or :class:`CaseError` saying why not. Pure: the entry's ``case_id``, ``seq`` and
    ``at`` are placeholders the store fills (``seq`` is the case's version)."""
    if action not in KINDS:
        raise Invalid(f"unknown action {action!r}; expected one of {', '.join(sorted(KINDS))}")
    if actor.role not in ROLE_ACTIONS:
        raise Forbidden(f"unknown role {actor.role!r}; expected one of {', '.join(ROLES)}")
    if action not in ROLE_ACTIONS[actor.role]:
        role = "an" if actor.role[0] in "aeiou" else "a"
        who = " or ".join(f"{r}s" for r in ROLES if action in ROLE_ACTIONS[r]) or "the system"
        why = _WHY_NOT.get(actor.role, f"only {who} do")
        raise Forbidden(f"{role} {actor.role} may not {action} a case ({why})")
    if action == "open":
        if case is not None:
            raise Conflict(f"case {case.case_id} is already open")
        return _entry("", 0, action, actor, _opened(payload))
    if case is None:
        raise NotFound(f"no case to {action}")
    if case.state not in FROM_STATES[action]:
        raise Conflict(f"case {case.case_id} is {case.state}: it cannot be {action}{'e' * (not action.endswith('e'))}d")
    why = _who_refuses(case, actor, action, payload)
    if why:
        raise Forbidden(why)
    body: dict[str, Any]
    if action == "join":
        alert = payload.get("alert")
        if not isinstance(alert, Mapping) or not alert.get("alert_id"):
            raise Invalid(f"join needs the alert, got {alert!r}")
        if alert["alert_id"] in case.alert_ids:
            raise Conflict(f"alert {alert['alert_id']} is already in case {case.case_id}")
        body = {"alert": dict(alert)}
    elif action == "assign":
        assignee = payload.get("assignee", actor.name)
        role = payload.get("assignee_role", actor.role if assignee == actor.name else None)
        if not isinstance(assignee, str) or not assignee:
            raise Invalid(f"assign needs the assignee's name, got {assignee!r}")
        if role not in WORKING_ROLES:
            raise Invalid(f"{assignee} cannot be assigned a case: role {role!r} works no case (analyst or approver)")
        body = {"assignee": assignee, "assignee_role": role}
    elif action == "note":
        body = {"text": _text(payload, "text", "a note")}
    elif action == "attach":
        name, sha, size = payload.get("name"), payload.get("sha256"), payload.get("size")
        if not isinstance(name, str) or not name or "/" in name or len(name) > 255:
            raise Invalid(f"attach needs a file name (no '/', at most 255 characters), got {name!r}")
        if not isinstance(sha, str) or len(sha) != 64 or not isinstance(size, int) or size < 0:
            raise Invalid(f"attach needs the file's sha256 and size, got {sha!r}, {size!r}")
        body = {"name": name, "sha256": sha, "size": size, "media_type": str(payload.get("media_type", ""))}
    elif action in ("close", "reject", "reopen"):
        body = {"reason": _text(payload, "reason", f"{action} (a reason)")}
    elif action == "escalate":
        body = {"reason": _text(payload, "reason", "escalate (a reason)")}
    elif action == "propose":
        body = _proposal(case, payload)
    elif action == "approve":
        assert case.proposal is not None
        body = {"proposal_seq": case.proposal.seq}
    elif action == "file":
        sha = payload.get("xml_sha256")
        if not isinstance(sha, str) or len(sha) != 64:
            raise Invalid(f"file needs the SAR XML's sha256, got {sha!r}")
        body = {"xml_sha256": sha, "file_name": str(payload.get("file_name", ""))}
    else:  # start
        body = {}
    return _entry(case.case_id, case.version, action, actor, body)


def _entry(case_id: str, seq: int, action: str, actor: Actor, payload: dict[str, Any]) -> CaseEntry:
    return CaseEntry(case_id, seq, KINDS[action], actor.name, actor.role, "", payload)


def _opened(payload: Mapping[str, Any]) -> dict[str, Any]:
    subject, alert, due = payload.get("subject"), payload.get("alert"), payload.get("due")
    if not isinstance(subject, Mapping) or not subject.get("account"):
        raise Invalid(f"open needs the subject account, got {subject!r}")
    if not isinstance(alert, Mapping) or not alert.get("alert_id"):
        raise Invalid(f"open needs the alert, got {alert!r}")
    if not isinstance(due, str) or len(due) != 10:
        raise Invalid(f"open needs the SAR due date (YYYY-MM-DD), got {due!r}")
    return {"subject": dict(subject), "alert": dict(alert), "due": due}


def _proposal(case: Case, payload: Mapping[str, Any]) -> dict[str, Any]:
    narrative = _text(payload, "narrative", "a SAR proposal (its narrative)")
    cats = payload.get("categories")
    if not isinstance(cats, list | tuple) or not cats:
        raise Invalid("a SAR proposal needs at least one activity category ([type id, subtype id])")
    categories = []
    for c in cats:
        if (
            not isinstance(c, list | tuple)
            or len(c) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in c)
        ):
            raise Invalid(f"an activity category is [type id, subtype id] (integers), got {c!r}")
        categories.append([c[0], c[1]])
    ids = payload.get("alert_ids", list(case.alert_ids))
    if not isinstance(ids, list | tuple) or not ids:
        raise Invalid("a SAR proposal covers at least one of the case's alerts")
    stray = [a for a in ids if a not in case.alert_ids]
    if stray:
        raise Invalid(f"alert {stray[0]!r} is not in case {case.case_id}")
    return {"narrative": narrative, "categories": sorted(categories), "alert_ids": list(dict.fromkeys(ids))}


def apply(case: Case | None, entry: CaseEntry) -> Case:
    """``case`` after ``entry`` (which :func:`decide` made, or a stored one, re-decided here: an
    entry the rules refuse raises :class:`CaseError`)."""
    action = ACTIONS.get(entry.kind)
    if action is None:
        raise Invalid(f"entry {entry.seq} of case {entry.case_id}: unknown kind {entry.kind!r}")
    expected = 0 if case is None else case.version
    if entry.seq != expected:
        raise Conflict(f"case {entry.case_id}: entry {entry.seq} where entry {expected} was due")
    redo = decide(case, Actor(entry.actor, entry.role), action, entry.payload)
    if redo.payload != entry.payload:
        raise Invalid(f"case {entry.case_id} entry {entry.seq}: its content is not what the rules make of it")
    p = entry.payload
    if case is None:
        return Case(
            case_id=entry.case_id,
            subject=dict(p["subject"]),
            state="new",
            opened_at=entry.at,
            due=p["due"],
            alerts=(dict(p["alert"]),),
            entries=(entry,),
        )
    changes: dict[str, Any] = {"entries": (*case.entries, entry)}
    if action in _TO_STATE:
        changes["state"] = _TO_STATE[action]
    if action == "join":
        changes["alerts"] = (*case.alerts, dict(p["alert"]))
    elif action == "assign":
        changes["assignee"] = p["assignee"]
        if case.state in ("new", "reopened"):
            changes["state"] = "assigned"
    elif action == "note":
        changes["notes"] = (*case.notes, entry)
    elif action == "attach":
        changes["attachments"] = (*case.attachments, {**p, "by": entry.actor, "at": entry.at})
    elif action == "propose":
        changes["proposal"] = Proposal(
            entry.seq, entry.actor, entry.at, p["narrative"], tuple((a, b) for a, b in p["categories"]),
            tuple(p["alert_ids"]),
        )  # fmt: skip
        changes["approved_by"] = None
    elif action == "approve":
        changes["approved_by"] = entry.actor
    elif action == "reject":
        changes["proposal"], changes["reason"] = None, p["reason"]
    elif action == "file":
        changes["filed"] = {**p, "by": entry.actor, "at": entry.at}
    elif action in ("close", "reopen", "escalate"):
        changes["reason"] = p["reason"]
        if action == "reopen":
            changes.update(assignee=None, proposal=None, approved_by=None, filed=None)
    return replace(case, **changes)


def fold(entries: Iterable[CaseEntry]) -> Case:
    """The case its entries make, each re-checked against the rules (:class:`CaseError` on the
    first that breaks one, naming it)."""
    case: Case | None = None
    for entry in entries:
        if case is not None and entry.case_id != case.case_id:
            raise Invalid(f"entry {entry.seq} belongs to case {entry.case_id}, not {case.case_id}")
        case = apply(case, entry)
    if case is None:
        raise NotFound("a case has at least one entry")
    return case


@dataclass(frozen=True)
class Queue:
    """Which cases a queue page lists: by state, priority (tier), assignee, age in days."""

    states: frozenset[str] = field(default_factory=frozenset)
    priorities: frozenset[str] = field(default_factory=frozenset)
    assignee: str | None = None
    min_age_days: int | None = None

    def admits(self, case: Case, age_days: int) -> bool:
        return (
            (not self.states or case.state in self.states)
            and (not self.priorities or case.priority in self.priorities)
            and (self.assignee is None or case.assignee == self.assignee)
            and (self.min_age_days is None or age_days >= self.min_age_days)
        )
