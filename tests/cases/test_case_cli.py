"""``auditflow case`` through the real command line: the first user must be an admin and only an
admin adds users; an analyst proposes, an approver approves, export-sar writes XML FinCEN's
schema accepts and files the case; refusals are one line, exit 2, and add nothing to the log;
``case verify`` passes, and fails naming the entry after one byte of it is edited."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from lxml import etree
from typer.testing import CliRunner

from auditflow_app.cli import app
from reports.signing import generate_key_file

from .conftest import alert_row, write_rows

ROOT = Path(__file__).parents[2]
XSD = ROOT / "cases" / "schemas" / "EFL_SARXBatchSchema.xsd"


@pytest.fixture
def env(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    generate_key_file(tmp_path / "key.pem")
    write_rows(out / "alerts.jsonl", [
        alert_row("e1", "A", "B", 500_000, tier="normal"),
        alert_row("e2", "C", "D", 90_000, tier="background"),
        alert_row("e3", "A", "E", 7_500_000, minute=30, tier="critical", typologies=["fan-out"]),
    ])  # fmt: skip
    return {
        "AUDITFLOW_OUT_DIR": str(out),
        "AUDITFLOW_USERS_FILE": str(tmp_path / "users.json"),
        "AUDITFLOW_SIGNING_KEY_FILE": str(tmp_path / "key.pem"),
        "AUDITFLOW_SAR_FILER_FILE": str(ROOT / "deploy" / "filer.example.json"),
        "AUDITFLOW_CASES_URL": f"sqlite:///{tmp_path / 'cases.sqlite'}",
    }


def run(env, *args, token=None):
    e = {**env, **({"AUDITFLOW_TOKEN": token} if token else {})}
    return CliRunner().invoke(app, ["case", *args], env=e)


def one_line_error(result, *words):
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert text.startswith("error: ") and len(text.splitlines()) == 1, text
    flat = text
    assert all(w in flat for w in words), flat


def log_size(env) -> int:
    with sqlite3.connect(env["AUDITFLOW_CASES_URL"].removeprefix("sqlite:///")) as db:
        return db.execute("SELECT count(*) FROM case_log").fetchone()[0]


def add(env, name, role, admin=None) -> str:
    r = run(env, "user-add", name, "--role", role, token=admin)
    assert r.exit_code == 0, r.output
    return r.output.strip().splitlines()[-1]


def test_from_alert_to_filed_sar(env, tmp_path):
    one_line_error(run(env, "user-add", "ana", "--role", "analyst"), "first user must be an admin")
    admin = add(env, "root", "admin")
    one_line_error(run(env, "user-add", "eve", "--role", "admin"), "only an admin adds users")
    ana, amy = add(env, "ana", "analyst", admin), add(env, "amy", "analyst", admin)
    bob, aud = add(env, "bob", "approver", admin), add(env, "aud", "auditor", admin)

    r = run(env, "open")
    assert r.exit_code == 0 and "3 alerts: 2 opened a case, 1 joined" in r.output, r.output
    r = run(env, "list", "--json", token=aud)
    assert r.exit_code == 0
    assert [(line.split('"case_id": "')[1][:11]) for line in r.output.splitlines()] == ["case-000000", "case-000001"]

    case = "case-000000"
    one_line_error(run(env, "note", case, "hi", token=aud), "auditor may not note")
    one_line_error(run(env, "assign", case, "--to", "amy", token=ana), "only to themself")
    one_line_error(run(env, "start", case, token="not-a-token"), "not any user's")
    before = log_size(env)
    one_line_error(run(env, "approve", case, token=bob), "cannot be approved")
    assert log_size(env) == before  # refusals add nothing
    for args in (("assign", case), ("start", case), ("note", case, "Two wires out of A in 30 minutes")):
        r = run(env, *args, token=ana)
        assert r.exit_code == 0, r.output
    one_line_error(run(env, "propose", case, "--narrative", "x", token=amy), "only the case's assignee (ana)")
    r = run(env, "propose", case, "--narrative", "A paid B and E USD 80,000 within 30 minutes.", token=ana)
    assert r.exit_code == 0, r.output
    one_line_error(run(env, "approve", case, token=ana), "only approvers")
    r = run(env, "approve", case, "--expect-version", "3", token=bob)
    one_line_error(r, "changed since version 3", "reload")
    r = run(env, "approve", case, token=bob)
    assert r.exit_code == 0 and "now sar_approved" in r.output
    one_line_error(run(env, "export-sar", case, token=aud), "auditor may download a filed SAR, not file one")

    xml_path = tmp_path / "sar.xml"
    r = run(env, "export-sar", case, "--out", str(xml_path), token=ana)
    assert r.exit_code == 0 and "SAR filed" in r.output, r.output
    doc = etree.parse(str(xml_path))
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    assert schema.validate(doc), schema.error_log.last_error
    ns = {"fc2": "www.fincen.gov/base"}
    # the two alerts of subject A: 5,000.00 + 75,000.00 USD
    assert doc.xpath("string(/fc2:EFilingBatchXML/@TotalAmount)", namespaces=ns) == "80000"
    narrative = "".join(doc.xpath("//fc2:ActivityNarrativeText/text()", namespaces=ns))
    assert narrative == "A paid B and E USD 80,000 within 30 minutes."
    r = run(env, "show", case, "--json", token=aud)
    assert '"state": "sar_filed"' in r.output and '"approved_by": "bob"' in r.output
    again = tmp_path / "again.xml"
    assert run(env, "export-sar", case, "--out", str(again), token=aud).exit_code == 0
    assert again.read_bytes() == xml_path.read_bytes()  # a filed SAR exports to the same bytes

    r = run(env, "verify")
    assert r.exit_code == 0 and "verified: cases log of 9 entries, 2 cases" in r.output, r.output
    db = env["AUDITFLOW_CASES_URL"].removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:
        line = conn.execute("SELECT line FROM case_log WHERE idx = 5").fetchone()[0]
        conn.execute("UPDATE case_log SET line = ? WHERE idx = 5", (line.replace(b"30 minutes", b"40 minutes"),))
    r = run(env, "verify")
    assert r.exit_code == 1
    assert " ".join(r.output.split()).startswith("FAILED cases log entry 5 was changed after it was signed"), r.output


def test_settings_and_input_errors_are_one_line(env):
    no_users = {k: v for k, v in env.items() if k != "AUDITFLOW_USERS_FILE"}
    one_line_error(run(no_users, "list", token="x"), "AUDITFLOW_USERS_FILE")
    admin = add(env, "root", "admin")
    one_line_error(run(env, "user-add", "x", "--role", "boss", token=admin), "--role 'boss'")
    one_line_error(run(env, "list", "--state", "done", token=admin), "--state 'done'")
    one_line_error(run(env, "show", "case-999999", token=admin), "admins manage users")
    ana = add(env, "ana", "analyst", admin)
    one_line_error(run(env, "show", "case-999999", token=ana), "no such case: case-999999")
    assert run(env, "open").exit_code == 0
    run(env, "assign", "case-000000", token=ana)
    run(env, "start", "case-000000", token=ana)
    one_line_error(run(env, "propose", "case-000000", "--narrative", "x", "--category", "8/999", token=ana),
                   "activity category 8/999")
    one_line_error(run(env, "propose", "case-000000", "--narrative", "x", "--category", "funnel", token=ana),
                   "--category 'funnel'")
