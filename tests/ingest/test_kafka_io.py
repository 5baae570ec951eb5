"""ingest.kafka_io against the real broker from deploy/ (nothing mocked).

Needs ``deploy/services up kafka`` and ``AUDITFLOW_SERVICES=1`` (see ``services`` in
tests/conftest.py: skipped otherwise, an error under CI or if the broker does not answer). The
producer's rate is measured by ``bench/stream_throughput.py``, not here. Every topic
is named ``kio.<test run uuid>.<name>`` and deleted at the end of the module, so runs do not see
each other's records nor anyone else's.
"""

from __future__ import annotations

import calendar
import json
import re
from collections import defaultdict

import pytest

from auditflow.errors import FieldError
from auditflow.records import WIRE_FIELDS, RejectedRecord, TransactionEvent
from ingest.kafka_io import ProducerOptions
from ingest.synthetic import generate, write_dataset

pytestmark = pytest.mark.services("kafka")

PARTITIONS = 3
# Appended after the generated rows: (raw line, field named by the reject, fragment of the reason).
MALFORMED = [
    ("2022/09/01 01:00,010,8000EBD30,012,80011F990,12.3.4,Euro,12.3.4,Euro,ACH,0", "Amount Received", "decimal"),
    ("2022/09/01 01:01,010,8000EBD30,012,80011F990,10.00,Dogecoin,10.00,Euro,ACH,0", "Receiving Currency", "currency"),
    ("2022/13/01 01:03,010,8000EBD30,012,80011F990,10.00,Euro,10.00,Euro,ACH,0", "Timestamp", "YYYY/MM/DD"),
    ("not,a,transaction", "row", "columns"),
    ("", "row", "blank line"),
    ("2022/09/01 01:05,010,8000EBD30,012,80011F990,10.00,Euro,10.00,Euro,Teleport,0", "Payment Format", "payment format"),
]


@pytest.fixture(scope="module")
def kio():
    from ingest import kafka_io

    return kafka_io


TOPIC_PREFIX = "kio"  # see topic_name in conftest.py


@pytest.fixture(scope="module")
def dataset():
    return generate(accounts=100, days=1, seed=31)


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory, dataset):
    """The generated rows, then MALFORMED; returns (path, {line: (raw, field, reason)})."""
    path, _ = write_dataset(dataset, tmp_path_factory.mktemp("kio"), name="kio")
    first = len(dataset.events) + 2  # header is line 1
    bad = {}
    with open(path, "a", encoding="utf-8", newline="") as fh:
        for i, (raw, field, reason) in enumerate(MALFORMED):
            fh.write(raw + "\n")
            bad[first + i] = (raw, field, reason)
    return path, bad


@pytest.fixture(scope="module")
def produced(csv_file, topic_name, bootstrap, kio):
    """produce_file once for the module: (options, summary, progress calls)."""
    options = ProducerOptions(bootstrap, topic_name("tx"), topic_name("tx.dlq"), PARTITIONS)
    calls: list[tuple[int, int, int]] = []
    summary = kio.produce_file(
        csv_file[0], options, progress=lambda *a: calls.append(a), progress_every=100
    )
    return options, summary, calls


def test_summary_counts_every_row_once(produced, dataset, csv_file):
    _, summary, calls = produced
    n_good, n_bad = len(dataset.events), len(csv_file[1])
    assert n_good > 300 and n_bad == len(MALFORMED)
    assert (summary.read, summary.produced, summary.dead_lettered) == (n_good + n_bad, n_good, n_bad)
    assert summary.read == summary.produced + summary.dead_lettered
    assert summary.source == str(csv_file[0])
    assert summary.elapsed_s > 0 and summary.events_per_s > 0
    assert sum(summary.partitions.values()) == n_good
    assert len(summary.partitions) > 1
    assert calls[-1] == (summary.read, n_good, n_bad)
    assert [c[0] for c in calls[:-1]] == list(range(100, summary.read + 1, 100))
    d = summary.to_dict()
    assert d["read"] == summary.read and d["schema"] == "auditflow.produce_summary/1"


def test_every_good_row_arrives_once_identical_and_keyed_by_sender(produced, dataset, bootstrap, kio):
    from kafka.partitioner.default import murmur2

    options, summary, _ = produced
    recs = kio.consume_all(bootstrap, options.topic, timeout_s=60, expect=len(dataset.events))
    assert len(recs) == len(dataset.events)
    assert recs == sorted(recs, key=lambda r: (r.partition, r.offset))
    got = {}
    partition_of_key: dict[bytes, set[int]] = defaultdict(set)
    values: dict[str, list[str]] = {}
    for r in recs:
        assert r.topic == options.topic
        ev = TransactionEvent.from_wire(r.value.decode())
        assert ev.event_id not in got, f"{ev.event_id} arrived twice"
        got[ev.event_id] = ev
        values[ev.event_id] = r.value.decode().split(",")
        assert r.key == ev.sender.node_id.encode()
        partition_of_key[r.key].add(r.partition)
        # the Java client's partitioner (murmur2), so Flink and any other producer agree
        assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % PARTITIONS
        assert r.value.startswith(b"af1,")  # the compact wire form, not JSON
    expected = {ev.event_id: ev for ev in dataset.events}
    assert got == expected  # whole records: exact Money units and currencies, timestamps, labels
    for ev in dataset.events:
        fields = dict(zip(WIRE_FIELDS, values[ev.event_id], strict=True))
        assert (fields["paid_units"], fields["paid_currency"]) == (str(ev.amount_paid.units), ev.amount_paid.currency)
        assert fields["ts_ms"] == str(calendar.timegm(ev.timestamp.timetuple()) * 1000)
    assert all(len(ps) == 1 for ps in partition_of_key.values())
    used = {r.partition for r in recs}
    assert len(used) > 1
    assert {p: sum(1 for r in recs if r.partition == p) for p in used} == summary.partitions
    # per sender, events keep file order (one partition per key, offsets follow sends)
    by_key: dict[bytes, list[int]] = defaultdict(list)
    for r in recs:
        by_key[r.key].append(TransactionEvent.from_wire(r.value.decode()).source_offset)
    assert all(v == sorted(v) for v in by_key.values())


def test_malformed_rows_are_dead_lettered_with_line_and_reason(produced, csv_file, bootstrap, kio):
    options, _, _ = produced
    path, bad = csv_file
    recs = kio.consume_all(bootstrap, options.dlq_topic, timeout_s=60, expect=len(bad))
    assert len(recs) == len(bad)
    rejects = sorted((RejectedRecord.from_dict(json.loads(r.value)) for r in recs), key=lambda r: r.offset)
    assert [r.offset for r in rejects] == sorted(bad)
    for rej in rejects:
        raw, field, reason = bad[rej.offset]
        assert (rej.stage, rej.source, rej.raw, rej.field) == ("ingest", str(path), raw, field)
        assert reason in rej.reason, (rej.reason, reason)
    assert all(json.loads(r.value)["schema"] == "auditflow.rejected/1" for r in recs)


def test_ensure_topics_is_idempotent_and_refuses_another_partition_count(topic_name, bootstrap, kio):
    a, b = topic_name("ens.a"), topic_name("ens.b")
    assert kio.ensure_topics(bootstrap, {a: 2, b: 1}) == {a: "created", b: "created"}
    assert kio.ensure_topics(bootstrap, {a: 2, b: 1}) == {a: "exists", b: "exists"}
    with pytest.raises(kio.TopicPartitionMismatch) as e:
        kio.ensure_topics(bootstrap, {a: 3, b: 1})
    msg = str(e.value)
    assert a in msg and "has 2 partitions, expected 3" in msg and b not in msg
    with pytest.raises(ValueError, match="positive"):
        kio.ensure_topics(bootstrap, {a: 0})


def test_produce_refuses_an_existing_topic_with_other_partitions(topic_name, bootstrap, kio, csv_file):
    tx, dlq = topic_name("wrong.tx"), topic_name("wrong.dlq")
    kio.ensure_topics(bootstrap, {tx: 1})
    with pytest.raises(kio.TopicPartitionMismatch, match="has 1 partitions, expected 3"):
        kio.produce_file(csv_file[0], ProducerOptions(bootstrap, tx, dlq, PARTITIONS))
    assert kio.consume_all(bootstrap, tx, timeout_s=20, quiet_s=0.5) == []


def test_wrong_header_fails_before_any_topic_is_made(tmp_path, topic_name, bootstrap, kio):
    from kafka import KafkaAdminClient

    path = tmp_path / "not_amlworld.csv"
    path.write_text("a,b,c\n1,2,3\n", encoding="utf-8")
    tx, dlq = topic_name("hdr.tx"), topic_name("hdr.dlq")
    with pytest.raises(FieldError, match="header"):
        kio.produce_file(path, ProducerOptions(bootstrap, tx, dlq, PARTITIONS))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert not {tx, dlq} & set(admin.list_topics())
    finally:
        admin.close()


def test_produce_raw_and_consume_all_round_trip(topic_name, bootstrap, kio):
    t = topic_name("raw")
    kio.ensure_topics(bootstrap, {t: 2})
    values = [b"{not json", b"af1,tx-1,noon,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0", b"\xff\xfe", b"af2"]
    keys = [b"k1", b"k2", None, b"k1"]
    meta = kio.produce_raw(bootstrap, t, values, keys=keys)
    recs = kio.consume_all(bootstrap, t, timeout_s=30, expect=len(values))
    by_pos = {(r.partition, r.offset): r for r in recs}
    assert sorted(by_pos) == sorted(meta)
    for (p, o), k, v in zip(meta, keys, values, strict=True):
        assert (by_pos[p, o].key, by_pos[p, o].value) == (k, v)
    for v in values:  # what a downstream consumer sees: each one names its problem
        with pytest.raises(FieldError):
            TransactionEvent.from_wire(v.decode("utf-8", "replace"))
    # from the end: old records are not returned (an idle topic returns after the quiet period)
    assert kio.consume_all(bootstrap, t, timeout_s=30, from_beginning=False, quiet_s=0.5) == []
    with pytest.raises(ValueError, match="keys"):
        kio.produce_raw(bootstrap, t, values, keys=keys[:1])


def test_end_offsets_and_group_commits_forward_only(topic_name, bootstrap, kio):
    t = topic_name("offsets")
    kio.ensure_topics(bootstrap, {t: 3})
    meta = kio.produce_raw(bootstrap, t, [b"a", b"b", b"c", b"d", b"e"], keys=[b"k1", b"k2", b"k1", b"k3", b"k1"])
    expected = {p: 0 for p in range(3)}  # the offset after each partition's last record, from the sends
    for p, o in meta:
        expected[p] = max(expected[p], o + 1)
    assert kio.stable_end_offsets(bootstrap, t) == expected
    group = f"{t}-group"
    assert kio.committed_offsets(bootstrap, group, t) == {}
    assert kio.commit_offsets_at_least(bootstrap, group, t, expected) == expected
    assert kio.committed_offsets(bootstrap, group, t) == expected
    lower = {p: max(o - 1, 0) for p, o in expected.items()}
    assert kio.commit_offsets_at_least(bootstrap, group, t, lower) == {}  # never moved back
    assert kio.committed_offsets(bootstrap, group, t) == expected
    with pytest.raises(LookupError, match="does not exist"):
        kio.stable_end_offsets(bootstrap, topic_name("never-made"))


def test_missing_topics_are_refused_not_auto_created(topic_name, bootstrap, kio, csv_file):
    """The broker auto-creates topics (1 partition) on a client's metadata request: never here."""
    from kafka import KafkaAdminClient

    tx, dlq = topic_name("missing.tx"), topic_name("missing.dlq")
    with pytest.raises(LookupError, match="not found"):
        kio.consume_all(bootstrap, tx, timeout_s=2)
    with pytest.raises(LookupError, match="do not exist"):
        kio.produce_raw(bootstrap, tx, [b"x"])
    with pytest.raises(LookupError, match=f"{tx!r}, {dlq!r} do not exist"):
        kio.produce_file(csv_file[0], ProducerOptions(bootstrap, tx, dlq, PARTITIONS), create_topics=False)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert not {tx, dlq} & set(admin.list_topics())
    finally:
        admin.close()


def test_produce_command_prints_progress_and_counts(csv_file, dataset, topic_name, bootstrap, kio, monkeypatch):
    """``auditflow produce --from FILE --topic T`` (auditflow_app.cli): the topic from the option,
    the broker, DLQ topic and partition count from the settings; the counts on one last line."""
    from typer.testing import CliRunner

    from auditflow_app import cli

    dlq, tx = topic_name("cmd.dlq"), topic_name("cmd.tx")
    monkeypatch.setenv("AUDITFLOW_KAFKA_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("AUDITFLOW_TOPIC_TRANSACTIONS", topic_name("cmd.default"))
    monkeypatch.setenv("AUDITFLOW_TOPIC_DLQ", dlq)
    monkeypatch.setenv("AUDITFLOW_TOPIC_PARTITIONS", "2")
    result = CliRunner().invoke(cli.app, ["produce", "--from", str(csv_file[0]), "--topic", tx])
    assert result.exit_code == 0, result.output
    last = result.output.strip().splitlines()[-1]  # one line, not wrapped: fit for logs
    assert f"produced {len(dataset.events)} events to {tx} (partitions 0: " in last and ", 1: " in last
    assert f"{len(MALFORMED)} dead-lettered to {dlq}; {kio.count_data_lines(csv_file[0])} rows read" in last
    assert len(kio.consume_all(bootstrap, tx, timeout_s=60, expect=len(dataset.events))) == len(dataset.events)


# Written by hand, with what each must become on the wire (independent of the generator and of
# the codec's formatter): bank ids keep their leading zeros, amounts keep every digit exactly.
# The af1 fields (auditflow.records.WIRE_FIELDS): tag, event_id (a content hash, checked apart),
# ts_ms, source_offset, from_bank, from_account, to_bank, to_account, paid_units, paid_currency,
# received_units, received_currency, paid_usd_cents, received_usd_cents, payment_format,
# is_laundering. Event times: 2022-09-04 00:00 UTC is day 19239 of the epoch (18993 days to
# 2022-01-01, 243 more to 09-01, 3 more) = 1662249600 s. Cents at the reference rates, half-even:
# 1055.18 EUR * 1.17 = 1234.5606 USD -> 123456; 0.025852 XBT * 11500 = 297.298 USD -> 29730;
# 90071992547409.93 JPY * 0.0092 = 828662331436.171356 USD -> 82866233143617.
HAND_HEADER = "Timestamp,From Bank,Account,To Bank,Account,Amount Received,Receiving Currency,Amount Paid,Payment Currency,Payment Format,Is Laundering"
HAND_ROWS = [
    ("2022/09/03 23:59,0010,800A00001,012,800B00002,1234.56,US Dollar,1055.18,Euro,Wire,0",
     "af1,{id},1662249540000,2,0010,800A00001,012,800B00002,105518,Euro,123456,US Dollar,123456,123456,Wire,0"),
    ("2022/09/04 00:00,10,800A00001,0010,800A00001,0.02585200,Bitcoin,0.025852,Bitcoin,Bitcoin,1",
     "af1,{id},1662249600000,3,10,800A00001,0010,800A00001,2585200,Bitcoin,2585200,Bitcoin,29730,29730,Bitcoin,1"),
    ("2022/09/04 00:01,0010,800A00001,012,800B00002,90071992547409.93,Yen,90071992547409.93,Yen,Cash,0",
     "af1,{id},1662249660000,4,0010,800A00001,012,800B00002,9007199254740993,Yen,9007199254740993,Yen,"
     "82866233143617,82866233143617,Cash,0"),
]


def test_hand_written_expectations_check_out_independently():
    """The hand-written numbers above, recomputed without auditflow: calendar.timegm for the
    event time, Decimal at the reference rates for the cents."""
    from decimal import ROUND_HALF_EVEN, Decimal

    def cents(amount: str, rate: str) -> str:
        return str((Decimal(amount) * Decimal(rate) * 100).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))

    rates = {"US Dollar": "1", "Euro": "1.17", "Bitcoin": "11500", "Yen": "0.0092"}
    for row, want in HAND_ROWS:
        f = row.split(",")
        w = want.split(",")
        y, mo, d = map(int, f[0][:10].split("/"))
        h, mi = map(int, f[0][11:].split(":"))
        assert w[2] == str(calendar.timegm((y, mo, d, h, mi, 0)) * 1000)
        assert (w[12], w[13]) == (cents(f[7], rates[f[8]]), cents(f[5], rates[f[6]]))


def test_hand_written_rows_arrive_with_exact_values(tmp_path, topic_name, bootstrap, kio):
    from kafka.partitioner.default import murmur2

    path = tmp_path / "hand_Trans.csv"
    path.write_text(HAND_HEADER + "\n" + "".join(row + "\n" for row, _ in HAND_ROWS), encoding="utf-8")
    options = ProducerOptions(bootstrap, topic_name("hand.tx"), topic_name("hand.dlq"), PARTITIONS)
    summary = kio.produce_file(path, options)
    assert (summary.read, summary.produced, summary.dead_lettered) == (3, 3, 0)
    recs = kio.consume_all(bootstrap, options.topic, timeout_s=60, expect=3)
    by_offset = {int(r.value.decode().split(",")[3]): r for r in recs}
    assert sorted(by_offset) == [2, 3, 4] and len(recs) == 3
    ids = []
    for (_, want), offset in zip(HAND_ROWS, (2, 3, 4), strict=True):
        text = by_offset[offset].value.decode()
        event_id = text.split(",")[1]
        assert re.fullmatch(r"tx-[0-9a-f]{16}", event_id)
        assert text == want.format(id=event_id)  # the whole value, byte for byte
        ids.append(event_id)
    assert len(set(ids)) == 3
    # keyed by sender "bank/account" as written: "0010" and "10" are two different banks
    assert [by_offset[i].key for i in (2, 3, 4)] == [b"0010/800A00001", b"10/800A00001", b"0010/800A00001"]
    for r in recs:
        assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % PARTITIONS
    # exact units, no float on the way: the Yen amount has more digits than a double holds
    big = TransactionEvent.from_wire(by_offset[4].value.decode()).amount_paid
    assert (big.units, big.scale) == (9_007_199_254_740_993, 2)
    assert kio.consume_all(bootstrap, options.dlq_topic, timeout_s=20, quiet_s=0.5) == []
