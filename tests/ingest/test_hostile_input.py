"""Hostile input never stops a path: one test per finding of the review (issue 8), each checked
on the importer's path (read_transactions / import_amlworld) and the producer's (wire_record /
wire_records), against expectations computed independently here.

The produce test at the end runs on the real broker (``services("kafka")``)."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

import pytest

from auditflow.errors import FieldError
from auditflow.money import CURRENCIES, MAX_AMOUNT_DIGITS, MAX_UNIT_DIGITS, USD_RATES, Money, parse_amount, usd_cents
from auditflow.records import (
    MAX_RAW_BYTES,
    MAX_VALUE_CHARS,
    AccountRef,
    Alert,
    RejectedRecord,
    TransactionEvent,
)
from ingest import kafka_io
from ingest.amlworld import HEADER, parse_line, read_transactions
from ingest.importer import import_amlworld
from ingest.synthetic import generate, write_dataset

ROW = "2022/09/01 00:20,010,8000EBD30,012,80011F990,{},US Dollar,1.00,US Dollar,ACH,0"
GOOD = "2022/09/01 00:20,010,8000EBD30,012,80011F990,3697.34,US Dollar,3697.34,US Dollar,Reinvestment,0"


def both_paths(line: str, lineno: int = 2):
    """What the importer's and the producer's path make of one line."""
    return parse_line(line, lineno, "f.csv"), kafka_io.wire_record(line, lineno, "f.csv")


# ------------------------------------------------------------------ amounts: a digit cap per currency


def test_amount_cap_keeps_units_and_cents_in_a_signed_64_bit_integer_and_cents_exact():
    """MAX_UNIT_DIGITS, recomputed here with exact fractions: the largest units of that many
    digits have units and US cents below 2**63 (and 10**18, the wire form's integers), one
    digit more does not fit 18 digits; usd_cents is exact (half-even) at the cap."""
    for cur, (_, scale) in CURRENCIES.items():
        d = MAX_UNIT_DIGITS[cur]
        assert MAX_AMOUNT_DIGITS[cur] == d - scale
        top = 10**d - 1
        exact = Fraction(top) / 10**scale * Fraction(USD_RATES[cur]) * 100
        assert top < 2**63 and exact < 10**18
        cents = round(exact)  # Python rounds half to even, as usd_cents does
        assert usd_cents(Money(cur, top)) == cents < 2**63
        bigger = Fraction(10 ** (d + 1) - 1) / 10**scale * Fraction(USD_RATES[cur]) * 100
        assert d == 18 or round(bigger) >= 10**18
    assert MAX_AMOUNT_DIGITS["US Dollar"] == 16 and MAX_AMOUNT_DIGITS["Bitcoin"] == 10


@pytest.mark.parametrize(("amount", "why"), [
    ("1" * 31, "used to parse, then raise decimal.InvalidOperation in usd_cents"),
    ("92233720368547758.08", "2**63 units and beyond: failed the Neo4j writer"),
    ("0" * 5 + "1" * 17, "17 digits after leading zeros"),
    ("9" * 5000, "beyond int()'s digit limit"),
])
def test_too_many_amount_digits_are_the_parsers_reject_naming_field_and_value(amount, why):
    line = ROW.format(amount)
    for item in both_paths(line):
        assert isinstance(item, RejectedRecord), why
        assert item.field == "Amount Received"
        assert item.value == (amount if len(amount) <= MAX_VALUE_CHARS else amount[: MAX_VALUE_CHARS - 3] + "...")
        assert "more than 16 digits before the decimal point for US Dollar" in item.reason
    with pytest.raises(FieldError) as e:
        parse_amount(amount, "US Dollar", field="Amount Paid")
    assert (e.value.field, e.value.value) == ("Amount Paid", amount)
    # the largest amount allowed goes through both paths and round-trips exactly
    top = "9" * 16 + ".99"
    ev, (key, value) = both_paths(ROW.format(top))
    assert ev.amount_received == Money("US Dollar", 10**18 - 1) == TransactionEvent.from_wire(value.decode()).amount_received


# ------------------------------------------------------------------ dead letters are capped


def test_a_100kb_line_becomes_a_small_dead_letter_with_its_length_and_sha256():
    line = GOOD[:-1] + "x" * 100_000  # 100 KB in the label field
    data = line.encode()
    for item in both_paths(line):
        assert isinstance(item, RejectedRecord)
        dead = kafka_io._dead_letter(item, "f.csv")  # what produce sends to the DLQ
        assert len(dead) < 8 * 1024  # was 200 KB (1.2 MB for non-ASCII text): beyond Kafka's 1 MiB
        d = json.loads(dead)
        assert (d["raw_length"], d["raw_sha256"], d["raw_encoding"]) == (len(data), hashlib.sha256(data).hexdigest(), "utf-8")
        assert d["raw"] == line[:MAX_RAW_BYTES] and d["field"] == "Is Laundering" and d["stage"] == "ingest"
        assert len(d["value"]) == MAX_VALUE_CHARS and d["reason"] == "expected 0 or 1"
        back = RejectedRecord.from_dict(d)
        assert back.truncated and back.raw_bytes() == data[:MAX_RAW_BYTES]
        assert RejectedRecord.from_json(back.to_json()) == back


def test_non_utf8_and_non_ascii_dead_letters_stay_small_and_decodable():
    worst = ("\x01" * 100_000) + ("😀" * 50_000)  # every character escaped by JSON (6 or 12 bytes)
    r = RejectedRecord("t/0", 5, worst, "row", worst, "r" * 10_000)
    assert len(r.to_json()) < 40 * 1024 and r.raw_length == len(worst.encode())
    assert RejectedRecord.from_json(r.to_json()) == r
    data = b"\xff\xfe" * 60_000
    b = RejectedRecord.from_bytes("f.csv", 9, data, "row", "\\xff", "not valid UTF-8 at byte 0")
    assert b.raw_encoding == "base64" and base64.b64decode(b.raw) == data[:MAX_RAW_BYTES]
    assert (b.raw_length, b.raw_sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert len(b.to_json()) < 8 * 1024 and RejectedRecord.from_json(b.to_json()) == b


def test_the_stream_jobs_reject_json_decodes_and_is_capped_on_reading():
    """The JVM's reject (no raw_* fields, topic and partition added, offset null for files)."""
    raw = "af1," + "x" * 200_000
    d = {"schema": "auditflow.rejected/1", "source": "transactions", "offset": None, "topic": "t", "partition": 0,
         "raw": raw, "field": "value", "value": raw[:80], "reason": "not an af1 wire record of 16 fields",
         "stage": "decode"}
    r = RejectedRecord.from_dict(d)
    assert (r.offset, r.stage, r.raw_length, len(r.raw)) == (None, "decode", len(raw), MAX_RAW_BYTES)
    assert r.raw_sha256 == hashlib.sha256(raw.encode()).hexdigest()


# ------------------------------------------------------------------ non-UTF-8 bytes


def test_non_utf8_bytes_are_a_reject_on_every_path_and_the_file_goes_on(tmp_path):
    path = tmp_path / "latin1_Trans.csv"
    bad = GOOD.replace("8000EBD30", "8000EBD3\xe9").encode("latin-1")  # U+00E9 as one Latin-1 byte
    path.write_bytes(",".join(HEADER).encode() + b"\n" + bad + b"\n" + GOOD.encode() + b"\n")
    at = bad.index(b"\xe9")
    importer = list(read_transactions(path))
    producer = list(kafka_io.wire_records(path))
    summary = import_amlworld(path, tmp_path / "out")  # used to raise UnicodeDecodeError
    assert (summary.rows_read, summary.accepted, summary.rejected) == (2, 1, 1)
    assert importer[0] == producer[0]
    r = importer[0]
    assert (r.offset, r.field, r.value) == (2, "row", "\\xe9")
    assert r.reason == f"not valid UTF-8 at byte {at}: invalid continuation byte"
    assert r.raw_encoding == "base64" and r.raw_bytes() == bad
    assert isinstance(importer[1], TransactionEvent) and type(producer[1]) is tuple
    # no U+FFFD account: the replacement character never gets into an id
    assert isinstance(parse_line(bad.decode("utf-8", "replace"), 2), RejectedRecord)


# ------------------------------------------------------------------ ids: no '/' and a fixed alphabet


@pytest.mark.parametrize(("bank", "account", "field"), [
    ("01/0", "X", "From Bank"),  # '01/0' + 'X' and '01' + '0/X' were both the node '01/0/X'
    ("01", "0/X", "From Account"),
    ("010", "8000 EBD30", "From Account"),
    ("010", "8000EBD3\u00e9", "From Account"),
    ("0%2C1", "A", "From Bank"),
    ("010", "A" * 65, "From Account"),
    ("0\u200b10", "A", "From Bank"),
])
def test_ids_outside_the_id_alphabet_are_rejected_so_node_ids_cannot_collide(bank, account, field):
    line = f"2022/09/01 00:20,{bank},{account},012,80011F990,1.00,Euro,1.00,Euro,ACH,0"
    for item in both_paths(line):
        assert isinstance(item, RejectedRecord)
        assert (item.field, item.value) == (field, bank if field == "From Bank" else account)
        assert "no '/'" in item.reason
    with pytest.raises(FieldError):
        AccountRef(bank, account)


def test_the_public_datas_and_the_generators_ids_are_accepted(tmp_path):
    for bank, account in (("00220", "8001C8C51"), ("1", "8000EBD30"), ("0024856", "8090E8EB0"), ("70", "100428660")):
        line = f"2022/09/01 00:20,{bank},{account},1,80011F990,1.00,Euro,1.00,Euro,ACH,0"
        ev, kv = both_paths(line)
        assert ev.sender == AccountRef(bank, account) and type(kv) is tuple
    path, _ = write_dataset(generate(accounts=300, days=2, seed=3), tmp_path, name="ids")
    items = list(kafka_io.wire_records(path))
    assert items and all(type(i) is tuple for i in items)


def test_from_node_id_refuses_an_ambiguous_node():
    assert AccountRef.from_node_id("01/0X") == AccountRef("01", "0X")
    for node in ("01/0/X", "/X", "01/", "01", "01/\n"):
        with pytest.raises(FieldError):
            AccountRef.from_node_id(node)


# ------------------------------------------------------------------ the plausible timestamp window


@pytest.mark.parametrize("ts", ["9999/12/31 23:59", "2100/01/01 00:00", "1969/12/31 23:59", "0001/01/01 00:00"])
def test_timestamps_outside_the_plausible_window_are_rejected_naming_the_field(ts):
    line = GOOD.replace("2022/09/01 00:20", ts)
    for item in both_paths(line):
        assert isinstance(item, RejectedRecord)
        assert (item.field, item.value) == ("Timestamp", ts)
        assert "outside the plausible event-time window 1970-01-01T00:00 .. 2100-01-01T00:00" in item.reason
    for ts_ok in ("1970/01/01 00:00", "2099/12/31 23:59"):  # the window's edges: from inclusive, to exclusive
        ev, kv = both_paths(GOOD.replace("2022/09/01 00:20", ts_ok))
        assert isinstance(ev, TransactionEvent) and type(kv) is tuple


def test_the_window_is_a_parameter_of_every_reader(tmp_path):
    window = (datetime(2022, 9, 1), datetime(2022, 9, 2))
    early = GOOD.replace("2022/09/01 00:20", "2022/08/31 23:59")
    path = tmp_path / "w_Trans.csv"
    path.write_text("\n".join([",".join(HEADER), GOOD, early]) + "\n")
    for items in (list(read_transactions(path, time_window=window)), list(kafka_io.wire_records(path, time_window=window))):
        assert type(items[1]) is RejectedRecord and items[1].field == "Timestamp" and "2022-09-01T00:00" in items[1].reason
        assert type(items[0]) is not RejectedRecord
    assert isinstance(kafka_io.wire_record(early, 3), tuple)  # inside the default window
    assert isinstance(kafka_io.wire_record(early, 3, time_window=window), RejectedRecord)
    s = import_amlworld(path, tmp_path / "out", time_window=window)
    assert (s.accepted, s.rejected, s.rejects_by_field) == (1, 1, {"Timestamp": 1})


# ------------------------------------------------------------------ strict booleans


@pytest.mark.parametrize("value", ["false", "true", 0, 1, None, "0", [], {}])
def test_is_laundering_is_a_json_boolean_only(value):
    ev = parse_line(GOOD, 2)
    d = ev.to_dict()
    assert TransactionEvent.from_dict(d) == ev
    d["is_laundering"] = value  # "false" used to be read as True (bool("false"))
    with pytest.raises(FieldError) as e:
        TransactionEvent.from_dict(d)
    assert e.value.field == "is_laundering" and "true or false" in e.value.reason


@pytest.mark.parametrize("label", ["true", "false", "yes", "01", "1.0", "-1"])
def test_the_csv_label_is_0_or_1_only(label):
    for item in both_paths(GOOD[:-1] + label):
        assert isinstance(item, RejectedRecord) and (item.field, item.value) == ("Is Laundering", label)


# ------------------------------------------------------------------ decoders raise FieldError only


def _event_dict() -> dict:
    return parse_line(GOOD, 2).to_dict()


def _with(**changes) -> dict:
    d = _event_dict()
    for k, v in changes.items():
        if v is KeyError:
            del d[k]
        else:
            d[k] = v
    return d


MALFORMED_JSON = [
    "", "[", "[]", "null", "1", '"x"', "[" * 100_000, "{" * 100_000, b"\xff\xfe", '{"a": 1e400}',
    '{"schema": "auditflow.transaction/1", "source_offset": ' + "9" * 5000 + "}",
    json.dumps(_with(event_id=7)), json.dumps(_with(event_id="a/b")), json.dumps(_with(timestamp=12)),
    json.dumps(_with(timestamp="2022-9-1T0:20")), json.dumps(_with(timestamp="２０２２-09-01T00:20")),
    json.dumps(_with(from_bank=10)), json.dumps(_with(from_bank="")), json.dumps(_with(to_account=KeyError)),
    json.dumps(_with(amount_paid="1.00")), json.dumps(_with(amount_paid={"amount": 1, "currency": "Euro"})),
    json.dumps(_with(amount_paid={"amount": "1.00", "currency": ["Euro"]})),
    json.dumps(_with(amount_paid={"amount": "1" * 40, "currency": "Euro"})),
    json.dumps(_with(amount_paid={"amount": "NaN", "currency": "Euro"})),
    json.dumps(_with(payment_format=["ACH"])), json.dumps(_with(payment_format={"a": 1})),
    json.dumps(_with(source_offset="2")), json.dumps(_with(source_offset=True)), json.dumps(_with(source_offset=2.0)),
    json.dumps(_with(source_offset=10**30)), json.dumps(_with(schema=["x"])), json.dumps(_with(schema=KeyError)),
]


@pytest.mark.parametrize("text", MALFORMED_JSON, ids=range(len(MALFORMED_JSON)))
def test_transaction_json_decoder_raises_field_error_only(text):
    with pytest.raises(FieldError):
        TransactionEvent.from_json(text)


MALFORMED_WIRE = [
    None, 12, b"af1,x", "", "af1", "af1," * 20,
    "af1,tx-1,1661991600000,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0\n",
    "af1,tx-1,99999999999999999,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",  # year > 9999: OverflowError
    "af1,tx-1,-99999999999999999,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-1,1661991600000,2,010,A,011,B,-1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-1,1661991600000,2,010,A,011,B,1000,Euro,1000,Euro,-1,1170,ACH,0",
    "af1,tx-1,1661991600000,2,01/0,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx/1,1661991600000,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-1,1661991600000,2,0%2C1,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-1,1661991600000,2,010,,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-1,١٦٦,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-1,1661991600000,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,true",
]


@pytest.mark.parametrize("text", MALFORMED_WIRE, ids=range(len(MALFORMED_WIRE)))
def test_wire_decoder_raises_field_error_only(text):
    with pytest.raises(FieldError):
        TransactionEvent.from_wire(text)


@pytest.mark.parametrize("d", [
    None, [], {"schema": "auditflow.rejected/1"},
    {"schema": "auditflow.rejected/1", "source": 1, "offset": 2, "raw": "", "field": "", "value": "", "reason": "", "stage": ""},
    {"schema": "auditflow.rejected/1", "source": "s", "offset": "2", "raw": "", "field": "", "value": "", "reason": "", "stage": ""},
    {"schema": "auditflow.rejected/1", "source": "s", "offset": 2, "raw": "", "field": "row", "value": None, "reason": "r", "stage": "parse"},
    {"schema": "auditflow.rejected/1", "source": "s", "offset": 2, "raw": "", "field": "", "value": "", "reason": "r", "stage": "parse"},
    {"schema": "auditflow.rejected/1", "source": "s", "offset": 2, "raw": "", "field": "row", "value": "", "reason": "", "stage": "parse"},
    {"schema": "auditflow.rejected/1", "source": "s", "offset": 2, "raw": "!!", "field": "", "value": "", "reason": "",
     "stage": "", "raw_length": 2, "raw_sha256": "0" * 64, "raw_encoding": "base64"},
    {"schema": "auditflow.rejected/1", "source": "s", "offset": 2, "raw": "x" * 5000, "field": "", "value": "",
     "reason": "", "stage": "", "raw_length": 5000, "raw_sha256": "0" * 64},
    {"schema": "auditflow.rejected/1", "source": "s", "offset": 2, "raw": "", "field": "", "value": "", "reason": "",
     "stage": "", "raw_length": 3, "raw_sha256": "nothex"},
])
def test_reject_decoder_raises_field_error_only(d):
    with pytest.raises(FieldError):
        RejectedRecord.from_dict(d)


@pytest.mark.parametrize("text", ["[]", "{}", '{"schema": "auditflow.alert/1"}', "[" * 50_000, b"\xff",
                                  '{"schema": "auditflow.alert/1", "alert_id": "a", "event": [], "score": 1}'])
def test_alert_decoder_raises_field_error_only(text):
    with pytest.raises(FieldError):
        Alert.from_json(text)


def test_decoded_money_is_exact():
    d = _event_dict()
    d["amount_paid"] = {"amount": "0.025852", "currency": "Bitcoin"}
    assert TransactionEvent.from_dict(d).amount_paid.to_decimal() == Decimal("0.02585200")


# ------------------------------------------------------------------ produce: the broker takes every dead letter


@pytest.mark.services("kafka")
def test_produce_goes_through_a_file_of_hostile_lines(tmp_path, topic_name, bootstrap):
    """`auditflow produce` used to stop half-way on a 100 KB line (a 1.2 MB dead letter, beyond
    the broker's 1 MiB limit) and crash on non-UTF-8 bytes: now every line is sent, events to
    the topic, rejects to the DLQ, each dead letter small and decodable."""
    lines = [GOOD.encode(), GOOD[:-1].encode() + "é".encode() * 100_000, GOOD.encode().replace(b"8000EBD30", b"80\xff"),
             GOOD.replace("00:20", "00:21").encode(), GOOD.replace("2022", "9999").encode(),
             GOOD.replace("010", "01/0", 1).encode(), ROW.format("1" * 31).encode()]
    path = tmp_path / "hostile_Trans.csv"
    path.write_bytes(",".join(HEADER).encode() + b"\n" + b"\n".join(lines) + b"\n")
    options = kafka_io.ProducerOptions(bootstrap, topic_name("tx"), topic_name("dlq"), partitions=1)
    summary = kafka_io.produce_file(path, options)
    assert (summary.read, summary.produced, summary.dead_lettered) == (7, 2, 5)
    dead = kafka_io.consume_all(bootstrap, options.dlq_topic, expect=5, timeout_s=60)
    rejects = {r.offset: r for r in (RejectedRecord.from_json(d.value) for d in dead)}
    assert {n: r.field for n, r in rejects.items()} == {3: "Is Laundering", 4: "row", 6: "Timestamp", 7: "From Bank",
                                                        8: "Amount Received"}
    assert max(len(d.value) for d in dead) < 40 * 1024
    assert rejects[3].raw_length == len(lines[1]) and rejects[3].raw_sha256 == hashlib.sha256(lines[1]).hexdigest()
    assert rejects[4].raw_encoding == "base64" and rejects[4].raw_bytes() == lines[2]
    events = kafka_io.consume_all(bootstrap, options.topic, expect=2, timeout_s=60)
    assert [TransactionEvent.from_wire(e.value.decode()).source_offset for e in events] == [2, 5]
