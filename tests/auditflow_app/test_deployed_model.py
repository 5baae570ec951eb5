"""The deployed model is the measured one: what ``auditflow train`` saves is the model a separate
``auditflow evaluate`` run on the same file and seed measures as ``gfp_one_hop`` (same digest), it
scores every event, and the deep path gives it the GFP features the file's events give in order and
the one-hop graph features the graph of the file's events gives."""

from __future__ import annotations

import hashlib
import json

from typer.testing import CliRunner

from auditflow.features import ONE_HOP_GRAPH_FEATURES
from auditflow.records import TransactionEvent
from auditflow_app import cli
from auditflow_app.flow import DEPLOYED_MODEL
from evidence_graph import NetworkxGraphStore, graph_features
from evidence_graph.gfp_features import gfp_feature_matrix
from ingest.amlworld import read_transactions
from model_service.training import Cascade

runner = CliRunner()


def test_train_saves_the_model_evaluate_measures(trained, tmp_path):
    manifest = json.loads((trained.model_dir / "cascade.json").read_text())
    deep_file = trained.model_dir / manifest["deep"]["file"]
    deployed_digest = hashlib.sha256(deep_file.read_bytes()).hexdigest()  # the saved bytes, hashed here
    assert manifest["candidate_threshold"] == 0.0  # stage 1 passes every event: one model scores all
    names = manifest["graph_feature_names"]  # our one-hop graph features, then GFP's
    assert names[: len(ONE_HOP_GRAPH_FEATURES)] == list(ONE_HOP_GRAPH_FEATURES)
    gfp = names[len(ONE_HOP_GRAPH_FEATURES) :]
    assert gfp and all(n.startswith("gfp_") for n in gfp)

    out = tmp_path / "eval"
    result = runner.invoke(cli.app, ["evaluate", str(trained.csv), "--seeds", "3", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    stem = trained.csv.stem
    evaluation = json.loads((out / stem / "seed-3" / "evaluation.json").read_text())
    measured = evaluation["models"][DEPLOYED_MODEL]
    assert measured["digest"].removeprefix("sha256:") == deployed_digest
    assert measured["threshold"] == manifest["alert_threshold"]
    # and the figures train reports for it are the measured ones
    report = json.loads((trained.model_dir / "training_report.json").read_text())
    assert report["deployed_model"] == DEPLOYED_MODEL
    assert report["evaluation"]["models"][DEPLOYED_MODEL]["digest"] == measured["digest"]


def test_the_deep_path_scores_every_event_on_its_graph_rows(model_dir, tmp_path, monkeypatch):
    """A run's alerts carry the model's inputs: their GFP columns are the rows GFP gives the run's
    events fed in event order (computed here from the file), their one-hop columns what
    ``graph_features`` gives on a graph of the file's events (the run's graph is ``memory:``: no
    history), and every event went to the deep path."""
    from reports.signing import generate_key_file

    gen = runner.invoke(cli.app, ["generate", "--out", str(tmp_path), "--accounts", "150", "--days", "2",
                                  "--seed", "11", "--name", "live", "--laundering-rate", "0.03"])
    assert gen.exit_code == 0, gen.output
    csv_path = tmp_path / "live_Trans.csv"
    generate_key_file(tmp_path / "signing.pem")
    monkeypatch.setenv("AUDITFLOW_SIGNING_KEY_FILE", str(tmp_path / "signing.pem"))
    monkeypatch.setenv("AUDITFLOW_GRAPH_URL", "memory:")
    run = runner.invoke(cli.app, ["run", str(csv_path), "--model-dir", str(model_dir), "--out", str(tmp_path / "run"),
                                  "--max-reports", "1"])
    assert run.exit_code == 0, run.output + repr(run.exception)
    events = [e for e in read_transactions(csv_path) if isinstance(e, TransactionEvent)]
    fast = (tmp_path / "run" / "fast_alerts.jsonl").read_text().splitlines()
    assert len(fast) == len(events)  # every event reached the deep path

    cascade = Cascade.load(model_dir)
    ordered = sorted(events, key=lambda e: (e.timestamp, e.source_offset, e.event_id))
    names, matrix = gfp_feature_matrix(ordered)
    row_of = {e.event_id: i for i, e in enumerate(ordered)}
    alerts = [json.loads(x) for x in (tmp_path / "run" / "alerts.jsonl").read_text().splitlines()]
    assert alerts, "the model alerted on nothing: nothing to compare"
    gfp = [n for n in cascade.graph_feature_names if n.startswith("gfp_")]
    cols = [names.index(n) for n in gfp]
    graph = NetworkxGraphStore()
    graph.add_transactions(events)
    by_id = {e.event_id: e for e in events}
    for a in alerts:
        feats = dict(a["features"])
        assert [feats[n] for n in gfp] == matrix[row_of[a["event"]["event_id"]], cols].tolist()
        mine = graph_features(graph, by_id[a["event"]["event_id"]])
        assert {n: feats[n] for n in ONE_HOP_GRAPH_FEATURES} == {n: mine[n] for n in ONE_HOP_GRAPH_FEATURES}
        assert a["score"] >= cascade.alert_threshold
    assert any(dict(a["features"])["g_rcv_in_cp_24h"] > 0 for a in alerts)  # the run's graph counts
