"""Model service: the scoring cascade, its exact SHAP reason codes, the honest evaluation and the
HTTP scoring service.

Owns the gradient-boosted scorer (:mod:`model_service.scorer`), training the cascade on the
AMLworld temporal split (:mod:`model_service.training`) and the deep path that turns stage-1
candidates into explained alerts (:mod:`model_service.deep_path`), and the narrator
(:mod:`model_service.narrator`: SAR-style narratives from a small local language model, every
fact checked against the evidence while it decodes, with backtracking; its checker is
:mod:`model_service.narrator_facts`).

Stage 1 ("fast") scores every event in the stream job on the stream features; candidates
(score >= ``Cascade.candidate_threshold``) go to stage 2 ("deep"), which adds graph features,
alerts at ``Cascade.alert_threshold`` and explains each alert with exact TreeSHAP. Graph
features arrive as a callable ``graph_features_fn(event) -> {name: value}``, so this package
does not import :mod:`evidence_graph`. What ``auditflow train`` deploys screens nothing
(``train_cascade(screen=False)``: candidate threshold 0, every event to stage 2, the model on
stream, one-hop graph and GFP features fitted by :func:`~model_service.training.fit_validated`, the protocol
:mod:`model_service.evaluation` measures every model with): no stream-only first stage kept 95% of
laundering while passing 5% of events on the third-party sets.

:mod:`model_service.evaluation` compares the no-graph baseline, stream features only and stream +
graph features on one temporal split; :mod:`model_service.treeshap` is the exact float64 TreeSHAP;
:mod:`model_service.service` is ``auditflow serve model`` (micro-batching, priority tiers,
Prometheus metrics); :mod:`model_service.registry` records trained cascades by content.
"""

# Lazy exports: importing the package loads neither xgboost nor shap; each name loads on first
# use.
_EXPORTS = {
    "BinaryMetrics": "model_service.training",
    "BoosterParams": "model_service.scorer",
    "Cascade": "model_service.training",
    "DEEP_PARAMS": "model_service.training",
    "ExplanationError": "model_service.scorer",
    "FAST_PARAMS": "model_service.training",
    "GradientBoostedScorer": "model_service.scorer",
    "DecodingParams": "model_service.narrator",
    "narrate": "model_service.narrator",
    "narration_router": "model_service.narrator",
    "GraphFeaturesFn": "model_service.training",
    "NotFittedError": "model_service.scorer",
    "SHAP_TOLERANCE": "model_service.scorer",
    "ShapExplanation": "model_service.scorer",
    "SplitSummary": "model_service.training",
    "StageOneSummary": "model_service.training",
    "TrainingReport": "model_service.training",
    "best_f1_threshold": "model_service.training",
    "evaluate_models": "model_service.evaluation",
    "explain_alerts": "model_service.deep_path",
    "feature_matrix": "model_service.scorer",
    "recall_threshold": "model_service.training",
    "temporal_split": "model_service.training",
    "train_cascade": "model_service.training",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'model_service' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEEP_PARAMS",
    "FAST_PARAMS",
    "SHAP_TOLERANCE",
    "BinaryMetrics",
    "BoosterParams",
    "Cascade",
    "ExplanationError",
    "GradientBoostedScorer",
    "DecodingParams",
    "narrate",
    "narration_router",
    "GraphFeaturesFn",
    "NotFittedError",
    "ShapExplanation",
    "SplitSummary",
    "StageOneSummary",
    "TrainingReport",
    "best_f1_threshold",
    "evaluate_models",
    "explain_alerts",
    "feature_matrix",
    "recall_threshold",
    "temporal_split",
    "train_cascade",
]
