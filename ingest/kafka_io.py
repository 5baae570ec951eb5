"""Kafka at the pipeline's edge: topics, the CSV producer with its dead-letter queue, a test consumer.

* :func:`ensure_topics` creates topics with explicit partition counts (replication 1 locally),
  is idempotent, and refuses a topic that exists with a different partition count.
* :func:`produce_file` streams an AMLworld transactions CSV (never loaded whole) into
  ``settings.topic_transactions``: key = the sender's ``node_id`` (``BANK/ACCOUNT``, UTF-8), value =
  :meth:`TransactionEvent.to_json` (carries ``schema``). Rows that do not parse are not lost: each
  goes to ``settings.topic_dlq`` as the JSON of a :class:`RejectedRecord` with ``stage='ingest'``,
  ``source`` = the file path and ``offset`` = its line number (header = line 1). The producer is
  idempotent with ``acks='all'``; every send is acknowledged before it returns, and
  ``read == produced + dead_lettered`` is checked (:class:`ProduceError` otherwise).
* :func:`produce_raw` sends raw bytes (tests use it to inject malformed records).
* :func:`consume_all` reads a whole topic by manual assignment (no consumer group, nothing
  committed) and returns :class:`ConsumedRecord`\\ s sorted by (partition, offset).
* :func:`produce_command` is the body of ``auditflow produce --from FILE --topic T``: a rich
  progress bar, then the counts.

Record timestamps are left to the producer (wall clock): stamping records with the 2022 event
time would put them behind the broker's time-based retention at once.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditflow.records import TransactionEvent
from ingest.amlworld import read_transactions

if TYPE_CHECKING:  # pragma: no cover
    from auditflow.settings import Settings

__all__ = [
    "ConsumedRecord",
    "ProduceError",
    "ProduceSummary",
    "TopicPartitionMismatch",
    "consume_all",
    "count_data_lines",
    "delete_topics",
    "ensure_topics",
    "produce_command",
    "produce_file",
    "produce_raw",
    "producer_config",
]

DLQ_STAGE = "ingest"

# Throughput tuning for the kafka-python producer, which is CPU-bound (~90-100 us of CPU per
# event here, parsing included): large batches amortise the per-batch work (locks, request
# building, one ack per batch); linger lets them fill. Measured on ~30k events, 512 KiB/50 ms
# cost ~10% less CPU than the client defaults (16 KiB/0 ms). Kept well under the broker's
# message.max.bytes (1 MiB) per batch. No compression: the CPU, not the bytes, is the limit.
PRODUCER_TUNING: dict[str, Any] = {
    "linger_ms": 50,
    "batch_size": 512 * 1024,
    "max_in_flight_requests_per_connection": 5,  # the most idempotence allows
}

ProgressCallback = Callable[[int, int, int], None]  # (rows read, events sent, dead letters sent)


class TopicPartitionMismatch(ValueError):
    """A topic exists with another partition count than the one asked for."""


class ProduceError(RuntimeError):
    """Records were not all acknowledged, or the counts do not add up."""


# ------------------------------------------------------------------------------------ admin


def _admin(bootstrap: str):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="auditflow-admin", request_timeout_ms=30000
    )


def _partition_counts(admin, names: Sequence[str]) -> dict[str, int]:
    """Partition count per existing topic among ``names`` (missing topics are left out)."""
    out: dict[str, int] = {}
    for t in admin.describe_topics(list(names)):
        if t.get("error_code", 0) == 0 and t.get("partitions"):
            out[t["name"]] = len(t["partitions"])
    return out


def ensure_topics(
    bootstrap: str, topics: dict[str, int], *, replication_factor: int = 1, timeout_s: float = 30.0
) -> dict[str, str]:
    """Make sure every topic exists with exactly the given partition count.

    Creates the missing ones (replication ``replication_factor``) and waits until every partition
    has a leader. Idempotent; safe against a concurrent creator. Returns ``{topic: "created" |
    "exists"}``. Raises :class:`TopicPartitionMismatch` if a topic exists with another partition
    count (often: auto-created with the broker default by a client that wrote to it first).
    """
    from kafka import errors as kerr

    for name, n in topics.items():
        if not name or not isinstance(n, int) or n < 1:
            raise ValueError(f"topic {name!r}: partitions must be a positive int, got {n!r}")
    if not topics:
        return {}
    timeout_ms = int(timeout_s * 1000)
    status: dict[str, str] = {}
    admin = _admin(bootstrap)
    try:
        existing = set(admin.list_topics())
        missing = {t: n for t, n in topics.items() if t not in existing}
        if missing:
            res = admin.create_topics(
                {t: {"num_partitions": n, "replication_factor": replication_factor} for t, n in missing.items()},
                timeout_ms=timeout_ms,
                raise_errors=False,
            )
            for r in res["topics"]:
                err = kerr.for_code(r["error_code"])
                if r["error_code"] == 0:
                    status[r["name"]] = "created"
                elif err is kerr.TopicAlreadyExistsError:  # someone else won the race
                    status[r["name"]] = "exists"
                else:
                    raise err(f"creating topic {r['name']!r}: {r.get('error_message') or err.__name__}")
        for t in topics:
            status.setdefault(t, "exists")
        admin.wait_for_topics(list(topics), timeout_ms=timeout_ms)
        counts = _partition_counts(admin, list(topics))
    finally:
        admin.close()
    wrong = {t: (counts.get(t), n) for t, n in topics.items() if counts.get(t) != n}
    if wrong:
        detail = "; ".join(f"topic {t!r} has {got} partitions, expected {want}" for t, (got, want) in wrong.items())
        raise TopicPartitionMismatch(
            f"{detail} (a topic's partition count is fixed at creation, e.g. by auto-creation with the "
            f"broker default: delete the topic or choose another name)"
        )
    return status


def _require_topics(bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
    """Partition count of each topic; ``LookupError`` naming the missing ones."""
    admin = _admin(bootstrap)
    try:
        counts = _partition_counts(admin, list(topics))
    finally:
        admin.close()
    missing = [t for t in topics if t not in counts]
    if missing:
        raise LookupError(f"topic(s) {', '.join(map(repr, missing))} do not exist at {bootstrap} (see ensure_topics)")
    return counts


def delete_topics(bootstrap: str, topics: Iterable[str], *, timeout_s: float = 30.0) -> None:
    """Delete the topics that exist (missing ones are ignored) and wait until the broker no
    longer lists them, so that re-creating one of the same name right after works."""
    from kafka.errors import KafkaTimeoutError

    admin = _admin(bootstrap)
    try:
        wanted = set(topics)
        names = sorted(wanted & set(admin.list_topics()))
        if names:
            admin.delete_topics(names, timeout_ms=int(timeout_s * 1000))
            deadline = time.monotonic() + timeout_s
            while left := wanted & set(admin.list_topics()):
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"topics still listed {timeout_s}s after deletion: {sorted(left)}")
                time.sleep(0.1)
    finally:
        admin.close()


# ------------------------------------------------------------------------------------ produce


def producer_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    """The producer settings used here: idempotent, ``acks='all'``, batched for throughput."""
    return {
        "bootstrap_servers": bootstrap,
        "client_id": "auditflow-producer",
        "acks": "all",
        "enable_idempotence": True,
        # ensure_topics decides partition counts. NB kafka-python 3.0.12 does not pass this flag
        # on to its metadata requests (ClusterMetadata is built without it), so with the broker's
        # auto.create.topics.enable=true a send to a missing topic still creates it with the broker
        # default (1 partition): callers check existence first (see _require_topics).
        "allow_auto_create_topics": False,
        **PRODUCER_TUNING,
        **overrides,
    }


class _Acks:
    """Counts acknowledgements per topic and keeps the first failure (callbacks run on the
    producer's I/O thread, an immediate failure on the caller's: hence the lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ok: dict[str, int] = {}
        self.by_partition: dict[tuple[str, int], int] = {}
        self.done = 0  # acknowledged or failed
        self.failed = 0
        self.first_error: BaseException | None = None

    def success(self, meta) -> None:
        with self.lock:
            self.done += 1
            self.ok[meta.topic] = self.ok.get(meta.topic, 0) + 1
            k = (meta.topic, meta.partition)
            self.by_partition[k] = self.by_partition.get(k, 0) + 1

    def failure(self, exc: BaseException) -> None:
        with self.lock:
            self.done += 1
            self.failed += 1
            if self.first_error is None:
                self.first_error = exc


@dataclass(slots=True)
class ProduceSummary:
    """What :func:`produce_file` read, produced (acknowledged) and dead-lettered."""

    source: str
    topic: str
    dlq_topic: str
    read: int = 0
    produced: int = 0
    dead_lettered: int = 0
    elapsed_s: float = 0.0
    partitions: dict[int, int] = field(default_factory=dict)  # events per partition of ``topic``

    @property
    def events_per_s(self) -> float:
        return self.produced / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def rows_per_s(self) -> float:
        return self.read / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["partitions"] = {str(k): v for k, v in sorted(self.partitions.items())}
        d["events_per_s"] = round(self.events_per_s, 1)
        d["schema"] = "auditflow.produce_summary/1"
        return d

    def render(self) -> str:
        return (
            f"{self.source}: {self.read} rows read, {self.produced} events -> {self.topic}, "
            f"{self.dead_lettered} dead-lettered -> {self.dlq_topic} in {self.elapsed_s:.2f} s "
            f"({self.events_per_s:,.0f} events/s)"
        )


def _raise_if_failed(acks: _Acks, where: str) -> None:
    if acks.failed:
        raise ProduceError(f"{acks.failed} record(s) not acknowledged {where}: {acks.first_error!r}") from acks.first_error


def produce_file(
    csv_path: str | Path,
    settings: Settings,
    topic: str | None = None,
    progress: ProgressCallback | None = None,
    *,
    dlq_topic: str | None = None,
    progress_every: int = 2000,
    max_unacked: int = 200_000,
    flush_timeout_s: float = 300.0,
    create_topics: bool = True,
    producer_overrides: dict[str, Any] | None = None,
) -> ProduceSummary:
    """Stream ``csv_path`` into Kafka; bad rows go to the DLQ. See the module docstring.

    ``topic``/``dlq_topic`` default to ``settings.topic_transactions``/``settings.topic_dlq``; with
    ``create_topics`` both are ensured with ``settings.topic_partitions`` partitions first,
    without it both must exist (``LookupError`` otherwise, before anything is sent).
    ``progress(read, events_sent, dead_letters_sent)`` is called every ``progress_every`` rows
    and once at the end. At most about ``max_unacked`` records wait for their acknowledgement
    at a time (memory stays bounded on multi-million-row files). A wrong header raises
    :class:`~auditflow.errors.FieldError` before any topic is made or anything is sent.
    """
    from kafka import KafkaProducer

    source = str(csv_path)
    topic = topic or settings.topic_transactions
    dlq = dlq_topic or settings.topic_dlq
    if topic == dlq:
        raise ValueError(f"topic and DLQ topic are both {topic!r}")
    rows = read_transactions(csv_path)
    try:
        first = next(rows, None)  # opens the file, checks the header: fails before touching Kafka
        if create_topics:
            ensure_topics(settings.kafka_bootstrap, {topic: settings.topic_partitions, dlq: settings.topic_partitions})
        else:
            _require_topics(settings.kafka_bootstrap, [topic, dlq])
        summary = ProduceSummary(source=source, topic=topic, dlq_topic=dlq)
        acks = _Acks()
        on_ok, on_err = acks.success, acks.failure
        read = sent = dead = 0
        producer = KafkaProducer(**producer_config(settings.kafka_bootstrap, **(producer_overrides or {})))
        t0 = time.perf_counter()
        try:
            send = producer.send
            for item in _chain_first(first, rows) if first is not None else ():
                read += 1
                if type(item) is TransactionEvent:
                    fut = send(topic, value=item.to_json().encode(), key=item.sender.node_id.encode())
                    sent += 1
                else:
                    rej = dataclasses.replace(item, stage=DLQ_STAGE, source=source)
                    fut = send(dlq, value=rej.to_json().encode(), key=None)
                    dead += 1
                fut.add_callback(on_ok)
                fut.add_errback(on_err)
                if read % progress_every == 0:
                    _raise_if_failed(acks, "while producing")  # fail fast, e.g. broker gone
                    # kafka-python 3 has no buffer_memory bound: keep unacknowledged records bounded
                    while read - acks.done > max_unacked and not acks.failed:
                        time.sleep(0.002)
                    if progress is not None:
                        progress(read, sent, dead)
            producer.flush(timeout=flush_timeout_s)  # every future is done (callbacks ran) after it
            summary.elapsed_s = time.perf_counter() - t0
        finally:
            producer.close(timeout=30)
    finally:
        rows.close()
    _raise_if_failed(acks, f"by {settings.kafka_bootstrap}")
    summary.read = read
    summary.produced = acks.ok.get(topic, 0)
    summary.dead_lettered = acks.ok.get(dlq, 0)
    summary.partitions = {p: n for (t, p), n in sorted(acks.by_partition.items()) if t == topic}
    if progress is not None:
        progress(read, sent, dead)
    if (summary.produced, summary.dead_lettered) != (sent, dead) or read != summary.produced + summary.dead_lettered:
        raise ProduceError(
            f"counts do not add up: read {read}, sent {sent} + {dead}, acknowledged "
            f"{summary.produced} + {summary.dead_lettered}"
        )
    return summary


def _chain_first(first, rest):
    yield first
    yield from rest


def produce_raw(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    *,
    timeout_s: float = 60.0,
) -> list[tuple[int, int]]:
    """Send raw values (optionally keyed) to ``topic`` and wait for the acks.

    Returns ``(partition, offset)`` per value, in order. The topic must exist (``LookupError``).
    """
    from kafka import KafkaProducer

    if keys is not None and len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} values")
    _require_topics(bootstrap, [topic])
    producer = KafkaProducer(**producer_config(bootstrap, client_id="auditflow-raw", linger_ms=5))
    try:
        futures = [
            producer.send(topic, value=v, key=None if keys is None else keys[i]) for i, v in enumerate(values)
        ]
        producer.flush(timeout=timeout_s)
        metas = [f.get(timeout=timeout_s) for f in futures]
    finally:
        producer.close(timeout=30)
    return [(m.partition, m.offset) for m in metas]


# ------------------------------------------------------------------------------------ consume


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def consume_all(
    bootstrap: str,
    topic: str,
    timeout_s: float = 60.0,
    from_beginning: bool = True,
    expect: int | None = None,
    *,
    quiet_s: float = 2.0,
) -> list[ConsumedRecord]:
    """Read ``topic`` (all partitions, manual assignment, no group, nothing committed).

    Starts at the beginning (or, with ``from_beginning=False``, at the current end: only new
    records). Stops once ``expect`` records arrived, or no record arrived for ``quiet_s``, and in
    both cases only after catching up with the partitions' end offsets at that moment (so records
    beyond ``expect``, e.g. duplicates, are returned too); at the latest after ``timeout_s``.
    Returns whatever arrived, sorted by (partition, offset). Raises ``LookupError`` if the topic
    does not appear within ``timeout_s``.
    """
    from kafka import KafkaConsumer, TopicPartition

    deadline = time.monotonic() + timeout_s
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=f"auditflow-consume-{uuid.uuid4().hex[:8]}",
        group_id=None,
        enable_auto_commit=False,
        allow_auto_create_topics=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
    )
    out: list[ConsumedRecord] = []
    try:
        parts: set[int] = set()
        while not parts:
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                if time.monotonic() >= deadline:
                    raise LookupError(f"topic {topic!r} not found at {bootstrap} within {timeout_s}s")
                time.sleep(0.2)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        if from_beginning:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
            for tp in tps:  # resolve "end" now, not at the first fetch
                consumer.position(tp)
        last_new = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            batch = consumer.poll(timeout_ms=max(1, min(500, int((deadline - now) * 1000))))
            got = 0
            for tp_records in batch.values():
                for r in tp_records:
                    out.append(ConsumedRecord(r.topic, r.partition, r.offset, r.key, r.value))
                    got += 1
            now = time.monotonic()
            if got:
                last_new = now
            done_waiting = (expect is not None and len(out) >= expect) or now - last_new >= quiet_s
            if done_waiting:
                ends = consumer.end_offsets(tps)
                if all(consumer.position(tp) >= ends[tp] for tp in tps):
                    break
    finally:
        consumer.close(autocommit=False)
    out.sort(key=lambda r: (r.partition, r.offset))
    return out


# ------------------------------------------------------------------------------------ CLI body


def count_data_lines(path: str | Path, chunk: int = 1 << 20) -> int:
    """Data lines in a CSV (newlines, plus an unterminated last line, minus the header): a fast
    binary scan used as the progress bar's total."""
    n, last = 0, b"\n"
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            n += block.count(b"\n")
            last = block[-1:]
    if last != b"\n":
        n += 1
    return max(0, n - 1)


def produce_command(file: str | Path, topic: str | None, settings: Settings) -> ProduceSummary:
    """``auditflow produce --from FILE --topic T``: produce with a progress bar, print the counts."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console()
    topic = topic or settings.topic_transactions
    total = count_data_lines(file)
    with Progress(
        TextColumn("[bold]produce[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TextColumn("dlq {task.fields[dlq]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as bar:
        task = bar.add_task(escape(f"{Path(file).name} -> {topic}"), total=total or None, rate="", dlq=0)
        t0 = time.perf_counter()

        def on_progress(read: int, sent: int, dead: int) -> None:
            dt = time.perf_counter() - t0
            bar.update(task, completed=read, dlq=dead, rate=f"{read / dt:,.0f} rows/s" if dt > 0 else "")

        summary = produce_file(file, settings, topic=topic, progress=on_progress)
        bar.update(task, total=summary.read, completed=summary.read)
    console.print(
        f"[green]produced[/] {summary.produced} events to [bold]{escape(summary.topic)}[/] "
        f"(partitions {', '.join(f'{p}: {n}' for p, n in summary.partitions.items()) or '-'}), "
        f"{summary.dead_lettered} dead-lettered to [bold]{escape(summary.dlq_topic)}[/]; "
        f"{summary.read} rows read in {summary.elapsed_s:.2f} s ({summary.events_per_s:,.0f} events/s)",
        soft_wrap=True,
    )
    return summary
