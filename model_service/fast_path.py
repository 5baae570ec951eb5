"""The stage-1 scorer as the stream job runs it: the saved xgboost trees walked in pure Python.

Inside a PyFlink TaskManager the Python functions run in an interpreter embedded in the JVM
(thread mode). Loading xgboost's native library and OpenMP runtime there, while other operators'
threads run Python, can stall the job (seen here: an operator stuck in ``open()`` for minutes).
The fast path therefore evaluates the same JSON model file the trainer wrote — verified against
the cascade manifest's digest — with no native code: about 100 trees of depth 5 per event.

Arithmetic follows xgboost's CPU predictor: inputs and split conditions as float32, ``x < split``
goes left, missing (NaN) follows ``default_left``, leaf values summed in float32 onto the base
margin. Margins agree with ``Booster.predict(output_margin=True)`` to float32 rounding.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_F32 = struct.Struct("<f")


def f32(x: float) -> float:
    """Round a double to the nearest float32 (returned as a Python float)."""
    return _F32.unpack(_F32.pack(x))[0]


@dataclass(frozen=True, slots=True)
class _Tree:
    left: tuple[int, ...]
    right: tuple[int, ...]
    feature: tuple[int, ...]
    cond: tuple[float, ...]  # split condition, or the leaf value at a leaf
    default_left: tuple[bool, ...]

    def leaf(self, x: Sequence[float]) -> float:
        node = 0
        left, right, feature, cond, default_left = self.left, self.right, self.feature, self.cond, self.default_left
        while left[node] != -1:
            v = x[feature[node]]
            if v != v:  # NaN: missing
                node = left[node] if default_left[node] else right[node]
            else:
                node = left[node] if v < cond[node] else right[node]
        return cond[node]


def _base_score(text: str) -> float:
    return float(text.strip().strip("[]").split(",")[0])


class TreeEnsemble:
    """A binary:logistic xgboost model, evaluated without xgboost."""

    def __init__(self, trees: list[_Tree], base_margin: float, feature_names: tuple[str, ...]):
        self.trees = trees
        self.base_margin = base_margin
        self.feature_names = feature_names

    @classmethod
    def from_xgboost_json(cls, raw: bytes) -> TreeEnsemble:
        doc = json.loads(raw)
        learner = doc["learner"]
        objective = learner["objective"]["name"]
        if objective != "binary:logistic":
            raise ValueError(f"objective {objective!r}: the fast path evaluates binary:logistic models only")
        p = _base_score(learner["learner_model_param"]["base_score"])
        base_margin = f32(math.log(p / (1.0 - p)))
        trees = []
        for t in learner["gradient_booster"]["model"]["trees"]:
            if any(int(s) != 0 for s in t.get("split_type", [])):
                raise ValueError("categorical splits are not supported by the fast path")
            trees.append(
                _Tree(
                    left=tuple(int(i) for i in t["left_children"]),
                    right=tuple(int(i) for i in t["right_children"]),
                    feature=tuple(int(i) for i in t["split_indices"]),
                    cond=tuple(f32(float(c)) for c in t["split_conditions"]),
                    default_left=tuple(bool(int(d)) for d in t["default_left"]),
                )
            )
        names = tuple(learner.get("feature_names", []))
        return cls(trees, base_margin, names)

    def margin(self, x: Sequence[float]) -> float:
        xs = [f32(float(v)) for v in x]
        total = 0.0
        for tree in self.trees:
            total = f32(total + tree.leaf(xs))
        return f32(total + self.base_margin)

    def predict_proba(self, X: Sequence[Sequence[float]]) -> list[float]:
        out = []
        for x in X:
            m = self.margin(x)
            out.append(1.0 / (1.0 + math.exp(-m)) if m >= 0 else math.exp(m) / (1.0 + math.exp(m)))
        return out


def load_fast_path_model(model_dir: str | Path) -> tuple[TreeEnsemble, float, str]:
    """(stage-1 ensemble, candidate threshold, cascade digest) from a saved cascade, verified."""
    d = Path(model_dir)
    body = json.loads((d / "cascade.json").read_text())
    raw = (d / body["fast"]["file"]).read_bytes()
    got = hashlib.sha256(raw).hexdigest()
    if got != body["fast"]["digest"]:
        raise ValueError(f"fast model {body['fast']['file']} has digest {got}, manifest says {body['fast']['digest']}")
    model = TreeEnsemble.from_xgboost_json(raw)
    if tuple(body["stream_feature_names"]) != model.feature_names:
        raise ValueError("fast model feature names disagree with the cascade manifest")
    return model, float(body["candidate_threshold"]), str(body["digest"])


def fast_path_scorer(model_dir: str) -> tuple:
    """Scorer factory for the stream job:
    ``(batch scorer, candidate threshold, cascade digest, feature names it expects)``."""
    model, threshold, digest = load_fast_path_model(model_dir)
    return model.predict_proba, threshold, digest, model.feature_names
