"""The analyst API: token checks, read-only, validation of what a caller sends, the result cap,
pagination and the per-query timeout; answers against the hand-built graph's own content."""

from __future__ import annotations

import json
import threading

import pytest
from fastapi.testclient import TestClient

from auditflow.errors import ConfigError
from auditflow.money import usd_cents
from auditflow.records import Alert, alert_id_for
from auditflow_app.analyst_api import create_app
from auditflow_app.flow import RunPaths
from auditflow_app.settings import Settings
from evidence_graph import NetworkxGraphStore
from evidence_graph.testing import acct, fan_out, tx

LEAVES = [f"L{i:02d}" for i in range(12)]
EVENTS = [*fan_out("H", LEAVES), tx("on", "L03", "Z", 30)]
TOKENS = ("tok-old-7f3a", "tok-new-91c2")


@pytest.fixture
def settings(tmp_path) -> Settings:
    (tmp_path / "tokens").write_text(",".join(TOKENS) + "\n")
    return Settings(out_dir=tmp_path, analyst_tokens_file=tmp_path / "tokens", analyst_max_results=5)


@pytest.fixture
def client(settings) -> TestClient:
    store = NetworkxGraphStore()
    store.add_transactions(EVENTS)
    return TestClient(create_app(settings, store))


def auth(token: str = TOKENS[1]) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_tokens_are_required_and_checked(client) -> None:
    assert client.get("/trace", params={"account": acct("H")}).status_code == 401
    assert client.get("/trace", params={"account": acct("H")}, headers=auth("tok-new-91c3")).status_code == 401
    assert client.get("/trace", params={"account": acct("H")}, headers={"Authorization": "Basic eDp5"}).status_code == 401
    for token in TOKENS:  # either token of a rotation works
        assert client.get("/trace", params={"account": acct("H")}, headers=auth(token)).status_code == 200
    assert client.get("/health").json() == {"status": "ok"}


def test_no_token_file_no_api(tmp_path) -> None:
    with pytest.raises(ConfigError, match="AUDITFLOW_ANALYST_TOKENS_FILE"):
        create_app(Settings(out_dir=tmp_path), NetworkxGraphStore())


@pytest.mark.parametrize("method", ["post", "put", "delete", "patch"])
def test_writes_are_refused(client, method) -> None:
    r = getattr(client, method)("/trace", params={"account": acct("H")}, headers=auth())
    assert r.status_code == 405


@pytest.mark.parametrize("account", ["001/H' OR 1=1 //", "001/H}) DETACH DELETE a //", "H", "../../etc/passwd"])
def test_injection_attempts_are_refused_with_422(client, account) -> None:
    r = client.get("/trace", params={"account": account}, headers=auth())
    assert r.status_code == 422 and "account" in r.json()["detail"]


def test_trace_pages_follow_each_other(client) -> None:
    seen, offset = [], 0
    while offset is not None:
        page = client.get("/trace", params={"account": acct("H"), "limit": 5, "offset": offset}, headers=auth()).json()
        seen += [n[0] for n in page["nodes"]["items"]]
        offset = page["nodes"]["next_offset"]
    assert seen == [acct("H"), *(acct(x) for x in LEAVES), acct("Z")]  # depth, then name
    assert page["nodes"]["total"] == 14


def test_the_result_cap_is_enforced(client) -> None:
    r = client.get("/neighborhood", params={"account": acct("H"), "limit": 6}, headers=auth())
    assert r.status_code == 422 and "at most 5" in r.json()["detail"]
    page = client.get("/neighborhood", params={"account": acct("H"), "limit": 5}, headers=auth()).json()
    assert len(page["items"]) == 5 and page["total"] == 5 and page["truncated"]  # 12 counterparties, cap 5


def test_paths_and_typologies(client) -> None:
    page = client.get("/paths", params={"source": acct("H"), "target": acct("Z")}, headers=auth()).json()
    assert [[e["event_id"] for e in p] for p in page["items"]] == [["fo3", "on"]]
    # H paid twelve accounts comparable amounts within minutes: a fan-out (one finding)
    (m,) = client.get("/typologies", params={"account": acct("H")}, headers=auth()).json()["items"]
    assert m["typology"] == "fan-out" and m["event_ids"] == sorted(f"fo{i}" for i in range(12))


def test_hops_default_to_the_configured_trace_hops(settings) -> None:
    """Without ``hops``/``max_hops`` a query goes AUDITFLOW_TRACE_HOPS deep, like the command line:
    H -> L03 -> Z is two hops."""
    store = NetworkxGraphStore()
    store.add_transactions(EVENTS)
    client = TestClient(create_app(settings.model_copy(update={"trace_hops": 1}), store))
    nodes = client.get("/trace", params={"account": acct("H"), "limit": 5}, headers=auth()).json()["nodes"]
    assert nodes["total"] == 13  # H and its twelve payees, not Z
    assert client.get("/trace", params={"account": acct("H"), "hops": 2}, headers=auth()).json()["nodes"]["total"] == 14
    params = {"source": acct("H"), "target": acct("Z")}
    assert client.get("/paths", params=params, headers=auth()).json()["items"] == []
    page = client.get("/paths", params={**params, "max_hops": 2}, headers=auth()).json()
    assert [[e["event_id"] for e in p] for p in page["items"]] == [["fo3", "on"]]


class Held(NetworkxGraphStore):
    """A store whose queries about the ``held`` accounts (all, when None) wait in the store call
    until ``release`` is set: a query as slow as the test wants. Counts the calls that reach it."""

    def __init__(self, held: set[str] | None = None, **kw) -> None:
        super().__init__(**kw)
        self.held, self.release, self.waiting = held, threading.Event(), threading.Event()
        self.calls: list[tuple[tuple[str, ...], str]] = []

    def _expand(self, requests, direction, limit, timeout):
        nodes = tuple(n for n, _, _ in requests)
        self.calls.append((nodes, direction))
        if self.held is None or self.held & set(nodes):
            self.waiting.set()
            assert self.release.wait(30), "the test never released the held query"
        return super()._expand(requests, direction, limit, timeout)


def write_alert(settings: Settings, event_id: str) -> str:
    """An alert on the graph's transfer ``event_id`` in the run's alerts.jsonl; its id."""
    event = next(e for e in EVENTS if e.event_id == event_id)
    alert = Alert(alert_id_for(event_id), event, 0.9, 0.5, "sha256:test", ())
    RunPaths.under(settings.out_dir).alerts.write_text(json.dumps(alert.to_dict()) + "\n")
    return alert.alert_id


def test_a_slow_query_holds_up_no_other(settings) -> None:
    """A query past its budget is answered 504 while it still runs; the next query, beside it,
    answers within its own budget; the abandoned one stops at its next store call."""
    store = Held({acct("Z")})
    store.add_transactions(EVENTS)
    app = create_app(settings.model_copy(update={"analyst_timeout_s": 1.0}), store)
    with TestClient(app) as client:
        try:
            r = client.get("/neighborhood", params={"account": acct("Z")}, headers=auth())
            assert r.status_code == 504 and "1 s" in r.json()["detail"]
            assert store.waiting.is_set() and not store.release.is_set()  # still in its store call
            r = client.get("/neighborhood", params={"account": acct("H")}, headers=auth())
        finally:
            store.release.set()
    assert r.status_code == 200, r.text
    paid: dict[str, int] = {}  # what H paid each counterparty, from the events themselves
    for e in EVENTS:
        if e.sender.node_id == acct("H"):
            paid[e.receiver.node_id] = paid.get(e.receiver.node_id, 0) + usd_cents(e.amount_paid)
    top = sorted(paid, key=lambda k: (-paid[k], k))[:5]  # the cap
    assert [(i["counterparty"], i["sent"], i["sent_usd_cents"], i["received"]) for i in r.json()["items"]] == [
        (k, 1, paid[k], 0) for k in top]
    assert r.json()["truncated"] and len(paid) == 12
    # the abandoned query (its worker finished when the client closed) asked Z's payees, was held,
    # and stopped there: it never asked Z's payers
    assert [c for c in store.calls if acct("Z") in c[0]] == [((acct("Z"),), "out")]


@pytest.mark.parametrize(("route", "params"), [
    ("/typologies", {"account": acct("H")}),
    ("/evidence", {"alert_id": alert_id_for("fo3")}),
    ("/trace", {"account": acct("H")}),
    ("/paths", {"source": acct("H"), "target": acct("Z")}),
    ("/neighborhood", {"account": acct("H")}),
])
def test_the_timeout_answers_504(settings, route, params) -> None:
    """Every query route answers 504 past its budget, and its query goes no further: no store
    call after the one that outlasted it (left alone, each of these asks the store again)."""
    write_alert(settings, "fo3")
    store = Held()
    store.add_transactions(EVENTS)
    with TestClient(create_app(settings.model_copy(update={"analyst_timeout_s": 0.2}), store)) as client:
        try:
            r = client.get(route, params=params, headers=auth())
        finally:
            store.release.set()
    assert r.status_code == 504 and "0.2 s" in r.json()["detail"]
    assert len(store.calls) <= 1
    counted = Held(held=set())  # the same query, unhurried, asks the store more than once
    counted.add_transactions(EVENTS)
    assert TestClient(create_app(settings, counted)).get(route, params=params, headers=auth()).status_code == 200
    assert len(counted.calls) > 1


def test_a_query_takes_in_what_the_stream_job_appended(settings, tmp_path) -> None:
    """The embedded store on a file: a query reloads what another process appended since."""
    path = tmp_path / "graph.jsonl"
    writer = NetworkxGraphStore(path, fsync=False)
    writer.add_transactions(EVENTS)
    writer.flush()
    client = TestClient(create_app(settings, NetworkxGraphStore(path, fsync=False)))
    params = {"source": acct("H"), "target": acct("Y")}
    before = client.get("/paths", params=params, headers=auth())
    assert before.status_code == 404 and "no such account: '001/Y'" in before.json()["detail"]  # Y is not there yet
    writer.add_transactions([tx("late", "Z", "Y", 40)])
    writer.flush()
    page = client.get("/paths", params=params, headers=auth()).json()
    assert [[e["event_id"] for e in p] for p in page["items"]] == [["fo3", "on", "late"]]


def test_alerts_never_show_the_ground_truth_label(settings) -> None:
    """A labelled data set's answer key stays in evaluation: /alerts drops ``is_laundering``,
    whatever it was, and keeps every other field of the row."""
    import dataclasses

    event = dataclasses.replace(EVENTS[0], is_laundering=True)
    alert = Alert(alert_id_for(event.event_id), event, 0.9, 0.5, "sha256:test", ())
    row = {**alert.to_dict(), "tier": "critical"}
    RunPaths.under(settings.out_dir).alerts.write_text(json.dumps(row) + "\n")
    store = NetworkxGraphStore()
    store.add_transactions(EVENTS)
    body = TestClient(create_app(settings, store)).get("/alerts", headers=auth()).json()
    assert "is_laundering" not in json.dumps(body) and "is_laundering" in json.dumps(row)
    (got,) = body["items"]
    expected = {**row, "event": {k: v for k, v in row["event"].items() if k != "is_laundering"}}
    assert got == expected
