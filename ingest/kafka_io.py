"""Kafka at the pipeline's edge: topics, the CSV producer with its dead-letter queue, a test consumer.

* :func:`ensure_topics` creates topics with explicit partition counts (replication 1 locally),
  is idempotent, and refuses a topic that exists with a different partition count.
* :func:`produce_file` streams an AMLworld transactions CSV (never loaded whole) into the topic
  of its :class:`ProducerOptions`: key = the sender's ``node_id`` (``BANK/ACCOUNT``, UTF-8), value =
  :meth:`TransactionEvent.to_wire` (UTF-8), the compact comma-separated "af1" form the stream job
  decodes in the JVM (:data:`~auditflow.records.WIRE_FIELDS`: event time in epoch ms, money as
  integer units plus exact US cents; :meth:`TransactionEvent.from_wire` decodes it). Rows that do
  not parse are not lost: each goes to the options' ``dlq_topic`` as the JSON of a
  :class:`RejectedRecord` with ``stage='ingest'``, ``source`` = the file path and ``offset`` = its
  line number (header = line 1); a dead letter keeps at most the first 4 KiB of its line (with
  the line's length and SHA-256, base64 if it is not UTF-8), so it stays far below the broker's
  1 MiB request limit whatever the line. Lines come from the one line reader
  (:func:`ingest.amlworld.read_lines`: the importer's and the file job's too), so line numbers and
  event ids are theirs; amounts are capped per currency (so units and US cents fit the form's
  18-digit integers) and timestamps must lie in the options' ``time_window``. A row that still
  had no faithful wire form would be dead-lettered too (reason "not representable in the af1
  wire form"), so every value on the topic decodes back to its row. The producer is
  idempotent with ``acks='all'`` (per-key order kept: one partition per key, murmur2 like the Java
  client); every record is acknowledged before it returns, and ``read == produced + dead_lettered``
  is checked (:class:`ProduceError` otherwise, also for any record the broker refused).
  It resumes (see "resume" below): rows go in Kafka transactions of
  :data:`RESUME_CHUNK_ROWS`, each with a progress record, so a run started again after a crash
  goes on after the last committed row and read_committed readers get every row exactly once.
* Throughput (``bench/produce.py``): the client is confluent-kafka (librdkafka: batching, lz4,
  linger and the network on its own threads, ~3 us of Python per record; kafka-python, pure
  Python, spent ~70 us a record in the client: ~11k events/s here at best), and rows go from CSV
  line to key/value bytes through :func:`wire_records`, byte-identical to the codec +
  ``to_wire`` path (:func:`~ingest.amlworld.parse_line`, then :meth:`TransactionEvent.to_wire`)
  at ~5 us a row instead of ~20 us; it checks itself against that path at import and switches
  itself off (every row on the reference path) if they ever differ. Together >100k events/s on
  2 cores.
* :func:`produce_raw` sends raw bytes (tests use it to inject malformed records).
* :func:`consume_all` reads a whole topic by manual assignment (no consumer group, nothing
  committed) and returns :class:`ConsumedRecord`\\ s sorted by (partition, offset). It and the
  topic admin stay on kafka-python.
* :func:`count_data_lines` counts a CSV's data lines fast (the ``auditflow produce`` progress
  bar's total).

Record timestamps are left to the producer (wall clock): stamping records with the 2022 event
time would put them behind the broker's time-based retention at once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from auditflow.errors import FieldError
from auditflow.limits import DEFAULT_EVENT_TIME_WINDOW
from auditflow.money import CURRENCIES, MAX_UNIT_DIGITS, USD_CENT_FACTORS, Money, round_half_even
from auditflow.records import PAYMENT_FORMATS, WIRE_TAG, RejectedRecord, TransactionEvent, epoch_millis
from ingest.amlworld import (
    TimeWindow,
    _parse_timestamp,
    check_line,
    decode_line,
    event_id_for,
    parse_line,
    read_lines,
)

__all__ = [
    "ConsumedRecord",
    "DEFAULT_CLIENT",
    "ProduceError",
    "ProduceSummary",
    "ProducerOptions",
    "TopicPartitionMismatch",
    "consume_all",
    "count_data_lines",
    "delete_topics",
    "ensure_topics",
    "produce_file",
    "produce_raw",
    "producer_config",
    "wire_record",
    "wire_records",
]

DLQ_STAGE = "ingest"

#: The producer client :func:`produce_file` uses (named in its summary).
DEFAULT_CLIENT = "confluent-kafka"

# Throughput tuning for confluent-kafka (librdkafka), measured with bench/produce.py on this
# 2-core box with the broker on it: lz4 costs little CPU on librdkafka's own thread and cuts the
# broker's work (bytes to write and replicate-check) by ~2x on the af1 records (~4x on the JSON
# they replaced); 20 ms of linger fills batches of thousands of records (one ack per batch)
# without holding one long.
RDKAFKA_TUNING: dict[str, Any] = {
    "linger.ms": 20,
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,  # bytes per partition batch, under the broker's message.max.bytes (1 MiB)
    "compression.type": "lz4",
    "max.in.flight.requests.per.connection": 5,  # the most idempotence allows
}
POLL_EVERY = 1000  # rows between confluent-kafka poll(0) calls (serve delivery reports)

_log = logging.getLogger(__name__)

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


def _rd_config(bootstrap: str, config: dict[str, Any] | None) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, **(config or {}), "logger": logging.getLogger("ingest.kafka_io.librdkafka")}


def _partitions(admin, topic: str) -> list[int]:
    meta = admin.list_topics(topic, timeout=30).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise LookupError(f"topic {topic!r} does not exist (see ensure_topics)")
    return sorted(meta.partitions)


def stable_end_offsets(bootstrap: str, topic: str, config: dict[str, Any] | None = None) -> dict[int, int]:
    """The offset after the last record a read_committed reader of ``topic`` can see now, per
    partition (the last stable offset: records of transactions still open lie beyond it).
    ``config``: further client properties (security)."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(_rd_config(bootstrap, config))
    tps = {TopicPartition(topic, p): OffsetSpec.latest() for p in _partitions(admin, topic)}
    futures = admin.list_offsets(tps, isolation_level=IsolationLevel.READ_COMMITTED)
    return {tp.partition: f.result(30).offset for tp, f in futures.items()}


def _retrying(call: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    """``call()``, again while it fails with a retriable Kafka error (a group coordinator not
    ready yet on a fresh broker: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), for up to ``timeout_s``."""
    from confluent_kafka import KafkaError, KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except KafkaException as e:
            err = e.args[0] if e.args else None
            transient = hasattr(err, "code") and (err.retriable() or err.code() in (
                KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                KafkaError.COORDINATOR_NOT_AVAILABLE))
            if not transient or time.monotonic() >= deadline:
                raise ProduceError(f"{what}: {err}") from e
            time.sleep(0.5)


def committed_offsets(bootstrap: str, group: str, topic: str,
                      config: dict[str, Any] | None = None) -> dict[int, int]:
    """The offsets ``group`` committed on ``topic``'s partitions (partitions without one left out)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**_rd_config(bootstrap, config), "group.id": group, "enable.auto.commit": False})
    try:
        parts = _partitions(consumer, topic)
        got = _retrying(lambda: consumer.committed([TopicPartition(topic, p) for p in parts], timeout=30),
                        f"committed offsets of group {group!r} on {topic!r}")
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def commit_offsets_at_least(bootstrap: str, group: str, topic: str, offsets: dict[int, int],
                            config: dict[str, Any] | None = None) -> dict[int, int]:
    """Make ``group``'s committed offsets on ``topic`` at least ``offsets`` (partition -> the next
    offset to read): partitions where the group is behind are committed forward, none moved back.
    For a group no running consumer holds (a finished bounded job's). Returns what it committed."""
    from confluent_kafka import Consumer, TopicPartition

    have = committed_offsets(bootstrap, group, topic, config)
    behind = {p: o for p, o in sorted(offsets.items()) if have.get(p, -1) < o}
    if behind:
        consumer = Consumer({**_rd_config(bootstrap, config), "group.id": group, "enable.auto.commit": False})
        try:
            _retrying(lambda: consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in behind.items()],
                                              asynchronous=False),
                      f"committing group {group!r} on {topic!r}")
        finally:
            consumer.close()
    return behind


def _partition_counts(admin, names: Sequence[str]) -> dict[str, int]:
    """Partition count per existing topic among ``names`` (missing topics are left out)."""
    out: dict[str, int] = {}
    for t in admin.describe_topics(list(names)):
        if t.get("error_code", 0) == 0 and t.get("partitions"):
            out[t["name"]] = len(t["partitions"])
    return out


def ensure_topics(
    bootstrap: str, topics: dict[str, int], *, replication_factor: int = 1, timeout_s: float = 30.0,
    configs: dict[str, dict[str, str]] | None = None,
) -> dict[str, str]:
    """Make sure every topic exists with exactly the given partition count.

    Creates the missing ones (replication ``replication_factor``) and waits until every partition
    has a leader. Idempotent; safe against a concurrent creator. Returns ``{topic: "created" |
    "exists"}``. Raises :class:`TopicPartitionMismatch` if a topic exists with another partition
    count (often: auto-created with the broker default by a client that wrote to it first).
    ``configs``: topic settings for the ones it creates (``{topic: {"cleanup.policy": "compact"}}``).
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
                {t: {"num_partitions": n, "replication_factor": replication_factor,
                     **({"configs": configs[t]} if configs and t in configs else {})} for t, n in missing.items()},
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
    counts = _partition_counts_of(bootstrap, topics)
    missing = [t for t in topics if t not in counts]
    if missing:
        raise LookupError(f"topic(s) {', '.join(map(repr, missing))} do not exist at {bootstrap} (see ensure_topics)")
    return counts


def delete_topics(bootstrap: str, topics: Iterable[str], *, timeout_s: float = 30.0) -> None:
    """Delete the topics that exist (missing ones are ignored), with the producer progress topic
    of each (:func:`progress_topic`), and wait until the broker no longer lists them, so that
    re-creating one of the same name right after works."""
    from kafka.errors import KafkaTimeoutError

    admin = _admin(bootstrap)
    try:
        wanted = {n for t in topics for n in (t, progress_topic(t))}
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


# ------------------------------------------------------------------------------------ wire encoding
#
# Producing is CPU-bound in Python: the reference path (parse_line -> TransactionEvent ->
# to_wire) costs ~20 us a row, more than the whole budget at 50k events/s. The fast path below
# goes from a CSV line straight to the key and the value bytes, *byte-identical* to
# ``ev.sender.node_id.encode()`` and ``ev.to_wire().encode()`` of the event parse_line would
# return (the af1 form of auditflow.records: epoch-ms event time, integer money units, exact US
# cents). It takes the lines of the one line reader (no line end, no control character) it can
# prove plain: ASCII, eleven unpadded fields that pass every check of parse_row (ids by the id
# pattern, the timestamp in the plausible window, amounts within the cap: see _AMOUNTS; their
# US cents by auditflow.money's rate table and rounding); any other line goes through parse_line
# and to_wire themselves, which accept it or reject it, so validation and rejects are the
# codec's own. One check is added there: the value must decode back (from_wire) to the event,
# or the row is dead-lettered instead (see _unwireable; with the amount cap it is a safety net).

_FORMATS = frozenset(PAYMENT_FORMATS)
_WIRE_PREFIX = WIRE_TAG + ","
_TS_WIRE: dict[str, tuple[str, int]] = {}  # AMLworld timestamp text -> epoch ms as text and int (valid ones only)
#: The four ids after a 16-character timestamp and its comma, each by records.ID_PATTERN.
_IDS4 = re.compile(r"(?:[A-Za-z0-9_.:-]{1,64},){4}")
_TS_WIRE_MAX = 1 << 17  # distinct minutes cached (~90 days); cleared beyond
_AMOUNT_MAX_LEN = 40  # longer amounts take the reference path (int() digit limits and all)
_WIRE_INT_DIGITS = 18  # from_wire's integers have at most this many digits (records._WIRE_INT)


#: Per currency: (scale, the most digits of units the fast path takes: the parser's cap,
#: :data:`auditflow.money.MAX_UNIT_DIGITS`, within the wire form's integers, then the numerator and
#: denominator of its US cents per unit: :data:`auditflow.money.USD_CENT_FACTORS`). Cents are
#: ``round_half_even(units * numerator, denominator)``, as :func:`auditflow.money.usd_cents` computes
#: them (the money module's one rate table and rounding rule), without making a Money on this hot
#: path. Larger amounts take the reference path, which rejects them.
_AMOUNTS: dict[str, tuple[int, int, int, int]] = {
    name: (scale, min(_WIRE_INT_DIGITS, MAX_UNIT_DIGITS[name]), *USD_CENT_FACTORS[name])
    for name, (_, scale) in CURRENCIES.items()
}


def _fast_units(text: str, scale: int) -> str | None:
    """``str(parse_amount(text, currency).units)`` for a plain ``digits[.digits]`` amount of an
    ASCII line (``scale``: the currency's), or None (then the reference path decides)."""
    whole, dot, frac = text.partition(".")
    if not whole.isdigit() or len(text) > _AMOUNT_MAX_LEN:
        return None
    if dot:
        if not frac.isdigit():
            return None
        frac = frac.rstrip("0")
        if len(frac) > scale:
            return None
    return (whole + frac.ljust(scale, "0")).lstrip("0") or "0"  # frac is "" without a point


_WINDOW_MS = tuple(epoch_millis(t) for t in DEFAULT_EVENT_TIME_WINDOW)


def _fast_wire(raw: str, lineno: int, window_ms: tuple[int, int] = _WINDOW_MS) -> tuple[bytes, bytes] | None:
    """(key, value) of a plain, valid line, or None. ``raw``: a line as the line reader (or
    check_line) lets it through: no line end, no control character. ``window_ms``: the plausible
    event-time window in epoch ms (from inclusive, to exclusive).

    Every field is checked against exactly what parse_row accepts, without its padding: a
    timestamp of 16 characters, ids by the id pattern, plain ASCII amounts, the currency, format
    and label vocabularies; so no field can hold a quote, backslash, percent sign (the wire form's
    escape) or space the reference path would treat differently, and none needs the csv module."""
    if not raw.isascii():  # e.g. non-ASCII digits, which str.isdigit accepts and the parser does not
        return None
    fields = raw.split(",")
    if len(fields) != 11 or len(fields[0]) != 16:  # 16: an unpadded timestamp (the parser strips padding)
        return None
    ts, from_bank, from_acct, to_bank, to_acct, recv, recv_cur, paid, paid_cur, fmt, label = fields
    hit = _TS_WIRE.get(ts)
    if hit is None:
        try:
            ms = epoch_millis(_parse_timestamp(ts))
        except FieldError:
            return None
        if len(_TS_WIRE) >= _TS_WIRE_MAX:
            _TS_WIRE.clear()
        hit = _TS_WIRE[ts] = (str(ms), ms)
    ts_ms, ms = hit
    if not window_ms[0] <= ms < window_ms[1] or _IDS4.match(raw, 17) is None:  # a valid timestamp has 16 characters
        return None
    if fmt not in _FORMATS or label not in ("0", "1"):
        return None
    recv_c = _AMOUNTS.get(recv_cur)
    paid_c = _AMOUNTS.get(paid_cur)
    if recv_c is None or paid_c is None:
        return None
    recv_units = _fast_units(recv, recv_c[0])
    paid_units = _fast_units(paid, paid_c[0])
    if recv_units is None or paid_units is None or len(recv_units) > recv_c[1] or len(paid_units) > paid_c[1]:
        return None
    recv_cents = str(round_half_even(int(recv_units) * recv_c[2], recv_c[3]))
    paid_cents = str(round_half_even(int(paid_units) * paid_c[2], paid_c[3]))
    if len(recv_cents) > _WIRE_INT_DIGITS or len(paid_cents) > _WIRE_INT_DIGITS:
        return None
    event_id = event_id_for(fields, lineno)  # the fields carry no padding: parse_row's stripped ones
    value = (
        f"{_WIRE_PREFIX}{event_id},{ts_ms},{lineno},{from_bank},{from_acct},{to_bank},{to_acct},"
        f"{paid_units},{paid_cur},{recv_units},{recv_cur},{paid_cents},{recv_cents},{fmt},{label}"
    )
    return f"{from_bank}/{from_acct}".encode(), value.encode()


def _exact_amount_text(m: Money) -> str:
    """The amount as an exact decimal string, however many digits (no decimal context involved)."""
    s = str(m.units)
    if not m.scale:
        return s
    s = s.rjust(m.scale + 1, "0")
    return f"{s[: -m.scale]}.{s[-m.scale :]}"


#: from_wire's field -> the CSV column it comes from (for the reject of an unwireable row).
_WIRE_COLUMNS = {
    "ts_ms": "Timestamp", "paid_units": "Amount Paid", "paid_usd_cents": "Amount Paid",
    "received_units": "Amount Received", "received_usd_cents": "Amount Received",
}


def _unwireable(ev: TransactionEvent, raw: str, source: str, error: FieldError | None) -> RejectedRecord:
    """The reject of a valid row whose event has no faithful wire form: ``from_wire`` refused the
    value (``error`` its FieldError: e.g. units or cents beyond its 18-digit integers), or
    (``error`` None) it decoded to another event."""
    reason = f"not representable in the {WIRE_TAG} wire form"
    if error is not None:
        column = _WIRE_COLUMNS.get(error.field, "row")
        m = {"Amount Paid": ev.amount_paid, "Amount Received": ev.amount_received}.get(column)
        value = _exact_amount_text(m) if m is not None else raw[:80]
        return RejectedRecord(source, ev.source_offset, raw, column, value,
                              f"{reason}: {error.field} {str(error.value)[:40]!r}: {error.reason}")
    return RejectedRecord(source, ev.source_offset, raw, "row", raw[:80], f"{reason}: it does not decode back to the row")


def _reference_record(line: str | bytes, lineno: int, source: str,
                      time_window: TimeWindow = DEFAULT_EVENT_TIME_WINDOW) -> tuple[bytes, bytes] | RejectedRecord:
    """What read_transactions makes of the line, as (key, to_wire value) or its reject; an event
    whose value would not decode back to it (from_wire) is rejected too (:func:`_unwireable`)."""
    item = parse_line(line, lineno, source, time_window=time_window)
    if type(item) is TransactionEvent:
        try:
            value = item.to_wire()
            ok = TransactionEvent.from_wire(value) == item
        except FieldError as e:  # from_wire's
            return _unwireable(item, _line_text(line), source, e)
        if not ok:  # pragma: no cover - to_wire and from_wire disagree
            return _unwireable(item, _line_text(line), source, None)
        return item.sender.node_id.encode(), value.encode()
    return item


def _line_text(line: str | bytes) -> str:
    """The text of a line parse_line accepted (so: UTF-8 if bytes), without its line end."""
    text = line.decode("utf-8") if isinstance(line, bytes) else line
    if text[-1:] == "\n":
        text = text[:-1]
    return text[:-1] if text[-1:] == "\r" else text


def _window_ms(time_window: TimeWindow) -> tuple[int, int]:
    return _WINDOW_MS if time_window == DEFAULT_EVENT_TIME_WINDOW else (
        epoch_millis(time_window[0]), epoch_millis(time_window[1]))


def wire_record(line: str | bytes, lineno: int, source: str = "", *,
                time_window: TimeWindow = DEFAULT_EVENT_TIME_WINDOW) -> tuple[bytes, bytes] | RejectedRecord:
    """One CSV line (text or bytes, with or without its line end; ``lineno``: its line number,
    header = 1) as the producer sends it: the (key, value) bytes of its event, or the
    :class:`RejectedRecord` read_transactions would give at that line."""
    text = decode_line(line, lineno, source) if isinstance(line, bytes) else check_line(
        _line_text(line), lineno, source)
    if type(text) is not str:
        return text
    if _FAST_WIRE:
        kv = _fast_wire(text, lineno, _window_ms(time_window))
        if kv is not None:
            return kv
    return _reference_record(text, lineno, source, time_window)


def wire_records(file: str | Path | BinaryIO, *, source: str | None = None,
                 time_window: TimeWindow = DEFAULT_EVENT_TIME_WINDOW,
                 skip: int = 0) -> Iterator[tuple[bytes, bytes] | RejectedRecord]:
    """Stream a transactions CSV (a path or a binary file) as :func:`wire_record` items, in file
    order, one per data line: the lines of :func:`~ingest.amlworld.read_lines`, the reader
    read_transactions uses (same header check, line numbers, rejects). ``skip``: leave out the
    first ``skip`` data lines (read, not encoded: a resumed producer's committed lines)."""
    if source is None:
        source = str(file) if isinstance(file, (str, Path)) else ""
    if skip < 0:
        raise ValueError(f"skip must be >= 0, got {skip}")
    fast = _fast_wire if _FAST_WIRE else None
    window_ms = _window_ms(time_window)
    lines = read_lines(file, source)
    if skip:
        next(itertools.islice(lines, skip - 1, skip), None)
    for lineno, text in lines:
        if type(text) is not str:
            yield text
            continue
        if fast is not None:
            kv = fast(text, lineno, window_ms)
            if kv is not None:
                yield kv
                continue
        yield _reference_record(text, lineno, source, time_window)


def _ties(mult: int, div: int) -> list[int]:
    """Two unit counts whose cents fall exactly half-way (one rounding down to even, one up), if any."""
    half, g = div // 2, math.gcd(mult, div)
    if div % 2 or half % g:
        return []
    step = div // g
    u = (half // g) * pow(mult // g, -1, step) % step if step > 1 else 0
    return [u, u + step]


def _probe_lines() -> list[tuple[str, bool]]:
    """(line, must the fast path take it) for the self-check: the layouts the fast path takes
    (leading zeros, trailing decimal zeros, Bitcoin digits, leap day, before the epoch), and for
    every currency amounts from 0 and the smallest unit up to 16-digit units, ties of the
    half-even rounding; then some it may leave to the reference path (the largest units and
    cents it takes and one digit more, a percent sign to escape), which must then agree too."""
    probes = [
        ("2022/09/01 00:20,010,8000EBD30,010,8000EBD30,3697.34,US Dollar,3697.3,US Dollar,Reinvestment,0", True),
        ("2022/09/01 00:16,00220,8001C8C51,01420,8003093C1,0.025852,Bitcoin,000.00000001,Bitcoin,Bitcoin,1", True),
        ("2024/02/29 23:59,0,1,2,3,7,Yen,0007.10,Euro,Credit Card,0", True),
        ("1970/01/01 00:00,1,2,1,2,0.50,Euro,1.50,Euro,Wire,1", True),  # 58.5 -> 58 and 175.5 -> 176 cents
        ("2099/12/31 23:59,A.b_c:d-9,2,1,2,0.0,Yen,0.01,Rupee,Cash,0", True),  # the window's last minute, id characters
        ("1969/12/31 23:59,1,2,1,2,0.0,Yen,0.01,Rupee,Cash,0", False),  # before the window: rejected
        ("2100/01/01 00:00,1,2,1,2,0.0,Yen,0.01,Rupee,Cash,0", False),  # its end is exclusive
        ("2022/09/01 00:20,01/0,X,1,2,1.00,Euro,1.00,Euro,Wire,0", False),  # '/' in an id: rejected
        ("2022/09/01 00:20,0%1,A%2C,1,2,1.00,Euro,1.00,Euro,Wire,0", False),  # '%' in an id: rejected
        ("2022/09/01 00:20,1," + "A" * 65 + ",1,2,1.00,Euro,1.00,Euro,Wire,0", False),  # an id too long
    ]
    for i, (cur, (_, max_digits, num, den)) in enumerate(sorted(_AMOUNTS.items())):
        line = f"2022/09/0{1 + i % 9} 1{i % 10}:0{i % 10},0{i},A{i},{i}0,B{i},{{}},{cur},{{}},{cur},"
        line += f"{PAYMENT_FORMATS[i % len(PAYMENT_FORMATS)]},{i % 2}"
        for units, must in (
            ([0, 1, 5, 50, 150, 12345678, 10**15 + 5, 10**16 - 1, *_ties(num, den)], True),
            ([10**max_digits - 1, 10**max_digits, 10**_WIRE_INT_DIGITS - 1, 1], False),
        ):
            amounts = [_exact_amount_text(Money(cur, u)) for u in units]
            probes += [(line.format(a, b), must) for a, b in zip(amounts, reversed(amounts))]
    return probes


def _check_fast_wire() -> bool:
    """Whether the fast path reproduces the reference bytes on every probe line it takes, and
    takes those it must (if the wire form in auditflow.records or the codec change in a way it
    does not follow, it switches itself off and every row takes the reference path: slower,
    never different)."""
    try:
        ok = True
        for n, (line, must) in enumerate(_probe_lines(), 2):
            got = _fast_wire(line, n)
            if got is None:
                ok = ok and not must
            else:
                ok = ok and got == _reference_record(line, n, "")
    except Exception:  # pragma: no cover - a changed record layout: stay on the reference path
        ok = False
    finally:
        _TS_WIRE.clear()
    return ok


_FAST_WIRE = _check_fast_wire()
if not _FAST_WIRE:  # pragma: no cover
    logging.getLogger(__name__).warning("fast wire encoding disabled: it no longer matches TransactionEvent.to_wire")


# ------------------------------------------------------------------------------------ produce


def producer_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    """The producer settings used here (confluent-kafka's key names): idempotent, ``acks='all'``,
    keys partitioned with murmur2 (the Java client's partitioner, so Flink and any other producer
    put a sender on the same partition), batched and compressed for throughput."""
    return {
        "bootstrap.servers": bootstrap,
        "client.id": "auditflow-producer",
        "acks": "all",
        "enable.idempotence": True,  # per-partition order kept across retries, no duplicates
        "partitioner": "murmur2_random",  # librdkafka's default (crc32) would differ from Java's
        "allow.auto.create.topics": False,  # ensure_topics decides partition counts
        "logger": logging.getLogger("ingest.kafka_io.librdkafka"),
        **RDKAFKA_TUNING,
        **overrides,
    }


class _Acks:
    """Counts acknowledgements per (topic, partition) and keeps the first failure (confluent-kafka
    runs the delivery reports inside poll()/flush(), on the caller's thread)."""

    def __init__(self) -> None:
        self.by_partition: dict[tuple[str, int], int] = {}
        self.failed = 0
        self.first_error: BaseException | None = None

    def delivered(self, err, msg) -> None:  # confluent-kafka delivery report (caller's thread)
        if err is None:
            k = (msg.topic(), msg.partition())
            bp = self.by_partition
            bp[k] = bp.get(k, 0) + 1
        else:
            self.failed += 1
            if self.first_error is None:
                self.first_error = _KafkaDeliveryError(err, msg)

    def acknowledged(self, topic: str) -> int:
        return sum(n for (t, _), n in self.by_partition.items() if t == topic)


class _KafkaDeliveryError(RuntimeError):
    def __init__(self, err, msg=None) -> None:
        where = f" ({msg.topic()}[{msg.partition()}])" if msg is not None else ""
        super().__init__(f"{err.str() if hasattr(err, 'str') else err}{where}")
        self.kafka_error = err


# ------------------------------------------------------------------------------------ resume
#
# A resumable produce sends the file in Kafka transactions of RESUME_CHUNK_ROWS data lines each
# (their events and their dead letters), and writes, inside the same transaction, one record to
# the topic's progress topic (compacted, one partition): key = the file's resolved path, value =
# a ProduceProgress (data lines committed so far, their counts, the topic's id and a fingerprint
# of the file's head). A chunk's records and its progress become visible to read_committed
# readers together or not at all. A restart uses the same transactional.id (derived from topic
# and file): init_transactions fences a producer still alive with it and aborts its open
# transaction; then the last committed progress says where to go on. So after a crash every
# line reaches the topics exactly once (read_committed; the stream job's source reads so).

#: Data lines per transaction of a resumable produce (bench/produce.py measures the cost).
RESUME_CHUNK_ROWS = 50_000
#: Bytes at the start of a file whose SHA-256 identifies it on resume.
HEAD_BYTES = 1 << 20
PROGRESS_SUFFIX = ".progress"
PROGRESS_SCHEMA = "auditflow.produce_progress/1"
#: How long an open transaction of a producer that died holds back read_committed readers at
#: most, if no restart aborts it first (the broker aborts it then).
TRANSACTION_TIMEOUT_MS = 60_000


def progress_topic(topic: str) -> str:
    """The compacted topic where a resumable produce into ``topic`` records what it committed."""
    return topic + PROGRESS_SUFFIX


@dataclass(frozen=True, slots=True)
class ProduceProgress:
    """What resumable :func:`produce_file` runs committed of one file to one topic."""

    file: str  # resolved path: the record's key
    topic: str
    topic_id: str  # the topic's Kafka id: a topic deleted and made again starts afresh
    rows: int  # data lines committed (their events and dead letters), from the first one
    events: int
    dead_letters: int
    head_bytes: int  # the file's first head_bytes bytes ...
    head_sha256: str  # ... hash to this
    complete: bool  # the run that wrote it reached the end of the file

    def to_json(self) -> bytes:
        return json.dumps({"schema": PROGRESS_SCHEMA, **dataclasses.asdict(self)},
                          sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, value: bytes) -> ProduceProgress:
        d = json.loads(value)
        if d.pop("schema", None) != PROGRESS_SCHEMA:
            raise ValueError(f"not a {PROGRESS_SCHEMA} record")
        return cls(**d)


def _file_head(path: Path, limit: int) -> tuple[int, str]:
    """(bytes hashed, SHA-256 hex) of the first ``limit`` bytes of ``path`` (fewer if shorter)."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as fh:
        while n < limit and (block := fh.read(min(1 << 16, limit - n))):
            h.update(block)
            n += len(block)
    return n, h.hexdigest()


def _topic_id(bootstrap: str, topic: str) -> str:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": logging.getLogger("ingest.kafka_io.librdkafka")})
    return str(admin.describe_topics(TopicCollection([topic]))[topic].result(30).topic_id)


def transactional_id(topic: str, file: str) -> str:
    """The transactional.id of resumable runs of ``file`` (resolved path) into ``topic``: stable,
    so a restart fences the run before it and aborts what it left open."""
    return "auditflow-produce-" + hashlib.sha256(f"{topic}\0{file}".encode()).hexdigest()[:24]


def read_progress(bootstrap: str, topic: str, file: str | Path, timeout_s: float = 90.0) -> ProduceProgress | None:
    """The last committed progress of ``file`` into ``topic`` (None if there is none).

    It reads the progress topic read_committed up to its high watermark as of the call, so it
    waits for transactions open at that moment (other files' runs into the same topic) to end:
    one of them may lie before this file's last committed record, and a read_committed reader
    stops at the first open transaction. ``ProduceError`` if that takes over ``timeout_s``
    (beyond the transaction timeout the broker aborts such a transaction itself)."""
    from confluent_kafka import Consumer, IsolationLevel, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    ptopic = progress_topic(topic)
    if ptopic not in _partition_counts_of(bootstrap, [ptopic]):
        return None
    key = str(Path(file).resolve()).encode()
    quiet = logging.getLogger("ingest.kafka_io.librdkafka")
    tp = TopicPartition(ptopic, 0)
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
    hw = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_UNCOMMITTED)[tp].result(30).offset
    if hw <= 0:
        return None
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"auditflow-progress-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
        "logger": quiet,
    })
    last = None
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(ptopic, 0, 0)])
        while True:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                if msg.key() == key and msg.value() is not None:
                    last = msg.value()
                continue
            if msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                raise ProduceError(f"reading {ptopic!r}: {msg.error().str()}")
            if consumer.position([tp])[0].offset >= hw:
                break
            if time.monotonic() >= deadline:
                raise ProduceError(f"{ptopic!r}: a transaction open for over {timeout_s:.0f} s holds back its "
                                   "committed progress records")
    finally:
        consumer.close()
    return None if last is None else ProduceProgress.from_json(last)


def _partition_counts_of(bootstrap: str, names: Sequence[str]) -> dict[str, int]:
    admin = _admin(bootstrap)
    try:
        return _partition_counts(admin, list(names))
    finally:
        admin.close()


@dataclass(slots=True)
class _Resume:
    """One resumable run: where it starts and what it writes after each transaction."""

    file: str
    topic: str
    topic_id: str
    head: tuple[int, str]
    skip: int = 0  # data lines committed by earlier runs
    events: int = 0  # ... and their counts
    dead_letters: int = 0

    def record(self, rows: int, events: int, dead: int, complete: bool) -> bytes:
        return ProduceProgress(self.file, self.topic, self.topic_id, self.skip + rows, self.events + events,
                               self.dead_letters + dead, self.head[0], self.head[1], complete).to_json()


def _plan_resume(bootstrap: str, topic: str, path: Path, restart: bool) -> _Resume:
    """Where a resumable run of ``path`` into ``topic`` starts: after the committed progress,
    unless ``restart``, the topic was made again since, or there is none. A file whose head no
    longer matches the progress raises ProduceError (it is not the file that was sent)."""
    file = str(path.resolve())
    run = _Resume(file, topic, _topic_id(bootstrap, topic), _file_head(path, HEAD_BYTES))
    prev = None if restart else read_progress(bootstrap, topic, file)
    if prev is None:
        return run
    if prev.topic_id != run.topic_id:
        _log.warning("%s: progress recorded for an earlier topic %r (id %s, now %s): sending from the start",
                     file, topic, prev.topic_id, run.topic_id)
        return run
    if _file_head(path, prev.head_bytes) != (prev.head_bytes, prev.head_sha256):
        raise ProduceError(
            f"{path}: its first {prev.head_bytes} bytes differ from the file whose first {prev.rows} data "
            f"lines were committed to {topic!r}: not the same file, so it cannot resume (to send it from the "
            f"start anyway: restart)")
    run.skip, run.events, run.dead_letters = prev.rows, prev.events, prev.dead_letters
    return run


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
    client: str = DEFAULT_CLIENT
    skipped: int = 0  # data lines committed by earlier runs (resume): not read into counts, not sent
    resumable: bool = False  # sent in transactions with progress records

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
        resumed = f" (after {self.skipped} rows committed earlier)" if self.skipped else ""
        return (
            f"{self.source}: {self.read} rows read{resumed}, {self.produced} events -> {self.topic}, "
            f"{self.dead_lettered} dead-lettered -> {self.dlq_topic} in {self.elapsed_s:.2f} s "
            f"({self.events_per_s:,.0f} events/s)"
        )


def _raise_if_failed(acks: _Acks, where: str) -> None:
    if acks.failed:
        raise ProduceError(f"{acks.failed} record(s) not acknowledged {where}: {acks.first_error!r}") from acks.first_error


@dataclass(frozen=True, slots=True)
class ProducerOptions:
    """Where :func:`produce_file` sends a transactions file: the broker (``host:port``), the topic
    of its events and the dead-letter topic of its rejects (both made with ``partitions``
    partitions where it creates them), and the plausible event-time window a row's timestamp must
    lie in (from inclusive, to exclusive; rows outside it are dead-lettered)."""

    bootstrap: str
    topic: str
    dlq_topic: str
    partitions: int
    time_window: TimeWindow = DEFAULT_EVENT_TIME_WINDOW


def produce_file(
    csv_path: str | Path,
    options: ProducerOptions,
    progress: ProgressCallback | None = None,
    *,
    progress_every: int = 2000,
    max_unacked: int = 200_000,
    flush_timeout_s: float = 300.0,
    create_topics: bool = True,
    producer_overrides: dict[str, Any] | None = None,
    resume: bool = True,
    restart: bool = False,
    chunk_rows: int = RESUME_CHUNK_ROWS,
) -> ProduceSummary:
    """Stream ``csv_path`` into Kafka as ``options`` say; bad rows go to the DLQ. See the module
    docstring.

    With ``create_topics`` the topic and the DLQ topic are ensured with ``options.partitions``
    partitions first, without it both must exist (``LookupError`` otherwise, before anything is
    sent). ``progress(read, events_sent, dead_letters_sent)`` is called every ``progress_every``
    rows and once at the end. At most about ``max_unacked`` records wait for their
    acknowledgement at a time (memory stays bounded on multi-million-row files). A wrong header
    raises :class:`~auditflow.errors.FieldError` before any topic is made or anything is sent.
    ``producer_overrides`` use confluent-kafka's own setting names.

    ``resume``: send in transactions of ``chunk_rows`` data lines with a progress record each
    (see "resume" above), and start after the lines an earlier run of the same file into the same
    topic committed: after a crash, or once more after a complete run (nothing is sent again;
    lines appended since are). ``restart`` sends from the first line whatever was committed. The
    summary's counts are this run's; ``skipped`` the lines before.
    """
    if progress_every < 1:
        raise ValueError(f"progress_every must be positive, got {progress_every}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    source = str(csv_path)
    bootstrap, topic, dlq, window = options.bootstrap, options.topic, options.dlq_topic, options.time_window
    if topic == dlq:
        raise ValueError(f"topic and DLQ topic are both {topic!r}")
    rows = wire_records(csv_path, time_window=window)
    try:
        first = next(rows, None)  # opens the file, checks the header: fails before touching Kafka
        if create_topics:
            ensure_topics(bootstrap, {topic: options.partitions, dlq: options.partitions})
        else:
            _require_topics(bootstrap, [topic, dlq])
        config = producer_config(bootstrap, **(producer_overrides or {}))
        if resume:
            ensure_topics(bootstrap, {progress_topic(topic): 1},
                          configs={progress_topic(topic): {"cleanup.policy": "compact"}})
            config["transactional.id"] = transactional_id(topic, str(Path(csv_path).resolve()))
            config.setdefault("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
        items = _chain_first(first, rows) if first is not None else iter(())
        acks = _Acks()

        def start_after_committed() -> tuple[_Resume, Iterator]:
            """Called once the producer fenced any earlier one: the plan, and the items from there."""
            nonlocal rows
            start = _plan_resume(bootstrap, topic, Path(csv_path), restart)
            if not start.skip:
                return start, items
            rows.close()
            rows = wire_records(csv_path, time_window=window, skip=start.skip)
            return start, rows

        read, sent, dead, elapsed, plan = _send_confluent(
            items, topic, dlq, source, config, acks, progress, progress_every, max_unacked, flush_timeout_s,
            resume=start_after_committed if resume else None, chunk_rows=chunk_rows)
    finally:
        rows.close()
    _raise_if_failed(acks, f"by {bootstrap}")
    summary = ProduceSummary(source=source, topic=topic, dlq_topic=dlq, resumable=resume,
                             skipped=plan.skip if plan is not None else 0)
    summary.elapsed_s = elapsed
    summary.read = read
    summary.produced = acks.acknowledged(topic)
    summary.dead_lettered = acks.acknowledged(dlq)
    summary.partitions = {p: n for (t, p), n in sorted(acks.by_partition.items()) if t == topic}
    if progress is not None:
        progress(read, sent, dead)
    if (summary.produced, summary.dead_lettered) != (sent, dead) or read != summary.produced + summary.dead_lettered:
        raise ProduceError(
            f"counts do not add up: read {read}, sent {sent} + {dead}, acknowledged "
            f"{summary.produced} + {summary.dead_lettered}"
        )
    return summary


def _dead_letter(item: RejectedRecord, source: str) -> bytes:
    return dataclasses.replace(item, stage=DLQ_STAGE, source=source).to_json().encode()


def _send_confluent(items, topic, dlq, source, config, acks, progress, progress_every, max_unacked, flush_timeout_s,
                    *, resume=None, chunk_rows=RESUME_CHUNK_ROWS):
    """The send loop on confluent-kafka (librdkafka): ``produce()`` only enqueues (batching,
    compression, the network and retries run on librdkafka's threads, outside the GIL); delivery
    reports are served by ``poll()`` every :data:`POLL_EVERY` rows, and ``queue.buffering.max.messages``
    = ``max_unacked`` bounds the records enqueued but not yet reported (``BufferError`` beyond:
    then reports are served until there is room).

    With ``resume`` (a callable giving the :class:`_Resume` plan and the items to send, called
    after ``init_transactions`` has fenced any earlier producer of the same transactional.id and
    aborted its open transaction): one transaction per ``chunk_rows`` rows, each ending with its
    progress record."""
    from confluent_kafka import KafkaException, Producer

    fatal: list = []

    def on_error(err) -> None:  # client-level errors; a fatal one ends idempotent production
        if err.fatal():
            fatal.append(err)
        else:
            _log.warning("kafka producer: %s", err.str())

    def check() -> None:
        if fatal:
            raise ProduceError(f"fatal producer error: {fatal[0].str()}")
        _raise_if_failed(acks, "while producing")  # fail fast, e.g. records refused or timing out

    producer = Producer({
        "queue.buffering.max.messages": min(max(1, max_unacked), 2**31 - 1),
        **config,
        "on_delivery": acks.delivered,
        "error_cb": on_error,
    })
    produce, poll = producer.produce, producer.poll
    read = sent = dead = 0
    ok = False
    plan = None
    t0 = time.perf_counter()

    def send(t: str, value: bytes, key: bytes | None) -> None:
        """Enqueue one record; with max_unacked enqueued, serve reports until there is room."""
        try:
            produce(t, value, key)
        except BufferError:
            while True:
                poll(0.05)
                check()
                try:
                    produce(t, value, key)
                    return
                except BufferError:
                    continue

    def commit(complete: bool) -> None:
        """The chunk's progress record, then commit: the chunk becomes visible with it, or not at all."""
        send(progress_topic(topic), plan.record(read, sent, dead, complete), plan.file.encode())
        producer.commit_transaction(flush_timeout_s)
        check()

    try:
        if resume is not None:
            producer.init_transactions(flush_timeout_s)
            plan, items = resume()
            producer.begin_transaction()
        for item in items:
            read += 1
            if type(item) is tuple:
                t, value, key = topic, item[1], item[0]
                sent += 1
            else:
                t, value, key = dlq, _dead_letter(item, source), None
                dead += 1
            send(t, value, key)
            if read % POLL_EVERY == 0:
                poll(0)
            if read % progress_every == 0:
                poll(0)
                check()
                if progress is not None:
                    progress(read, sent, dead)
            if plan is not None and read % chunk_rows == 0:
                commit(False)
                producer.begin_transaction()
        if plan is not None:
            commit(True)
        left = producer.flush(flush_timeout_s)  # every delivery report is served after it
        elapsed = time.perf_counter() - t0
        if fatal:
            raise ProduceError(f"fatal producer error: {fatal[0].str()}")
        if left:
            raise ProduceError(f"{left} record(s) not acknowledged within {flush_timeout_s} s")
        ok = True
    except KafkaException as e:  # refused by the client (e.g. a record too large) or the transaction failed
        if plan is not None:  # a failed transaction refuses what follows: name what failed it
            poll(1.0)
            _raise_if_failed(acks, "in a transaction that had to be aborted")
            raise ProduceError(f"the transaction open after row {read} failed: {e}") from e
        raise ProduceError(f"row {read} refused by the producer: {e}") from e
    finally:
        if not ok:  # drop what is still queued (abort the open transaction), free the client
            if plan is not None:
                try:
                    producer.abort_transaction(10)
                except KafkaException:
                    pass
            else:
                producer.purge()
            producer.flush(5)
    return read, sent, dead, elapsed, plan


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
    from confluent_kafka import Producer

    if keys is not None and len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} values")
    _require_topics(bootstrap, [topic])
    out: list[tuple[int, int] | None] = [None] * len(values)
    errors: list[str] = []

    def report(i: int):
        def on_delivery(err, msg) -> None:
            if err is None:
                out[i] = (msg.partition(), msg.offset())
            else:
                errors.append(f"record {i}: {err.str()}")

        return on_delivery

    producer = Producer(producer_config(bootstrap, **{"client.id": "auditflow-raw", "linger.ms": 5}))
    for i, v in enumerate(values):
        producer.produce(topic, v, None if keys is None else keys[i], on_delivery=report(i))
        producer.poll(0)
    left = producer.flush(timeout_s)
    if errors or left:
        raise ProduceError(f"{len(errors) + left} record(s) not acknowledged by {bootstrap}: {'; '.join(errors[:3])}")
    return [o for o in out if o is not None]


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
    """Read ``topic`` (all partitions, manual assignment, no group, nothing committed), read
    committed: records of aborted or still open transactions are never returned.

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
        isolation_level="read_committed",
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


# ------------------------------------------------------------------------------------ line count


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
