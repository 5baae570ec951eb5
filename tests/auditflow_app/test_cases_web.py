"""The cases pages (``/view/cases.html``, ``/view/case.html``) in headless Chromium: an analyst
logs in, finds a case in the queue, takes it, starts and proposes a SAR; an approver, in a browser
session of their own, finds it proposed, approves it and exports the SAR, whose XML lands in the
browser's download folder and passes FinCEN's schema (loaded here with lxml). The analyst's page
never offers to approve, and an action sent on a version someone else moved on from shows the
server's 409 and the case as it now is.

The app runs under uvicorn on a loopback port with a users file, a signing key, a SQLite cases
store and a small graph holding the alerts' transfers (the case page draws the first alert's
evidence with the evidence view's script). Chromium and chromedriver come from Debian (``make
browser``); without them these tests are skipped on a developer machine but **fail** when ``CI``
is set, as tests/auditflow_app/test_web_view.py's do.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from lxml import etree
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from auditflow.money import Money
from auditflow_app import case_flow
from auditflow_app.analyst_api import create_app
from auditflow_app.settings import Settings
from cases.users import add_user
from evidence_graph import NetworkxGraphStore
from evidence_graph.testing import tx
from reports.signing import generate_key_file

from ..cases.conftest import alert_row, write_rows
from .browser import chromium, need_front_end, served

ROOT = Path(__file__).resolve().parents[2]
XSD = ROOT / "cases" / "schemas" / "EFL_SARXBatchSchema.xsd"
FILER = ROOT / "deploy" / "filer.example.json"
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
NARRATIVE = "The subject gathered funds from three payers and wired them on within the hour."
#: the alerted transfers (S pays M, X pays Y) and what the money did next (the evidence graph)
ALERTS = [("a1", "S", "M", 4_250_000, 0, ["fan-out"]), ("a2", "X", "Y", 90_000, 5, [])]
ONWARD = [("o1", "M", "K1", 2_000_000, 20), ("o2", "M", "K2", 2_100_000, 25), ("o3", "K1", "Z", 1_990_000, 40)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_front_end()
    tmp = tmp_path_factory.mktemp("cases-web")
    generate_key_file(tmp / "key.pem")
    settings = Settings(out_dir=tmp / "out", users_file=tmp / "users.json", signing_key_file=tmp / "key.pem",
                        sar_filer_file=FILER, cases_url=f"sqlite:///{tmp / 'cases.sqlite'}")  # fmt: skip
    tokens = {name: add_user(settings.users_file, name, role)
              for name, role in (("root", "admin"), ("ana", "analyst"), ("april", "approver"))}  # fmt: skip
    settings.out_dir.mkdir()
    rows = [alert_row(e, s, d, c, minute=m, typologies=t, tier="critical" if t else "normal")
            for e, s, d, c, m, t in ALERTS]  # fmt: skip
    write_rows(settings.out_dir / "alerts.jsonl", rows)
    opened = case_flow.open_cases(settings, settings.out_dir / "alerts.jsonl", now=NOW)
    assert opened.opened == 2
    graph = NetworkxGraphStore()
    graph.add_transactions([tx(e, s, d, m, amount=Money("US Dollar", c)) for e, s, d, c, m, _ in ALERTS]
                           + [tx(e, s, d, m, amount=Money("US Dollar", c)) for e, s, d, c, m in ONWARD])  # fmt: skip
    with served(create_app(settings, graph)) as (base, log):
        yield {"base": base, "settings": settings, "tokens": tokens, "log": log,
               "case": opened.receipts[0].entry.case_id, "alert": rows[0]["alert_id"]}  # fmt: skip


@pytest.fixture
def browsers(tmp_path):
    made = []

    def make(name: str):
        folder = tmp_path / f"downloads-{name}"
        folder.mkdir()
        driver = chromium("1500,1100", folder)
        made.append(driver)
        return driver, folder

    try:
        yield make
    finally:
        for d in made:
            d.quit()


def _wait(browser, check, what: str, timeout: float = 20):
    try:
        return WebDriverWait(browser, timeout, poll_frequency=0.1).until(lambda d: check(d))
    except TimeoutException:
        pytest.fail(f"the page never showed {what}; error {_text(browser, 'case-error')!r}, "
                    f"status {_text(browser, 'case-status')!r}, console {browser.get_log('browser')}")


def _text(browser, element_id: str) -> str:
    js = "const e = document.getElementById(arguments[0]); return e ? e.innerText.trim() : ''"
    return browser.execute_script(js, element_id)  # one script: the page may re-render between two calls


def _has(browser, element_id: str) -> bool:
    return bool(browser.find_elements(By.ID, element_id))


def _state(browser, state: str) -> bool:
    shown = browser.execute_script("const e = document.getElementById('case-state'); return e && e.dataset.state")
    return shown == state


def _row_ids(browser) -> list[str]:
    """The queue's rows, read in one script (the page may replace them between two driver calls)."""
    return browser.execute_script("return Array.from(document.querySelectorAll('#queue-rows tr')).map(r => r.id)")


def _login(browser, base: str, token: str) -> None:
    browser.get("about:blank")
    browser.get(f"{base}/view/cases.html")
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "login-button").click()


def test_an_analyst_proposes_and_an_approver_approves_and_exports(server, browsers, tmp_path_factory) -> None:
    base, case, tokens = server["base"], server["case"], server["tokens"]
    ana, _ = browsers("ana")
    approve_buttons_seen = []

    def no_approve_button() -> None:
        approve_buttons_seen.append(_has(ana, "action-approve"))

    # the analyst logs in on the queue and sees both cases, in the order they were opened
    _login(ana, base, tokens["ana"])
    _wait(ana, lambda d: _has(d, f"row-{case}"), "the queue")
    assert _text(ana, "whoami") == "ana (analyst)"
    assert _row_ids(ana) == [f"row-{case}", "row-case-000001"]
    assert ana.find_element(By.ID, f"row-{case}").get_attribute("data-state") == "new"
    # the queue's filters: only critical cases
    ana.find_element(By.ID, "priority-critical").click()
    ana.find_element(By.ID, "apply-filters").click()
    _wait(ana, lambda d: _row_ids(d) == [f"row-{case}"], "the critical cases only")
    assert "priority=critical" in ana.current_url and tokens["ana"] not in ana.current_url
    shots = tmp_path_factory.getbasetemp()  # for a person to look at; left in pytest's temp folder
    ana.save_screenshot(str(shots / "cases_queue.png"))

    # the case: header, alerts, the first alert's evidence graph
    ana.find_element(By.ID, f"case-link-{case}").click()
    _wait(ana, lambda d: _state(d, "new") and _has(d, "action-assign-me"), "the new case")
    assert _text(ana, "case-priority") == "critical" and _text(ana, "case-subject") == "001/S"
    assert _text(ana, "case-version") == "1" and _text(ana, "case-assignee") == "nobody yet"
    links = [a.get_attribute("href") for a in ana.find_elements(By.CSS_SELECTOR, "#alert-rows a.alert-link")]
    assert links == [f"{base}/view/index.html#alert={server['alert']}"]
    _wait(ana, lambda d: d.execute_script("return window.auditflowView.cy.nodes().length > 0"), "the evidence graph")
    drawn = set(ana.execute_script("return window.auditflowView.cy.nodes().map(n => n.id())"))
    assert {"001/S", "001/M"} <= drawn
    no_approve_button()

    # assign to me, start, propose: each a button the document allowed
    ana.find_element(By.ID, "action-assign-me").click()
    _wait(ana, lambda d: _state(d, "assigned") and _has(d, "action-start"), "the case assigned")
    assert _text(ana, "case-assignee") == "ana" and _text(ana, "case-version") == "2"
    no_approve_button()
    ana.find_element(By.ID, "action-start").click()
    _wait(ana, lambda d: _state(d, "investigating") and _has(d, "action-propose"), "the case under investigation")
    no_approve_button()
    # the categories the evidence suggests are ticked: a fan-out spreads money (8/807), a wire (8/805)
    ticked = [b.get_attribute("id") for b in ana.find_elements(By.CSS_SELECTOR, "#propose-categories input:checked")]
    assert ticked == ["propose-category-8-807", "propose-category-8-805"]
    ana.find_element(By.ID, "propose-narrative").send_keys(NARRATIVE)
    ana.find_element(By.ID, "action-propose").click()
    _wait(ana, lambda d: _state(d, "sar_proposed"), "the SAR proposed")
    assert _text(ana, "proposal-narrative") == NARRATIVE and _text(ana, "case-version") == "4"
    assert "proposed by ana" in _text(ana, "proposal-by")
    no_approve_button()
    assert not _has(ana, "action-reject")
    ana.save_screenshot(str(shots / "case_proposed.png"))

    # the approver, in a browser of their own, finds it among the proposed cases
    april, downloads = browsers("april")
    _login(april, base, tokens["april"])
    _wait(april, lambda d: _has(d, f"row-{case}"), "the approver's queue")
    april.find_element(By.ID, "state-sar_proposed").click()
    april.find_element(By.ID, "apply-filters").click()
    _wait(april, lambda d: _row_ids(d) == [f"row-{case}"], "the proposed cases only")
    april.find_element(By.ID, f"case-link-{case}").click()
    _wait(april, lambda d: _state(d, "sar_proposed") and _has(d, "action-approve"), "the proposal to approve")
    assert _text(april, "whoami") == "april (approver)"
    april.find_element(By.ID, "action-approve").click()
    _wait(april, lambda d: _state(d, "sar_approved") and _has(d, "action-export"), "the SAR approved")
    assert "approved by april" in _text(april, "proposal-by")

    # the analyst's page still shows version 4: a note sent on it is refused (409), shown, and the
    # case reloaded as it now is
    ana.find_element(By.ID, "note-text").send_keys("spoke to the payer's bank")
    ana.find_element(By.ID, "action-note").click()
    _wait(ana, lambda d: _state(d, "sar_approved") and _text(d, "case-error").endswith("the case was reloaded"),
          "the case reloaded after the 409")
    error = _text(ana, "case-error")
    assert error.startswith(f"HTTP 409: case {case} changed since version 4: it is at version 5 (sar_approved by april")
    assert error.endswith("the case was reloaded") and _text(ana, "case-version") == "5"
    no_approve_button()

    # the approver exports: the XML is a download, valid under FinCEN's schema, and the case filed
    april.find_element(By.ID, "action-export").click()
    _wait(april, lambda d: _state(d, "sar_filed"), "the SAR filed")
    saved = downloads / f"{case}.sar.xml"
    _wait(april, lambda d: saved.is_file() and not list(downloads.glob("*.crdownload")), "the downloaded XML")
    xml = saved.read_bytes()
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    assert schema.validate(etree.fromstring(xml)), schema.error_log
    assert NARRATIVE.split(" ")[1] in xml.decode("utf-8")
    assert _has(april, "action-download-sar") and "filed by april" in _text(april, "proposal-filed")
    timeline = [r.get_attribute("data-kind") for r in april.find_elements(By.CSS_SELECTOR, "#timeline tr")]
    assert timeline == ["opened", "assigned", "started", "sar_proposed", "sar_approved", "sar_filed"]

    assert approve_buttons_seen == [False] * 5  # the analyst's page never offered to approve
    # no token in any URL the pages used
    assert not [line for line in server["log"].lines if any(t in line for t in tokens.values())]
    assert not [m for m in april.get_log("browser") if m["level"] == "SEVERE"]


def test_a_wrong_token_shows_the_401_and_no_case(server, browsers) -> None:
    browser, _ = browsers("nobody")
    _login(browser, server["base"], "not-a-token")
    _wait(browser, lambda d: not d.find_element(By.ID, "case-error").get_attribute("hidden"), "an error")
    assert _text(browser, "case-error") == "HTTP 401: missing or wrong token"
    assert _row_ids(browser) == []
    assert browser.execute_script("return sessionStorage.length") == 0  # a token nobody has is not kept
    browser.get(f"{server['base']}/view/case.html#case={server['case']}")
    time.sleep(0.5)
    assert _text(browser, "case-state") == "" and not _has(browser, "action-assign-me")


def test_the_pages_are_public_locked_down_files(server) -> None:
    import urllib.request

    for name in ("cases.html", "case.html", "cases.js", "cases.css"):
        with urllib.request.urlopen(f"{server['base']}/view/{name}") as r:
            assert r.status == 200 and "script-src 'self'" in r.headers["Content-Security-Policy"]
            body = r.read().decode()
        if name.endswith(".html"):  # no inline script: every script a file of this server
            assert not re.search(r"<script(?![^>]*\bsrc=)", body) and not re.search(r"\son[a-z]+\s*=", body)


def test_an_approver_assigns_a_case_to_an_analyst(server, browsers) -> None:
    browser, _ = browsers("april-assigns")
    _login(browser, server["base"], server["tokens"]["april"])
    _wait(browser, lambda d: _has(d, "case-link-case-000001"), "the queue")
    browser.find_element(By.ID, "case-link-case-000001").click()
    _wait(browser, lambda d: _state(d, "new") and _has(d, "assign-to"), "the assign form of an approver")
    browser.find_element(By.ID, "assign-to").send_keys("nobody")
    browser.find_element(By.ID, "action-assign-to").click()
    _wait(browser, lambda d: _text(d, "case-error") == "HTTP 422: assignee 'nobody' is not a user", "the refusal")
    assert _state(browser, "new") and _text(browser, "case-version") == "1"
    field = browser.find_element(By.ID, "assign-to")
    field.clear()
    field.send_keys("ana")
    browser.find_element(By.ID, "action-assign-to").click()
    _wait(browser, lambda d: _state(d, "assigned"), "the case assigned")
    assert _text(browser, "case-assignee") == "ana" and _text(browser, "case-error") == ""
    assert not _has(browser, "action-start")  # only the assignee starts it
