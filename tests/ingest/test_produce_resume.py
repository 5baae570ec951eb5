"""A producer that resumes after a crash without sending anything twice (``produce_file``'s
transactions and progress records), on the real broker.

The expectation is always what the codec makes of the file (``read_transactions`` -> the event's
key and ``to_wire``, or its reject), read back through ``read_committed`` consumers, the way the
stream job's Kafka source reads. The crash is a SIGKILL of a producer process that has read
part of a transaction's rows and handed them to the broker (tests/support/produce_child.py);
that its records really were on the broker, uncommitted, is checked with a ``read_uncommitted``
reader before the restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from auditflow.records import RejectedRecord, TransactionEvent
from ingest import kafka_io
from ingest.amlworld import read_transactions
from ingest.kafka_io import ProducerOptions
from ingest.synthetic import generate, write_dataset

TOPIC_PREFIX = "resumetest"  # see topic_name in conftest.py
REPO = Path(__file__).resolve().parents[2]
CHILD = REPO / "tests" / "support" / "produce_child.py"
CHUNK = 1000
#: Malformed lines at these final line numbers: in committed chunks, in the chunk the crash
#: leaves open, and after it.
BAD = {
    7: "2022/09/01 01:01,010,8000EBD30,012,80011F990,10.00,Dogecoin,10.00,Euro,ACH,0",
    2100: "not,a,transaction",
    3400: "2022/13/01 01:03,010,8000EBD30,012,80011F990,10.00,Euro,10.00,Euro,ACH,0",
    3450: "",
    6000: "2022/09/01 01:07,010,,012,80011F990,1.00,US Dollar,1.00,US Dollar,ACH,0",
}
PAUSE_AT = 3500  # rows read when the child stops: chunks 1-3 committed, 500 rows of chunk 4 open


def needs_kafka(test):
    return pytest.mark.services("kafka")(test)


def write_csv(path: Path, seed: int, accounts: int = 900) -> Path:
    ds = generate(accounts=accounts, days=2, seed=seed)
    written, _ = write_dataset(ds, path.parent, name=path.stem)
    lines = written.read_text(encoding="utf-8").splitlines()
    for lineno in sorted(BAD):
        if lineno <= len(lines):
            lines.insert(lineno - 1, BAD[lineno])
    written.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return written


def reference(path: Path) -> tuple[Counter, Counter]:
    """(events: Counter of (key, value)), (rejects: Counter of line numbers) the codec gives."""
    events, rejects = Counter(), Counter()
    for it in read_transactions(path):
        if type(it) is TransactionEvent:
            events[(it.sender.node_id.encode(), it.to_wire().encode())] += 1
        else:
            assert isinstance(it, RejectedRecord)
            rejects[it.offset] += 1
    return events, rejects


def committed(bootstrap: str, options: ProducerOptions) -> tuple[Counter, Counter]:
    """What read_committed readers find: the same shape as :func:`reference`."""
    events = Counter((r.key, r.value) for r in kafka_io.consume_all(bootstrap, options.topic,
                                                                    timeout_s=60, quiet_s=0.0))
    rejects = Counter(json.loads(r.value)["offset"] for r in kafka_io.consume_all(
        bootstrap, options.dlq_topic, timeout_s=60, quiet_s=0.0))
    return events, rejects


def uncommitted_count(bootstrap: str, topic: str) -> int:
    """Records on ``topic`` read_uncommitted (those of open or aborted transactions included)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    parts = kafka_io._partition_counts_of(bootstrap, [topic])[topic]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{os.getpid()}", "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted", "enable.partition.eof": True})
    n, eof = 0, set()
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        while len(eof) < parts:
            m = c.poll(10)
            assert m is not None, "no end of partition within 10 s"
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
            else:
                n += 1
    finally:
        c.close()
    return n


@pytest.fixture
def topics(topic_name, bootstrap):
    def make(what: str) -> ProducerOptions:
        return ProducerOptions(bootstrap, topic_name(f"{what}.tx"), topic_name(f"{what}.dlq"), partitions=3)
    return make


@needs_kafka
def test_a_producer_killed_inside_a_transaction_resumes_and_every_line_arrives_once(tmp_path, topics, bootstrap):
    path = write_csv(tmp_path / "crash.csv", seed=41)
    assert kafka_io.count_data_lines(path) > max(BAD) + CHUNK
    options = topics("crash")
    env = {**os.environ, "AUDITFLOW_KAFKA_BOOTSTRAP": bootstrap}
    child = subprocess.Popen([sys.executable, str(CHILD), str(path), options.topic, options.dlq_topic,
                              str(CHUNK), str(PAUSE_AT)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        first = child.stdout.readline()
        assert first.startswith("paused "), first
        assert child.stdout.readline() == "sent\n"
        paused_at = int(first.split()[1])
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL

    # the crash left committed chunks and an open one whose records are on the broker
    progress = kafka_io.read_progress(bootstrap, options.topic, path)
    assert progress is not None and not progress.complete
    assert progress.rows == (paused_at // CHUNK) * CHUNK < paused_at
    got_events, got_rejects = committed(bootstrap, options)
    assert sum(got_events.values()) + sum(got_rejects.values()) == progress.rows
    assert uncommitted_count(bootstrap, options.topic) > sum(got_events.values())

    summary = kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    want_events, want_rejects = reference(path)
    n_lines = kafka_io.count_data_lines(path)
    assert summary.skipped == progress.rows
    assert summary.skipped + summary.read == n_lines
    got_events, got_rejects = committed(bootstrap, options)
    assert max(got_events.values()) == 1 and max(got_rejects.values()) == 1  # nothing twice
    assert got_events == want_events  # every event, byte for byte
    assert got_rejects == want_rejects and sorted(got_rejects) == sorted(BAD)
    final = kafka_io.read_progress(bootstrap, options.topic, path)
    assert (final.rows, final.events, final.dead_letters, final.complete) == (
        n_lines, sum(want_events.values()), len(BAD), True)


@needs_kafka
def test_a_second_run_sends_nothing_and_appended_lines_are_sent_once(tmp_path, topics, bootstrap):
    path = write_csv(tmp_path / "again.csv", seed=42, accounts=400)
    options = topics("again")
    kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    again = kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    assert (again.read, again.produced, again.dead_lettered) == (0, 0, 0)
    assert again.skipped == kafka_io.count_data_lines(path)

    extra = write_csv(tmp_path / "extra.csv", seed=43, accounts=300).read_text(encoding="utf-8").splitlines()[1:]
    with open(path, "a", encoding="utf-8") as fh:  # the file grows, its head stays
        fh.write("\n".join(extra[:1500]) + "\n")
    grown = kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    assert (grown.skipped, grown.read) == (again.skipped, 1500)
    want_events, want_rejects = reference(path)
    got_events, got_rejects = committed(bootstrap, options)
    assert got_events == want_events and got_rejects == want_rejects
    assert max(got_events.values()) == 1


@needs_kafka
def test_another_file_at_the_same_path_is_refused_unless_restarted(tmp_path, topics, bootstrap):
    path = write_csv(tmp_path / "same.csv", seed=44, accounts=300)
    options = topics("same")
    kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    write_csv(tmp_path / "same.csv", seed=45, accounts=300)  # other content, same name
    with pytest.raises(kafka_io.ProduceError, match="not the same file"):
        kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    again = kafka_io.produce_file(path, options, chunk_rows=CHUNK, restart=True)
    assert again.skipped == 0 and again.read == kafka_io.count_data_lines(path)
    got_events, _ = committed(bootstrap, options)
    want_events, _ = reference(path)
    assert all(got_events[kv] == 1 for kv in want_events)  # the second file, once, after the first


@needs_kafka
def test_a_topic_made_again_gets_the_file_from_the_start(tmp_path, topics, bootstrap):
    path = write_csv(tmp_path / "remade.csv", seed=46, accounts=300)
    options = topics("remade")
    kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    kafka_io.delete_topics(bootstrap, [options.topic])  # its progress topic goes with it
    assert kafka_io.read_progress(bootstrap, options.topic, path) is None
    again = kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    assert again.skipped == 0
    got_events, _ = committed(bootstrap, options)
    assert got_events == reference(path)[0]


@needs_kafka
def test_progress_of_a_topic_made_again_behind_its_back_is_ignored(tmp_path, topics, bootstrap):
    """Deleted with another tool (its progress topic left): the topic id tells the new topic apart."""
    path = write_csv(tmp_path / "behind.csv", seed=47, accounts=300)
    options = topics("behind")
    kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    admin = kafka_io._admin(bootstrap)
    try:
        admin.delete_topics([options.topic])
        deadline = time.monotonic() + 30
        while options.topic in admin.list_topics():
            assert time.monotonic() < deadline, "topic still listed 30 s after deletion"
            time.sleep(0.1)
    finally:
        admin.close()
    kafka_io.ensure_topics(bootstrap, {options.topic: 3})
    assert kafka_io.read_progress(bootstrap, options.topic, path).complete
    again = kafka_io.produce_file(path, options, chunk_rows=CHUNK)
    assert again.skipped == 0
    got_events, _ = committed(bootstrap, options)
    assert got_events == reference(path)[0]


def test_skipped_lines_are_read_not_sent(tmp_path):
    path = write_csv(tmp_path / "skip.csv", seed=49, accounts=300)
    whole = list(kafka_io.wire_records(path))
    for skip in (0, 1, 6, 7, 2099, len(whole) - 1, len(whole), len(whole) + 5):
        assert list(kafka_io.wire_records(path, skip=skip)) == whole[skip:]
