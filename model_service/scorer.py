"""A gradient-boosted binary scorer with exact SHAP reason codes.

Why xgboost (and not lightgbm): exact TreeSHAP is built in (``pred_contribs``) *and* supported
by :class:`shap.TreeExplainer`, so every explanation can be cross-checked by two independent
implementations; ``tree_method="hist"`` training is deterministic for a fixed seed (the saved
bytes do not even depend on the thread count); the JSON model format is a stable text artefact
that we hash for :attr:`GradientBoostedScorer.digest`; and the CPU-only wheel is small.

Scores are probabilities (floats, fine for a model output); money never reaches this module
as a float, only features derived from exact cents.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(400, 3))
>>> y = (X[:, 1] > 1.0).astype(int)
>>> s = GradientBoostedScorer(["a", "b", "c"], n_estimators=20,
...                           descriptions={"a": "noise", "b": "the signal", "c": "noise"})
>>> s = s.fit(X, y, seed=7)
>>> float(s.predict_proba(X[y == 1]).mean()) > 0.9 > float(s.predict_proba(X[y == 0]).mean())
True
>>> row = np.array([0.0, 2.5, 0.0])
>>> [(r.feature, r.value, r.description) for r in s.reason_codes(row, k=1)]
[('b', 2.5, 'the signal')]
>>> len(s.digest)
64
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import xgboost as xgb

from auditflow.records import ReasonCode

#: Additivity (log-odds), checked for every explained row: the float64 contributions plus the
#: baseline equal the float64 margin of the same trees within this.
SHAP_TOLERANCE = 1e-6
#: Our float64 TreeSHAP against xgboost's own float32 ``pred_contribs`` (the cross-check).
CROSS_CHECK_TOLERANCE = 1e-4

_ATTR_KEY = "auditflow"
_BAD_NAME = re.compile(r"[\[\]<,]")  # characters xgboost refuses in feature names


class NotFittedError(RuntimeError):
    """The scorer was used before :meth:`GradientBoostedScorer.fit` or ``load``."""


class ExplanationError(RuntimeError):
    """SHAP values failed their exactness checks (additivity or the cross-check)."""


@dataclass(frozen=True, slots=True)
class BoosterParams:
    """Training hyperparameters. ``scale_pos_weight=None`` means negatives/positives.

    Balancing the classes that way lifts every score, so scores rank well but are not
    calibrated probabilities; thresholds are therefore always chosen on held-out data.

    ``nthread`` (default: up to 4, never more than the machine's cores, since oversubscribed
    OpenMP threads stall badly on a shared host) changes speed only: it is kept out of the
    saved model, and hist training gives the same bytes for any thread count.
    """

    n_estimators: int = 200
    max_depth: int = 6
    learning_rate: float = 0.1
    subsample: float = 0.8
    colsample_bytree: float = 0.8
    min_child_weight: float = 1.0
    reg_lambda: float = 1.0
    max_bin: int = 256
    scale_pos_weight: float | None = None
    nthread: int = field(default_factory=lambda: min(4, os.cpu_count() or 1))

    def __post_init__(self) -> None:
        if self.n_estimators < 1:
            raise ValueError(f"n_estimators must be >= 1, got {self.n_estimators}")
        if self.max_depth < 1:
            raise ValueError(f"max_depth must be >= 1, got {self.max_depth}")
        if not 0 < self.learning_rate <= 1:
            raise ValueError(f"learning_rate must be in (0, 1], got {self.learning_rate}")
        for name in ("subsample", "colsample_bytree"):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {v}")
        if self.min_child_weight < 0 or self.reg_lambda < 0:
            raise ValueError("min_child_weight and reg_lambda must be >= 0")
        if self.max_bin < 2:
            raise ValueError(f"max_bin must be >= 2, got {self.max_bin}")
        if self.scale_pos_weight is not None and self.scale_pos_weight <= 0:
            raise ValueError(f"scale_pos_weight must be > 0, got {self.scale_pos_weight}")
        if self.nthread < 1:
            raise ValueError(f"nthread must be >= 1, got {self.nthread}")


@dataclass(frozen=True, slots=True)
class ShapExplanation:
    """Exact TreeSHAP values in log-odds: ``values.sum(-1) + expected_value == margin`` (float64,
    within :data:`SHAP_TOLERANCE`); ``expected_value`` is the model's recorded baseline."""

    feature_names: tuple[str, ...]
    values: np.ndarray  # (n, d), or (d,) when a single row was explained
    expected_value: float
    margin: np.ndarray  # (n,), or () for a single row


class GradientBoostedScorer:
    """Binary classifier (laundering = 1) over a fixed, ordered list of numeric features.

    ``descriptions`` maps feature names to the human text used in reason codes (a missing
    entry falls back to the feature name). Input matrices are ``(n, len(feature_names))``,
    columns in ``feature_names`` order; NaN means missing.
    """

    def __init__(
        self,
        feature_names: Sequence[str],
        params: BoosterParams | None = None,
        *,
        descriptions: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> None:
        names = tuple(feature_names)
        if not names:
            raise ValueError("feature_names is empty: a scorer needs at least one feature")
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"feature_names has duplicates: {dup}")
        for n in names:
            if not isinstance(n, str) or not n or _BAD_NAME.search(n):
                raise ValueError(f"feature name {n!r} is empty or contains one of '[', ']', '<', ','")
        self.feature_names: tuple[str, ...] = names
        base = params or BoosterParams()
        self.params = BoosterParams(**{**asdict(base), **overrides}) if overrides else base
        self.descriptions: dict[str, str] = {n: (descriptions or {}).get(n, n) for n in names}
        self.seed: int | None = None
        self._booster: xgb.Booster | None = None
        self._raw: bytes | None = None
        self._explainer: Any = None
        self.device = "cpu"

    # ------------------------------------------------------------------ input checks

    def _matrix(self, X: Any, what: str = "X") -> np.ndarray:
        """Validate and convert to the float32 matrix both xgboost and SHAP will see."""
        arr = np.asarray(X, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != len(self.feature_names):
            raise ValueError(
                f"{what} must have shape (n, {len(self.feature_names)}) with columns "
                f"{list(self.feature_names)}; got shape {arr.shape}"
            )
        if np.isinf(arr).any():
            raise ValueError(f"{what} contains infinite values (use NaN for missing)")
        return np.ascontiguousarray(arr, dtype=np.float32)

    def _rows(self, X: Any) -> tuple[np.ndarray, bool]:
        arr = np.asarray(X, dtype=np.float64)
        single = arr.ndim == 1
        return self._matrix(arr.reshape(1, -1) if single else arr), single

    @property
    def booster(self) -> xgb.Booster:
        if self._booster is None:
            raise NotFittedError("scorer is not fitted: call fit() or load() first")
        return self._booster

    @property
    def is_fitted(self) -> bool:
        return self._booster is not None

    # ------------------------------------------------------------------ training

    def fit(self, X: Any, y: Any, seed: int = 0) -> GradientBoostedScorer:
        """Train from scratch. Same data, params and seed give byte-identical saved models."""
        y_arr = np.asarray(y)
        if y_arr.ndim != 1 or y_arr.size == 0:
            raise ValueError(f"fit needs a non-empty 1-D label vector; got shape {y_arr.shape}")
        Xf = self._matrix(X)
        if Xf.shape[0] != y_arr.shape[0]:
            raise ValueError(f"X has {Xf.shape[0]} rows but y has {y_arr.shape[0]} labels")
        if not np.isin(y_arr, (0, 1)).all():
            raise ValueError("labels must be 0 (legitimate) or 1 (laundering)")
        y_f = y_arr.astype(np.float32)
        n_pos = int(y_f.sum())
        n_neg = int(y_f.size - n_pos)
        if n_pos == 0 or n_neg == 0:
            raise ValueError(f"fit needs both classes; got {n_pos} positives and {n_neg} negatives")
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        p = self.params
        spw = p.scale_pos_weight if p.scale_pos_weight is not None else n_neg / n_pos
        xgb_params = {
            "objective": "binary:logistic",
            "eval_metric": "aucpr",
            "tree_method": "hist",
            "max_depth": p.max_depth,
            "eta": p.learning_rate,
            "subsample": p.subsample,
            "colsample_bytree": p.colsample_bytree,
            "min_child_weight": p.min_child_weight,
            "lambda": p.reg_lambda,
            "max_bin": p.max_bin,
            "scale_pos_weight": spw,
            "seed": int(seed),
            "nthread": p.nthread,
            "verbosity": 0,
        }
        dtrain = xgb.DMatrix(
            Xf, label=y_f, feature_names=list(self.feature_names), nthread=p.nthread
        )
        booster = xgb.train(xgb_params, dtrain, num_boost_round=p.n_estimators)
        meta = {
            "feature_names": list(self.feature_names),
            "descriptions": self.descriptions,
            # nthread is a runtime setting, not part of the model: it stays out of the digest.
            "params": {k: v for k, v in asdict(p).items() if k != "nthread"},
            "scale_pos_weight": spw,
            "seed": int(seed),
            "n_train": int(y_f.size),
            "n_positive": n_pos,
        }
        booster.set_attr(**{_ATTR_KEY: json.dumps(meta, sort_keys=True)})
        self._install(booster, int(seed))
        return self

    def _install(self, booster: xgb.Booster, seed: int | None) -> None:
        booster.set_param({"nthread": self.params.nthread})
        self._booster = booster
        self._raw = bytes(booster.save_raw(raw_format="json"))
        self._explainer = None
        self.seed = seed
        self.device = preferred_device()
        if self.device != "cpu":  # runtime only: the saved bytes (and the digest) stay the same
            booster.set_param({"device": self.device})

    # ------------------------------------------------------------------ scoring

    def predict_margin(self, X: Any) -> np.ndarray:
        """Log-odds for each row, shape ``(n,)``. A ``(0, d)`` batch gives an empty array."""
        Xf = self._matrix(X)
        if Xf.shape[0] == 0:
            self.booster  # still refuse an unfitted scorer
            return np.empty(0, dtype=np.float64)
        out = self.booster.inplace_predict(Xf, predict_type="margin", validate_features=False)
        return np.asarray(out, dtype=np.float64).reshape(-1)

    def predict_proba(self, X: Any) -> np.ndarray:
        """P(laundering) for each row, shape ``(n,)``, vectorized over the batch."""
        Xf = self._matrix(X)
        if Xf.shape[0] == 0:
            self.booster
            return np.empty(0, dtype=np.float64)
        out = self.booster.inplace_predict(Xf, validate_features=False)
        return np.asarray(out, dtype=np.float64).reshape(-1)

    # ------------------------------------------------------------------ persistence

    def to_bytes(self) -> bytes:
        """The model as xgboost JSON (trees, feature names, our metadata as an attribute)."""
        if self._raw is None:
            raise NotFittedError("scorer is not fitted: call fit() or load() first")
        return self._raw

    @property
    def digest(self) -> str:
        """sha256 of :meth:`to_bytes` (stable across save/load on the same xgboost version)."""
        return hashlib.sha256(self.to_bytes()).hexdigest()

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the JSON model to ``path``; returns the digest of the written bytes."""
        raw = self.to_bytes()
        with open(path, "wb") as f:
            f.write(raw)
        return hashlib.sha256(raw).hexdigest()

    @classmethod
    def from_bytes(cls, raw: bytes, *, nthread: int | None = None) -> GradientBoostedScorer:
        booster = xgb.Booster()
        booster.load_model(bytearray(raw))
        meta_text = booster.attr(_ATTR_KEY)
        if meta_text is None:
            raise ValueError("not an auditflow model: the 'auditflow' attribute is missing")
        meta = json.loads(meta_text)
        params = BoosterParams(**meta["params"], **({} if nthread is None else {"nthread": nthread}))
        scorer = cls(meta["feature_names"], params, descriptions=meta["descriptions"])
        if list(booster.feature_names or []) != list(scorer.feature_names):
            raise ValueError("model feature names disagree with its auditflow metadata")
        scorer._install(booster, meta["seed"])
        resaved = scorer._raw
        if resaved != bytes(raw):  # keep the digest of what is on disk, and say if it drifts
            raise ValueError(
                "model bytes change on reload (written by another xgboost version?); "
                "retrain or re-save it with this version"
            )
        return scorer

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, nthread: int | None = None) -> GradientBoostedScorer:
        with open(path, "rb") as f:
            return cls.from_bytes(f.read(), nthread=nthread)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "feature_names": self.feature_names,
            "params": self.params,
            "descriptions": self.descriptions,
            "seed": self.seed,
            "raw": self._raw,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.feature_names = state["feature_names"]
        self.params = state["params"]
        self.descriptions = state["descriptions"]
        self.seed = state["seed"]
        self._booster = None
        self._raw = None
        self._explainer = None
        if state["raw"] is not None:
            booster = xgb.Booster()
            booster.load_model(bytearray(state["raw"]))
            self._install(booster, state["seed"])

    def __repr__(self) -> str:
        fitted = f"digest={self.digest[:12]}" if self.is_fitted else "unfitted"
        return f"GradientBoostedScorer({len(self.feature_names)} features, {fitted})"

    # ------------------------------------------------------------------ explanations

    def explain(self, X: Any, *, cross_check: bool = False, threads: int = 1) -> ShapExplanation:
        """Exact path-dependent TreeSHAP (:mod:`model_service.treeshap`, float64) for one row or a
        batch, in log-odds against the recorded baseline (``expected_value``).

        Always checks additivity for every row (contributions + baseline == the trees' float64
        margin within :data:`SHAP_TOLERANCE`, and that margin == xgboost's within
        :data:`CROSS_CHECK_TOLERANCE`); with ``cross_check`` also compares every contribution with
        xgboost's own ``pred_contribs``. Raises :class:`ExplanationError` when a check fails.
        """
        Xf, single = self._rows(X)
        d = len(self.feature_names)
        ensemble = self.tree_ensemble()
        expected = ensemble.expected_value
        if Xf.shape[0] == 0:
            values, margin = np.empty((0, d), dtype=np.float64), np.empty(0, dtype=np.float64)
        else:
            values, margin = ensemble.shap_values(Xf, threads=threads)
            gap = np.abs(values.sum(axis=1) + expected - margin)
            if gap.max() > SHAP_TOLERANCE:
                raise ExplanationError(f"SHAP additivity off by {gap.max():.3g} log-odds")
            drift = np.abs(margin - self.predict_margin(Xf)).max()
            if drift > CROSS_CHECK_TOLERANCE:
                raise ExplanationError(f"tree margin and xgboost's differ by {drift:.3g} log-odds")
            if cross_check:
                dm = xgb.DMatrix(Xf, feature_names=list(self.feature_names), nthread=self.params.nthread)
                contribs = np.asarray(self.booster.predict(dm, pred_contribs=True), dtype=np.float64)
                diff = max(
                    float(np.abs(contribs[:, :d] - values).max()),
                    float(np.abs(contribs[:, d] - expected).max()),
                )
                if diff > CROSS_CHECK_TOLERANCE:
                    raise ExplanationError(f"TreeSHAP and xgboost's pred_contribs differ by {diff:.3g}")
        if single:
            return ShapExplanation(self.feature_names, values[0], expected, margin[0])
        return ShapExplanation(self.feature_names, values, expected, margin)

    def tree_ensemble(self):
        """The model's trees as flat float64 arrays for TreeSHAP (built once)."""
        if self._explainer is None:
            from model_service.treeshap import TreeEnsemble

            self._explainer = TreeEnsemble.from_booster(self.booster)
        return self._explainer

    def reason_codes(self, x_row: Any, k: int = 4) -> list[ReasonCode]:
        """The top-``k`` adverse features of one row: positive SHAP contributions (towards
        laundering), largest first, each with the row's actual value and its description."""
        row = np.asarray(x_row, dtype=np.float64)
        if row.ndim != 1:
            raise ValueError(f"reason_codes takes one row (1-D); got shape {row.shape}")
        return self.reason_codes_batch(row.reshape(1, -1), k=k)[0]

    def reason_codes_batch(self, X: Any, k: int = 4) -> list[list[ReasonCode]]:
        """:meth:`reason_codes` for every row of ``X`` with one SHAP call."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        values_in = np.asarray(X, dtype=np.float64)
        expl = self.explain(values_in)
        return [
            codes_from_contributions(self.feature_names, self.descriptions, values_in[i], expl.values[i], k)
            for i in range(values_in.shape[0])
        ]


def preferred_device() -> str:
    """``cuda`` where this xgboost build has CUDA and a GPU answers, else ``cpu``."""
    global _DEVICE
    if _DEVICE is None:
        _DEVICE = "cpu"
        if xgb.build_info().get("USE_CUDA"):
            try:
                b = xgb.train({"device": "cuda", "verbosity": 0},
                              xgb.DMatrix(np.zeros((2, 1), dtype=np.float32), label=[0.0, 1.0]), 1)
                b.inplace_predict(np.zeros((1, 1), dtype=np.float32))
                _DEVICE = "cuda"
            except xgb.core.XGBoostError:
                pass
    return _DEVICE


_DEVICE: str | None = None


def codes_from_contributions(
    feature_names: Sequence[str],
    descriptions: Mapping[str, str],
    row: np.ndarray,
    contributions: np.ndarray,
    k: int,
) -> list[ReasonCode]:
    """Top-``k`` strictly positive contributions, largest first (ties: feature order).

    Each code's ``description`` is the investigator's sentence of the versioned mapping
    (:mod:`auditflow.reasons`, filled with the row's actual value) for the features it knows, else
    the model's description of the feature."""
    from auditflow.reasons import TEMPLATES, reason_text

    order = sorted(
        (j for j in range(len(feature_names)) if contributions[j] > 0),
        key=lambda j: (-contributions[j], j),
    )[:k]
    return [
        ReasonCode(
            feature=feature_names[j],
            value=float(row[j]),
            contribution=float(contributions[j]),
            description=(reason_text(feature_names[j], row[j]) if feature_names[j] in TEMPLATES
                         else descriptions.get(feature_names[j], feature_names[j])),
        )
        for j in order
    ]


def feature_matrix(rows: Sequence[Mapping[str, float]], feature_names: Sequence[str]) -> np.ndarray:
    """Stack feature dicts into an ``(n, d)`` float64 matrix in ``feature_names`` order.

    >>> feature_matrix([{"b": 2.0, "a": 1.0}], ["a", "b"]).tolist()
    [[1.0, 2.0]]
    """
    out = np.empty((len(rows), len(feature_names)), dtype=np.float64)
    for i, row in enumerate(rows):
        try:
            out[i] = [row[name] for name in feature_names]
        except KeyError as e:
            raise ValueError(f"feature row {i} lacks feature {e.args[0]!r}") from None
    return out
