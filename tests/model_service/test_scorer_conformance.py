"""The conformance suite every scorer passes: empty and bad input, constant features,
pickle and save/load round-trips, seeded determinism."""

from __future__ import annotations

import hashlib
import pickle

import numpy as np
import pytest

from model_service import BoosterParams, GradientBoostedScorer, NotFittedError

from .conftest import SMALL

NAMES = ("f0", "f1", "f2", "f3")


def make_gbt(**overrides) -> GradientBoostedScorer:
    return GradientBoostedScorer(NAMES, SMALL, **overrides)


#: Every scorer implementation registers a factory here and must pass the whole suite.
SCORERS = [pytest.param(make_gbt, id="xgboost")]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, len(NAMES)))
    y = ((X[:, 0] + X[:, 1] + rng.normal(scale=0.5, size=1500)) > 2.0).astype(int)
    return X, y


@pytest.mark.parametrize("make", SCORERS)
class TestScorerConformance:
    def test_empty_fit_raises(self, make):
        with pytest.raises(ValueError, match="non-empty"):
            make().fit(np.empty((0, len(NAMES))), np.empty(0), seed=0)

    def test_bad_input_raises(self, make, data):
        X, y = data
        with pytest.raises(ValueError, match="both classes"):
            make().fit(X, np.zeros_like(y), seed=0)
        with pytest.raises(ValueError, match="rows but y has"):
            make().fit(X, y[:-1], seed=0)
        with pytest.raises(ValueError, match=r"shape \(n, 4\)"):
            make().fit(X[:, :3], y, seed=0)
        with pytest.raises(ValueError, match="0 \\(legitimate\\) or 1"):
            make().fit(X, y * 2, seed=0)
        with pytest.raises(ValueError, match="infinite"):
            make().fit(np.where(X > 3, np.inf, X), y, seed=0)
        with pytest.raises(ValueError, match="duplicates"):
            GradientBoostedScorer(["a", "a"])
        with pytest.raises(ValueError, match="n_estimators"):
            BoosterParams(n_estimators=0)

    def test_unfitted_raises(self, make):
        s = make()
        with pytest.raises(NotFittedError):
            s.predict_proba(np.zeros((1, len(NAMES))))
        with pytest.raises(NotFittedError):
            s.predict_proba(np.zeros((0, len(NAMES))))
        with pytest.raises(NotFittedError):
            _ = s.digest

    def test_empty_batch_scores_to_empty(self, make, data):
        # A (0, d) micro-batch is well-formed: it scores to an empty vector, not an error.
        s = make().fit(*data, seed=0)
        assert s.predict_proba(np.empty((0, len(NAMES)))).shape == (0,)
        with pytest.raises(ValueError, match="shape"):
            s.predict_proba(np.empty(0))
        with pytest.raises(ValueError, match="shape"):
            s.predict_proba(np.zeros((3, len(NAMES) + 1)))

    def test_constant_features(self, make, data):
        _, y = data
        X = np.full((len(y), len(NAMES)), 7.0)
        s = make().fit(X, y, seed=0)
        p = s.predict_proba(np.vstack([X[:5], np.full((1, len(NAMES)), -3.0)]))
        assert np.all(p == p[0])  # nothing to split on: one score for every row
        assert 0.0 < p[0] < 1.0
        expl = s.explain(X[:5], cross_check=True)
        assert np.all(expl.values == 0.0)
        assert s.reason_codes(X[0]) == []

    def test_pickle_round_trip(self, make, data):
        X, y = data
        s = make().fit(X, y, seed=3)
        t = pickle.loads(pickle.dumps(s))
        assert t.digest == s.digest
        assert np.array_equal(t.predict_proba(X), s.predict_proba(X))
        assert t.reason_codes(X[0]) == s.reason_codes(X[0])
        u = pickle.loads(pickle.dumps(make()))  # unfitted pickles too
        assert not u.is_fitted

    def test_save_load_round_trip(self, make, data, tmp_path):
        X, y = data
        s = make().fit(X, y, seed=3)
        written = s.save(tmp_path / "m.json")
        raw = (tmp_path / "m.json").read_bytes()
        assert written == s.digest == hashlib.sha256(raw).hexdigest()
        t = GradientBoostedScorer.load(tmp_path / "m.json", nthread=s.params.nthread)
        assert t.digest == s.digest and t.seed == 3
        assert t.feature_names == s.feature_names and t.params == s.params
        assert t.descriptions == s.descriptions
        assert np.array_equal(t.predict_proba(X), s.predict_proba(X))
        assert np.array_equal(t.explain(X[:20]).values, s.explain(X[:20]).values)

    def test_load_rejects_foreign_json(self, make, tmp_path):
        import xgboost as xgb

        b = xgb.train({"verbosity": 0}, xgb.DMatrix(np.eye(4), label=[0, 1, 0, 1]), 2)
        b.save_model(tmp_path / "plain.json")
        with pytest.raises(ValueError, match="not an auditflow model"):
            GradientBoostedScorer.load(tmp_path / "plain.json")

    def test_same_seed_same_bytes(self, make, data):
        X, y = data
        a = make().fit(X, y, seed=42).to_bytes()
        b = make().fit(X, y, seed=42).to_bytes()
        assert a == b
        # The thread count does not enter the model: hist training reduces in a fixed order,
        # and nthread is a runtime setting kept out of the saved bytes.
        c = make(nthread=1).fit(X, y, seed=42)
        d = make(nthread=3).fit(X, y, seed=42)
        assert c.to_bytes() == d.to_bytes() == a

    def test_different_seed_may_differ(self, make, data):
        X, y = data
        a = make().fit(X, y, seed=1)
        b = make().fit(X, y, seed=2)
        # Row and column subsampling (0.8) use the seed, so these models do differ; both
        # still learn the rule.
        assert SMALL.subsample < 1.0 and a.digest != b.digest
        for s in (a, b):
            assert s.predict_proba(X[y == 1]).mean() > s.predict_proba(X[y == 0]).mean() + 0.3
