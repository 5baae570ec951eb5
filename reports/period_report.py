"""Compliance summary of a period (daily, weekly, or any range): one PDF and its evidence.

:func:`prepare_period_report` summarises the alerts whose event time falls in the period:
alerts by typology and by tier (the deep path's, :data:`auditflow.tiers.TIERS`, as the run set
them), what the processed data held of the period (:mod:`reports.coverage`), latency per tier and
the drift table and chart when such figures are given, the top accounts, and the open items
(alerts whose report failed or was never written). Beside the PDF, ``<stem>.alerts.json.gz``
holds the alert records it counted (RFC 8785 lines, gzip without name or time), so every figure
can be recomputed. Pure and deterministic: the same alerts give the same bytes; publish it with
:meth:`reports.store.ReportStore.publish` (kind ``period``), which keeps it write-once.
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import reportlab
from reportlab.graphics.shapes import Drawing, Rect, String
from reportlab.lib import colors
from reportlab.lib.units import mm
from reportlab.platypus import KeepTogether, Paragraph, Spacer

from auditflow.canonical import canonical_json, canonical_sha256
from auditflow.records import Alert, ReportManifest
from auditflow.tiers import TIERS
from reports._fonts import SANS
from reports._pdf import CONTENT_W, PDF_CREATION_DATE, STYLES, _grid_table, _key_value_table, _p, build_pdf
from reports.coverage import Seen
from reports.manifest import SIGNATURE_ALGORITHM
from reports.names import period_file_stem
from reports.schedule import Period

TOP_ACCOUNTS = 10
BAR = colors.HexColor("#2e6da4")


@dataclass(frozen=True, slots=True)
class PeriodAlert:
    """One alert as a period report counts it: the alert, the typologies matched, and its
    report (the PDF's name) or why it failed; neither: not reported yet."""

    alert: Alert
    typologies: tuple[str, ...] = ()
    report: str | None = None
    report_error: str | None = None
    deep_ms: float | None = None  # its deep path's time as the run recorded it (None: not recorded)
    tier: str = ""  # its deep-path tier as the run set it ("": not recorded)
    latency_ms: float | None = None  # from its event's arrival at the job to its report (None: not recorded)

    def to_dict(self) -> dict:
        return {"alert": self.alert.to_dict(), "typologies": list(self.typologies), "report": self.report,
                "report_error": self.report_error, "deep_ms": self.deep_ms, "tier": self.tier,
                "latency_ms": self.latency_ms}


@dataclass(frozen=True, slots=True)
class TierLatency:
    """Latency of one tier (``fast path``, ``deep path``...) over the period, in milliseconds."""

    tier: str
    count: int
    p50_ms: float
    p95_ms: float


@dataclass(frozen=True, slots=True)
class DriftFigure:
    """A drift measure over the period (feature, segment, window), its value and status."""

    measure: str
    value: float
    status: str


def recorded_latency(alerts: Sequence[PeriodAlert]) -> list[TierLatency]:
    """The tiers' latency over these alerts from what their run recorded: from each event's
    arrival at the job to its report written (the clock ``deep_path_metrics.prom`` observes), per
    tier in :data:`auditflow.tiers.TIERS` order, p50/p95 as numpy's linear percentiles, in ms."""
    from auditflow.tiers import TIERS

    by_tier: dict[str, list[float]] = {}
    for a in alerts:
        if a.latency_ms is not None:
            by_tier.setdefault(a.tier or "untiered", []).append(a.latency_ms)
    order = [t for t in TIERS if t in by_tier] + sorted(t for t in by_tier if t not in TIERS)
    out = []
    for tier in order:
        p50, p95 = (round(float(v), 3) for v in np.percentile(np.asarray(by_tier[tier], dtype=np.float64), [50, 95]))
        out.append(TierLatency(tier, len(by_tier[tier]), p50, p95))
    return out


def in_period(alerts: Sequence[PeriodAlert], period: Period) -> list[PeriodAlert]:
    """The alerts whose event time is in the period, by event time then alert id."""
    return sorted((a for a in alerts if a.alert.event.timestamp in period),
                  key=lambda a: (a.alert.event.timestamp, a.alert.alert_id))


def alerts_file_bytes(alerts: Sequence[PeriodAlert]) -> bytes:
    return gzip.compress(b"".join(canonical_json(a.to_dict()) + b"\n" for a in alerts), compresslevel=9, mtime=0)


# ----------------------------------------------------------------------------- figures


def typology_counts(alerts: Sequence[PeriodAlert]) -> list[tuple[str, int]]:
    """Alerts per typology (an alert counts once under each typology it matched; ``none``: none
    matched), most first, then by name."""
    c = Counter(t for a in alerts for t in (a.typologies or ("none",)))
    return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))


def tier_counts(alerts: Sequence[PeriodAlert]) -> list[tuple[str, int]]:
    """Alerts per deep-path tier, most urgent first (and ``not recorded`` where some have none)."""
    c = Counter(a.tier or "not recorded" for a in alerts)
    return [(t, c.get(t, 0)) for t in TIERS] + ([("not recorded", c["not recorded"])] if c["not recorded"] else [])


def top_accounts(alerts: Sequence[PeriodAlert], n: int = TOP_ACCOUNTS) -> list[tuple[str, int, float]]:
    """(account, alerts, highest score) of the alerted accounts, most alerts first."""
    per: dict[str, list[float]] = {}
    for a in alerts:
        per.setdefault(a.alert.account.node_id, []).append(a.alert.score)
    rows = [(acct, len(s), max(s)) for acct, s in per.items()]
    return sorted(rows, key=lambda r: (-r[1], -r[2], r[0]))[:n]


def open_items(alerts: Sequence[PeriodAlert]) -> list[tuple[str, str]]:
    """(alert id, what is open): a report that failed, or none written yet."""
    out = []
    for a in alerts:
        if a.report_error:
            out.append((a.alert.alert_id, f"report failed: {a.report_error}"))
        elif not a.report:
            out.append((a.alert.alert_id, "no report written yet"))
    return out


def _bar_chart(rows: Sequence[tuple[str, float]], *, width: float, value_text=str) -> Drawing:
    bar_h, gap, label_w, value_w = 10.0, 3.0, 120.0, 50.0
    height = 6 + len(rows) * (bar_h + gap) + 4
    d = Drawing(width, height, initialFontName=SANS, initialFontSize=7)
    top = max((v for _, v in rows), default=0) or 1
    for i, (label, v) in enumerate(rows):
        y = height - 6 - (i + 1) * (bar_h + gap)
        d.add(String(label_w - 4, y + 2.5, label, fontName=SANS, fontSize=7, textAnchor="end"))
        w = (width - label_w - value_w) * max(v, 0) / top
        d.add(Rect(label_w, y, w, bar_h, fillColor=BAR, strokeColor=None))
        d.add(String(label_w + w + 3, y + 2.5, value_text(v), fontName=SANS, fontSize=7))
    return d


# ----------------------------------------------------------------------------- the report


def _counts_table(header: str, rows: Sequence[tuple[str, int]]) -> list:
    return [_grid_table([header, "Alerts"], [[_p(k), _p(f"{v:,}")] for k, v in rows],
                        [CONTENT_W - 30 * mm, 30 * mm])]


def _coverage_rows(seen: Seen | None) -> list[tuple[str, str, str]]:
    if seen is None:
        return [("Transfers in the run's data", "not recorded", "cell")]
    rows = [("Transfers in the run's data", f"{seen.transfers:,}", "cell")]
    if seen.first is not None and seen.last is not None:
        span = f"{seen.first:%Y-%m-%d %H:%M} and {seen.last:%Y-%m-%d %H:%M} UTC"
        rows.append(("First and last transfer", span, "cell"))
    gaps = "; ".join(f"{a:%Y-%m-%d %H:%M} to {b:%Y-%m-%d %H:%M}" for a, b in seen.gaps)
    rows.append(("Hours without any transfer", gaps or "none", "cell"))
    return rows


def render_period_pdf(period: Period, alerts: Sequence[PeriodAlert], manifest: ReportManifest, *,
                      latency: Sequence[TierLatency] | None = None,
                      drift: Sequence[DriftFigure] | None = None, seen: Seen | None = None) -> bytes:
    title = f"Compliance summary: {period.schedule} {period.start:%Y-%m-%d %H:%M} to {period.end:%Y-%m-%d %H:%M}"
    reported = sum(1 for a in alerts if a.report)
    story: list = [
        Paragraph(title, STYLES["title"]),
        _p(f"Report {manifest.report_id}. Alerts whose event time is in [{period.start:%Y-%m-%d %H:%M}, "
           f"{period.end:%Y-%m-%d %H:%M}) UTC; the alert records counted are in the file beside this PDF.", "note"),
        Paragraph("Period", STYLES["h2"]),
        _key_value_table([
            ("Period id", period.period_id, "cell_mono"),
            ("Schedule", period.schedule, "cell"),
            ("Alerts", f"{len(alerts):,} ({reported:,} with a report)", "cell"),
            *_coverage_rows(seen),
            ("Code version", manifest.code_version, "cell_mono"),
        ]),
        Paragraph("Alerts by typology", STYLES["h2"]),
    ]
    by_typ = typology_counts(alerts)
    if by_typ:
        story += _counts_table("Typology", by_typ)
        story += [Spacer(1, 4), _bar_chart([(k, float(v)) for k, v in by_typ], width=CONTENT_W,
                                           value_text=lambda v: f"{int(v):,}")]
    else:
        n = f"{seen.transfers:,} transfers in the run's data" if seen is not None else "transfers not recorded"
        story.append(_p(f"No alerts in this period ({n}).", "body"))
    story.append(Paragraph("Alerts by tier", STYLES["h2"]))
    story += _counts_table("Tier", tier_counts(alerts)) + [
        _p("The deep path's tiers as the run set them (AUDITFLOW_TIER_CRITICAL_SCORE and _NORMAL_SCORE): the one "
           "severity scheme of alerts, cases and these summaries.", "note")]

    story.append(Paragraph("Latency by tier", STYLES["h2"]))
    if latency:
        story.append(_grid_table(["Tier", "Count", "p50 (ms)", "p95 (ms)"],
                                 [[_p(t.tier), _p(f"{t.count:,}"), _p(f"{t.p50_ms:.1f}"), _p(f"{t.p95_ms:.1f}")]
                                  for t in latency], [CONTENT_W - 90 * mm, 30 * mm, 30 * mm, 30 * mm]))
        story.append(_p("From each event's arrival at the stream job to its report written (wall clock): the "
                        "clock of the run's deep_path_metrics.prom. In a file run it includes the rest of the job "
                        "and the queue before the report.", "note"))
    else:
        story.append(_p("No latency figures were recorded for this period.", "body"))

    story.append(Paragraph("Drift", STYLES["h2"]))
    if drift:
        story.append(_grid_table(["Measure (feature, segment, window)", "Value", "Status"],
                                 [[_p(d.measure), _p(repr(float(d.value))), _p(d.status)] for d in drift],
                                 [CONTENT_W - 60 * mm, 30 * mm, 30 * mm]))
        story += [Spacer(1, 4), KeepTogether([_p("Drift by measure", "caption"),
                                              _bar_chart([(d.measure[:28], d.value) for d in drift], width=CONTENT_W,
                                                         value_text=lambda v: f"{v:.3f}")])]
    else:
        story.append(_p("No drift figures were recorded for this period.", "body"))

    story.append(Paragraph("Top accounts", STYLES["h2"]))
    top = top_accounts(alerts)
    if top:
        story.append(_grid_table(["Account", "Alerts", "Highest score"],
                                 [[_p(a), _p(f"{n:,}"), _p(repr(s))] for a, n, s in top],
                                 [CONTENT_W - 70 * mm, 25 * mm, 45 * mm]))
    else:
        story.append(_p("No alerted accounts.", "body"))

    story.append(Paragraph("Open items", STYLES["h2"]))
    items = open_items(alerts)
    if items:
        story.append(_grid_table(["Alert", "Open"], [[_p(a, "cell_mono"), _p(w)] for a, w in items],
                                 [70 * mm, CONTENT_W - 70 * mm]))
    else:
        story.append(_p("None: every alert of the period has its report." if alerts else "None: no alert.", "body"))
    return build_pdf(story, title=title, subject=f"Period {period.period_id}",
                     keywords=[period.period_id, manifest.report_id],
                     footer_left=f"auditflow compliance summary  {period.period_id}", footer_right=manifest.report_id)


def prepare_period_report(period: Period, alerts: Sequence[PeriodAlert], *, code_version: str, seed: int,
                          latency: Sequence[TierLatency] | None = None,
                          drift: Sequence[DriftFigure] | None = None,
                          seen: Seen | None = None,
                          ) -> tuple[str, list[tuple[str, bytes]], ReportManifest]:
    """(stem, files, unsigned manifest) of the period's summary over the alerts in it. Without
    ``latency``, the latency the alerts' run recorded (:func:`recorded_latency`). ``seen``: what
    the processed data holds of the period (:meth:`reports.coverage.Coverage.within`), stated in
    the summary and signed in its manifest."""
    counted = in_period(alerts, period)
    if latency is None:
        latency = recorded_latency(counted)
    data = alerts_file_bytes(counted)
    content = {
        "period": [period.schedule, period.start.isoformat(), period.end.isoformat()],
        "alerts": canonical_sha256([a.to_dict() for a in counted]),
        "latency": [[t.tier, t.count, t.p50_ms, t.p95_ms] for t in latency or ()],
        "drift": [[d.measure, d.value, d.status] for d in drift or ()],
        "coverage": [list(kv) for kv in seen.to_extra()] if seen is not None else None,
        "code_version": code_version,
        "seed": seed,
    }
    models = sorted({a.alert.model_digest for a in counted})
    unsigned = ReportManifest(
        report_id="report-" + canonical_sha256(content)[:16],
        alert_id=period.period_id,
        files=(),
        input_sha256=content["alerts"],
        model_digest=",".join(models),
        trace_id="",
        code_version=code_version,
        seed=seed,
        extra=(
            ("period_start", period.start.isoformat()),
            ("period_end", period.end.isoformat()),
            ("schedule", period.schedule),
            ("alerts", str(len(counted))),
            *(seen.to_extra() if seen is not None else ()),
            ("renderer", f"reportlab {reportlab.Version}"),
            ("pdf_creation_date", PDF_CREATION_DATE),
            ("signature_algorithm", SIGNATURE_ALGORITHM),
        ),
        kind="period",
    )
    pdf = render_period_pdf(period, counted, unsigned, latency=latency, drift=drift, seen=seen)
    return period_file_stem(period.period_id), [(".pdf", pdf), (".alerts.json.gz", data)], unsigned
