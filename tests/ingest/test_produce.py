"""`auditflow produce` at speed without losing a row: the fast wire encoding and the producer.

Unit tests (no servers): :func:`ingest.kafka_io.wire_records` / :func:`wire_record`, the
producer's fast path from a CSV line to (key, value), must give exactly what the reference codec
gives (``read_transactions`` / ``parse_line`` -> ``TransactionEvent`` -> ``to_wire``, the af1 wire
form), byte for byte, or the same reject, on generated files and on fuzzed lines; every value
decodes back (``TransactionEvent.from_wire``) to the event the codec reads.

Integration tests (real Kafka from ``deploy/services up kafka`` and ``AUDITFLOW_SERVICES=1``;
see ``services`` in tests/conftest.py): a generated file with malformed rows spliced in at known lines is produced,
read back from the topic and the DLQ, and checked against what reading the CSV with the reference
codec gives. Topics are ``prodtest.<run uuid>.<name>``, deleted at the end.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditflow.money import CURRENCIES
from auditflow.records import PAYMENT_FORMATS, WIRE_FIELDS, RejectedRecord, TransactionEvent
from ingest import kafka_io
from ingest.kafka_io import ProducerOptions
from ingest.amlworld import HEADER, parse_line, read_transactions
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
    """What the codec makes of the file: (key, value) per event (to_wire), or the reject."""
    return [
        (it.sender.node_id.encode(), it.to_wire().encode()) if type(it) is TransactionEvent else it
        for it in read_transactions(path)
    ]


def event_id_of(value: bytes) -> str:
    return TransactionEvent.from_wire(value.decode()).event_id


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
    """The self-check at import passed: the fast path matches TransactionEvent.to_wire."""
    assert kafka_io._FAST_WIRE
    assert kafka_io._check_fast_wire()
    line = "2022/09/01 00:20,010,8000EBD30,012,80011F990,3697.34,US Dollar,3160.12,Euro,ACH,1"
    key, value = kafka_io._fast_wire(line, 2)
    ev = parse_line(line, 2)
    assert (key, value) == (b"010/8000EBD30", ev.to_wire().encode())
    assert value.startswith(b"af1,") and len(value.split(b",")) == len(WIRE_FIELDS)


def test_the_self_check_notices_a_changed_wire_form(monkeypatch):
    """If to_wire changed under the fast path, or the fast path's cents left auditflow.money's,
    the import-time check fails and the producer would stay on the reference path."""
    real = TransactionEvent.to_wire
    monkeypatch.setattr(TransactionEvent, "to_wire", lambda self: real(self).replace(",Euro,", ",EUR,"))
    assert not kafka_io._check_fast_wire()
    monkeypatch.undo()
    assert kafka_io._check_fast_wire()
    scale, digits, num, den = kafka_io._AMOUNTS["Yen"]
    monkeypatch.setitem(kafka_io._AMOUNTS, "Yen", (scale, digits, num + 1, den))  # a wrong rate
    assert not kafka_io._check_fast_wire()


def test_wire_records_equal_the_reference_codec_byte_for_byte(spliced_csv, monkeypatch):
    path, bad = spliced_csv
    slow = []
    real = kafka_io._reference_record
    monkeypatch.setattr(kafka_io, "_reference_record", lambda *a: slow.append(a[1]) or real(*a))
    got = list(kafka_io.wire_records(path))
    monkeypatch.undo()
    assert got == reference(path)
    # every generated row took the fast path; only the bad ones did not (the blank line is the
    # line reader's reject: it reaches neither path)
    assert sorted(slow) == sorted(n for n, b in bad.items() if b[2] != "blank line")
    rejects = {r.offset: r for r in got if isinstance(r, RejectedRecord)}
    assert sorted(rejects) == sorted(bad)
    for lineno, (raw, field, reason) in bad.items():
        assert (rejects[lineno].raw, rejects[lineno].field, rejects[lineno].source) == (raw, field, str(path))
        assert reason in rejects[lineno].reason


def test_wire_value_is_what_the_stream_job_decodes(spliced_csv):
    path, _ = spliced_csv
    lines = path.read_text(encoding="utf-8").splitlines()
    n = 0
    for lineno, line in enumerate(lines[1:], start=2):
        item = kafka_io.wire_record(line, lineno, str(path))
        if type(item) is tuple:
            key, value = item
            ev = parse_line(line, lineno, str(path))
            assert key == ev.sender.node_id.encode()
            assert TransactionEvent.from_wire(value.decode()) == ev
            n += 1
    assert n > 2000


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


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lines(), st.integers(2, 10**9))
def test_fuzzed_lines_match_parse_line_and_to_wire(line, lineno):
    """The same, against the codec directly: a value is to_wire of parse_line's event and decodes
    back to it; a reject is parse_line's, or (for an event) says why it cannot go on the wire."""
    got = kafka_io.wire_record(line, lineno, "f.csv")
    ev = parse_line(line, lineno, "f.csv") if line.strip() else None
    if type(got) is tuple:
        assert got == (ev.sender.node_id.encode(), ev.to_wire().encode())
        assert TransactionEvent.from_wire(got[1].decode()) == ev
    elif type(ev) is TransactionEvent:
        assert "not representable in the af1 wire form" in got.reason, got
    elif ev is not None:
        assert got == ev


@given(st.integers(0, 10**20), st.sampled_from(sorted(CURRENCIES)), st.integers(0, 3), st.integers(0, 4))
def test_fast_units_are_the_parsed_units(units, currency, zeros_before, zeros_after):
    from auditflow.errors import FieldError
    from auditflow.money import MAX_UNIT_DIGITS, Money, parse_amount

    scale = CURRENCIES[currency][1]
    text = f"{Money(currency, units).to_decimal():f}"
    text = "0" * zeros_before + text + ("0" * zeros_after if "." in text else "")
    if len(str(units)) > MAX_UNIT_DIGITS[currency]:  # beyond the cap: the parser refuses (the fast path's table stops earlier)
        with pytest.raises(FieldError, match="digits before the decimal point"):
            parse_amount(text, currency, field="Amount Paid")
        assert len(str(units)) > kafka_io._AMOUNTS[currency][1]
    else:
        assert kafka_io._fast_units(text, scale) == str(parse_amount(text, currency, field="Amount Paid").units)


def _decimal_cents(amount: str, currency: str) -> bytes:
    """The exact US cents of a decimal amount at the reference rate, half to even (Decimal, wide
    enough to be exact): independent of the integer arithmetic both paths use."""
    from decimal import ROUND_HALF_EVEN, Decimal, localcontext

    from auditflow.money import USD_RATES

    with localcontext(prec=80):
        return str((Decimal(amount) * USD_RATES[currency] * 100).quantize(Decimal(1), ROUND_HALF_EVEN)).encode()


@given(st.integers(0, 10**19 - 1), st.sampled_from(sorted(CURRENCIES)))
def test_the_fast_path_takes_amounts_up_to_the_cap_with_their_exact_cents(units, currency):
    """Every amount within the fast path's bound (the parser's cap) goes fast with its exact US
    cents in the value; one beyond it is left to the reference path."""
    from auditflow.money import MAX_UNIT_DIGITS, Money

    scale, max_digits, _, _ = kafka_io._AMOUNTS[currency]
    assert scale == CURRENCIES[currency][1] and max_digits == min(18, MAX_UNIT_DIGITS[currency])
    amount = kafka_io._exact_amount_text(Money(currency, units))
    got = kafka_io._fast_wire(f"2022/09/01 00:20,010,A,011,B,1.00,US Dollar,{amount},{currency},ACH,0", 2)
    if len(str(units)) > max_digits:
        assert got is None
    else:
        assert got[1].split(b",")[12] == _decimal_cents(amount, currency)


def test_cents_round_half_to_even_on_the_fast_path():
    """0.50 EUR = 58.5 US cents -> 58; 1.50 EUR = 175.5 -> 176; 0.00001 XBT = 11.5 -> 12; and the
    ties the self-check probes are true ties, rounded as Decimal rounds them."""
    from auditflow.money import USD_CENT_FACTORS, Money

    def cents(amount: str, currency: str) -> bytes:  # the value's paid_usd_cents
        _, value = kafka_io._fast_wire(f"2022/09/01 00:20,010,A,011,B,1.00,US Dollar,{amount},{currency},ACH,0", 2)
        return value.split(b",")[12]

    assert [cents(a, "Euro") for a in ("0.50", "1.50")] == [b"58", b"176"]
    assert cents("0.00001", "Bitcoin") == b"12"
    for cur, (num, den) in USD_CENT_FACTORS.items():
        for u in kafka_io._ties(num, den):
            assert (u * num) % den * 2 == den, cur  # a true tie
            amount = kafka_io._exact_amount_text(Money(cur, u))
            assert cents(amount, cur) == _decimal_cents(amount, cur), (cur, u)


def test_amounts_up_to_the_cap_go_fast_and_decode_and_beyond_it_are_the_parsers_rejects():
    """The per-currency digit cap (auditflow.money.MAX_AMOUNT_DIGITS: units and US cents fit 18
    digits, so a signed 64-bit integer): at the cap the fast path takes the row and the value
    decodes back; one digit more, on either path, is the parser's reject naming the amount, its
    text and the cap (it used to parse, then fail later: decimal.InvalidOperation, Neo4j)."""
    row = "2022/09/01 00:20,010,A,011,B,{},{},{},{},ACH,0"
    fits = row.format("9999999999999999.99", "US Dollar", "1.00", "US Dollar")  # 18-digit units and cents
    assert kafka_io.wire_record(fits, 2) == kafka_io._fast_wire(fits, 2) is not None
    euro_cap = row.format("1.00", "US Dollar", "999999999999999.99", "Euro")  # 15 digits: cents 116999999999999999
    key, value = kafka_io.wire_record(euro_cap, 2)
    assert value.split(b",")[12] == b"116999999999999999"
    assert TransactionEvent.from_wire(value.decode()) == parse_line(euro_cap, 2)
    cases = [  # (amount, currency, column): one digit past the cap, and far past it
        ("9999999999999999.99", "Euro", "Amount Paid"),  # 16 digits: cents would have 19
        ("12345678901.12345678", "Bitcoin", "Amount Received"),  # 11 digits: units would have 19
        ("1" * 17, "US Dollar", "Amount Received"),
        ("1" * 31, "Yen", "Amount Paid"),  # once: parsed, then decimal.InvalidOperation in usd_cents
        ("0" * 50 + "1" * 5000, "Yuan", "Amount Paid"),  # beyond int()'s digit limit
    ]
    for amount, cur, column in cases:
        paid = column == "Amount Paid"
        line = row.format("1.00" if paid else amount, "US Dollar" if paid else cur, amount if paid else "1.00",
                          cur if paid else "US Dollar")
        assert kafka_io._fast_wire(line, 3) is None
        for rej in (kafka_io.wire_record(line, 3, "f.csv"), parse_line(line, 3, "f.csv")):
            assert isinstance(rej, RejectedRecord), amount
            assert (rej.offset, rej.field, rej.value) == (3, column, amount[:197] + "..." if len(amount) > 200 else amount)
            assert f"more than {16 if cur != 'Bitcoin' and cur != 'Euro' else {'Euro': 15, 'Bitcoin': 10}[cur]} digits" in rej.reason
            assert "64-bit" in rej.reason
    # '%', the wire form's escape character, is not an id character: rejected, naming the field
    pct = "2022/09/01 00:20,0%1,A,011,B,1.00,Euro,1.00,Euro,ACH,0"
    assert kafka_io._fast_wire(pct, 5) is None
    rej = kafka_io.wire_record(pct, 5)
    assert (rej.field, rej.value) == ("From Bank", "0%1")


# ------------------------------------------------------------------------------ integration: Kafka


TOPIC_PREFIX = "prodtest"  # see topic_name in conftest.py


PARTITIONS = 3


@pytest.fixture(scope="module")
def produced(spliced_csv, topic_name, bootstrap):
    """The spliced file produced once; (options, summary, progress calls, topic records, DLQ records)."""
    options = ProducerOptions(bootstrap, topic_name("confluent-kafka.tx"), topic_name("confluent-kafka.dlq"), PARTITIONS)
    calls: list[tuple[int, int, int]] = []
    summary = kafka_io.produce_file(spliced_csv[0], options, progress=lambda *a: calls.append(a), progress_every=250)
    n_bad = len(spliced_csv[1])
    recs = kafka_io.consume_all(bootstrap, options.topic, timeout_s=60, expect=summary.produced)
    dlq = kafka_io.consume_all(bootstrap, options.dlq_topic, timeout_s=60, expect=n_bad)
    return options, summary, calls, recs, dlq


@needs_kafka
def test_counts_add_up(produced, spliced_csv):
    _, summary, calls, recs, dlq = produced
    path, bad = spliced_csv
    n_lines = kafka_io.count_data_lines(path)
    want = reference(path)
    n_good = sum(1 for it in want if type(it) is tuple)
    assert (summary.client, summary.resumable) == ("confluent-kafka", True)
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

    options, _, _, recs, _ = produced
    path, _ = spliced_csv
    want = {event_id_of(v): (k, v) for k, v in (it for it in reference(path) if type(it) is tuple)}
    got: dict[str, tuple[bytes, bytes]] = {}
    for r in recs:
        assert r.topic == options.topic
        eid = event_id_of(r.value)
        assert eid not in got, f"{eid} arrived twice"
        got[eid] = (r.key, r.value)
        assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % PARTITIONS  # the Java client's partitioner
    assert set(got) == set(want)
    assert got == want  # keys and values byte for byte


@needs_kafka
def test_each_sender_keeps_file_order_on_one_partition(produced):
    _, _, _, recs, _ = produced
    by_key: dict[bytes, list[tuple[int, int, int]]] = defaultdict(list)
    for r in recs:
        by_key[r.key].append((TransactionEvent.from_wire(r.value.decode()).source_offset, r.partition, r.offset))
    assert len(by_key) > 50
    for key, items in by_key.items():
        items.sort()  # file order
        assert len({p for _, p, _ in items}) == 1, key
        offsets = [o for _, _, o in items]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), key


@needs_kafka
def test_each_malformed_row_is_dead_lettered_with_its_line_and_field(produced, spliced_csv):
    _, _, _, _, dlq = produced
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
    options = ProducerOptions(bootstrap, topic_name("tiny.tx"), topic_name("tiny.dlq"), 2)
    summary = kafka_io.produce_file(spliced_csv[0], options, max_unacked=64)
    n_good = sum(1 for it in reference(spliced_csv[0]) if type(it) is tuple)
    assert (summary.produced, summary.dead_lettered) == (n_good, len(spliced_csv[1]))
    recs = kafka_io.consume_all(bootstrap, options.topic, timeout_s=60, expect=n_good)
    assert len({event_id_of(r.value) for r in recs}) == len(recs) == n_good


@needs_kafka
def test_records_the_broker_refuses_raise_instead_of_vanishing(spliced_csv, topic_name, bootstrap):
    from kafka.admin import NewTopic

    tx, dlq = topic_name("refuse.tx"), topic_name("refuse.dlq")
    admin = kafka_io._admin(bootstrap)
    try:  # every batch is larger than this topic accepts
        admin.create_topics([NewTopic(tx, 2, 1, topic_configs={"max.message.bytes": "300"}), NewTopic(dlq, 2, 1)])
    finally:
        admin.close()
    with pytest.raises(kafka_io.ProduceError, match="not acknowledged"):
        kafka_io.produce_file(spliced_csv[0], ProducerOptions(bootstrap, tx, dlq, 2), create_topics=False)


def test_one_topic_for_events_and_dead_letters_is_refused_before_kafka(spliced_csv):
    """No broker answers at this address: the options are refused before anything is contacted."""
    with pytest.raises(ValueError, match="topic and DLQ topic are both 'same'"):
        kafka_io.produce_file(spliced_csv[0], ProducerOptions("127.0.0.1:1", "same", "same", 3))
    with pytest.raises(ValueError, match="progress_every must be positive"):
        kafka_io.produce_file(spliced_csv[0], ProducerOptions("127.0.0.1:1", "tx", "dlq", 3), progress_every=0)
