"""Model quality and speed: the three feature families side by side, exact SHAP throughput on one
core, and the model service's latency per batch.

    python bench/model.py            # 1,600 accounts x 14 days (~100k transfers, ~150 laundering
                                     # in test), and the slow profile over 21 days (~7 min)
    python bench/model.py --quick    # 250 accounts x 10 days, the default profile (a smoke run: a
                                     # dozen laundering transfers in test, its F1 is noise)
    python bench/model.py --accounts N --days D   # another size for the default profile

(a) **Quality**: :func:`ingest.synthetic.generate` (legitimate look-alikes in the background,
    ``laundering_rate`` 1%), stream features, graph features as of each transfer, then
    :func:`model_service.evaluation.evaluate_models` on the temporal 60/20/20 split (each model's
    threshold chosen on validation, the model then trained again on train + validation and measured
    once on test): minority-class F1 on test with the no-graph baseline (the transfer's own
    fields), stream features only, and stream + graph features, PR-AUC of the graph model;
    ``lift`` = F1 graph / F1 baseline. The full run also evaluates the ``slow`` laundering
    profile (days-to-weeks patterns, other sizes and amounts) and prints it; the last line reports
    the default profile.
(b) **Exact SHAP on one core**: the graph model's score + float64 TreeSHAP (the per-leaf-table
    kernel of :mod:`model_service.treeshap`; additivity checked for every row) over test rows, one
    thread (numba and xgboost); ``shap_rows_per_s``. Then both exact kernels (Algorithm 2 and the
    tables) on the same rows, SHAP only: ``shap_table_speedup``.
(c) **Service**: ``POST /score`` through FastAPI's in-process client, batches of 100 rows of the
    test split (stream + graph features, ``explain=alerts``), one at a time after a warm-up; p50
    and p99 per batch (``service_p99_ms``), on a cascade trained on the same data. Batch by batch
    beside it, the same scorer embedded (:meth:`CascadeScorer.score` called in process, as the
    deep path embeds the cascade): ``embedded_p99_ms`` and ``service_over_embedded`` (p50 ratio),
    what the HTTP round trip and JSON cost on top of the same work.

Last line: ``model f1_graph=... f1_stream_only=... f1_baseline=... lift=... pr_auc=...
shap_rows_per_s=... service_p99_ms=... shap_table_speedup=... embedded_p99_ms=...
service_over_embedded=...``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402


def _data(accounts: int, days: int, profile: str, seed: int):
    from auditflow.features import model_inputs
    from evidence_graph.graph_features import graph_feature_rows
    from ingest.synthetic import generate
    from pipelines.features import compute_features

    ds = generate(accounts=accounts, days=days, laundering_rate=0.01, seed=seed, profile=profile)
    rows = compute_features(ds.events)
    events = [ev for ev, _ in rows]
    t0 = time.perf_counter()
    graph = graph_feature_rows(events)
    gf_ms = (time.perf_counter() - t0) * 1000 / max(1, len(events))
    return events, rows, [model_inputs(f) for _, f in rows], graph, gf_ms


def _quality(events, stream, graph, seed):
    from model_service.evaluation import evaluate_models

    return evaluate_models(events, stream, graph, seed)


def _print_quality(label: str, n: int, gf_ms: float, rep) -> None:
    print(f"  {label}: {n:,} transfers ({rep.split_positives['test']} laundering in test), "
          f"graph features {gf_ms:.2f} ms/transfer")
    for m in rep.models:
        print(f"    {m.name:<9} F1 {m.test.f1:.3f}  P {m.test.precision:.3f}  R {m.test.recall:.3f}  "
              f"PR-AUC {m.pr_auc:.3f}  P@{rep.budget_per_10k:g}/10k {m.precision_at_budget:.3f}")
    print(f"    lift (F1 graph / F1 baseline) {rep.lift:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--accounts", type=int, default=None, help="accounts of the default profile's data set")
    ap.add_argument("--days", type=int, default=None, help="days of the default profile's data set")
    args = ap.parse_args()
    q = args.quick
    accounts, days = (250, 10) if q else (1600, 14)  # full: enough positives in test for F1 to mean something
    accounts, days = args.accounts or accounts, args.days or days

    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    events, rows, stream, graph, gf_ms = _data(accounts, days, "default", args.seed)
    print(f"model ({'quick' if q else 'full'}, seed {args.seed})")
    rep = _quality(events, stream, graph, args.seed)
    _print_quality("default profile", len(events), gf_ms, rep)
    if not q:
        s_events, _, s_stream, s_graph, s_ms = _data(250, 21, "slow", args.seed + 1)
        _print_quality("slow profile", len(s_events), s_ms, _quality(s_events, s_stream, s_graph, args.seed))

    # (b) exact SHAP, one core, on the graph model's test rows
    from auditflow.features import GRAPH_FEATURE_NAMES, MODEL_STREAM_FEATURES
    from model_service.evaluation import EVAL_PARAMS
    from model_service.scorer import BoosterParams, GradientBoostedScorer, feature_matrix
    from model_service.training import temporal_split

    tr, _, te = temporal_split(events)
    y = np.array([ev.is_laundering for ev in events], dtype=np.int64)
    names = (*MODEL_STREAM_FEATURES, *GRAPH_FEATURE_NAMES)
    X = np.hstack([feature_matrix(stream, MODEL_STREAM_FEATURES), feature_matrix(graph, GRAPH_FEATURE_NAMES)])
    one = BoosterParams(**{**asdict(EVAL_PARAMS), "nthread": 1})
    model = GradientBoostedScorer(names, one).fit(X[tr], y[tr], seed=args.seed)
    Xt = X[te][: 2000 if q else 5000]
    model.explain(Xt[:10])  # compile the TreeSHAP kernel
    t0 = time.perf_counter()
    model.predict_proba(Xt)
    expl = model.explain(Xt)  # additivity is checked for every row inside
    shap_s = time.perf_counter() - t0
    gap = float(np.abs(expl.values.sum(1) + expl.expected_value - expl.margin).max())
    shap_rps = len(Xt) / shap_s
    print(f"  exact SHAP + score, one core: {shap_rps:,.0f} rows/s over {len(Xt):,} rows "
          f"({len(names)} features, {EVAL_PARAMS.n_estimators} trees of depth <= {EVAL_PARAMS.max_depth}); "
          f"max additivity gap {gap:.1e}")
    # the two exact kernels side by side on the same rows (SHAP only, no scoring)
    from model_service.treeshap import TreeEnsemble

    ens = TreeEnsemble.from_booster(model.booster)
    kernel_s = {}
    for algorithm in ("paths", "tables"):
        ens.shap_values(Xt[:10], algorithm=algorithm)  # compiled
        t0 = time.perf_counter()
        phi, _ = ens.shap_values(Xt, algorithm=algorithm)
        kernel_s[algorithm] = time.perf_counter() - t0
        if algorithm == "paths":
            ref = phi
    table_speedup = kernel_s["paths"] / kernel_s["tables"]
    print(f"  TreeSHAP kernels: Algorithm 2 {len(Xt) / kernel_s['paths']:,.0f} rows/s, per-leaf tables "
          f"{len(Xt) / kernel_s['tables']:,.0f} rows/s ({table_speedup:.2f}x); "
          f"largest difference {float(np.abs(phi - ref).max()):.1e}")

    # (c) the service, batches of 100
    from fastapi.testclient import TestClient

    from auditflow.features import GRAPH_FEATURE_DESCRIPTIONS
    from model_service.service import CascadeScorer, create_app
    from model_service.training import train_cascade

    by_id = {ev.event_id: g for ev, g in zip(events, graph)}
    cascade, report = train_cascade(rows, lambda ev: by_id[ev.event_id], GRAPH_FEATURE_NAMES,
                                    GRAPH_FEATURE_DESCRIPTIONS, seed=args.seed)
    print(f"  cascade: {report.stage_choice}")
    test_rows = [rows[i] for i in te.tolist()]
    batches = [test_rows[i:i + 100] for i in range(0, len(test_rows) - 99, 100)][: 30 if q else 100]
    times, embedded = [], []
    scorer = CascadeScorer(cascade)
    with TestClient(create_app(scorer, batch_wait_ms=0.0)) as client:
        def post(batch):
            body = {"rows": [{"event_id": ev.event_id, "stream": f, "graph": by_id[ev.event_id]} for ev, f in batch]}
            t = time.perf_counter()
            r = client.post("/score", json=body)
            assert r.status_code == 200, r.text
            return (time.perf_counter() - t) * 1000

        def direct(batch):  # the same scorer embedded, as the deep path runs it: no HTTP, no JSON
            rows_ = [(ev.event_id, f, by_id[ev.event_id]) for ev, f in batch]
            t = time.perf_counter()
            scorer.score(rows_, explain="alerts")
            return (time.perf_counter() - t) * 1000

        for b in batches[:3]:
            post(b)
            direct(b)
        for b in batches:  # side by side, batch by batch
            times.append(post(b))
            embedded.append(direct(b))
    p50, p99 = float(np.percentile(times, 50)), float(np.percentile(times, 99))
    e50, e99 = float(np.percentile(embedded, 50)), float(np.percentile(embedded, 99))
    print(f"  service: {len(times)} batches of 100, p50 {p50:.1f} ms, p99 {p99:.1f} ms; the same scorer "
          f"embedded: p50 {e50:.1f} ms, p99 {e99:.1f} ms (the service costs {p50 / e50:.1f}x at p50)")

    f1 = {m.name: m.test.f1 for m in rep.models}
    lift = rep.lift
    head = {
        "f1_graph": f"{f1['graph']:.3f}",
        "f1_stream_only": f"{f1['stream']:.3f}",
        "f1_baseline": f"{f1['baseline']:.3f}",
        "lift": f"{lift:.2f}" if np.isfinite(lift) else "inf",
        "pr_auc": f"{rep.model('graph').pr_auc:.3f}",
        "shap_rows_per_s": f"{shap_rps:.0f}",
        "service_p99_ms": f"{p99:.1f}",
        "shap_table_speedup": f"{table_speedup:.2f}",
        "embedded_p99_ms": f"{e99:.1f}",
        "service_over_embedded": f"{p50 / e50:.2f}",
    }
    print("model " + " ".join(f"{k}={v}" for k, v in head.items()))


if __name__ == "__main__":
    main()
