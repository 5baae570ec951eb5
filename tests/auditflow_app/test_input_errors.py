"""What a user can type wrong gets one line naming the field, file or account and the value, and
exit 2 -- never a traceback: a wrong header, an empty file, a header only (run, train, evaluate),
a set whose temporal split leaves a part without laundering (train says which and what to do), an
unknown or malformed account (trace and graph; HTTP 404 and 422)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from auditflow.errors import InputError
from auditflow.money import Money
from auditflow_app.analyst_api import create_app
from auditflow_app.settings import Settings
from evidence_graph import NetworkxGraphStore
from evidence_graph.testing import T0, tx
from ingest.amlworld import HEADER, write_transactions
from model_service.training import temporal_split, untrainable
from reports.signing import generate_key_file

ROOT = Path(__file__).parents[2]


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    key = tmp_path / "signing.pem"
    if not key.exists():
        generate_key_file(key)  # run checks its settings first: these tests are about the data
    env = {**os.environ, "AUDITFLOW_OUT_DIR": str(tmp_path / "out"), "AUDITFLOW_SIGNING_KEY_FILE": str(key),
           "AUDITFLOW_GRAPH_URL": f"embedded:{tmp_path / 'graph.jsonl'}", "COLUMNS": "60"}
    return subprocess.run([sys.executable, "-m", "auditflow_app.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)


def one_line(proc: subprocess.CompletedProcess, *words: str) -> str:
    text = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2, text
    assert len(text.splitlines()) == 1 and text.startswith("error: "), text
    assert all(w in text for w in words), text
    return text


@pytest.fixture
def files(tmp_path):
    (tmp_path / "wrong.csv").write_text("a,b,c\n1,2,3\n")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "header.csv").write_text(",".join(HEADER) + "\n")
    (tmp_path / "out" / "model").mkdir(parents=True)  # run checks its data before it reads a model
    return tmp_path


@pytest.mark.parametrize("command", ["run", "train", "evaluate"])
def test_wrong_header_empty_file_and_header_only_are_one_line(files, command):
    one_line(cli(files, command, "wrong.csv"), "header='a,b,c'", "not an AMLworld transactions CSV")
    empty = cli(files, command, "empty.csv")
    if command == "run":
        one_line(empty, "empty.csv is empty")
    else:
        one_line(empty, "header=''", "empty.csv")
    one_line(cli(files, command, "header.csv"), "header" if command == "run" else "no transactions")


def test_a_split_without_laundering_says_which_and_what_to_do():
    # 240 hourly transfers; the only laundering is in the first three, so validation and test hold none
    usd = Money("US Dollar", 10_000)
    events = [tx(f"e{i}", f"A{i % 7}", f"B{i % 5}", 60 * i, amount=usd, laundering=i < 3, t0=T0) for i in range(240)]
    parts = temporal_split(events)
    laundering = [sum(events[int(i)].is_laundering for i in p) for p in parts]
    assert laundering == [3, 0, 0] and len(parts[1]) == 48  # the premise, counted here
    counts = [SimpleNamespace(name=n, n_positive=k) for n, k in zip(("train", "validation", "test"), laundering)]
    e = untrainable("validation", len(parts[1]), "S", "E", counts)
    assert isinstance(e, InputError)
    text = str(e)
    assert "the validation split (48 events, S to E) holds no laundering transfer" in text
    assert "3 in train, 0 in validation, 0 in test" in text and "auditflow generate --days" in text


def test_train_on_such_a_file_is_one_line(tmp_path):
    usd = Money("US Dollar", 10_000)
    events = [tx(f"e{i}", f"A{i % 7}", f"B{i % 5}", 60 * i, amount=usd, laundering=i < 3) for i in range(240)]
    write_transactions(tmp_path / "early.csv", events)
    one_line(cli(tmp_path, "train", "early.csv"), "split", "holds no laundering transfer", "3 in train")


@pytest.fixture
def graph(tmp_path):
    store = NetworkxGraphStore(tmp_path / "graph.jsonl")
    store.add_transactions([tx("e1", "A", "B", 0), tx("e2", "B", "C", 5)])
    store.close()
    return tmp_path


@pytest.mark.parametrize("args", [["trace", "{a}"], ["graph", "trace", "{a}"], ["graph", "neighborhood", "{a}"],
                                  ["graph", "typology", "{a}"], ["graph", "paths", "001/A", "{a}"]])
def test_unknown_and_malformed_accounts(graph, args):
    one_line(cli(graph, *[x.format(a="001/NOPE") for x in args]), "no such account: '001/NOPE'", "graph.jsonl")
    one_line(cli(graph, *[x.format(a="NOPE") for x in args]), "account='NOPE'", "expected BANK/ACCOUNT")
    known = cli(graph, *[x.format(a="001/C") for x in args])
    assert known.returncode == 0, known.stdout + known.stderr


def test_the_api_answers_404_for_an_unknown_account_and_422_for_a_malformed_one(graph):
    (graph / "tokens").write_text("tok-123456789")
    settings = Settings(out_dir=graph, analyst_tokens_file=graph / "tokens")
    store = NetworkxGraphStore(graph / "graph.jsonl")
    client = TestClient(create_app(settings, store))
    auth = {"Authorization": "Bearer tok-123456789"}
    for route in ("/trace?account={a}", "/neighborhood?account={a}", "/typologies?account={a}",
                  "/paths?source=001/A&target={a}"):
        r = client.get(route.format(a="001/NOPE"), headers=auth)
        assert r.status_code == 404 and r.json()["detail"].startswith("no such account: '001/NOPE'"), r.text
        assert client.get(route.format(a="NOPE"), headers=auth).status_code == 422
        assert client.get(route.format(a="001/C"), headers=auth).status_code == 200
