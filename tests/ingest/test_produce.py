"""`auditflow produce` at speed without losing a row: the fast wire encoding and the producer.

Unit tests (no servers): :func:`ingest.kafka_io.wire_records` / :func:`wire_record`, the
producer's fast path from a CSV line to (key, value), must give exactly what the reference codec
gives (``read_transactions`` -> ``TransactionEvent`` -> ``to_json``), byte for byte, or the same
reject, on generated files and on fuzzed lines.

Integration tests (real Kafka from ``deploy/services up kafka`` and ``AUDITFLOW_SERVICES=1``;
see ``services`` in tests/conftest.py): a generated file with malformed rows spliced in at known lines is produced
with each client, read back from the topic and the DLQ, and checked against what reading the
CSV with the reference codec gives. Topics are ``prodtest.<run uuid>.<name>``, deleted at the end.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import defaultdict
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditflow.money import CURRENCIES
from auditflow.records import PAYMENT_FORMATS, RejectedRecord, TransactionEvent
from auditflow.settings import Settings
from ingest import kafka_io
from ingest.amlworld import HEADER, read_transactions
from ingest.synthetic import generate, write_dataset

def needs_kafka(test):
    """An integration test on the real broker: ``services("kafka")`` (tests/conftest.py: skipped
    without AUDITFLOW_SERVICES=1, an error under CI or if the broker does not answer)."""
    return pytest.mark.services("kafka")(test)

HEADER_LINE = ",".join(HEADER)
# Spliced in at these (final) line numbers: (raw line, field named by the reject, fragment of the reason).
SPLICED = {
    2: ("2022/09/01 01:00,010,8000EBD30,012,80011F990,12.3.4,Euro,12.3.4,Euro,ACH,0", "Amount Received", "decimal"),
    57: ("2022/09/01 01:01,010,8000EBD30,012,80011F990,10.00,Dogecoin,10.00,Euro,ACH,0", "Receiving Currency", "currency"),
    58: ("2022/13/01 01:03,010,8000EBD30,012,80011F990,10.00,Euro,10.00,Euro,ACH,0", "Timestamp", "YYYY/MM/DD"),
    400: ("not,a,transaction", "row", "columns"),
    1001: ("", "row", "blank line"),
    1777: ("2022/09/01 01:05,010,8000EBD30,012,80011F990,10.00,Euro,10.00,Euro,Teleport,0", "Payment Format", "payment format"),
    2222: ("2022/09/01 01:06,010,8000EBD30,012,80011F990,1.001,US Dollar,1.00,US Dollar,ACH,0", "Amount Received", "decimals"),
    2500: ("2022/09/01 01:07,010,,012,80011F990,1.00,US Dollar,1.00,US Dollar,ACH,0", "From Account", "missing"),
}


def reference(path) -> list:
    """What the codec makes of the file: (key, value) per event (to_json), or the reject."""
    return [
        (it.sender.node_id.encode(), it.to_json().encode()) if type(it) is TransactionEvent else it
        for it in read_transactions(path)
    ]


def splice(path, bad: dict[int, tuple[str, str, str]]) -> None:
    """Rewrite ``path`` with each bad row at its (final) line number."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for lineno in sorted(bad):
        lines.insert(lineno - 1, bad[lineno][0])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def spliced_csv(tmp_path_factory):
    """(path, {line: (raw, field, reason)}): a generated file with SPLICED at their lines."""
    ds = generate(accounts=300, days=2, seed=13)
    assert len(ds.events) + len(SPLICED) > max(SPLICED)
    path, _ = write_dataset(ds, tmp_path_factory.mktemp("produce"), name="produce")
    splice(path, SPLICED)
    return path, SPLICED


# ------------------------------------------------------------------------------ unit: wire encoding


def test_fast_wire_path_is_on():
    """The self-check at import passed: the fast path matches TransactionEvent.to_json."""
    assert kafka_io._FAST_WIRE
    assert kafka_io._TX_SCHEMA == "auditflow.transaction/1"


def test_wire_records_equal_the_reference_codec_byte_for_byte(spliced_csv, monkeypatch):
    path, bad = spliced_csv
    slow = []
    real = kafka_io._reference_record
    monkeypatch.setattr(kafka_io, "_reference_record", lambda *a: slow.append(a[1]) or real(*a))
    got = list(kafka_io.wire_records(path))
    monkeypatch.undo()
    assert got == reference(path)
    assert sorted(slow) == sorted(bad)  # every generated row took the fast path; only the bad ones did not
    rejects = {r.offset: r for r in got if isinstance(r, RejectedRecord)}
    assert sorted(rejects) == sorted(bad)
    for lineno, (raw, field, reason) in bad.items():
        assert (rejects[lineno].raw, rejects[lineno].field, rejects[lineno].source) == (raw, field, str(path))
        assert reason in rejects[lineno].reason


def test_wire_value_is_what_the_stream_job_decodes(spliced_csv):
    job = pytest.importorskip("pipelines.job")
    path, _ = spliced_csv
    events = [it for it in read_transactions(path) if type(it) is TransactionEvent][:200]
    wired = [it for it in kafka_io.wire_records(path) if type(it) is tuple][:200]
    for ev, (key, value) in zip(events, wired, strict=True):
        assert key == ev.sender.node_id.encode()
        assert job.decode_event(value.decode(), "topic/0", 123) == ev
        assert TransactionEvent.from_json(value) == ev


def test_wire_records_read_the_file_like_read_transactions(tmp_path):
    rows = [
        "2022/09/01 00:20,010,8000EBD30,010,8000EBD30,3697.34,US Dollar,3697.34,US Dollar,Reinvestment,0",
        "  ",
        '2022/09/01 00:16,00220,"8001C8C51",01420,8003093C1,0.025852,Bitcoin,0.025852,Bitcoin,Bitcoin,0',
        "2022/09/01 00:06, 021174,800737690,012,80011F990,2848.96,Euro,2848.96,Euro,ACH,1",
        "2022/09/02 08:44,0217,80FD27570,0024856,8090E8EB0,10621.240,Shekel,010621.24,Shekel,ACH,1",
    ]
    for name, data in {
        "crlf": "\r\n".join([HEADER_LINE, *rows]) + "\r\n",
        "bom": "\ufeff" + "\n".join([HEADER_LINE, *rows]),  # BOM, no final newline
    }.items():
        p = tmp_path / f"{name}_Trans.csv"
        p.write_bytes(data.encode())
        assert list(kafka_io.wire_records(p)) == reference(p), name
    bad = tmp_path / "bad_Trans.csv"
    bad.write_text("a,b,c\n1,2,3\n", encoding="utf-8")
    with pytest.raises(Exception, match="header"):
        next(kafka_io.wire_records(bad))


# Fuzzed lines: each field mostly plausible, now and then one of the traps (padding, quotes,
# leading zeros, too many decimals, unknown names, empty fields, non-ASCII digits, control
# characters); now and then a wrong column count or a quoted field.
_ts_ok = st.datetimes(datetime(1000, 1, 1), datetime(9999, 12, 31)).map(lambda d: d.strftime("%Y/%m/%d %H:%M"))
_ts_trap = st.sampled_from(["2022/02/29 10:00", "2024/02/29 23:59", "2022/09/01 24:00", "2022/9/01 00:20",
                            "2022-09-01 00:20", " 2022/09/01 00:20", "２０２２/09/01 00:20", "0999/01/01 00:00", ""])
_amount_fiat = st.one_of(
    st.decimals(min_value=0, max_value=10**12, places=2).map(str),
    st.from_regex(r"0{0,3}[0-9]{1,6}(\.[0-9]{0,2}0{0,3})?", fullmatch=True),
)
_amount_btc = st.one_of(
    st.decimals(min_value=0, max_value=10**4, places=8).map(str),
    st.from_regex(r"0{0,2}[0-9]{1,3}(\.[0-9]{0,8}0{0,3})?", fullmatch=True),
)
_amount_trap = st.one_of(
    st.from_regex(r"[0-9]{1,3}\.[0-9]{3,9}", fullmatch=True),
    st.sampled_from(["-1.00", "1e5", ".5", "5.", "1.2.3", " 12.00", "12.00 ", "١٢", "", "0", "00.000", "1" * 50]),
)
_name_ok = st.from_regex(r"[0-9A-F]{1,9}", fullmatch=True)
_name_trap = st.one_of(
    st.sampled_from(["", " ", "0010", '"8000EBD30"', "8000 EBD30", "x\\y", "é", "\t1"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=4),
)
_currency_ok = st.sampled_from(sorted(CURRENCIES))
_currency_trap = st.sampled_from(["Dogecoin", "", " Euro", "euro"])
_format_ok = st.sampled_from(PAYMENT_FORMATS)
_format_trap = st.sampled_from(["Teleport", "", " ACH", "Credit  Card"])
_label_ok = st.sampled_from(["0", "1"])
_label_trap = st.sampled_from(["2", " 1", "", "true"])


def _field(draw, ok, trap):
    return draw(trap if draw(st.integers(0, 24)) == 13 else ok)  # not 0: hypothesis favours it


@st.composite
def _lines(draw) -> str:
    cur = _field(draw, _currency_ok, _currency_trap)
    recv_cur = cur if draw(st.booleans()) else _field(draw, _currency_ok, _currency_trap)
    fields = [_field(draw, _ts_ok, _ts_trap)]
    fields += [_field(draw, _name_ok, _name_trap) for _ in range(4)]
    recv_ok, paid_ok = (_amount_btc if c == "Bitcoin" else _amount_fiat for c in (recv_cur, cur))
    fields += [_field(draw, recv_ok, _amount_trap), recv_cur, _field(draw, paid_ok, _amount_trap), cur]
    fields += [_field(draw, _format_ok, _format_trap), _field(draw, _label_ok, _label_trap)]
    shape = draw(st.sampled_from(["plain"] * 12 + ["drop", "extra", "quote"]))
    if shape == "drop":
        del fields[draw(st.integers(0, len(fields) - 1))]
    elif shape == "extra":
        fields.append(draw(_name_ok))
    elif shape == "quote":
        i = draw(st.integers(0, len(fields) - 1))
        fields[i] = '"' + fields[i].replace('"', '""') + '"'
    return ",".join(fields) + draw(st.sampled_from(["\n", "\r\n", ""]))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lines(), st.integers(2, 10**9))
def test_fuzzed_lines_encode_exactly_like_the_reference(line, lineno):
    got = kafka_io.wire_record(line, lineno, "f.csv")
    want = kafka_io._reference_record(line, lineno, "f.csv")
    assert got == want


@given(st.integers(0, 10**20), st.sampled_from(sorted(CURRENCIES)), st.integers(0, 3), st.integers(0, 4))
def test_fast_amount_is_the_canonical_amount(units, currency, zeros_before, zeros_after):
    from auditflow.money import Money, format_amount, parse_amount

    scale = CURRENCIES[currency][1]
    text = f"{Money(currency, units).to_decimal():f}"
    text = "0" * zeros_before + text + ("0" * zeros_after if "." in text else "")
    assert kafka_io._fast_amount(text, scale) == format_amount(parse_amount(text, currency, field="Amount Paid"))


# ------------------------------------------------------------------------------ integration: Kafka


@pytest.fixture(scope="module")
def bootstrap() -> str:
    return Settings().kafka_bootstrap


@pytest.fixture(scope="module")
def topic_name(bootstrap):
    run = uuid.uuid4().hex[:10]
    made: list[str] = []

    def name(what: str) -> str:
        t = f"prodtest.{run}.{what}"
        made.append(t)
        return t

    yield name
    if os.environ.get("AUDITFLOW_SERVICES") == "1":
        kafka_io.delete_topics(bootstrap, made)


PARTITIONS = 3


@pytest.fixture(scope="module", params=kafka_io.CLIENTS)
def produced(request, spliced_csv, topic_name, bootstrap):
    """The spliced file produced once per client; (client, settings, summary, progress calls,
    topic records, DLQ records)."""
    client = request.param
    settings = Settings(
        kafka_bootstrap=bootstrap,
        topic_transactions=topic_name(f"{client}.tx"),
        topic_dlq=topic_name(f"{client}.dlq"),
        topic_partitions=PARTITIONS,
    )
    calls: list[tuple[int, int, int]] = []
    summary = kafka_io.produce_file(
        spliced_csv[0], settings, progress=lambda *a: calls.append(a), progress_every=250, client=client
    )
    n_bad = len(spliced_csv[1])
    recs = kafka_io.consume_all(bootstrap, settings.topic_transactions, timeout_s=60, expect=summary.produced)
    dlq = kafka_io.consume_all(bootstrap, settings.topic_dlq, timeout_s=60, expect=n_bad)
    return client, settings, summary, calls, recs, dlq


@needs_kafka
def test_counts_add_up(produced, spliced_csv):
    client, _, summary, calls, recs, dlq = produced
    path, bad = spliced_csv
    n_lines = kafka_io.count_data_lines(path)
    want = reference(path)
    n_good = sum(1 for it in want if type(it) is tuple)
    assert summary.client == client
    assert (summary.read, summary.produced, summary.dead_lettered) == (n_lines, n_good, len(bad))
    assert summary.read == summary.produced + summary.dead_lettered
    assert (len(recs), len(dlq)) == (n_good, len(bad))  # nothing more on the topics either
    assert sum(summary.partitions.values()) == n_good and len(summary.partitions) == PARTITIONS
    assert {p: sum(1 for r in recs if r.partition == p) for p in range(PARTITIONS)} == summary.partitions
    assert [c[0] for c in calls[:-1]] == list(range(250, summary.read + 1, 250))
    assert calls[-1] == (summary.read, n_good, len(bad))


@needs_kafka
def test_the_good_rows_arrive_once_each_identical_to_the_reference(produced, spliced_csv):
    from kafka.partitioner.default import murmur2

    _, settings, _, _, recs, _ = produced
    path, _ = spliced_csv
    want = {json.loads(v)["event_id"]: (k, v) for k, v in (it for it in reference(path) if type(it) is tuple)}
    got: dict[str, tuple[bytes, bytes]] = {}
    for r in recs:
        assert r.topic == settings.topic_transactions
        eid = json.loads(r.value)["event_id"]
        assert eid not in got, f"{eid} arrived twice"
        got[eid] = (r.key, r.value)
        assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % PARTITIONS  # the Java client's partitioner
    assert set(got) == set(want)
    assert got == want  # keys and values byte for byte


@needs_kafka
def test_each_sender_keeps_file_order_on_one_partition(produced):
    _, _, _, _, recs, _ = produced
    by_key: dict[bytes, list[tuple[int, int, int]]] = defaultdict(list)
    for r in recs:
        by_key[r.key].append((TransactionEvent.from_json(r.value).source_offset, r.partition, r.offset))
    assert len(by_key) > 50
    for key, items in by_key.items():
        items.sort()  # file order
        assert len({p for _, p, _ in items}) == 1, key
        offsets = [o for _, _, o in items]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), key


@needs_kafka
def test_each_malformed_row_is_dead_lettered_with_its_line_and_field(produced, spliced_csv):
    _, settings, _, _, _, dlq = produced
    path, bad = spliced_csv
    rejects = {}
    for r in dlq:
        d = json.loads(r.value)
        assert d["schema"] == "auditflow.rejected/1" and r.key is None
        rej = RejectedRecord.from_dict(d)
        assert rej.offset not in rejects
        rejects[rej.offset] = rej
    assert sorted(rejects) == sorted(bad)
    for lineno, (raw, field, reason) in bad.items():
        rej = rejects[lineno]
        assert (rej.stage, rej.source, rej.raw, rej.field) == ("ingest", str(path), raw, field)
        assert reason in rej.reason, (rej.reason, reason)
    # the same rejects the codec gives, up to the stage
    want = {it.offset: it for it in reference(path) if isinstance(it, RejectedRecord)}
    assert {o: (r.field, r.value, r.reason) for o, r in rejects.items()} == {
        o: (r.field, r.value, r.reason) for o, r in want.items()
    }


@needs_kafka
def test_a_tiny_queue_bound_still_delivers_everything(spliced_csv, topic_name, bootstrap):
    """max_unacked=64: produce() keeps hitting the queue bound and waits for room, losing nothing."""
    settings = Settings(kafka_bootstrap=bootstrap, topic_transactions=topic_name("tiny.tx"),
                        topic_dlq=topic_name("tiny.dlq"), topic_partitions=2)
    summary = kafka_io.produce_file(spliced_csv[0], settings, max_unacked=64)
    n_good = sum(1 for it in reference(spliced_csv[0]) if type(it) is tuple)
    assert (summary.produced, summary.dead_lettered) == (n_good, len(spliced_csv[1]))
    recs = kafka_io.consume_all(bootstrap, settings.topic_transactions, timeout_s=60, expect=n_good)
    assert len({json.loads(r.value)["event_id"] for r in recs}) == len(recs) == n_good


@needs_kafka
def test_records_the_broker_refuses_raise_instead_of_vanishing(spliced_csv, topic_name, bootstrap):
    from kafka.admin import NewTopic

    tx, dlq = topic_name("refuse.tx"), topic_name("refuse.dlq")
    admin = kafka_io._admin(bootstrap)
    try:  # every batch is larger than this topic accepts
        admin.create_topics([NewTopic(tx, 2, 1, topic_configs={"max.message.bytes": "300"}), NewTopic(dlq, 2, 1)])
    finally:
        admin.close()
    settings = Settings(kafka_bootstrap=bootstrap, topic_transactions=tx, topic_dlq=dlq, topic_partitions=2)
    with pytest.raises(kafka_io.ProduceError, match="not acknowledged"):
        kafka_io.produce_file(spliced_csv[0], settings, create_topics=False)


def test_unknown_client_is_refused(spliced_csv):
    with pytest.raises(ValueError, match="unknown producer client"):
        kafka_io.produce_file(spliced_csv[0], Settings(), client="nope")
