"""Drift scores in the stream job: overhead, detection delay and false alarms, side by side with
dummy detectors.

    python bench/drift.py            # 30 days of 2,500 accounts (~340k events)
    python bench/drift.py --quick    # 30 days of 1,000 accounts (~135k events)

One generated stream (:func:`ingest.synthetic.generate`, 30 days), scored by a fixed linear
scorer (amount / 20,000: no training in the bench), run through the stream job
(:func:`pipelines.stream_job.run_wire_job`) three ways:

(a) **Overhead**: the same wire file with drift off and on (after one warm-up run of the job in
    the same process, which pays the JVM's class loading and JIT; runs then alternate,
    ``--repeat`` pairs; medians), ``overhead_ratio`` = job time with drift / without (the whole job, start-up
    included; ``events_per_s`` is the drift run's). Drift on as the product configures it: every
    model input and the score over all events, the score, the amount and the segment dimensions'
    own distributions within each segment (payment format, currency, bank; 20 kept per
    dimension), psi/js/kl, the default rule (psi drift, significant after Benjamini-Hochberg, on 3
    consecutive windows).
(b) **Detection**: the same stream with the amounts of one payment format (its second most
    frequent) multiplied by ``--shift`` from day 19; ``detection_delay_windows`` = windows from
    the first window after the shift starts to the first drift alert in that format's segment
    (0: that very window).
(c) **False alarms**: on the unshifted stream, ``false_alarm_rate`` = windows with any drift
    alert / windows scored, also per 10k events; and the share of judged records that drift.

Reference: days 8 to 14 (after the 7-day windows have filled), scored as the job would (the
plain-Python features, :mod:`pipelines.features`); windows of 12 hours, days 15 to 30 scored.
For (b) and (c) the monitored inputs are the transfer's own (amount, cross-currency, self
transfer, payment format, round amount), the score and the segment dimensions: the account-window
inputs (counts, sums, counterparties, gaps over 1 h / 24 h / 7 d, age, lifetime) depend on how
long the stream has run (a cold start fills them for weeks), so against any fixed reference
they drift in these generated streams for real, not by chance (their share of drifting records
with the product's configuration is printed as ``full_record_drift_rate``); the hour of day is
constant within a window shorter than a day.

The overhead also says how much of it is one-off: the calibrations (reference draws per feature,
segment and calibration size, a grid of two sizes per doubling, then cached for the rest of the
stream and scaled to each window's size), timed by scoring the
run's own panes again with a fresh scorer (``calibration_s``, ``overhead_ratio_warm``: the ratio
without them, what a longer stream tends to).

Dummy detectors that fire every k windows (k = 2, 5, 10) are scored on the same windows: an
alarm rate of 1/k and a delay of (k - 1) / 2 windows on average.

Last line: ``drift overhead_ratio=... detection_delay_windows=... false_alarm_rate=...
events_per_s=...`` plus the false alarms per 10k events, windows, sizes.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auditflow import drift as D  # noqa: E402
from auditflow.features import FEATURE_NAMES  # noqa: E402
from auditflow.money import Money  # noqa: E402
from auditflow.records import epoch_millis  # noqa: E402
from ingest.synthetic import generate  # noqa: E402
from pipelines import drift as P  # noqa: E402
from pipelines.features import iter_features  # noqa: E402
from pipelines.stream_job import StreamSpec, run_wire_job  # noqa: E402
from pipelines.testing import linear_scorer  # noqa: E402

DAYS = 30
REF_DAYS = (7, 14)  # [from, to) in days since the start
SCORED_FROM_DAY = 14
SHIFT_DAY = 21
WINDOW_MINUTES = 720
STATIONARY = ("amount_usd", "cross_currency", "self_transfer", "format", "round_amount")
START = datetime(2022, 9, 1)


def shifted(events, fmt: str, factor: int, since: datetime):
    """The events with the amounts of ``fmt`` transfers from ``since`` on multiplied (exact units)."""
    out = []
    for ev in events:
        if ev.payment_format == fmt and ev.timestamp >= since:
            ev = dataclasses.replace(ev, amount_paid=Money(ev.amount_paid.currency, ev.amount_paid.units * factor),
                                     amount_received=Money(ev.amount_received.currency, ev.amount_received.units * factor))
        out.append(ev)
    return out


def reference_rows(events) -> list:
    """The scored rows of the reference days, as the job computes them."""
    t0, t1 = START + timedelta(days=REF_DAYS[0]), START + timedelta(days=REF_DAYS[1])
    rows = []
    for ev, f in iter_features(e for e in events if e.timestamp < t1):
        if ev.timestamp >= t0:
            rows.append(P.Row(epoch_millis(ev.timestamp),
                              {"payment_format": ev.payment_format, "currency": ev.amount_paid.currency,
                               "bank": ev.sender.bank},
                              {**{n: float(f[n]) for n in FEATURE_NAMES}, P.SCORE: float(f["amount_usd"]) / 20_000.0}))
    return rows


def profile_of(rows, features) -> P.Profile:
    return P.build_profile(rows, features, categorical=D.SEGMENT_DIMENSIONS,
                           segment_features=(P.SCORE, "amount_usd", *D.SEGMENT_DIMENSIONS))


def write_wire(events, path: Path) -> Path:
    path.write_text("".join(e.to_wire() + "\n" for e in events))
    return path


def scored_windows(out) -> list[int]:
    first = epoch_millis(START + timedelta(days=SCORED_FROM_DAY))
    return sorted({r["window_start"] for r in out.drift_records if r["window_start"] >= first})


def calibration_seconds(profile: P.Profile, records: list[dict]) -> tuple[float, list]:
    """Seconds the run's calibrations take: its panes (rebuilt from the records' counts) scored
    by a fresh scorer, timing each calibration it draws (the first time a block is scored at a
    window size; later panes find it cached)."""
    layout = P.Layout.of(profile)
    counts, meta = {}, {}
    for r in records:
        counts[(r["window_start"], r["feature"], r["segment"])] = r["counts"]
        meta[r["window_start"]] = (r["events"], r["first_offset"], r["last_offset"])
    panes = [P.Pane(w, layout.flat(counts, w), *meta[w]) for w in sorted(meta)]
    scorer = P.PaneScorer(profile, WINDOW_MINUTES)
    draw, seen, spent = scorer._calibration, set(), [0.0]

    def timed(cell: int, n: int):
        if (cell, n) in seen:
            return draw(cell, n)
        t = time.perf_counter()
        got = draw(cell, n)
        spent[0] += time.perf_counter() - t
        seen.add((cell, n))
        return got

    scorer._calibration = timed
    for pane in panes:
        scorer.score(pane)
    return spent[0], panes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 accounts (~135k events)")
    ap.add_argument("--accounts", type=int, default=None)
    ap.add_argument("--shift", type=int, default=3, help="factor on the shifted format's amounts")
    ap.add_argument("--repeat", type=int, default=None, help="pairs of drift off/on runs for the overhead")
    a = ap.parse_args(argv)
    accounts = a.accounts or (1000 if a.quick else 2500)
    repeat = a.repeat or (2 if a.quick else 5)  # this machine is noisy: more pairs, a steadier median

    t = time.perf_counter()
    ds = generate(accounts=accounts, days=DAYS, laundering_rate=0.002, seed=41)
    events = sorted(ds.events, key=lambda e: (e.timestamp, e.source_offset))
    print(f"generated {len(events):,} events over {DAYS} days ({accounts:,} accounts) in {time.perf_counter() - t:.1f}s")
    t = time.perf_counter()
    rows = reference_rows(events)
    n_ref = len(rows)
    full, stationary = profile_of(rows, (*FEATURE_NAMES, P.SCORE)), profile_of(rows, (*STATIONARY, P.SCORE))
    for name, profile in (("product", full), ("stationary", stationary)):
        layout = P.Layout.of(profile)
        print(f"reference {profile.reference_id} ({name}): {n_ref:,} events of days {REF_DAYS[0] + 1}-{REF_DAYS[1]}, "
              f"{len(profile.features)} features, {sum(layout.segment_counts)} segments, {layout.size:,} counters")
    print(f"  ({time.perf_counter() - t:.1f}s)")
    formats = Counter(e.payment_format for e in events).most_common()
    fmt = formats[1][0]
    drift = P.DriftSpec(full, WINDOW_MINUTES)
    drift_s = P.DriftSpec(stationary, WINDOW_MINUTES)
    base = dict(scorer_factory=linear_scorer(threshold=0.5, digest="bench-drift"))

    with tempfile.TemporaryDirectory(prefix="auditflow-bench-drift-") as tmp:
        plain_wire = write_wire(events, Path(tmp) / "plain.af1")
        shift_wire = write_wire(shifted(events, fmt, a.shift, START + timedelta(days=SHIFT_DAY)), Path(tmp) / "shift.af1")
        off_s, on_s, on_out = [], [], None
        t = time.perf_counter()
        run_wire_job(plain_wire, StreamSpec(**base))
        print(f"  warm-up run (not counted): {time.perf_counter() - t:.1f}s")
        for i in range(repeat):
            order = (False, True) if i % 2 == 0 else (True, False)
            for with_drift in order:
                t = time.perf_counter()
                out = run_wire_job(plain_wire, StreamSpec(**base, drift=drift if with_drift else None))
                dt = time.perf_counter() - t
                (on_s if with_drift else off_s).append(dt)
                if with_drift:
                    on_out = out
                print(f"  run {i + 1} drift {'on ' if with_drift else 'off'}: {dt:.1f}s")
        plain_out = run_wire_job(plain_wire, StreamSpec(**base, drift=drift_s))
        shift_out = run_wire_job(shift_wire, StreamSpec(**base, drift=drift_s))

    off, on = statistics.median(off_s), statistics.median(on_s)
    overhead = on / off
    events_per_s = len(events) / on
    print(f"(a) overhead: job {off:.1f}s without drift, {on:.1f}s with ({overhead:.3f}x); "
          f"{len(on_out.drift_records):,} drift records, {events_per_s:,.0f} events/s with drift")

    # the share of the drift run that is one-off: each (feature, segment) block's calibration is
    # drawn once per window size and then cached for the rest of the stream, so a stream that
    # runs longer pays it once; measured here on the run's own panes, scored cold and again warm
    cal_s, steady = calibration_seconds(full, on_out.drift_records)
    print(f"    of which one-off calibrations: {cal_s:.2f}s (timed scoring the run's {len(steady):,} panes again); "
          f"without them {(on - cal_s) / off:.3f}x")

    # (b) detection: first alert in the shifted format's segment
    shift_ms = epoch_millis(START + timedelta(days=SHIFT_DAY))
    seg = f"payment_format={fmt}"
    windows = scored_windows(shift_out)
    after = [w for w in windows if w >= shift_ms]
    hits = sorted(al["window_start"] for al in shift_out.drift_alerts
                  if al["group"].get("segment") == seg and al["window_start"] >= shift_ms)
    delay = windows.index(hits[0]) - windows.index(after[0]) if hits else None
    early = [al for al in shift_out.drift_alerts if al["group"].get("segment") == seg and al["window_start"] < shift_ms
             and al["window_start"] >= windows[0]]
    feats = Counter(al["group"].get("feature") for al in shift_out.drift_alerts if al["window_start"] in hits[:1])
    print(f"(b) detection: {fmt} amounts x{a.shift} from day {SHIFT_DAY + 1}: first alert in {seg} "
          f"{'after ' + str(delay) + ' window(s)' if hits else 'never'} ({', '.join(f for f in feats if f)}); "
          f"{len(early)} alert(s) in that segment before the shift")

    # (c) false alarms on the unshifted stream
    plain_windows = scored_windows(plain_out)
    full_judged = [r for r in on_out.drift_records if r["window_start"] in set(plain_windows) and r["status"] in D.JUDGED]
    full_rate = sum(r["status"] == "drift" and r["significant"] for r in full_judged) / max(1, len(full_judged))
    alerted = {al["window_start"] for al in plain_out.drift_alerts if al["window_start"] in set(plain_windows)}
    far = len(alerted) / len(plain_windows)
    scored_events = sum(1 for e in events if e.timestamp >= START + timedelta(days=SCORED_FROM_DAY))
    n_alerts = sum(1 for al in plain_out.drift_alerts if al["window_start"] in set(plain_windows))
    per_10k = n_alerts / (scored_events / 10_000)
    judged = [r for r in plain_out.drift_records if r["window_start"] in set(plain_windows) and r["status"] in D.JUDGED]
    record_rate = sum(r["status"] == "drift" and r["significant"] for r in judged) / max(1, len(judged))
    print(f"(c) false alarms: {len(alerted)} of {len(plain_windows)} windows alerted ({far:.3f}); {n_alerts} alerts "
          f"= {per_10k:.3f} per 10k events; judged records drifting (significant): {record_rate:.4f} "
          f"(product configuration, account-window inputs included: {full_rate:.4f})")
    for k in (2, 5, 10):
        print(f"    dummy every {k} windows: false_alarm_rate={1 / k:.3f} delay_windows={(k - 1) / 2:.1f} (mean)")
    print(f"drift overhead_ratio={overhead:.3f} detection_delay_windows={delay if delay is not None else 'na'} "
          f"false_alarm_rate={far:.3f} events_per_s={events_per_s:.0f} false_alarms_per_10k={per_10k:.3f} "
          f"record_false_rate={record_rate:.4f} full_record_drift_rate={full_rate:.4f} "
          f"windows={len(plain_windows)} events={len(events)} "
          f"job_s_off={off:.1f} job_s_on={on:.1f} calibration_s={cal_s:.2f} "
          f"overhead_ratio_warm={(on - cal_s) / off:.3f} window_minutes={WINDOW_MINUTES}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
