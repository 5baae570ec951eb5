"""The stage-1 scorer as the stream job runs it: xgboost on Arrow batches.

The stream job scores every event in its Python worker (PyFlink process mode), a batch at a time
(:mod:`pipelines.stream_job`), with the cascade's stage-1 model loaded and verified against the
cascade manifest's digests by :meth:`model_service.training.Cascade.load`, on one thread: the
job's JVM operators use the other core.
"""

from __future__ import annotations

from functools import partial


def _cascade_fast_predict(cascade, X):
    return cascade.fast_score_batch(X)


def batch_scorer(model_dir: str) -> tuple:
    """Scorer factory for the stream job:
    ``(predict(X) -> stage-1 scores, candidate threshold, cascade digest, feature names)``."""
    from model_service.training import Cascade

    cascade = Cascade.load(model_dir, nthread=1)
    return (partial(_cascade_fast_predict, cascade), cascade.candidate_threshold, cascade.digest,
            cascade.stream_feature_names)
