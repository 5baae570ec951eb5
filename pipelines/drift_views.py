"""Views of the drift records a stream job wrote (``drift_scores.jsonl``, ``drift_alerts.jsonl``;
records of :class:`pipelines.drift.DriftRecord`, alerts of :class:`pipelines.drift.DriftAlert`, as
dicts): the latest window per segment and a feature's series with its chart (``auditflow drift
show``), an alert's segments at alert time for its report, a period's drift for its compliance
summary, and the event-time range a drift alert fired on (to re-sample the reference from).

Apart from the stream job's own module (:mod:`pipelines.drift`), which the job ships to its
workers: these only read what it wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from auditflow.jsonlines import read_json_lines
from auditflow.records import TransactionEvent, epoch_millis


@dataclass(frozen=True)
class DriftSegmentRow:
    """One segment in a drift window: how many features are in each status, and the farthest one."""

    segment: str
    status: str  # the worst status of its features (drift > warn > ok; else why none is judged)
    drift: int
    warn: int
    judged: int
    top_feature: str
    top_value: float
    top_threshold: float
    n_cur: int


@dataclass(frozen=True)
class DriftView:
    """``auditflow drift show``: the latest window's segments, one metric, and the alerts on it."""

    metric: str
    window_start: datetime | None
    window_end: datetime | None
    reference_id: str
    rows: list[DriftSegmentRow]
    alerts: list[dict]
    windows: int  # windows in the input


_STATUS_RANK = {s: i for i, s in enumerate(("drift", "warn", "ok", "insufficient_data", "constant", "empty_window"))}


def read_drift_records(path: str | Path) -> list[dict]:
    """Drift records (or alerts) from a JSON-lines file (``drift_scores.jsonl`` of a run)."""
    return read_json_lines(path)


def drift_view(records: Sequence[dict], alerts: Sequence[dict] = (), *, metric: str = "psi",
               at: datetime | None = None) -> DriftView:
    """The latest window (or the one holding ``at``) of ``records``: per segment, the worst
    status of its features on ``metric``, counts, and the feature farthest beyond its threshold."""
    from auditflow.drift import METRICS

    if metric not in METRICS:
        raise ValueError(f"metric {metric!r}: expected one of {', '.join(METRICS)}")
    mine = [r for r in records if r.get("metric") == metric]
    starts = sorted({r["window_start"] for r in mine})
    if not starts:
        return DriftView(metric, None, None, "", [], [], 0)
    if at is None:
        start = starts[-1]
    else:
        ms = int(at.replace(tzinfo=timezone.utc).timestamp() * 1000)
        inside = [s for s in starts if s <= ms]
        if not inside:
            raise ValueError(f"no drift window at or before {at:%Y-%m-%d %H:%M}")
        start = inside[-1]
    window = [r for r in mine if r["window_start"] == start]
    rows = []
    for seg in sorted({r["segment"] for r in window}):
        rs = [r for r in window if r["segment"] == seg]
        status = min((r["status"] for r in rs), key=lambda s: _STATUS_RANK.get(s, 99))
        judged = [r for r in rs if r["status"] in ("ok", "warn", "drift")]
        top = max(judged or rs, key=lambda r: (r["value"] - r["drift_threshold"], r["feature"]))
        rows.append(DriftSegmentRow(seg, status, sum(r["status"] == "drift" for r in rs),
                                    sum(r["status"] == "warn" for r in rs), len(judged), top["feature"],
                                    top["value"], top["drift_threshold"], max(r["n_cur"] for r in rs)))
    rows.sort(key=lambda r: (_STATUS_RANK.get(r.status, 99), r.segment))
    end = window[0]["window_end"]
    return DriftView(metric, _utc_ms(start), _utc_ms(end), window[0]["reference_id"], rows,
                     [a for a in alerts if a.get("window_start") == start], len(starts))


def _utc_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).replace(tzinfo=None)


def drift_series(records: Sequence[dict], feature: str, segment: str, metric: str = "psi") -> list[dict]:
    """One feature's records in one segment over time (by window start)."""
    out = sorted((r for r in records if r["feature"] == feature and r["segment"] == segment and r["metric"] == metric),
                 key=lambda r: r["window_start"])
    if not out:
        known = sorted({r["feature"] for r in records})
        raise ValueError(f"no drift records of feature {feature!r} in segment {segment!r} ({metric}); "
                         f"features: {', '.join(known[:12])}{' ...' if len(known) > 12 else ''}")
    return out


def drift_chart(series: Sequence[dict], path: str | Path, *, title: str) -> Path:
    """A PNG of a feature's drift over time: its value per window, the warn and drift thresholds
    it was judged against, windows that drifted marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [_utc_ms(r["window_start"]) for r in series]
    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=110)
    ax.plot(xs, [r["value"] for r in series], color="#1f4e79", marker="o", markersize=3, label=series[0]["metric"])
    judged = [(x, r) for x, r in zip(xs, series) if r["status"] in ("ok", "warn", "drift")]
    if judged:
        ax.step([x for x, _ in judged], [r["warn_threshold"] for _, r in judged], where="mid", color="#d39e00",
                linewidth=1, label="warn threshold")
        ax.step([x for x, _ in judged], [r["drift_threshold"] for _, r in judged], where="mid", color="#b22222",
                linewidth=1, label="drift threshold")
    hits = [(x, r["value"]) for x, r in zip(xs, series) if r["status"] == "drift"]
    if hits:
        ax.scatter([x for x, _ in hits], [v for _, v in hits], color="#b22222", zorder=3, s=18, label="drift")
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(series[0]["metric"])
    ax.legend(fontsize=8, loc="upper left")
    fig.autofmt_xdate()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)
    return path


@dataclass(frozen=True)
class DriftWindows:
    """One metric's drift records by window, ordered by window end: built once per run, looked
    up per alert (:func:`alert_drift_status`)."""

    ends: list[int]
    windows: list[list[dict]]

    @classmethod
    def of(cls, records: Sequence[dict], metric: str = "psi") -> DriftWindows:
        by_start: dict[int, list[dict]] = {}
        for r in records:
            if r["metric"] == metric:
                by_start.setdefault(r["window_start"], []).append(r)
        order = sorted(by_start.values(), key=lambda w: (w[0]["window_end"], w[0]["window_start"]))
        return cls([w[0]["window_end"] for w in order], order)

    def closed_at(self, ms: int) -> list[dict] | None:
        """The records of the last window that had ended at ``ms`` (None if none had)."""
        import bisect

        i = bisect.bisect_right(self.ends, ms)
        return self.windows[i - 1] if i else None


def alert_drift_status(records: Sequence[dict] | DriftWindows, event: TransactionEvent,
                       metric: str = "psi") -> tuple | None:
    """The drift of an alert's segments at alert time, for its report: from the last drift window
    that had closed when the transfer happened, per segment (all events, its payment format,
    currency and bank, ``__other__`` where the reference did not keep the value), the score's
    drift and how many monitored features drifted. None without drift records; () when no window
    had closed yet. ``records``: the run's drift records, or their :class:`DriftWindows`."""
    from reports.alert_report import DriftStatus

    index = records if isinstance(records, DriftWindows) else DriftWindows.of(records, metric)
    if not index.windows:
        return None
    window = index.closed_at(epoch_millis(event.timestamp))
    if not window:
        return ()
    start = window[0]["window_start"]
    names = {r["segment"] for r in window}
    wanted = ["__all__"]
    for dim, value in (("payment_format", event.payment_format), ("currency", event.amount_paid.currency),
                       ("bank", event.sender.bank)):
        seg = f"{dim}={value}"
        wanted.append(seg if seg in names else f"{dim}=__other__")
    span = f"{_utc_ms(start):%Y-%m-%d %H:%M}..{_utc_ms(window[0]['window_end']):%H:%M}"
    out = []
    for seg in wanted:
        rs = [r for r in window if r["segment"] == seg]
        if not rs:
            continue
        score = [r for r in rs if r["feature"] == "score"]
        drifted = sorted(r["feature"] for r in rs if r["status"] == "drift" and r["significant"])
        judged = sum(r["status"] in ("ok", "warn", "drift") for r in rs)
        if score:
            s = score[0]
            out.append(DriftStatus(f"{seg}, {span}: {metric} of the score (n={s['n_cur']})", f"{s['value']:.4f}",
                                   s["status"]))
        status = "drift" if drifted else ("ok" if judged else "insufficient_data")
        listed = ", ".join(drifted[:4]) + (" ..." if len(drifted) > 4 else "")
        out.append(DriftStatus(f"{seg}, {span}: inputs drifting (significant) of {judged} judged"
                               + (f": {listed}" if drifted else ""), str(len(drifted)), status))
    return tuple(out)


def period_drift_figures(records: Sequence[dict], start: datetime, end: datetime, metric: str = "psi",
                         limit: int = 20) -> list:
    """The drift of a period for its compliance summary: per segment with drift windows inside
    ``[start, end)`` (and all events always), how many windows drifted and its farthest feature;
    the worst first, at most ``limit`` rows."""
    from reports.period_report import DriftFigure

    lo, hi = epoch_millis(start), epoch_millis(end)
    inside = [r for r in records if r["metric"] == metric and lo <= r["window_start"] and r["window_end"] <= hi]
    if not inside:
        return []
    windows = len({r["window_start"] for r in inside})
    rows = []
    for seg in sorted({r["segment"] for r in inside}):
        rs = [r for r in inside if r["segment"] == seg]
        hit = [r for r in rs if r["status"] == "drift" and r["significant"]]
        if not hit and seg != "__all__":
            continue
        top = max(hit or rs, key=lambda r: (r["value"] - r["drift_threshold"], r["feature"]))
        n_hit = len({r["window_start"] for r in hit})
        rows.append((0 if hit else 1, seg, DriftFigure(
            f"{seg}: {n_hit} of {windows} windows drifting; farthest {top['feature']} ({metric})", top["value"],
            "drift" if hit else "ok")))
    rows.sort(key=lambda t: (t[0], t[1] != "__all__", t[1]))
    return [f for _, _, f in rows[:limit]]


def drift_alert_range(alerts_path: str | Path, alert_id: str) -> tuple[datetime, datetime]:
    """The event-time range a drift alert fired on (from the first window of its run to the end of
    the last): what ``reference build --from-alert`` re-samples the reference from."""
    path = Path(alerts_path)
    if not path.is_file():
        raise ValueError(f"no drift alerts at {path}")
    for a in read_drift_records(path):
        if a.get("alert_id") == alert_id:
            return _utc_ms(a["since"]), _utc_ms(a["window_end"])
    raise ValueError(f"drift alert {alert_id!r} is not in {path}")
