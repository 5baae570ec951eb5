"""Drift scores in the stream job, as the product ships them: overhead, detection delay and false
alarms, on our generator and on third-party data, side by side with dummy detectors.

    python bench/drift.py            # generator: 30 days of 2,500 accounts (~340k events), seeds 41-43
    python bench/drift.py --quick    # generator: 30 days of 1,000 accounts, seeds 41-42

**The shipped configuration**, what ``auditflow reference build`` and the stream job do by default
(:func:`pipelines.drift.product_profile`): the score and every model input whose memory the
reference spans three times (two weeks of reference: the transfer's own fields and the 1-hour and
24-hour inputs; the 7-day ones need three weeks, the lifetime ones are never judged), within each segment (payment
format, currency, bank; 20 kept per dimension) the score, the amount and the segment dimensions'
own distributions, 60-minute windows, psi/js/kl, each block's dispersion measured on the
reference's own 60-minute windows (the factor that makes them cross the drift threshold no more
than 1 % of the time), and the default rule (psi drift, significant after
Benjamini-Hochberg, on 3 consecutive windows).

Every set: its events in time order; the reference is days 8 to 21 (two weeks: every weekday
twice, after the accounts' 7-day windows have filled), built from the plain-Python features
(:mod:`pipelines.features`) scored by a fixed linear scorer (amount / 20,000: no training in the
bench); the job (:func:`pipelines.stream_job.run_wire_job`) runs over the whole set from day 1, so
its windows are warm, and its windows from day 22 on (nine days, 216 windows) are the ones counted.

(a) **Overhead** (the first generator set): the same wire file with drift off and on (after one
    warm-up run of the job in the same process, which pays the JVM's class loading and JIT; runs
    alternate, ``--repeat`` pairs; medians), ``overhead_ratio`` = job time with drift / without
    (start-up included; ``events_per_s`` is the drift run's). The one-off share (the calibrations,
    cached per block and window size) is timed by scoring the run's panes again with a fresh
    scorer (``calibration_s``, ``overhead_ratio_warm``).
(b) **Detection** (the first generator set), two shifts from 09:00 of day 26 (busy hours: a
    verdict needs 200 events a window, which night windows lack), each run on its own:
    ``detection_delay_windows``, a channel migration (every payment in the most frequent format
    arrives in the second most frequent: the demo's ``--drift``), and ``detection_delay_amounts``,
    the amounts of the second most frequent format multiplied by ``--shift``; windows from the
    first window after the shift starts to the first drift alert (0: that very window; the
    3-window rule makes 2 the least; ``never``: none in the nine days). The amount shift of one
    format is the hard case at hourly windows: its own segment has fewer than the 200 events an
    hour a verdict needs, and in all events together it is diluted.
(c) **False alarms**, on every set unshifted (nothing in it drifts by design): ``false_alarm_rate``
    = windows with any drift alert / windows scored, per set; the headline is the largest over all
    sets (``false_alarm_rate_max``) and the mean; also per 10k events, and the share of judged
    records that drift.

Third-party sets: synthfin-aml's (``synthfin-dense``: 25,000 agents over 30 days, ~440 transfers an
hour, so hourly windows are judged; seeds 3, 5, 7), made by ``python bench/datasets/build.py
--source synthfin --configs dense``; the bench names the ones missing and goes on without them
(``third_party_sets=0`` in its last line then). Their one payment format and one currency leave the
segments to the banks synthfin's converter assigns.

Dummy detectors that fire every k windows (k = 2, 5, 10) are scored on the same windows: an alarm
rate of 1/k and a delay of (k - 1) / 2 windows on average.

Last line: ``drift false_alarm_rate_max=... detection_delay_windows=... detection_delay_amounts=...
overhead_ratio=...`` plus
the per-source rates, sets, windows and sizes.
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
REF_DAYS = (7, 21)  # [from, to) in days since the set's first midnight
SCORED_FROM_DAY = 21
SHIFT_DAY = 25
SHIFT_HOUR = 9  # a verdict needs 200 events a window, which night windows lack: the shift starts in busy hours
WINDOW_MINUTES = D.DEFAULT_DRIFT_WINDOW_MINUTES  # the shipped window
THIRD_PARTY = ("synthfin-dense", (3, 5, 7))
DATASETS = Path(__file__).resolve().parents[1] / ".cache" / "datasets"


def shifted(events, fmt: str, factor: int, since: datetime):
    """The events with the amounts of ``fmt`` transfers from ``since`` on multiplied (exact units)."""
    out = []
    for ev in events:
        if ev.payment_format == fmt and ev.timestamp >= since:
            ev = dataclasses.replace(ev, amount_paid=Money(ev.amount_paid.currency, ev.amount_paid.units * factor),
                                     amount_received=Money(ev.amount_received.currency, ev.amount_received.units * factor))
        out.append(ev)
    return out


def relabeled(events, fmt: str, to: str, since: datetime):
    """The events with every ``fmt`` transfer from ``since`` on paid in ``to`` instead (a channel migration)."""
    return [dataclasses.replace(ev, payment_format=to) if ev.payment_format == fmt and ev.timestamp >= since else ev
            for ev in events]


def day0(events) -> datetime:
    first = events[0].timestamp
    return datetime(first.year, first.month, first.day)


def shipped_profile(events) -> P.Profile:
    """The product's reference of the reference days, as the job computes the features."""
    start = day0(events)
    t0, t1 = start + timedelta(days=REF_DAYS[0]), start + timedelta(days=REF_DAYS[1])
    rows = []
    for ev, f in iter_features(e for e in events if e.timestamp < t1):
        if ev.timestamp >= t0:
            rows.append(P.Row(epoch_millis(ev.timestamp),
                              {"payment_format": ev.payment_format, "currency": ev.amount_paid.currency,
                               "bank": ev.sender.bank},
                              {**{n: float(f[n]) for n in FEATURE_NAMES}, P.SCORE: float(f["amount_usd"]) / 20_000.0}))
    span = (REF_DAYS[1] - REF_DAYS[0]) * 1440
    return P.product_profile(rows, span, WINDOW_MINUTES, model_version="bench-linear-amount")


def write_wire(events, path: Path) -> Path:
    path.write_text("".join(e.to_wire() + "\n" for e in events))
    return path


def scored_windows(out, events) -> list[int]:
    first = epoch_millis(day0(events) + timedelta(days=SCORED_FROM_DAY))
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


def false_alarms(name: str, events, out) -> dict:
    """(c) on one unshifted set's run."""
    windows = scored_windows(out, events)
    ws = set(windows)
    alerts = [al for al in out.drift_alerts if al["window_start"] in ws]
    alerted = {al["window_start"] for al in alerts}
    judged = [r for r in out.drift_records if r["window_start"] in ws and r["status"] in D.JUDGED]
    judged_windows = {r["window_start"] for r in judged}
    drifting = sum(r["status"] == "drift" and r["significant"] for r in judged)
    scored_events = sum(1 for e in events if e.timestamp >= day0(events) + timedelta(days=SCORED_FROM_DAY))
    what = Counter(f"{al['group'].get('feature')}@{al['group'].get('segment')}" for al in alerts)
    got = {"set": name, "windows": len(windows), "judged_windows": len(judged_windows), "alerted": len(alerted),
           "rate": len(alerted) / max(1, len(windows)), "alerts": len(alerts),
           "per_10k": len(alerts) / max(1e-9, scored_events / 10_000), "record_rate": drifting / max(1, len(judged)),
           "events": len(events)}
    print(f"(c) {name}: {len(alerted)} of {len(windows)} windows alerted ({got['rate']:.3f}; {len(judged_windows)} "
          f"judged), {len(alerts)} alerts = {got['per_10k']:.3f} per 10k events; judged records drifting "
          f"(significant): {got['record_rate']:.4f}" + (f"; alerts on {dict(what.most_common(5))}" if what else ""))
    return got


def third_party_sets(quick: bool) -> tuple[list[tuple[str, list]], list[str]]:
    from ingest.amlworld import read_transactions

    source, seeds = THIRD_PARTY
    found, missing = [], []
    for seed in seeds[:1] if quick else seeds:
        name = f"{source}-s{seed}"
        path = DATASETS / name / f"{name}_Trans.csv"
        if not path.exists():
            missing.append(name)
            continue
        events = [e for e in read_transactions(path) if hasattr(e, "event_id")]
        found.append((name, sorted(events, key=lambda e: (e.timestamp, e.source_offset))))
    return found, missing


def fmt_delay(d: int | None) -> str:
    return "never" if d is None else str(d)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 accounts, two generator seeds, one third-party seed")
    ap.add_argument("--accounts", type=int, default=None)
    ap.add_argument("--shift", type=int, default=3, help="factor on the shifted format's amounts")
    ap.add_argument("--repeat", type=int, default=None, help="pairs of drift off/on runs for the overhead")
    a = ap.parse_args(argv)
    accounts = a.accounts or (1000 if a.quick else 2500)
    repeat = a.repeat or (2 if a.quick else 5)  # this machine is noisy: more pairs, a steadier median
    seeds = (41, 42) if a.quick else (41, 42, 43)
    base = dict(scorer_factory=linear_scorer(threshold=0.5, digest="bench-drift"))

    sets = []
    for seed in seeds:
        t = time.perf_counter()
        ds = generate(accounts=accounts, days=DAYS, laundering_rate=0.002, seed=seed)
        sets.append((f"generator-s{seed}", sorted(ds.events, key=lambda e: (e.timestamp, e.source_offset))))
        print(f"generated {len(ds.events):,} events over {DAYS} days ({accounts:,} accounts, seed {seed}) "
              f"in {time.perf_counter() - t:.1f}s")
    third, missing = third_party_sets(a.quick)
    sets += third
    if missing:
        print(f"third-party sets missing (python bench/datasets/build.py --source synthfin --configs dense): {', '.join(missing)}")

    results, delays = [], {}
    with tempfile.TemporaryDirectory(prefix="auditflow-bench-drift-") as tmp:
        for k, (name, events) in enumerate(sets):
            t = time.perf_counter()
            profile = shipped_profile(events)
            layout = P.Layout.of(profile)
            print(f"{name}: reference {profile.reference_id}: {profile.n:,} events of days {REF_DAYS[0] + 1}-"
                  f"{REF_DAYS[1]}, {len(profile.features)} features, {sum(layout.segment_counts)} segments, "
                  f"{layout.size:,} counters ({time.perf_counter() - t:.1f}s)")
            drift = P.DriftSpec(profile, WINDOW_MINUTES)
            wire = write_wire(events, Path(tmp) / f"{name}.af1")
            if k == 0:  # (a) overhead and (b) detection on the first generator set
                off_s, on_s, on_out = [], [], None
                t = time.perf_counter()
                run_wire_job(wire, StreamSpec(**base))
                print(f"  warm-up run (not counted): {time.perf_counter() - t:.1f}s")
                for i in range(repeat):
                    for with_drift in (False, True) if i % 2 == 0 else (True, False):
                        t = time.perf_counter()
                        out = run_wire_job(wire, StreamSpec(**base, drift=drift if with_drift else None))
                        dt = time.perf_counter() - t
                        (on_s if with_drift else off_s).append(dt)
                        if with_drift:
                            on_out = out
                        print(f"  run {i + 1} drift {'on ' if with_drift else 'off'}: {dt:.1f}s")
                off, on = statistics.median(off_s), statistics.median(on_s)
                overhead, events_per_s = on / off, len(events) / on
                print(f"(a) overhead: job {off:.1f}s without drift, {on:.1f}s with ({overhead:.3f}x); "
                      f"{len(on_out.drift_records):,} drift records, {events_per_s:,.0f} events/s with drift")
                cal_s, steady = calibration_seconds(profile, on_out.drift_records)
                print(f"    of which one-off calibrations: {cal_s:.2f}s (timed scoring the run's {len(steady):,} "
                      f"panes again); without them {(on - cal_s) / off:.3f}x")
                results.append(false_alarms(name, events, on_out))

                formats = Counter(e.payment_format for e in events).most_common()
                since = day0(events) + timedelta(days=SHIFT_DAY, hours=SHIFT_HOUR)
                shift_ms = epoch_millis(since)
                shifts = {  # name -> the events with that shift from day SHIFT_DAY + 1
                    "migration": relabeled(events, formats[0][0], formats[1][0], since),
                    "amounts": shifted(events, formats[1][0], a.shift, since),
                }
                for kind, moved in shifts.items():
                    shift_out = run_wire_job(write_wire(moved, Path(tmp) / f"{kind}.af1"), StreamSpec(**base, drift=drift))
                    windows = scored_windows(shift_out, events)
                    after = [w for w in windows if w >= shift_ms]
                    hits = sorted(al["window_start"] for al in shift_out.drift_alerts if al["window_start"] >= shift_ms)
                    delays[kind] = windows.index(hits[0]) - windows.index(after[0]) if hits else None
                    first = Counter(f"{al['group'].get('feature')}@{al['group'].get('segment')}"
                                    for al in shift_out.drift_alerts if hits and al["window_start"] == hits[0])
                    what = (f"every {formats[0][0]} payment arrives as {formats[1][0]}" if kind == "migration"
                            else f"{formats[1][0]} amounts x{a.shift}")
                    print(f"(b) detection, {what} from day {SHIFT_DAY + 1} {SHIFT_HOUR:02d}:00: first drift alert "
                          f"{'after ' + str(delays[kind]) + ' window(s)' if hits else 'never'}"
                          f"{' (' + ', '.join(sorted(first)) + ')' if first else ''}; "
                          f"{len(hits)} alert(s) after the shift")
            else:
                results.append(false_alarms(name, events, run_wire_job(wire, StreamSpec(**base, drift=drift))))

    for k in (2, 5, 10):
        print(f"    dummy every {k} windows: false_alarm_rate={1 / k:.3f} delay_windows={(k - 1) / 2:.1f} (mean)")
    rates = {r["set"]: r["rate"] for r in results}
    gen = [r for r in results if r["set"].startswith("generator")]
    tp = [r for r in results if not r["set"].startswith("generator")]
    far_max = max(rates.values())
    far_tp = f"{max(r['rate'] for r in tp):.3f}" if tp else "na"
    print(f"drift false_alarm_rate_max={far_max:.3f} false_alarm_rate_mean={statistics.mean(rates.values()):.3f} "
          f"detection_delay_windows={fmt_delay(delays['migration'])} "
          f"detection_delay_amounts={fmt_delay(delays['amounts'])} overhead_ratio={overhead:.3f} "
          f"far_generator_max={max(r['rate'] for r in gen):.3f} far_third_party_max={far_tp} "
          f"third_party_sets={len(tp)} generator_sets={len(gen)} "
          f"false_alarms_per_10k_max={max(r['per_10k'] for r in results):.3f} "
          f"record_false_rate_max={max(r['record_rate'] for r in results):.4f} "
          f"windows={sum(r['windows'] for r in results)} events_per_s={events_per_s:.0f} "
          f"job_s_off={off:.1f} job_s_on={on:.1f} calibration_s={cal_s:.2f} "
          f"overhead_ratio_warm={(on - cal_s) / off:.3f} window_minutes={WINDOW_MINUTES}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
