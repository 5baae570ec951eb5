"""The analyst API: token checks, read-only, validation of what a caller sends, the result cap,
pagination and the per-query timeout; answers against the hand-built graph's own content."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from auditflow_app.analyst_api import create_app
from auditflow.errors import ConfigError
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


def test_the_timeout_answers_504(settings) -> None:
    class Slow(NetworkxGraphStore):
        def _expand(self, *a, **kw):
            time.sleep(1.5)
            return super()._expand(*a, **kw)

    store = Slow()
    store.add_transactions(EVENTS)
    client = TestClient(create_app(settings.model_copy(update={"analyst_timeout_s": 0.2}), store))
    r = client.get("/typologies", params={"account": acct("H")}, headers=auth())
    assert r.status_code == 504 and "0.2 s" in r.json()["detail"]
