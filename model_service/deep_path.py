"""The deep path: score stage-1 candidates with stage 2 and explain the ones that alert.

A pure function apart from ``graph_features_fn`` (which reads the evidence graph): the same
candidates, cascade and graph give the same alerts, reason codes and order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from auditflow.records import Alert, ReasonCode, TransactionEvent, alert_id_for
from model_service.training import Cascade, GraphFeaturesFn


def explain_alerts(
    candidates: Sequence[tuple[TransactionEvent, Mapping[str, float]]],
    cascade: Cascade,
    graph_features_fn: GraphFeaturesFn,
    top_k: int = 4,
) -> list[tuple[Alert, list[ReasonCode]]]:
    """Alerts (stage-2 score >= the cascade's alert threshold) with their top-``top_k``
    adverse SHAP reason codes, sorted by score descending then ``event_id``.

    Each alert carries the full stage-2 feature vector as scored and the *cascade* digest
    (both models and both thresholds decide whether an event alerts).
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if not candidates:
        return []
    X = cascade.deep_matrix(candidates, graph_features_fn)
    model = cascade.alert_model  # stage 2, or stage 1 in a one-stage cascade
    scores = model.predict_proba(X)
    keep = np.flatnonzero(scores >= cascade.alert_threshold)
    if keep.size == 0:
        return []
    codes = model.reason_codes_batch(X[keep], k=top_k)
    names = cascade.deep_feature_names
    digest = cascade.digest
    out = []
    for i, reasons in zip(keep.tolist(), codes):
        event = candidates[i][0]
        alert = Alert(
            alert_id=alert_id_for(event.event_id),
            event=event,
            score=float(scores[i]),
            threshold=cascade.alert_threshold,
            model_digest=digest,
            features=tuple((n, float(v)) for n, v in zip(names, X[i])),
        )
        out.append((alert, reasons))
    out.sort(key=lambda ar: (-ar[0].score, ar[0].event.event_id))
    return out
