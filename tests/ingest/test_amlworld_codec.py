"""The AMLworld codec against the traps listed in docs/amlworld-format.md."""

from __future__ import annotations

import csv
from datetime import datetime
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditflow.errors import FieldError
from auditflow.money import CURRENCIES, Money, format_amount, parse_amount
from auditflow.records import AccountRef, RejectedRecord, TransactionEvent
from ingest.amlworld import (
    HEADER,
    LaunderingAttempt,
    check_header,
    event_id_for,
    format_row,
    parse_line,
    parse_row,
    read_patterns,
    read_transactions,
    row_key,
    write_patterns,
    write_transactions,
)

HEADER_LINE = (
    "Timestamp,From Bank,Account,To Bank,Account,Amount Received,Receiving Currency,"
    "Amount Paid,Payment Currency,Payment Format,Is Laundering"
)
DOC_ROWS = [
    "2022/09/01 00:20,010,8000EBD30,010,8000EBD30,3697.34,US Dollar,3697.34,US Dollar,Reinvestment,0",
    "2022/09/01 00:16,00220,8001C8C51,01420,8003093C1,0.025852,Bitcoin,0.025852,Bitcoin,Bitcoin,0",
    "2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Euro,2848.96,Euro,ACH,1",
    "2022/09/02 08:44,0217,80FD27570,0024856,8090E8EB0,10621.24,Shekel,10621.24,Shekel,ACH,1",
]
DOC_PATTERNS = """BEGIN LAUNDERING ATTEMPT - FAN-OUT:  Max 16-degree Fan-Out
2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Euro,2848.96,Euro,ACH,1
END LAUNDERING ATTEMPT - FAN-OUT

BEGIN LAUNDERING ATTEMPT - STACK
2022/09/02 17:28,023691,8021353D0,015231,80266F880,1413.09,Euro,1413.09,Euro,ACH,1
END LAUNDERING ATTEMPT - STACK
"""


def _fields(line: str) -> list[str]:
    return line.split(",")


def _write(tmp_path, lines: list[str], name: str = "t_Trans.csv", newline: str = "\n"):
    path = tmp_path / name
    path.write_bytes((newline.join([HEADER_LINE, *lines]) + newline).encode())
    return path


@pytest.mark.parametrize("line", DOC_ROWS)
def test_documented_rows_parse_and_format_back_unchanged(line):
    ev = parse_row(_fields(line), source_offset=2)
    assert format_row(ev) == _fields(line)


def test_bank_ids_keep_leading_zeros_and_width():
    ev = parse_row(_fields(DOC_ROWS[1]), 2)
    assert (ev.sender.bank, ev.receiver.bank) == ("00220", "01420")
    ev = parse_row(_fields(DOC_ROWS[3]), 2)
    assert ev.receiver.bank == "0024856"
    assert ev.receiver.node_id == "0024856/8090E8EB0"


def test_banks_equal_as_integers_are_different_accounts():
    a = parse_row(_fields("2022/09/01 00:20,010,8000EBD30,0010,8000EBD30,1.00,US Dollar,1.00,US Dollar,ACH,0"), 2)
    assert a.sender != a.receiver
    assert not a.is_self_transfer
    assert format_row(a)[1:4:2] == ["010", "0010"]


def test_duplicate_account_header_is_positional():
    check_header(HEADER_LINE)
    assert HEADER.count("Account") == 2
    # a dict-based reader silently loses the sender's account: the codec must not be one
    row = next(csv.DictReader([HEADER_LINE, DOC_ROWS[2]]))
    assert row["Account"] == "80011F990"
    ev = parse_row(_fields(DOC_ROWS[2]), 2)
    assert (ev.sender.account, ev.receiver.account) == ("800737690", "80011F990")


def test_wrong_header_is_refused(tmp_path):
    with pytest.raises(FieldError) as e:
        check_header(HEADER_LINE.replace("Account,To Bank,Account", "From Account,To Bank,To Account"))
    assert e.value.field == "header"
    path = tmp_path / "x.csv"
    path.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(FieldError):
        list(read_transactions(path))


def test_bitcoin_precision_is_exact():
    ev = parse_row(_fields(DOC_ROWS[1]), 2)
    assert ev.amount_paid == Money("Bitcoin", 2_585_200)
    assert ev.amount_paid.to_decimal() == Decimal("0.025852")
    assert format_amount(Money("Bitcoin", 1)) == "0.00000001"
    assert format_amount(Money("Bitcoin", 123_456_789)) == "1.23456789"
    assert format_amount(Money("Bitcoin", 100_000_000)) == "1.000000"
    with pytest.raises(FieldError) as e:
        parse_amount("0.000000001", "Bitcoin", field="Amount Paid")
    assert e.value.field == "Amount Paid"
    with pytest.raises(FieldError):
        parse_amount("10.001", "US Dollar", field="Amount Paid")


def test_self_transfer_reinvestment():
    ev = parse_row(_fields(DOC_ROWS[0]), 2)
    assert ev.is_self_transfer
    assert ev.payment_format == "Reinvestment"


def test_cross_currency_row_keeps_both_amounts():
    line = "2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Euro,3333.28,US Dollar,Wire,0"
    ev = parse_row(_fields(line), 2)
    assert ev.amount_received == Money("Euro", 284896)
    assert ev.amount_paid == Money("US Dollar", 333328)
    assert format_row(ev) == _fields(line)


def test_several_rows_share_a_minute_and_keep_distinct_ids(tmp_path):
    path = _write(tmp_path, [DOC_ROWS[2], DOC_ROWS[2]])
    a, b = list(read_transactions(path))
    assert a.timestamp == b.timestamp == datetime(2022, 9, 1, 0, 6)
    assert a.event_id != b.event_id
    assert (a.source_offset, b.source_offset) == (2, 3)
    assert a.event_id == event_id_for(_fields(DOC_ROWS[2]), 2)


def test_crlf_file_reads_like_lf(tmp_path):
    lf = list(read_transactions(_write(tmp_path, DOC_ROWS, "lf.csv")))
    crlf = list(read_transactions(_write(tmp_path, DOC_ROWS, "crlf.csv", newline="\r\n")))
    assert lf == crlf
    assert all(isinstance(e, TransactionEvent) for e in lf)


def test_write_then_read_round_trip(tmp_path):
    events = [parse_row(_fields(line), i + 2) for i, line in enumerate(DOC_ROWS)]
    path = tmp_path / "rt_Trans.csv"
    assert write_transactions(path, events) == 4
    assert list(read_transactions(path)) == events
    assert path.read_text().splitlines() == [HEADER_LINE, *DOC_ROWS]


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Euro,12.3.4,Euro,ACH,1", "Amount Paid"),
        ("2022/09/01 00:06,021174,800737690,012,80011F990,-5.00,Euro,5.00,Euro,ACH,1", "Amount Received"),
        ("2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Dogecoin,2848.96,Euro,ACH,1", "Receiving Currency"),
        ("2022/09/01 00:06,021174,800737690,012,,2848.96,Euro,2848.96,Euro,ACH,1", "To Account"),
        ("2022/09/01 00:06,,800737690,012,80011F990,2848.96,Euro,2848.96,Euro,ACH,1", "From Bank"),
        ("2022-09-01 00:06,021174,800737690,012,80011F990,2848.96,Euro,2848.96,Euro,ACH,1", "Timestamp"),
        ("2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Euro,2848.96,Euro,Paypal,1", "Payment Format"),
        ("2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Euro,2848.96,Euro,ACH,yes", "Is Laundering"),
        ("2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Euro,2848.96,Euro,ACH", "row"),
    ],
)
def test_bad_line_becomes_a_reject_naming_the_field(line, field):
    r = parse_line(line + "\n", 7, "src.csv")
    assert isinstance(r, RejectedRecord)
    assert (r.field, r.offset, r.source, r.raw) == (field, 7, "src.csv", line)


def test_read_transactions_reports_blank_lines(tmp_path):
    path = _write(tmp_path, [DOC_ROWS[0], "", DOC_ROWS[1]])
    recs = list(read_transactions(path))
    assert [type(r).__name__ for r in recs] == ["TransactionEvent", "RejectedRecord", "TransactionEvent"]
    assert recs[1].offset == 3 and recs[2].source_offset == 4


def test_patterns_documented_block_parses(tmp_path):
    path = tmp_path / "p_Patterns.txt"
    path.write_text(DOC_PATTERNS)
    attempts = list(read_patterns(path))
    assert [(a.typology, a.qualifier, len(a.rows)) for a in attempts] == [
        ("FAN-OUT", "Max 16-degree Fan-Out", 1),
        ("STACK", "", 1),
    ]
    fanout_row = attempts[0].rows[0]
    assert row_key(fanout_row) == row_key(_fields(DOC_ROWS[2]))
    assert fanout_row[1] == "021174"


def test_patterns_round_trip(tmp_path):
    path = tmp_path / "p_Patterns.txt"
    path.write_text(DOC_PATTERNS)
    attempts = list(read_patterns(path))
    again = tmp_path / "again_Patterns.txt"
    assert write_patterns(again, attempts) == 2
    assert again.read_text() == DOC_PATTERNS
    assert list(read_patterns(again)) == attempts


@pytest.mark.parametrize(
    "text",
    [
        "BEGIN LAUNDERING ATTEMPT - CYCLE\nBEGIN LAUNDERING ATTEMPT - CYCLE\n",
        "END LAUNDERING ATTEMPT - CYCLE\n",
        DOC_ROWS[2] + "\n",
        "BEGIN LAUNDERING ATTEMPT - CYCLE\n" + DOC_ROWS[2] + "\n",
    ],
)
def test_malformed_patterns_raise(tmp_path, text):
    path = tmp_path / "bad_Patterns.txt"
    path.write_text(text)
    with pytest.raises(FieldError):
        list(read_patterns(path))


def test_attempt_row_keys():
    a = LaunderingAttempt("CYCLE", "Max 3 hops", (tuple(_fields(DOC_ROWS[2])), tuple(_fields(DOC_ROWS[3]))))
    assert a.row_keys() == {row_key(_fields(DOC_ROWS[2])), row_key(_fields(DOC_ROWS[3]))}


_bank = st.from_regex(r"0{1,2}[1-9][0-9]{1,5}", fullmatch=True)
_account = st.from_regex(r"8[0-9A-F]{8}", fullmatch=True)


@st.composite
def _events(draw):
    cur_paid = draw(st.sampled_from(sorted(CURRENCIES)))
    cur_recv = draw(st.sampled_from([cur_paid, *sorted(CURRENCIES)]))
    units = st.integers(min_value=0, max_value=10**14)
    return TransactionEvent(
        event_id="x",
        timestamp=draw(st.datetimes(datetime(2000, 1, 1), datetime(2099, 12, 31))).replace(second=0, microsecond=0),
        sender=AccountRef(draw(_bank), draw(_account)),
        receiver=AccountRef(draw(_bank), draw(_account)),
        amount_received=Money(cur_recv, draw(units)),
        amount_paid=Money(cur_paid, draw(units)),
        payment_format=draw(st.sampled_from(["Reinvestment", "Cheque", "ACH", "Credit Card", "Wire", "Cash", "Bitcoin"])),
        is_laundering=draw(st.booleans()),
        source_offset=2,
    )


@settings(max_examples=200, deadline=None)
@given(_events())
def test_any_event_survives_format_and_parse(ev):
    fields = format_row(ev)
    back = parse_row(fields, 2)
    assert back.amount_paid == ev.amount_paid and back.amount_received == ev.amount_received
    assert (back.sender, back.receiver, back.timestamp) == (ev.sender, ev.receiver, ev.timestamp)
    assert (back.payment_format, back.is_laundering) == (ev.payment_format, ev.is_laundering)
    assert format_row(back) == fields
