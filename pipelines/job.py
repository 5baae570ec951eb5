"""The stream job (PyFlink): parse -> per-account windowed features -> fast score -> alerts,
with the transaction graph written on the side and bad records split off, never dropped.

Topology (one job per run)::

    raw (source, offset, text) --parse--> events --legs--> keyBy(account) --AccountFeatures-->
        keyBy(event_id) --JoinLegs + fast score--> alerts (score >= candidate threshold)
    events --GraphWriter--> GraphStore (networkx file or Neo4j)
    parse failures --side output--> rejects / dead letters (with source and offset)

Python functions run in PyFlink's thread mode (the interpreter embedded in the TaskManager JVM),
about an order of magnitude faster per record than process mode on this kind of job.
"""

from __future__ import annotations

import json
import os
import site
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyflink.common import Configuration, Duration, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import (
    FlatMapFunction,
    KeyedProcessFunction,
    OutputTag,
    ProcessFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)
from pyflink.datastream.state import ValueStateDescriptor

from auditflow.errors import FieldError
from auditflow.limits import DEFAULT_WINDOW_MINUTES
from auditflow.records import RejectedRecord, TransactionEvent
from ingest.amlworld import parse_line
from pipelines.features import (
    ACCOUNT_FEATURES,
    FEATURE_NAMES,
    AccountWindow,
    assemble,
    in_leg,
    out_leg,
)
from pipelines.sources import DEFAULT_CHUNK_BYTES, read_chunk, split_file

REJECT_TAG = OutputTag("rejects", Types.STRING())
PROCESSED_MARK = "P"  # what the join emits for a scored event below the threshold (file runs)
EVENT_PART, SND_PART, RCV_PART = 0, 1, 2
MINUTE_MS = 60_000
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def flink_environment(parallelism: int = 1, extra_jars: list[str] | None = None) -> StreamExecutionEnvironment:
    """A local (MiniCluster) environment in thread mode whose Python workers see this project."""
    paths = [str(PROJECT_ROOT), *site.getsitepackages()]
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    conf = Configuration()
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("python.fn-execution.bundle.size", "1000")
    # A failing job fails after a few tries instead of restarting forever.
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "3")
    conf.set_string("restart-strategy.fixed-delay.delay", "2 s")
    conf.set_string("taskmanager.memory.process.size", "1600m")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.set_python_executable(sys.executable)
    if extra_jars:
        env.add_jars(*[f"file://{os.path.abspath(j)}" for j in extra_jars])
    return env


# ------------------------------------------------------------------------------ operators


def decode_event(raw: str, source: str, offset: int) -> TransactionEvent:
    """A raw record is either an AMLworld CSV line or an event's JSON wire form."""
    text = raw.strip()
    if text.startswith("{"):
        return TransactionEvent.from_json(text)
    result = parse_line(raw, offset, source)
    if isinstance(result, RejectedRecord):
        raise FieldError(result.field, result.value, result.reason)
    return result


class ParseEvents(ProcessFunction):
    """Good records go on as events; bad ones go to the side output with their offset."""

    def process_element(self, value, ctx):
        source, offset, raw = value
        try:
            ev = decode_event(raw, source, offset)
        except FieldError as e:
            rej = RejectedRecord(source, offset, raw, e.field, str(e.value), e.reason, stage="parse")
            yield REJECT_TAG, rej.to_json()
            return
        except Exception as e:  # a record must never kill the job: it is dead-lettered instead
            rej = RejectedRecord(source, offset, raw, "value", raw[:200], f"{type(e).__name__}: {e}", stage="parse")
            yield REJECT_TAG, rej.to_json()
            return
        yield ev


class EventParts(FlatMapFunction):
    """Each event fans out to the join (the event itself) and to both accounts' legs."""

    def flat_map(self, ev):
        yield ev.event_id, EVENT_PART, ev
        for key, minute, is_out, cp, cents in (out_leg(ev), in_leg(ev)):
            yield key, (minute, ev.source_offset, ev.event_id, not is_out, cp, cents)


class AccountFeatures(KeyedProcessFunction):
    """Keyed by account, in event-time order: the account's sliding window lives in keyed state.

    Legs wait in keyed state until the watermark passes their minute, then are applied sorted
    by (minute, source offset, event id, out before in): the same order whatever the arrival
    order, so a Kafka run over several partitions computes exactly what the file run and the
    plain-Python reference compute. Legs arriving behind the watermark are applied at once.
    The windows are fixed (``auditflow.limits.FEATURE_WINDOWS``).
    """

    def open(self, runtime_context: RuntimeContext):
        self.state = runtime_context.get_state(ValueStateDescriptor("window", Types.PICKLED_BYTE_ARRAY()))
        self.pending = runtime_context.get_state(ValueStateDescriptor("pending", Types.PICKLED_BYTE_ARRAY()))

    def _apply(self, legs):
        window = self.state.value() or AccountWindow()
        for minute, _, event_id, is_in, cp, cents in sorted(legs):
            feats = window.apply(minute, not is_in, cp, cents)
            yield event_id, RCV_PART if is_in else SND_PART, [feats[k] for k in ACCOUNT_FEATURES]
        self.state.update(window)

    def process_element(self, value, ctx):
        leg = value[1]
        due_ms = leg[0] * MINUTE_MS
        if due_ms <= ctx.timer_service().current_watermark():
            yield from self._apply([leg])
            return
        pending = self.pending.value() or []
        pending.append(leg)
        self.pending.update(pending)
        ctx.timer_service().register_event_time_timer(due_ms)

    def on_timer(self, timestamp, ctx):
        pending = self.pending.value() or []
        due = [leg for leg in pending if leg[0] * MINUTE_MS <= timestamp]
        rest = [leg for leg in pending if leg[0] * MINUTE_MS > timestamp]
        if rest:
            self.pending.update(rest)
        else:
            self.pending.clear()
        yield from self._apply(due)


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value.minute * MINUTE_MS


def event_time_watermarks(out_of_orderness_minutes: int) -> WatermarkStrategy:
    return WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_minutes(out_of_orderness_minutes)
    ).with_timestamp_assigner(EventTime())


class JoinAndScore(KeyedProcessFunction):
    """Keyed by event id: waits for the event and both legs' features, then scores it."""

    def __init__(self, scorer_factory: Callable[[], tuple[Callable, float, str]], emit_processed: bool = False):
        self.scorer_factory = scorer_factory
        self.emit_processed = emit_processed

    def open(self, runtime_context: RuntimeContext):
        self.parts = runtime_context.get_state(ValueStateDescriptor("parts", Types.PICKLED_BYTE_ARRAY()))
        scorer = self.scorer_factory()
        self.score, self.threshold, self.digest = scorer[:3]
        if len(scorer) > 3 and tuple(scorer[3]) != tuple(FEATURE_NAMES):
            raise ValueError(
                f"model {self.digest[:12]} was trained on features {list(scorer[3])}, but this job computes "
                f"{list(FEATURE_NAMES)}: retrain it (auditflow train)"
            )

    def process_element(self, value, ctx):
        _, kind, payload = value
        parts = self.parts.value() or {}
        parts[kind] = payload
        if len(parts) < 3:
            self.parts.update(parts)
            return
        self.parts.clear()
        ev = parts[EVENT_PART]
        snd = dict(zip(ACCOUNT_FEATURES, parts[SND_PART]))
        rcv = dict(zip(ACCOUNT_FEATURES, parts[RCV_PART]))
        vec = assemble(ev, snd, rcv)
        score = float(self.score([list(vec.values())])[0])
        if score >= self.threshold:
            yield json.dumps(
                {"event": ev.to_dict(), "score": score, "features": list(vec.items()), "model": self.digest},
                separators=(",", ":"),
            )
        elif self.emit_processed:
            yield PROCESSED_MARK  # counted by the bounded file run: every scored event is processed


class GraphWriter(FlatMapFunction):
    """Writes events to the graph store in batches (idempotent on event id); emits nothing."""

    def __init__(self, store_url: str, options: dict | None = None, batch: int = 2000):
        self.store_url = store_url
        self.options = options or {}
        self.batch = batch

    def open(self, runtime_context: RuntimeContext):
        from evidence_graph import open_store

        self.store = open_store(self.store_url, **self.options)
        self.buffer: list[TransactionEvent] = []

    def flat_map(self, value):
        self.buffer.append(value)
        if len(self.buffer) >= self.batch:
            self.store.add_transactions(self.buffer)
            self.buffer = []
        return iter(())

    def close(self):
        if self.buffer:
            self.store.add_transactions(self.buffer)
            self.buffer = []
        self.store.close()


# ------------------------------------------------------------------------------ wiring


@dataclass
class JobSpec:
    """What one run of the stream job reads and writes."""

    graph_url: str | None  # None: the job writes no graph
    scorer_factory: Callable[[], tuple[Callable, float, str]]
    window_minutes: int = DEFAULT_WINDOW_MINUTES  # unused by the stream features (fixed windows); kept for callers
    parallelism: int = 1
    out_of_orderness_minutes: int = 60  # event-time slack before a minute's legs are applied
    graph_options: dict = field(default_factory=dict)  # passed to evidence_graph.open_store


def build_pipeline(env: StreamExecutionEnvironment, raw, spec: JobSpec, assign_event_time: bool = True,
                   emit_processed: bool = False):
    """Wire the job over a stream of ``(source, offset, raw)``.

    Returns ``(alerts, rejects, graph_done)``; ``graph_done`` carries no records, it anchors the
    graph writer in the job graph for sinks that collect. With ``emit_processed`` the alerts stream
    also carries :data:`PROCESSED_MARK` for every scored event that raised no alert.
    """
    parsed = raw.process(ParseEvents(), output_type=Types.PICKLED_BYTE_ARRAY()).name("parse")
    rejects = parsed.get_side_output(REJECT_TAG)  # from the parse operator itself
    if assign_event_time:
        parsed = parsed.assign_timestamps_and_watermarks(event_time_watermarks(spec.out_of_orderness_minutes))
    graph_done = None
    if spec.graph_url:
        graph_done = (
            parsed.flat_map(GraphWriter(spec.graph_url, spec.graph_options), output_type=Types.STRING())
            .name("graph-writer")
            .set_parallelism(1)
        )
    parts = parsed.flat_map(EventParts(), output_type=Types.PICKLED_BYTE_ARRAY()).name("event-parts")
    part_type = Types.TUPLE([Types.STRING(), Types.INT(), Types.PICKLED_BYTE_ARRAY()])
    events = parts.filter(lambda p: len(p) == 3).map(lambda p: p, output_type=part_type)
    legs = parts.filter(lambda p: len(p) == 2)
    features = (
        legs.key_by(lambda leg: leg[0], key_type=Types.STRING())
        .process(AccountFeatures(), output_type=part_type)
        .name("account-features")
    )
    alerts = (
        events.union(features)
        .key_by(lambda p: p[0], key_type=Types.STRING())
        .process(JoinAndScore(spec.scorer_factory, emit_processed), output_type=Types.STRING())
        .name("join-and-score")
    )
    return alerts, rejects, graph_done


def file_source(env: StreamExecutionEnvironment, chunks: list[tuple[str, int, int, int]]):
    """Bounded source over line-aligned chunks of a CSV (see :mod:`pipelines.sources`)."""
    chunk_type = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])
    return (
        env.from_collection(chunks, type_info=chunk_type)
        .flat_map(read_chunk, output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.STRING()]))
        .name("read-csv")
    )


@dataclass
class JobOutput:
    """What a bounded run produced: fast-path alerts, rejects, records read and events processed
    (parsed, featured and scored by the job)."""

    alerts: list[dict]
    rejects: list[RejectedRecord]
    records_in: int
    processed: int


def run_file_job(csv_path: str, spec: JobSpec, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> JobOutput:
    """Run the job on a local MiniCluster over a CSV file (the embedded default)."""
    chunks, records_in = split_file(csv_path, chunk_bytes)
    env = flink_environment(spec.parallelism)
    raw = file_source(env, [c.as_tuple() for c in chunks])
    alerts, rejects, graph_done = build_pipeline(env, raw, spec, emit_processed=True)
    streams = [rejects.map(lambda s: "R" + s, output_type=Types.STRING())]
    if graph_done is not None:
        streams.append(graph_done)
    tagged = alerts.map(lambda s: "A" + s, output_type=Types.STRING()).union(*streams)
    out_alerts: list[dict] = []
    out_rejects: list[RejectedRecord] = []
    processed = 0
    with tagged.execute_and_collect("auditflow-stream") as results:
        for item in results:
            if item[0] == "A":
                if item[1:] != PROCESSED_MARK:
                    out_alerts.append(json.loads(item[1:]))
                processed += 1
            else:
                out_rejects.append(RejectedRecord.from_dict(json.loads(item[1:])))
    out_alerts.sort(key=lambda a: (a["event"]["source_offset"], a["event"]["event_id"]))
    out_rejects.sort(key=lambda r: (r.source, r.offset))
    return JobOutput(out_alerts, out_rejects, records_in, processed)
