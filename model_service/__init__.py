"""Model service: the two-stage scoring cascade and its exact SHAP reason codes.

Owns the gradient-boosted scorer (:mod:`model_service.scorer`), training the cascade on the
AMLworld temporal split (:mod:`model_service.training`) and the deep path that turns stage-1
candidates into explained alerts (:mod:`model_service.deep_path`).

Stage 1 ("fast") scores every event in the stream job on the stream features; candidates
(score >= ``Cascade.candidate_threshold``) go to stage 2 ("deep"), which adds graph features,
alerts at ``Cascade.alert_threshold`` and explains each alert with exact TreeSHAP. Graph
features arrive as a callable ``graph_features_fn(event) -> {name: value}``, so this package
does not import :mod:`evidence_graph`.
"""

from model_service.deep_path import explain_alerts
from model_service.scorer import (
    SHAP_TOLERANCE,
    BoosterParams,
    ExplanationError,
    GradientBoostedScorer,
    NotFittedError,
    ShapExplanation,
    feature_matrix,
)
from model_service.training import (
    DEEP_PARAMS,
    FAST_PARAMS,
    BinaryMetrics,
    Cascade,
    GraphFeaturesFn,
    SplitSummary,
    StageOneSummary,
    TrainingReport,
    best_f1_threshold,
    recall_threshold,
    temporal_split,
    train_cascade,
)

__all__ = [
    "DEEP_PARAMS",
    "FAST_PARAMS",
    "SHAP_TOLERANCE",
    "BinaryMetrics",
    "BoosterParams",
    "Cascade",
    "ExplanationError",
    "GradientBoostedScorer",
    "GraphFeaturesFn",
    "NotFittedError",
    "ShapExplanation",
    "SplitSummary",
    "StageOneSummary",
    "TrainingReport",
    "best_f1_threshold",
    "explain_alerts",
    "feature_matrix",
    "recall_threshold",
    "temporal_split",
    "train_cascade",
]
