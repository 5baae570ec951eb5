"""The analyst web view (``/view/``) in headless Chromium, and its data route ``/evidence``.

A small graph with a planted scatter-gather (S pays M1..M4, which pass the money on to K), a
second planted shape elsewhere (a fan-out from F that has nothing to do with the alert) and seeded
background; the run's ``alerts.jsonl`` holds one alert on S's first scatter transfer. The analyst
app runs under uvicorn on a loopback port, the page is loaded in Debian's Chromium through
Selenium and chromedriver, and what the page drew is read back from its cytoscape graph
(``window.auditflowView.cy``) and compared with the planted answer and with the trace and
findings computed here directly (``auditflow_app.flow.trace_and_typologies`` on the same events).

Chromium and chromedriver come from Debian (``make setup`` installs them where missing); without
them these tests are skipped on a developer machine but **fail** when ``CI`` is set, as the
service tests do (tests/conftest.py).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import defaultdict
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from auditflow_app import flow
from auditflow_app.analyst_api import WEB_DIR, create_app
from auditflow.money import CURRENCIES, Money, format_amount, usd_cents
from auditflow.records import Alert, alert_id_for, ts_to_wire
from auditflow_app.settings import Settings
from evidence_graph import NetworkxGraphStore
from evidence_graph.testing import acct, fan_out, tx

from .browser import chromium, need_front_end, served

TOKEN = "tok-view-5be1d09a"
MIDS = ["M1", "M2", "M3", "M4"]
#: the scatter's amounts in US cents; each mid passes on 97 % of what it got (integer cents)
SCATTER_CENTS = [62_500_012, 61_234_567, 63_000_000, 62_765_433]
PLANTED_MEMBERS = {acct(x) for x in ["S", *MIDS, "K"]}
ALERT_ID = alert_id_for("sg0")
GATHERERS, SCATTERED = ["U1", "U2", "U3", "U4"], ["V1", "V2", "V3", "V4"]
ALERT2_ID = alert_id_for("gs4")


def planted_events() -> list:
    usd = lambda c: Money("US Dollar", c)  # noqa: E731
    ev = [tx(f"sg{i}", "S", m, 600 + i, amount=usd(c)) for i, (m, c) in enumerate(zip(MIDS, SCATTER_CENTS))]
    ev += [tx(f"sg{4 + i}", m, "K", 640 + i, amount=usd(c * 97 // 100)) for i, (m, c) in enumerate(zip(MIDS, SCATTER_CENTS))]
    ev.append(tx("onward", "K", "Z", 700, amount=Money("Bitcoin", 1_234_500_000)))  # 12.345 BTC, exact
    # K's history before the alert: counterparties only an expansion of K shows (outside the trace)
    ev += [tx("early-p", "P", "K", 10, amount=usd(4_321)), tx("early-q", "K", "Q", 20, amount=usd(1_999)),
           tx("early-p2", "P", "K", 30, amount=usd(100))]
    # a gather-scatter through H2, alerted on its first scatter transfer: the payers it gathered
    # from are members the (downstream) trace does not reach
    ev += [tx(f"gs{i}", u, "H2", 1000 + i, amount=usd(2_500_000 + 37 * i)) for i, u in enumerate(GATHERERS)]
    ev += [tx(f"gs{4 + i}", "H2", v, 1040 + i, amount=usd(2_450_000 - 11 * i)) for i, v in enumerate(SCATTERED)]
    # a second planted shape elsewhere: nothing of it belongs to the alert's evidence
    ev += fan_out("F", [f"G{i}" for i in range(6)], prefix="fo", start=800)
    # S's everyday payments after the alert: in the trace, in no shape
    ev += [tx("s-pay-1", "S", "B03", 650, amount=usd(1_234)), tx("s-pay-2", "S", "B05", 660, amount=usd(5_678))]
    rng = random.Random(12)
    background = [f"B{i:02d}" for i in range(16)]
    for i in range(50):  # amounts spread over three decades: few look-alike shapes
        a, b = rng.sample([*background, "Z"], 2)
        ev.append(tx(f"bg{i}", a, b, rng.randrange(0, 4000), amount=usd(int(10 ** rng.uniform(3, 6)))))
    return ev


EVENTS = planted_events()


def _store() -> NetworkxGraphStore:
    store = NetworkxGraphStore()
    store.add_transactions(EVENTS)
    return store


def _settings(out: Path, **kw) -> Settings:
    (out / "tokens").write_text(TOKEN + "\n")
    return Settings(out_dir=out, analyst_tokens_file=out / "tokens", **kw)


def _write_alert(out: Path) -> Alert:
    event = next(e for e in EVENTS if e.event_id == "sg0")
    alert = Alert(ALERT_ID, event, score=0.9731, threshold=0.5, model_digest="sha256:test",
                  features=(("amount_usd", 625000.12),))
    paths = flow.RunPaths.under(out)
    paths.alerts.parent.mkdir(parents=True, exist_ok=True)
    other = Alert(alert_id_for("fo0"), next(e for e in EVENTS if e.event_id == "fo0"), 0.8, 0.5, "sha256:test", ())
    second = Alert(ALERT2_ID, next(e for e in EVENTS if e.event_id == "gs4"), 0.91, 0.5, "sha256:test", ())
    paths.alerts.write_text("".join(json.dumps(a.to_dict()) + "\n" for a in (other, alert, second)))
    return alert


def expected_label(m: Money) -> str:
    """The amount as the page must write it: code, thousands grouped, the canonical decimals."""
    whole, _, frac = format_amount(m).partition(".")
    return f"{CURRENCIES[m.currency][0]} {int(whole):,}" + (f".{frac}" if frac else "")


# ------------------------------------------------------------------ the data route (no browser)


@pytest.fixture
def api(tmp_path) -> tuple[TestClient, Settings, Alert]:
    settings = _settings(tmp_path)
    alert = _write_alert(tmp_path)
    return TestClient(create_app(settings, _store())), settings, alert


def auth(token: str = TOKEN) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_evidence_is_the_reports_trace_and_findings(api) -> None:
    client, settings, alert = api
    r = client.get("/evidence", params={"alert_id": ALERT_ID, "view": "trace"}, headers=auth())
    assert r.status_code == 200, r.text
    ev = r.json()
    trace, matches = flow.trace_and_typologies(_store(), alert, settings)
    assert ev["trace"]["trace_id"] == trace.trace_id and ev["alert"]["account"] == acct("S")
    assert [t["typology"] for t in ev["typologies"]] == ["scatter-gather"]
    assert set(ev["typologies"][0]["accounts"]) == PLANTED_MEMBERS
    assert {n["id"] for n in ev["nodes"]} == {n.node_id for n in trace.nodes} | PLANTED_MEMBERS
    assert [n["id"] for n in ev["nodes"] if n["root"]] == [acct("S")]
    assert {n["id"] for n in ev["nodes"] if n["typologies"]} == PLANTED_MEMBERS
    by_id = {e.event_id: e for e in EVENTS}
    edges = {e["event_id"]: e for e in ev["edges"]}
    assert set(edges) == {e.event_id for e in trace.edges} | {f"sg{i}" for i in range(8)}
    for eid, e in edges.items():  # exact integer units, as strings of digits
        m = by_id[eid].amount_paid
        assert (e["units"], e["scale"], e["currency"]) == (str(m.units), m.scale, m.currency)
        assert e["timestamp"] == ts_to_wire(by_id[eid].timestamp)
    assert ev["omitted"] == {"nodes": 0, "edges": 0}


def test_evidence_brings_the_members_the_trace_did_not_reach(api) -> None:
    client, _, _ = api
    ev = client.get("/evidence", params={"alert_id": ALERT2_ID, "view": "trace"}, headers=auth()).json()
    (finding,) = ev["typologies"]
    assert finding["typology"] == "gather-scatter"
    assert set(finding["accounts"]) == {acct(x) for x in ["H2", *GATHERERS, *SCATTERED]}
    nodes = {n["id"]: n for n in ev["nodes"]}
    assert set(nodes) == {acct(x) for x in ["H2", *GATHERERS, *SCATTERED]}
    assert {i for i, n in nodes.items() if n["hop"] is None} == {acct(u) for u in GATHERERS}  # upstream
    edges = {e["event_id"]: e for e in ev["edges"]}
    assert set(edges) == {f"gs{i}" for i in range(8)}
    assert [edges[f"gs{i}"]["hop"] for i in range(8)] == [None] * 4 + [1] * 4
    assert [edges[f"gs{i}"]["units"] for i in range(4)] == [str(2_500_000 + 37 * i) for i in range(4)]


def test_evidence_is_authenticated_capped_and_validated(tmp_path) -> None:
    settings = _settings(tmp_path, analyst_max_results=3)
    alert = _write_alert(tmp_path)
    client = TestClient(create_app(settings, _store()))
    assert client.get("/evidence", params={"alert_id": ALERT_ID}).status_code == 401
    assert client.get("/evidence", params={"alert_id": ALERT_ID}, headers=auth("tok-view-5be1d09b")).status_code == 401
    assert client.get("/evidence", params={"alert_id": "alert-nope"}, headers=auth()).status_code == 404
    assert client.get("/evidence", params={"alert_id": "x' OR 1=1"}, headers=auth()).status_code == 422
    assert client.post("/evidence", params={"alert_id": ALERT_ID}, headers=auth()).status_code == 405
    ev = client.get("/evidence", params={"alert_id": ALERT_ID, "view": "trace"}, headers=auth()).json()
    # the cap: the root first, then the typology members (sorted), 3 accounts in all
    assert [n["id"] for n in ev["nodes"]] == [acct("S"), acct("K"), acct("M1")]
    trace, _ = flow.trace_and_typologies(_store(), alert, settings)
    assert ev["omitted"]["nodes"] == len({n.node_id for n in trace.nodes} | PLANTED_MEMBERS) - 3
    assert all({e["src"], e["dst"]} <= {acct("S"), acct("K"), acct("M1")} for e in ev["edges"])
    assert [e["event_id"] for e in ev["edges"]] and ev["omitted"]["edges"] > 0
    # the money trail (the default view) under the same cap: the subject, the receiver, a member
    ev = client.get("/evidence", params={"alert_id": ALERT_ID}, headers=auth()).json()
    assert ev["view"] == "trail" and [n["id"] for n in ev["nodes"]] == [acct("S"), acct("M1"), acct("K")]
    assert client.get("/evidence", params={"alert_id": ALERT_ID, "view": "all"}, headers=auth()).status_code == 422


def test_the_view_files_are_public_and_locked_down(api) -> None:
    client, _, _ = api
    page = client.get("/view/")
    assert page.status_code == 200 and "cytoscape.min.js" in page.text
    assert "connect-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/view", follow_redirects=False).headers["location"] == "view/"
    assert client.get("/view/..%2Fpyproject.toml").status_code == 404
    assert client.get("/view/package.json").status_code == 404
    js = client.get("/view/cytoscape.min.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    installed = (WEB_DIR / "node_modules/cytoscape/package.json").read_text()
    assert '"version": "3.35.0"' in installed  # what web/package-lock.json pins


def test_the_api_docs_load_nothing_from_elsewhere(api) -> None:
    client, _, _ = api
    page = client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?['"]([^'"]+)['"]""", page.text)
    found = [a or b for a, b in urls]
    assert found and all("://" not in u and not u.startswith("//") for u in found), found
    for name, media in (("swagger-ui-bundle.js", "text/javascript"), ("swagger-ui.css", "text/css")):
        r = client.get(f"/docs/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(media) and len(r.content) > 10_000
    assert client.get("/docs/package.json").status_code == 404
    installed = json.loads((WEB_DIR / "node_modules/swagger-ui-dist/package.json").read_text())
    assert installed["version"] == json.loads((WEB_DIR / "package.json").read_text())["dependencies"]["swagger-ui-dist"]


# ------------------------------------------------------------------ the page in headless Chromium


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_front_end()
    out = tmp_path_factory.mktemp("view-run")
    settings = _settings(out)
    alert = _write_alert(out)
    with served(create_app(settings, _store())) as (base, log):
        yield {"base": base, "settings": settings, "alert": alert, "log": log}


@pytest.fixture(scope="module")
def browser():
    driver = chromium("1500,950")
    try:
        yield driver
    finally:
        driver.quit()


NODES_JS = """
return window.auditflowView.cy.nodes().map(n => ({
  id: n.id(), root: n.hasClass('root'), typology: n.hasClass('typology'), typologies: n.data('typologies'),
  hop: n.data('hop'), expanded: n.data('expanded'), x: n.position('x'), y: n.position('y')}));
"""
EDGES_JS = """
return window.auditflowView.cy.edges().map(e => ({
  id: e.id(), source: e.source().id(), target: e.target().id(), label: e.data('label'),
  event_id: e.data('event_id') || null, typology: e.hasClass('typology')}));
"""


def _open(browser, url: str) -> None:
    browser.get("about:blank")  # a new document each time: a fragment-only change would not reload
    browser.get(url)


def _wait(browser, js: str, what: str, timeout: float = 20):
    try:
        return WebDriverWait(browser, timeout, poll_frequency=0.1).until(lambda d: d.execute_script(js))
    except TimeoutException:
        logs = browser.get_log("browser")
        pytest.fail(f"the page never showed {what}; status {browser.find_element(By.ID, 'status').text!r}, "
                    f"error {browser.find_element(By.ID, 'error').text!r}, console {logs}")


def _load_alert(browser, server) -> None:
    _open(browser, f"{server['base']}/view/#alert={ALERT_ID}&view=trace&token={TOKEN}")
    _wait(browser, "return window.auditflowView && window.auditflowView.state.evidence !== null"
                   " && window.auditflowView.cy.nodes().length > 0", "the alert's evidence")


def test_the_page_shows_the_root_and_the_typology_members(server, browser, tmp_path_factory) -> None:
    _load_alert(browser, server)
    nodes = {n["id"]: n for n in browser.execute_script(NODES_JS)}
    trace, matches = flow.trace_and_typologies(_store(), server["alert"], server["settings"])
    members = {a for m in matches for a in m.accounts}
    assert members == PLANTED_MEMBERS  # the detector finds the planted shape (and only it)
    # every account of the trace and of the finding is drawn, and nothing else
    assert set(nodes) == {n.node_id for n in trace.nodes} | members
    assert not {acct("F"), acct("P"), acct("Q")} & set(nodes)
    assert [i for i, n in nodes.items() if n["root"]] == [acct("S")]
    assert {i for i, n in nodes.items() if n["typology"]} == PLANTED_MEMBERS
    assert all(nodes[i]["typologies"] == ["scatter-gather"] for i in PLANTED_MEMBERS)
    # hop columns: the trace's depths, one x per hop, left to right
    depth = trace.depths()
    assert all(nodes[i]["hop"] == depth[i] for i in depth)
    xs = {h: {round(n["x"]) for n in nodes.values() if n["hop"] == h} for h in set(depth.values())}
    assert all(len(v) == 1 for v in xs.values())
    assert [xs[h].pop() for h in sorted(xs)] == sorted({round(n["x"]) for n in nodes.values()})
    # every transfer: its exact amount and its time on the edge
    edges = {e["event_id"]: e for e in browser.execute_script(EDGES_JS)}
    by_id = {e.event_id: e for e in EVENTS}
    assert set(edges) == {e.event_id for e in trace.edges} | {eid for m in matches for eid in m.event_ids}
    for eid, e in edges.items():
        ev = by_id[eid]
        assert e["label"] == f"{expected_label(ev.amount_paid)} · {ts_to_wire(ev.timestamp).replace('T', ' ')}"
        assert (e["source"], e["target"]) == (ev.sender.node_id, ev.receiver.node_id)
        assert e["typology"] == (eid in matches[0].event_ids)
    assert edges["sg1"]["label"].startswith("USD 612,345.67 · ")  # by hand, once
    assert edges["onward"]["label"].startswith("XBT 12.345000 · ")
    # the token left the address bar; the server's access log never saw it, but did see the calls
    assert "token" not in browser.current_url and TOKEN not in browser.current_url
    assert any("/evidence?alert_id=" in line for line in server["log"].lines)
    assert not any(TOKEN in line for line in server["log"].lines)
    # every resource the page loaded came from this server (no CDN)
    urls = browser.execute_script("return performance.getEntriesByType('resource').map(r => r.name)")
    assert any(u.endswith("/view/cytoscape.min.js") for u in urls)
    assert all(u.startswith(server["base"] + "/") for u in urls), urls
    assert not [m for m in browser.get_log("browser") if m["level"] == "SEVERE"]
    shot = tmp_path_factory.getbasetemp() / "web_view.png"
    browser.save_screenshot(str(shot))  # for a person to look at; left in pytest's temp folder


def test_members_the_trace_did_not_reach_stand_before_the_root(server, browser) -> None:
    _open(browser, f"{server['base']}/view/#alert={ALERT2_ID}&view=trace&token={TOKEN}")
    _wait(browser, "return window.auditflowView && window.auditflowView.state.evidence !== null", "alert 2")
    nodes = {n["id"]: n for n in browser.execute_script(NODES_JS)}
    members = {acct(x) for x in ["H2", *GATHERERS, *SCATTERED]}
    assert set(nodes) == members and {i for i, n in nodes.items() if n["typology"]} == members
    assert [i for i, n in nodes.items() if n["root"]] == [acct("H2")]
    gatherers = {round(nodes[acct(u)]["x"]) for u in GATHERERS}
    assert len(gatherers) == 1 and gatherers.pop() < round(nodes[acct("H2")]["x"]) < round(nodes[acct("V1")]["x"])
    edges = {e["event_id"]: e for e in browser.execute_script(EDGES_JS)}
    by_id = {e.event_id: e for e in EVENTS}
    assert set(edges) == {f"gs{i}" for i in range(8)} and all(e["typology"] for e in edges.values())
    for eid, e in edges.items():
        ev = by_id[eid]
        assert e["label"] == f"{expected_label(ev.amount_paid)} · {ts_to_wire(ev.timestamp).replace('T', ' ')}"
    assert edges["gs1"]["label"].startswith("USD 25,000.37 · ")


def _click_node(browser, node_id: str) -> None:
    pos = browser.execute_script(
        "const n = window.auditflowView.cy.getElementById(arguments[0]); const p = n.renderedPosition();"
        "return [p.x, p.y];", node_id)
    box = browser.find_element(By.ID, "cy")
    size = box.size
    ActionChains(browser).move_to_element_with_offset(
        box, int(pos[0] - size["width"] / 2), int(pos[1] - size["height"] / 2)).click().perform()


def test_clicking_a_node_expands_it_with_its_counterparties(server, browser) -> None:
    _load_alert(browser, server)
    before = {n["id"] for n in browser.execute_script(NODES_JS)}
    _click_node(browser, acct("K"))
    _wait(browser, f"return window.auditflowView.cy.getElementById('{acct('K')}').data('expanded') === true",
          "K expanded")
    nodes = {n["id"]: n for n in browser.execute_script(NODES_JS)}
    # K's counterparties, from the events themselves: every one is drawn now
    sent, received = defaultdict(list), defaultdict(list)
    for e in EVENTS:
        if e.sender.node_id == acct("K"):
            sent[e.receiver.node_id].append(e)
        if e.receiver.node_id == acct("K"):
            received[e.sender.node_id].append(e)
    counterparties = set(sent) | set(received)
    assert counterparties - before == {acct("P"), acct("Q")}  # what the trace did not reach
    assert set(nodes) == before | counterparties
    assert not nodes[acct("P")]["typology"] and nodes[acct("P")]["x"] > nodes[acct("K")]["x"]
    # the aggregated edges: count and exact US cents of each direction
    edges = {(e["source"], e["target"]): e for e in browser.execute_script(EDGES_JS) if e["id"].startswith("n:")}
    for other, evs in received.items():
        cents = sum(usd_cents(e.amount_paid) for e in evs)
        label = edges[(other, acct("K"))]["label"]
        assert label.startswith(f"{len(evs)}× USD {cents // 100:,}.{cents % 100:02d} · "), label
    for other, evs in sent.items():
        cents = sum(usd_cents(e.amount_paid) for e in evs)
        assert edges[(acct("K"), other)]["label"].startswith(f"{len(evs)}× USD {cents // 100:,}.{cents % 100:02d} · ")
    assert edges[(acct("P"), acct("K"))]["label"].startswith("2× USD 44.21 · ")  # by hand, once
    assert acct("P") in browser.find_element(By.ID, "details").text


@pytest.mark.parametrize("fragment", [f"alert={ALERT_ID}&token=tok-view-5be1d09b", f"alert={ALERT_ID}"],
                         ids=["wrong token", "no token"])
def test_a_wrong_or_missing_token_shows_an_error_not_data(server, browser, fragment) -> None:
    _open(browser, f"{server['base']}/view/#{fragment}")
    if "token=" not in fragment:  # nothing loads by itself without a token: the analyst presses the button
        browser.find_element(By.CSS_SELECTOR, "#load button[type=submit]").click()
    _wait(browser, "return !document.getElementById('error').hidden", "an error")
    error = browser.find_element(By.ID, "error").text
    assert error == "HTTP 401: missing or wrong token"
    assert browser.execute_script("return window.auditflowView.cy.elements().length") == 0
    assert browser.execute_script("return window.auditflowView.state.evidence") is None
    body = browser.find_element(By.TAG_NAME, "body").text
    assert acct("M1") not in body and ALERT_ID not in browser.find_element(By.ID, "summary").text


def test_the_api_docs_render_offline_in_chromium(server, browser) -> None:
    """Swagger UI draws every route of the API from this server's own files (the machine reaches
    no CDN: FastAPI's default page stays blank here)."""
    _open(browser, f"{server['base']}/docs")
    ops = _wait_docs(browser)
    assert any("/evidence" in o for o in ops) and any("/graph/trace" in o or "/trace" in o for o in ops), ops
    requested = [line for line in server["log"].lines if "/docs" in line]
    assert any("swagger-ui-bundle.js" in line for line in requested), requested


def _wait_docs(browser, timeout: float = 30) -> list[str]:
    js = "return Array.from(document.querySelectorAll('.opblock-summary-path')).map(e => e.textContent)"
    try:
        return WebDriverWait(browser, timeout, poll_frequency=0.2).until(lambda d: d.execute_script(js) or None)
    except TimeoutException:
        pytest.fail(f"Swagger UI drew no route; console {browser.get_log('browser')}")


def test_the_token_is_typed_once_kept_for_the_tab_and_never_in_a_url(server, browser) -> None:
    _open(browser, f"{server['base']}/view/")
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "alert").send_keys(ALERT_ID)
    browser.find_element(By.CSS_SELECTOR, "#load button[type=submit]").click()
    _wait(browser, "return window.auditflowView.state.evidence !== null", "the alert's evidence")
    # the same tab opens another alert by its id alone: the token was kept for it
    _open(browser, f"{server['base']}/view/#alert={ALERT2_ID}")
    _wait(browser, "return window.auditflowView.state.evidence !== null"
                   f" && window.auditflowView.state.evidence.alert.alert_id === '{ALERT2_ID}'", "the second alert")
    assert TOKEN not in browser.current_url
    assert not [line for line in server["log"].lines if TOKEN in line]  # in no request line
    browser.find_element(By.ID, "forget").click()
    assert browser.execute_script("return sessionStorage.length") == 0
    _open(browser, f"{server['base']}/view/#alert={ALERT_ID}")  # forgotten: nothing loads by itself
    time.sleep(0.5)
    assert browser.execute_script("return window.auditflowView.state.evidence") is None


def test_the_default_view_is_the_money_trail_with_the_instance(api) -> None:
    client, _, _ = api
    ev = client.get("/evidence", params={"alert_id": ALERT_ID}, headers=auth()).json()
    assert ev["view"] == "trail" and len(ev["nodes"]) <= 30
    nodes = {n["id"]: n for n in ev["nodes"]}
    # the subject, the receiver at hop 1, where M1 passed the money (K, hop 2); the other members
    # of the scatter-gather are not on this transfer's trail: drawn as members, no hop
    assert nodes[acct("S")]["root"] and nodes[acct("S")]["hop"] == 0
    assert nodes[acct("M1")]["hop"] == 1 and nodes[acct("K")]["hop"] == 2
    assert set(nodes) >= PLANTED_MEMBERS and {nodes[acct(m)]["hop"] for m in MIDS[1:]} == {None}
    assert acct("B03") not in nodes and acct("B05") not in nodes  # S's everyday payments: not the alerted money
    edges = {e["event_id"]: e for e in ev["edges"]}
    assert edges["sg0"]["side"] == "alerted"
    # M1 passed on 97 % of the 625,000.12 it got: 606,250.11, shown to 4 significant digits
    assert edges["sg4"]["label"] == "USD 606,300 (97 %) · 09-01 10:40"
    assert {edges[f"sg{i}"]["side"] for i in (1, 2, 3, 5, 6, 7)} == {"typology"}
    assert ev["omitted"] == {"nodes": 0, "edges": 0}  # the trail and the instance fit under the cap


LABELS_JS = """
const cy = window.auditflowView.cy;
return cy.edges().map(e => {
  const b = e.boundingBox({includeNodes: false, includeEdges: false, includeLabels: true, includeOverlays: false});
  return {id: e.id(), label: e.data('label'), x1: b.x1, x2: b.x2, y1: b.y1, y2: b.y2};
});
"""


def test_the_money_trail_is_drawn_legibly(server, browser) -> None:
    browser.set_window_size(1400, 900)
    _open(browser, f"{server['base']}/view/#alert={ALERT_ID}&token={TOKEN}")
    _wait(browser, "return window.auditflowView && window.auditflowView.state.evidence !== null"
                   " && window.auditflowView.cy.nodes().length > 0", "the money trail")
    assert browser.execute_script("return window.auditflowView.state.evidence.view") == "trail"
    nodes = {n["id"]: n for n in browser.execute_script(NODES_JS)}
    assert len(nodes) <= 30 and nodes[acct("S")]["root"]
    assert all(nodes[m]["typology"] for m in PLANTED_MEMBERS)
    boxes = [b for b in browser.execute_script(LABELS_JS) if b["label"]]
    assert len(boxes) >= 8 and all(b["x2"] > b["x1"] and b["y2"] > b["y1"] for b in boxes)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            overlap = min(a["x2"], b["x2"]) > max(a["x1"], b["x1"]) and min(a["y2"], b["y2"]) > max(a["y1"], b["y1"])
            assert not overlap, (a, b)
    zoom = browser.execute_script("return window.auditflowView.cy.zoom()")
    assert 12 * zoom >= 9, zoom  # edge labels at least 9 px on the screen
    browser.set_window_size(1500, 950)
