"""Synthetic generator speed: ``ingest.synthetic.generate`` and ``write_dataset``, timed.

    python bench/generator.py            # the demo's default set (2000 accounts, 3 days), then 10x
    python bench/generator.py --quick    # the default set only, 3 repeats

What is timed (wall clock, ``time.perf_counter``; best and median of the repeats, each in a
fresh call with the same seed, so every repeat makes the same bytes):

* **generate**: ``generate()`` with the demo's defaults (2000 accounts, 3 days, 0.1 % laundering,
  seed 7): events per second -> ``events_per_s`` (best repeat).
* **write**: ``write_dataset`` of that set into a temporary folder (CSV plus answer key).
* not quick: the same at 20,000 accounts (about 270k events) -> ``events_per_s_large``, to show
  whether the cost grows faster than the rows.

The figures are printed, never asserted (a loaded machine is slow, not wrong); the only check
is that repeats give identical bytes (``same_bytes=yes``), else the exit status is 1.

Last line: ``generator events_per_s=... events=... generate_s=... write_s=... same_bytes=...``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def timed_set(accounts: int, days: int, repeats: int, seed: int) -> dict:
    from ingest.synthetic import generate, write_dataset

    gen_s, write_s, digests, n = [], [], set(), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        ds = generate(accounts=accounts, days=days, seed=seed)
        gen_s.append(time.perf_counter() - t0)
        n = len(ds.events)
        with tempfile.TemporaryDirectory(prefix="bench_generator_") as tmp:
            t0 = time.perf_counter()
            paths = write_dataset(ds, tmp)
            write_s.append(time.perf_counter() - t0)
            digests.add(tuple(hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths))
        del ds
    return {
        "events": n,
        "generate_best": min(gen_s),
        "generate_median": statistics.median(gen_s),
        "write_best": min(write_s),
        "same_bytes": len(digests) == 1,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the default set only, 3 repeats")
    ap.add_argument("--repeats", type=int, help="repeats per size (default 5; quick 3)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 5)

    sizes = [("default", 2000, 3)] + ([] if args.quick else [("large", 20_000, 3)])
    results = {}
    for label, accounts, days in sizes:
        r = timed_set(accounts, days, repeats if label == "default" else max(1, repeats // 2), args.seed)
        results[label] = r
        print(f"  {label:8} {accounts:>6} accounts x {days} days: {r['events']:>8,} events, "
              f"generate best {r['generate_best']:.2f} s (median {r['generate_median']:.2f} s, "
              f"{r['events'] / r['generate_best']:,.0f} ev/s), write {r['write_best']:.2f} s, "
              f"same bytes: {'yes' if r['same_bytes'] else 'NO'}", file=sys.stderr)

    d = results["default"]
    same = all(r["same_bytes"] for r in results.values())
    print(f"generator ({'quick' if args.quick else 'full'}, seed {args.seed}, {repeats} repeats, "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f})")
    head = {
        "events_per_s": f"{d['events'] / d['generate_best']:.0f}",
        "events": str(d["events"]),
        "generate_s": f"{d['generate_best']:.3f}",
        "generate_median_s": f"{d['generate_median']:.3f}",
        "write_s": f"{d['write_best']:.3f}",
    }
    if "large" in results:
        big = results["large"]
        head["events_per_s_large"] = f"{big['events'] / big['generate_best']:.0f}"
        head["events_large"] = str(big["events"])
    head["same_bytes"] = "yes" if same else "no"
    print("generator " + " ".join(f"{k}={v}" for k, v in head.items()))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
