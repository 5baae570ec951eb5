"""The case state machine: every action in every state for every role, against the issue's
arrows written out here; random action sequences (the state is always the fold of the log, and
no sequence lets one user propose and approve the same SAR)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cases.workflow import (
    CLOSED,
    STATES,
    Actor,
    CaseEntry,
    CaseError,
    Conflict,
    Forbidden,
    Invalid,
    apply,
    decide,
    fold,
)

# The arrows: (from, action, to); "same" keeps the state.
ARROWS = [
    ("new", "assign", "assigned"),
    ("reopened", "assign", "assigned"),
    ("assigned", "assign", "assigned"),
    ("investigating", "assign", "investigating"),
    ("escalated", "assign", "escalated"),
    ("assigned", "start", "investigating"),
    ("investigating", "escalate", "escalated"),
    ("investigating", "close", "closed_no_action"),
    ("escalated", "close", "closed_no_action"),
    ("investigating", "propose", "sar_proposed"),
    ("escalated", "propose", "sar_proposed"),
    ("sar_proposed", "approve", "sar_approved"),
    ("sar_proposed", "reject", "investigating"),
    ("sar_approved", "file", "sar_filed"),
    ("closed_no_action", "reopen", "reopened"),
    ("sar_filed", "reopen", "reopened"),
] + [(s, a, s) for s in STATES for a in ("note", "attach")]
# Who may take each action, from the roles.
MAY = {
    "analyst": {"assign", "start", "note", "attach", "escalate", "close", "propose", "file"},
    "approver": {"assign", "start", "note", "attach", "escalate", "close", "propose", "file", "approve", "reject",
                 "reopen"},
    "auditor": set(),
    "admin": set(),
}
ACTIONS = sorted({a for _, a, _ in ARROWS})
T = "2026-12-01T09:00:00.000Z"
ALERT = {"alert_id": "alert-e1", "tier": "normal", "usd_cents": 120_000}
OPEN = CaseEntry("case-000000", 0, "opened", "system", "system", T,
                 {"subject": {"bank": "0001", "account": "8000A"}, "alert": ALERT, "due": "2026-12-31"})


def payload_for(action: str, actor: Actor) -> dict:
    return {
        "assign": {"assignee": actor.name, "assignee_role": actor.role},
        "note": {"text": "checked the counterparties"},
        "attach": {"name": "kyc.pdf", "sha256": "ab" * 32, "size": 10},
        "escalate": {"reason": "large"},
        "close": {"reason": "salary"},
        "reject": {"reason": "thin"},
        "reopen": {"reason": "new facts"},
        "propose": {"narrative": "Funds moved through 4 accounts.", "categories": [[8, 824]]},
        "file": {"xml_sha256": "cd" * 32},
    }.get(action, {})


def step(case, actor: Actor, action: str, payload=None):
    e = decide(case, actor, action, payload if payload is not None else payload_for(action, actor))
    return apply(case, CaseEntry(case.case_id, e.seq, e.kind, e.actor, e.role, T, e.payload))


ANA, AMY, BOB, BEA = Actor("ana", "analyst"), Actor("amy", "analyst"), Actor("bob", "approver"), Actor("bea", "approver")


def case_in(state: str):
    """A case brought to ``state`` by ana (analyst, the assignee and proposer) and bob (approver)."""
    c = fold([OPEN])
    path = {
        "new": [],
        "assigned": [(ANA, "assign")],
        "investigating": [(ANA, "assign"), (ANA, "start")],
        "escalated": [(ANA, "assign"), (ANA, "start"), (ANA, "escalate")],
        "closed_no_action": [(ANA, "assign"), (ANA, "start"), (ANA, "close")],
        "sar_proposed": [(ANA, "assign"), (ANA, "start"), (ANA, "propose")],
        "sar_approved": [(ANA, "assign"), (ANA, "start"), (ANA, "propose"), (BOB, "approve")],
        "sar_filed": [(ANA, "assign"), (ANA, "start"), (ANA, "propose"), (BOB, "approve"), (ANA, "file")],
        "reopened": [(ANA, "assign"), (ANA, "start"), (ANA, "close"), (BOB, "reopen")],
    }[state]
    for actor, action in path:
        c = step(c, actor, action)
    assert c.state == state
    return c


def test_every_action_in_every_state_for_every_role():
    arrows = {(f, a): t for f, a, t in ARROWS}
    checked = 0
    for state in STATES:
        for role in MAY:
            # the assignee (ana) in her role, or for approve/reject someone who did not propose
            actor = Actor("ana" if role == "analyst" else "bea" if role == "approver" else "zed", role)
            for action in ACTIONS:
                case = case_in(state)
                if role == "approver" and case.assignee == "ana" and action in ("start", "escalate", "close", "propose"):
                    case = step(case, BEA, "assign", {"assignee": "bea", "assignee_role": "approver"}) \
                        if state in ("assigned", "investigating", "escalated") else case
                allowed = (state, action) in arrows and action in MAY[role]
                if role == "approver" and action in ("start", "escalate", "close", "propose") and case.assignee != "bea":
                    allowed = False  # only the assignee
                try:
                    after = step(case, actor, action)
                except Forbidden:
                    assert not allowed, (state, role, action)
                    assert action not in MAY[role] or action in ("start", "escalate", "close", "propose")
                except Conflict:
                    assert not allowed and (state, action) not in arrows, (state, role, action)
                else:
                    assert allowed, (state, role, action)
                    assert after.state == arrows[(case.state, action)]
                    assert after.version == case.version + 1
                checked += 1
    assert checked == len(STATES) * len(MAY) * len(ACTIONS)


def test_four_eyes_the_proposer_never_approves_or_rejects():
    c = case_in("investigating")
    c = step(c, BOB, "assign", {"assignee": "bob", "assignee_role": "approver"})
    c = step(c, BOB, "propose")
    for action in ("approve", "reject"):
        try:
            step(c, BOB, action)
        except Forbidden as e:
            assert "four eyes" in str(e)
        else:
            raise AssertionError(f"the proposer could {action} their own proposal")
    assert step(c, BEA, "approve").approved_by == "bea"


def test_analyst_assigns_only_to_themself_and_nobody_is_assigned_without_a_working_role():
    c = case_in("new")
    try:
        step(c, ANA, "assign", {"assignee": "amy", "assignee_role": "analyst"})
        raise AssertionError("an analyst assigned a case to someone else")
    except Forbidden:
        pass
    assert step(c, BOB, "assign", {"assignee": "amy", "assignee_role": "analyst"}).assignee == "amy"
    for role in ("auditor", "admin"):
        try:
            step(c, BOB, "assign", {"assignee": "zed", "assignee_role": role})
            raise AssertionError(f"a {role} was assigned a case")
        except Invalid:
            pass


def test_a_proposal_covers_only_the_cases_alerts_and_states_its_content():
    c = case_in("investigating")
    for bad in ({"narrative": "", "categories": [[8, 824]]}, {"narrative": "x", "categories": []},
                {"narrative": "x", "categories": [[8, 824]], "alert_ids": ["alert-other"]}):
        try:
            step(c, ANA, "propose", bad)
            raise AssertionError(f"proposal accepted: {bad}")
        except Invalid:
            pass


def test_a_history_that_breaks_a_rule_does_not_fold():
    c = case_in("sar_proposed")
    forged = CaseEntry(c.case_id, c.version, "sar_approved", "ana", "approver", T, {"proposal_seq": 3})
    try:
        fold([*c.entries, forged])
        raise AssertionError("ana approved her own proposal in a folded history")
    except Forbidden:
        pass
    skipped = CaseEntry(c.case_id, c.version + 1, "noted", "ana", "analyst", T, {"text": "x"})
    try:
        fold([*c.entries, skipped])
        raise AssertionError("a gap in the sequence folded")
    except Conflict:
        pass


USERS = [ANA, AMY, BOB, BEA, Actor("aud", "auditor"), Actor("adm", "admin")]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_sequences_state_is_the_fold_and_nobody_approves_their_own(data):
    """Random actions by random users (mostly ones the state admits, so sequences get deep);
    refused ones add nothing. The state tracked here from the arrows alone equals the fold of the
    accepted entries, and no approval is by its proposer."""
    case = fold([OPEN])
    entries = [OPEN]
    state, proposer = "new", None
    arrows = {(f, a): t for f, a, t in ARROWS}
    refused = tried = 0
    for _ in range(data.draw(st.integers(0, 40))):
        fitting = [a for a in ACTIONS if (state, a) in arrows]
        action = data.draw(st.sampled_from(fitting) if data.draw(st.integers(0, 4)) else st.sampled_from(ACTIONS))
        able = [u for u in USERS if action in MAY[u.role]] or USERS
        actor = data.draw(st.sampled_from(able) if data.draw(st.integers(0, 4)) else st.sampled_from(USERS))
        other = data.draw(st.sampled_from(USERS))
        payload = payload_for(action, actor)
        if action == "assign" and actor.role == "approver":
            payload = {"assignee": other.name, "assignee_role": other.role}
        tried += 1
        try:
            e = decide(case, actor, action, payload)
        except CaseError:
            refused += 1
            continue
        entry = CaseEntry(case.case_id, e.seq, e.kind, e.actor, e.role, T, e.payload)
        case = apply(case, entry)
        entries.append(entry)
        assert (state, action) in arrows and action in MAY[actor.role]
        state = arrows[(state, action)]
        if action == "propose":
            proposer = actor.name
        if action == "approve":
            assert actor.name != proposer
        assert case.state == state
    assert fold(entries) == case
    assert len(entries) + refused == tried + 1
    approvals = [e for e in entries if e.kind == "sar_approved"]
    by_seq = {e.seq: e for e in entries}
    assert all(by_seq[a.payload["proposal_seq"]].actor != a.actor for a in approvals)
