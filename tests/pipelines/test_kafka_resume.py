"""A stopped Kafka job resumes where it stopped.

* A new job of the same consumer group starts at the group's committed offsets: never the whole
  topic again (a bounded job commits them when it finishes).
* ``--resume`` (``flow.resume_path``) restores the newest retained checkpoint of a cancelled job:
  its windows, pending legs and de-duplication state as well as its offsets, so the resumed job
  alerts on the stream's second half exactly as one run over the whole stream does.

The live set's wire records (the producer's own encoding, so event ids are those of the whole
file) go to the topic in two halves; the reference is the file job over the whole file. The
second, unbounded job never sees the end of its input, so only events the watermark has passed
can have alerted: the reference's alerts up to that time must all be there, and nothing else.
Needs Kafka (``make test`` starts it).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from auditflow_app import flow
from auditflow.records import RejectedRecord, TransactionEvent
from auditflow_app.settings import Settings
from ingest.kafka_io import consume_all, delete_topics, ensure_topics, produce_raw, wire_records
from ingest.synthetic import generate, write_dataset

pytestmark = pytest.mark.services("kafka")

CHECKPOINT_MS = 500


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    base = Settings(out_dir=root, seed=21, graph_url="memory:", checkpoint_interval_ms=CHECKPOINT_MS)
    hist_csv, _ = write_dataset(generate(accounts=300, days=4, laundering_rate=0.02, seed=21), root, name="history")
    flow.train(hist_csv, root / "model", base)
    live_csv, _ = write_dataset(generate(accounts=200, days=3, laundering_rate=0.002, seed=22), root, name="live")
    records = list(wire_records(live_csv))
    assert not any(isinstance(r, RejectedRecord) for r in records)
    reference = flow.run_stream(live_csv, root / "model", base)
    suffix = uuid.uuid4().hex[:8]
    k = base.model_copy(update={"topic_transactions": f"r-tx-{suffix}", "topic_alerts": f"r-alerts-{suffix}",
                                "topic_dlq": f"r-dlq-{suffix}"})
    topics = (k.topic_transactions, k.topic_alerts, k.topic_dlq)
    ensure_topics(k.kafka_bootstrap, {t: 3 for t in topics})
    yield {"root": root, "k": k, "records": records, "reference": reference, "suffix": suffix}
    delete_topics(k.kafka_bootstrap, topics)


def _send(k, records) -> list[tuple[int, int]]:
    return produce_raw(k.kafka_bootstrap, k.topic_transactions, [v for _, v in records], [key for key, _ in records])


def _alert_ids(k) -> list[str]:
    return [json.loads(r.value)["event"]["event_id"]
            for r in consume_all(k.kafka_bootstrap, k.topic_alerts, timeout_s=120)]


def _committed(k, group: str) -> dict[int, int]:
    """The group's committed offsets on the input topic (partitions without one left out)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": k.kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(k.topic_transactions, p) for p in range(3)], timeout=10)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        c.close()


def _run_until_committed(k, model_dir, group: str, ends: dict[int, int], restore=None, timeout_s: float = 180):
    """An unbounded job of ``group``, cancelled once the group's committed offsets reached
    ``ends`` (every record read and a checkpoint completed after it) and one more checkpoint
    interval passed (its transactions committed)."""
    from pipelines.kafka_job import start_kafka_job

    cfg = flow.kafka_job_config(k, bounded=False, group_id=group, job_name=f"resume-{group}", restore_path=restore)
    client = start_kafka_job(cfg, flow.stream_spec(model_dir, k))
    try:
        deadline = time.monotonic() + timeout_s
        while _committed(k, group) != ends:
            assert time.monotonic() < deadline, f"offsets {_committed(k, group)} never reached {ends}"
            time.sleep(0.5)
        time.sleep(4 * CHECKPOINT_MS / 1000)
    finally:
        client.cancel().result()


def test_resume_restores_state_and_offsets(world):
    k, records, model_dir = world["k"], world["records"], world["root"] / "model"
    group = f"resume-{world['suffix']}"
    half = len(records) // 2
    placed = _send(k, records[:half])
    ends = {p: max(o for q, o in placed if q == p) + 1 for p, _ in placed}
    _run_until_committed(k, model_dir, group, ends)
    restore = flow.resume_path(k, resume=True)
    assert (restore / "_metadata").is_file()

    placed += _send(k, records[half:])
    ends = {p: max(o for q, o in placed if q == p) + 1 for p, _ in placed}
    _run_until_committed(k, model_dir, group, ends, restore=restore)
    ids = _alert_ids(k)
    assert len(ids) == len(set(ids))  # nothing alerted twice across the cancel and the restore

    # The watermark trails each partition's latest event time by the out-of-orderness bound:
    # events before the lowest such time have been emitted, later ones may still wait.
    events = [TransactionEvent.from_wire(v.decode()) for _, v in records]
    latest = {}
    for ev, (p, _) in zip(events, placed):
        latest[p] = max(latest.get(p, ev.timestamp), ev.timestamp)
    bound = k.out_of_orderness_ms / 1000
    cut = min(latest.values()).timestamp() - bound - 60
    reference = {ev.event_id: ev for ev, _ in world["reference"].candidates}
    settled = {i for i, ev in reference.items() if ev.timestamp.timestamp() < cut}
    assert len(settled) > len(reference) // 2  # the check covers most of the stream
    assert settled <= set(ids), "alerts lost across the restore"
    assert set(ids) <= set(reference), "alerts the uninterrupted run does not raise (state lost in the restore?)"


def test_fresh_job_of_the_same_group_starts_at_the_committed_offsets(world):
    k = world["k"].model_copy(update={"topic_transactions": f"r-tx2-{world['suffix']}"})
    ensure_topics(k.kafka_bootstrap, {k.topic_transactions: 3})
    try:
        _send(k, world["records"])
        model_dir, group = world["root"] / "model", f"bounded-{world['suffix']}"
        first = flow.run_kafka_job(k, model_dir, bounded=True, group_id=group, job_name=f"b1-{group}")
        assert first.processed == len(world["records"])
        again = flow.run_kafka_job(k, model_dir, bounded=True, group_id=group, job_name=f"b2-{group}")
        assert again.processed == 0  # everything was committed by the first run: nothing read twice
    finally:
        delete_topics(k.kafka_bootstrap, [k.topic_transactions])
