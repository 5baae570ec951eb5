"""The PyFlink job on a local MiniCluster over a file: exact features, bad rows kept, counts balance.

The reference is the plain-Python loop (``pipelines.features.iter_features``) over the same rows;
the job must compute bit-identical feature vectors for every alert it emits.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from auditflow.records import TransactionEvent
from evidence_graph import open_store
from ingest.amlworld import read_transactions
from ingest.synthetic import generate, write_dataset
from pipelines.features import FEATURE_NAMES, iter_features
from pipelines.job import JobSpec, run_file_job

pytestmark = pytest.mark.flink

BAD_ROWS = {
    "Amount Paid": "2022/09/01 00:20,010,8000EBD30,010,8000EBD31,10.00,US Dollar,ten,US Dollar,ACH,0",
    "Receiving Currency": "2022/09/01 00:20,010,8000EBD30,010,8000EBD31,10.00,Doubloon,10.00,US Dollar,ACH,0",
    "From Account": "2022/09/01 00:20,010,,010,8000EBD31,10.00,US Dollar,10.00,US Dollar,ACH,0",
    "Timestamp": "2022-09-01 00:20,010,8000EBD30,010,8000EBD31,10.00,US Dollar,10.00,US Dollar,ACH,0",
    "row": "2022/09/01 00:20,010,8000EBD30,010,8000EBD31,10.00,US Dollar,10.00",
}


AMOUNT_SCALE = 20_000.0  # amount_usd / scale: with threshold 0.5, alerts from 10,000 USD


def amount_scorer(threshold: float = 0.5):
    """A transparent scorer for the test: alerts on large amounts in USD (column 0 of the vector)."""
    column = FEATURE_NAMES.index("amount_usd")
    return (lambda X: np.asarray(X, dtype=float)[:, column] / AMOUNT_SCALE), threshold, "test-scorer"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("job")
    ds = generate(accounts=150, days=2, laundering_rate=0.01, seed=3)
    csv_path, _ = write_dataset(ds, root, name="small")
    lines = Path(csv_path).read_text().splitlines()
    # Bad rows spliced in at known line numbers.
    bad_lines = {}
    for i, (field, row) in enumerate(BAD_ROWS.items()):
        at = 40 + 97 * i
        lines.insert(at - 1, row)
        bad_lines[at] = field
    Path(csv_path).write_text("\n".join(lines) + "\n")
    graph = root / "graph.jsonl"
    out = run_file_job(str(csv_path), JobSpec(graph_url=f"embedded:{graph}", scorer_factory=amount_scorer))
    return {"csv": csv_path, "out": out, "bad_lines": bad_lines, "graph": graph}


def test_bad_rows_are_rejected_with_line_and_field_and_counts_balance(run):
    out = run["out"]
    assert {r.offset: r.field for r in out.rejects} == run["bad_lines"]
    for r in out.rejects:
        assert r.reason and r.raw == BAD_ROWS[r.field]
    with open_store(f"embedded:{run['graph']}") as store:
        edges = store.edge_count()
    good = sum(1 for e in read_transactions(run["csv"]) if isinstance(e, TransactionEvent))
    # in = processed + rejected, processed counted by the job itself; each one is also in the graph
    assert out.processed == edges == good
    assert out.records_in == out.processed + len(out.rejects) == good + len(run["bad_lines"])


def test_job_features_equal_the_plain_python_reference(run):
    events = [e for e in read_transactions(run["csv"]) if isinstance(e, TransactionEvent)]
    reference = {ev.event_id: feats for ev, feats in iter_features(events)}
    expected = {eid for eid, f in reference.items() if f["amount_usd"] / AMOUNT_SCALE >= 0.5}
    got = {a["event"]["event_id"]: dict(a["features"]) for a in run["out"].alerts}
    assert expected and set(got) == expected
    for eid, feats in got.items():
        assert feats == reference[eid]  # exact, not approximate
        assert list(feats) == list(FEATURE_NAMES)


def test_alert_messages_carry_score_and_model(run):
    a = run["out"].alerts[0]
    assert a["model"] == "test-scorer"
    assert a["score"] == dict(a["features"])["amount_usd"] / AMOUNT_SCALE
    json.dumps(a)  # wire-ready
