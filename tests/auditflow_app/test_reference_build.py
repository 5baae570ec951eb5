"""``auditflow reference build``: the frozen drift reference of a time range of a file, checked
against what the file says (read independently) and against RFC 8785 and SHA-256 themselves."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

import numpy as np
import rfc8785
from typer.testing import CliRunner

from auditflow_app import cli
from auditflow import drift as D
from auditflow.money import usd_cents
from auditflow.records import TransactionEvent
from ingest.amlworld import read_transactions

runner = CliRunner()


def test_reference_build_freezes_the_window_of_the_file(history, model_dir, tmp_path):
    _, csv_path = history
    events = [e for e in read_transactions(csv_path) if isinstance(e, TransactionEvent)]
    start, end = datetime(2022, 9, 1, 12), datetime(2022, 9, 2, 12)
    inside = [e for e in events if start <= e.timestamp < end]
    assert 0 < len(inside) < len(events)
    args = ["reference", "build", "--data", str(csv_path), "--from", "2022-09-01T12:00", "--to", "2022-09-02T12:00",
            "--model-dir", str(model_dir), "--out", str(tmp_path / "ref"), "--json"]
    res = runner.invoke(cli.app, args)
    assert res.exit_code == 0, res.output + repr(res.exception)
    out = json.loads(res.output)
    body = (tmp_path / "ref" / f"{out['reference_id']}.json").read_bytes()
    assert out["reference_id"] == "ref-" + hashlib.sha256(body).hexdigest()[:16]
    doc = json.loads(body)
    assert rfc8785.dumps(doc) == body  # canonical JSON
    assert doc["n"] == out["events"] == len(inside)
    assert doc["model_version"] == out["model_version"] and doc["source"]["sha256"] == hashlib.sha256(
        csv_path.read_bytes()).hexdigest()
    # the amount's bins: the quantiles numpy gives of the window's amounts in US dollars
    amounts = np.array([usd_cents(e.amount_paid) / 100 for e in inside])
    assert doc["edges"]["amount_usd"] == sorted({float(q) for q in np.quantile(amounts, np.linspace(0, 1, D.DEFAULT_BINS + 1))})
    for feature in ("amount_usd", "score"):
        assert sum(doc["counts"][feature][D.ALL_SEGMENT]) == len(inside)
    # a day judges what looks back an hour, not what looks back a day or more (it spans one such span)
    assert {"amount_usd", "snd_out_n_1h", "rcv_in_usd_1h"} <= set(doc["features"])
    assert not [f for f in doc["features"] if f.endswith(("_24h", "_7d", "n_life", "age_min", "gap_min"))]
    assert doc["window_minutes"] == 60 and all(v >= 1 for seg in doc["dispersion"].values() for v in seg.values())
    # segments: every payment format of the window (fewer than the cap), most frequent first
    formats = [f for f, _ in sorted({e.payment_format: sum(x.payment_format == e.payment_format for x in inside)
                                     for e in inside}.items(), key=lambda kv: (-kv[1], kv[0]))]
    assert doc["segments"]["payment_format"] == formats
    assert sum(sum(doc["counts"]["amount_usd"][f"payment_format={f}"]) for f in formats) == len(inside)
    # the same window again: the same file, byte for byte
    again = runner.invoke(cli.app, args)
    assert again.exit_code == 0 and json.loads(again.output)["reference_id"] == out["reference_id"]
    assert (tmp_path / "ref" / f"{out['reference_id']}.json").read_bytes() == body


def test_an_empty_or_inverted_window_is_refused_clearly(history, model_dir, tmp_path):
    _, csv_path = history
    base = ["reference", "build", "--data", str(csv_path), "--model-dir", str(model_dir), "--out", str(tmp_path)]
    def said(*window: str) -> str:
        res = runner.invoke(cli.app, [*base, "--from", window[0], "--to", window[1]])
        assert res.exit_code == 2, res.output
        return " ".join(res.output.split())  # the console wraps long lines

    assert "no events" in said("2030-01-01", "2030-01-02")
    assert "FROM must be before TO" in said("2022-09-02", "2022-09-01")
    assert "--from 'yesterday'" in said("yesterday", "2022-09-01")


def test_re_sampling_after_a_drift_alert_freezes_the_windows_it_fired_on(history, model_dir, tmp_path, monkeypatch):
    _, csv_path = history
    monkeypatch.setenv("AUDITFLOW_OUT_DIR", str(tmp_path))
    start, end = datetime(2022, 9, 1, 12), datetime(2022, 9, 2, 12)
    ms = lambda t: int((t - datetime(1970, 1, 1)).total_seconds() * 1000)  # noqa: E731
    alert = {"schema": "auditflow.drift_alert/1", "alert_id": "drift-abc", "action": "resample_reference",
             "since": ms(start), "window_start": ms(end) - 3_600_000, "window_end": ms(end)}
    (tmp_path / "drift_alerts.jsonl").write_text(json.dumps(alert) + "\n")
    base = ["reference", "build", "--data", str(csv_path), "--model-dir", str(model_dir), "--out", str(tmp_path / "r"), "--json"]
    by_alert = runner.invoke(cli.app, [*base, "--from-alert", "drift-abc"])
    by_range = runner.invoke(cli.app, [*base, "--from", "2022-09-01T12:00", "--to", "2022-09-02T12:00"])
    assert by_alert.exit_code == 0 and by_range.exit_code == 0, by_alert.output + by_range.output
    assert json.loads(by_alert.output)["reference_id"] == json.loads(by_range.output)["reference_id"]
    res = runner.invoke(cli.app, [*base, "--from-alert", "drift-nope"])
    assert res.exit_code == 2 and "'drift-nope'" in res.output
    res = runner.invoke(cli.app, [*base, "--from-alert", "drift-abc", "--from", "2022-09-01"])
    assert res.exit_code == 2 and "--from-alert" in res.output
