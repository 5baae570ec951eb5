"""Period compliance summaries: figures recomputed from the alert records, PDF text, bytes,
write-once publication and verify."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from dataclasses import replace
from datetime import datetime

import pytest
from pypdf import PdfReader

from reports.period_report import DriftFigure, PeriodAlert, TierLatency, prepare_period_report
from reports.schedule import Period
from reports.store import ReportStore
from reports.testing import KEYRING, SIGNER, alert_number
from reports.verify import verify_reports

DAY = Period("daily", datetime(2022, 9, 1), datetime(2022, 9, 2))


def alerts() -> list[PeriodAlert]:
    out = []
    scores = [0.97, 0.85, 0.7, 0.99, 0.81, 0.66]
    typs = [("fan-out",), ("fan-out", "cycle"), (), ("cycle",), ("fan-out",), ()]
    for i, (s, t) in enumerate(zip(scores, typs)):
        a = alert_number(i)
        hour = 3 * i  # six alerts on 2022-09-01, one more the next day
        a = replace(a, score=s, event=replace(a.event, timestamp=datetime(2022, 9, 1, hour, 5)))
        tier = "critical" if s >= 0.95 else "normal" if s >= 0.8 else "background"  # as a run's policy would set them
        out.append(PeriodAlert(a, t, None if i == 2 else f"{a.alert_id}.pdf", "LayoutError: too tall" if i == 5 else None,
                               tier=tier))
    nxt = alert_number(9)
    out.append(PeriodAlert(replace(nxt, event=replace(nxt.event, timestamp=datetime(2022, 9, 2, 0, 0))), ("stack",),
                           "x.pdf"))
    return out


def text_of(pdf: bytes) -> str:
    return " ".join(" ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf)).pages).split())


@pytest.fixture(scope="module")
def day():
    stem, files, manifest = prepare_period_report(DAY, alerts(), code_version="v", seed=7)
    return stem, dict(files), manifest


def test_counts_only_the_periods_alerts_and_ships_them(day):
    stem, files, manifest = day
    assert stem == "period-daily-2022-09-01" and manifest.kind == "period" and manifest.alert_id == "daily-2022-09-01"
    rows = [json.loads(line) for line in gzip.decompress(files[".alerts.json.gz"]).splitlines()]
    assert len(rows) == 6 and dict(manifest.extra)["alerts"] == "6"
    assert {r["alert"]["alert_id"] for r in rows} == {alert_number(i).alert_id for i in range(6)}


def test_pdf_figures_match_an_independent_count(day):
    text = text_of(day[1][".pdf"])
    period = [a for a in alerts() if DAY.start <= a.alert.event.timestamp < DAY.end]
    typ = Counter(t for a in period for t in (a.typologies or ("none",)))
    assert typ == {"fan-out": 3, "cycle": 2, "none": 2}
    assert "Typology Alerts fan-out 3 cycle 2 none 2" in text
    tiers = Counter(a.tier for a in period)
    assert tiers == {"critical": 2, "normal": 2, "background": 2}
    assert "Tier Alerts critical 2 normal 2 background 2" in text
    assert "6 (5 with a report)" in text
    assert "No latency figures were recorded" in text and "No drift figures were recorded" in text
    assert f"{alert_number(2).alert_id} no report written yet" in text
    assert f"{alert_number(5).alert_id} report failed: LayoutError: too tall" in text
    # every alert is on the same sender here: one top account with all six and the top score
    assert f"{alert_number(0).account.node_id} 6 0.99" in text


def test_latency_and_drift_appear_when_given():
    _, files, _ = prepare_period_report(DAY, alerts(), code_version="v", seed=7,
                                        latency=[TierLatency("fast path", 1200, 3.5, 9.25)],
                                        drift=[DriftFigure("amount_usd, Bitcoin, 24 h PSI", 0.31, "drift")])
    text = text_of(dict(files)[".pdf"])
    assert "fast path 1,200 3.5 9.2" in text  # 9.25 rounds half to even
    assert "amount_usd, Bitcoin, 24 h PSI 0.31 drift" in text and "Drift by measure" in text


def test_same_alerts_same_bytes_and_publishing_twice_is_one_entry(tmp_path, day):
    again = prepare_period_report(DAY, list(reversed(alerts())), code_version="v", seed=7)
    assert dict(again[1]) == day[1]  # the order the alerts come in does not matter
    store = ReportStore(tmp_path, SIGNER)
    first = store.publish(*prepare_period_report(DAY, alerts(), code_version="v", seed=7))
    second = store.publish(*prepare_period_report(DAY, alerts(), code_version="v", seed=7))
    assert (first.status, second.status) == ("written", "unchanged")
    assert [e.kind for e in store.log.entries()] == ["period_report"]
    store.finish()
    res = verify_reports(tmp_path, KEYRING)
    assert res.ok, res.findings
    (tmp_path / "period-daily-2022-09-01.alerts.json.gz").write_bytes(b"")
    assert any("period-daily-2022-09-01.alerts.json.gz" == f.item for f in verify_reports(tmp_path, KEYRING).findings)


def test_an_empty_period_is_a_report_too_and_states_what_the_data_held():
    from reports.coverage import Coverage

    period = Period("daily", datetime(2023, 1, 1), datetime(2023, 1, 2))
    times = [datetime(2023, 1, 1, h, 30) for h in (0, 1, 2, 9, 23)] + [datetime(2023, 1, 2, 0, 10)]
    seen = Coverage.of(times).within(period)
    _, files, manifest = prepare_period_report(period, alerts(), code_version="v", seed=7, seen=seen)
    text = " ".join(text_of(dict(files)[".pdf"]).split())
    assert "No alerts in this period (5 transfers in the run's data)." in text and "None: no alert." in text
    assert "First and last transfer 2023-01-01 00:30 and 2023-01-01 23:30 UTC" in text
    # the hours 03:00-09:00 and 10:00-23:00 held no transfer
    assert "2023-01-01 03:00 to 2023-01-01 09:00; 2023-01-01 10:00 to 2023-01-01 23:00" in text
    extra = dict(manifest.extra)
    assert (extra["alerts"], extra["transfers_in_data"], extra["gaps"]) == (
        "0", "5", "2023-01-01T03:00..2023-01-01T09:00;2023-01-01T10:00..2023-01-01T23:00")
    _, _, unstated = prepare_period_report(period, alerts(), code_version="v", seed=7)
    assert unstated.report_id != manifest.report_id  # what the data held is part of what is signed


def test_the_latency_the_run_recorded_is_summarised_per_period_and_tier():
    """The arrival-to-report latency each alert recorded (the metrics' clock), per tier; the deep
    path's own time (deep_ms) is not a latency and is not summarised as one."""
    import dataclasses

    import numpy as np

    recorded = [12.5, 40.0, 7.25, 110.0, 33.0, 18.0, 64.5]
    tiers = ["critical", "normal", "normal"]
    timed = [dataclasses.replace(a, latency_ms=recorded[i % len(recorded)], deep_ms=1.0, tier=tiers[i % 3])
             for i, a in enumerate(alerts())]
    _, files, _ = prepare_period_report(DAY, timed, code_version="v", seed=7)
    text = text_of(dict(files)[".pdf"])
    for tier in ("critical", "normal"):
        in_day = [a.latency_ms for a in timed if DAY.start <= a.alert.event.timestamp < DAY.end and a.tier == tier]
        # numpy's linear percentiles, the report's definition, kept to the microsecond, shown to 0.1 ms
        p50, p95 = (round(float(v), 3) for v in np.percentile(in_day, [50, 95]))
        assert f"{tier} {len(in_day)} {p50:.1f} {p95:.1f}" in text
    assert "deep path" not in text.split("Latency by tier")[1].split("arrival")[0]
    again = prepare_period_report(DAY, list(reversed(timed)), code_version="v", seed=7)
    assert dict(again[1]) == dict(files)  # recorded figures: the same bytes again
