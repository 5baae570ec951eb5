"""The stream job: per-event work in the JVM, Python only on Arrow batches.

One topology, two sources (a wire file for the embedded default, a Kafka topic in production)::

    records (value, source, offset; event time and watermarks from Flink SQL)
      StreamFeatures (Java, pipelines/jvm/src):
        decode  --> rejects (field, value, reason)          one pass over the af1 record; the
                --> late (behind the watermark by more        event-level features
                    than the allowed lateness)
        dedup by event id --> duplicates
        legs --> account windows (1 h, 24 h, 7 d)           one keyed operator per account holds
                                                              every window in shared state
        join --> one row per event, features packed as little-endian doubles
      fast path: pandas UDF on Arrow batches (xgboost)      the fast score of every event, and the
                                                              alert message of those at the threshold
      decoded events --graph--> pandas UDF batches          GraphStore writes (idempotent)
      with drift on (DriftPanes.java):
        Codes, chained to the join                          each event's bins and segments; of
                                                              the watermarks, those that close a pane
        DriftPanes (parallelism 1)                          bin counts per pane, each closed when
                                                              the watermark passes it; the alerts
        pane scoring: Python table function, own task       drift records and drift alerts, one
        SplitLines                                            JSON row per pane, split in the JVM

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

import dataclasses
import json
import os
import shutil
import site
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime
from enum import Enum
from pathlib import Path

from auditflow.features import ACCOUNT_FEATURES, EVENT_FEATURES, FEATURE_NAMES
from auditflow.limits import (
    DEFAULT_ALLOWED_LATENESS_MS,
    DEFAULT_EVENT_TIME_WINDOW,
    DEFAULT_OUT_OF_ORDERNESS_MS,
    FEATURE_WINDOWS,
    LONG_WINDOW_MINUTES,
    MAX_WINDOW_LEGS,
    RECENT_LEGS,
)
from auditflow.money import CURRENCIES
from auditflow.records import PAYMENT_FORMATS, WIRE_FIELDS, WIRE_TAG, RejectedRecord, TransactionEvent, _schema
from pipelines.drift import DriftSpec
from pipelines.jvm import operators_jar

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: The window whose counterparty counts and new-counterparty share are the ``*_24h`` features.
CP_WINDOW = [name for name, _ in FEATURE_WINDOWS].index("24h")

#: The layout the JVM operators produce (``Decode.java``, ``AccountWindow.java``): the event
#: features in this order, then each side's account features.
JVM_EVENT_FEATURES = ("amount_usd", "cross_currency", "self_transfer", "format", "hour", "round_amount")
if EVENT_FEATURES != JVM_EVENT_FEATURES or len(ACCOUNT_FEATURES) != 8 * len(FEATURE_WINDOWS) + 13:
    raise ImportError("auditflow.features is out of step with the JVM operators (pipelines/jvm/src)")

ScorerFactory = Callable[[], tuple]  # () -> (batch predict(X) -> scores, threshold, digest[, names])


@dataclass
class StreamSpec:
    """What one run of the stream job needs besides its source and sinks."""

    scorer_factory: ScorerFactory
    graph_url: str | None = None  # None: the job writes no graph
    # open_store options; pickled into the job graph, so secrets by reference only (password_file)
    graph_options: dict = field(default_factory=dict)
    parallelism: int = 1
    out_of_orderness_ms: int = DEFAULT_OUT_OF_ORDERNESS_MS
    allowed_lateness_ms: int = DEFAULT_ALLOWED_LATENESS_MS
    arrow_batch: int = 1000  # rows per Arrow batch handed to Python
    flink_conf: dict = field(default_factory=dict)  # further Flink options (e.g. execution.buffer-timeout)
    time_window: tuple[datetime, datetime] = DEFAULT_EVENT_TIME_WINDOW  # plausible event times (file source)
    drift: DriftSpec | None = None  # None: the job computes no drift scores
    # events earlier than this (epoch ms) only warm the accounts' windows: not scored, alerted,
    # drift-counted or written to the graph (counted as warm-up); None: no warm-up
    score_from_ms: int | None = None


# ------------------------------------------------------------------------------ environment

#: A failed task restarts after 1 s, then 2, 4, ... up to 30 s (with jitter, so restarts of many
#: jobs spread out); the backoff resets after a minute without failure, and the job fails for
#: good after 8 restarts in a row that each failed within that minute.
RESTART_STRATEGY = {
    "restart-strategy.type": "exponential-delay",
    "restart-strategy.exponential-delay.initial-backoff": "1 s",
    "restart-strategy.exponential-delay.max-backoff": "30 s",
    "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
    "restart-strategy.exponential-delay.reset-backoff-threshold": "1 min",
    "restart-strategy.exponential-delay.jitter-factor": "0.1",
    "restart-strategy.exponential-delay.attempts-before-reset-backoff": "8",
}


def pin_gateway_threads() -> None:
    """Serve each Python thread's calls to the JVM on one Java thread, as far as it can.

    Py4J's client serves a call on whichever of its connections was given back last, and each
    connection is a Java thread of its own. PyFlink and Flink keep state per Java thread: the class
    loader that holds the job's jars (set where ``add_jars`` ran) and Calcite's metadata provider
    (set where a query was parsed, FLINK-23020). A call from another Python thread that ends just
    after one of ours (a JavaObject's finalizer run by the garbage collector there, say) left its
    connection on top, and our next call, served on a Java thread that never planned, failed with
    ``NullPointerException: metadataHandlerProvider`` (once in ``make test``). So each Python thread
    keeps the connection it first used and takes it whenever it is free (a call made while one of
    its own is in progress, such as a finalizer, takes another); other threads take only
    connections no live thread keeps, or make new ones. Py4J's own pinned-thread mode (its
    ``ClientServer``) would need PyFlink's gateway server to be one, which it is not."""
    from pyflink.java_gateway import get_gateway

    client = get_gateway()._gateway_client
    if getattr(client, "_auditflow_pinned", False):
        return
    # reentrant: the garbage collector may run a finalizer that calls the JVM inside these blocks
    lock = threading.RLock()
    local = threading.local()
    keepers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # connection -> the thread keeping it

    def kept_by_another(conn) -> bool:
        owner = keepers.get(conn)
        return owner is not None and owner is not threading.current_thread() and owner.is_alive()

    def take(conn) -> bool:
        try:
            client.deque.remove(conn)
            return True
        except ValueError:  # taken meanwhile by a call this thread made inside this one
            return False

    def get_connection():
        if not client.is_connected:
            from py4j.protocol import Py4JNetworkError

            raise Py4JNetworkError("Gateway is not connected.")
        mine = getattr(local, "connection", None)
        free = None
        with lock:
            if mine is not None and mine in client.deque and take(mine):
                return mine
            for c in reversed(list(client.deque)):
                if not kept_by_another(c) and take(c):
                    free = c
                    break
        conn = free if free is not None else client._create_connection()
        if mine is None or not mine.is_connected:  # none yet, or closed after an error: keep this one
            with lock:
                keepers[conn] = threading.current_thread()
            local.connection = conn
        return conn

    def give_back_connection(conn) -> None:
        with lock:
            client.deque.append(conn)

    client._get_connection = get_connection
    client._give_back_connection = give_back_connection
    client._auditflow_pinned = True


def table_environment(parallelism: int = 1, extra_jars: Sequence[str] = (), flink_conf: dict | None = None):
    """A local (MiniCluster) stream + table environment with the job's JVM operators loaded.

    Python UDFs run in process mode (Arrow batches); the Python workers see this project."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    pin_gateway_threads()
    old = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths = [p for p in (str(PROJECT_ROOT), *site.getsitepackages()) if p not in old]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + old)  # once per path, however many jobs run
    conf = Configuration()
    conf.set_string("python.execution-mode", "process")
    for k, v in RESTART_STRATEGY.items():
        conf.set_string(k, v)
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


# ------------------------------------------------------------------------------ worker watchdog

_WATCHDOG: list = []  # the one watchdog thread of this Python worker, once started


def _proc_parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])  # the field after "(comm)" state
    except (OSError, ValueError, IndexError):
        return None


def _proc_cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def taskmanager_ancestor(pid: int | None = None) -> int | None:
    """The pid of the TaskManager this process descends from (a Python worker it spawned), or
    None (a local MiniCluster's workers run inside the client: no TaskManager above them)."""
    pid = os.getpid() if pid is None else pid
    for _ in range(8):
        pid = _proc_parent(pid)
        if not pid or pid <= 1:
            return None
        if b"TaskManagerRunner" in _proc_cmdline(pid):
            return pid
    return None


def exit_with_taskmanager(poll_s: float = 1.0) -> None:
    """In a Python worker a cluster's TaskManager spawned, exit when that TaskManager is gone.

    A TaskManager killed with SIGKILL cannot stop its workers, and they do not notice on their own
    (measured: still alive minutes later, ~220 MB each); the job restarts elsewhere meanwhile, so
    an orphan only holds memory. Started once per worker process, from the UDFs' ``open``."""
    import threading

    if _WATCHDOG:
        return
    tm = taskmanager_ancestor()
    if tm is None:
        _WATCHDOG.append(None)
        return
    cmdline = _proc_cmdline(tm)

    def watch():
        while _proc_cmdline(tm) == cmdline:  # the same process (a reused pid has another cmdline)
            time.sleep(poll_s)
        os._exit(70)  # EX_SOFTWARE: nothing to clean up that the job's restart does not redo

    t = threading.Thread(target=watch, name="auditflow-tm-watchdog", daemon=True)
    _WATCHDOG.append(t)
    t.start()


# ------------------------------------------------------------------------------ SQL pieces


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _field(name: str, col: str = "`value`") -> str:
    return f"SPLIT_INDEX({col}, ',', {WIRE_FIELDS.index(name)})"


_MIN_TS_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z in epoch ms
_MAX_TS_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def event_time_column(col: str = "CAST(`value` AS STRING)") -> str:
    """The computed event-time column of a source table (``value`` BYTES): the wire record's ``ts_ms``."""
    ts = f"TRY_CAST({_field('ts_ms', col)} AS BIGINT)"
    # Outside years 1..9999 TO_TIMESTAMP_LTZ gives NULL, and a NULL rowtime fails the job: such a
    # record gets time 0 here (it cannot move the watermark) and Decode rejects it (field ts_ms).
    return f"TO_TIMESTAMP_LTZ(CASE WHEN {ts} BETWEEN {_MIN_TS_MS} AND {_MAX_TS_MS} THEN {ts} ELSE 0 END, 3)"


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


def _reject_json(field_expr: str, value_expr: str, reason_expr: str, stage: str) -> str:
    """A :class:`auditflow.records.RejectedRecord` as JSON (plus ``topic`` and ``partition``) from a
    side output's columns ``src, off, topic, part, raw, raw_length, raw_sha256, raw_encoding``
    (capped in the JVM: at most MAX_RAW_BYTES of the record, base64 if it is not UTF-8)."""
    return ("JSON_OBJECT('schema' VALUE " + _sql_str(_schema("rejected")) + ", 'source' VALUE `src`, "
            "'offset' VALUE `off`, 'topic' VALUE `topic`, 'partition' VALUE `part`, "
            "'raw' VALUE `raw`, 'raw_length' VALUE `raw_length`, 'raw_sha256' VALUE `raw_sha256`, "
            "'raw_encoding' VALUE `raw_encoding`, 'field' VALUE " + field_expr + ", "
            "'value' VALUE " + value_expr + ", 'reason' VALUE " + reason_expr + ", 'stage' VALUE "
            + _sql_str(stage) + ")")


# ------------------------------------------------------------------------------ Python UDFs


def _alert_udf(spec: StreamSpec):
    """The fast path in one Python stage: score each Arrow batch, and build the alert message of
    the rows at or above the threshold (NULL for the rest). With drift on, the result is a row
    ``(s DOUBLE, m STRING)``: every event's score (the JVM counter bins it, ``DriftPanes``) and
    the alert message or NULL; a score column of doubles costs the Arrow transfer far less than a
    string per event."""
    from pyflink.table import DataTypes
    from pyflink.table.udf import ScalarFunction, udf

    class FastPath(ScalarFunction):
        def __init__(self, factory, with_drift: bool):
            self.factory, self.with_drift = factory, with_drift

        def open(self, function_context):
            exit_with_taskmanager()
            scorer = self.factory()
            self.predict, self.threshold, self.digest = scorer[0], float(scorer[1]), scorer[2]
            if len(scorer) > 3 and tuple(scorer[3]) != tuple(FEATURE_NAMES):
                raise ValueError(f"model {self.digest[:12]} was trained on other features than this job computes: "
                                 "retrain it (auditflow train)")

        def eval(self, payload, packed):
            import numpy as np
            import pandas as pd

            X, arrived = unpack_features(packed, np)
            scores = np.asarray(self.predict(X), dtype=np.float64)
            hits = np.flatnonzero(scores >= self.threshold)
            payloads = payload.tolist() if len(hits) else None
            out = [None] * len(scores)
            for i in hits.tolist():
                at = arrived[i]
                out[i] = json.dumps({"event": TransactionEvent.from_wire(payloads[i]).to_dict(),
                                     "score": float(scores[i]),
                                     "features": [[n, v] for n, v in zip(FEATURE_NAMES, X[i].tolist())],
                                     "model": self.digest,
                                     **({"arrived_ms": int(at)} if np.isfinite(at) else {})}, separators=(",", ":"))
            if not self.with_drift:
                return pd.Series(out, dtype=object)
            return pd.DataFrame({"s": scores, "m": pd.Series(out, dtype=object)})

        def is_deterministic(self):
            return False

    result = (DataTypes.STRING() if spec.drift is None else
              DataTypes.ROW([DataTypes.FIELD("s", DataTypes.DOUBLE()), DataTypes.FIELD("m", DataTypes.STRING())]))
    return udf(FastPath(spec.scorer_factory, spec.drift is not None), input_types=[DataTypes.STRING(), DataTypes.BYTES()],
               result_type=result, func_type="pandas")


def _drift_udtf(spec: StreamSpec):
    """Scores each pane the JVM counted and runs the alert rules over it and the panes before it
    (:class:`pipelines.drift.PaneScoring`): rows ``('S', drift records' JSON lines)`` and
    ``('X', drift alerts' JSON lines)``, split into one row per line in the JVM (SplitLines.java)."""
    from pyflink.table import DataTypes
    from pyflink.table.udf import TableFunction, udtf

    class DriftScore(TableFunction):
        def __init__(self, drift):
            self.drift = drift

        def open(self, function_context):
            from pipelines.drift import PaneScoring

            exit_with_taskmanager()
            self.scoring = PaneScoring(self.drift)

        def eval(self, start, panes):
            yield from self.scoring.rows(panes)

    return udtf(DriftScore(spec.drift), input_types=[DataTypes.BIGINT(), DataTypes.BYTES()],
                result_types=[DataTypes.STRING(), DataTypes.STRING()])


def unpack_features(packed, np):
    """The feature matrix and each row's arrival at the job (epoch ms, NaN if not known) from the
    JVM's packed rows: each row is the FEATURE_NAMES values then the arrival, as little-endian
    doubles (exact bits, no text round trip)."""
    rows = np.frombuffer(b"".join(packed.tolist()), dtype="<f8").reshape(-1, len(FEATURE_NAMES) + 1)
    return rows[:, :-1], rows[:, -1]


def _graph_udf(spec: StreamSpec):
    from pyflink.table import DataTypes
    from pyflink.table.udf import ScalarFunction, udf

    if "password" in spec.graph_options:
        raise ValueError("StreamSpec.graph_options holds a password, which would be pickled into the job graph: "
                         "give password_file (a path the TaskManagers can read) instead")

    class GraphWrite(ScalarFunction):
        """Writes each Arrow batch of events to the graph store (idempotent on event id).

        Carries the store's URL and options only: a ``password_file`` is read in ``open()``, on
        the TaskManager, so the password is never part of the pickled function."""

        def __init__(self, url, options):
            self.url, self.options = url, options

        def open(self, function_context):
            from evidence_graph import open_store

            exit_with_taskmanager()
            self.store = open_store(self.url, **self.options)

        def eval(self, payload):
            import pandas as pd

            self.store.add_transactions([TransactionEvent.from_wire(p) for p in payload])
            self.store.flush()  # durable per batch: readers after the job need not wait for close()
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
    """The job's output tables (JSON strings)."""

    alerts: object  # `message` STRING: alert JSON
    rejects: object  # `message` STRING: RejectedRecord JSON, stage 'decode'
    late: object  # `message` STRING: RejectedRecord JSON, stage 'late'
    duplicates: object  # `message` STRING: the duplicate wire record
    graph: object | None  # `g` BIGINT, never a row: anchors the graph writes in the job
    drift: object | None = None  # `kind` STRING ('S' score, 'X' alert), `message` STRING: drift JSON


def build_topology(t_env, source_view: str, spec: StreamSpec) -> Topology:
    """Wire the job over a view ``(value BYTES, src STRING, off BIGINT, topic STRING, part INT,
    ts rowtime)``: the record's bytes, where it came from (a path or ``topic/partition``, and its line or
    Kafka offset; topic and partition are NULL for files) and its event time."""
    from pyflink.datastream.data_stream import DataStream
    from pyflink.java_gateway import get_gateway

    t_env.get_config().set("python.fn-execution.arrow.batch.size", str(spec.arrow_batch))
    t_env.get_config().set("python.fn-execution.bundle.size", str(spec.arrow_batch))
    records = t_env.to_data_stream(t_env.sql_query(f"SELECT `value`, `src`, `off`, `topic`, `part` FROM {source_view}"))

    gateway = get_gateway()
    jvm = gateway.jvm
    params = jvm.io.auditflow.stream.StreamFeatures.Params(
        _long_array(gateway, [m for _, m in FEATURE_WINDOWS]), MAX_WINDOW_LEGS, RECENT_LEGS, CP_WINDOW,
        spec.allowed_lateness_ms)
    if spec.score_from_ms is not None:
        params = params.scoreFrom(int(spec.score_from_ms))
    result = jvm.io.auditflow.stream.StreamFeatures.build(
        records._j_data_stream, params, _string_array(gateway, WIRE_FIELDS), _string_array(gateway, list(CURRENCIES)),
        _long_array(gateway, [100 * 10**scale for _, scale in CURRENCIES.values()]),
        _string_array(gateway, PAYMENT_FORMATS))
    drift_params = None if spec.drift is None else _drift_params(spec, gateway)
    features = result.getFeatures()
    if drift_params is not None:  # each event's drift bins, computed where its features are
        features = jvm.io.auditflow.stream.DriftPanes.Codes.build(features, drift_params)
    for name, stream in (("af_duplicates", result.getDuplicates()), ("af_reject_rows", result.getRejects()),
                         ("af_late_rows", result.getLate()), ("af_graph_events", result.getGraphEvents())):
        t_env.create_temporary_view(name, t_env.from_data_stream(DataStream(stream)))
    if drift_params is None:
        t_env.create_temporary_view("af_features", t_env.from_data_stream(DataStream(features)))
    else:
        # A table made from a DataStream drops its watermarks unless its schema declares them: the
        # pane counter behind the fast path closes each pane on the watermark, so it must see them
        # (without, every pane would wait for the end of the input, and an unbounded job would
        # never score one).
        from pyflink.table import DataTypes, Schema

        t_env.create_temporary_view("af_features", t_env.from_data_stream(
            DataStream(features), Schema.new_builder().column_by_metadata("rowtime", DataTypes.TIMESTAMP_LTZ(3))
            .watermark("rowtime", "SOURCE_WATERMARK()").build()))

    rejects = t_env.sql_query(f"SELECT {_reject_json('`field`', '`value`', '`reason`', 'decode')} AS message "
                              "FROM af_reject_rows")
    late_reason = (f"'event time more than {int(spec.allowed_lateness_ms)} ms behind the watermark ' || "
                   "CAST(`watermark` AS STRING)")
    late = t_env.sql_query(f"SELECT {_reject_json(chr(39) + 'ts_ms' + chr(39), '`value`', late_reason, 'late')} "
                           "AS message FROM af_late_rows")
    t_env.create_temporary_function("af_fast_path", _alert_udf(spec))
    drift = None
    if spec.drift is None:
        alerts = t_env.sql_query("SELECT message FROM (SELECT af_fast_path(`payload`, `features`) AS message "
                                 "FROM af_features) WHERE message IS NOT NULL")
    else:
        alerts, drift = _drift_topology(t_env, spec, gateway, drift_params)
    dups = t_env.sql_query("SELECT `payload` AS message FROM af_duplicates")
    graph = None
    if spec.graph_url:
        t_env.create_temporary_function("af_graph_write", _graph_udf(spec))
        graph = t_env.sql_query("SELECT g FROM (SELECT af_graph_write(`payload`) AS g FROM af_graph_events) WHERE g < 0")
    return Topology(alerts, rejects, late, dups, graph, drift)


def _drift_params(spec: StreamSpec, gateway):
    """The JVM counter's layout and the reference's bins (``DriftPanes.Params``)."""
    from pipelines.drift import JvmBins, Layout, history_needed

    layout = Layout.of(spec.drift.profile)
    bins = JvmBins.of(spec.drift.profile, FEATURE_NAMES, WIRE_FIELDS)
    ints = lambda xs: _int_array(gateway, xs)  # noqa: E731
    strings = lambda xs: _string_array(gateway, xs)  # noqa: E731
    return gateway.jvm.io.auditflow.stream.DriftPanes.Params(
        spec.drift.window_minutes * 60_000, spec.allowed_lateness_ms, ints(layout.segment_counts), ints(layout.nbins),
        ints(layout.segment_features), history_needed(spec.drift.rules), WIRE_FIELDS.index("ts_ms"),
        WIRE_FIELDS.index("source_offset"), spec.drift.max_gap_panes).bins(
        ints(bins.segment_fields), strings(bins.segment_values), ints(bins.segment_value_ends),
        ints(bins.feature_kind), ints(bins.feature_source), _double_array(gateway, bins.edges), ints(bins.edge_ends),
        strings(bins.level_values), ints(bins.level_bins), ints(bins.level_ends))


def _drift_topology(t_env, spec: StreamSpec, gateway, params):
    """Scored rows (the events' drift codes + the fast path's score and message) through the JVM pane
    counter; alerts split off there, panes scored by :func:`_drift_udtf`."""
    from pyflink.datastream.data_stream import DataStream

    scored = t_env.to_data_stream(t_env.sql_query(
        "SELECT `codes`, af_fast_path(`payload`, `features`) AS r FROM af_features"))
    panes = gateway.jvm.io.auditflow.stream.DriftPanes.build(scored._j_data_stream, params)
    alert_rows = panes.getSideOutput(gateway.jvm.io.auditflow.stream.DriftPanes.ALERTS)
    t_env.create_temporary_view("af_alert_rows", t_env.from_data_stream(DataStream(alert_rows)))
    # the panes' scoring in a task of its own (a network edge, not chained): while Python scores a
    # pane, the events go on being scored and counted
    t_env.create_temporary_view("af_drift_panes", t_env.from_data_stream(DataStream(panes.rebalance())))
    t_env.create_temporary_function("af_drift_score", _drift_udtf(spec))
    alerts = t_env.sql_query("SELECT message FROM af_alert_rows")
    scored_panes = t_env.to_data_stream(t_env.sql_query(
        "SELECT T.kind, T.lines FROM af_drift_panes, LATERAL TABLE(af_drift_score(`start`, `panes`)) AS T(kind, lines)"))
    lines = gateway.jvm.io.auditflow.stream.SplitLines.build(scored_panes._j_data_stream)
    t_env.create_temporary_view("af_drift_lines", t_env.from_data_stream(DataStream(lines)))
    drift = t_env.sql_query("SELECT kind, message FROM af_drift_lines")
    return alerts, drift


def add_graph_sink(t_env, stmts, topo: Topology) -> None:
    """Anchor the graph writes in a statement set (they emit no rows; the sink discards)."""
    if topo.graph is not None:
        t_env.execute_sql("CREATE TEMPORARY TABLE af_graph_sink (`g` BIGINT) WITH ('connector' = 'blackhole')")
        stmts.add_insert("af_graph_sink", topo.graph)


def _string_array(gateway, values: Sequence[str]):
    arr = gateway.new_array(gateway.jvm.java.lang.String, len(values))
    for i, v in enumerate(values):
        arr[i] = v
    return arr


def _double_array(gateway, values: Sequence[float]):
    arr = gateway.new_array(gateway.jvm.double, len(values))
    for i, v in enumerate(values):
        arr[i] = float(v)
    return arr


def _int_array(gateway, values: Sequence[int]):
    arr = gateway.new_array(gateway.jvm.int, len(values))
    for i, v in enumerate(values):
        arr[i] = int(v)
    return arr


def _long_array(gateway, values: Sequence[int]):
    arr = gateway.new_array(gateway.jvm.long, len(values))
    for i, v in enumerate(values):
        arr[i] = int(v)
    return arr


def job_counts(job_result) -> dict[str, int]:
    """The job's own counters from a finished job's result (absent counters are 0)."""
    acc = job_result.get_all_accumulator_results()
    return {"processed": int(acc.get("auditflow.processed", 0) or 0),
            "duplicate": int(acc.get("auditflow.duplicate", 0) or 0),
            "warmup": int(acc.get("auditflow.warmup", 0) or 0)}


# ------------------------------------------------------------------------------ file runs


def write_wire_file(csv_path: str | Path, wire_path: str | Path, *,
                    time_window: tuple[datetime, datetime] = DEFAULT_EVENT_TIME_WINDOW) -> tuple[int, list[RejectedRecord]]:
    """The file source's ingestion: the one line reader turns the CSV into wire records.

    Returns (data lines read, rejects); every line is either written or rejected. The records
    are the producer's own (:func:`ingest.kafka_io.wire_records`), byte for byte, with the same
    plausible event times (``time_window``)."""
    from ingest.kafka_io import wire_records

    n = 0
    rejects: list[RejectedRecord] = []
    with open(wire_path, "wb") as out:
        for item in wire_records(csv_path, time_window=time_window):
            n += 1
            if isinstance(item, RejectedRecord):
                rejects.append(item)
            else:
                out.write(item[1])
                out.write(b"\n")
    return n, rejects


def file_source_view(t_env, wire_path: str | Path, spec: StreamSpec, source: str) -> str:
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE af_wire_file (
            `value` BYTES,
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
    # the drift records' and drift alerts' JSON lines as the job wrote them, parsed when first asked for
    drift_lines: list[str] = field(default_factory=list, repr=False)
    drift_alert_lines: list[str] = field(default_factory=list, repr=False)
    warmup: int = 0  # warm-up events (run_file_job's warmup): in the windows, not in records_in

    @cached_property
    def drift_records(self) -> list[dict]:
        """:class:`pipelines.drift.DriftRecord` dicts, sorted by key."""
        return sorted(map(json.loads, self.drift_lines), key=drift_record_order)

    @cached_property
    def drift_alerts(self) -> list[dict]:
        """:class:`pipelines.drift.DriftAlert` dicts, by window, rule and id."""
        return sorted(map(json.loads, self.drift_alert_lines),
                      key=lambda a: (a["window_start"], a["rule"], a["alert_id"]))


def warmup_records(history: str | Path, before_ms: int, *, span_ms: int = LONG_WINDOW_MINUTES * 60_000,
                   time_window: tuple[datetime, datetime] = DEFAULT_EVENT_TIME_WINDOW) -> list[bytes]:
    """The wire records that warm a job starting at ``before_ms``: the valid events of ``history``
    in the ``span_ms`` before it (the longest window the accounts keep; older legs would expire
    anyway), each event id once, in event-time order (so none is late or a duplicate)."""
    from ingest.kafka_io import wire_records

    lo = before_ms - span_ms
    picked: dict[bytes, tuple[int, int, bytes]] = {}  # event id -> (time, position, record)
    for i, item in enumerate(wire_records(history, time_window=time_window)):
        if isinstance(item, RejectedRecord):
            continue
        _, eid, ts_text, _ = item[1].split(b",", 3)  # af1,<event id>,<event time ms>,...
        ts = int(ts_text)
        if lo <= ts < before_ms and eid not in picked:
            picked[eid] = (ts, i, item[1])
    return [v for _, _, v in sorted(picked.values())]


def first_event_ms(wire_path: str | Path) -> int | None:
    """The earliest event time in a wire file (None: no record)."""
    with open(wire_path, "rb") as fh:
        return min((int(line.split(b",", 3)[2]) for line in fh), default=None)


def run_file_job(csv_path: str | Path, spec: StreamSpec, *, warmup: str | Path | None = None) -> FileJobOutput:
    """Run the job on a local MiniCluster over an AMLworld CSV (the embedded default).

    ``warmup``: an earlier transactions file whose last days (:func:`warmup_records`) go through
    the job first, so the accounts' windows start where that history left them; they are counted
    as ``warmup``, not in ``records_in``, and nothing of them is scored or written."""
    warm = 0
    with tempfile.TemporaryDirectory(prefix="auditflow-wire-") as tmp:
        wire = Path(tmp) / "events.af1"
        records_in, parse_rejects = write_wire_file(csv_path, wire, time_window=spec.time_window)
        first = first_event_ms(wire) if warmup is not None else None
        if first is not None:
            records = warmup_records(warmup, first, time_window=spec.time_window)
            warm = len(records)
            both = Path(tmp) / "warm-then-events.af1"
            with open(both, "wb") as out_fh:
                for r in records:
                    out_fh.write(r + b"\n")
                with open(wire, "rb") as fh:
                    shutil.copyfileobj(fh, out_fh)
            wire, spec = both, dataclasses.replace(spec, score_from_ms=first)
        out = run_wire_job(wire, spec, source=str(csv_path))
    if out.warmup != warm:
        raise RuntimeError(f"the job counted {out.warmup} warm-up events, {warm} were given")
    out.records_in -= warm
    if out.records_in != records_in - len(parse_rejects):
        raise RuntimeError(f"wire file holds {out.records_in} records, expected {records_in - len(parse_rejects)}")
    out.records_in = records_in  # every CSV line: the wire records plus the lines rejected by the reader
    out.late = with_csv_lines(out.late, csv_path)
    out.rejects = sorted(parse_rejects + out.rejects, key=lambda r: (r.source, r.offset))
    return out


def with_csv_lines(late: list[RejectedRecord], csv_path: str | Path) -> list[RejectedRecord]:
    """Late records of a file run as the file has them: the job read them as wire records (no
    offset of their own), so each gets its CSV line number (the wire's ``source_offset``) and
    that line's text as its raw form, read by the one line reader."""
    from ingest.amlworld import read_lines

    lines = {}
    for r in late:
        if r.offset is None and r.raw.startswith(WIRE_TAG + ","):
            lines[int(r.raw.split(",", 4)[3])] = r
    if not lines:
        return late
    text = {n: t for n, t in read_lines(csv_path) if n in lines and isinstance(t, str)}
    fixed = {id(r): dataclasses.replace(r, offset=n, raw=text[n], raw_length=-1, raw_sha256="")
             for n, r in lines.items() if n in text}
    return sorted((fixed.get(id(r), r) for r in late), key=lambda r: (r.source, r.offset or 0))


def run_wire_job(wire_path: str | Path, spec: StreamSpec, *, source: str | None = None) -> FileJobOutput:
    """Run the job over a file of wire records in arrival order (duplicates and all).

    ``records_in`` counts the wire file's records; the caller adds what it rejected before."""
    with open(wire_path, "rb") as fh:
        records = sum(1 for _ in fh)
    _, t_env = table_environment(spec.parallelism, flink_conf=spec.flink_conf)
    t0 = time.perf_counter()
    view = file_source_view(t_env, wire_path, spec, source or str(wire_path))
    out, counts = collect_outputs(t_env, view, spec)
    seconds = time.perf_counter() - t0
    if counts["duplicate"] != len(out.duplicates):
        raise RuntimeError(f"duplicate counter {counts['duplicate']} != {len(out.duplicates)} duplicates collected")
    out.rejects.sort(key=lambda r: (r.source, r.offset))
    return FileJobOutput(out.alerts, out.rejects, out.late, out.duplicates, records, counts["processed"], seconds,
                         out.drift_lines, out.drift_alert_lines, warmup=counts["warmup"])


class SideOutput(Enum):
    """The job's outputs as :func:`collect_outputs` writes them to files: each line starts with
    the output's one-letter tag, then its message. The drift tags are the kinds the pane scoring
    gives its rows (:class:`pipelines.drift.PaneScoring`)."""

    ALERT = "A"  # alert JSON
    REJECT = "R"  # RejectedRecord JSON, stage 'decode'
    LATE = "L"  # RejectedRecord JSON, stage 'late'
    DUPLICATE = "D"  # the duplicate wire record
    DRIFT_RECORD = "S"  # a drift record's JSON line
    DRIFT_ALERT = "X"  # a drift alert's JSON line


_SIDE_OUTPUTS = {kind.value: kind for kind in SideOutput}


@dataclass
class SideOutputs:
    """What a bounded run's output files held, each output in file order."""

    alerts: list[dict] = field(default_factory=list)
    rejects: list[RejectedRecord] = field(default_factory=list)
    late: list[RejectedRecord] = field(default_factory=list)
    duplicates: list[TransactionEvent] = field(default_factory=list)
    drift_lines: list[str] = field(default_factory=list)  # drift records' JSON lines, as written
    drift_alert_lines: list[str] = field(default_factory=list)  # drift alerts' JSON lines, as written

    def add(self, line: str) -> None:
        """Add one tagged line of an output file; a ValueError names a tag no output has."""
        tag, body = line[:1], line[1:].rstrip("\n")
        kind = _SIDE_OUTPUTS.get(tag)
        if kind is None:
            raise ValueError(f"unknown output tag {tag!r} (expected one of {', '.join(_SIDE_OUTPUTS)}) "
                             f"in the line {line[:80]!r}")
        if kind is SideOutput.ALERT:
            self.alerts.append(json.loads(body))
        elif kind is SideOutput.REJECT:
            self.rejects.append(RejectedRecord.from_dict(json.loads(body)))
        elif kind is SideOutput.LATE:
            self.late.append(RejectedRecord.from_dict(json.loads(body)))
        elif kind is SideOutput.DUPLICATE:
            self.duplicates.append(TransactionEvent.from_wire(body))
        elif kind is SideOutput.DRIFT_RECORD:
            self.drift_lines.append(body)
        else:
            self.drift_alert_lines.append(body)


def read_side_outputs(folder: str | Path) -> SideOutputs:
    """The tagged lines of the output files in ``folder`` (sorted by path; hidden files, the
    in-progress files of a failed run, left out)."""
    out = SideOutputs()
    for f in sorted(Path(folder).rglob("*")):
        if not f.is_file() or f.name.startswith("."):
            continue  # in-progress files of a failed run are hidden (".part-...")
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                out.add(line)
    return out


def collect_outputs(t_env, source_view: str, spec: StreamSpec) -> tuple[SideOutputs, dict]:
    """Run the topology to the end of a bounded source: its outputs (alerts sorted by source
    offset and event id) and the job's counters. Every output is written by the JVM to files (one
    tagged line each, :class:`SideOutput`) and read back afterwards: no per-row round trip to Python."""
    topo = build_topology(t_env, source_view, spec)
    tagged = [(SideOutput.ALERT, "af_out_alerts", topo.alerts), (SideOutput.REJECT, "af_out_rejects", topo.rejects),
              (SideOutput.LATE, "af_out_late", topo.late), (SideOutput.DUPLICATE, "af_out_dups", topo.duplicates)]
    selects = []
    for kind, view, table in tagged:
        t_env.create_temporary_view(view, table)
        selects.append(f"SELECT CONCAT('{kind.value}', message) FROM {view}")
    if topo.drift is not None:
        t_env.create_temporary_view("af_out_drift", topo.drift)
        selects.append("SELECT CONCAT(kind, message) FROM af_out_drift")  # kind: S or X, tagged by the scoring
    with tempfile.TemporaryDirectory(prefix="auditflow-out-") as tmp:
        t_env.execute_sql(f"""
            CREATE TEMPORARY TABLE af_out_files (`m` STRING) WITH (
                'connector' = 'filesystem', 'path' = {_sql_str(tmp)}, 'format' = 'raw')""")
        stmts = t_env.create_statement_set()
        stmts.add_insert_sql("INSERT INTO af_out_files " + " UNION ALL ".join(selects))
        add_graph_sink(t_env, stmts, topo)
        job = stmts.execute().get_job_client().get_job_execution_result().result()
        counts = job_counts(job)
        out = read_side_outputs(tmp)
    out.alerts.sort(key=lambda a: (a["event"]["source_offset"], a["event"]["event_id"]))
    return out, counts


def drift_record_order(d: dict) -> tuple:
    return (d["window_start"], d["feature"], d["segment"], d["metric"])
