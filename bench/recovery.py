"""Crash recovery of the Kafka job on the real servers, next to an uninterrupted run, in one run.

    python bench/recovery.py            # 3 kills, ~100k events
    python bench/recovery.py --quick    # 2 kills, ~55k events (about 5 minutes)

Needs Kafka, Neo4j and the Flink session cluster of ``deploy/services up`` (and
``eval "$(deploy/services env)"``); uses tests/support/recovery_drill.py, which the kill test
(tests/pipelines/test_recovery.py) uses too. In this order, on one generated live set:

1. **uninterrupted file run** (the reference): the file job into an embedded graph.
2. **uninterrupted cluster run**: the Kafka job (exactly-once sinks, checkpoints every
   ``--checkpoint-ms``) on the session cluster over the live set plus 4 malformed records,
   no kill -> ``clean_job_s``.
3. **interrupted cluster run**: the same with the TaskManager killed by SIGKILL ``--kills``
   times, each after a checkpoint of the (re)started job, a new TaskManager started each time
   (``deploy/services up flink``) -> ``kills``, ``recovery_s_p50`` / ``_max`` (kill -> a
   checkpoint restored and every task running again; the new TaskManager's start is most of it),
   ``job_s`` and what the kills cost (``job_s - clean_job_s``).

Both cluster runs are checked against the reference: ``duplicates`` (committed alerts seen more
than once), ``missing`` (reference alerts not committed), ``dlq_duplicates``,
``graph_count_diff`` (Neo4j nodes + relationships against the reference graph's), each must be 0.

4. **fuzz**: :func:`ingest.fuzz.fuzz_cases` -- random and mutated byte lines and JSON / wire values
   through the one line reader and the decoders -> ``fuzz_cases``, ``fuzz_crashes`` (an exception
   that escaped, or a case where in != processed + rejected; must be 0).

Last line: ``recovery kills=... duplicates=... missing=... dlq_duplicates=... graph_count_diff=...
recovery_s_p50=... fuzz_cases=... fuzz_crashes=...`` plus the further figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check(label: str, r) -> dict:
    figures = {"duplicates": r.duplicates, "missing": r.missing, "unexpected": r.unexpected,
               "dlq_duplicates": r.dlq_duplicates, "dlq_missing": r.dlq_missing,
               "graph_count_diff": r.graph_count_diff, "leftover_workers": r.leftover_workers}
    log(f"[{label}] {r.events:,} events, {len(r.alerts):,} committed alerts (reference {len(r.reference_alerts):,}), "
        f"{len(r.dead_letters)} dead letters, graph {r.graph_counts} (reference {r.reference_counts}); "
        f"job {r.job_seconds:.1f}s; " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 kills, a smaller live set, fewer fuzz cases")
    ap.add_argument("--kills", type=int, help="TaskManager kills (default 3; quick 2)")
    ap.add_argument("--accounts", type=int, help="live set accounts (default 3000; quick 2000)")
    ap.add_argument("--days", type=int, default=6)
    ap.add_argument("--checkpoint-ms", type=int, default=1000)
    ap.add_argument("--fuzz", type=int, help="fuzz cases (default 20000; quick 5000)")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    kills = args.kills if args.kills is not None else (2 if args.quick else 3)
    accounts = args.accounts or (2000 if args.quick else 3000)
    n_fuzz = args.fuzz or (5000 if args.quick else 20_000)

    from tests.support.recovery_drill import prepare, run_drill

    t_begin = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_recovery_") as tmp:
        world = prepare(Path(tmp), accounts=accounts, days=args.days, seed=args.seed, log=log)
        clean = run_drill(world, kills=0, checkpoint_interval_ms=args.checkpoint_ms, log=log)
        clean_figures = check("uninterrupted", clean)
        hit = run_drill(world, kills=kills, checkpoint_interval_ms=args.checkpoint_ms, log=log)
        figures = check("interrupted", hit)
    bad = {k: v for k, v in {**figures, **{f"clean_{k}": v for k, v in clean_figures.items()}}.items() if v}

    fuzz_cases = fuzz_crashes = "na"
    try:
        from ingest.fuzz import fuzz_cases as run_fuzz
    except ImportError as e:
        log(f"[fuzz] n/a: {e}")
    else:
        t0 = time.perf_counter()
        fz = run_fuzz(n_fuzz, seed=args.seed)
        fuzz_cases, fuzz_crashes = fz.cases, fz.crashes
        log(f"[fuzz] {fz.cases:,} cases in {time.perf_counter() - t0:.1f}s: {fz.crashes} crashes")

    rec = hit.recovery_s
    p50 = statistics.median(rec) if rec else float("nan")
    worst = max(rec) if rec else float("nan")
    log(f"\nrecovery ({'quick, ' if args.quick else ''}{kills} kills requested, total {time.perf_counter() - t_begin:.0f} s)"
        + (f"; NOT 0: {bad}" if bad else "") + (f"; notes: {hit.notes}" if hit.notes else ""))
    print(f"recovery kills={hit.kills} duplicates={hit.duplicates} missing={hit.missing} "
          f"dlq_duplicates={hit.dlq_duplicates} graph_count_diff={hit.graph_count_diff} recovery_s_p50={p50:.1f} "
          f"fuzz_cases={fuzz_cases} fuzz_crashes={fuzz_crashes} recovery_s_max={worst:.1f} "
          f"job_s={hit.job_seconds:.1f} clean_job_s={clean.job_seconds:.1f} "
          f"kill_cost_s={hit.job_seconds - clean.job_seconds:.1f} events={hit.events} "
          f"restored={'/'.join(map(str, hit.restored_checkpoints)) or '-'} checkpoint_ms={args.checkpoint_ms} "
          f"unexpected={hit.unexpected} dlq_missing={hit.dlq_missing} leftover_workers={hit.leftover_workers}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
