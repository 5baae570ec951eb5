"""The stream job's pure-Python tree walker against xgboost itself, on the same saved model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from model_service import GradientBoostedScorer
from model_service.fast_path import TreeEnsemble, f32, load_fast_path_model


@pytest.fixture(scope="module")
def scorer():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 6)) * [1, 10, 100, 0.1, 1, 5]
    X[:, 5] = np.round(X[:, 5])  # ties on split values
    y = ((X[:, 0] + X[:, 1] / 10 > 1.2) | (X[:, 5] > 6)).astype(int)
    return GradientBoostedScorer([f"f{i}" for i in range(6)], n_estimators=60, max_depth=5).fit(X, y, seed=1), X


def test_margins_and_probabilities_match_xgboost(scorer):
    model, X = scorer
    ens = TreeEnsemble.from_xgboost_json(model.to_bytes())
    rows = np.vstack([X[:500], X[:50] * 1.5, np.zeros((1, 6))])
    want = model.predict_margin(rows)
    got = np.array([ens.margin(r) for r in rows])
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
    np.testing.assert_allclose(ens.predict_proba(rows), model.predict_proba(rows), rtol=0, atol=1e-6)


def test_missing_values_follow_the_default_branch(scorer):
    model, X = scorer
    ens = TreeEnsemble.from_xgboost_json(model.to_bytes())
    rows = X[:100].copy()
    rows[::3, 0] = np.nan
    rows[1::3, 5] = np.nan
    np.testing.assert_allclose([ens.margin(r) for r in rows], model.predict_margin(rows), atol=2e-6)


def test_f32_rounds_like_float32():
    assert f32(0.1) == float(np.float32(0.1)) != 0.1


def test_load_checks_the_manifest_digest(tmp_path, scorer):
    model, _ = scorer
    raw = model.to_bytes()
    (tmp_path / "fast.json").write_bytes(raw)
    import hashlib

    body = {"fast": {"file": "fast.json", "digest": hashlib.sha256(raw).hexdigest()}, "candidate_threshold": 0.25,
            "stream_feature_names": [f"f{i}" for i in range(6)], "digest": "cascade-digest"}
    (tmp_path / "cascade.json").write_text(json.dumps(body))
    ens, thr, digest = load_fast_path_model(tmp_path)
    assert (thr, digest, len(ens.trees)) == (0.25, "cascade-digest", 60)
    (tmp_path / "fast.json").write_bytes(raw.replace(b'"f0"', b'"g0"'))
    with pytest.raises(ValueError, match="digest"):
        load_fast_path_model(tmp_path)
