"""The end-to-end flow, stage by stage: generate -> train -> stream job -> deep path -> reports.

Each function is one stage with its side effects (files, the job, the graph store) at its edges
and a typed result; :func:`stream_and_report` and :func:`demo` chain them. The CLI calls these and
only renders what they return; a failed count check is a :class:`CountMismatch`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditflow.errors import ConfigError
from auditflow.jsonlines import iter_json_lines, write_json_lines
from auditflow.limits import LONG_WINDOW_MINUTES, MINUTES_PER_DAY
from auditflow.records import Alert, ReasonCode, RejectedRecord, TransactionEvent
from auditflow.version import code_version
from auditflow_app.settings import Settings
from ingest.amlworld import read_transactions

if TYPE_CHECKING:
    from evidence_graph import GraphStore
    from ingest.kafka_io import ProducerOptions
    from model_service.service import TierPolicy

MODEL_DIRNAME = "model"
REPORTS_DIRNAME = "reports"
DATA_DIRNAME = "data"

#: ``progress(stage, done, total)``: the flow reports each stage as it starts (``done=0``) and,
#: where it can count, its progress; ``total=None`` when the amount of work is unknown.
#: Stages: ``generate``, ``train``, ``stream``, ``deep``.
ProgressFn = Callable[[str, int, "int | None"], None]


def _no_progress(stage: str, done: int, total: int | None) -> None:
    pass


def open_graph(settings: Settings) -> GraphStore:
    """The graph store the settings name (``graph_url``, Neo4j credentials and namespace)."""
    from evidence_graph import open_store

    return open_store(settings.effective_graph_url, **settings.graph_options)


def producer_options(settings: Settings, topic: str | None = None) -> ProducerOptions:
    """Where ``auditflow produce`` sends a file: the broker, ``topic`` (default: the transactions
    topic), the DLQ topic and their partition count, and the plausible event-time window."""
    from ingest.kafka_io import ProducerOptions

    return ProducerOptions(
        bootstrap=settings.kafka_bootstrap,
        topic=topic or settings.topic_transactions,
        dlq_topic=settings.topic_dlq,
        partitions=settings.topic_partitions,
        time_window=settings.event_time_window,
    )


def tier_policy(settings: Settings, alert_threshold: float) -> TierPolicy:
    """The deep-path tiers of the settings (``AUDITFLOW_TIER_*``: score bars and latency targets)
    over a cascade's alert threshold."""
    from model_service.service import TierPolicy

    targets = {
        "critical": settings.tier_critical_ms,
        "normal": settings.tier_normal_ms,
        "background": settings.tier_background_ms,
    }
    return TierPolicy(settings.tier_critical_score, settings.tier_normal_score, alert_threshold, targets)


def report_signer(settings: Settings, *, development_key: bool = False):
    """The :class:`reports.signing.Signer` of ``AUDITFLOW_SIGNING_KEY_FILE``. Without one, the
    public development key only where ``development_key`` (the demo); elsewhere
    :class:`reports.signing.DevelopmentKeyRefused`, saying how to make a key."""
    from reports.signing import DevelopmentKeyRefused, development_signer, load_signer

    if settings.signing_key_file is not None:
        return load_signer(settings.signing_key_file)
    if development_key:
        return development_signer()
    raise DevelopmentKeyRefused(
        "no signing key configured (AUDITFLOW_SIGNING_KEY_FILE): refusing to sign reports with the public "
        "development key outside the demo -- its signatures prove nothing. Make a key with "
        "`auditflow keys new PATH`, set AUDITFLOW_SIGNING_KEY_FILE=PATH and publish its public key "
        "(`auditflow keys publish`)"
    )


def trusted_keys(settings: Settings, *, development_key: bool = False):
    """The :class:`reports.signing.Keyring` verifiers trust: ``AUDITFLOW_TRUSTED_KEYS_FILE`` plus the
    public key of ``AUDITFLOW_SIGNING_KEY_FILE``; the development key only with ``development_key``."""
    from reports.signing import Keyring, development_signer, load_signer

    ring = Keyring.load(settings.trusted_keys_file) if settings.trusted_keys_file is not None else Keyring()
    if settings.signing_key_file is not None:
        ring.add(load_signer(settings.signing_key_file).public_key)
    if development_key:
        ring.add(development_signer().public_key)
    return ring


def verify_reports(
    settings: Settings,
    reports_dir: str | Path,
    *,
    tree_head_file: str | Path | None = None,
    allow_dev_key: bool = False,
):
    """:func:`reports.verify.verify_reports` of the folder against the trusted keys (see
    :func:`trusted_keys`) and, when given, a kept tree head."""
    from reports.audit_log import TreeHead
    from reports.verify import verify_reports as verify

    head = TreeHead.load(tree_head_file) if tree_head_file is not None else None
    return verify(
        reports_dir,
        trusted_keys(settings, development_key=allow_dev_key),
        tree_head=head,
        tree_head_name=f"kept tree head {Path(tree_head_file).name}" if tree_head_file else "kept tree head",
    )


def export_tree_head(reports_dir: str | Path, out: str | Path | None = None):
    """The folder's signed tree head (``tree_head.json``), copied to ``out`` when given."""
    from reports.audit_log import TreeHead
    from reports.store import TREE_HEAD_NAME

    path = Path(reports_dir) / TREE_HEAD_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path}: no signed tree head (a run writes it when it finishes)")
    head = TreeHead.load(path)
    if out is not None:
        head.write(out)
    return head


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_events(csv_path: str | Path, settings: Settings) -> tuple[list[TransactionEvent], list[RejectedRecord]]:
    """The file's events and rejects (``settings.event_time_window``: the plausible event times)."""
    events: list[TransactionEvent] = []
    rejects: list[RejectedRecord] = []
    for item in read_transactions(csv_path, time_window=settings.event_time_window):
        if isinstance(item, RejectedRecord):
            rejects.append(item)
        else:
            events.append(item)
    return events, rejects


# ---------------------------------------------------------------------------- data


@dataclass(frozen=True)
class GeneratedData:
    """A synthetic set written in the AMLworld format: the transactions CSV and its answer key."""

    transactions: Path
    patterns: Path
    events: int
    laundering: int
    attempts: int
    laundering_ids: frozenset[str]
    start: datetime | None = None  # where its time begins (midnight of its first day)
    days: int = 0


def generate(
    out_dir: str | Path,
    *,
    name: str = "synthetic",
    accounts: int = 2000,
    days: int = 3,
    laundering_rate: float = 0.001,
    seed: int,
) -> GeneratedData:
    """Write ``NAME_Trans.csv`` and ``NAME_Patterns.txt`` (seeded) into ``out_dir``."""
    from ingest.synthetic import generate as synthesize

    return _written(synthesize(accounts=accounts, days=days, laundering_rate=laundering_rate, seed=seed), out_dir, name)


def generate_continuing(
    out_dir: str | Path,
    *,
    accounts: int,
    history_days: int,
    live_days: int,
    seed: int,
    history_rate: float = 0.01,
    live_rate: float = 0.001,
    shift: Any = None,
) -> tuple[GeneratedData, GeneratedData]:
    """``history_Trans.csv`` and ``live_Trans.csv`` of one world (:func:`ingest.synthetic.generate_phases`):
    the live set goes on where the history stops, with the same accounts and banks. ``shift``: a
    stated drift of the live set (:class:`ingest.synthetic.Shift`)."""
    from ingest.synthetic import generate_phases

    h, lv = generate_phases(accounts, [(history_days, history_rate), (live_days, live_rate)], seed, shift=shift)
    return _written(h, out_dir, "history"), _written(lv, out_dir, "live")


def _written(ds, out_dir: str | Path, name: str) -> GeneratedData:
    from ingest.synthetic import write_dataset

    trans, patterns = write_dataset(ds, out_dir, name=name)
    return GeneratedData(
        trans,
        patterns,
        len(ds.events),
        ds.laundering_count,
        len(ds.attempts),
        frozenset(e.event_id for e in ds.events if e.is_laundering),
        datetime.fromisoformat(ds.params["start"]),
        ds.params["days"],
    )


# ---------------------------------------------------------------------------- training


@dataclass(frozen=True)
class PreparedData:
    """A labelled file as the models see it: events in time order, stream features, graph features
    as of each event (from the full graph: no feature sees its own minute or later), and the field's
    reference graph features (IBM's GFP, :mod:`evidence_graph.gfp_features`: ``reference``, one row
    per event, columns ``reference_names``; fed in event order, no look-ahead)."""

    events: list[TransactionEvent]
    rejected: int
    with_features: list[tuple[TransactionEvent, dict[str, float]]]
    graph_rows: list[Mapping[str, float]] | None  # None: not computed (prepare_data(graph=False))
    input_sha256: str
    reference_names: tuple[str, ...] = ()
    reference: Any = None  # numpy array (events x reference_names) or None
    #: the one-hop graph features (auditflow.features.ONE_HOP_GRAPH_FEATURES) per event, kept as the
    #: stream goes (evidence_graph.account_features): the deployed model's, always computed
    one_hop_rows: Sequence[Mapping[str, float]] = ()


def prepare_data(
    csv_path: str | Path, settings: Settings, *, reference: bool = True, graph: bool = True
) -> PreparedData:
    """``graph=False``: without our graph features (the slow part: ~200 events/s on 2 cores on
    dense data), so without the models that use them, but with their one-hop part (kept per
    account, thousands of events/s), which the deployed model reads."""
    from auditflow.features import ONE_HOP_GRAPH_FEATURES
    from evidence_graph.account_features import account_feature_rows
    from evidence_graph.gfp_features import gfp_feature_matrix
    from evidence_graph.graph_features import graph_feature_rows
    from pipelines.features import compute_features

    events, rejects = read_events(csv_path, settings)
    with_features = compute_features(events)
    ordered = [ev for ev, _ in with_features]
    names, matrix = gfp_feature_matrix(ordered) if reference else ((), None)
    rows = graph_feature_rows(ordered) if graph else None
    if rows is None:
        one_hop: Sequence[Mapping[str, float]] = account_feature_rows(ordered)
    else:  # the graph rows hold them already (the same values: tests/evidence_graph)
        one_hop = [{n: r[n] for n in ONE_HOP_GRAPH_FEATURES} for r in rows]
    return PreparedData(ordered, len(rejects), with_features, rows, sha256_file(csv_path), names, matrix, one_hop)


@dataclass(frozen=True)
class EvaluationResult:
    """``auditflow evaluate``: the three models side by side, the PR curves and where they went."""

    report: Any  # model_service.evaluation.EvaluationReport
    input_sha256: str
    rejected: int
    json_path: Path
    png_path: Path

    def summary(self) -> dict[str, Any]:
        return {"input_sha256": self.input_sha256, "rejected": self.rejected, **self.report.to_dict()}


def _write_evaluation(out_dir: Path, report, data: PreparedData) -> tuple[Path, Path]:
    from model_service.plots import pr_curve_png

    out_dir.mkdir(parents=True, exist_ok=True)
    labels = {m.name: f"{m.name} (PR-AUC {m.pr_auc:.3f}, F1 {m.test.f1:.3f})" for m in report.models}
    png = out_dir / "pr_curve.png"
    png.write_bytes(pr_curve_png({m.name: m.curve for m in report.models}, labels=labels))
    body = {"input_sha256": data.input_sha256, "rejected": data.rejected, **report.to_dict()}
    js = out_dir / "evaluation.json"
    js.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    return js, png


def evaluate(
    csv_path: str | Path, out_dir: str | Path, settings: Settings, *, data: PreparedData | None = None
) -> EvaluationResult:
    """The no-graph baseline, the stream-features-only model, the model with graph features and,
    where ``data`` has them (:func:`prepare_data` computes them by default), the models with the
    field's reference graph features (GFP), on the file's temporal 60/20/20 split
    (:mod:`model_service.evaluation`); writes ``evaluation.json`` and ``pr_curve.png`` into
    ``out_dir``."""
    from auditflow.features import GRAPH_FEATURE_DESCRIPTIONS, model_inputs
    from evidence_graph.gfp_features import gfp_feature_descriptions
    from model_service.evaluation import evaluate_models

    data = data or prepare_data(csv_path, settings)
    with_reference = data.reference is not None
    report = evaluate_models(
        data.events,
        [model_inputs(f) for _, f in data.with_features],
        data.graph_rows,
        settings.seed,
        budget_per_10k=settings.alert_budget_per_10k,
        graph_descriptions={**GRAPH_FEATURE_DESCRIPTIONS, **(gfp_feature_descriptions() if with_reference else {})},
        reference_rows=data.reference,
        reference_names=data.reference_names,
        one_hop_rows=data.one_hop_rows,
    )
    js, png = _write_evaluation(Path(out_dir), report, data)
    return EvaluationResult(report, data.input_sha256, data.rejected, js, png)


#: What the multi-set evaluation reports per model, each a mean and a standard deviation.
EVALUATION_FIGURES = ("f1", "pr_auc", "precision_at_budget", "alerts_per_10k")


def evaluation_figures(report: Any) -> dict[str, dict[str, float]]:
    """Per model of one :class:`~model_service.evaluation.EvaluationReport`: test F1, PR-AUC,
    precision at the alert budget, and alerts per 10,000 test transfers at its threshold."""
    n_test = report.split_events["test"]
    return {
        m.name: {
            "f1": m.test.f1,
            "pr_auc": m.pr_auc,
            "precision_at_budget": m.precision_at_budget,
            "alerts_per_10k": 10_000 * m.test.flagged / n_test if n_test else 0.0,
        }
        for m in report.models
    }


def _mean_sd(values: Sequence[float]) -> dict[str, float]:
    import statistics

    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


@dataclass(frozen=True)
class MultiEvaluation:
    """``auditflow evaluate`` over several data sets and seeds: one evaluation per set and seed
    (each with its own files), the figures per set (mean and sd over the seeds) and pooled (mean
    and sd over the sets' means: every set weighs the same, whatever its size)."""

    runs: tuple[tuple[str, int, EvaluationResult], ...]  # (set name, seed, result)
    json_path: Path

    @property
    def sets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for name, _, _ in self.runs))

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(seed for _, seed, _ in self.runs))

    def per_set(self) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
        """set -> model -> figure -> {mean, sd} over the seeds."""
        out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
        for name in self.sets:
            figs = [evaluation_figures(r.report) for n, _, r in self.runs if n == name]
            out[name] = {
                model: {f: _mean_sd([fig[model][f] for fig in figs]) for f in EVALUATION_FIGURES} for model in figs[0]
            }
        return out

    def pooled(self) -> dict[str, dict[str, dict[str, float]]]:
        """model -> figure -> {mean, sd} over the sets' means."""
        per = self.per_set()
        models = next(iter(per.values())).keys()
        return {m: {f: _mean_sd([per[s][m][f]["mean"] for s in per]) for f in EVALUATION_FIGURES} for m in models}

    def summary(self) -> dict[str, Any]:
        return {
            "sets": list(self.sets),
            "seeds": list(self.seeds),
            "per_set": self.per_set(),
            "pooled": self.pooled(),
            "runs": [{"set": n, "seed": s, "json": str(r.json_path)} for n, s, r in self.runs],
        }


def evaluate_sets(
    csv_paths: Sequence[str | Path], out_dir: str | Path, settings: Settings, *, seeds: Sequence[int]
) -> MultiEvaluation:
    """:func:`evaluate` of every file with every seed (the features of a file computed once), each
    into ``out_dir/<file stem>/seed-<seed>/``; the per-set and pooled figures into
    ``out_dir/evaluation_summary.json``. Two files with the same stem are refused."""
    stems = [Path(p).stem for p in csv_paths]
    if len(set(stems)) != len(stems):
        raise ConfigError(f"evaluate: two data sets share a file name: {sorted(stems)}")
    if not seeds:
        raise ConfigError("evaluate: no seed given")
    out = Path(out_dir)
    runs = []
    for path, stem in zip(csv_paths, stems, strict=True):
        data = prepare_data(path, settings)
        for seed in seeds:
            res = evaluate(path, out / stem / f"seed-{seed}", settings.model_copy(update={"seed": seed}), data=data)
            runs.append((stem, int(seed), res))
    multi = MultiEvaluation(tuple(runs), out / "evaluation_summary.json")
    out.mkdir(parents=True, exist_ok=True)
    multi.json_path.write_text(json.dumps(multi.summary(), indent=2, sort_keys=True) + "\n")
    return multi


#: The model ``auditflow train`` deploys, by its name in ``auditflow evaluate``: stream features, our
#: one-hop graph features and the field's graph features (GFP), one model scoring every event (see
#: :func:`train`).
DEPLOYED_MODEL = "gfp_one_hop"


def train(
    csv_path: str | Path, model_dir: str | Path, settings: Settings, *, compare_graph: bool = True
) -> dict[str, Any]:
    """Train the deployed model on a labelled transactions file (temporal 60/20/20 split) and
    evaluate the file's models side by side (:func:`evaluate`; ``compare_graph=False``: without the
    models on all our graph features, whose multi-hop part the deployed model does not use); the
    deployed model is the one the evaluation measured as :data:`DEPLOYED_MODEL` (same features,
    parameters, seed and protocol: the same digest, checked here). It scores every event: the
    cascade's stage 1 passes all (its score stays the stream's fast score) and the model -- stream,
    one-hop graph and GFP features -- alerts.
    The cascade is recorded in the registry (content-addressed, feature schema, training data hash)."""
    import numpy as np

    from auditflow.features import GRAPH_FEATURE_DESCRIPTIONS, ONE_HOP_GRAPH_FEATURES
    from evidence_graph.gfp_features import gfp_feature_descriptions
    from model_service import train_cascade
    from model_service.evaluation import EVAL_PARAMS, data_sha256
    from model_service.registry import record
    from model_service.scorer import feature_matrix

    data = prepare_data(csv_path, settings, graph=compare_graph)
    cascade, report = train_cascade(
        data.with_features,
        lambda ev: {},  # unused: the matrix below has every row
        (*ONE_HOP_GRAPH_FEATURES, *data.reference_names),
        {**GRAPH_FEATURE_DESCRIPTIONS, **gfp_feature_descriptions()},
        seed=settings.seed,
        screen=False,
        deep_params=EVAL_PARAMS,
        graph_matrix=np.hstack([feature_matrix(data.one_hop_rows, ONE_HOP_GRAPH_FEATURES), data.reference]),
    )
    model_dir = Path(model_dir)
    cascade.save(model_dir)
    evaluation = evaluate(csv_path, model_dir, settings, data=data)
    measured = evaluation.report.model(DEPLOYED_MODEL)
    if cascade.deep is None or measured.digest != cascade.deep.digest:
        raise RuntimeError(
            f"the deployed model is not the one evaluate measured as {DEPLOYED_MODEL!r} "
            f"({cascade.alert_model.digest} against {measured.digest})"
        )
    summary = {
        "deployed_model": DEPLOYED_MODEL,
        "input_sha256": data.input_sha256,
        "rejected": data.rejected,
        **report.to_dict(),
        "evaluation": evaluation.report.to_dict(),
    }
    record(
        model_dir,
        cascade,
        data_sha256=data_sha256(data.events),
        input_sha256=data.input_sha256,
        summary={
            "stages": cascade.stages,
            "stage_choice": report.stage_choice,
            "cascade_test_f1": report.cascade_test.f1,
        },
    )
    # Same seed, same bytes: wall-clock timings go to a file of their own.
    timings = {k: summary.pop(k) for k in sorted(summary) if k.endswith("_seconds")}
    (model_dir / "training_report.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    (model_dir / "training_timings.json").write_text(json.dumps(timings, indent=2, sort_keys=True) + "\n")
    return {**summary, **timings}


# ---------------------------------------------------------------------------- stream job


@dataclass
class StreamResult:
    """What the stream job did: records in, events processed (parsed, featured and scored),
    rejects, the fast-path alerts as deep-path candidates, and its wall time."""

    records_in: int
    processed: int
    rejects: list[RejectedRecord]
    candidates: list[tuple[TransactionEvent, dict[str, float]]]
    seconds: float
    late: list[RejectedRecord] = field(default_factory=list)  # behind the watermark: split off
    duplicates: int = 0  # records whose event id was already seen: dropped before features
    drift_records: list[dict] = field(default_factory=list)  # pipelines.drift.DriftRecord dicts
    drift_alerts: list[dict] = field(default_factory=list)  # pipelines.drift.DriftAlert dicts
    warmup: int = 0  # events of a warm-up history that went into the windows first (not in records_in)
    arrivals: dict[str, int] = field(default_factory=dict)  # alert event id -> its arrival at the job (epoch ms)


def stream_spec(model_dir: str | Path, settings: Settings):
    """The stream job's spec from settings: the stage-1 model (batch scorer), the graph store
    (its password as a file path, read on the TaskManager), parallelism and the event-time rules."""
    from functools import partial

    from model_service.fast_path import batch_scorer
    from pipelines.stream_job import StreamSpec

    return StreamSpec(
        scorer_factory=partial(batch_scorer, str(Path(model_dir).resolve())),
        graph_url=settings.effective_graph_url,
        graph_options=settings.graph_job_options,  # the Neo4j password by reference: never pickled
        parallelism=settings.parallelism,
        out_of_orderness_ms=settings.out_of_orderness_ms,
        allowed_lateness_ms=settings.allowed_lateness_ms,
        time_window=settings.event_time_window,
        drift=drift_spec(settings),
    )


def drift_spec(settings: Settings):
    """What the stream job scores drift against (``AUDITFLOW_DRIFT_REFERENCE``; None: no drift),
    with the window and the alert rules (``AUDITFLOW_DRIFT_RULES_FILE``, else the default)."""
    if settings.drift_reference is None:
        return None
    from pipelines.drift import load_drift_spec

    try:
        return load_drift_spec(settings.drift_reference, settings.drift_window_minutes, settings.drift_rules_file)
    except ValueError as e:
        raise ConfigError(f"drift (AUDITFLOW_DRIFT_REFERENCE / AUDITFLOW_DRIFT_RULES_FILE): {e}") from None


def run_stream(
    csv_path: str | Path, model_dir: str | Path, settings: Settings, *, warmup: str | Path | None = None
) -> StreamResult:
    """Run the stream job over the file (bounded source) on a local MiniCluster.

    The counts are the job's own: ``in = processed + rejected + late + duplicate``; a rerun into
    the same graph, or a ``memory:`` graph, balances too. ``warmup``: an earlier transactions file
    whose last seven days warm the accounts' windows first (:func:`pipelines.stream_job.run_file_job`)."""
    from pipelines.stream_job import run_file_job

    t0 = time.perf_counter()
    out = run_file_job(str(csv_path), stream_spec(model_dir, settings), warmup=warmup)
    seconds = time.perf_counter() - t0
    candidates = candidates_from_fast_alerts(json.dumps(a) for a in out.alerts)
    arrivals = arrivals_from_fast_alerts(out.alerts)
    return StreamResult(
        out.records_in,
        out.processed,
        out.rejects,
        candidates,
        seconds,
        late=out.late,
        duplicates=len(out.duplicates),
        drift_records=out.drift_records,
        drift_alerts=out.drift_alerts,
        warmup=out.warmup,
        arrivals=arrivals,
    )


def checkpoint_dir(settings: Settings) -> Path:
    """Where Kafka jobs started from this process keep their retained checkpoints."""
    return settings.out_dir / "checkpoints"


def resume_path(settings: Settings, from_savepoint: str | Path | None = None, resume: bool = False) -> Path | None:
    """What a Kafka job restores from: ``from_savepoint`` (a savepoint or retained checkpoint
    directory), else with ``resume`` the newest retained checkpoint under :func:`checkpoint_dir`
    (``FileNotFoundError`` if there is none), else nothing (start at the group's offsets)."""
    from pipelines.flink_client import restore_path

    return restore_path(checkpoint_dir(settings), from_savepoint, resume)


def kafka_job_config(
    settings: Settings,
    *,
    bounded: bool,
    group_id: str = "auditflow-stream",
    job_name: str = "auditflow-kafka",
    restore_path: str | Path | None = None,
):
    from pipelines.kafka_job import KafkaJobConfig, check_connector_jar

    return KafkaJobConfig(
        bootstrap=settings.kafka_bootstrap,
        topic_transactions=settings.topic_transactions,
        topic_alerts=settings.topic_alerts,
        topic_dlq=settings.topic_dlq,
        topic_drift_scores=settings.topic_drift_scores,
        topic_drift_alerts=settings.topic_drift_alerts,
        connector_jar=check_connector_jar(str(settings.flink_kafka_jar) if settings.flink_kafka_jar else None),
        group_id=group_id,
        bounded=bounded,
        job_name=job_name,
        checkpoint_dir=str(checkpoint_dir(settings)),
        checkpoint_interval_ms=settings.checkpoint_interval_ms,
        delivery=settings.alert_delivery,
        restore_path=str(restore_path) if restore_path else None,
    )


def run_kafka_job(
    settings: Settings,
    model_dir: str | Path,
    *,
    bounded: bool = True,
    group_id: str = "auditflow-stream",
    job_name: str = "auditflow-kafka",
    restore_path: str | Path | None = None,
):
    """The Kafka job on a local MiniCluster, configured from settings; returns its counts."""
    from pipelines.kafka_job import run_kafka_job as run

    return run(
        kafka_job_config(settings, bounded=bounded, group_id=group_id, job_name=job_name, restore_path=restore_path),
        stream_spec(model_dir, settings),
    )


def submit_kafka_job(
    settings: Settings,
    model_dir: str | Path,
    *,
    bounded: bool = True,
    group_id: str = "auditflow-stream",
    job_name: str = "auditflow-kafka",
    timeout_s: float = 1800,
    restore_path: str | Path | None = None,
    detached: bool = False,
) -> subprocess.CompletedProcess:
    """Submit the Kafka job to the Flink session cluster with ``flink run -py`` and wait for it
    (with ``detached``, only until the cluster accepted it: the output names its JobID).

    Exactly what a user runs against their own cluster: the Flink distribution's ``bin/flink``
    (``settings.flink_home``, else the one inside the installed ``pyflink`` package) with the
    cluster's configuration (``settings.flink_conf_dir``) and the REST address from settings; the
    job's settings travel as its arguments (:func:`pipelines.flink_client.submit`). Raises
    ``RuntimeError`` with the client's output."""
    import os

    from pipelines.flink_client import submit

    cfg = kafka_job_config(settings, bounded=bounded, group_id=group_id, job_name=job_name, restore_path=restore_path)
    return submit(
        cfg,
        model_dir,
        stream_spec(model_dir, settings),
        rest_url=settings.flink_rest,
        base_env=os.environ,
        flink_home=settings.flink_home,
        flink_conf_dir=settings.flink_conf_dir,
        drift_reference=settings.drift_reference,
        drift_rules_file=settings.drift_rules_file,
        timeout_s=timeout_s,
        detached=detached,
    )


def candidates_from_fast_alerts(messages: Iterable[str | bytes]) -> list[tuple[TransactionEvent, dict[str, float]]]:
    """Fast-path alert messages (file run or the ``alerts`` topic) -> deep-path candidates.

    Sorted by source offset then event id, and de-duplicated by event id (at-least-once delivery
    may repeat a message)."""
    seen: dict[str, tuple[TransactionEvent, dict[str, float]]] = {}
    for m in messages:
        a = json.loads(m)
        ev = TransactionEvent.from_dict(a["event"])
        seen.setdefault(ev.event_id, (ev, {k: float(v) for k, v in a["features"]}))
    return sorted(seen.values(), key=lambda c: (c[0].source_offset, c[0].event_id))


def arrivals_from_fast_alerts(messages: Iterable[str | bytes | Mapping]) -> dict[str, int]:
    """Each alerted event's arrival at the job (epoch ms, wall clock: where the deep path's latency
    starts), from the fast path's alert messages; a message repeated by at-least-once delivery
    keeps the earliest."""
    out: dict[str, int] = {}
    for m in messages:
        a = m if isinstance(m, Mapping) else json.loads(m)
        at = a.get("arrived_ms")
        if at is not None:
            eid = a["event"]["event_id"]
            out[eid] = min(int(at), out.get(eid, int(at)))
    return out


def cluster_job_counts(settings: Settings, client_output: str) -> dict[str, int]:
    """The job's own counters (accumulators) from the cluster's REST API (``settings.flink_rest``),
    for the job whose id the ``flink run`` client printed (:func:`pipelines.flink_client.cluster_job_counts`)."""
    from pipelines.flink_client import cluster_job_counts as counts

    return counts(settings.flink_rest, client_output)


def run_stream_kafka(
    csv_path: str | Path,
    model_dir: str | Path,
    settings: Settings,
    *,
    cluster: bool = False,
    fresh_topics: bool = False,
    progress: Callable[[int], None] | None = None,
) -> StreamResult:
    """Produce the file to Kafka, run the Kafka job (local MiniCluster or the session cluster)
    to the end of the topic, and read its alerts and dead letters back from Kafka."""
    from ingest.kafka_io import consume_all, delete_topics, ensure_topics, produce_file

    topics = (settings.topic_transactions, settings.topic_alerts, settings.topic_dlq)
    if fresh_topics:
        delete_topics(settings.kafka_bootstrap, topics)
    ensure_topics(settings.kafka_bootstrap, {t: settings.topic_partitions for t in topics})
    produced = produce_file(csv_path, producer_options(settings))
    t0 = time.perf_counter()
    if cluster:
        proc = submit_kafka_job(settings, str(model_dir), bounded=True)
        counts = cluster_job_counts(settings, proc.stdout + proc.stderr)
        processed, duplicates = counts["processed"], counts["duplicate"]
    else:
        res = run_kafka_job(settings, str(model_dir), bounded=True)
        processed, duplicates = res.processed, res.duplicate
    seconds = time.perf_counter() - t0
    alerts = consume_all(settings.kafka_bootstrap, settings.topic_alerts, timeout_s=120)
    dead = consume_all(settings.kafka_bootstrap, settings.topic_dlq, timeout_s=60)
    dead_letters = [RejectedRecord.from_dict(json.loads(r.value)) for r in dead if r.value is not None]
    rejects = [r for r in dead_letters if r.stage != "late"]
    late = [r for r in dead_letters if r.stage == "late"]
    candidates = candidates_from_fast_alerts(r.value for r in alerts if r.value is not None)
    arrivals = arrivals_from_fast_alerts(r.value for r in alerts if r.value is not None)
    return StreamResult(
        produced.read, processed, rejects, candidates, seconds, late=late, duplicates=duplicates, arrivals=arrivals
    )


# ---------------------------------------------------------------------------- deep path


@dataclass
class CaseResult:
    alert: Alert
    reason_codes: list[ReasonCode]
    report_pdf: Path | None = None
    report_error: str | None = None  # why its report could not be written (reports.ReportFailure)
    trace_id: str = ""
    typologies: list[str] = field(default_factory=list)
    deep_ms: float | None = None  # wall time of its deep path: its share of the batch SHAP, then trace to report
    latency_ms: float | None = None  # from its event's arrival at the job to its report written (wall clock)
    tier: str = ""  # its deep-path tier (critical, normal, background: TierPolicy of the settings)


def run_deep_path(
    candidates: list[tuple[TransactionEvent, dict[str, float]]],
    model_dir: str | Path,
    settings: Settings,
    *,
    input_sha256: str,
    reports_dir: str | Path,
    max_reports: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    development_key: bool = False,
    drift_records: Sequence[dict] = (),
    metrics_path: str | Path | None = None,
    arrivals: Mapping[str, int] | None = None,
) -> list[CaseResult]:
    """Stage-2 score + SHAP for the candidates; trace, typologies and a signed PDF per alert (with
    the drift of the alert's segments at alert time, where the run scored drift).

    The alerts queue by tier (:class:`model_service.service.TierPolicy` of the settings:
    critical, then normal, then background; by score within a tier), so a report cap
    (``max_reports``) leaves out the least urgent. Per-tier latency, target misses, cases done
    and queue depth (:class:`model_service.service.TierMetrics`) go to ``metrics_path`` where
    given, in Prometheus' text format. Latency is one clock: from the event's arrival at the job
    (``arrivals``, the fast path's stamp) to its report written, the figure each case records
    (``latency_ms``, in ``alerts.jsonl`` and so in the period summaries) and the metrics observe;
    an event without a stamp counts from the deep path's start."""
    from model_service import Cascade, explain_alerts
    from model_service.service import TIERS, TierMetrics
    from pipelines.drift_views import DriftWindows, alert_drift_status
    from reports import ReportFailure, ReportWriter

    signer = report_signer(settings, development_key=development_key)
    cascade = Cascade.load(model_dir)
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    writer = ReportWriter(
        reports_dir,
        input_sha256=input_sha256,
        code_version=code_version(),
        seed=settings.seed,
        signer=signer,  # repairs what a crashed run left
        **report_profile_options(settings),
    )
    drift_windows = DriftWindows.of(drift_records)  # once: each alert's report looks up its window
    policy = tier_policy(settings, cascade.alert_threshold)
    # per tier: from the event's arrival at the job to its report written
    metrics = TierMetrics(
        "auditflow_deep_path",
        latency=("seconds", "from the event's arrival at the job to its report written"),
        done=("cases", "alerts through the deep path"),
        waiting="alerts waiting for their deep path",
        missed="deep paths past their tier's target",
        buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    )
    arrivals = arrivals or {}
    with open_graph(settings) as store:
        t_explain = time.perf_counter()
        started_ms = time.time() * 1000.0
        features_fn = deep_graph_features(cascade, candidates, store)
        explained = explain_alerts(candidates, cascade, features_fn)
        share_ms = (time.perf_counter() - t_explain) * 1000.0 / max(1, len(explained))
        cases = [CaseResult(alert, codes, tier=policy.tier(alert.score)) for alert, codes in explained]
        run_alerts = alerts_by_account([c.alert for c in cases])
        narrated = narrated_alerts(settings, [(c.alert, c.tier) for c in cases])
        rank = {t: i for i, t in enumerate(TIERS)}
        queue = sorted(cases, key=lambda c: rank.get(c.tier, len(rank)))  # stable: by score within a tier
        for c in queue:
            metrics.depth.labels(c.tier).inc()
        todo = queue if max_reports is None else queue[:max_reports]
        for i, case in enumerate(todo):
            alert, codes = case.alert, case.reason_codes
            t_case = time.perf_counter()
            trace, matches = trace_and_typologies(store, alert, settings)
            trail = alert_trail(store, alert, settings, matches)
            sar = sar_context(store, alert, settings, matches, prior_alerts(run_alerts, alert))
            # one report that fails (a hostile id, a layout error) is recorded, not raised
            outcome = writer.write(
                alert,
                trace,
                codes,
                typologies=[(m.typology, m.explanation) for m in matches],
                drift=alert_drift_status(drift_windows, alert.event),
                narrative=narrative_for(settings, alert, trace, codes, matches, narrated, trail),
                trail=trail,
                sar=sar,
            )
            if isinstance(outcome, ReportFailure):
                case.report_error = outcome.reason
            else:
                case.report_pdf = reports_dir / outcome.files[0][0]
            case.trace_id = trace.trace_id
            case.typologies = [m.typology for m in matches]
            case.deep_ms = round(share_ms + (time.perf_counter() - t_case) * 1000.0, 3)
            case.latency_ms = round(time.time() * 1000.0 - arrivals.get(alert.event.event_id, started_ms), 3)
            metrics.depth.labels(case.tier).dec()
            metrics.served(case.tier, case.latency_ms / 1000.0, 1, policy.targets_ms.get(case.tier, float("inf")))
            if progress:
                progress(i + 1, len(todo))
    writer.finish()  # the signed tree head of the audit log
    if metrics_path is not None:  # at the end, the depth is what a report cap left queued
        from prometheus_client import write_to_textfile

        write_to_textfile(str(metrics_path), metrics.registry)
    return cases


def deep_graph_features(
    cascade: Any,
    candidates: Sequence[tuple[TransactionEvent, Mapping[str, float]]],
    store: GraphStore,
) -> Callable[[TransactionEvent], dict[str, float]]:
    """The alerting model's graph features per candidate: the field's (GFP, ``gfp_*``) computed over
    the candidates in event order -- which must then be every event (a model that reads GFP scores
    every event: the cascade's stage 1 passes all, candidate threshold 0; GFP's windows need every
    transfer, not a screened few); ours, where the model reads only their one-hop part, kept per
    account over the store's history and the candidates (:func:`evidence_graph.account_features.
    account_feature_rows`), else from the graph, candidate by candidate."""
    from auditflow.features import ONE_HOP_GRAPH_FEATURES
    from evidence_graph import graph_features
    from evidence_graph.account_features import account_feature_rows
    from evidence_graph.gfp_features import gfp_feature_matrix
    from pipelines.features import event_order

    names = cascade.graph_feature_names if cascade.deep is not None else ()
    gfp = [n for n in names if n.startswith("gfp_")]
    mine = [n for n in names if not n.startswith("gfp_")]
    if mine and set(mine) <= set(ONE_HOP_GRAPH_FEATURES):
        evs = [ev for ev, _ in candidates]
        one_hop = {ev.event_id: row for ev, row in zip(evs, account_feature_rows(evs, store), strict=True)}

        def ours(ev: TransactionEvent) -> dict[str, float]:
            return dict(one_hop[ev.event_id])
    else:

        def ours(ev: TransactionEvent) -> dict[str, float]:
            return graph_features(store, ev)

    if not gfp:
        return ours if names else (lambda ev: {})
    if cascade.candidate_threshold > 0:
        raise ConfigError(
            f"the model reads GFP features, which need every event, but its stage 1 screens events "
            f"(candidate threshold {cascade.candidate_threshold}); train it with screen=False"
        )
    ordered = sorted((ev for ev, _ in candidates), key=event_order)
    got, matrix = gfp_feature_matrix(ordered)
    missing = [n for n in gfp if n not in got]
    if missing:
        raise ConfigError(f"the model reads GFP features this version does not compute: {missing[:5]}")
    cols = [got.index(n) for n in gfp]
    rows = {
        ev.event_id: dict(zip(gfp, row, strict=True)) for ev, row in zip(ordered, matrix[:, cols].tolist(), strict=True)
    }
    if not mine:
        return lambda ev: rows[ev.event_id]
    return lambda ev: {**ours(ev), **rows[ev.event_id]}


def check_report_settings(settings: Settings, *, development_key: bool = False) -> None:
    """What the reports need, checked before any work: a signing key (:func:`report_signer`) and a
    report profile the configured institution and contact can fill (``ProfileError``)."""
    from reports.alert_report import check_organisation
    from reports.profile import load_profile

    report_signer(settings, development_key=development_key)
    check_organisation(load_profile(settings.report_profile), settings.report_institution, settings.report_contact)
    if settings.narrator_min_score is not None or settings.narrator_top:  # the narrator's model is needed here
        from model_service.narrator import model_path

        model_path()


def report_profile_options(settings: Settings) -> dict[str, Any]:
    """The report profile and the institution and contact its compliance section names."""
    return {
        "profile": settings.report_profile,
        "institution": settings.report_institution,
        "contact": settings.report_contact,
    }


def narrated_alerts(settings: Settings, alerts: Sequence[tuple[Alert, str]]) -> set[str]:
    """The alert ids of ``alerts`` (alert, tier) that get a narrator's narrative: those scored at
    least ``AUDITFLOW_NARRATOR_MIN_SCORE``, and the ``AUDITFLOW_NARRATOR_TOP`` highest-scoring
    (ties: alert id; the tiers follow the score, so the critical tier comes first)."""
    chosen = {
        a.alert_id
        for a, _ in alerts
        if settings.narrator_min_score is not None and a.score >= settings.narrator_min_score
    }
    if settings.narrator_top:
        ranked = sorted((a for a, _ in alerts), key=lambda a: (-a.score, a.alert_id))
        chosen |= {a.alert_id for a in ranked[: settings.narrator_top]}
    return chosen


def narrative_for(settings: Settings, alert: Alert, trace, codes, matches, narrated: set[str], trail=None):
    """The narrator's narrative of an alert in ``narrated`` (:func:`narrated_alerts`), else None
    (the report says it has none): of where the alerted money went (the ``trail``'s downstream
    flows, :meth:`~auditflow.records.MoneyTrail.downstream_trace`) where there is a trail, else of
    the trace."""
    if alert.alert_id not in narrated:
        return None
    from model_service.narrator import load_model, narrate

    lm = load_model(settings.narrator_device, threads=settings.narrator_threads)
    told = trail.downstream_trace() if trail is not None else trace
    return narrate(alert, told, codes, [(m.typology, m.explanation) for m in matches], lm=lm, seed=settings.seed)


def trace_and_typologies(store, alert: Alert, settings: Settings):
    """The deep path's evidence for one alert: its trace over the configured horizon and the
    typologies matched around it that the alert's own transfer is a member of."""
    from evidence_graph import detect_typologies, trace_evidence
    from evidence_graph.typologies import findings_of_transfer

    t = alert.event.timestamp
    trace = trace_evidence(
        store,
        alert.account.node_id,
        max_hops=settings.trace_hops,
        direction="out",
        fanout_cap=settings.trace_fanout_cap,
        window=(t, t + settings.trace_horizon),
    )
    around = settings.typology_window
    matches = detect_typologies(store, alert.account.node_id, window=(t - around, t + around))
    return trace, findings_of_transfer(matches, alert.event.event_id)


def alert_trail(store, alert: Alert, settings: Settings, matches=()):
    """The money trail of the alert's transfer (:func:`evidence_graph.trail.money_trail`) over the
    trace horizon each way, with room in its headline for the members of the typology instances
    the transfer belongs to (``matches``)."""
    from evidence_graph.trail import money_trail

    return money_trail(
        store,
        alert.event,
        horizon=settings.trace_horizon,
        max_hops=settings.trace_hops,
        min_share=str(settings.trail_min_share),
        keep=sorted({a for m in matches for a in m.accounts}),
    )


# ---------------------------------------------------------------------------- analyst graph queries

Window = tuple[datetime | None, datetime | None] | None


def graph_trace(
    settings: Settings, account: str, *, hops: int | None = None, direction: str = "out", window: Window = None
):
    """``auditflow graph trace``: the money from (``out``) or into (``in``) an account, as an
    :class:`~auditflow.records.EvidenceTrace`. ``ValueError`` on a bad argument."""
    from evidence_graph import trace_evidence
    from evidence_graph.queries import require_account

    with open_graph(settings) as store:
        return trace_evidence(
            store,
            require_account(store, account, settings.effective_graph_url),
            max_hops=hops or settings.trace_hops,
            direction=direction,
            fanout_cap=settings.trace_fanout_cap,
            window=window,
        )


def graph_paths(settings: Settings, source: str, target: str, *, max_hops: int | None = None, window: Window = None):
    """``auditflow graph paths``: time-ordered money paths ``source -> target`` (tuples of
    :class:`~evidence_graph.GraphEdge`), fewest hops first."""
    from evidence_graph.queries import money_paths, require_account

    with open_graph(settings) as store:
        graph = settings.effective_graph_url
        source, target = require_account(store, source, graph), require_account(store, target, graph)
        return money_paths(
            store, source, target, max_hops or settings.trace_hops, window=window, fanout_cap=settings.trace_fanout_cap
        )


def graph_neighborhood(settings: Settings, account: str, *, window: Window = None):
    """``auditflow graph neighborhood``: the account's counterparties, most money first."""
    from evidence_graph.queries import neighborhood, require_account

    with open_graph(settings) as store:
        return neighborhood(store, require_account(store, account, settings.effective_graph_url), window=window)


def graph_typology(settings: Settings, account: str, *, window: Window = None):
    """``auditflow graph typology``: the typology instances the account takes part in."""
    from evidence_graph import detect_typologies
    from evidence_graph.queries import require_account

    with open_graph(settings) as store:
        return detect_typologies(store, require_account(store, account, settings.effective_graph_url), window)


@dataclass(frozen=True)
class AlertEvidence:
    """An alert's evidence as its report shows it: the trace and the typology findings of
    :func:`trace_and_typologies`, ``transfers``, the findings' transfers the trace did not cross
    (:class:`~evidence_graph.GraphEdge`, by member account, then in cap order), and the money
    ``trail``."""

    alert: Alert
    trace: Any  # auditflow.records.EvidenceTrace
    matches: list  # evidence_graph.typologies.TypologyMatch
    transfers: tuple
    trail: Any = None  # auditflow.records.MoneyTrail: the alerted money's trail (:func:`alert_trail`)


def finding_transfers(store, alert: Alert, settings: Settings, matches, skip=frozenset()) -> dict:
    """The typology findings' transfers (event id -> :class:`~evidence_graph.GraphEdge`) but those
    in ``skip``, read as the detector read them (its window around the alert, its cap)."""
    from evidence_graph.typologies import TYPOLOGY_NEIGHBOR_CAP

    wanted = {eid for m in matches for eid in m.event_ids} - set(skip)
    found: dict[str, Any] = {}
    if wanted:
        t, around = alert.event.timestamp, settings.typology_window
        members = sorted({a for m in matches for a in m.accounts})
        got = store.expand([(a, t - around, t + around) for a in members], "out", TYPOLOGY_NEIGHBOR_CAP)
        for a in members:
            for g in got[a]:
                if g.event_id in wanted:
                    found.setdefault(g.event_id, g)
    return found


def alert_evidence(store, alert: Alert, settings: Settings) -> AlertEvidence:
    """:func:`trace_and_typologies` for ``alert`` on ``store``, with the findings' transfers the
    trace did not cross, read as the detector read them (its window around the alert, its cap)."""
    trace, matches = trace_and_typologies(store, alert, settings)
    extra = finding_transfers(store, alert, settings, matches, skip={e.event_id for e in trace.edges})
    return AlertEvidence(alert, trace, matches, tuple(extra.values()), alert_trail(store, alert, settings, matches))


def alerts_by_account(alerts: Sequence[Alert]) -> dict[str, list[Alert]]:
    """Each account's alerts, as sender or receiver (what :func:`prior_alerts` looks in)."""
    by: dict[str, list[Alert]] = {}
    for a in alerts:
        for n in dict.fromkeys((a.event.sender.node_id, a.event.receiver.node_id)):
            by.setdefault(n, []).append(a)
    return by


def prior_alerts(by_account: Mapping[str, Sequence[Alert]], alert: Alert) -> tuple:
    """The alerts of ``by_account`` (:func:`alerts_by_account`) before ``alert`` (event time, then
    alert id) on its sender's or receiver's account, latest first
    (:class:`~auditflow.records.PriorAlert`)."""
    from auditflow.records import PriorAlert

    ev = alert.event
    mine = {ev.sender.node_id, ev.receiver.node_id}
    key = (ev.timestamp, alert.alert_id)
    found: dict[str, PriorAlert] = {}
    for n in mine:
        for a in by_account.get(n, ()):
            if (a.event.timestamp, a.alert_id) < key and a.alert_id not in found:
                shared = sorted(mine & {a.event.sender.node_id, a.event.receiver.node_id})
                found[a.alert_id] = PriorAlert(a.alert_id, a.event.timestamp, shared[0], a.score)
    return tuple(sorted(found.values(), key=lambda p: (p.timestamp, p.alert_id), reverse=True))


def sar_context(store, alert: Alert, settings: Settings, matches, prior: tuple = ()):
    """A SAR's facts about ``alert`` (:class:`reports.alert_report.SarContext`): the subject's
    activity over the trace horizon either side, the alerted transfer with its typology
    instances' transfers, ``prior`` alerts."""
    from evidence_graph import GraphEdge
    from evidence_graph.queries import account_activity
    from reports.alert_report import SarContext

    t, h = alert.event.timestamp, settings.trace_horizon
    subject = account_activity(store, alert.account.node_id, t - h, t + h)
    suspicious = {
        alert.event.event_id: GraphEdge.from_event(alert.event),
        **finding_transfers(store, alert, settings, matches, skip={alert.event.event_id}),
    }
    times = [e.timestamp for e in suspicious.values()]
    return SarContext(
        subject, len(suspicious), sum(e.paid_cents for e in suspicious.values()), min(times), max(times), prior
    )


# ---------------------------------------------------------------------------- the run's alerts and their reports

#: The fields of an ``alerts.jsonl`` row that make its :class:`~auditflow.records.Alert`; the rest
#: of the row is what the deep path recorded about it (reason codes, trace id, report, timings).
ALERT_ROW_FIELDS = ("schema", "alert_id", "event", "score", "threshold", "model_digest", "features")


def alert_from_row(row: dict[str, Any]) -> Alert:
    """The alert of one ``alerts.jsonl`` row (``KeyError`` naming a field the row lacks,
    :class:`~auditflow.errors.FieldError` on a malformed one)."""
    return Alert.from_dict({k: row[k] for k in ALERT_ROW_FIELDS})


def find_alert_row(alerts_path: str | Path, alert_id: str) -> dict[str, Any] | None:
    """The first row of the alerts file ``alerts_path`` (a run's ``alerts.jsonl``) whose alert is
    ``alert_id``, read up to it; None when the file or the alert is not there."""
    if not Path(alerts_path).exists():
        return None
    return next((d for d in iter_json_lines(alerts_path) if d.get("alert_id") == alert_id), None)


@dataclass(frozen=True)
class AlertReportResult:
    """``auditflow report ALERT_ID``: the report published (``status`` ``written``, ``unchanged``
    or ``new version``) and its PDF."""

    alert_id: str
    status: str
    pdf: Path
    manifest: Any  # auditflow.records.ReportManifest
    tree_size: int


def report_alert(settings: Settings, alert_id: str, *, profile: str | None = None) -> AlertReportResult:
    """Write one alert's report again from a finished run (``OUT_DIR/alerts.jsonl``, the graph,
    the model's reason codes as recorded), with ``profile`` (default: the settings'): the same
    profile and inputs leave the report as it is, another gives a new version.

    ``LookupError`` when the run has no such alert; a report that cannot be written raises
    ``ValueError`` with the reason (a profile field missing names it)."""
    from reports import ReportFailure, ReportWriter

    paths = RunPaths.under(settings.out_dir)
    row = find_alert_row(paths.alerts, alert_id)
    if row is None:
        raise LookupError(f"no alert {alert_id!r} in {paths.alerts} (run the pipeline first)")
    if "input_sha256" not in row:
        raise LookupError(f"{paths.alerts} records no input_sha256 for {alert_id!r}: rerun the pipeline")
    alert = alert_from_row(row)
    codes = [ReasonCode.from_dict(r) for r in row["reason_codes"]]
    options = report_profile_options(settings) | ({"profile": profile} if profile else {})
    writer = ReportWriter(
        paths.reports_dir,
        input_sha256=row["input_sha256"],
        code_version=code_version(),
        seed=settings.seed,
        signer=report_signer(settings),
        **options,
    )
    rows = list(iter_json_lines(paths.alerts))
    alerts = [alert_from_row(d) for d in rows]
    run_alerts = alerts_by_account(alerts)
    narrated = narrated_alerts(settings, [(a, d.get("tier", "")) for a, d in zip(alerts, rows, strict=True)])
    with open_graph(settings) as store:
        trace, matches = trace_and_typologies(store, alert, settings)
        trail = alert_trail(store, alert, settings, matches)
        sar = sar_context(store, alert, settings, matches, prior_alerts(run_alerts, alert))
    out = writer.write(
        alert,
        trace,
        codes,
        typologies=[(m.typology, m.explanation) for m in matches],
        narrative=narrative_for(settings, alert, trace, codes, matches, narrated, trail),
        trail=trail,
        sar=sar,
    )
    head = writer.finish()
    if isinstance(out, ReportFailure):
        raise ValueError(f"report for {alert_id} not written: {out.reason}")
    status = "unchanged" if writer.unchanged else ("new version" if "@" in out.files[0][0] else "written")
    return AlertReportResult(alert_id, status, paths.reports_dir / out.files[0][0], out, head.tree_size)


def load_period_alerts(settings: Settings) -> list:
    """The run's alerts (``OUT_DIR/alerts.jsonl``) as :class:`reports.period_report.PeriodAlert`."""
    from reports.period_report import PeriodAlert

    path = RunPaths.under(settings.out_dir).alerts
    if not path.exists():
        return []
    out = []
    for d in iter_json_lines(path):
        alert = alert_from_row(d)
        report = Path(d["report"]).name if d.get("report") else None
        out.append(
            PeriodAlert(
                alert,
                tuple(d.get("typologies") or ()),
                report,
                d.get("report_error"),
                d.get("deep_ms"),
                d.get("tier") or "",
                d.get("latency_ms"),
            )
        )
    return out


@dataclass(frozen=True)
class PeriodReportResult:
    """One period summary published: its period id, ``status`` (``written``, ``unchanged``,
    ``new version``) and PDF."""

    period_id: str
    status: str
    pdf: Path
    alerts: int
    tree_size: int = 0


def _publish_periods(
    settings: Settings, periods: list, alerts: list, coverage: Any
) -> tuple[list[PeriodReportResult], int]:
    from pipelines.drift_views import period_drift_figures, read_drift_records
    from reports.period_report import prepare_period_report
    from reports.store import ReportStore

    store = ReportStore(RunPaths.under(settings.out_dir).reports_dir, report_signer(settings))
    store.repair()
    drift_path = RunPaths.under(settings.out_dir).drift_scores
    drift = read_drift_records(drift_path) if drift_path.is_file() else []
    done = []
    for period in periods:
        figures = period_drift_figures(drift, period.start, period.end) if drift else None
        stem, contents, unsigned = prepare_period_report(
            period, alerts, code_version=code_version(), seed=settings.seed, drift=figures, seen=coverage.within(period)
        )
        pub = store.publish(stem, contents, unsigned)
        done.append(
            PeriodReportResult(
                period.period_id,
                pub.status,
                store.directory / pub.manifest.files[0][0],
                int(dict(unsigned.extra)["alerts"]),
            )
        )
    head = store.finish()
    return done, head.tree_size


def processed_coverage(settings: Settings):
    """What the run folder's processed data covers (:class:`reports.coverage.Coverage`);
    :class:`~auditflow.errors.InputError` when no run processed data there."""
    from auditflow.errors import InputError
    from reports.coverage import Coverage

    coverage = Coverage.load(RunPaths.under(settings.out_dir).coverage)
    if coverage is None or coverage.first is None:
        raise InputError(
            f"{settings.out_dir} holds no processed data (no coverage.json: run `auditflow run` there first): "
            "a summary states only what the data covers"
        )
    return coverage


def report_period(
    settings: Settings, start: datetime, end: datetime, now: datetime | None = None
) -> PeriodReportResult:
    """``auditflow report period --from --to``: the compliance summary of the alerts whose event
    time is in ``[start, end)`` (write-once: the same alerts give the same file, no new entry).
    Refused for a period that has not ended by ``now`` (default: the clock) or that the processed
    data does not cover (:mod:`reports.coverage`)."""
    from auditflow.errors import InputError
    from reports.schedule import Period

    now = now or datetime.now(UTC).replace(tzinfo=None)
    period = Period("range", start, end)
    if end > now:
        raise InputError(f"--to {end:%Y-%m-%d %H:%M}: the period has not ended ({now:%Y-%m-%d %H:%M} UTC now)")
    coverage = processed_coverage(settings)
    if not coverage.covers(period):
        raise InputError(
            f"the processed data runs from {coverage.first:%Y-%m-%d %H:%M} to {coverage.last:%Y-%m-%d %H:%M}: it does "
            f"not cover {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}, so no summary of it is signed"
        )
    (res,), size = _publish_periods(settings, [period], load_period_alerts(settings), coverage)
    return PeriodReportResult(res.period_id, res.status, res.pdf, res.alerts, size)


@dataclass(frozen=True)
class ScheduleResult:
    """``auditflow schedule run``: what it produced per schedule, up to ``now``."""

    now: datetime
    start: datetime | None
    reports: list[PeriodReportResult]
    tree_size: int
    coverage: Any = None  # reports.coverage.Coverage of the processed data
    uncovered: int = 0  # ended periods without a summary that the data does not cover (not written)

    @property
    def written(self) -> int:
        return sum(1 for r in self.reports if r.status != "unchanged")


def run_schedule(settings: Settings, now: datetime | None = None, *, catch_up: bool = False) -> ScheduleResult:
    """Every scheduled period (``AUDITFLOW_SCHEDULE_DAILY`` / ``_WEEKLY``) that has ended by ``now``
    (default: the clock, UTC), that the processed data covers (:mod:`reports.coverage`) and that
    has no summary in the audit log yet, oldest first, from ``AUDITFLOW_SCHEDULE_START`` (default:
    the data's first transfer): after downtime it catches up every missed period; run again, it
    finds nothing to do. More than ``AUDITFLOW_SCHEDULE_MAX_CATCHUP`` periods at once are refused
    unless ``catch_up``."""
    from auditflow.errors import InputError
    from reports.schedule import Schedule, periods_due
    from reports.store import LOG_NAME

    if now is None:
        now = datetime.now(UTC).replace(tzinfo=None)
    coverage = processed_coverage(settings)
    start = settings.schedule_start or coverage.first
    from reports.audit_log import AuditLog

    log_path = RunPaths.under(settings.out_dir).reports_dir / LOG_NAME
    done = {
        str(e.payload["subject_id"])
        for e in (AuditLog(log_path).entries() if log_path.exists() else [])
        if e.kind == "period_report" and e.payload.get("subject_id") is not None
    }
    ended = [
        p
        for name, cron in settings.report_schedules.items()
        for p in periods_due(Schedule(name, cron), start=start, now=now, done=done)
    ]
    due = [p for p in ended if coverage.covers(p)]
    if not due:
        return ScheduleResult(now, start, [], 0, coverage, len(ended))
    if len(due) > settings.schedule_max_catchup and not catch_up:
        raise InputError(
            f"{len(due)} periods are due ({min(p.start for p in due):%Y-%m-%d} to {max(p.end for p in due):%Y-%m-%d}), "
            f"more than AUDITFLOW_SCHEDULE_MAX_CATCHUP={settings.schedule_max_catchup}: write them all with --catch-up"
        )
    due.sort(key=lambda p: (p.end, p.schedule))
    results, size = _publish_periods(settings, due, load_period_alerts(settings), coverage)
    return ScheduleResult(now, start, results, size, coverage, len(ended) - len(due))


def recall(laundering_ids: AbstractSet[str], flagged_ids: Iterable[str]) -> float:
    if not laundering_ids:
        return 0.0
    return len(laundering_ids & set(flagged_ids)) / len(laundering_ids)


# ---------------------------------------------------------------------------- a whole run


@dataclass(frozen=True)
class RunPaths:
    """Where a run writes, under its output folder."""

    out_dir: Path
    rejects: Path
    fast_alerts: Path
    alerts: Path
    summary: Path
    reports_dir: Path
    drift_scores: Path
    drift_alerts: Path
    deep_path_metrics: Path  # per tier, Prometheus' text format (a node exporter's textfile collector reads it)
    coverage: Path  # what the processed data covers, per hour of event time (reports.coverage)

    @classmethod
    def under(cls, out_dir: str | Path) -> RunPaths:
        out = Path(out_dir)
        return cls(
            out,
            out / "rejects.jsonl",
            out / "fast_alerts.jsonl",
            out / "alerts.jsonl",
            out / "run_summary.json",
            out / REPORTS_DIRNAME,
            out / "drift_scores.jsonl",
            out / "drift_alerts.jsonl",
            out / "deep_path_metrics.prom",
            out / "coverage.json",
        )


RUN_FILE = "run.json"
RUN_SCHEMA = "auditflow.run/1"


def claim_run_folder(settings: Settings, data: str | Path, *, append: bool = False) -> dict[str, Any]:
    """The run folder (``OUT_DIR``) for a run of ``data``, before its job starts: a folder belongs
    to one data set (``run.json``: its run id, its source, each run into it). A second run is
    refused unless ``append`` and the same source (then its alerts, rejects and reports join the
    folder's); a folder with a run's output but no ``run.json`` is refused too. Returns the record,
    written."""
    from auditflow.canonical import canonical_sha256
    from auditflow.errors import InputError

    out = settings.out_dir
    path = out / RUN_FILE
    source = str(Path(data).resolve())
    this = {"input_sha256": sha256_file(data)}
    if path.exists():
        rec = json.loads(path.read_text(encoding="utf-8"))
        if not append:
            raise InputError(
                f"{out} already holds run {rec['run_id']} of {rec['source']}: a second run there would mix its output "
                "with this one's; run into another folder (--out or AUDITFLOW_OUT_DIR), or add to this run with "
                "--append (its source only)"
            )
        if rec["source"] != source:
            raise InputError(
                f"--append: {out} holds run {rec['run_id']} of {rec['source']}, not of {source}: a run folder belongs "
                "to one data set; run into another folder"
            )
        rec["runs"].append(this)
    else:
        paths = RunPaths.under(out)
        found = [p.name for p in (paths.alerts, paths.rejects, out / "graph.jsonl", paths.reports_dir) if p.exists()]
        if found:
            raise InputError(
                f"{out} holds a run's output ({', '.join(found)}) but no {RUN_FILE} (an earlier auditflow wrote it): "
                "run into another folder"
            )
        run_id = "run-" + canonical_sha256({"source": source, **this})[:12]
        rec = {"schema": RUN_SCHEMA, "run_id": run_id, "source": source, "runs": [this]}
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return rec


class CountMismatch(RuntimeError):
    """The stream job's counts do not balance: records in != processed + rejected + late +
    duplicate.

    Raised after ``rejects.jsonl`` and ``fast_alerts.jsonl`` are written (to look into), before
    the deep path."""

    def __init__(
        self, records_in: int, processed: int, rejected: int, paths: RunPaths, late: int = 0, duplicates: int = 0
    ) -> None:
        gap = records_in - processed - rejected - late - duplicates
        super().__init__(
            f"count check failed: {records_in} in != {processed} processed + {rejected} rejected + {late} late "
            f"+ {duplicates} duplicate ({gap:+d} unaccounted); see {paths.rejects} and {paths.fast_alerts}"
        )
        self.records_in, self.processed, self.rejected, self.paths = records_in, processed, rejected, paths
        self.late, self.duplicates = late, duplicates


def check_counts(stream: StreamResult, paths: RunPaths) -> None:
    """Nothing is dropped: every record read was processed, rejected, late or a duplicate, else
    :class:`CountMismatch`."""
    if stream.records_in != stream.processed + len(stream.rejects) + len(stream.late) + stream.duplicates:
        raise CountMismatch(
            stream.records_in, stream.processed, len(stream.rejects), paths, len(stream.late), stream.duplicates
        )


@dataclass
class RunResult:
    """A whole run: the stream job's counts, the alerts and reports of the deep path, the recall
    of the planted laundering among them, and the files written."""

    stream: StreamResult
    cases: list[CaseResult]
    laundering_ids: frozenset[str]
    paths: RunPaths
    elapsed_s: float
    intake: Any = None  # auditflow_app.case_flow.CasesOpened: the run's alerts into cases
    late_candidates: int = 0  # late events the late path scored at or above the fast path's threshold
    late_ids: frozenset[str] = frozenset()  # their event ids

    @property
    def late_alerts(self) -> int:
        """Alerts raised on late events (the late path)."""
        return sum(1 for c in self.cases if c.alert.event.event_id in self.late_ids)

    @property
    def events_in(self) -> int:
        return self.stream.records_in

    @property
    def processed(self) -> int:
        return self.stream.processed

    @property
    def rejected(self) -> int:
        return len(self.stream.rejects)

    @property
    def late(self) -> int:
        return len(self.stream.late)

    @property
    def duplicates(self) -> int:
        return self.stream.duplicates

    @property
    def alerted_ids(self) -> list[str]:
        return [c.alert.event.event_id for c in self.cases]

    @property
    def fast_path_ids(self) -> list[str]:
        return [ev.event_id for ev, _ in self.stream.candidates]

    @property
    def reports_written(self) -> int:
        return sum(1 for c in self.cases if c.report_pdf)

    @property
    def reports_failed(self) -> int:
        return sum(1 for c in self.cases if c.report_error)

    @property
    def laundering_alerted(self) -> int:
        return len(self.laundering_ids & set(self.alerted_ids))

    @property
    def recall(self) -> float:
        """Share of the planted laundering transactions that raised an alert (0 when none planted)."""
        return recall(self.laundering_ids, self.alerted_ids)

    @property
    def fast_path_recall(self) -> float:
        return recall(self.laundering_ids, self.fast_path_ids)

    def summary(self) -> dict[str, Any]:
        """What ``run_summary.json`` holds (the keys :func:`reports.render_run_summary` reads)."""
        return {
            "events_in": self.events_in,
            "processed": self.processed,
            "rejected": self.rejected,
            "late": self.late,
            "duplicates": self.duplicates,
            "alerts": len(self.cases),
            "reports_written": self.reports_written,
            "reports_failed": self.reports_failed,
            "laundering_planted": len(self.laundering_ids),
            "laundering_alerted": self.laundering_alerted,
            "elapsed_s": self.elapsed_s,
            "fast_path_alerts": len(self.stream.candidates),
            "fast_path_recall": round(self.fast_path_recall, 4),
            **({"warmup_events": self.stream.warmup} if self.stream.warmup else {}),
            **({"late_candidates": self.late_candidates, "late_alerts": self.late_alerts} if self.late else {}),
            **({"cases_opened": self.intake.opened, "cases_joined": self.intake.joined} if self.intake else {}),
        }


def score_late(
    stream: StreamResult,
    data: str | Path,
    model_dir: str | Path,
    settings: Settings,
    events: Sequence[TransactionEvent] | None = None,
) -> list[tuple[TransactionEvent, dict[str, float]]]:
    """The late path: every event the job split off as late, scored out of band by the fast path
    with the stream features it would have had on time (the plain-Python features, the job's
    reference, over the file's events in event-time order); those at or above its threshold go on
    to the deep path like the job's candidates. A late record is found by its event id (a Kafka
    record's af1 form) or its CSV line (a file run's)."""
    if not stream.late:
        return []
    from auditflow.features import FEATURE_NAMES
    from model_service.fast_path import batch_scorer
    from pipelines.features import event_order, iter_features

    if events is None:  # the file's events, unless the caller has read them already
        events = read_events(data, settings)[0]
    by_line = {ev.source_offset: ev.event_id for ev in events}
    late_ids = {
        r.raw.split(",", 2)[1] if r.raw.startswith("af1,") else by_line.get(r.offset or -1, "") for r in stream.late
    } - {ev.event_id for ev, _ in stream.candidates}  # a late copy of an event the job scored on time: scored once
    unique: dict[str, TransactionEvent] = {}
    for ev in events:
        unique.setdefault(ev.event_id, ev)
    picked = [(ev, f) for ev, f in iter_features(sorted(unique.values(), key=event_order)) if ev.event_id in late_ids]
    if not picked:
        return []
    predict, threshold, _, names = batch_scorer(str(Path(model_dir).resolve()))[:4]
    scores = predict([[float(f[n]) for n in names] for _, f in picked])
    return [
        (ev, {n: float(f[n]) for n in FEATURE_NAMES})
        for (ev, f), score in zip(picked, scores, strict=True)
        if float(score) >= threshold
    ]


def report_stream(
    stream: StreamResult,
    data: str | Path,
    model_dir: str | Path,
    settings: Settings,
    *,
    max_reports: int | None = None,
    laundering_ids: Iterable[str] | None = None,
    started: float | None = None,
    progress: ProgressFn | None = None,
    development_key: bool = False,
    append: bool = False,
) -> RunResult:
    """After the stream job: write its rejects and fast-path alerts, check the counts, run the
    deep path (reports under ``out_dir/reports``), write ``alerts.jsonl`` and
    ``run_summary.json``. ``laundering_ids`` default to the file's own labels. ``append``: the
    rejects and alerts go after the folder's (a run added to its source's run folder)."""
    t0 = time.perf_counter() if started is None else started
    progress = progress or _no_progress
    paths = RunPaths.under(settings.out_dir)
    paths.out_dir.mkdir(parents=True, exist_ok=True)
    write_json_lines(paths.rejects, (r.to_json() for r in [*stream.rejects, *stream.late]), append=append)
    write_json_lines(
        paths.fast_alerts,
        ({"event": ev.to_dict(), "features": feats} for ev, feats in stream.candidates),
        append=append,
    )
    if stream.drift_records or stream.drift_alerts:
        write_json_lines(paths.drift_scores, stream.drift_records, append=append)
        write_json_lines(paths.drift_alerts, stream.drift_alerts, append=append)
    check_counts(stream, paths)
    from reports.coverage import Coverage

    events = read_events(data, settings)[0]
    coverage = Coverage.of(ev.timestamp for ev in events)  # what the periods' summaries may speak of
    earlier = Coverage.load(paths.coverage) if append else None
    (earlier.merged(coverage) if earlier else coverage).write(paths.coverage)
    if laundering_ids is None:
        laundering_ids = (ev.event_id for ev in events if ev.is_laundering)
    late = score_late(stream, data, model_dir, settings, events)  # the late path, out of band
    late_ids = frozenset(ev.event_id for ev, _ in late)
    candidates = sorted([*stream.candidates, *late], key=lambda c: (c[0].source_offset, c[0].event_id))
    progress("deep", 0, None)
    input_sha256 = sha256_file(data)
    cases = run_deep_path(
        candidates,
        model_dir,
        settings,
        input_sha256=input_sha256,
        reports_dir=paths.reports_dir,
        max_reports=max_reports,
        progress=lambda i, n: progress("deep", i, n),
        development_key=development_key,
        drift_records=stream.drift_records,
        metrics_path=paths.deep_path_metrics,
        arrivals=stream.arrivals,
    )
    write_json_lines(
        paths.alerts,
        (
            {
                **c.alert.to_dict(),
                "reason_codes": [r.to_dict() for r in c.reason_codes],
                "trace_id": c.trace_id,
                "input_sha256": input_sha256,
                "typologies": c.typologies,
                "report": str(c.report_pdf) if c.report_pdf else None,
                "report_error": c.report_error,
                "deep_ms": c.deep_ms,
                "latency_ms": c.latency_ms,
                "tier": c.tier,
                "late": c.alert.event.event_id in late_ids,
            }
            for c in cases
        ),
        append=append,
    )
    from auditflow_app.case_flow import open_cases

    intake = open_cases(settings, paths.alerts, development_key=development_key)  # alerts open or join cases
    result = RunResult(
        stream, cases, frozenset(laundering_ids), paths, time.perf_counter() - t0, intake, len(late), late_ids
    )
    paths.summary.write_text(json.dumps(result.summary(), indent=2, sort_keys=True))
    return result


def stream_and_report(
    data: str | Path,
    model_dir: str | Path,
    settings: Settings,
    *,
    max_reports: int | None = None,
    laundering_ids: Iterable[str] | None = None,
    kafka: bool = False,
    cluster: bool = False,
    started: float | None = None,
    progress: ProgressFn | None = None,
    development_key: bool = False,
    append: bool = False,
    warmup: str | Path | None = None,
) -> RunResult:
    """Stream a file through the job (the file job on a MiniCluster, or through Kafka), then
    :func:`report_stream`, in a run folder of its own (:func:`claim_run_folder`; ``append``: added
    to its source's). Raises :class:`CountMismatch` when the job's counts do not balance.
    ``warmup``: an earlier transactions file whose last seven days warm the accounts' windows
    before the first event (file job only)."""
    from ingest.amlworld import check_transactions_file

    t0 = time.perf_counter() if started is None else started
    check_report_settings(settings, development_key=development_key)  # refused now, not after the job
    check_transactions_file(data)  # a wrong header, an empty file: one line now, not a job's traceback
    if warmup is not None:
        if kafka:
            from auditflow.errors import InputError

            raise InputError("--warm-up: the Kafka job warms from its own checkpoints (--resume), not from a file")
        check_transactions_file(warmup)
    claim_run_folder(settings, data, append=append)  # one data set a folder: nothing mixed
    (progress or _no_progress)("stream", 0, None)
    if kafka:
        stream = run_stream_kafka(data, model_dir, settings, cluster=cluster, fresh_topics=True)
    else:
        stream = run_stream(data, model_dir, settings, warmup=warmup)
    return report_stream(
        stream,
        data,
        model_dir,
        settings,
        max_reports=max_reports,
        laundering_ids=laundering_ids,
        started=t0,
        progress=progress,
        development_key=development_key,
        append=append,
    )


# ---------------------------------------------------------------------------- the demo


@dataclass
class DemoResult:
    """The demo: its two generated sets, the training report and the run on the live set."""

    settings: Settings  # as the demo ran (demo topics and Neo4j namespace included)
    history: GeneratedData
    live: GeneratedData
    training: dict[str, Any]
    run: RunResult
    drift_injected: Any = None  # --drift: the ingest.synthetic.Shift of the live set


#: The demo's highest-scoring alerts narrated (``AUDITFLOW_NARRATOR_TOP`` unless set): the critical
#: tier and the top of the next, as many as keep ``make demo`` well within 10 minutes on 2 cores
#: (llama.cpp: the model loads in ~10 s, then ~5 s an alert).
DEMO_NARRATED = 20
#: The demo's history before the days its drift reference is taken from: the accounts' longest
#: window (seven days), so the reference's inputs are as warm as the live stream's, which starts
#: from the history's last seven days (``run --warm-up``).
DEMO_WARMUP_DAYS = LONG_WINDOW_MINUTES // MINUTES_PER_DAY
#: The history's last days, the drift reference: two weeks, so every weekday's rhythm is in it
#: twice and a fortnightly one once (a shorter reference mistakes them for drift).
DEMO_REFERENCE_DAYS = 14
#: ``demo --drift``: from 09:00 of the live set's second day (its first when it has one), every
#: payment of the first format arrives as the second: a channel migration, which moves a third of
#: the transfers to another format at once and leaves the amounts (so the alert volume) alone.
DEMO_DRIFT_RELABEL = ("Cheque", "ACH")


def demo_drift(live_start: datetime, days: int):
    """The ``demo --drift`` shift (:class:`ingest.synthetic.Shift`)."""
    from ingest.synthetic import Shift

    return Shift(live_start + timedelta(days=1 if days > 1 else 0, hours=9), relabel=DEMO_DRIFT_RELABEL)


def demo(
    settings: Settings,
    *,
    accounts: int = 2000,
    days: int = 3,
    max_reports: int | None = None,
    kafka: bool = False,
    neo4j: bool = False,
    cluster: bool = False,
    drift: bool = False,
    progress: ProgressFn | None = None,
) -> DemoResult:
    """The whole flow in ``settings.out_dir`` (recreated): a labelled history (1 % laundering,
    three weeks) to train on and a live set (0.1 %, ``days``) that continues it (the same accounts
    and banks, the days after), streamed with the history's last week as its warm-up; drift scored
    against the history's last two weeks (:data:`DEMO_REFERENCE_DAYS`). With ``drift``, the live set
    carries the stated shift of :func:`demo_drift`. With ``neo4j`` the
    graph goes to the Neo4j server (namespace ``demo`` unless configured, emptied first), with
    ``kafka`` through demo topics (the Kafka job starts cold, so no drift is scored unless
    ``AUDITFLOW_DRIFT_REFERENCE`` is set)."""
    t0 = time.perf_counter()
    progress = progress or _no_progress
    out = settings.out_dir
    if out.exists():
        shutil.rmtree(out)
    if neo4j:
        settings = settings.model_copy(
            update={
                "graph_url": settings.graph_url or settings.neo4j_uri,
                "graph_namespace": settings.graph_namespace or "demo",
            }
        )
        from evidence_graph.neo4j_store import Neo4jGraphStore

        with open_graph(settings) as store:
            assert isinstance(store, Neo4jGraphStore), "the Neo4j URL opens the Neo4j store"
            store.drop()  # the demo starts from an empty graph in its namespace
    if kafka:  # demo topics of its own, recreated on each run
        settings = settings.model_copy(
            update={f"topic_{t}": f"auditflow-demo.{t}" for t in ("transactions", "alerts", "dlq")}
        )
    if settings.narrator_top is None:  # the demo narrates its highest-scoring alerts
        settings = settings.model_copy(update={"narrator_top": DEMO_NARRATED})
    data_dir = out / DATA_DIRNAME
    progress("generate", 0, None)
    history_days = DEMO_WARMUP_DAYS + DEMO_REFERENCE_DAYS
    from ingest.synthetic import DEFAULT_START

    live_start = DEFAULT_START + timedelta(days=history_days)
    shift = demo_drift(live_start, days) if drift else None
    history, live = generate_continuing(
        data_dir, accounts=accounts, history_days=history_days, live_days=days, seed=settings.seed, shift=shift
    )
    progress("train", 0, None)
    # the deployed model and the models it is measured against; the side-by-side with our graph
    # features (5 of the demo's 10 minutes) is `auditflow evaluate`'s
    training = train(history.transactions, out / MODEL_DIRNAME, settings, compare_graph=False)
    # drift of the live set against the history's last days; not with --kafka, whose job starts cold
    # here (a deployed one warms from its own checkpoints): a cold job's windows drift from any warm
    # reference by construction, so its drift alerts would say nothing about the data
    if settings.drift_reference is None and not kafka:
        progress("reference", 0, None)
        ref = build_reference(
            history.transactions,
            out / MODEL_DIRNAME,
            settings,
            live_start - timedelta(days=DEMO_REFERENCE_DAYS),
            live_start,
        )
        settings = settings.model_copy(update={"drift_reference": ref.path})
    run = stream_and_report(
        live.transactions,
        out / MODEL_DIRNAME,
        settings,
        max_reports=max_reports,
        laundering_ids=live.laundering_ids,
        kafka=kafka,
        cluster=cluster,
        started=t0,
        progress=progress,
        development_key=True,
        warmup=None if kafka else history.transactions,
    )  # the demo may sign with the dev key
    return DemoResult(settings, history, live, training, run, shift)


# ---------------------------------------------------------------------------- drift reference

DRIFT_DIRNAME = "drift"


@dataclass
class ReferenceResult:
    """A frozen drift reference: where it was written and what it holds."""

    path: Path
    reference_id: str
    model_version: str
    events: int  # scored events inside [start, end)
    features: tuple[str, ...]
    segments: dict[str, list[str]]


def build_reference(
    csv_path: str | Path,
    model_dir: str | Path,
    settings: Settings,
    start: datetime,
    end: datetime,
    *,
    out_dir: str | Path | None = None,
    segment_features: Sequence[str] | None = None,
) -> ReferenceResult:
    """``auditflow reference build``: the drift reference of the scoring inputs and the score over
    the events of ``csv_path`` with ``start <= time < end`` (their features computed with the
    whole file before them, as the stream job would, and scored by the model's fast path:
    :func:`pipelines.drift.reference_profile`: the inputs whose memory the events' span covers
    three times, dispersion on windows of ``AUDITFLOW_DRIFT_WINDOW_MINUTES``), written as canonical
    JSON to ``out_dir`` (default ``OUT_DIR/drift``) named by its id. ``segment_features``: the inputs scored within each
    segment besides the score (default :data:`pipelines.drift.DEFAULT_SEGMENT_FEATURES`)."""
    from pipelines.drift import DEFAULT_SEGMENT_FEATURES, reference_events, reference_profile, write_reference

    if not start < end:
        raise ValueError(f"reference window {start}..{end}: FROM must be before TO")
    events, _ = read_events(csv_path, settings)
    picked = reference_events(events, start, end)
    if not picked:
        raise ValueError(f"no events of {csv_path} between {start} and {end}")
    # what it covers: the window asked for, within the file's first and last event
    covered_from = max(start, min(ev.timestamp for ev in events))
    covered_to = min(end, max(ev.timestamp for ev in events) + timedelta(minutes=1))
    span = int((covered_to - covered_from).total_seconds()) // 60
    profile = reference_profile(
        picked,
        model_dir,
        span_minutes=span,
        window_minutes=settings.drift_window_minutes,
        segment_features=DEFAULT_SEGMENT_FEATURES if segment_features is None else segment_features,
        source={
            "file": Path(csv_path).name,
            "sha256": sha256_file(csv_path),
            "from": start.isoformat(),
            "to": end.isoformat(),
        },
    )
    path = write_reference(profile, Path(out_dir) if out_dir is not None else settings.out_dir / DRIFT_DIRNAME)
    return ReferenceResult(
        path, profile.reference_id, profile.model_version, profile.n, profile.features, profile.segments
    )
