"""The one-hop graph features two ways, side by side in one run: kept per account as events come
(:class:`evidence_graph.account_features.AccountFeatures`, what training and the deep path use) and
queried per transfer from a graph store (:func:`evidence_graph.graph_features.graph_features`, the
reference, which computes every graph feature, the multi-hop ones too: what the deep path ran per
event before). Both on the same events; the one-hop values are checked equal on every sampled row.

    python bench/account_features.py            # our generator (dense), 3 seeds; the AMLSim and
                                                # synthfin sets of bench/datasets where built
    python bench/account_features.py --quick    # one small generator set

Last line: ``account_features events_per_s_min=... speedup_min=... mismatches=... sets=...``
(min over sets; ``speedup`` = incremental events/s over the store's, in the same run).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATASETS = Path(__file__).resolve().parents[1] / ".cache" / "datasets"


def _sets(quick: bool):
    from ingest.synthetic import generate

    if quick:
        yield "generator-quick-s3", list(generate(accounts=120, days=30, laundering_rate=0.01, seed=3).events)
        return
    for seed in (3, 5, 7):
        yield f"generator-s{seed}", list(generate(accounts=300, days=35, laundering_rate=0.01, seed=seed).events)
    from auditflow.records import TransactionEvent
    from ingest.amlworld import read_transactions

    for name in ("amlsim-days-s3", "amlsim-weeks-s3", "synthfin-default-s3"):
        path = DATASETS / name / f"{name}_Trans.csv"
        if path.exists():
            yield name, [e for e in read_transactions(path) if isinstance(e, TransactionEvent)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sample", type=int, default=None, help="rows the store computes (default 1500; quick 300)")
    args = ap.parse_args()
    from auditflow.features import ONE_HOP_GRAPH_FEATURES
    from evidence_graph.account_features import AccountFeatures
    from evidence_graph.embedded import NetworkxGraphStore
    from evidence_graph.graph_features import graph_features
    from pipelines.features import event_order

    sample = args.sample or (300 if args.quick else 1500)
    rates, speedups, bad, n_sets = [], [], 0, 0
    for name, events in _sets(args.quick):
        events.sort(key=event_order)
        t0 = time.perf_counter()
        rows = AccountFeatures().rows(events)
        inc_rate = len(events) / (time.perf_counter() - t0)
        store = NetworkxGraphStore()
        store.add_transactions(events)  # a feature sees only strictly earlier minutes: the whole graph will do
        picked = sorted(random.Random(1).sample(range(len(events)), min(sample, len(events))))
        t0 = time.perf_counter()
        ref = [graph_features(store, events[i]) for i in picked]
        store_rate = len(picked) / (time.perf_counter() - t0)
        wrong = sum(1 for i, r in zip(picked, ref, strict=True) for k in ONE_HOP_GRAPH_FEATURES if rows[i][k] != r[k])
        bad += wrong
        rates.append(inc_rate)
        speedups.append(inc_rate / store_rate)
        n_sets += 1
        print(f"  {name}: {len(events):,} events; incremental {inc_rate:,.0f} events/s, store {store_rate:,.0f} "
              f"events/s over {len(picked):,} ({inc_rate / store_rate:.1f}x); {wrong} values differ")
    print(f"account_features events_per_s_min={min(rates):.0f} speedup_min={min(speedups):.1f} "
          f"mismatches={bad} sets={n_sets}")


if __name__ == "__main__":
    main()
