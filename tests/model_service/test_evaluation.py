"""Honest evaluation: metrics on hand-made cases and recomputed by hand; the three feature
families on two generator configurations (pattern sizes, durations from hours to weeks, amounts);
nothing depends on the hour of day (shifting every timestamp by 5 hours changes no model)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_score, recall_score

from auditflow.features import (
    BASELINE_FEATURES,
    GRAPH_FEATURE_NAMES,
    MODEL_STREAM_FEATURES,
    ONE_HOP_GRAPH_FEATURES,
    model_inputs,
)
from evidence_graph.graph_features import graph_feature_rows
from ingest.synthetic import generate
from model_service import BinaryMetrics, temporal_split
from model_service.evaluation import evaluate_models, precision_at_budget
from model_service.scorer import GradientBoostedScorer, feature_matrix
from model_service.training import best_f1_threshold
from pipelines.features import compute_features

from .conftest import SMALL


def test_binary_metrics_against_sklearn():
    rng = np.random.default_rng(5)
    for _ in range(20):
        y = rng.random(200) < 0.1
        f = rng.random(200) < 0.15
        m = BinaryMetrics.of(f, y)
        assert m.f1 == pytest.approx(f1_score(y, f, zero_division=0))
        assert m.precision == pytest.approx(precision_score(y, f, zero_division=0))
        assert m.recall == pytest.approx(recall_score(y, f, zero_division=0))


def test_precision_at_budget_by_hand():
    scores = np.array([0.1, 0.9, 0.8, 0.7, 0.2, 0.6, 0.05, 0.3, 0.4, 0.5])
    labels = np.array([0, 1, 0, 1, 0, 1, 0, 0, 0, 0])
    assert precision_at_budget(scores, labels, 3000) == (pytest.approx(2 / 3), 3)  # 0.9, 0.8, 0.7
    assert precision_at_budget(scores, labels, 4000) == (0.75, 4)
    assert precision_at_budget(scores, labels, 1) == (1.0, 1)  # at least one alert
    assert precision_at_budget(np.empty(0), np.empty(0), 20) == (0.0, 0)


def prepared(profile: str, days: int, shift_hours: int = 0):
    ds = generate(accounts=90, days=days, laundering_rate=0.04, seed=21, profile=profile)
    events = [dataclasses.replace(e, timestamp=e.timestamp + timedelta(hours=shift_hours)) for e in ds.events]
    rows = compute_features(events)
    ordered = [ev for ev, _ in rows]
    return ordered, [model_inputs(f) for _, f in rows], graph_feature_rows(ordered)


@pytest.fixture(scope="module")
def default_data():
    return prepared("default", 6)


@pytest.mark.parametrize("profile,days", [("default", 6), ("slow", 14)])
def test_three_families_on_two_generator_configurations(profile, days, default_data):
    events, stream, graph = default_data if profile == "default" else prepared(profile, days)
    report = evaluate_models(events, stream, graph, seed=3, params=SMALL, budget_per_10k=100)
    assert [m.name for m in report.models] == ["baseline", "stream", "graph"]
    assert [m.n_features for m in report.models] == [
        len(BASELINE_FEATURES), len(MODEL_STREAM_FEATURES), len(MODEL_STREAM_FEATURES) + len(GRAPH_FEATURE_NAMES)]
    _, _, test = temporal_split(events)
    y = np.array([events[i].is_laundering for i in test])
    assert report.split_events["test"] == test.size and report.split_positives["test"] == y.sum() > 0
    for m in report.models:  # every test figure recomputed by hand from the model's test scores
        s = m.test_scores
        flags = s >= m.threshold
        tp = int((flags & y).sum())
        assert (m.test.flagged, m.test.true_positives, m.test.positives) == (int(flags.sum()), tp, int(y.sum()))
        assert m.test.f1 == pytest.approx(2 * tp / (flags.sum() + y.sum()))
        k = int(np.ceil(100 * test.size / 10_000))
        assert m.budget_alerts == k
        assert m.precision_at_budget == pytest.approx(y[np.argsort(-s, kind="stable")[:k]].mean())
        assert 0 <= m.pr_auc <= 1


def test_no_model_depends_on_the_hour_of_day(default_data):
    events, stream, graph = default_data
    shifted = prepared("default", 6, shift_hours=5)
    assert [e.timestamp.hour for e in shifted[0][:50]] != [e.timestamp.hour for e in events[:50]]
    a = evaluate_models(events, stream, graph, seed=3, params=SMALL)
    b = evaluate_models(*shifted, seed=3, params=SMALL)
    assert [m.digest for m in a.models] == [m.digest for m in b.models]
    assert a.to_dict() == b.to_dict()


def test_the_measured_model_is_trained_on_train_and_validation_at_the_validation_threshold(default_data):
    events, stream, graph = default_data
    train, validation, test = temporal_split(events)
    y = np.array([e.is_laundering for e in events], dtype=np.int64)
    X = feature_matrix(stream, MODEL_STREAM_FEATURES)[:, [MODEL_STREAM_FEATURES.index(n) for n in BASELINE_FEATURES]]
    first = GradientBoostedScorer(BASELINE_FEATURES, SMALL).fit(X[train], y[train], seed=3)
    threshold, _ = best_f1_threshold(first.predict_proba(X[validation]), y[validation])
    seen = np.concatenate([train, validation])
    deployed = GradientBoostedScorer(BASELINE_FEATURES, SMALL).fit(X[seen], y[seen], seed=3)
    # as a screen: the threshold under which 5% of validation's laundering falls (by hand: the
    # ceil(0.95 P)-th highest validation positive), applied to the measured model's test scores
    va_pos = sorted(first.predict_proba(X[validation])[y[validation] == 1].tolist(), reverse=True)
    screen = va_pos[-(-95 * len(va_pos) // 100) - 1]
    for refit, model in ((True, deployed), (False, first)):
        base = evaluate_models(events, stream, graph, seed=3, params=SMALL, refit=refit).model("baseline")
        assert base.refit is refit and base.threshold == threshold
        te = model.predict_proba(X[test]).tolist()
        assert base.test_scores.tolist() == te
        assert base.screen_rate == sum(s >= screen for s in te) / len(te)
        pos = [s for s, label in zip(te, y[test].tolist(), strict=True) if label]
        assert base.screen_recall == sum(s >= screen for s in pos) / len(pos)


def test_reference_features_add_the_gfp_models_fitted_on_their_columns(default_data):
    """Given reference graph features (here two columns made up for the test: the sender's
    transfers so far and a constant), the report adds ``gfp`` (the transfer's own fields + the
    reference columns) and ``gfp_graph`` (everything), each the model a fit by hand on exactly
    those columns gives, at its validation threshold."""
    events, stream, graph = default_data
    seen_by: dict[str, int] = {}  # by node id
    reference = []
    for e in events:
        reference.append({"ref_sender_so_far": float(seen_by.get(e.sender.node_id, 0)), "ref_constant": 1.0})
        seen_by[e.sender.node_id] = seen_by.get(e.sender.node_id, 0) + 1
    names = ("ref_sender_so_far", "ref_constant")
    report = evaluate_models(events, stream, graph, seed=3, params=SMALL, reference_rows=reference,
                             reference_names=names)
    assert [m.name for m in report.models] == ["baseline", "stream", "graph", "gfp", "gfp_stream", "gfp_one_hop",
                                               "gfp_graph"]
    train, validation, test = temporal_split(events)
    y = np.array([e.is_laundering for e in events], dtype=np.int64)
    S = feature_matrix(stream, MODEL_STREAM_FEATURES)
    base = S[:, [MODEL_STREAM_FEATURES.index(n) for n in BASELINE_FEATURES]]
    R = np.array([[r[n] for n in names] for r in reference])
    G = feature_matrix(graph, GRAPH_FEATURE_NAMES)
    for model_name, cols, X in (("gfp", (*BASELINE_FEATURES, *names), np.hstack([base, R])),
                                ("gfp_stream", (*MODEL_STREAM_FEATURES, *names), np.hstack([S, R])),
                                ("gfp_one_hop", (*MODEL_STREAM_FEATURES, *ONE_HOP_GRAPH_FEATURES, *names),
                                 np.hstack([S, feature_matrix(graph, ONE_HOP_GRAPH_FEATURES), R])),
                                ("gfp_graph", (*MODEL_STREAM_FEATURES, *GRAPH_FEATURE_NAMES, *names),
                                 np.hstack([S, G, R]))):
        first = GradientBoostedScorer(cols, SMALL).fit(X[train], y[train], seed=3)
        threshold, _ = best_f1_threshold(first.predict_proba(X[validation]), y[validation])
        seen = np.concatenate([train, validation])
        deployed = GradientBoostedScorer(cols, SMALL).fit(X[seen], y[seen], seed=3)
        m = report.model(model_name)
        assert m.n_features == len(cols) and m.threshold == threshold
        assert m.test_scores.tolist() == deployed.predict_proba(X[test]).tolist()
    as_array = evaluate_models(events, stream, graph, seed=3, params=SMALL, reference_rows=R, reference_names=names)
    assert [m.test_scores.tolist() for m in as_array.models] == [m.test_scores.tolist() for m in report.models]
    with pytest.raises(ValueError, match="reference_rows"):
        evaluate_models(events, stream, graph, seed=3, params=SMALL, reference_rows=reference[:-1],
                        reference_names=names)
    with pytest.raises(ValueError, match="reference_rows"):
        evaluate_models(events, stream, graph, seed=3, params=SMALL, reference_rows=R[:, :1], reference_names=names)
    # without our graph features: the four models that do not use them, each fitted as above, and
    # gfp_one_hop (the model `train` deploys) where its columns come alone, as the demo trains it
    lean = evaluate_models(events, stream, None, seed=3, params=SMALL, reference_rows=R, reference_names=names)
    assert [m.name for m in lean.models] == ["baseline", "stream", "gfp", "gfp_stream"]
    one_hop = [{k: r[k] for k in ONE_HOP_GRAPH_FEATURES} for r in graph]
    alone = evaluate_models(events, stream, None, seed=3, params=SMALL, reference_rows=R, reference_names=names,
                            one_hop_rows=one_hop)
    assert [m.name for m in alone.models] == ["baseline", "stream", "gfp", "gfp_stream", "gfp_one_hop"]
    assert alone.model("gfp_one_hop").digest == report.model("gfp_one_hop").digest
    with pytest.raises(ValueError, match="one_hop_rows"):
        evaluate_models(events, stream, None, seed=3, params=SMALL, reference_rows=R, reference_names=names,
                        one_hop_rows=one_hop[:-1])
    assert lean.to_dict()["lift"] is None  # no graph model: no lift to state
    for m in lean.models:
        assert m.digest == report.model(m.name).digest
        assert m.test_scores.tolist() == report.model(m.name).test_scores.tolist()
