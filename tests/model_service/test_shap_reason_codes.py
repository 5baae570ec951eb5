"""SHAP exactness (additivity, TreeExplainer == xgboost pred_contribs) and reason codes."""

from __future__ import annotations

import numpy as np
import pytest
import xgboost as xgb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from auditflow.records import ReasonCode
from model_service import GradientBoostedScorer

from .conftest import SMALL

NAMES = ("amount", "velocity", "fan_out", "hour", "noise")
DESCRIPTIONS = {n: f"the {n}" for n in NAMES}


@pytest.fixture(scope="module")
def scorer():
    rng = np.random.default_rng(17)
    X = rng.normal(size=(3000, len(NAMES)))
    logit = 2.0 * X[:, 0] + 1.5 * X[:, 1] - X[:, 2] + 0.5 * X[:, 0] * X[:, 3] - 3.0
    y = (rng.random(3000) < 1 / (1 + np.exp(-logit))).astype(int)
    return GradientBoostedScorer(NAMES, SMALL, descriptions=DESCRIPTIONS).fit(X, y, seed=9)


def random_rows(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=2.0, size=(n, len(NAMES)))  # wider than training: off-support rows too
    X[rng.random(X.shape) < 0.05] = np.nan  # and missing values (xgboost's default branch)
    return X


def test_contributions_add_up_to_the_margin(scorer):
    X = random_rows(500, seed=1)
    expl = scorer.explain(X)
    # The margin computed independently, through a DMatrix and Booster.predict.
    margin = scorer.booster.predict(xgb.DMatrix(X, feature_names=list(NAMES)), output_margin=True)
    assert expl.values.shape == X.shape
    assert np.abs(expl.values.sum(axis=1) + expl.expected_value - margin).max() < 1e-4
    # And the margin is the log-odds of the probability we score with.
    p = scorer.predict_proba(X)
    assert np.abs(np.log(p / (1 - p)) - margin).max() < 1e-4


def test_tree_explainer_equals_pred_contribs(scorer):
    X = random_rows(300, seed=2)
    expl = scorer.explain(X, cross_check=True)  # the scorer's own check must pass ...
    contribs = scorer.booster.predict(xgb.DMatrix(X, feature_names=list(NAMES)), pred_contribs=True)
    # ... and this independent comparison too: per feature, and the bias column.
    assert np.abs(contribs[:, :-1] - expl.values).max() < 1e-4
    assert np.abs(contribs[:, -1] - expl.expected_value).max() < 1e-4


def test_single_row_explanation_matches_batch(scorer):
    X = random_rows(10, seed=3)
    batch = scorer.explain(X)
    one = scorer.explain(X[4])
    assert one.values.shape == (len(NAMES),)
    assert np.allclose(one.values, batch.values[4], atol=1e-6)
    assert one.expected_value == pytest.approx(batch.expected_value, abs=1e-6)


def expected_codes(scorer: GradientBoostedScorer, row: np.ndarray, k: int) -> list[ReasonCode]:
    """Reference: rank pred_contribs (not the code under test's SHAP) by hand."""
    c = scorer.booster.predict(
        xgb.DMatrix(row.reshape(1, -1), feature_names=list(NAMES)), pred_contribs=True
    )[0, :-1]
    top = [j for j in np.argsort(-c, kind="stable") if c[j] > 0][:k]
    return [ReasonCode(NAMES[j], float(row[j]), float(c[j]), DESCRIPTIONS[NAMES[j]]) for j in top]


def test_reason_codes_are_top_k_positive_contributions(scorer):
    X = random_rows(50, seed=4)
    X = np.nan_to_num(X)
    for k in (1, 2, 4):
        for row, codes in zip(X, scorer.reason_codes_batch(X, k=k)):
            want = expected_codes(scorer, row, k)
            assert [(c.feature, c.value, c.description) for c in codes] == [
                (w.feature, w.value, w.description) for w in want
            ]
            assert [c.contribution for c in codes] == pytest.approx([w.contribution for w in want], abs=1e-4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    row=arrays(np.float64, len(NAMES), elements=st.floats(-5, 5, allow_nan=False)),
    k=st.integers(1, len(NAMES)),
)
def test_reason_code_invariants(scorer, row, k):
    codes = scorer.reason_codes(row, k=k)
    assert len(codes) <= k
    contribs = [c.contribution for c in codes]
    assert all(c > 0 for c in contribs) and contribs == sorted(contribs, reverse=True)
    for c in codes:
        j = NAMES.index(c.feature)
        assert c.value == row[j]  # the row's actual value, not the float32 the trees saw
        assert c.description == DESCRIPTIONS[c.feature]
    # Nothing adverse was left out: every positive contribution not listed is no larger.
    full = scorer.explain(row).values
    listed = {c.feature for c in codes}
    rest = [v for n, v in zip(NAMES, full) if n not in listed and v > 0]
    if len(codes) < k:
        assert rest == []
    elif rest:
        assert max(rest) <= min(contribs) + 1e-12


def test_reason_codes_reject_bad_input(scorer):
    with pytest.raises(ValueError, match="one row"):
        scorer.reason_codes(np.zeros((2, len(NAMES))))
    with pytest.raises(ValueError, match="k must be"):
        scorer.reason_codes(np.zeros(len(NAMES)), k=0)
