"""Reason codes: exact TreeSHAP against a brute-force Shapley enumeration, additivity within 1e-6 for
every row, the versioned feature -> sentence mapping with domain units, and determinism."""

from __future__ import annotations

import json
from itertools import combinations
from math import factorial, log

import numpy as np
import pytest
import xgboost as xgb

from auditflow.features import FORMAT_FEATURES, GRAPH_FEATURE_NAMES, MODEL_STREAM_FEATURES
from auditflow.reasons import REASONS_VERSION, TEMPLATES, reason_text
from model_service import BoosterParams, GradientBoostedScorer


def brute_force_shap(booster: xgb.Booster, x: np.ndarray) -> tuple[np.ndarray, float]:
    """Shapley values of the path-dependent value function, by enumerating every subset, read
    straight from the model's JSON (covers weight the branches a missing feature could take)."""
    model = json.loads(bytes(booster.save_raw(raw_format="json")))["learner"]
    trees = model["gradient_booster"]["model"]["trees"]
    base = float(np.float32(model["learner_model_param"]["base_score"].strip("[]")))
    x32 = x.astype(np.float32)

    def value(t, node, S):
        left, right = t["left_children"][node], t["right_children"][node]
        if left == -1:
            return t["split_conditions"][node]
        f = t["split_indices"][node]
        if f in S:
            v = x32[f]
            go = t["default_left"][node] if np.isnan(v) else v < np.float32(t["split_conditions"][node])
            return value(t, left if go else right, S)
        c = t["sum_hessian"]
        return (c[left] * value(t, left, S) + c[right] * value(t, right, S)) / c[node]

    M = x.size
    f = {S: log(base / (1 - base)) + sum(value(t, 0, S) for t in trees)
         for k in range(M + 1) for S in map(frozenset, combinations(range(M), k))}
    phi = np.zeros(M)
    for i in range(M):
        for S, fs in f.items():
            if i not in S:
                phi[i] += factorial(len(S)) * factorial(M - len(S) - 1) / factorial(M) * (f[S | {i}] - fs)
    return phi, f[frozenset()]


@pytest.fixture(scope="module")
def scorer():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 4))
    y = ((X[:, 0] + X[:, 1] * X[:, 2] - 0.5 * X[:, 3]) > 0.7).astype(int)
    return GradientBoostedScorer(["a", "b", "c", "d"], BoosterParams(n_estimators=12, max_depth=4, nthread=1)).fit(X, y, seed=2)


def test_tree_shap_equals_brute_force_shapley(scorer):
    rng = np.random.default_rng(8)
    X = rng.normal(scale=1.5, size=(25, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    expl = scorer.explain(X, cross_check=True)
    for i, x in enumerate(X):
        phi, baseline = brute_force_shap(scorer.booster, x)
        # (leaf values: float32 in the model, their JSON text here: they differ below 1e-8)
        assert np.abs(expl.values[i] - phi).max() < 1e-7
        assert expl.expected_value == pytest.approx(baseline, abs=1e-7)


def test_additivity_within_1e6_for_every_row_of_a_large_model():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 12))
    y = (X[:, 0] * X[:, 1] + X[:, 2] > 0.8).astype(int)
    s = GradientBoostedScorer([f"f{i}" for i in range(12)], BoosterParams(n_estimators=150, max_depth=6, nthread=1)).fit(X, y, seed=1)
    rows = rng.normal(scale=3, size=(400, 12))
    e = s.explain(rows)
    margin = s.booster.predict(xgb.DMatrix(rows.astype(np.float32), feature_names=list(s.feature_names)), output_margin=True)
    assert np.abs(e.values.sum(1) + e.expected_value - e.margin).max() < 1e-6  # exact, every row
    assert np.abs(e.margin - margin).max() < 1e-4  # and it is xgboost's margin, to float32 rounding
    assert np.abs(margin).max() > 5  # margins large enough for float32 sums to be off by more than 1e-6


def test_reason_codes_are_deterministic(scorer):
    X = np.random.default_rng(4).normal(size=(50, 4))
    assert scorer.reason_codes_batch(X) == scorer.reason_codes_batch(X.copy())


def test_the_mapping_covers_every_model_input_in_domain_units():
    assert set(TEMPLATES) == set(MODEL_STREAM_FEATURES) | set(GRAPH_FEATURE_NAMES)
    assert "hour" not in TEMPLATES and "format" not in TEMPLATES and REASONS_VERSION.endswith("/3")
    assert reason_text("rcv_in_cp_7d", 14.0) == "receiver was paid by 14 distinct accounts in the last 7 days"
    assert reason_text("g_rcv_new_payers_7d", 9.0).startswith("9 of the receiver's payers in the 7 days before")
    assert reason_text("snd_out_usd_24h", 12345.6) == "sender sent USD 12,345.60 in the last 24 hours"
    assert reason_text("g_fwd_share_7d", 0.97) == "this transfer passes on 97% of what the sender received in the 7 days before"
    assert reason_text("g_fwd_share_7d", -1.0) == "sender received no money in the 7 days before"
    assert reason_text("rcv_since_opp_min", 10080.0) == "receiver had not sent money in the last 7 days"
    assert reason_text("snd_since_opp_min", 1500.0) == "sender last received money 1 day 1 h before"
    assert [reason_text(f, 1.0) for f in FORMAT_FEATURES[:3]] == ["paid by Reinvestment", "paid by Cheque", "paid by ACH"]
    assert reason_text("cross_currency", 0.0) == "paid and received in the same currency"
    assert reason_text("g_cycle_len", 0.0) == "this transfer closes no cycle of up to 5 hops"
    assert reason_text("g_rcv_in_cp_spike", 7.5) == (
        "receiver was paid by 7.5x as many distinct accounts in the 24 hours before as its count of distinct "
        "accounts in the 28 days before per day of activity")
    assert reason_text("g_snd_new_similar_payees_24h", 4.0).startswith(
        "sender paid similar amounts (within a factor 3) to 4 distinct accounts in the 24 hours before that it had not paid")
    with pytest.raises(KeyError):
        reason_text("hour", 5.0)
