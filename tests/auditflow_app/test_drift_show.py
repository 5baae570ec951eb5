"""``auditflow drift show``: the latest window's table per segment and a PNG chart of a feature,
from drift records scored here on a stream whose Cash amounts shift (worked out by hand from the
records themselves), and clear errors for a missing file, an unknown feature or a bad metric."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from auditflow_app import cli
from auditflow import drift as D
from pipelines import drift as P

runner = CliRunner()
HOUR_MS = 3_600_000
FORMATS = ("ACH", "Wire", "Cash")


def rows(hours, seed, *, shift_from=None, start=0):
    rng = np.random.default_rng(seed)
    out = []
    for h in range(start, start + hours):
        for _ in range(1200):
            fmt = FORMATS[rng.choice(3, p=[0.5, 0.2, 0.3])]
            amount = float(np.exp(rng.normal(6.0, 1.0))) * (3.0 if shift_from is not None and h >= shift_from and fmt == "Cash" else 1.0)
            out.append(P.Row(h * HOUR_MS + int(rng.integers(HOUR_MS)),
                             {"payment_format": fmt, "currency": "USD", "bank": f"b{int(rng.integers(3))}"},
                             {"amount_usd": amount, P.SCORE: float(rng.beta(1, 20))}))
    return out


def test_show_prints_the_latest_window_and_charts_a_feature(tmp_path):
    profile = P.build_profile(rows(24, 1), ("amount_usd", P.SCORE), categorical=D.SEGMENT_DIMENSIONS)
    live = rows(6, 2, shift_from=1000 + 5, start=1000)  # the shift starts on the last window
    recs = P.score_windows(profile, P.window_counts(profile, live, 60), 60)
    history = [[r for r in recs if r.window_start == p] for p in sorted({r.window_start for r in recs})]
    alerts = P.rule_alerts([D.DriftRule("now", "psi")], history)
    (tmp_path / "drift_scores.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs))
    (tmp_path / "drift_alerts.jsonl").write_text("".join(json.dumps(a.to_dict()) + "\n" for a in alerts))
    args = ["drift", "show", "--records", str(tmp_path / "drift_scores.jsonl"), "--alerts",
            str(tmp_path / "drift_alerts.jsonl"), "--feature", "amount_usd", "--segment", "payment_format=Cash",
            "--chart", str(tmp_path / "cash.png"), "--json"]
    res = runner.invoke(cli.app, args)
    assert res.exit_code == 0, res.output + repr(res.exception)
    out = json.loads(res.output)
    last = max(r.window_start for r in recs)
    assert out["window_start"].startswith("1970-02-11T")  # hour 1005 since the epoch
    segs = {s["segment"]: s for s in out["segments"]}
    mine = [r for r in recs if r.window_start == last and r.metric == "psi"]
    assert set(segs) == {r.segment for r in mine}
    cash = [r for r in mine if r.segment == "payment_format=Cash"]
    assert segs["payment_format=Cash"]["status"] == "drift" and segs["payment_format=Cash"]["top_feature"] == "amount_usd"
    assert segs["payment_format=Cash"]["drift"] == sum(r.status == "drift" for r in cash) >= 1
    for seg in ("payment_format=ACH", "payment_format=Wire"):
        assert segs[seg]["drift"] == 0 and segs[seg]["status"] in ("ok", "warn")
    assert out["alerts"] and all(a["window_start"] == last for a in out["alerts"])
    assert {a["group"]["segment"] for a in out["alerts"]} >= {"payment_format=Cash"}
    png = (tmp_path / "cash.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    res = runner.invoke(cli.app, args[:-1])  # the rich table
    assert res.exit_code == 0 and "payment_format=Cash" in res.output and "drift" in res.output


def test_show_errors_name_what_is_wrong(tmp_path):
    res = runner.invoke(cli.app, ["drift", "show", "--records", str(tmp_path / "none.jsonl")])
    assert res.exit_code == 2 and "no drift records" in res.output
    profile = P.build_profile(rows(3, 1), ("amount_usd",), categorical=D.SEGMENT_DIMENSIONS)
    recs = P.score_windows(profile, P.window_counts(profile, rows(2, 3, start=10), 60), 60)
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs))
    res = runner.invoke(cli.app, ["drift", "show", "--records", str(f), "--feature", "nope"])
    assert res.exit_code == 2 and "'nope'" in res.output
    res = runner.invoke(cli.app, ["drift", "show", "--records", str(f), "--metric", "xx"])
    assert res.exit_code == 2 and "metric 'xx'" in res.output


def _rec(start_h, feature, segment, status, value, *, significant=True, n=500):
    return {"schema": P.RECORD_SCHEMA, "window_start": start_h * HOUR_MS, "window_end": (start_h + 1) * HOUR_MS,
            "feature": feature, "segment": segment, "metric": "psi", "status": status, "value": value,
            "drift_threshold": 0.1, "warn_threshold": 0.05, "significant": significant, "n_cur": n,
            "reference_id": "ref-x"}


def test_an_alert_report_gets_its_segments_drift_from_the_last_closed_window():
    from datetime import datetime, timedelta

    from pipelines.drift_views import alert_drift_status
    from auditflow.money import Money
    from auditflow.records import AccountRef, TransactionEvent

    recs = [_rec(10, "score", "__all__", "ok", 0.01), _rec(10, "amount_usd", "__all__", "ok", 0.02),
            _rec(10, "score", "payment_format=Cash", "drift", 0.4), _rec(10, "amount_usd", "payment_format=Cash", "drift", 0.9),
            _rec(10, "score", "currency=__other__", "warn", 0.07), _rec(10, "score", "bank=b1", "insufficient_data", 0.3, n=20),
            _rec(11, "score", "__all__", "drift", 5.0)]  # the window the alert falls in: not closed yet
    ev = TransactionEvent("tx-1", datetime(1970, 1, 1) + timedelta(hours=11, minutes=30), AccountRef("b1", "A1"),
                          AccountRef("b2", "A2"), Money("Yuan", 100), Money("Yuan", 100), "Cash", False, 3)
    got = {(d.measure.split(",")[0], "score" if "of the score" in d.measure else "inputs"): d
           for d in alert_drift_status(recs, ev)}
    assert got[("__all__", "score")].status == "ok" and got[("__all__", "score")].value == "0.0100"
    assert got[("payment_format=Cash", "score")].status == "drift"
    assert got[("payment_format=Cash", "inputs")].value == "2" and "amount_usd" in got[("payment_format=Cash", "inputs")].measure
    assert got[("currency=__other__", "score")].status == "warn"  # Yuan: not a kept currency
    assert got[("bank=b1", "inputs")].status == "insufficient_data"
    assert all("10:00..11:00" in d.measure for d in got.values())
    early = _at_hour(ev, 10)
    assert alert_drift_status(recs, early) == () and alert_drift_status([], ev) is None


def _at_hour(ev, hours):
    import dataclasses
    from datetime import datetime, timedelta

    return dataclasses.replace(ev, timestamp=datetime(1970, 1, 1) + timedelta(hours=hours, minutes=5))


def test_a_period_summary_lists_the_segments_that_drifted_in_it():
    from datetime import datetime

    from pipelines.drift_views import period_drift_figures

    recs = [_rec(h, "score", "__all__", "ok", 0.01) for h in range(10, 14)]
    recs += [_rec(11, "amount_usd", "payment_format=Cash", "drift", 0.9), _rec(12, "amount_usd", "payment_format=Cash", "drift", 0.5),
             _rec(12, "score", "payment_format=ACH", "drift", 0.3, significant=False),  # not after BH: not listed
             _rec(15, "score", "bank=b2", "drift", 0.8)]  # outside the period
    figs = period_drift_figures(recs, datetime(1970, 1, 1, 10), datetime(1970, 1, 1, 14))
    assert [f.status for f in figs] == ["drift", "ok"]
    assert figs[0].measure.startswith("payment_format=Cash: 2 of 4 windows drifting; farthest amount_usd")
    assert figs[0].value == 0.9 and figs[1].measure.startswith("__all__: 0 of 4 windows")
    assert period_drift_figures(recs, datetime(1970, 1, 2), datetime(1970, 1, 3)) == []
