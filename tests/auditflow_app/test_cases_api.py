"""The cases API (``auditflow_app.cases_api``, mounted by ``create_app`` with a users file): every
route called by every role and without a valid token, against a table written from the rules;
an alert's way to a filed SAR through the API, its XML checked against FinCEN's schema loaded
here; two users acting on the same version at once (one wins, one gets 409, the log holds one
entry); the shapes of 401/403/404/409/413/422; the analyst routes taking users-file tokens."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from lxml import etree

from auditflow_app import case_flow
from auditflow_app.analyst_api import create_app
from auditflow_app.settings import Settings
from cases.users import add_user
from evidence_graph import NetworkxGraphStore
from reports.signing import generate_key_file

from ..cases.conftest import alert_row, write_rows

ROOT = Path(__file__).resolve().parents[2]
XSD = ROOT / "cases" / "schemas" / "EFL_SARXBatchSchema.xsd"
FILER = ROOT / "deploy" / "filer.example.json"
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
#: the users of the users file: name -> role (two of the working roles: four eyes, other assignees)
USERS = {"ada": "admin", "ana": "analyst", "amy": "analyst", "april": "approver", "abe": "approver", "aud": "auditor"}
#: who calls a route for each role in the table
CALLER = {"analyst": "ana", "approver": "april", "auditor": "aud", "admin": "ada"}
OLD_TOKEN = "tok-analyst-file-5a1e"


def fincen_schema() -> etree.XMLSchema:
    """FinCEN's schema straight from the xsd file (not the product's validator)."""
    return etree.XMLSchema(etree.parse(str(XSD)))


@dataclass
class World:
    client: TestClient
    settings: Settings
    tokens: dict[str, str]
    tmp: Path
    subjects: int = 0

    def auth(self, name: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"} if name else {}

    def new_case(self, *, tier: str = "normal", typologies=("fan-in",)) -> str:
        """A case of its own: one alert on a subject no other case has."""
        self.subjects += 1
        row = alert_row(f"w{self.subjects}", f"SUBJ{self.subjects:03d}", "CP1", 250_000 + self.subjects,
                        minute=self.subjects, tier=tier, typologies=typologies)  # fmt: skip
        path = write_rows(self.tmp / f"alerts-{self.subjects}.jsonl", [row])
        got = case_flow.open_cases(self.settings, path, now=NOW)
        assert got.opened == 1
        return got.receipts[0].entry.case_id

    def act(self, name: str, case_id: str, action: str, **payload: Any) -> None:
        """``name`` acts directly on the store (to set a case up), as the CLI would."""
        user = case_flow.users(self.settings).get(name)
        assert user is not None
        with case_flow.open_case_store(self.settings) as store:
            case_flow.act(store, user, case_id, action, payload, settings=self.settings, now=NOW)

    def case_in(self, state: str, worker: str = "ana") -> str:
        """A new case brought to ``state``, ``worker`` its assignee (and proposer)."""
        cid = self.new_case()
        if state == "new":
            return cid
        assign = {"assignee": worker} if worker != "ana" else {}
        self.act("april" if assign else "ana", cid, "assign", **assign)
        if state == "assigned":
            return cid
        self.act(worker, cid, "start")
        if state == "investigating":
            return cid
        if state == "closed_no_action":
            self.act(worker, cid, "close", reason="the customer's payroll, as documented")
            return cid
        self.act(worker, cid, "propose", narrative="Funds gathered from many payers and sent on at once.",
                 categories=[[8, 824]])  # fmt: skip
        if state == "sar_proposed":
            return cid
        self.act("abe" if worker == "april" else "april", cid, "approve")
        if state == "sar_approved":
            return cid
        assert state == "sar_filed"
        with case_flow.open_case_store(self.settings) as store:
            case_flow.export_sar(store, case_flow.users(self.settings).get(worker), cid, settings=self.settings)
        return cid

    def log_size(self) -> int:
        with sqlite3.connect(self.settings.effective_cases_url.removeprefix("sqlite:///")) as db:
            return db.execute("SELECT count(*) FROM case_log").fetchone()[0]


def make_settings(tmp: Path, **kw) -> Settings:
    if not (tmp / "key.pem").exists():
        generate_key_file(tmp / "key.pem")
    return Settings(
        out_dir=tmp / "out", users_file=tmp / "users.json", signing_key_file=tmp / "key.pem",
        sar_filer_file=FILER, cases_url=f"sqlite:///{tmp / 'cases.sqlite'}", **kw,
    )  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    tmp = tmp_path_factory.mktemp("cases-api")
    (tmp / "tokens").write_text(OLD_TOKEN + "\n")
    settings = make_settings(tmp, analyst_tokens_file=tmp / "tokens", analyst_max_results=50)
    tokens = {name: add_user(settings.users_file, name, role) for name, role in USERS.items()}
    tokens["wrong"] = tokens["ana"][:-2] + ("AA" if not tokens["ana"].endswith("AA") else "BB")
    settings.out_dir.mkdir()
    write_rows(settings.out_dir / "alerts.jsonl", [alert_row("run1", "RUNS", "CP9", 120_000)])
    return World(TestClient(create_app(settings, NetworkxGraphStore())), settings, tokens, tmp)


# ---------------------------------------------------------------------------- every route, every role


@dataclass(frozen=True)
class Route:
    """One route of the table: how to call it as ``caller`` on a case made for the call."""

    name: str
    method: str
    path: str  # {case} and {sha} filled per call
    expect: tuple[int, int, int, int]  # analyst, approver, auditor, admin
    state: str | None = None  # the case's state before the call (None: no case needed)
    body: dict[str, Any] | None = None
    assignee_is_caller: bool = False  # the caller (when they work cases) is the case's assignee


ROLES = ("analyst", "approver", "auditor", "admin")
CONTENT = b"bank statement, page 1\n"
SHA = hashlib.sha256(CONTENT).hexdigest()
ROUTES = [
    # who may: analysts and approvers work cases, auditors read them, admins manage users only
    Route("me", "GET", "/me", (200, 200, 200, 200)),
    Route("queue", "GET", "/cases", (200, 200, 200, 403)),
    Route("case", "GET", "/cases/{case}", (200, 200, 200, 403), state="new"),
    Route("assign", "POST", "/cases/{case}/assign", (200, 200, 403, 403), state="new", body={}),
    Route("start", "POST", "/cases/{case}/start", (200, 200, 403, 403), state="assigned", assignee_is_caller=True),
    Route("note", "POST", "/cases/{case}/note", (200, 200, 403, 403), state="new", body={"text": "called the bank"}),
    Route("escalate", "POST", "/cases/{case}/escalate", (200, 200, 403, 403), state="investigating",
          body={"reason": "a second bank is involved"}, assignee_is_caller=True),
    Route("close", "POST", "/cases/{case}/close", (200, 200, 403, 403), state="investigating",
          body={"reason": "payroll"}, assignee_is_caller=True),
    Route("propose", "POST", "/cases/{case}/propose", (200, 200, 403, 403), state="investigating",
          body={"narrative": "Funds passed through at once."}, assignee_is_caller=True),
    # only an approver approves, rejects or reopens (the proposal here is another user's)
    Route("approve", "POST", "/cases/{case}/approve", (403, 200, 403, 403), state="sar_proposed"),
    Route("reject", "POST", "/cases/{case}/reject", (403, 200, 403, 403), state="sar_proposed",
          body={"reason": "name the counterparties"}),
    Route("reopen", "POST", "/cases/{case}/reopen", (403, 200, 403, 403), state="closed_no_action",
          body={"reason": "a new alert on the payer"}),
    Route("attach", "POST", "/cases/{case}/attachments", (200, 200, 403, 403), state="new",
          body={"name": "statement.txt", "content_base64": base64.b64encode(CONTENT).decode(),
                "media_type": "text/plain"}),
    Route("attachment", "GET", "/cases/{case}/attachments/{sha}", (200, 200, 200, 403), state="attached"),
    Route("export-sar", "POST", "/cases/{case}/export-sar", (200, 200, 403, 403), state="sar_approved"),
    Route("sar.xml", "GET", "/cases/{case}/sar.xml", (200, 200, 200, 403), state="sar_filed"),
    Route("users", "GET", "/users", (403, 403, 403, 200)),
    Route("add user", "POST", "/users", (403, 403, 403, 200), body={"name": "newbie", "role": "auditor"}),
]


def prepare(world: World, route: Route, caller: str | None) -> str:
    """The route's path for one call, on a case made for it."""
    if route.state is None:
        return route.path
    works = caller is not None and USERS[caller] in ("analyst", "approver")
    worker = caller if route.assignee_is_caller and works else "ana"
    if route.state == "attached":
        cid = world.new_case()
        user = case_flow.users(world.settings).get("amy")
        with case_flow.open_case_store(world.settings) as store:
            case_flow.attach(store, user, cid, "statement.txt", CONTENT, settings=world.settings)
    else:
        cid = world.case_in(route.state, worker=worker)
    return route.path.format(case=cid, sha=SHA)


@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_every_route_answers_every_role_as_the_rules_say(world, route) -> None:
    got, want = {}, {}
    for role, expected in zip(ROLES, route.expect, strict=True):
        path = prepare(world, route, CALLER[role])
        r = world.client.request(route.method, path, json=route.body, headers=world.auth(CALLER[role]))
        got[role], want[role] = r.status_code, expected
        if r.status_code >= 400:
            detail = r.json()["detail"]
            assert isinstance(detail, str) and "\n" not in detail and detail, r.text
    for who in (None, "wrong"):  # no token, a token nobody has
        path = prepare(world, route, None)
        r = world.client.request(route.method, path, json=route.body, headers=world.auth(who))
        got[who or "none"], want[who or "none"] = r.status_code, 401
        assert r.json() == {"detail": "missing or wrong token"} and r.headers["www-authenticate"] == "Bearer"
    r = world.client.request(route.method, prepare(world, route, None), json=route.body,
                             headers={"Authorization": f"Basic {world.tokens['ana']}"})  # fmt: skip
    got["basic"], want["basic"] = r.status_code, 401
    assert got == want


def test_role_refusals_say_why(world) -> None:
    cid = world.case_in("investigating")
    r = world.client.post(f"/cases/{cid}/note", json={"text": "x"}, headers=world.auth("aud"))
    assert r.status_code == 403
    assert r.json()["detail"] == "an auditor may not change a case (auditors read, they change nothing)"
    r = world.client.get(f"/cases/{cid}", headers=world.auth("ada"))
    assert r.status_code == 403 and "admins manage users, they work no case" in r.json()["detail"]
    # the workflow's own: only the assignee starts, escalates, closes, proposes
    r = world.client.post(f"/cases/{cid}/close", json={"reason": "x"}, headers=world.auth("amy"))
    assert r.status_code == 403 and r.json()["detail"] == "only the case's assignee (ana) may close it"
    r = world.client.post(f"/cases/{cid}/assign", json={"assignee": "amy"}, headers=world.auth("ana"))
    assert r.status_code == 403 and "an analyst may assign a case only to themself" in r.json()["detail"]
    r = world.client.get("/users", headers=world.auth("april"))
    assert r.status_code == 403 and r.json()["detail"] == "only an admin manages users (april is an approver)"


# ---------------------------------------------------------------------------- the way to a filed SAR


def test_from_alert_to_filed_sar(world) -> None:
    c, auth = world.client, world.auth
    cid = world.new_case(typologies=("fan-in",))
    assert c.get("/me", headers=auth("ana")).json() == {"name": "ana", "role": "analyst"}
    queue = c.get("/cases", params={"state": "new"}, headers=auth("ana")).json()
    (row,) = [i for i in queue["items"] if i["case_id"] == cid]
    assert row["state"] == "new" and row["version"] == 1 and row["assignee"] is None and row["priority"] == "normal"

    doc = c.get(f"/cases/{cid}", headers=auth("ana"))
    assert doc.headers["etag"] == '"1"' and doc.json()["allowed"] == ["assign", "attach", "note"]
    # the alerts suggest their categories: a fan-in's funnel account, and a wire
    assert [x["code"] for x in doc.json()["sar_categories"] if x["suggested"]] == ["8/824", "8/805"]

    receipts = []
    for action, body in (("assign", {}), ("start", {}), ("note", {"text": "called the payer's bank"}),
                         ("propose", {"narrative": "Funds gathered from many payers, sent on within the hour."})):
        version = doc.json()["version"] if not receipts else receipts[-1]["case"]["version"]
        r = c.post(f"/cases/{cid}/{action}", json={**body, "expected_version": version}, headers=auth("ana"))
        assert r.status_code == 200, r.text
        assert r.headers["etag"] == f'"{version + 1}"'
        receipts.append(r.json())
    after = receipts[-1]
    assert after["case"]["state"] == "sar_proposed" and after["case"]["version"] == 5
    assert after["entry"]["kind"] == "sar_proposed" and after["entry"]["actor"] == "ana"
    assert after["case"]["proposal"]["categories"] == [[8, 805], [8, 824]]  # the suggestion, none given
    # each receipt: its log index and the signed tree head of the log with it
    indexes = [r["log_index"] for r in receipts]
    assert indexes == sorted(indexes) and all(r["tree_head"]["tree_size"] == r["log_index"] + 1 for r in receipts)
    assert set(after["tree_head"]) == {"tree_size", "root_hash", "key_id", "signature"}
    assert "approve" not in after["case"]["allowed"]  # an analyst never approves

    # four eyes: an approver who proposed does not approve their own proposal
    own = world.case_in("investigating", worker="april")
    r = c.post(f"/cases/{own}/propose", json={"narrative": "Layered through new accounts."}, headers=auth("april"))
    assert r.status_code == 200 and "approve" not in r.json()["case"]["allowed"]
    r = c.post(f"/cases/{own}/approve", json={}, headers=auth("april"))
    assert r.status_code == 403 and "april proposed this SAR: another approver must approve it" in r.json()["detail"]
    assert c.post(f"/cases/{own}/approve", json={}, headers=auth("abe")).status_code == 200

    doc = c.get(f"/cases/{cid}", headers=auth("april")).json()
    assert "approve" in doc["allowed"] and "reject" in doc["allowed"]
    r = c.post(f"/cases/{cid}/approve", headers={**auth("april"), "If-Match": f'"{doc["version"]}"'})
    assert r.status_code == 200 and r.json()["case"]["state"] == "sar_approved"
    assert c.get(f"/cases/{cid}/sar.xml", headers=auth("aud")).status_code == 404  # approved, not filed yet

    size = world.log_size()
    r = c.post(f"/cases/{cid}/export-sar", json={"expected_version": 6}, headers=auth("ana"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/xml"
    assert r.headers["content-disposition"].startswith(f'attachment; filename="{cid}.sar.xml"')
    xml = r.content
    assert r.headers["x-sar-sha256"] == hashlib.sha256(xml).hexdigest()
    schema = fincen_schema()
    assert schema.validate(etree.fromstring(xml)), schema.error_log
    assert world.log_size() == size + 1  # exporting the approved SAR filed it
    doc = c.get(f"/cases/{cid}", headers=auth("aud")).json()
    assert doc["state"] == "sar_filed" and doc["filed"]["xml_sha256"] == hashlib.sha256(xml).hexdigest()
    assert doc["timeline"][-1]["kind"] == "sar_filed" and doc["timeline"][-1]["actor"] == "ana"
    assert doc["allowed"] == []  # an auditor reads
    # a filed SAR downloads again, the same bytes, by anyone who reads cases; nothing is written
    for who in ("aud", "april", "ana"):
        again = c.get(f"/cases/{cid}/sar.xml", headers=auth(who))
        assert again.status_code == 200 and again.content == xml
    assert c.post(f"/cases/{cid}/export-sar", headers=auth("april")).content == xml
    assert world.log_size() == size + 1
    assert case_flow.verify_cases(world.settings).problems == []


def test_attachments_round_trip_and_stay_downloads(world) -> None:
    c, auth = world.client, world.auth
    cid = world.new_case()
    page = b"<html><script>alert(1)</script></html>"
    body = {"name": "page.html", "content_base64": base64.b64encode(page).decode(), "media_type": "text/html"}
    r = c.post(f"/cases/{cid}/attachments", json=body, headers=auth("amy"))
    assert r.status_code == 200, r.text
    sha = hashlib.sha256(page).hexdigest()
    assert r.json()["case"]["attachments"][0]["sha256"] == sha and r.json()["entry"]["size"] == len(page)
    got = c.get(f"/cases/{cid}/attachments/{sha}", headers=auth("aud"))
    assert got.status_code == 200 and got.content == page
    assert got.headers["content-disposition"].startswith('attachment; filename="page.html"')
    assert got.headers["x-content-type-options"] == "nosniff" and "sandbox" in got.headers["content-security-policy"]
    # a file another case lists is not this case's
    other = world.new_case()
    r = c.get(f"/cases/{other}/attachments/{sha}", headers=auth("ana"))
    assert r.status_code == 404 and r.json() == {"detail": f"case {other} has no attachment {sha}"}
    big = base64.b64encode(b"\0" * (10 * 1024 * 1024 + 1)).decode()
    r = c.post(f"/cases/{cid}/attachments", json={"name": "big.bin", "content_base64": big}, headers=auth("ana"))
    assert r.status_code == 413 and "10,485,760" in r.json()["detail"]
    r = c.post(f"/cases/{cid}/attachments", json={"name": "x", "content_base64": "not base64!"}, headers=auth("ana"))
    assert r.status_code == 422 and r.json()["detail"].startswith("content_base64: not base64")
    r = c.post(f"/cases/{cid}/attachments", json={"name": "a/b", "content_base64": ""}, headers=auth("ana"))
    assert r.status_code == 422 and "no '/'" in r.json()["detail"]
    r = c.post(f"/cases/{cid}/attachments", json={"name": "x", "content_base64": "", "nmae": "y"}, headers=auth("ana"))
    assert r.status_code == 422 and r.json()["detail"] == "body.nmae='y': Extra inputs are not permitted"
    r = c.post(f"/cases/{cid}/attachments", content=b"[", headers=auth("ana"))
    assert r.status_code == 422 and r.json()["detail"].startswith("body: Invalid JSON")
    # a version, when given, is the case's as the request comes in
    stale = {"name": "late.txt", "content_base64": "", "expected_version": 1}
    r = c.post(f"/cases/{cid}/attachments", json=stale, headers=auth("ana"))
    assert r.status_code == 409
    assert r.json()["detail"].startswith(f"case {cid} changed since version 1: it is at version 2")
    r = c.post(f"/cases/{cid}/attachments", json={**stale, "expected_version": 2}, headers=auth("ana"))
    assert r.status_code == 200 and r.json()["case"]["version"] == 3


# ---------------------------------------------------------------------------- two users, one version


@pytest.mark.parametrize("actions", [("note", "note"), ("assign", "assign"), ("start", "note")])
def test_two_users_on_one_version_one_wins_one_gets_409(world, actions) -> None:
    c, auth = world.client, world.auth
    cid = world.case_in("assigned") if actions[0] == "start" else world.new_case()
    version = c.get(f"/cases/{cid}", headers=auth("ana")).json()["version"]
    size = world.log_size()
    users = ["ana", "amy"] if actions[0] != "start" else ["ana", "april"]
    bodies = [{"text": f"note by {u}"} if a == "note" else {} for u, a in zip(users, actions, strict=True)]
    barrier, answers = threading.Barrier(2), [None, None]

    def call(i: int) -> None:
        barrier.wait()
        answers[i] = c.post(f"/cases/{cid}/{actions[i]}", json={**bodies[i], "expected_version": version},
                            headers=auth(users[i]))  # fmt: skip

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200, 409], [a.text for a in answers]
    won = next(i for i, a in enumerate(answers) if a.status_code == 200)
    lost = answers[1 - won].json()["detail"]
    assert lost.startswith(f"case {cid} changed since version {version}: it is at version {version + 1}")
    assert lost.endswith("reload it and try again") and f"by {users[won]}" in lost
    # nothing lost, nothing doubled: the log holds the winner's entry, once
    assert world.log_size() == size + 1
    timeline = c.get(f"/cases/{cid}", headers=auth("aud")).json()["timeline"]
    assert len(timeline) == version + 1 and timeline[-1]["actor"] == users[won]
    assert case_flow.verify_cases(world.settings).problems == []


def test_a_stale_if_match_is_409_and_writes_nothing(world) -> None:
    c, auth = world.client, world.auth
    cid = world.new_case()
    c.post(f"/cases/{cid}/note", json={"text": "first"}, headers=auth("ana"))
    size = world.log_size()
    r = c.post(f"/cases/{cid}/note", json={"text": "second"}, headers={**auth("amy"), "If-Match": '"1"'})
    assert r.status_code == 409 and "changed since version 1: it is at version 2 (noted by ana" in r.json()["detail"]
    r = c.post(f"/cases/{cid}/export-sar", json={"expected_version": 1}, headers=auth("amy"))
    assert r.status_code == 409 and "changed since version 1" in r.json()["detail"]
    assert world.log_size() == size
    r = c.post(f"/cases/{cid}/note", json={"text": "second"}, headers={**auth("amy"), "If-Match": '"2"'})
    assert r.status_code == 200 and r.json()["case"]["version"] == 3


# ---------------------------------------------------------------------------- 404 and 422


def test_not_found_and_invalid_shapes(world) -> None:
    c, auth = world.client, world.auth
    cid = world.new_case()

    def detail(r, status: int) -> str:
        assert r.status_code == status, r.text
        body = r.json()
        assert set(body) == {"detail"} and isinstance(body["detail"], str) and "\n" not in body["detail"]
        return body["detail"]

    assert detail(c.get("/cases/case-999999", headers=auth("ana")), 404) == "no such case: case-999999"
    assert detail(c.post("/cases/case-999999/note", json={"text": "x"}, headers=auth("ana")), 404) == (
        "no such case: case-999999")
    assert detail(c.get("/cases/case-999999/sar.xml", headers=auth("aud")), 404) == "no such case: case-999999"
    assert detail(c.get(f"/cases/{cid}/sar.xml", headers=auth("aud")), 404).startswith(
        f"case {cid} has no filed SAR (it is new)")
    assert detail(c.get("/cases", params={"state": "lost"}, headers=auth("ana")), 422).startswith(
        "state='lost': expected one of new, assigned")
    assert detail(c.get("/cases", params={"priority": "urgent"}, headers=auth("ana")), 422) == (
        "priority='urgent': expected one of critical, normal, background")
    assert detail(c.get("/cases", params={"min_age_days": "old"}, headers=auth("ana")), 422).startswith(
        "min_age_days='old': ")
    assert detail(c.get("/cases", params={"limit": 51}, headers=auth("ana")), 422) == (
        "limit=51: at most 50 (AUDITFLOW_ANALYST_MAX_RESULTS)")
    # an action's body: unknown fields, wrong types, missing or empty content
    assert detail(c.post(f"/cases/{cid}/note", json={"text": "x", "txet": 1}, headers=auth("ana")), 422).startswith(
        "body.txet=1: Extra inputs are not permitted")
    assert detail(c.post(f"/cases/{cid}/note", json={}, headers=auth("ana")), 422) == "body.text: Field required"
    assert "a non-empty text" in detail(c.post(f"/cases/{cid}/note", json={"text": " "}, headers=auth("ana")), 422)
    assert detail(c.post(f"/cases/{cid}/note", json={"text": "x", "expected_version": "1"}, headers=auth("ana")),
                  422).startswith("body.expected_version='1': ")
    assert detail(c.post(f"/cases/{cid}/note", json={"text": "x", "expected_version": 1},
                         headers={**auth("ana"), "If-Match": '"2"'}), 422) == (
        "expected_version=1 but If-Match names version 2: give one, or the same")
    assert detail(c.post(f"/cases/{cid}/note", json={"text": "x"}, headers={**auth("ana"), "If-Match": "v1"}),
                  422).startswith("If-Match='v1': expected the case's ETag")
    assert detail(c.post(f"/cases/{cid}/nudge", json={}, headers=auth("ana")), 404) == "Not Found"
    assert detail(c.post(f"/cases/{cid}/start", json={}, headers=auth("ana")), 409) == (
        f"case {cid} is new: it cannot be started")
    inv = world.case_in("investigating")
    r = c.post(f"/cases/{inv}/propose", json={"narrative": "x", "categories": [[1, 2]]}, headers=auth("ana"))
    assert detail(r, 422).startswith("activity category 1/2 is not one this product files")
    body = {"narrative": "x", "alert_ids": ["alert-nope"], "categories": [[8, 824]]}
    r = c.post(f"/cases/{inv}/propose", json=body, headers=auth("ana"))
    assert detail(r, 422) == f"alert 'alert-nope' is not in case {inv}"
    # a body the app cannot read, without a valid token: the token is checked first
    r = c.post(f"/cases/{cid}/note", content=b"{not json", headers={"Content-Type": "application/json"})
    assert detail(r, 401) == "missing or wrong token"
    r = c.post(f"/cases/{cid}/note", content=b"{not json", headers={**auth("ana"), "Content-Type": "application/json"})
    assert detail(r, 422).startswith("body")
    r = c.post("/users", json={"name": "Bad Name", "role": "analyst"}, headers=auth("ada"))
    assert "expected lower-case letters" in detail(r, 422)
    r = c.post("/users", json={"name": "ok", "role": "root"}, headers=auth("ada"))
    assert detail(r, 422).startswith("body.role='root': ")


def test_the_queue_filters_and_pages(world) -> None:
    c, auth = world.client, world.auth
    crit = world.new_case(tier="critical")
    world.act("amy", crit, "assign")
    with case_flow.open_case_store(world.settings) as store:
        opened = [x.case_id for x in store.cases()]
    mine = c.get("/cases", params={"assignee": "amy", "priority": "critical"}, headers=auth("aud")).json()
    assert [i["case_id"] for i in mine["items"]] == [crit]
    both = c.get("/cases", params=[("state", "new"), ("state", "assigned")], headers=auth("aud")).json()
    assert {i["state"] for i in both["items"]} == {"new", "assigned"} and crit in {i["case_id"] for i in both["items"]}
    # no case is that old
    assert c.get("/cases", params={"min_age_days": 100_000}, headers=auth("aud")).json()["total"] == 0
    for limit in (50, 7):  # the cap, and pages that do not divide the queue
        seen, offset = [], 0
        while offset is not None:
            page = c.get("/cases", params={"limit": limit, "offset": offset}, headers=auth("ana")).json()
            assert page["total"] == len(opened) and page["offset"] == offset and len(page["items"]) <= limit
            seen += [i["case_id"] for i in page["items"]]
            offset = page["next_offset"]
        assert seen == opened  # every case once, in the order they were opened


# ---------------------------------------------------------------------------- users


def test_an_admin_adds_a_user_whose_token_works_at_once(world) -> None:
    c, auth = world.client, world.auth
    r = c.post("/users", json={"name": "zoe", "role": "analyst"}, headers=auth("ada"))
    assert r.status_code == 200 and set(r.json()) == {"name", "role", "token"}
    token = r.json()["token"]
    assert c.get("/me", headers={"Authorization": f"Bearer {token}"}).json() == {"name": "zoe", "role": "analyst"}
    names = {u["name"]: u["role"] for u in c.get("/users", headers=auth("ada")).json()["items"]}
    assert names["zoe"] == "analyst" and "token_sha256" not in json.dumps(c.get("/users", headers=auth("ada")).json())
    # a new token replaces the old one at once
    r = c.post("/users", json={"name": "zoe", "role": "auditor"}, headers=auth("ada"))
    assert c.get("/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert c.get("/me", headers={"Authorization": f"Bearer {r.json()['token']}"}).json()["role"] == "auditor"


# ---------------------------------------------------------------------------- the analyst routes


def test_the_analyst_routes_take_users_file_tokens(world) -> None:
    c = world.client
    for who, status in (("ana", 200), ("april", 200), ("aud", 200), ("ada", 403), ("wrong", 401), (None, 401)):
        r = c.get("/alerts", headers=world.auth(who))
        assert r.status_code == status, (who, r.text)
    assert c.get("/alerts", headers={"Authorization": f"Bearer {OLD_TOKEN}"}).status_code == 200
    assert c.get("/alerts", headers=world.auth("ada")).json()["detail"].startswith("an admin reads no evidence")
    # the old tokens file's token is no user: it reads no case
    assert c.get("/cases", headers={"Authorization": f"Bearer {OLD_TOKEN}"}).status_code == 401


def test_the_app_starts_with_only_a_users_file(tmp_path) -> None:
    settings = make_settings(tmp_path)
    tokens = {"ana": add_user(settings.users_file, "ana", "analyst")}
    client = TestClient(create_app(settings, NetworkxGraphStore()))
    assert client.get("/alerts", headers={"Authorization": f"Bearer {tokens['ana']}"}).json()["total"] == 0
    assert client.get("/cases", headers={"Authorization": f"Bearer {tokens['ana']}"}).json()["total"] == 0
    assert client.get("/view/cases.html").status_code == 200
    # a users file that does not exist: the app does not start
    with pytest.raises(ValueError, match="does not exist"):
        create_app(settings.model_copy(update={"users_file": tmp_path / "nobody.json"}), NetworkxGraphStore())
    # no signing key: the cases are read, every action is refused, saying why, and nothing is written
    settings.out_dir.mkdir()
    write_rows(settings.out_dir / "alerts.jsonl", [alert_row("k1", "KS", "KD", 50_000)])
    cid = case_flow.open_cases(settings, settings.out_dir / "alerts.jsonl", now=NOW).receipts[0].entry.case_id
    unsigned = TestClient(create_app(settings.model_copy(update={"signing_key_file": None}), NetworkxGraphStore()))
    ana = {"Authorization": f"Bearer {tokens['ana']}"}
    assert unsigned.get(f"/cases/{cid}", headers=ana).json()["version"] == 1
    r = unsigned.post(f"/cases/{cid}/assign", json={}, headers=ana)
    assert r.status_code == 503 and r.json()["detail"] == (
        "the cases store is open read only: every action is signed, set AUDITFLOW_SIGNING_KEY_FILE")
    assert client.get(f"/cases/{cid}", headers=ana).json()["version"] == 1
