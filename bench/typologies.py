"""Typology recall and precision per data set: our generator and third-party AMLworld-format sets.

    python bench/typologies.py            # every set below
    python bench/typologies.py --quick    # our generator (seed 3) and the quick AMLSim sets
    python bench/typologies.py --sets amlsim-days,ours-default   # (or one converted file: amlsim-days-s5)

Each set is scored by :func:`evidence_graph.evaluation.score_typologies`: detection from every
member of every answer-key instance and from background accounts, findings pooled, one per
instance; per typology recall and precision. The detectors never see the answer key.

Sets
    * ``ours-default`` / ``ours-slow``: :func:`ingest.synthetic.generate` with the ``default``
      profile (attempts over hours to a day or two; 800 accounts, 12 days, scored over the last
      five) and the ``slow`` one (days to weeks; 500 accounts, 40 days, scored over the last 26),
      over seeds 3, 5 and 7 (``--quick``: seed 3). Background: the generator's legitimate
      look-alikes (payrolls, shops, rents, households sharing payees, exchanges, merchants,
      payroll processors).
    * ``amlsim-days`` / ``amlsim-weeks``: IBM AMLSim runs of the two configurations converted by
      ``bench/datasets/build.py``, its seeds 3, 5 and 7 (``--quick``: the small seed-3 slice;
      cached under ``.cache/datasets``; a run not there is skipped and said so). Scored over everything after
      the first 35 days (history for the members' habits; an attempt that began before is
      unscored). Background: :data:`BACKGROUND` accounts drawn with a seeded RNG among those in no
      attempt. AMLSim at this commit plants no bipartite or stack (bench/datasets/README.md).

A set's figure per typology is the mean over its seeds; its ``recall`` / ``precision`` is the mean
over the typologies it plants (precision: over those it plants or that were reported), with its
standard deviation over the seeds (``(sd, seeds)``). An unknown ``--sets`` name is an error (exit
2). Last line:
``typologies recall_min=... precision_min=... sets=N`` (min over sets).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from auditflow.typologies import TYPOLOGIES, from_amlworld_label  # noqa: E402
from evidence_graph import NetworkxGraphStore  # noqa: E402
from evidence_graph.evaluation import Instance, TypologyScore, score_typologies  # noqa: E402

DATASETS = ROOT / ".cache" / "datasets"
SETS = ("ours-default", "ours-slow", "amlsim-days", "amlsim-weeks")
SEEDS = (3, 5, 7)
#: Background accounts queried per third-party set (besides every answer-key member).
BACKGROUND = 300
#: History before the scored window of a third-party set.
HISTORY = timedelta(days=35)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_amlworld(name: str):
    """(events, instances, unscored, window, background) of a converted set; None if absent."""
    from ingest.amlworld import format_row, read_patterns, read_transactions, row_key

    base = DATASETS / name / name
    trans, patterns = Path(f"{base}_Trans.csv"), Path(f"{base}_Patterns.txt")
    if not trans.exists() or not patterns.exists():
        return None
    events = [e for e in read_transactions(trans) if hasattr(e, "event_id")]
    by_key = {row_key(format_row(e)): e for e in events if e.is_laundering}
    start = events[0].timestamp.replace(hour=0, minute=0) + HISTORY
    instances: list[Instance] = []
    unscored: list[Instance] = []
    for a in read_patterns(patterns):
        evs = sorted((by_key[row_key(r)] for r in a.rows), key=lambda e: (e.timestamp, e.event_id))
        members = tuple(sorted({x for e in evs for x in (e.sender.node_id, e.receiver.node_id)}))
        inst = (from_amlworld_label(a.typology), frozenset(e.event_id for e in evs), members)
        (instances if evs[0].timestamp >= start else unscored).append(inst)
    in_attempts = {m for _, _, ms in (*instances, *unscored) for m in ms}
    others = sorted({x for e in events for x in (e.sender.node_id, e.receiver.node_id)} - in_attempts)
    background = random.Random(f"{name}:background").sample(others, min(BACKGROUND, len(others)))
    return events, instances, unscored, (start, events[-1].timestamp), background


def load_ours(profile: str, seed: int):
    from ingest.synthetic import generate

    if profile == "slow":
        ds = generate(accounts=500, days=40, laundering_rate=0.015, seed=seed, profile="slow")
        history = timedelta(days=14)
    else:
        ds = generate(accounts=800, days=12, laundering_rate=0.015, seed=seed)
        history = timedelta(days=7)
    start = ds.events[0].timestamp.replace(hour=0, minute=0) + history
    planted = ds.planted(start)
    return ds.events, list(planted), planted.unscored, (start, ds.events[-1].timestamp), [
        r.node_id for r in ds.lookalikes()]


def runs_of(name: str, seeds: tuple[int, ...], quick: bool) -> list[int | str]:
    """A set's runs: our generator's seeds, or the converted AMLSim files of a configuration (its
    seeds; ``--quick``: the small slice), or one converted file named as it is."""
    if name.startswith("ours-"):
        return list(seeds)
    if name in ("amlsim-days", "amlsim-weeks"):
        return [f"{name}-quick-s3"] if quick else [f"{name}-s{s}" for s in seeds]
    return [name]


def score_set(events, instances, unscored, window: tuple[datetime, datetime], background) -> dict[str, TypologyScore]:
    store = NetworkxGraphStore()
    store.add_transactions(events)
    return score_typologies(store, instances, background, window, unscored=unscored)


def summary(scores: dict[str, TypologyScore]) -> tuple[float, float]:
    """(mean recall over the typologies planted, mean precision over those planted or reported)."""
    planted = [s for s in scores.values() if s.planted]
    judged = [s for s in scores.values() if s.planted or s.findings]
    recall = statistics.mean(s.recall for s in planted) if planted else 1.0
    precision = statistics.mean(s.precision for s in judged) if judged else 1.0
    return recall, precision


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sets", default=None, help="comma-separated set names (ours-default, ours-slow, amlsim-...)")
    args = ap.parse_args(argv)
    seeds = SEEDS[:1] if args.quick else SEEDS
    names = list(SETS) if args.sets is None else args.sets.split(",")
    for name in names:
        if name not in SETS and not (DATASETS / name).is_dir():
            ap.error(f"--sets: unknown set {name!r}: expected one of {', '.join(SETS)} or a converted "
                     f"file under {DATASETS}")
    results: dict[str, list[dict[str, TypologyScore]]] = {}
    for name in names:
        runs = []
        for run in runs_of(name, seeds, args.quick):
            t0 = time.perf_counter()
            got = (load_ours(name.removeprefix("ours-"), run) if isinstance(run, int) else load_amlworld(run))
            label = f"{name} seed {run}" if isinstance(run, int) else run
            if got is None:
                log(f"[{label}] not built (bench/datasets/build.py): skipped")
                continue
            events, instances, unscored, window, background = got
            runs.append(score_set(events, instances, unscored, window, background))
            log(f"[{label}] {len(events):,} events, {len(instances)} instances, "
                f"{len(background)} background accounts ({time.perf_counter() - t0:.0f} s)")
        if runs:
            results[name] = runs

    per_set: dict[str, tuple[float, float]] = {}
    print(f"{'set':<24} {'typology':<15} {'planted':>7} {'recall':>6} {'found':>6} {'precision':>9}")
    for name, runs in results.items():
        for t in TYPOLOGIES:
            planted = sum(r[t].planted for r in runs)
            found = sum(r[t].findings for r in runs)
            if not planted and not found:
                continue
            rec = statistics.mean(r[t].recall for r in runs if r[t].planted) if planted else float("nan")
            prec = statistics.mean(r[t].precision for r in runs if r[t].findings or r[t].planted)
            print(f"{name:<24} {t:<15} {planted:7d} {rec:6.2f} {found:6d} {prec:9.2f}")
        pairs = [summary(r) for r in runs]
        per_set[name] = (statistics.mean(p[0] for p in pairs), statistics.mean(p[1] for p in pairs))
        print(f"{name:<24} {'(mean)':<15} {'':>7} {per_set[name][0]:6.2f} {'':>6} {per_set[name][1]:9.2f}")
        if len(pairs) > 1:  # the spread over seeds of the set's mean recall and precision
            print(f"{name:<24} {'(sd, seeds)':<15} {'':>7} {statistics.stdev(p[0] for p in pairs):6.2f} "
                  f"{'':>6} {statistics.stdev(p[1] for p in pairs):9.2f}")
    if not per_set:
        print("typologies recall_min=na precision_min=na sets=0")
        return 1
    print(f"typologies recall_min={min(r for r, _ in per_set.values()):.2f} "
          f"precision_min={min(p for _, p in per_set.values()):.2f} sets={len(per_set)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
