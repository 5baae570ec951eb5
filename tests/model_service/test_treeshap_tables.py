"""The per-leaf-table TreeSHAP kernel against Algorithm 2 and against a brute-force Shapley sum.

The brute force below is the definition: per tree, the path-dependent value function
``f(S)`` (the expected leaf value when only the features in ``S`` are known, unknown splits
weighted by cover), and each feature's Shapley value over every subset of the features the tree
splits on. Nothing of the kernels' own bookkeeping is reused.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import xgboost as xgb

from model_service import treeshap
from model_service.treeshap import TreeEnsemble


def _model(depth: int, n_trees: int, seed: int, n_features: int = 6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2000, n_features))
    X[rng.random(X.shape) < 0.08] = np.nan  # missing values take the default branch
    a, b = np.nan_to_num(X[:, 0]), np.nan_to_num(X[:, 1])
    y = ((a + a * b + 0.3 * np.nan_to_num(X[:, 2]) > 0.4) ^ (rng.random(2000) < 0.05)).astype(int)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": depth, "nthread": 1, "seed": seed},
                        xgb.DMatrix(X, label=y), n_trees)
    return booster, X.astype(np.float32)


def _brute_force(booster, x: np.ndarray) -> np.ndarray:
    """Shapley values of the path-dependent value function, tree by tree, by enumeration."""
    import json

    trees = json.loads(bytes(booster.save_raw(raw_format="json")))["learner"]["gradient_booster"]["model"]["trees"]
    phi = np.zeros(x.size)
    for t in trees:
        left, right = t["left_children"], t["right_children"]
        feat, thr, dleft = t["split_indices"], t["split_conditions"], t["default_left"]
        cover = t["sum_hessian"]

        def value(node: int, known: frozenset) -> float:
            if left[node] < 0:
                return float(np.float32(thr[node]))  # a leaf's value, stored as float32 by xgboost
            f = feat[node]
            if f in known:
                v = x[f]
                goes_left = dleft[node] if math.isnan(v) else bool(v < np.float32(thr[node]))
                return value(left[node] if goes_left else right[node], known)
            return (cover[left[node]] * value(left[node], known)
                    + cover[right[node]] * value(right[node], known)) / cover[node]

        used = sorted({feat[i] for i in range(len(left)) if left[i] >= 0})
        m = len(used)
        for i in used:
            others = [f for f in used if f != i]
            for k in range(m):
                w = math.factorial(k) * math.factorial(m - k - 1) / math.factorial(m)
                for s in itertools.combinations(others, k):
                    phi[i] += w * (value(0, frozenset((*s, i))) - value(0, frozenset(s)))
    return phi


@pytest.mark.parametrize("depth", [3, 6])
def test_tables_equal_the_brute_force_shapley_values(depth):
    booster, X = _model(depth, n_trees=4, seed=depth)
    ens = TreeEnsemble.from_booster(booster)
    assert ens.tables is not None
    phi, margin = ens.shap_values(X[:25], algorithm="tables")
    for r in range(25):
        assert np.abs(phi[r] - _brute_force(booster, X[r].astype(np.float64))).max() < 1e-9
    want = booster.predict(xgb.DMatrix(X[:25]), output_margin=True)
    assert np.abs(margin - want).max() < 1e-4  # float32 sums in xgboost


def test_tables_equal_algorithm_2_on_a_deep_model_with_repeated_splits():
    booster, X = _model(8, n_trees=60, seed=11, n_features=4)  # depth 8 over 4 features: repeats
    ens = TreeEnsemble.from_booster(booster)
    assert ens.tables is not None and ens.tables.path_len.max() > ens.tables.n_unique.max()
    a, ma = ens.shap_values(X, algorithm="tables")
    b, mb = ens.shap_values(X, algorithm="paths")
    assert np.abs(a - b).max() < 1e-9
    assert np.array_equal(ma, mb)  # the same leaves, summed in the same order
    assert np.abs(a.sum(1) + ens.expected_value - ma).max() < 1e-9
    threaded, _ = ens.shap_values(X, threads=2)
    assert np.abs(threaded - a).max() < 1e-12


def test_paths_with_too_many_unique_features_fall_back_to_algorithm_2(monkeypatch):
    booster, X = _model(6, n_trees=10, seed=3)
    monkeypatch.setattr(treeshap, "MAX_TABLE_DEPTH", 2)
    ens = TreeEnsemble.from_booster(booster)
    assert ens.tables is None
    with pytest.raises(ValueError, match="more than 2 unique features"):
        ens.shap_values(X[:5], algorithm="tables")
    auto, _ = ens.shap_values(X[:50])
    monkeypatch.undo()
    full = TreeEnsemble.from_booster(booster)
    assert np.abs(auto - full.shap_values(X[:50], algorithm="tables")[0]).max() < 1e-9
    with pytest.raises(ValueError, match="algorithm='fast'"):
        full.shap_values(X[:5], algorithm="fast")
