"""Honest evaluation: three models side by side on the same temporal split, so the value of each
feature family is visible.

* ``baseline``: the transfer's own fields only (:data:`auditflow.features.BASELINE_FEATURES`:
  amount, currencies differ, self-transfer, round amount, payment format by name) -- the public
  benchmark's no-graph baseline;
* ``stream``: the stream features (:data:`auditflow.features.MODEL_STREAM_FEATURES`);
* ``graph``: stream plus graph features (:data:`auditflow.features.GRAPH_FEATURE_NAMES`);

and, when the field's reference graph features are given (``reference_rows``, e.g. IBM's Graph
Feature Preprocessor through :mod:`evidence_graph.gfp_features`), two more on the same split:

* ``gfp``: the transfer's own fields plus the reference features -- the public AMLworld recipe
  (XGBoost on the transaction's fields and GFP features);
* ``gfp_stream``: stream plus reference features (ours without our graph features);
* ``gfp_one_hop``: stream, our one-hop graph features (those that read only the two accounts' own
  transfers, :data:`auditflow.features.ONE_HOP_GRAPH_FEATURES`, kept as the stream goes by
  :class:`evidence_graph.account_features.AccountFeatures`) and reference features;
* ``gfp_graph``: everything: stream, graph and reference features.

Each is trained on the first 60% (by time) and its threshold chosen on the next 20% (the best
minority-class F1 there); then (``refit``, the default) it is trained again with the same
hyperparameters and seed on those first 80% -- the model a bank would deploy uses every labelled
transfer before the test period -- and measured once on the last 20% at that threshold:
minority-class precision, recall and F1, PR-AUC (average precision,
:func:`sklearn.metrics.average_precision_score`) and precision at a fixed alert budget (the top
``budget_per_10k`` test events per 10,000 by score). As a cascade's first stage would be held to
it: ``screen_rate``, the share of test events at or above the threshold that kept
:data:`SCREEN_RECALL` (95%) of validation's laundering, and ``screen_recall``, the test recall there.
``lift`` = F1(graph) / F1(baseline). Nothing here reads hour of day or a format code number.

All use the same hyperparameters (:data:`EVAL_PARAMS`), seed and protocol. The test split
is read only for the final figures; ``validation_f1`` is the train-only model's, at its threshold.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
from sklearn.metrics import average_precision_score, precision_recall_curve

from auditflow.features import (
    BASELINE_FEATURES,
    GRAPH_FEATURE_NAMES,
    MODEL_FEATURE_DESCRIPTIONS,
    MODEL_STREAM_FEATURES,
    ONE_HOP_GRAPH_FEATURES,
)
from auditflow.records import TransactionEvent, ts_to_wire
from model_service.scorer import BoosterParams, feature_matrix
from model_service.training import (
    SPLIT_NAMES,
    BinaryMetrics,
    fit_validated,
    recall_threshold,
    temporal_split,
    untrainable,
)

#: Alerts an investigation team can work, per 10,000 transfers (precision at this budget).
DEFAULT_ALERT_BUDGET_PER_10K = 20
#: The recall a first stage (screen) must keep: what a cascade's stage 1 is held to.
SCREEN_RECALL = 0.95
#: One set of hyperparameters for every model compared (positives weighted 10x).
EVAL_PARAMS = BoosterParams(n_estimators=200, max_depth=6, scale_pos_weight=10.0)
MODEL_NAMES = ("baseline", "stream", "graph")
#: The models added when reference graph features are given.
REFERENCE_MODEL_NAMES = ("gfp", "gfp_stream", "gfp_one_hop", "gfp_graph")


@dataclass(frozen=True)
class ModelEvaluation:
    """One model on the split: its threshold (from validation) and its test figures."""

    name: str
    n_features: int
    threshold: float
    validation_f1: float
    test: BinaryMetrics
    refit: bool  # measured after training again on train + validation
    pr_auc: float
    precision_at_budget: float
    budget_alerts: int
    digest: str
    curve: tuple[np.ndarray, np.ndarray] = field(repr=False, compare=False)  # test (precision, recall)
    #: As a first stage (a screen): the share of test events scoring at or above the threshold that
    #: kept SCREEN_RECALL of validation's laundering, and the test recall there.
    screen_rate: float = 0.0
    screen_recall: float = 0.0
    test_scores: np.ndarray = field(repr=False, compare=False, default_factory=lambda: np.empty(0))

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("curve", "test_scores")}
        d["test"] = asdict(self.test)
        return d


@dataclass(frozen=True)
class EvaluationReport:
    seed: int
    split_events: dict[str, int]
    split_positives: dict[str, int]
    budget_per_10k: float
    models: tuple[ModelEvaluation, ...]

    def model(self, name: str) -> ModelEvaluation:
        return next(m for m in self.models if m.name == name)

    @property
    def lift(self) -> float:
        """F1 with graph features over F1 of the no-graph baseline (inf when the baseline finds none;
        nan when the graph model was not evaluated)."""
        if not any(m.name == "graph" for m in self.models):
            return float("nan")
        base = self.model("baseline").test.f1
        graph = self.model("graph").test.f1
        return graph / base if base > 0 else (float("inf") if graph > 0 else 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "split_events": self.split_events,
            "split_positives": self.split_positives,
            "budget_per_10k": self.budget_per_10k,
            "lift": self.lift if np.isfinite(self.lift) else None,
            "models": {m.name: m.to_dict() for m in self.models},
        }


def precision_at_budget(scores: np.ndarray, labels: np.ndarray, per_10k: float) -> tuple[float, int]:
    """Precision of the top ``ceil(per_10k * n / 10_000)`` scores (ties broken by position).

    >>> precision_at_budget(np.array([0.9, 0.1, 0.8, 0.7]), np.array([1, 0, 0, 1]), 5000)
    (0.5, 2)
    """
    n = int(scores.size)
    k = min(n, max(1, int(np.ceil(per_10k * n / 10_000 - 1e-9)))) if n else 0
    if k == 0:
        return 0.0, 0
    top = np.argsort(-scores, kind="stable")[:k]
    return float(np.asarray(labels)[top].sum() / k), k


def _matrix(rows: Sequence[Mapping[str, float]] | np.ndarray, names: Sequence[str], what: str) -> np.ndarray:
    """Rows as an ``(n, len(names))`` float64 matrix: dicts stacked in ``names`` order, or an array
    already in that order (its width checked)."""
    if isinstance(rows, np.ndarray):
        if rows.ndim != 2 or rows.shape[1] != len(names):
            raise ValueError(f"{what} has shape {rows.shape}, expected (events, {len(names)})")
        return np.asarray(rows, dtype=np.float64)
    return feature_matrix(rows, names)


def evaluate_models(
    events: Sequence[TransactionEvent],
    stream_inputs: Sequence[Mapping[str, float]] | np.ndarray,
    graph_rows: Sequence[Mapping[str, float]] | np.ndarray | None,
    seed: int,
    *,
    budget_per_10k: float = DEFAULT_ALERT_BUDGET_PER_10K,
    params: BoosterParams | None = None,
    split: tuple[float, float, float] = (0.6, 0.2, 0.2),
    graph_descriptions: Mapping[str, str] | None = None,
    refit: bool = True,
    reference_rows: Sequence[Mapping[str, float]] | np.ndarray | None = None,
    reference_names: Sequence[str] = (),
    one_hop_rows: Sequence[Mapping[str, float]] | np.ndarray | None = None,
) -> EvaluationReport:
    """Train and measure the three models (module docstring). ``stream_inputs`` are the models'
    stream inputs per event (:func:`auditflow.features.model_inputs`), ``graph_rows`` the graph
    features per event, both aligned with ``events`` (dicts, or arrays in
    :data:`~auditflow.features.MODEL_STREAM_FEATURES` and :data:`~auditflow.features.GRAPH_FEATURE_NAMES`
    order); with ``reference_rows`` (columns
    ``reference_names``, aligned too: dicts, or an ``(n, len(reference_names))`` array) also the
    ``gfp``, ``gfp_stream``, ``gfp_one_hop`` and ``gfp_graph`` models. ``graph_rows=None``: the
    models without our graph features only (``baseline``, ``stream``, and ``gfp``, ``gfp_stream``),
    and ``gfp_one_hop`` where ``one_hop_rows`` gives its columns
    (:data:`~auditflow.features.ONE_HOP_GRAPH_FEATURES`; with ``graph_rows`` they are taken from
    there)."""
    if not (len(events) == len(stream_inputs) == (len(events) if graph_rows is None else len(graph_rows))):
        raise ValueError("events, stream_inputs and graph_rows must be aligned (same length)")
    if one_hop_rows is not None and len(one_hop_rows) != len(events):
        raise ValueError("one_hop_rows must be aligned with events (same length)")
    if reference_rows is not None and (len(reference_rows) != len(events) or not reference_names):
        raise ValueError("reference_rows must be aligned with events and name their columns (reference_names)")
    if budget_per_10k <= 0:
        raise ValueError(f"budget_per_10k must be > 0, got {budget_per_10k}")
    params = params or EVAL_PARAMS
    parts = dict(zip(SPLIT_NAMES, temporal_split(events, split)))
    y = np.array([ev.is_laundering for ev in events], dtype=np.int64)
    counts = [SimpleNamespace(name=k, n_positive=int(y[i].sum())) for k, i in parts.items()]
    for name, idx in parts.items():
        if y[idx].sum() == 0:
            times = sorted(events[int(i)].timestamp for i in idx)
            raise untrainable(name, int(idx.size), ts_to_wire(times[0]), ts_to_wire(times[-1]), counts)
    S = _matrix(stream_inputs, MODEL_STREAM_FEATURES, "stream_inputs")
    G = None if graph_rows is None else _matrix(graph_rows, GRAPH_FEATURE_NAMES, "graph_rows")
    if G is not None:
        H: np.ndarray | None = G[:, [GRAPH_FEATURE_NAMES.index(n) for n in ONE_HOP_GRAPH_FEATURES]]
    else:
        H = None if one_hop_rows is None else _matrix(one_hop_rows, ONE_HOP_GRAPH_FEATURES, "one_hop_rows")
    base_cols = [MODEL_STREAM_FEATURES.index(n) for n in BASELINE_FEATURES]
    sets = {
        "baseline": (BASELINE_FEATURES, S[:, base_cols]),
        "stream": (MODEL_STREAM_FEATURES, S),
    }
    if G is not None:
        sets["graph"] = ((*MODEL_STREAM_FEATURES, *GRAPH_FEATURE_NAMES), np.hstack([S, G]))
    if reference_rows is not None:
        R = _matrix(reference_rows, tuple(reference_names), "reference_rows")
        sets["gfp"] = ((*BASELINE_FEATURES, *reference_names), np.hstack([S[:, base_cols], R]))
        sets["gfp_stream"] = ((*MODEL_STREAM_FEATURES, *reference_names), np.hstack([S, R]))
        if H is not None:
            sets["gfp_one_hop"] = ((*MODEL_STREAM_FEATURES, *ONE_HOP_GRAPH_FEATURES, *reference_names),
                                   np.hstack([S, H, R]))
        if G is not None:
            sets["gfp_graph"] = ((*MODEL_STREAM_FEATURES, *GRAPH_FEATURE_NAMES, *reference_names),
                                 np.hstack([S, G, R]))
    names_run = tuple(n for n in MODEL_NAMES + REFERENCE_MODEL_NAMES if n in sets)
    descriptions = {**MODEL_FEATURE_DESCRIPTIONS, **(graph_descriptions or {})}
    out = []
    for name in names_run:
        names, X = sets[name]
        fitted = fit_validated(names, X, y, parts, params, seed, descriptions=descriptions, refit=refit)
        model, thr, va_f1 = fitted.model, fitted.threshold, fitted.validation_f1
        screen_thr = recall_threshold(fitted.validation_scores, y[parts["validation"]], SCREEN_RECALL)
        te_idx = parts["test"]
        te = model.predict_proba(X[te_idx])
        y_te = y[te_idx]
        prec, rec, _ = precision_recall_curve(y_te, te)
        p_at, k = precision_at_budget(te, y_te, budget_per_10k)
        out.append(ModelEvaluation(
            name=name, n_features=len(names), threshold=thr, validation_f1=va_f1,
            test=BinaryMetrics.of(te >= thr, y_te), refit=refit,
            pr_auc=float(average_precision_score(y_te, te)),
            precision_at_budget=p_at, budget_alerts=k, digest=model.digest, curve=(prec, rec), test_scores=te,
            screen_rate=float((te >= screen_thr).mean()),
            screen_recall=float((te[y_te == 1] >= screen_thr).mean())))
    return EvaluationReport(
        seed=int(seed),
        split_events={n: int(i.size) for n, i in parts.items()},
        split_positives={n: int(y[i].sum()) for n, i in parts.items()},
        budget_per_10k=float(budget_per_10k),
        models=tuple(out),
    )


def data_sha256(events: Sequence[TransactionEvent]) -> str:
    """A hash of what the models learn from: each event's id, time, label in file order."""
    h = hashlib.sha256()
    for ev in events:
        h.update(f"{ev.event_id}|{ev.timestamp.isoformat()}|{int(ev.is_laundering)}\n".encode())
    return h.hexdigest()
