"""Stream job throughput: the PyFlink job vs the same work as a plain-Python loop, in one run.

    python bench/stream_throughput.py            # ~54k events, plus a per-stage breakdown
    python bench/stream_throughput.py --quick    # ~9k events, no breakdown (under a minute)

What is compared, over the same generated CSV (``ingest.synthetic``, seeded) and the same
trained cascade (trained first on a separate, seeded history set with laundering_rate=0.01):

* **flink**: :func:`pipelines.job.run_file_job` on a local MiniCluster (parallelism 1, thread
  mode), ``graph_url=None``, fast scorer = :func:`auditflow.flow.load_fast_path`. Timed from the
  call to the last collected result. The job's fixed cost (``startup_s``) is timed on a 10-row
  file right before, in the same (already started) JVM, so that
  ``steady_flink_events_per_s = N / (t_total - startup_s)``. ``jvm_cold_s`` is the first tiny
  job, which also launches PyFlink's gateway JVM.
* **python loop**: ``read_transactions`` -> ``iter_features`` -> the job's own fast scorer
  (``load_fast_path``) one event at a time (a batch of 1, like ``JoinAndScore``) -> the same
  alert JSON. ``python_batch`` is the same loop scoring 1000-row batches with xgboost
  (``Cascade.fast_score_batch``, vectorized); its alert ids are compared with the loop's.

Both sides must flag the same events (checked: ``alerts_match``). Flink's CPU is the gateway
JVM's (MiniCluster + embedded Python threads), read from /proc around each job. The breakdown
(default unless ``--quick``) times the job's source alone, source + parse, the full job with a
scorer that flags nothing (no scoring, no alert output), the full job plus the graph writer
into an in-memory store, the full job at parallelism 2, and the Python loop's stages alone
(and with xgboost called per event).

The last line is the headline: ``stream_throughput flink_events_per_s=... python_loop_events_per_s=...
ratio=...`` (ratio = flink / python loop).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BATCH = 1000  # python_batch scoring batch (= the job's python.fn-execution.bundle.size)


# ------------------------------------------------------------------------------ helpers


def jvm_cpu_seconds() -> float:
    """utime+stime of this process's child JVMs (PyFlink's gateway runs the MiniCluster)."""
    me, tick, total = os.getpid(), os.sysconf("SC_CLK_TCK"), 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2 :].split()
        if int(rest[1]) == me and "java" in stat[: stat.rfind(")")]:
            total += (int(rest[11]) + int(rest[12])) / tick
    return total


def dummy_scorer_factory():
    """A scorer that flags nothing (isolates xgboost + alert JSON cost in the breakdown)."""
    return (lambda X: [0.0] * len(X)), 2.0, "dummy"


def alert_json(ev, score, vec, digest) -> str:
    # exactly what JoinAndScore emits
    return json.dumps(
        {"event": ev.to_dict(), "score": score, "features": list(vec.items()), "model": digest},
        separators=(",", ":"),
    )


def write_head(csv_path: Path, out: Path, rows: int) -> Path:
    with open(csv_path, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i > rows:
                break
            dst.write(line)
    return out


# ------------------------------------------------------------------------------ python side


def python_loop(csv_path: Path, model_dir: str) -> tuple[float, list[str]]:
    """Per-event: parse, features, score a batch of 1, alert JSON. Returns (seconds, alert ids)."""
    from auditflow.flow import load_fast_path
    from auditflow.records import TransactionEvent
    from ingest.amlworld import read_transactions
    from pipelines.features import iter_features

    score, threshold, digest = load_fast_path(model_dir)[:3]
    ids: list[str] = []
    t0 = time.perf_counter()
    events = (e for e in read_transactions(csv_path) if isinstance(e, TransactionEvent))
    for ev, vec in iter_features(events):
        s = float(score([list(vec.values())])[0])
        if s >= threshold:
            alert_json(ev, s, vec, digest)
            ids.append(ev.event_id)
    return time.perf_counter() - t0, ids


def python_batch(csv_path: Path, model_dir: str) -> tuple[float, list[str]]:
    """The same loop, scoring BATCH rows per call with xgboost (vectorized ``inplace_predict``)."""
    from auditflow.records import TransactionEvent
    from ingest.amlworld import read_transactions
    from model_service import Cascade
    from pipelines.features import iter_features

    cascade = Cascade.load(model_dir, nthread=1)
    score, threshold, digest = cascade.fast_score_batch, cascade.candidate_threshold, cascade.digest
    ids: list[str] = []
    pending: list = []

    def flush() -> None:
        scores = score([list(vec.values()) for _, vec in pending])
        for (ev, vec), s in zip(pending, scores):
            s = float(s)
            if s >= threshold:
                alert_json(ev, s, vec, digest)
                ids.append(ev.event_id)
        pending.clear()

    t0 = time.perf_counter()
    events = (e for e in read_transactions(csv_path) if isinstance(e, TransactionEvent))
    for item in iter_features(events):
        pending.append(item)
        if len(pending) >= BATCH:
            flush()
    if pending:
        flush()
    return time.perf_counter() - t0, ids


def python_xgb_single(csv_path: Path, model_dir: str) -> float:
    """The loop scoring one row per xgboost call (what the job did before the pure-Python walker)."""
    from auditflow.records import TransactionEvent
    from ingest.amlworld import read_transactions
    from model_service import Cascade
    from pipelines.features import iter_features

    cascade = Cascade.load(model_dir, nthread=1)
    score, threshold, digest = cascade.fast_score_batch, cascade.candidate_threshold, cascade.digest
    t0 = time.perf_counter()
    events = (e for e in read_transactions(csv_path) if isinstance(e, TransactionEvent))
    for ev, vec in iter_features(events):
        s = float(score([list(vec.values())])[0])
        if s >= threshold:
            alert_json(ev, s, vec, digest)
    return time.perf_counter() - t0


def python_stages(csv_path: Path) -> dict[str, float]:
    """Seconds of the loop's first stages alone: parse; parse + features."""
    from auditflow.records import TransactionEvent
    from ingest.amlworld import read_transactions
    from pipelines.features import iter_features

    t0 = time.perf_counter()
    for _ in read_transactions(csv_path):
        pass
    t1 = time.perf_counter()
    events = (e for e in read_transactions(csv_path) if isinstance(e, TransactionEvent))
    for _ in iter_features(events):
        pass
    t2 = time.perf_counter()
    return {"parse only": t1 - t0, "parse + features only": t2 - t1}


# ------------------------------------------------------------------------------ flink side


def timed_job(fn, *args) -> tuple[float, float, object]:
    """(wall seconds, JVM CPU seconds, result) of one job."""
    c0, t0 = jvm_cpu_seconds(), time.perf_counter()
    out = fn(*args)
    wall = time.perf_counter() - t0
    return wall, jvm_cpu_seconds() - c0, out


def run_full(csv_path: Path, model_dir: str, graph_url: str | None = None, dummy: bool = False,
             parallelism: int = 1):
    from auditflow.flow import load_fast_path
    from pipelines.job import JobSpec, run_file_job

    factory = dummy_scorer_factory if dummy else functools.partial(load_fast_path, model_dir)
    spec = JobSpec(graph_url=graph_url, scorer_factory=factory, parallelism=parallelism)
    return run_file_job(str(csv_path), spec)


def run_partial(csv_path: Path, stage: str) -> int:
    """The job's source (and parse) alone, ending in a filter that emits nothing."""
    from pyflink.common import Types

    from pipelines.job import ParseEvents, file_source, flink_environment
    from pipelines.sources import split_file

    chunks, n = split_file(str(csv_path))
    env = flink_environment(1)
    stream = file_source(env, [c.as_tuple() for c in chunks])
    if stage == "parse":
        stream = stream.process(ParseEvents(), output_type=Types.PICKLED_BYTE_ARRAY())
    sink = stream.filter(lambda _: False)
    with sink.execute_and_collect(f"bench-{stage}") as results:
        for _ in results:
            pass
    return n


# ------------------------------------------------------------------------------ main


def fmt_rate(n: int, s: float) -> str:
    return f"{n / s:,.0f}" if s > 0 else "inf"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="~9k events, small model, no breakdown")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--accounts", type=int, help="live set accounts (default 4000; quick 1000)")
    ap.add_argument("--days", type=int, help="live set days (default 3; quick 2)")
    ap.add_argument("--breakdown", action=argparse.BooleanOptionalAction, default=None,
                    help="also time partial jobs and variants (default: on unless --quick)")
    ap.add_argument("--keep", metavar="DIR", help="write data and model here and keep them")
    args = ap.parse_args(argv)
    quick = args.quick
    accounts = args.accounts or (1000 if quick else 4000)
    days = args.days or (2 if quick else 3)
    hist_accounts, hist_days = (200, 3) if quick else (1000, 6)
    breakdown = (not quick) if args.breakdown is None else args.breakdown

    from auditflow.flow import train
    from auditflow.settings import Settings
    from ingest.synthetic import generate, write_dataset

    tmp = None
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_stream_")
        work = Path(tmp.name)
    log = functools.partial(print, file=sys.stderr, flush=True)
    # this process's own PyFlink log (work/flink-log), not the one shared in the pyflink package
    os.environ.setdefault("FLINK_LOG_DIR", str(work / "flink-log"))
    try:
        t0 = time.perf_counter()
        settings = Settings(out_dir=work, seed=args.seed)
        hist = generate(accounts=hist_accounts, days=hist_days, laundering_rate=0.01, seed=args.seed + 1000)
        hist_csv, _ = write_dataset(hist, work, name="history")
        live = generate(accounts=accounts, days=days, seed=args.seed)
        live_csv, _ = write_dataset(live, work, name="live")
        n = len(live.events)
        tiny_csv = write_head(live_csv, work / "tiny_Trans.csv", 10)
        log(f"[setup] history {len(hist.events)} events, live {n} events ({time.perf_counter() - t0:.1f}s)")
        t1 = time.perf_counter()
        model_dir = str((work / "model").resolve())
        train(hist_csv, model_dir, settings)
        train_s = time.perf_counter() - t1
        log(f"[setup] model trained in {train_s:.1f}s")

        # python side first (no JVM running yet)
        py_s, py_ids = python_loop(live_csv, model_dir)
        log(f"[python] loop {py_s:.2f}s")
        pyb_s, pyb_ids = python_batch(live_csv, model_dir)
        log(f"[python] batch {pyb_s:.2f}s")
        stages = python_stages(live_csv) if breakdown else {}
        if breakdown:
            stages["loop, xgboost batch of 1"] = python_xgb_single(live_csv, model_dir)

        # flink side: cold tiny job (launches the JVM), warm tiny job (= startup), full job
        cold_s, _, _ = timed_job(run_full, tiny_csv, model_dir)
        log(f"[flink] tiny job, cold JVM {cold_s:.2f}s")
        startup_s, startup_cpu, _ = timed_job(run_full, tiny_csv, model_dir)
        log(f"[flink] tiny job, warm {startup_s:.2f}s")
        fl_s, fl_cpu, out = timed_job(run_full, live_csv, model_dir)
        log(f"[flink] full job {fl_s:.2f}s, JVM cpu {fl_cpu:.1f}s, {len(out.alerts)} alerts")
        if out.records_in != n or out.rejects:
            log(f"[flink] WARNING: records_in={out.records_in} rejects={len(out.rejects)} (expected {n}, 0)")
        fl_ids = [a["event"]["event_id"] for a in out.alerts]
        match = sorted(fl_ids) == sorted(py_ids)
        batch_diff = len(set(pyb_ids) ^ set(py_ids))  # xgboost vs the pure-Python walker

        variants: list[tuple[str, float, float]] = []
        if breakdown:
            for name, fn, fargs in (
                ("read csv only", run_partial, (live_csv, "read")),
                ("read + parse only", run_partial, (live_csv, "parse")),
                ("full, no scoring (flags nothing)", run_full, (live_csv, model_dir, None, True)),
                ("full + graph writer (memory:)", run_full, (live_csv, model_dir, "memory:")),
                ("full, parallelism 2", run_full, (live_csv, model_dir, None, False, 2)),
            ):
                s, cpu, res = timed_job(fn, *fargs)
                log(f"[flink] {name}: {s:.2f}s cpu {cpu:.1f}s")
                variants.append((name, s, cpu))
                if name == "full, parallelism 2" and sorted(a["event"]["event_id"] for a in res.alerts) != sorted(fl_ids):
                    log("[flink] WARNING: parallelism 2 flagged other events than parallelism 1")

        steady = fl_s - startup_s
        flink_rate = n / fl_s
        steady_rate = n / steady if steady > 0 else float("inf")
        py_rate, pyb_rate = n / py_s, n / pyb_s

        rows = [
            ("events (live set)", f"{n:,}", ""),
            ("alerts (flink / python loop)", f"{len(fl_ids):,} / {len(py_ids):,}", "same ids" if match else "MISMATCH"),
            ("train (history %d events)" % len(hist.events), f"{train_s:.2f} s", ""),
            ("python loop, batch of 1 (job's scorer)", f"{py_s:.2f} s", f"{fmt_rate(n, py_s)} ev/s"),
            (f"python loop, xgboost batch of {BATCH}", f"{pyb_s:.2f} s",
             f"{fmt_rate(n, pyb_s)} ev/s ({len(pyb_ids):,} alerts, {batch_diff} differ)"),
        ]
        for k, v in stages.items():
            rows.append((f"  python {k}", f"{v:.2f} s", f"{fmt_rate(n, v)} ev/s"))
        rows += [
            ("flink tiny job, cold JVM", f"{cold_s:.2f} s", "(JVM launch + job)"),
            ("flink tiny job = startup_s", f"{startup_s:.2f} s", f"JVM cpu {startup_cpu:.1f} s"),
            ("flink full job", f"{fl_s:.2f} s", f"{fmt_rate(n, fl_s)} ev/s, JVM cpu {fl_cpu:.1f} s"),
            ("flink steady (total - startup)", f"{steady:.2f} s", f"{fmt_rate(n, steady)} ev/s"),
        ]
        for name, s, cpu in variants:
            rate = (f"{fmt_rate(n, s)} ev/s incl. its startup" if s <= 2 * startup_s
                    else f"steady {fmt_rate(n, s - startup_s)} ev/s")
            rows.append((f"  flink {name}", f"{s:.2f} s", f"{rate}, JVM cpu {cpu:.1f} s"))
        w = max(len(r[0]) for r in rows)
        print(f"stream_throughput ({'quick' if quick else 'full'}, seed {args.seed}, {os.cpu_count()} cpus, "
              f"load {os.getloadavg()[0]:.1f})")
        for a, b, c in rows:
            print(f"  {a:<{w}}  {b:>16}  {c}")
        head = {
            "flink_events_per_s": f"{flink_rate:.0f}",
            "python_loop_events_per_s": f"{py_rate:.0f}",
            "ratio": f"{flink_rate / py_rate:.3f}",
            "startup_s": f"{startup_s:.2f}",
            "jvm_cold_s": f"{cold_s:.2f}",
            "steady_flink_events_per_s": f"{steady_rate:.0f}",
            "steady_ratio": f"{steady_rate / py_rate:.3f}",
            "python_batch_events_per_s": f"{pyb_rate:.0f}",
            "events": str(n),
            "alerts_match": "yes" if match else "no",
        }
        print("stream_throughput " + " ".join(f"{k}={v}" for k, v in head.items()))
        return 0 if match else 1
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
