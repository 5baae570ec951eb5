"""The end-to-end flow, stage by stage: train -> stream job -> deep path -> reports.

Each function is one stage with its side effects (files, the job, the graph store) at its edges;
the CLI and the demo call them in order.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from auditflow import __version__
from auditflow.records import Alert, ReasonCode, RejectedRecord, TransactionEvent
from auditflow.settings import Settings
from ingest.amlworld import read_transactions

MODEL_DIRNAME = "model"
REPORTS_DIRNAME = "reports"
#: Evidence traces follow the money forward from the alerted transfer for this long.
TRACE_HORIZON = timedelta(days=3)
#: Typology detection looks this far either side of the alerted transfer.
TYPOLOGY_WINDOW = timedelta(days=3)


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_events(csv_path: str | Path) -> tuple[list[TransactionEvent], list[RejectedRecord]]:
    events: list[TransactionEvent] = []
    rejects: list[RejectedRecord] = []
    for item in read_transactions(csv_path):
        (rejects if isinstance(item, RejectedRecord) else events).append(item)
    return events, rejects


def write_jsonl(path: str | Path, records: Iterable[Any]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write((r if isinstance(r, str) else json.dumps(r, sort_keys=True, separators=(",", ":"))) + "\n")
            n += 1
    return n


# ---------------------------------------------------------------------------- training


def train(csv_path: str | Path, model_dir: str | Path, settings: Settings) -> dict[str, Any]:
    """Train the two-stage cascade on a labelled transactions file (temporal 60/20/20 split)."""
    from evidence_graph import GRAPH_FEATURE_DESCRIPTIONS, GRAPH_FEATURE_NAMES, NetworkxGraphStore, graph_features
    from model_service import train_cascade
    from pipelines.features import compute_features

    events, rejects = read_events(csv_path)
    with_features = compute_features(events, settings.window_minutes)
    store = NetworkxGraphStore()
    store.add_transactions(events)
    window = settings.window_minutes
    cascade, report = train_cascade(
        with_features,
        lambda ev: graph_features(store, ev, window),
        GRAPH_FEATURE_NAMES,
        GRAPH_FEATURE_DESCRIPTIONS,
        seed=settings.seed,
    )
    model_dir = Path(model_dir)
    cascade.save(model_dir)
    summary = {"input_sha256": sha256_file(csv_path), "rejected": len(rejects), **report.to_dict()}
    # Same seed, same bytes: wall-clock timings go to a file of their own.
    timings = {k: summary.pop(k) for k in sorted(summary) if k.endswith("_seconds")}
    (model_dir / "training_report.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    (model_dir / "training_timings.json").write_text(json.dumps(timings, indent=2, sort_keys=True) + "\n")
    return {**summary, **timings}


def load_fast_path(model_dir: str) -> tuple[Callable, float, str]:
    """Scorer factory for the stream job (pure Python, no xgboost in the TaskManager)."""
    from model_service.fast_path import fast_path_scorer

    return fast_path_scorer(model_dir)[:3]


# ---------------------------------------------------------------------------- stream job


@dataclass
class StreamResult:
    records_in: int
    processed: int
    rejects: list[RejectedRecord]
    candidates: list[tuple[TransactionEvent, dict[str, float]]]
    seconds: float


def run_stream(csv_path: str | Path, model_dir: str | Path, settings: Settings) -> StreamResult:
    """Run the PyFlink job over the file (bounded source) on a local MiniCluster."""
    from functools import partial

    from model_service.fast_path import fast_path_scorer
    from pipelines.job import JobSpec, run_file_job

    with settings.open_graph() as store:
        before = store.edge_count()
    spec = JobSpec(
        graph_url=settings.effective_graph_url,
        graph_options=settings.graph_options,
        scorer_factory=partial(fast_path_scorer, str(Path(model_dir).resolve())),
        window_minutes=settings.window_minutes,
        parallelism=settings.parallelism,
    )
    t0 = time.perf_counter()
    out = run_file_job(str(csv_path), spec)
    seconds = time.perf_counter() - t0
    with settings.open_graph() as store:
        written = store.edge_count() - before
    candidates = candidates_from_fast_alerts(json.dumps(a) for a in out.alerts)
    return StreamResult(out.records_in, written, out.rejects, candidates, seconds)


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


def run_stream_kafka(csv_path: str | Path, model_dir: str | Path, settings: Settings, *,
                     cluster: bool = False, fresh_topics: bool = False,
                     progress: Callable[[int], None] | None = None) -> StreamResult:
    """Produce the file to Kafka, run the Kafka job (local MiniCluster or the session cluster)
    to the end of the topic, and read its alerts and dead letters back from Kafka."""
    from ingest.kafka_io import consume_all, delete_topics, ensure_topics, produce_file
    from pipelines.kafka_job import run_kafka_job, submit_kafka_job

    topics = (settings.topic_transactions, settings.topic_alerts, settings.topic_dlq)
    if fresh_topics:
        delete_topics(settings.kafka_bootstrap, topics)
    ensure_topics(settings.kafka_bootstrap, {t: settings.topic_partitions for t in topics})
    produced = produce_file(csv_path, settings)
    with settings.open_graph() as store:
        before = store.edge_count()
    t0 = time.perf_counter()
    if cluster:
        submit_kafka_job(settings, str(model_dir), bounded=True)
    else:
        run_kafka_job(settings, str(model_dir), bounded=True, graph_options=settings.graph_options)
    seconds = time.perf_counter() - t0
    with settings.open_graph() as store:
        written = store.edge_count() - before
    alerts = consume_all(settings.kafka_bootstrap, settings.topic_alerts, timeout_s=120)
    dead = consume_all(settings.kafka_bootstrap, settings.topic_dlq, timeout_s=60)
    rejects = [RejectedRecord.from_dict({k: v for k, v in json.loads(r.value).items() if k not in ("topic", "partition")})
               for r in dead]
    candidates = candidates_from_fast_alerts(r.value for r in alerts)
    return StreamResult(produced.read, written, rejects, candidates, seconds)


# ---------------------------------------------------------------------------- deep path


@dataclass
class CaseResult:
    alert: Alert
    reason_codes: list[ReasonCode]
    report_pdf: Path | None = None
    trace_id: str = ""
    typologies: list[str] = field(default_factory=list)


def run_deep_path(
    candidates: list[tuple[TransactionEvent, dict[str, float]]],
    model_dir: str | Path,
    settings: Settings,
    *,
    input_sha256: str,
    reports_dir: str | Path,
    max_reports: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[CaseResult]:
    """Stage-2 score + SHAP for the candidates; trace, typologies and a signed PDF per alert."""
    from evidence_graph import detect_typologies, graph_features, trace_evidence
    from model_service import Cascade, explain_alerts
    from reports import AuditLog, render_alert_report

    cascade = Cascade.load(model_dir)
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    log = AuditLog(reports_dir / "audit_log.jsonl")
    cases: list[CaseResult] = []
    with settings.open_graph() as store:
        window = settings.window_minutes
        explained = explain_alerts(candidates, cascade, lambda ev: graph_features(store, ev, window))
        todo = explained if max_reports is None else explained[:max_reports]
        for i, (alert, codes) in enumerate(explained):
            case = CaseResult(alert, codes)
            cases.append(case)
            if i >= len(todo):
                continue
            t = alert.event.timestamp
            trace = trace_evidence(
                store, alert.account.node_id, max_hops=settings.trace_hops, direction="out",
                fanout_cap=settings.trace_fanout_cap, window=(t, t + TRACE_HORIZON),
            )
            matches = detect_typologies(store, alert.account.node_id, window=(t - TYPOLOGY_WINDOW, t + TYPOLOGY_WINDOW))
            manifest = render_alert_report(
                alert, trace, codes, out_dir=reports_dir, input_sha256=input_sha256,
                code_version=__version__, seed=settings.seed,
                typologies=[(m.typology, m.explanation) for m in matches],
                signing_key=settings.signing_key_bytes,
            )
            log.append("report", {"alert_id": alert.alert_id, "report_id": manifest.report_id,
                                  "files": [list(f) for f in manifest.files], "trace_id": trace.trace_id,
                                  "signature": manifest.signature})
            case.report_pdf = reports_dir / f"{alert.alert_id}.pdf"
            case.trace_id = trace.trace_id
            case.typologies = [m.typology for m in matches]
            if progress:
                progress(i + 1, len(todo))
    return cases


def recall(laundering_ids: set[str], flagged_ids: Iterable[str]) -> float:
    if not laundering_ids:
        return 0.0
    return len(laundering_ids & set(flagged_ids)) / len(laundering_ids)
