"""The stream job on Kafka: the topology of :mod:`pipelines.stream_job` between Kafka topics.

Runs on a local MiniCluster (:func:`run_kafka_job`) or is submitted unchanged to a Flink cluster
with ``flink run -py pipelines/kafka_job.py -- ARGS`` (:func:`main` takes every setting as an
argument, so the job needs nothing of the app layer on the cluster).

* Source: the Kafka table connector, the record value plus its ``topic``, ``partition`` and
  ``offset``, read committed; event time from the wire record, watermarks per partition emitted
  on every record. A fresh job starts at its consumer group's committed offsets (the earliest
  where the group has none); a restored job at the offsets of its checkpoint. A bounded job
  stops at each partition's last stable offset as of its start. Offsets are committed to the
  group when a checkpoint completes, and once a bounded job has finished, to its stop offsets.
* Sinks: alerts to the alerts topic; rejected and late records to the dead-letter topic as
  :class:`auditflow.records.RejectedRecord` JSON plus ``topic`` and ``partition``; both
  **exactly-once** by default (Kafka transactions committed when a checkpoint completes: a reader
  with ``isolation.level=read_committed`` sees every record once, after at most a checkpoint
  interval), or at-least-once (``delivery='at-least-once'``: records visible at once; a restart
  replays the records since the last checkpoint, which readers drop by alert id / offset).
  Duplicates are counted (``auditflow.duplicate``).
* Graph writes: the batched graph writer flushes every Arrow batch, and a checkpoint barrier
  passes the Python operator only after its bundle's results are back, so every event before a
  checkpoint is in the graph; events replayed after a restore are written again, which the stores
  ignore (idempotent on event id).
* Checkpoints every ``checkpoint_interval_ms`` (5 s) to ``checkpoint_dir``, retained on cancel
  and failure; a job resumes from one (or a savepoint) with ``restore_path``
  (``execution.state-recovery.path``). Restarts back off exponentially (1 s doubling to 30 s).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from auditflow.errors import ConfigError
from pipelines.stream_job import (
    StreamSpec,
    _sql_str,
    add_graph_sink,
    build_topology,
    event_time_column,
    job_counts,
    table_environment,
    watermark_clause,
)

CHECKPOINT_INTERVAL_MS = 5_000
DELIVERY_GUARANTEES = ("exactly-once", "at-least-once")
# Kafka aborts a transaction left open longer than this (the broker's transaction.max.timeout.ms
# defaults to 15 min): longer than a checkpoint plus a recovery, shorter than the broker's cap.
TRANSACTION_TIMEOUT_MS = 600_000


@dataclass
class KafkaJobConfig:
    """Where the Kafka job reads and writes."""

    bootstrap: str
    topic_transactions: str
    topic_alerts: str
    topic_dlq: str
    connector_jar: str
    topic_drift_scores: str = "drift-scores"
    topic_drift_alerts: str = "drift-alerts"
    group_id: str = "auditflow-stream"
    bounded: bool = True  # stop at the offsets present at start
    job_name: str = "auditflow-kafka"
    idle_timeout_ms: int = 30_000  # an idle partition stops holding the watermark back after this
    # 0: a watermark after every record; > 0: every this many ms (fewer, larger timer firings in
    # the window operator). Features do not depend on it (legs are applied in event-time order
    # once the watermark passes them); which records are late can, as it does on the order in
    # which partitions interleave.
    watermark_interval_ms: int = 20
    # Latency over throughput where the two conflict: a Python bundle (Arrow batch of up to
    # StreamSpec.arrow_batch rows) ends when full or after bundle_time_ms; network buffers are
    # sent when full or after buffer_timeout_ms (Flink's defaults: 1000 ms and 100 ms). Under
    # load batches stay full, so throughput hardly changes (bench/stream_throughput.py).
    bundle_time_ms: int = 20
    buffer_timeout_ms: int = 5
    checkpoint_dir: str | None = None  # durable checkpoint storage (the JobManager's memory holds only 5 MiB)
    checkpoint_interval_ms: int = CHECKPOINT_INTERVAL_MS
    delivery: str = "exactly-once"  # of the alert and dead-letter sinks: see DELIVERY_GUARANTEES
    restore_path: str | None = None  # a retained checkpoint or savepoint (its directory) to resume from
    extra: dict = field(default_factory=dict)  # further Kafka client properties

    def __post_init__(self) -> None:
        if self.delivery not in DELIVERY_GUARANTEES:
            raise ValueError(f"delivery={self.delivery!r}: expected one of {', '.join(DELIVERY_GUARANTEES)}")
        if self.checkpoint_interval_ms < 10:
            raise ValueError(f"checkpoint_interval_ms={self.checkpoint_interval_ms!r}: expected >= 10")

    def transactional_id_prefix(self, sink: str) -> str:
        """Stable across restarts of this job (so a restore aborts its open transactions) and
        distinct per job and sink (two jobs must never share transactional ids)."""
        return f"auditflow-{re.sub(r'[^A-Za-z0-9._-]', '_', self.job_name)}-{sink}"


@dataclass
class KafkaJobResult:
    seconds: float
    job_name: str
    processed: int
    duplicate: int


def check_connector_jar(jar: str | None) -> str:
    if not jar or not Path(jar).is_file():
        raise ConfigError(
            f"flink-sql-connector-kafka jar not found ({jar!r}); run `deploy/services connector-jar` to fetch it "
            "and set AUDITFLOW_FLINK_KAFKA_JAR")
    return str(Path(jar).resolve())


def _kafka_props(cfg: KafkaJobConfig) -> str:
    props = {"properties.bootstrap.servers": cfg.bootstrap, **{f"properties.{k}": v for k, v in cfg.extra.items()}}
    return ", ".join(f"{_sql_str(k)} = {_sql_str(str(v))}" for k, v in props.items())


def stop_offsets(cfg: KafkaJobConfig) -> dict[int, int]:
    """Where a bounded job stops: each partition's last stable offset now (what a read_committed
    reader can see)."""
    from ingest.kafka_io import stable_end_offsets

    return stable_end_offsets(cfg.bootstrap, cfg.topic_transactions, cfg.extra)


def kafka_source_view(t_env, cfg: KafkaJobConfig, spec: StreamSpec, stop: dict[int, int] | None = None) -> str:
    """The source view; a bounded job stops at ``stop`` (partition -> offset), by default
    :func:`stop_offsets` now."""
    bounded = ""
    if cfg.bounded:
        stop = stop_offsets(cfg) if stop is None else stop
        spec_offsets = ";".join(f"partition:{p},offset:{o}" for p, o in sorted(stop.items()))
        bounded = f"'scan.bounded.mode' = 'specific-offsets', 'scan.bounded.specific-offsets' = '{spec_offsets}',"
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE af_kafka_in (
            `value` BYTES,
            `topic` STRING METADATA VIRTUAL,
            `partition` INT METADATA VIRTUAL,
            `offset` BIGINT METADATA VIRTUAL,
            `ts` AS {event_time_column()},
            {watermark_clause(spec)}
        ) WITH (
            'connector' = 'kafka',
            'topic' = {_sql_str(cfg.topic_transactions)},
            {_kafka_props(cfg)},
            'properties.group.id' = {_sql_str(cfg.group_id)},
            'properties.isolation.level' = 'read_committed',
            'properties.auto.offset.reset' = 'earliest',
            'scan.startup.mode' = 'group-offsets',
            {bounded}
            'scan.watermark.emit.strategy' = '{"on-periodic" if cfg.watermark_interval_ms else "on-event"}',
            'scan.watermark.idle-timeout' = '{cfg.idle_timeout_ms} ms',
            'format' = 'raw'
        )""")
    t_env.execute_sql("""
        CREATE TEMPORARY VIEW af_records AS
        SELECT `value`, `topic` || '/' || CAST(`partition` AS STRING) AS `src`, `offset` AS `off`, `topic`,
               `partition` AS `part`, `ts`
        FROM af_kafka_in""")
    return "af_records"


def _sink(t_env, name: str, topic: str, cfg: KafkaJobConfig, sink: str) -> None:
    guarantee = f"'sink.delivery-guarantee' = {_sql_str(cfg.delivery)},"
    if cfg.delivery == "exactly-once":
        guarantee += (f"'sink.transactional-id-prefix' = {_sql_str(cfg.transactional_id_prefix(sink))},"
                      f"'properties.transaction.timeout.ms' = '{TRANSACTION_TIMEOUT_MS}',")
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE {name} (`message` STRING) WITH (
            'connector' = 'kafka',
            'topic' = {_sql_str(topic)},
            {_kafka_props(cfg)},
            {guarantee}
            'format' = 'raw'
        )""")


def job_conf(cfg: KafkaJobConfig) -> dict[str, str]:
    """Flink options of the job: checkpoints, recovery, watermarks and batching."""
    conf = {
        "execution.checkpointing.interval": f"{cfg.checkpoint_interval_ms} ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "execution.checkpointing.num-retained": "3",
        "execution.checkpointing.min-pause": f"{min(cfg.checkpoint_interval_ms, 1000)} ms",
    }
    if cfg.checkpoint_dir:
        conf["execution.checkpointing.dir"] = Path(cfg.checkpoint_dir).resolve().as_uri()
    if cfg.restore_path:
        conf["execution.state-recovery.path"] = Path(cfg.restore_path).resolve().as_uri()
    if cfg.watermark_interval_ms:
        conf["pipeline.auto-watermark-interval"] = f"{cfg.watermark_interval_ms} ms"
    conf["python.fn-execution.bundle.time"] = str(cfg.bundle_time_ms)
    conf["execution.buffer-timeout"] = f"{cfg.buffer_timeout_ms} ms"
    return conf


def latest_checkpoint(checkpoint_dir: str | Path) -> Path | None:
    """The newest complete retained checkpoint under ``checkpoint_dir`` (Flink's layout:
    ``<job id>/chk-<n>/_metadata``), or None.

    Newest by its metadata file's modification time (checkpoint numbers restart with each job)."""
    found = [(m.stat().st_mtime_ns, int(m.parent.name[4:]), m.parent)
             for m in Path(checkpoint_dir).glob("*/chk-*/_metadata") if m.parent.name[4:].isdigit()]
    return max(found)[2] if found else None


def build_kafka_job(cfg: KafkaJobConfig, spec: StreamSpec, stop: dict[int, int] | None = None):
    """The job's statement set: alerts, dead letters (rejects and late records) and graph writes
    (a bounded job's source stops at ``stop``, see :func:`kafka_source_view`)."""
    conf = {**job_conf(cfg), **spec.flink_conf}
    _, t_env = table_environment(spec.parallelism, extra_jars=[check_connector_jar(cfg.connector_jar)],
                                 flink_conf=conf)
    t_env.get_config().set("pipeline.name", cfg.job_name)
    topo = build_topology(t_env, kafka_source_view(t_env, cfg, spec, stop), spec)
    _sink(t_env, "af_alerts_out", cfg.topic_alerts, cfg, "alerts")
    _sink(t_env, "af_dlq_out", cfg.topic_dlq, cfg, "dlq")
    t_env.create_temporary_view("af_rejects_v", topo.rejects)
    t_env.create_temporary_view("af_late_v", topo.late)
    stmts = t_env.create_statement_set()
    stmts.add_insert("af_alerts_out", topo.alerts)
    stmts.add_insert_sql("INSERT INTO af_dlq_out SELECT message FROM af_rejects_v UNION ALL SELECT message FROM af_late_v")
    t_env.create_temporary_view("af_dups_v", topo.duplicates)
    t_env.execute_sql("CREATE TEMPORARY TABLE af_discard (`m` STRING) WITH ('connector' = 'blackhole')")
    stmts.add_insert_sql("INSERT INTO af_discard SELECT message FROM af_dups_v")
    if topo.drift is not None:  # drift records and drift alerts, each to its topic
        _sink(t_env, "af_drift_scores_out", cfg.topic_drift_scores, cfg, "drift-scores")
        _sink(t_env, "af_drift_alerts_out", cfg.topic_drift_alerts, cfg, "drift-alerts")
        t_env.create_temporary_view("af_drift_v", topo.drift)
        stmts.add_insert_sql("INSERT INTO af_drift_scores_out SELECT message FROM af_drift_v WHERE kind = 'S'")
        stmts.add_insert_sql("INSERT INTO af_drift_alerts_out SELECT message FROM af_drift_v WHERE kind = 'X'")
    add_graph_sink(t_env, stmts, topo)
    return stmts


def start_kafka_job(cfg: KafkaJobConfig, spec: StreamSpec):
    """Submit the Kafka job to a local MiniCluster and return at once with its ``JobClient``
    (an unbounded job runs until ``job_client.cancel()``)."""
    return build_kafka_job(cfg, spec).execute().get_job_client()


def run_kafka_job(cfg: KafkaJobConfig, spec: StreamSpec) -> KafkaJobResult:
    """Run the Kafka job on a local MiniCluster; with ``cfg.bounded``, to the offsets present at
    start, and return the job's own counts.

    A bounded job that finished has read its partitions up to the stop offsets, so its consumer
    group's offsets are then at least those: the source commits on each completed checkpoint, but
    asynchronously, and the commit of the final one can be lost when the job ends first (seen
    here: a second run of the group read one partition again). So once the job is done, the group
    is committed forward to the stop offsets wherever it lags."""
    from ingest.kafka_io import commit_offsets_at_least

    stop = stop_offsets(cfg) if cfg.bounded else None
    stmts = build_kafka_job(cfg, spec, stop)
    t0 = time.perf_counter()
    result = stmts.execute()
    job = result.get_job_client().get_job_execution_result().result()
    counts = job_counts(job)
    if stop is not None:
        commit_offsets_at_least(cfg.bootstrap, cfg.group_id, cfg.topic_transactions, stop, cfg.extra)
    return KafkaJobResult(time.perf_counter() - t0, cfg.job_name, counts["processed"], counts["duplicate"])


def job_arguments(cfg: KafkaJobConfig, model_dir: str, spec: StreamSpec, *, drift_reference: str | None = None,
                  drift_rules_file: str | None = None) -> list[str]:
    """The command-line arguments :func:`main` takes for this job (for ``flink run -py``)."""
    args = ["--bootstrap", cfg.bootstrap, "--topic-transactions", cfg.topic_transactions,
            "--topic-alerts", cfg.topic_alerts, "--topic-dlq", cfg.topic_dlq, "--connector-jar", cfg.connector_jar,
            "--group-id", cfg.group_id, "--job-name", cfg.job_name, "--model-dir", str(Path(model_dir).resolve()),
            "--parallelism", str(spec.parallelism), "--out-of-orderness-ms", str(spec.out_of_orderness_ms),
            "--allowed-lateness-ms", str(spec.allowed_lateness_ms)]
    if cfg.bounded:
        args.append("--bounded")
    if cfg.checkpoint_dir:
        args += ["--checkpoint-dir", str(Path(cfg.checkpoint_dir).resolve())]
    if cfg.restore_path:
        args += ["--from-savepoint", str(Path(cfg.restore_path).resolve())]
    args += ["--checkpoint-interval-ms", str(cfg.checkpoint_interval_ms), "--delivery", cfg.delivery]
    if spec.drift is not None:
        if not drift_reference:
            raise ValueError("a job with drift scores needs the reference's path to pass to the cluster")
        args += ["--drift-reference", str(Path(drift_reference).resolve()),
                 "--drift-window-minutes", str(spec.drift.window_minutes),
                 "--topic-drift-scores", cfg.topic_drift_scores, "--topic-drift-alerts", cfg.topic_drift_alerts]
        if drift_rules_file:
            args += ["--drift-rules-file", str(Path(drift_rules_file).resolve())]
    if spec.graph_url:
        args += ["--graph-url", spec.graph_url]
        for k, v in spec.graph_options.items():
            args += ["--graph-option", f"{k}={v}"]
    return args


def main(argv: list[str] | None = None) -> None:
    from functools import partial

    from model_service.fast_path import batch_scorer

    ap = argparse.ArgumentParser(description="auditflow stream job on Kafka (submit with `flink run -py`)")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic-transactions", required=True)
    ap.add_argument("--topic-alerts", required=True)
    ap.add_argument("--topic-dlq", required=True)
    ap.add_argument("--connector-jar", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--group-id", default="auditflow-stream")
    ap.add_argument("--job-name", default="auditflow-kafka")
    ap.add_argument("--bounded", action="store_true", help="stop at the offsets present at start")
    ap.add_argument("--parallelism", type=int, default=1)
    ap.add_argument("--out-of-orderness-ms", type=int, required=True)
    ap.add_argument("--allowed-lateness-ms", type=int, required=True)
    ap.add_argument("--checkpoint-dir", default=None, help="durable checkpoint storage (a shared path on a cluster)")
    ap.add_argument("--checkpoint-interval-ms", type=int, default=CHECKPOINT_INTERVAL_MS)
    ap.add_argument("--delivery", choices=DELIVERY_GUARANTEES, default="exactly-once")
    ap.add_argument("--from-savepoint", default=None, metavar="PATH",
                    help="resume from this retained checkpoint or savepoint directory")
    ap.add_argument("--detached", action="store_true", help="return once submitted (with `flink run --detached`)")
    ap.add_argument("--drift-reference", default=None, help="score drift against this reference (JSON)")
    ap.add_argument("--drift-window-minutes", type=int, default=60)
    ap.add_argument("--drift-rules-file", default=None)
    ap.add_argument("--topic-drift-scores", default="drift-scores")
    ap.add_argument("--topic-drift-alerts", default="drift-alerts")
    ap.add_argument("--graph-url", default=None)
    ap.add_argument("--graph-option", action="append", default=[], help="KEY=VALUE for the graph store")
    a = ap.parse_args(argv)
    cfg = KafkaJobConfig(a.bootstrap, a.topic_transactions, a.topic_alerts, a.topic_dlq, a.connector_jar,
                         group_id=a.group_id, bounded=a.bounded, job_name=a.job_name,
                         checkpoint_dir=a.checkpoint_dir, checkpoint_interval_ms=a.checkpoint_interval_ms,
                         delivery=a.delivery, restore_path=a.from_savepoint,
                         topic_drift_scores=a.topic_drift_scores, topic_drift_alerts=a.topic_drift_alerts)
    drift = None
    if a.drift_reference:
        from pipelines.drift import load_drift_spec

        drift = load_drift_spec(a.drift_reference, a.drift_window_minutes, a.drift_rules_file)
    spec = StreamSpec(drift=drift, scorer_factory=partial(batch_scorer, a.model_dir), graph_url=a.graph_url,
                      graph_options=dict(o.split("=", 1) for o in a.graph_option), parallelism=a.parallelism,
                      out_of_orderness_ms=a.out_of_orderness_ms, allowed_lateness_ms=a.allowed_lateness_ms)
    if a.detached:  # `flink run --detached`: submit, print the job id, return
        client = start_kafka_job(cfg, spec)
        print(f"submitted {cfg.job_name}: JobID {client.get_job_id()}", file=sys.stderr)
        return
    res = run_kafka_job(cfg, spec)
    print(f"job {res.job_name} finished in {res.seconds:.1f}s: processed={res.processed} "
          f"duplicate={res.duplicate}", file=sys.stderr)


if __name__ == "__main__":
    main()
