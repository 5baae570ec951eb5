"""Drift on the demo, through the real CLI: the live set continues its history and the job starts
warm, so on data that does not drift no drift alert fires while the windows are judged; with
``--drift`` (from 09:00 of the second live day every Cheque payment arrives as ACH) one fires
within 3 windows.

Two runs of ``auditflow demo`` at the demo's size (2,000 accounts, the default seed; two live days,
no PDFs), the one with ``--drift`` on the same history, so the same model and reference. What is
asserted is read from the files they wrote: the drift records and alerts, the live CSV itself
(the shift's time and what it did, found by comparing the two runs' rows, not taken from the demo),
and the reference's own file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from auditflow.drift import JUDGED
from auditflow.records import TransactionEvent, epoch_millis
from ingest.amlworld import read_transactions

pytestmark = pytest.mark.flink

ACCOUNTS, DAYS, SEED = 2000, 2, 7
HOUR_MS = 3_600_000


def _demo(out: Path, *extra: str) -> Path:
    cmd = [sys.executable, "-m", "auditflow_app.cli", "demo", "--out", str(out), "--accounts", str(ACCOUNTS),
           "--days", str(DAYS), "--seed", str(SEED), "--max-reports", "0", *extra]
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "JAVA_HOME", "TMPDIR") if k in os.environ}
    env["AUDITFLOW_NARRATOR_TOP"] = "0"
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (out / "demo_stdout.txt").write_text(proc.stdout)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("demo-drift")
    return {"plain": _demo(root / "plain"), "drift": _demo(root / "drift", "--drift")}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _events(out: Path, name: str) -> list[TransactionEvent]:
    return [e for e in read_transactions(out / "data" / f"{name}_Trans.csv") if isinstance(e, TransactionEvent)]


def test_live_continues_the_history(runs) -> None:
    out = runs["plain"]
    history, live = _events(out, "history"), _events(out, "live")
    assert max(e.timestamp for e in history) < min(e.timestamp for e in live)
    accounts = {e.sender for e in history} | {e.receiver for e in history}
    live_accounts = {e.sender for e in live} | {e.receiver for e in live}
    assert len(live_accounts - accounts) <= 0.02 * len(live_accounts)
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["warmup_events"] > 0 and summary["events_in"] == len(live)


def test_the_demo_without_drift_raises_no_drift_alert_on_judged_windows(runs) -> None:
    out = runs["plain"]
    records = _lines(out / "drift_scores.jsonl")
    windows = {r["window_start"] for r in records}
    judged = {r["window_start"] for r in records if r["status"] in JUDGED}
    assert len(windows) == 24 * DAYS and len(judged) >= 24  # the windows were judged, not skipped
    assert _lines(out / "drift_alerts.jsonl") == []
    assert ", 0 drift alerts" in (out / "demo_stdout.txt").read_text().replace("\n", " ")


def test_the_demo_with_drift_raises_one_within_three_windows_of_the_stated_shift(runs) -> None:
    plain, drift = _events(runs["plain"], "live"), _events(runs["drift"], "live")
    assert len(plain) == len(drift)
    moved = [(a, b) for a, b in zip(plain, drift, strict=True) if a.payment_format != b.payment_format]
    assert moved and {(a.payment_format, b.payment_format) for a, b in moved} == {("Cheque", "ACH")}
    assert all((a.timestamp, a.amount_paid) == (b.timestamp, b.amount_paid) for a, b in zip(plain, drift))
    since = min(a.timestamp for a, _ in moved)
    assert since.hour == 9 and since.date() > min(e.timestamp for e in plain).date()  # the second live day
    assert not [b for b in drift if b.payment_format == "Cheque" and b.timestamp >= since]
    stated = f"from {since:%Y-%m-%d} 09:00 every Cheque payment arrives as ACH"
    assert stated in (runs["drift"] / "demo_stdout.txt").read_text().replace("\n", " ")
    alerts = _lines(runs["drift"] / "drift_alerts.jsonl")
    shift_ms = epoch_millis(since.replace(minute=0))
    assert alerts and all(a["window_start"] >= shift_ms for a in alerts)  # nothing before the shift
    first = min(a["window_start"] for a in alerts)
    assert (first - shift_ms) // HOUR_MS <= 2  # the shift's first, second or third window


def test_the_reference_is_the_history_before_live_and_judges_what_it_spans(runs) -> None:
    out = runs["plain"]
    (ref_file,) = (out / "drift").glob("ref-*.json")
    ref = json.loads(ref_file.read_text())
    live_start = min(e.timestamp for e in _events(out, "live"))
    assert datetime.fromisoformat(ref["source"]["to"]) == live_start.replace(hour=0, minute=0)
    assert (live_start - datetime.fromisoformat(ref["source"]["from"])).days == 14
    assert ref["window_minutes"] == 60
    assert "amount_usd" in ref["features"] and "snd_out_n_24h" in ref["features"]
    assert not {f for f in ref["features"] if f.endswith(("_7d", "_n_life", "age_min"))}
