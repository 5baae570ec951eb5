"""The stream job: per-event work in the JVM, Python only on Arrow batches.

One topology, two sources (a wire file for the embedded default, a Kafka topic in production)::

    records (value, source, offset, event time)          Flink SQL: decode, validate, split off
      --decode--> rejects (field, value, reason)             the late records against the
      --late-->   late (behind the watermark by more          watermark, event features
                  than the allowed lateness)
      --ok-->     StreamFeatures (Java)                     dedup by event id, both legs through
                    dedup --> duplicates                     one keyed operator per account that
                    legs --> account windows (1 h, 24 h,     holds every window in shared state,
                             7 d, shared state)              legs joined back to their event
                    join --> one row per event
      --score-->  pandas UDF, Arrow batches (xgboost)       the fast score of every event
      --alerts--> Python UDF on the alerted rows only       the alert message
    decoded events --graph--> pandas UDF batches           GraphStore writes (idempotent)

Records arrive in the compact wire form (:meth:`auditflow.records.TransactionEvent.to_wire`),
written by the one line reader (:mod:`ingest.amlworld`) at ingestion: ``auditflow produce`` for
Kafka, a pass over the CSV for files. Counts always balance: records in = processed + rejected
+ late + duplicate (``processed`` and ``duplicate`` are the job's own accumulators).

Event time is the transfer's timestamp; watermarks trail the largest time seen by the
out-of-orderness bound and are emitted on every record, so which records are late is a function
of the input order alone. A record is late when its time plus the allowed lateness is at or
behind the watermark; every other record's legs wait until the watermark passes that point and
are then applied in event-time order, so the features do not depend on arrival order.
"""

from __future__ import annotations

import json
import os
import site
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from auditflow.features import ACCOUNT_FEATURES, EVENT_FEATURES, FEATURE_NAMES
from auditflow.limits import (
    DEFAULT_ALLOWED_LATENESS_MS,
    DEFAULT_OUT_OF_ORDERNESS_MS,
    FEATURE_WINDOWS,
    MAX_WINDOW_LEGS,
    RECENT_LEGS,
)
from auditflow.money import CURRENCIES
from auditflow.records import PAYMENT_FORMATS, WIRE_FIELDS, WIRE_TAG, RejectedRecord, TransactionEvent, _schema
from pipelines.jvm import operators_jar

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: The window whose counterparty counts and new-counterparty share are the ``*_24h`` features.
CP_WINDOW = [name for name, _ in FEATURE_WINDOWS].index("24h")

ScorerFactory = Callable[[], tuple]  # () -> (batch predict(X) -> scores, threshold, digest[, names])


@dataclass
class StreamSpec:
    """What one run of the stream job needs besides its source and sinks."""

    scorer_factory: ScorerFactory
    graph_url: str | None = None  # None: the job writes no graph
    graph_options: dict = field(default_factory=dict)
    parallelism: int = 1
    out_of_orderness_ms: int = DEFAULT_OUT_OF_ORDERNESS_MS
    allowed_lateness_ms: int = DEFAULT_ALLOWED_LATENESS_MS
    arrow_batch: int = 1000  # rows per Arrow batch handed to Python
    flink_conf: dict = field(default_factory=dict)  # further Flink options (e.g. execution.buffer-timeout)


# ------------------------------------------------------------------------------ environment


def table_environment(parallelism: int = 1, extra_jars: Sequence[str] = (), flink_conf: dict | None = None):
    """A local (MiniCluster) stream + table environment with the job's JVM operators loaded.

    Python UDFs run in process mode (Arrow batches); the Python workers see this project."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    paths = [str(PROJECT_ROOT), *site.getsitepackages()]
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    conf = Configuration()
    conf.set_string("python.execution-mode", "process")
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "3")
    conf.set_string("restart-strategy.fixed-delay.delay", "2 s")
    conf.set_string("taskmanager.memory.process.size", "1600m")
    # A watermark after every record: which records are late depends on the input order alone.
    conf.set_string("pipeline.auto-watermark-interval", "0 ms")
    for k, v in (flink_conf or {}).items():
        conf.set_string(k, str(v))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.set_python_executable(sys.executable)
    jars = [str(operators_jar()), *extra_jars]
    env.add_jars(*[f"file://{os.path.abspath(j)}" for j in jars])
    t_env = StreamTableEnvironment.create(env)
    t_env.get_config().set("parallelism.default", str(parallelism))
    return env, t_env


# ------------------------------------------------------------------------------ SQL pieces


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _field(name: str, col: str = "`value`") -> str:
    return f"SPLIT_INDEX({col}, ',', {WIRE_FIELDS.index(name)})"


def event_time_column(col: str = "`value`") -> str:
    """The computed event-time column of a source table: the wire record's ``ts_ms``."""
    ts = f"TRY_CAST({_field('ts_ms', col)} AS BIGINT)"
    return f"TO_TIMESTAMP_LTZ(COALESCE({ts}, 0), 3)"


def sql_interval(ms: int) -> str:
    """A day-to-second interval literal of ``ms`` milliseconds."""
    if ms < 0:
        raise ValueError(f"interval of {ms} ms: expected >= 0")
    s, milli = divmod(ms, 1000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    d, h = divmod(h, 24)
    return f"INTERVAL '{d} {h:02d}:{m:02d}:{s:02d}.{milli:03d}' DAY TO SECOND(3)"


def watermark_clause(spec: StreamSpec) -> str:
    return f"WATERMARK FOR `ts` AS `ts` - {sql_interval(spec.out_of_orderness_ms)}"


_INT_RE = "^-?[0-9]{1,18}$"
_INT_FIELDS = ("ts_ms", "source_offset", "paid_units", "received_units", "paid_usd_cents", "received_usd_cents")


def _decode_checks() -> list[tuple[str, str, str, str]]:
    """(failing condition, field, value expression, reason), in the order
    :meth:`TransactionEvent.from_wire` checks them."""
    commas = "CHAR_LENGTH(`value`) - CHAR_LENGTH(REPLACE(`value`, ',', ''))"
    checks = [(f"`value` IS NULL OR {commas} <> {len(WIRE_FIELDS) - 1} OR {_field('tag')} <> {_sql_str(WIRE_TAG)}",
               "value", "SUBSTR(COALESCE(`value`, ''), 1, 80)",
               f"not an {WIRE_TAG} wire record of {len(WIRE_FIELDS)} fields")]
    for name in _INT_FIELDS:
        checks.append((f"NOT COALESCE(REGEXP({_field(name)}, '{_INT_RE}'), FALSE)", name, _field(name),
                       "expected an integer"))
    currencies = ", ".join(_sql_str(c) for c in CURRENCIES)
    for name in ("paid_currency", "received_currency"):
        checks.append((f"{_field(name)} NOT IN ({currencies})", name, _field(name), "unknown currency"))
    formats = ", ".join(_sql_str(f) for f in PAYMENT_FORMATS)
    checks.append((f"{_field('payment_format')} NOT IN ({formats})", "payment_format", _field("payment_format"),
                   "unknown payment format"))
    checks.append((f"{_field('is_laundering')} NOT IN ('0', '1')", "is_laundering", _field("is_laundering"),
                   "expected 0 or 1"))
    return checks


def _case(parts: list[tuple[str, str]]) -> str:
    return "CASE " + " ".join(f"WHEN {cond} THEN {val}" for cond, val in parts) + " END"


def _reject_json(field_expr: str, value_expr: str, reason_expr: str, stage: str) -> str:
    return ("JSON_OBJECT('schema' VALUE " + _sql_str(_schema("rejected")) + ", 'source' VALUE `src`, "
            "'offset' VALUE `off`, 'topic' VALUE `topic`, 'partition' VALUE `part`, "
            "'raw' VALUE COALESCE(`value`, ''), 'field' VALUE " + field_expr + ", "
            "'value' VALUE " + value_expr + ", 'reason' VALUE " + reason_expr + ", 'stage' VALUE "
            + _sql_str(stage) + ")")


def _event_feature_sql(col: str = "`payload`") -> dict[str, str]:
    """The event-level features (:data:`auditflow.features.EVENT_FEATURES`) from a wire column, in
    the JVM; the same values as :func:`pipelines.features.event_features`."""
    f = lambda name: _field(name, col)  # noqa: E731
    as_double = lambda e: f"CAST({e} AS DOUBLE)"  # noqa: E731
    fmt = "CASE " + " ".join(f"WHEN {f('payment_format')} = {_sql_str(p)} THEN {i}"
                             for i, p in enumerate(PAYMENT_FORMATS)) + " END"
    round_unit = "CASE " + " ".join(f"WHEN {f('paid_currency')} = {_sql_str(c)} THEN {100 * 10**scale}"
                                    for c, (_, scale) in CURRENCIES.items()) + " END"
    one_if = lambda cond: f"CASE WHEN {cond} THEN CAST(1 AS DOUBLE) ELSE CAST(0 AS DOUBLE) END"  # noqa: E731
    exprs = {
        "amount_usd": f"{as_double('CAST(' + f('paid_usd_cents') + ' AS BIGINT)')} / CAST(100 AS DOUBLE)",
        "cross_currency": one_if(f"{f('paid_currency')} <> {f('received_currency')}"),
        "self_transfer": one_if(f"{f('from_bank')} = {f('to_bank')} AND {f('from_account')} = {f('to_account')}"),
        "format": as_double(fmt),
        "hour": as_double(f"MOD(CAST({f('ts_ms')} AS BIGINT) / 3600000, 24)"),
        "round_amount": one_if(f"MOD(CAST({f('paid_units')} AS BIGINT), {round_unit}) = 0"),
    }
    assert tuple(exprs) == EVENT_FEATURES, "event features out of step with the vocabulary"
    return exprs


# ------------------------------------------------------------------------------ Python UDFs


def _score_udf(spec: StreamSpec, n_features: int):
    from pyflink.table import DataTypes
    from pyflink.table.udf import ScalarFunction, udf

    class Score(ScalarFunction):
        def __init__(self, factory):
            self.factory = factory

        def open(self, function_context):
            import numpy as np

            scorer = self.factory()
            self.predict = scorer[0]
            self.np = np
            if len(scorer) > 3 and tuple(scorer[3]) != tuple(FEATURE_NAMES):
                raise ValueError(f"model {scorer[2][:12]} was trained on other features than this job computes: "
                                 "retrain it (auditflow train)")

        def eval(self, *cols):
            X = self.np.column_stack([c.to_numpy(dtype=self.np.float64) for c in cols])
            import pandas as pd

            return pd.Series(self.np.asarray(self.predict(X), dtype=self.np.float64))

        def is_deterministic(self):
            return False  # the planner must not inline it twice (once for the filter, once for the alert)

    return udf(Score(spec.scorer_factory), input_types=[DataTypes.DOUBLE()] * n_features,
               result_type=DataTypes.DOUBLE(), func_type="pandas")


def _alert_udf(spec: StreamSpec, n_features: int):
    from pyflink.table import DataTypes
    from pyflink.table.udf import ScalarFunction, udf

    class AlertMessage(ScalarFunction):
        """The alert message of each alerted row (a batch holds only alerted rows)."""

        def __init__(self, factory):
            self.factory = factory

        def open(self, function_context):
            self.digest = self.factory()[2]

        def eval(self, payload, score, *features):
            import pandas as pd

            cols = [c.tolist() for c in features]
            out = []
            for i, (p, sc) in enumerate(zip(payload.tolist(), score.tolist())):
                out.append(json.dumps({"event": TransactionEvent.from_wire(p).to_dict(), "score": sc,
                                       "features": [[n, c[i]] for n, c in zip(FEATURE_NAMES, cols)],
                                       "model": self.digest}, separators=(",", ":")))
            return pd.Series(out, dtype=object)

    return udf(AlertMessage(spec.scorer_factory), input_types=[DataTypes.STRING(), DataTypes.DOUBLE()]
               + [DataTypes.DOUBLE()] * n_features, result_type=DataTypes.STRING(), func_type="pandas")


def _graph_udf(spec: StreamSpec):
    from pyflink.table import DataTypes
    from pyflink.table.udf import ScalarFunction, udf

    class GraphWrite(ScalarFunction):
        """Writes each Arrow batch of events to the graph store (idempotent on event id)."""

        def __init__(self, url, options):
            self.url, self.options = url, options

        def open(self, function_context):
            from evidence_graph import open_store

            self.store = open_store(self.url, **self.options)

        def eval(self, payload):
            import pandas as pd

            self.store.add_transactions([TransactionEvent.from_wire(p) for p in payload])
            return pd.Series([0] * len(payload), dtype="int64")

        def close(self):
            self.store.close()

        def is_deterministic(self):
            return False

    return udf(GraphWrite(spec.graph_url, spec.graph_options), input_types=[DataTypes.STRING()],
               result_type=DataTypes.BIGINT(), func_type="pandas")


# ------------------------------------------------------------------------------ topology


@dataclass
class Topology:
    """The job's output tables (JSON strings) and the t_env they live in."""

    t_env: object
    alerts: object  # `message` STRING: alert JSON
    rejects: object  # `message` STRING: RejectedRecord JSON, stage 'decode'
    late: object  # `message` STRING: RejectedRecord JSON, stage 'late'
    duplicates: object  # `message` STRING: the duplicate wire record
    graph: object | None  # `g` BIGINT, never a row: anchors the graph writes in the job


def build_topology(t_env, source_view: str, spec: StreamSpec) -> Topology:
    """Wire the job over a view ``(value STRING, src STRING, off BIGINT, topic STRING, part INT,
    ts rowtime)``: the record, where it came from (a path or ``topic/partition``, and its line or
    Kafka offset; topic and partition are NULL for files) and its event time."""
    from pyflink.datastream.data_stream import DataStream
    from pyflink.java_gateway import get_gateway

    t_env.get_config().set("python.fn-execution.arrow.batch.size", str(spec.arrow_batch))
    t_env.get_config().set("python.fn-execution.bundle.size", str(spec.arrow_batch))
    checks = _decode_checks()
    bad_field = _case([(c, _sql_str(f)) for c, f, _, _ in checks])
    bad_value = _case([(c, v) for c, _, v, _ in checks])
    bad_reason = _case([(c, _sql_str(r)) for c, _, _, r in checks])
    t_env.execute_sql(f"""
        CREATE TEMPORARY VIEW af_decoded AS
        SELECT `value`, `src`, `off`, `topic`, `part`, `ts`, {bad_field} AS bad_field, {bad_value} AS bad_value,
               {bad_reason} AS bad_reason
        FROM {source_view}""")
    lateness = sql_interval(spec.allowed_lateness_ms)
    is_late = f"CURRENT_WATERMARK(`ts`) IS NOT NULL AND `ts` <= CURRENT_WATERMARK(`ts`) - {lateness}"
    rejects = t_env.sql_query(f"""
        SELECT {_reject_json('bad_field', 'bad_value', 'bad_reason', 'decode')} AS message
        FROM af_decoded WHERE bad_field IS NOT NULL""")
    late = t_env.sql_query(f"""
        SELECT {_reject_json("'ts_ms'", _field('ts_ms'),
                             "'event time more than ' || CAST(CAST(" + str(spec.allowed_lateness_ms)
                             + " AS BIGINT) AS STRING) || ' ms behind the watermark ' || "
                             "CAST(CURRENT_WATERMARK(`ts`) AS STRING)", 'late')} AS message
        FROM af_decoded WHERE bad_field IS NULL AND {is_late}""")
    snd = f"{_field('from_bank')} || '/' || {_field('from_account')}"
    rcv = f"{_field('to_bank')} || '/' || {_field('to_account')}"
    on_time = t_env.sql_query(f"""
        SELECT {_field('event_id')} AS eid, CAST({_field('ts_ms')} AS BIGINT) AS ts_ms,
               CAST({_field('source_offset')} AS BIGINT) AS src_offset, {snd} AS snd, {rcv} AS rcv,
               CAST({_field('paid_usd_cents')} AS BIGINT) AS paid_cents,
               CAST({_field('received_usd_cents')} AS BIGINT) AS recv_cents, `value` AS payload
        FROM af_decoded WHERE bad_field IS NULL AND NOT ({is_late})""")

    gateway = get_gateway()
    jvm = gateway.jvm
    params = jvm.io.auditflow.stream.StreamFeatures.Params(
        _long_array(gateway, [m for _, m in FEATURE_WINDOWS]), MAX_WINDOW_LEGS, RECENT_LEGS, CP_WINDOW,
        spec.allowed_lateness_ms)
    names = [f"snd_{f}" for f in ACCOUNT_FEATURES] + [f"rcv_{f}" for f in ACCOUNT_FEATURES]
    j_names = gateway.new_array(jvm.java.lang.String, len(names))
    for i, n in enumerate(names):
        j_names[i] = n
    events = t_env.to_data_stream(on_time)
    result = jvm.io.auditflow.stream.StreamFeatures.build(events._j_data_stream, params, j_names)
    features = t_env.from_data_stream(DataStream(result.getFeatures()))
    duplicates = t_env.from_data_stream(DataStream(result.getDuplicates()))
    t_env.create_temporary_view("af_features", features)
    t_env.create_temporary_view("af_duplicates", duplicates)

    ev_sql = _event_feature_sql()
    cols = [f"{ev_sql[n]} AS `{n}`" if n in ev_sql else f"`{n}`" for n in FEATURE_NAMES]
    t_env.create_temporary_function("af_score", _score_udf(spec, len(FEATURE_NAMES)))
    t_env.create_temporary_function("af_alert", _alert_udf(spec, len(FEATURE_NAMES)))
    t_env.execute_sql(f"""
        CREATE TEMPORARY VIEW af_vectors AS SELECT `payload`, {', '.join(cols)} FROM af_features""")
    quoted = ", ".join(f"`{n}`" for n in FEATURE_NAMES)
    t_env.execute_sql(f"CREATE TEMPORARY VIEW af_scored AS SELECT `payload`, af_score({quoted}) AS score, {quoted} "
                      "FROM af_vectors")
    threshold = spec.scorer_factory()[1]
    alerts = t_env.sql_query(f"SELECT af_alert(`payload`, score, {quoted}) AS message FROM af_scored "
                             f"WHERE score >= {float(threshold)!r}")
    dups = t_env.sql_query("SELECT `payload` AS message FROM af_duplicates")
    graph = None
    if spec.graph_url:
        t_env.create_temporary_function("af_graph_write", _graph_udf(spec))
        graph = t_env.sql_query("SELECT g FROM (SELECT af_graph_write(`value`) AS g FROM af_decoded "
                                "WHERE bad_field IS NULL) WHERE g < 0")
    return Topology(t_env, alerts, rejects, late, dups, graph)


def _long_array(gateway, values: Sequence[int]):
    arr = gateway.new_array(gateway.jvm.long, len(values))
    for i, v in enumerate(values):
        arr[i] = int(v)
    return arr


def job_counts(job_result) -> dict[str, int]:
    """The job's own counters from a finished job's result (absent counters are 0)."""
    acc = job_result.get_all_accumulator_results()
    return {"processed": int(acc.get("auditflow.processed", 0) or 0),
            "duplicate": int(acc.get("auditflow.duplicate", 0) or 0)}


# ------------------------------------------------------------------------------ file runs


def write_wire_file(csv_path: str | Path, wire_path: str | Path) -> tuple[int, list[RejectedRecord]]:
    """The file source's ingestion: the one line reader turns the CSV into wire records.

    Returns (data lines read, rejects); every line is either written or rejected."""
    from ingest.amlworld import read_transactions

    n = 0
    rejects: list[RejectedRecord] = []
    with open(wire_path, "w", encoding="utf-8") as out:
        for item in read_transactions(csv_path):
            n += 1
            if isinstance(item, RejectedRecord):
                rejects.append(item)
            else:
                out.write(item.to_wire())
                out.write("\n")
    return n, rejects


def file_source_view(t_env, wire_path: str | Path, spec: StreamSpec, source: str) -> str:
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE af_wire_file (
            `value` STRING,
            `ts` AS {event_time_column()},
            {watermark_clause(spec)}
        ) WITH ('connector' = 'filesystem', 'path' = {_sql_str(str(Path(wire_path).resolve()))}, 'format' = 'raw')""")
    t_env.execute_sql(f"""
        CREATE TEMPORARY VIEW af_records AS
        SELECT `value`, {_sql_str(source)} AS `src`, CAST(NULL AS BIGINT) AS `off`, CAST(NULL AS STRING) AS `topic`,
               CAST(NULL AS INT) AS `part`, `ts` FROM af_wire_file""")
    return "af_records"


@dataclass
class FileJobOutput:
    """What a bounded file run produced. ``records_in`` = processed + rejected + late + duplicate."""

    alerts: list[dict]
    rejects: list[RejectedRecord]
    late: list[RejectedRecord]
    duplicates: list[TransactionEvent]
    records_in: int
    processed: int
    seconds: float = 0.0


def run_file_job(csv_path: str | Path, spec: StreamSpec) -> FileJobOutput:
    """Run the job on a local MiniCluster over an AMLworld CSV (the embedded default)."""
    with tempfile.TemporaryDirectory(prefix="auditflow-wire-") as tmp:
        wire = Path(tmp) / "events.af1"
        records_in, parse_rejects = write_wire_file(csv_path, wire)
        out = run_wire_job(wire, spec, source=str(csv_path))
    if out.records_in != records_in - len(parse_rejects):
        raise RuntimeError(f"wire file holds {out.records_in} records, expected {records_in - len(parse_rejects)}")
    out.records_in = records_in  # every CSV line: the wire records plus the lines rejected by the reader
    out.rejects = sorted(parse_rejects + out.rejects, key=lambda r: (r.source, r.offset))
    return out


def run_wire_job(wire_path: str | Path, spec: StreamSpec, *, source: str | None = None) -> FileJobOutput:
    """Run the job over a file of wire records in arrival order (duplicates and all).

    ``records_in`` counts the wire file's records; the caller adds what it rejected before."""
    records = sum(1 for _ in open(wire_path, "rb"))
    _, t_env = table_environment(spec.parallelism, flink_conf=spec.flink_conf)
    t0 = time.perf_counter()
    view = file_source_view(t_env, wire_path, spec, source or str(wire_path))
    alerts, rejects, late, dups, counts = collect_outputs(t_env, view, spec)
    seconds = time.perf_counter() - t0
    if counts["duplicate"] != len(dups):
        raise RuntimeError(f"duplicate counter {counts['duplicate']} != {len(dups)} duplicates collected")
    rejects.sort(key=lambda r: (r.source, r.offset))
    return FileJobOutput(alerts, rejects, late, dups, records, counts["processed"], seconds)


def collect_outputs(t_env, source_view: str, spec: StreamSpec):
    """Run the topology to the end of a bounded source, collecting every output."""
    topo = build_topology(t_env, source_view, spec)
    t_env.create_temporary_view("af_out_alerts", topo.alerts)
    t_env.create_temporary_view("af_out_rejects", topo.rejects)
    t_env.create_temporary_view("af_out_late", topo.late)
    t_env.create_temporary_view("af_out_dups", topo.duplicates)
    union = ["SELECT CONCAT('A', message) AS m FROM af_out_alerts",
             "SELECT CONCAT('R', message) AS m FROM af_out_rejects",
             "SELECT CONCAT('L', message) AS m FROM af_out_late",
             "SELECT CONCAT('D', message) AS m FROM af_out_dups"]
    if topo.graph is not None:
        t_env.create_temporary_view("af_out_graph", topo.graph)
        union.append("SELECT CAST(g AS STRING) AS m FROM af_out_graph")
    tagged = t_env.sql_query(" UNION ALL ".join(union))
    alerts: list[dict] = []
    rejects: list[RejectedRecord] = []
    late: list[RejectedRecord] = []
    dups: list[TransactionEvent] = []
    result = tagged.execute()
    with result.collect() as rows:
        for row in rows:
            m = row[0]
            kind, body = m[0], m[1:]
            if kind == "A":
                alerts.append(json.loads(body))
            elif kind == "R":
                rejects.append(RejectedRecord.from_dict(json.loads(body)))
            elif kind == "L":
                late.append(RejectedRecord.from_dict(json.loads(body)))
            elif kind == "D":
                dups.append(TransactionEvent.from_wire(body))
    counts = job_counts(result.get_job_client().get_job_execution_result().result())
    alerts.sort(key=lambda a: (a["event"]["source_offset"], a["event"]["event_id"]))
    return alerts, rejects, late, dups, counts


