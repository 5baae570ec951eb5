"""Helpers for tests and benchmarks of the stream job: scorers that need no trained model.

A scorer factory is what :class:`pipelines.stream_job.StreamSpec` takes: a picklable callable
returning ``(predict(X) -> scores, threshold, digest, feature names)``; partials of the
module-level functions here pickle by reference, so the job's Python workers can load them.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from auditflow.features import FEATURE_NAMES


def _column_over(X, index: int, divisor: float):
    return np.asarray(X, dtype=np.float64)[:, index] / divisor


def _linear_factory(feature: str, divisor: float, threshold: float, digest: str):
    return partial(_column_over, index=FEATURE_NAMES.index(feature), divisor=divisor), threshold, digest, FEATURE_NAMES


def linear_scorer(feature: str = "amount_usd", divisor: float = 20_000.0, threshold: float = 0.5,
                  digest: str = "test-scorer"):
    """A factory scoring ``X[feature] / divisor``; ``threshold=0`` alerts on every event (so every
    event's features come back in the alerts)."""
    return partial(_linear_factory, feature, divisor, threshold, digest)
