"""From the stream's feature vector to a model's inputs.

The stream job computes :data:`auditflow.features.FEATURE_NAMES`; the models read
:data:`auditflow.features.MODEL_STREAM_FEATURES`: the same values less ``hour`` and ``format`` (a code
number), with the payment format one-hot by name (:func:`auditflow.features.model_inputs`). The map
is recorded in the cascade manifest by name (:data:`MODEL_INPUTS`); ``identity`` passes a vector
through unchanged (custom feature sets, tests).

>>> from auditflow.features import FEATURE_NAMES, MODEL_STREAM_FEATURES
>>> m = InputMap(MODEL_INPUTS, FEATURE_NAMES)
>>> X = np.zeros((2, len(FEATURE_NAMES))); X[1, FEATURE_NAMES.index("format")] = 2.0
>>> Y = m.matrix(X)
>>> Y.shape == (2, len(MODEL_STREAM_FEATURES)), float(Y[1, MODEL_STREAM_FEATURES.index("fmt_ach")])
(True, 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from auditflow.features import FEATURE_NAMES, FORMAT_FEATURES, MODEL_STREAM_FEATURES, model_inputs

MODEL_INPUTS = "auditflow.model_inputs/1"
IDENTITY = "identity"
INPUT_MAPS = (MODEL_INPUTS, IDENTITY)


class InputMap:
    """``kind`` (:data:`MODEL_INPUTS` or :data:`IDENTITY`) over the vector ``source_names``."""

    def __init__(self, kind: str, source_names: Sequence[str]) -> None:
        if kind not in INPUT_MAPS:
            raise ValueError(f"unknown input map {kind!r}: expected one of {INPUT_MAPS}")
        self.kind = kind
        self.source_names = tuple(source_names)
        if kind == IDENTITY:
            self.names = self.source_names
            return
        if self.source_names != FEATURE_NAMES:
            raise ValueError(f"{MODEL_INPUTS} reads the stream vector (auditflow.features.FEATURE_NAMES)")
        self.names = MODEL_STREAM_FEATURES
        index = {n: i for i, n in enumerate(FEATURE_NAMES)}
        self._copy = [(j, index[n]) for j, n in enumerate(self.names) if n in index]
        self._format_col = index["format"]
        self._onehot = [self.names.index(n) for n in FORMAT_FEATURES]

    def row(self, stream: Mapping[str, float]) -> dict[str, float]:
        """The model inputs of one stream feature dict."""
        if self.kind == IDENTITY:
            return {n: float(stream[n]) for n in self.names}
        return model_inputs(stream)

    def matrix(self, X: Any) -> np.ndarray:
        """The model inputs of an ``(n, len(source_names))`` stream matrix."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != len(self.source_names):
            raise ValueError(f"expected shape (n, {len(self.source_names)}), got {X.shape}")
        if self.kind == IDENTITY:
            return X
        out = np.zeros((X.shape[0], len(self.names)), dtype=np.float64)
        dst, src = zip(*self._copy)
        out[:, list(dst)] = X[:, list(src)]
        codes = X[:, self._format_col]
        for code, j in enumerate(self._onehot):
            out[:, j] = codes == code
        return out
