"""The stream job on Kafka: the topology of :mod:`pipelines.stream_job` between Kafka topics.

Runs on a local MiniCluster (:func:`run_kafka_job`) or is submitted unchanged to a Flink cluster
with ``flink run -py pipelines/kafka_job.py -- ARGS`` (:func:`main` takes every setting as an
argument, so the job needs nothing of the app layer on the cluster).

* Source: the Kafka table connector, the record value plus its ``topic``, ``partition`` and
  ``offset``; event time from the wire record, watermarks per partition emitted on every record.
* Sinks: alerts to the alerts topic; rejected and late records to the dead-letter topic as
  :class:`auditflow.records.RejectedRecord` JSON plus ``topic`` and ``partition``; the graph
  through the batched graph writer. Duplicates are counted (``auditflow.duplicate``).
* Checkpointing every 5 s; sinks are at-least-once, graph writes idempotent on event id.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass
class KafkaJobConfig:
    """Where the Kafka job reads and writes."""

    bootstrap: str
    topic_transactions: str
    topic_alerts: str
    topic_dlq: str
    connector_jar: str
    group_id: str = "auditflow-stream"
    bounded: bool = True  # stop at the offsets present at start
    job_name: str = "auditflow-kafka"
    idle_timeout_ms: int = 30_000  # an idle partition stops holding the watermark back after this
    checkpoint_dir: str | None = None  # durable checkpoint storage (the JobManager's memory holds only 5 MiB)
    extra: dict = field(default_factory=dict)  # further Kafka client properties


@dataclass
class KafkaJobResult:
    seconds: float
    job_name: str
    processed: int
    duplicate: int


def check_connector_jar(jar: str | None) -> str:
    if not jar or not Path(jar).is_file():
        raise FileNotFoundError(
            f"flink-sql-connector-kafka jar not found ({jar!r}); run `deploy/services connector-jar` to fetch it "
            "and set AUDITFLOW_FLINK_KAFKA_JAR")
    return str(Path(jar).resolve())


def _kafka_props(cfg: KafkaJobConfig) -> str:
    props = {"properties.bootstrap.servers": cfg.bootstrap, **{f"properties.{k}": v for k, v in cfg.extra.items()}}
    return ", ".join(f"{_sql_str(k)} = {_sql_str(str(v))}" for k, v in props.items())


def kafka_source_view(t_env, cfg: KafkaJobConfig, spec: StreamSpec) -> str:
    bounded = "'scan.bounded.mode' = 'latest-offset'," if cfg.bounded else ""
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE af_kafka_in (
            `value` STRING,
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
            'scan.startup.mode' = 'earliest-offset',
            {bounded}
            'scan.watermark.emit.strategy' = 'on-event',
            'scan.watermark.idle-timeout' = '{cfg.idle_timeout_ms} ms',
            'format' = 'raw'
        )""")
    t_env.execute_sql("""
        CREATE TEMPORARY VIEW af_records AS
        SELECT `value`, `topic` || '/' || CAST(`partition` AS STRING) AS `src`, `offset` AS `off`, `topic`,
               `partition` AS `part`, `ts`
        FROM af_kafka_in""")
    return "af_records"


def _sink(t_env, name: str, topic: str, cfg: KafkaJobConfig) -> None:
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE {name} (`message` STRING) WITH (
            'connector' = 'kafka',
            'topic' = {_sql_str(topic)},
            {_kafka_props(cfg)},
            'sink.delivery-guarantee' = 'at-least-once',
            'format' = 'raw'
        )""")


def build_kafka_job(cfg: KafkaJobConfig, spec: StreamSpec):
    """The job's statement set: alerts, dead letters (rejects and late records) and graph writes."""
    conf = dict(spec.flink_conf)
    if cfg.checkpoint_dir:
        conf.setdefault("execution.checkpointing.dir", Path(cfg.checkpoint_dir).resolve().as_uri())
    env, t_env = table_environment(spec.parallelism, extra_jars=[check_connector_jar(cfg.connector_jar)],
                                   flink_conf=conf)
    env.enable_checkpointing(CHECKPOINT_INTERVAL_MS)
    t_env.get_config().set("pipeline.name", cfg.job_name)
    topo = build_topology(t_env, kafka_source_view(t_env, cfg, spec), spec)
    _sink(t_env, "af_alerts_out", cfg.topic_alerts, cfg)
    _sink(t_env, "af_dlq_out", cfg.topic_dlq, cfg)
    t_env.create_temporary_view("af_rejects_v", topo.rejects)
    t_env.create_temporary_view("af_late_v", topo.late)
    stmts = t_env.create_statement_set()
    stmts.add_insert("af_alerts_out", topo.alerts)
    stmts.add_insert_sql("INSERT INTO af_dlq_out SELECT message FROM af_rejects_v UNION ALL SELECT message FROM af_late_v")
    t_env.create_temporary_view("af_dups_v", topo.duplicates)
    t_env.execute_sql("CREATE TEMPORARY TABLE af_discard (`m` STRING) WITH ('connector' = 'blackhole')")
    stmts.add_insert_sql("INSERT INTO af_discard SELECT message FROM af_dups_v")
    add_graph_sink(t_env, stmts, topo)
    return stmts


def start_kafka_job(cfg: KafkaJobConfig, spec: StreamSpec):
    """Submit the Kafka job to a local MiniCluster and return at once with its ``JobClient``
    (an unbounded job runs until ``job_client.cancel()``)."""
    return build_kafka_job(cfg, spec).execute().get_job_client()


def run_kafka_job(cfg: KafkaJobConfig, spec: StreamSpec) -> KafkaJobResult:
    """Run the Kafka job on a local MiniCluster; with ``cfg.bounded``, to the offsets present at
    start, and return the job's own counts."""
    stmts = build_kafka_job(cfg, spec)
    t0 = time.perf_counter()
    result = stmts.execute()
    job = result.get_job_client().get_job_execution_result().result()
    counts = job_counts(job)
    return KafkaJobResult(time.perf_counter() - t0, cfg.job_name, counts["processed"], counts["duplicate"])


def job_arguments(cfg: KafkaJobConfig, model_dir: str, spec: StreamSpec) -> list[str]:
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
    ap.add_argument("--graph-url", default=None)
    ap.add_argument("--graph-option", action="append", default=[], help="KEY=VALUE for the graph store")
    a = ap.parse_args(argv)
    cfg = KafkaJobConfig(a.bootstrap, a.topic_transactions, a.topic_alerts, a.topic_dlq, a.connector_jar,
                         group_id=a.group_id, bounded=a.bounded, job_name=a.job_name,
                         checkpoint_dir=a.checkpoint_dir)
    spec = StreamSpec(scorer_factory=partial(batch_scorer, a.model_dir), graph_url=a.graph_url,
                      graph_options=dict(o.split("=", 1) for o in a.graph_option), parallelism=a.parallelism,
                      out_of_orderness_ms=a.out_of_orderness_ms, allowed_lateness_ms=a.allowed_lateness_ms)
    res = run_kafka_job(cfg, spec)
    print(f"job {res.job_name} finished in {res.seconds:.1f}s: processed={res.processed} "
          f"duplicate={res.duplicate}", file=sys.stderr)


if __name__ == "__main__":
    main()
