"""Model quality on every data set, with the field's reference recipe in the same run; exact SHAP
throughput on one core; the model service's latency per batch.

    python bench/model.py                 # every set at seeds 3, 5, 7 (see bench/model_sets.py)
    python bench/model.py --quick         # the small slices, seed 3 (a smoke run: its F1 is noise)
    python bench/model.py --sources generator,amlsim-weeks --seeds 3

The third-party sets come from ``python bench/datasets/build.py --source all --seeds 3,5,7`` (and
``--quick``); prepared features are cached (``bench/model_sets.py``), so a second run only trains.

(a) **Quality, per set.** :func:`model_service.evaluation.evaluate_models` on the set's temporal
    60/20/20 split, each model's threshold chosen on validation, then trained again on train +
    validation and measured once on test: ``baseline`` (the transfer's own fields), ``stream``,
    ``graph`` (stream + our graph features), ``gfp`` (the transfer's fields + IBM's Graph Feature
    Preprocessor: the public AMLworld recipe, our reference), ``gfp_stream``, ``gfp_one_hop``
    (stream + our one-hop graph features + GFP) and ``gfp_graph``.
    Beside them the **deployed model**: what ``auditflow train`` saves and the stream scores with
    (:func:`model_service.training.train_cascade` with ``screen=False`` on stream, one-hop graph and
    GFP features, as :func:`auditflow_app.flow.train` calls it; the one-hop columns are taken from
    the set's graph features, which ``AccountFeatures`` gives exactly: tested), its test F1 and PR-AUC computed here from its
    scores, whether it is the model evaluate measured (same digest), and its deep-path share where
    it screens (0: one model scoring every event). Each figure is a mean over the seeds, per source
    (its sd beside it).
(b) **Exact SHAP on one core**: the deployed model's score + float64 TreeSHAP over test rows of
    the first set, one thread; ``shap_rows_per_s``.
(c) **Service**: ``POST /score`` in batches of 100 beside the same scorer embedded, on the first
    set's deployed cascade: ``service_p99_ms``, ``embedded_p99_ms``.

Typology recall and precision: ``bench/typologies.py``'s last line (run by this script as a separate
process, on its own sets: our generator's two profiles and the AMLSim sets; ``na`` where it fails or
with ``--no-typologies``).

Last line: ``model f1_min=... f1_gfp_ref_min=... ratio_to_gfp_min=... lift_min=... pr_auc_min=...
typology_recall_min=... typology_precision_min=... deep_path_share_max=... shap_rows_per_s=...
service_p99_ms=... sets=...``: mins (max) over sources of each source's mean over seeds;
``ratio_to_gfp`` = F1(deployed) / F1(gfp), ``lift`` = F1(deployed) / F1(baseline), per source.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import model_sets  # noqa: E402
import numpy as np  # noqa: E402


def _deployed(p, seed: int):
    """The model ``auditflow train`` deploys from this set (:func:`auditflow_app.flow.train`: the
    cascade trained with ``screen=False`` on stream + one-hop graph + GFP features, one model scoring
    every event), and its test figures computed here from its own scores (sklearn's metrics, not the
    training report's)."""
    from sklearn.metrics import average_precision_score, f1_score

    from auditflow.features import (
        FEATURE_NAMES,
        GRAPH_FEATURE_DESCRIPTIONS,
        GRAPH_FEATURE_NAMES,
        ONE_HOP_GRAPH_FEATURES,
    )
    from evidence_graph.gfp_features import gfp_feature_descriptions
    from model_service.evaluation import EVAL_PARAMS
    from model_service.training import temporal_split, train_cascade

    with_features = [(ev, dict(zip(FEATURE_NAMES, row, strict=True))) for ev, row in zip(p.events, p.raw.tolist(),
                                                                                          strict=True)]
    graph = np.hstack([p.graph[:, [GRAPH_FEATURE_NAMES.index(n) for n in ONE_HOP_GRAPH_FEATURES]], p.reference])
    cascade, report = train_cascade(with_features, lambda ev: {}, (*ONE_HOP_GRAPH_FEATURES, *p.reference_names),
                                    {**GRAPH_FEATURE_DESCRIPTIONS, **gfp_feature_descriptions()}, seed=seed,
                                    screen=False, deep_params=EVAL_PARAMS, graph_matrix=graph)
    _, _, te = temporal_split(p.events)
    y = np.array([p.events[i].is_laundering for i in te.tolist()], dtype=np.int64)
    passed = cascade.is_candidate(cascade.fast_score_batch(p.raw[te]))
    scores = np.zeros(len(te))
    idx = te[passed]
    if idx.size:
        scores[passed] = cascade.alert_model.predict_proba(np.hstack([cascade.input_map.matrix(p.raw[idx]),
                                                                      graph[idx]]))
    flags = passed & (scores >= cascade.alert_threshold)
    screened = cascade.candidate_threshold > 0  # a cascade that screens: its deep-path share counts
    return cascade, graph, {
        "f1": float(f1_score(y, flags, zero_division=0)),
        "pr_auc": float(average_precision_score(y, scores)),
        "deep_path_share": float(passed.mean()) if screened else 0.0,
        "stages": 2 if screened else 1,
        "digest": cascade.alert_model.digest,
    }


def _mean_sd(xs):
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def _typology_figures(quick: bool) -> dict[str, float] | None:
    """``bench/typologies.py``'s last line (its own sets: our generator's profiles and the AMLSim
    sets), run as a separate process; None where it fails."""
    import subprocess

    cmd = [sys.executable, str(Path(__file__).resolve().parent / "typologies.py"), *(["--quick"] if quick else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not last.startswith("typologies "):
        print(f"  typologies: bench/typologies.py failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
        return None
    print(f"  typologies (bench/typologies.py): {last}")
    fields = dict(kv.split("=", 1) for kv in last.split()[1:])
    return {"recall_min": float(fields["recall_min"]), "precision_min": float(fields["precision_min"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sources", default=",".join(model_sets.SOURCES))
    ap.add_argument("--seeds", default=None, help="default 3,5,7 (--quick: 3)")
    ap.add_argument("--no-typologies", action="store_true", help="leave typology recall and precision out")
    args = ap.parse_args()
    q = args.quick
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    unknown = [s for s in sources if s not in model_sets.SOURCES]
    if unknown or not sources:  # argparse's error: one line, exit 2
        ap.error(f"--sources={args.sources!r}: unknown {unknown}; expected some of {list(model_sets.SOURCES)}")
    try:
        seeds = [int(s) for s in (args.seeds or ("3" if q else "3,5,7")).split(",")]
    except ValueError:
        ap.error(f"--seeds={args.seeds!r}: expected whole numbers separated by commas, e.g. 3,5,7")
    missing = model_sets.missing_sets(sources, seeds, q)
    if missing:
        ap.error(f"missing data sets ({', '.join(m.parent.name for m in missing)}); make them with: python "
                 f"bench/datasets/build.py --source all --seeds {','.join(map(str, seeds))}{' --quick' if q else ''}")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    from auditflow.features import GRAPH_FEATURE_DESCRIPTIONS
    from auditflow_app.flow import DEPLOYED_MODEL
    from evidence_graph.gfp_features import gfp_feature_descriptions
    from model_service.evaluation import evaluate_models

    descriptions = {**GRAPH_FEATURE_DESCRIPTIONS, **gfp_feature_descriptions()}

    print(f"model ({'quick' if q else 'full'}; sources {', '.join(sources)}; seeds {seeds})")
    per: dict[str, dict[str, list[float]]] = {}
    skipped: list[str] = []
    mismatched: list[str] = []
    first = None
    for source in sources:
        for seed in seeds:
            t0 = time.perf_counter()
            p = model_sets.prepare(source, seed, q)
            prep_s = time.perf_counter() - t0
            try:  # with the descriptions auditflow evaluate gives (they are in the model's bytes)
                rep = evaluate_models(p.events, p.stream, p.graph, seed, reference_rows=p.reference,
                                      reference_names=p.reference_names, graph_descriptions=descriptions)
            except ValueError as e:  # a split without laundering (small slices): nothing to measure
                print(f"  {p.name}: {len(p.events):,} transfers: skipped ({e})")
                skipped.append(p.name)
                continue
            cascade, graph, dep = _deployed(p, seed)
            if first is None:
                first = (p, rep, cascade, graph)
            n_test = rep.split_events["test"]
            print(f"  {p.name}: {len(p.events):,} transfers, {rep.split_positives['test']} laundering in test of "
                  f"{n_test:,}; prepared in {prep_s:.0f} s (features: stream {p.seconds['stream']:.0f} s, ours "
                  f"{p.seconds['graph']:.0f} s, GFP {p.seconds['gfp']:.0f} s when computed)")
            fig = per.setdefault(source, {})
            for m in rep.models:
                print(f"    {m.name:<10} F1 {m.test.f1:.3f}  P {m.test.precision:.3f}  R {m.test.recall:.3f}  "
                      f"PR-AUC {m.pr_auc:.3f}  P@{rep.budget_per_10k:g}/10k {m.precision_at_budget:.3f}  "
                      f"screen@95% {m.screen_rate:.3f} (recall {m.screen_recall:.2f})")
                fig.setdefault(f"{m.name}.f1", []).append(m.test.f1)
                fig.setdefault(f"{m.name}.pr_auc", []).append(m.pr_auc)
                fig.setdefault(f"{m.name}.screen_rate", []).append(m.screen_rate)
            same = dep["digest"] == rep.model(DEPLOYED_MODEL).digest
            print(f"    deployed   F1 {dep['f1']:.3f}  PR-AUC {dep['pr_auc']:.3f}  {dep['stages']} stage(s), "
                  f"deep-path share {dep['deep_path_share']:.3f}; the model evaluate measured as "
                  f"{DEPLOYED_MODEL}: {'yes (same digest)' if same else 'NO'}")
            if not same:
                mismatched.append(p.name)
            for k in ("f1", "pr_auc", "deep_path_share"):
                fig.setdefault(f"deployed.{k}", []).append(dep[k])

    print("  per source, mean (sd) over seeds:")
    head_rows = []
    for source, fig in per.items():
        m = {k: _mean_sd(v) for k, v in fig.items()}
        cols = ("baseline", "stream", "graph", "gfp", "gfp_stream", "gfp_one_hop", "gfp_graph", "deployed")
        print(f"    {source:<17} " + "  ".join(f"{c} {m[c + '.f1'][0]:.3f} ({m[c + '.f1'][1]:.3f})" for c in cols))
        gfp, base, dep = m["gfp.f1"][0], m["baseline.f1"][0], m["deployed.f1"][0]
        head_rows.append({
            "f1": dep, "gfp": gfp, "ratio": dep / gfp if gfp > 0 else float("inf"),
            "lift": dep / base if base > 0 else float("inf"), "pr_auc": m["deployed.pr_auc"][0],
            "deep": m["deployed.deep_path_share"][0],
        })

    # (b) exact SHAP, one core, on the deployed model's test rows of the first set
    from model_service.evaluation import EVAL_PARAMS
    from model_service.scorer import GradientBoostedScorer
    from model_service.training import temporal_split

    p, rep, cascade, graph = first
    _, _, te = temporal_split(p.events)
    X = np.hstack([cascade.input_map.matrix(p.raw), graph])
    names = cascade.deep_feature_names
    one = GradientBoostedScorer.from_bytes(cascade.alert_model.to_bytes(), nthread=1)  # the same trees, one thread
    Xt = X[te][: 2000 if q else 5000]
    one.explain(Xt[:10])  # compile the TreeSHAP kernel
    t0 = time.perf_counter()
    one.predict_proba(Xt)
    expl = one.explain(Xt)  # additivity is checked for every row inside
    shap_rps = len(Xt) / (time.perf_counter() - t0)
    gap = float(np.abs(expl.values.sum(1) + expl.expected_value - expl.margin).max())
    print(f"  exact SHAP + score, one core, the deployed model ({p.name}): {shap_rps:,.0f} rows/s over "
          f"{len(Xt):,} rows ({len(names)} features, {EVAL_PARAMS.n_estimators} trees of depth <= "
          f"{EVAL_PARAMS.max_depth}); max additivity gap {gap:.1e}")

    # (c) the service, batches of 100, on the first set's deployed cascade
    from fastapi.testclient import TestClient

    from auditflow.features import FEATURE_NAMES
    from model_service.service import CascadeScorer, create_app

    rows = [(p.events[i].event_id, dict(zip(FEATURE_NAMES, p.raw[i].tolist(), strict=True)),
             dict(zip(cascade.graph_feature_names, graph[i].tolist(), strict=True))) for i in te.tolist()]
    batches = [rows[i:i + 100] for i in range(0, len(rows) - 99, 100)][: 30 if q else 100]
    scorer = CascadeScorer(cascade)
    times, embedded = [], []
    with TestClient(create_app(scorer, batch_wait_ms=0.0)) as client:
        def post(batch):
            body = {"rows": [{"event_id": e, "stream": f, "graph": g} for e, f, g in batch]}
            t = time.perf_counter()
            r = client.post("/score", json=body)
            assert r.status_code == 200, r.text
            return (time.perf_counter() - t) * 1000

        def direct(batch):
            t = time.perf_counter()
            scorer.score(batch, explain="alerts")
            return (time.perf_counter() - t) * 1000

        for b in batches[:3]:
            post(b)
            direct(b)
        for b in batches:
            times.append(post(b))
            embedded.append(direct(b))
    p99, e99 = float(np.percentile(times, 99)), float(np.percentile(embedded, 99))
    print(f"  service: {len(times)} batches of 100, p99 {p99:.1f} ms; embedded p99 {e99:.1f} ms")

    typ = None if args.no_typologies else _typology_figures(q)

    if mismatched:
        print(f"  the deployed model differs from the evaluated one on {mismatched}")

    def fmt(x, d=3):
        return "inf" if not np.isfinite(x) else f"{x:.{d}f}"

    head = {
        "f1_min": fmt(min(r["f1"] for r in head_rows)),
        "f1_gfp_ref_min": fmt(min(r["gfp"] for r in head_rows)),
        "ratio_to_gfp_min": fmt(min(r["ratio"] for r in head_rows), 2),
        "lift_min": fmt(min(r["lift"] for r in head_rows), 2),
        "pr_auc_min": fmt(min(r["pr_auc"] for r in head_rows)),
        "typology_recall_min": "na" if typ is None else fmt(typ["recall_min"], 2),
        "typology_precision_min": "na" if typ is None else fmt(typ["precision_min"], 2),
        "deep_path_share_max": fmt(max(r["deep"] for r in head_rows)),
        "shap_rows_per_s": f"{shap_rps:.0f}",
        "service_p99_ms": f"{p99:.1f}",
        "sets": str(len(sources) * len(seeds) - len(skipped)),
        "deployed_is_evaluated": "no" if mismatched else "yes",
    }
    print("model " + " ".join(f"{k}={v}" for k, v in head.items()))


if __name__ == "__main__":
    main()
