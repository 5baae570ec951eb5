"""The stream job on Kafka: KafkaSource -> the same parse/features/score -> KafkaSink.

Runs on a local MiniCluster (``run_kafka_job``) or is submitted unchanged to a Flink session
cluster (``flink run -py pipelines/kafka_job.py -- --model-dir DIR``), which is what a user does
against a multi-node or Kubernetes Flink cluster. Settings (bootstrap servers, topics, graph
store, connector jar) come from :class:`auditflow.settings.Settings` / ``AUDITFLOW_*`` variables.

* Source: the Kafka table connector with ``topic``, ``partition`` and ``offset`` metadata columns,
  so a record that fails parsing reaches ``transactions.dlq`` as an envelope naming its
  topic/partition/offset, raw value, reason and stage. Event time comes from the record's
  timestamp field; watermarks are generated per partition inside the source.
* Sinks: fast-path alerts to ``alerts``, dead letters to ``transactions.dlq``.
* Checkpointing is on (at-least-once delivery into Kafka; graph writes are idempotent MERGEs
  keyed by event id, so a replay changes no counts).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from urllib.parse import urlparse
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pyflink.common import Types
from pyflink.common.serialization import SimpleStringSchema
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.base import DeliveryGuarantee
from pyflink.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from pyflink.table import StreamTableEnvironment

from auditflow.settings import Settings
from pipelines.job import JobSpec, build_pipeline, flink_environment

CHECKPOINT_INTERVAL_MS = 5_000


def connector_jar(settings: Settings) -> str:
    jar = settings.flink_kafka_jar
    if not jar or not Path(jar).is_file():
        raise FileNotFoundError(
            f"flink-sql-connector-kafka jar not found (AUDITFLOW_FLINK_KAFKA_JAR={jar!r}); "
            "run `deploy/services connector-jar` to fetch it"
        )
    return str(Path(jar).resolve())


def kafka_source(env: StreamExecutionEnvironment, settings: Settings, *, group_id: str, bounded: bool,
                 out_of_orderness_minutes: int):
    """``(topic/partition, offset, raw value)`` from the transactions topic, with event time."""
    t_env = StreamTableEnvironment.create(env)
    bounded_opt = "'scan.bounded.mode' = 'latest-offset'," if bounded else ""
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE kafka_transactions (
            `value` STRING,
            `topic` STRING METADATA VIRTUAL,
            `partition` INT METADATA VIRTUAL,
            `offset` BIGINT METADATA VIRTUAL,
            `event_time` AS COALESCE(
                TO_TIMESTAMP(JSON_VALUE(`value`, '$.timestamp'), 'yyyy-MM-dd''T''HH:mm'),
                TO_TIMESTAMP('1970-01-01 00:00:00')),
            WATERMARK FOR `event_time` AS `event_time` - INTERVAL '{out_of_orderness_minutes}' MINUTE
        ) WITH (
            'connector' = 'kafka',
            'topic' = '{settings.topic_transactions}',
            'properties.bootstrap.servers' = '{settings.kafka_bootstrap}',
            'properties.group.id' = '{group_id}',
            'scan.startup.mode' = 'earliest-offset',
            {bounded_opt}
            'scan.watermark.idle-timeout' = '30 s',
            'format' = 'raw'
        )""")
    table = t_env.sql_query("SELECT `topic`, `partition`, `offset`, `value` FROM kafka_transactions")
    rows = t_env.to_data_stream(table)
    return rows.map(
        lambda r: (f"{r[0]}/{r[1]}", int(r[2]), r[3] if r[3] is not None else ""),
        output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.STRING()]),
    ).name("kafka-records")


def string_sink(settings: Settings, topic: str) -> KafkaSink:
    return (
        KafkaSink.builder()
        .set_bootstrap_servers(settings.kafka_bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
        .build()
    )


def build_kafka_job(settings: Settings, model_dir: str, *, bounded: bool, group_id: str = "auditflow-stream",
                    graph_options: dict | None = None) -> StreamExecutionEnvironment:
    from model_service.fast_path import fast_path_scorer

    env = flink_environment(settings.parallelism, extra_jars=[connector_jar(settings)])
    env.enable_checkpointing(CHECKPOINT_INTERVAL_MS)
    spec = JobSpec(
        graph_url=settings.effective_graph_url,
        scorer_factory=partial(fast_path_scorer, str(Path(model_dir).resolve())),
        window_minutes=settings.window_minutes,
        parallelism=settings.parallelism,
        graph_options=graph_options or {},
    )
    raw = kafka_source(env, settings, group_id=group_id, bounded=bounded,
                       out_of_orderness_minutes=spec.out_of_orderness_minutes)
    alerts, rejects, _ = build_pipeline(env, raw, spec, assign_event_time=False)
    alerts.sink_to(string_sink(settings, settings.topic_alerts)).name("alerts-sink")
    rejects.map(_as_dead_letter, output_type=Types.STRING()).sink_to(
        string_sink(settings, settings.topic_dlq)
    ).name("dlq-sink")
    return env


def _as_dead_letter(reject_json: str) -> str:
    d = json.loads(reject_json)
    topic_partition = d["source"]
    topic, _, partition = topic_partition.rpartition("/")
    d.update({"topic": topic, "partition": int(partition) if partition.isdigit() else None})
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


@dataclass
class KafkaJobResult:
    seconds: float
    job_name: str


def run_kafka_job(settings: Settings, model_dir: str, *, bounded: bool = True, group_id: str = "auditflow-stream",
                  graph_options: dict | None = None, job_name: str = "auditflow-kafka") -> KafkaJobResult:
    """Run the Kafka job to completion (``bounded``: up to the offsets present at start)."""
    env = build_kafka_job(settings, model_dir, bounded=bounded, group_id=group_id, graph_options=graph_options)
    t0 = time.perf_counter()
    env.execute(job_name)
    return KafkaJobResult(time.perf_counter() - t0, job_name)


def submit_kafka_job(settings: Settings, model_dir: str, *, bounded: bool = True, group_id: str = "auditflow-stream",
                     job_name: str = "auditflow-kafka", timeout_s: float = 1800) -> subprocess.CompletedProcess:
    """Submit this module to the Flink session cluster with ``flink run -py`` and wait for it.

    Exactly what a user runs against their own cluster: the Flink distribution's ``bin/flink``
    (``settings.flink_home``: ``AUDITFLOW_FLINK_HOME`` or ``FLINK_HOME``, else the one inside the
    installed ``pyflink`` package) with the cluster's configuration (``settings.flink_conf_dir``:
    ``AUDITFLOW_FLINK_CONF_DIR`` or ``FLINK_CONF_DIR``) and the REST address from settings.
    Raises ``RuntimeError`` with the client's output on failure.
    """
    import pyflink

    flink_home = str(settings.flink_home or os.path.dirname(os.path.abspath(pyflink.__file__)))
    rest = urlparse(settings.flink_rest)
    cmd = [
        os.path.join(flink_home, "bin", "flink"), "run",
        "-D", f"rest.address={rest.hostname}", "-D", f"rest.port={rest.port or 8081}",
        "-pyexec", sys.executable, "-py", os.path.abspath(__file__),
        "--model-dir", str(Path(model_dir).resolve()), "--group-id", group_id, "--job-name", job_name,
    ]
    if bounded:
        cmd.append("--bounded")
    if settings.graph_namespace:
        cmd += ["--graph-namespace", settings.graph_namespace]
    env = dict(os.environ)  # passed through to the client process; configuration comes from settings
    env["FLINK_HOME"] = flink_home
    if settings.flink_conf_dir:
        env["FLINK_CONF_DIR"] = str(settings.flink_conf_dir)
    env["AUDITFLOW_FLINK_KAFKA_JAR"] = connector_jar(settings)
    for name, value in settings.model_dump(mode="json", exclude={"signing_key", "neo4j_password"}).items():
        if value is not None:
            env[f"AUDITFLOW_{name.upper()}"] = str(value)
    if settings.neo4j_password is not None:
        env["AUDITFLOW_NEO4J_PASSWORD"] = settings.neo4j_password.get_secret_value()
    env["AUDITFLOW_GRAPH_URL"] = settings.effective_graph_url
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"flink run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="auditflow stream job on Kafka (submit with `flink run -py`)")
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--bounded", action="store_true", help="stop at the offsets present at start")
    ap.add_argument("--group-id", default="auditflow-stream")
    ap.add_argument("--job-name", default="auditflow-kafka")
    ap.add_argument("--graph-namespace", default="", help="Neo4j label suffix (isolates test graphs)")
    args = ap.parse_args(argv)
    options = {"namespace": args.graph_namespace} if args.graph_namespace else None
    res = run_kafka_job(Settings(), args.model_dir, bounded=args.bounded, group_id=args.group_id,
                        graph_options=options, job_name=args.job_name)
    print(f"job {res.job_name} finished in {res.seconds:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
