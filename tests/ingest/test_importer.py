"""Importing an AMLworld transactions CSV: bad rows reported with line and field, good rows go on."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditflow.errors import FieldError
from auditflow.records import RejectedRecord, TransactionEvent
from ingest.amlworld import TYPOLOGIES, format_row, read_transactions, row_key
from ingest.importer import ImportSummary, import_amlworld, write_rejects
from ingest.synthetic import write_dataset

HEADER_LINE = (
    "Timestamp,From Bank,Account,To Bank,Account,Amount Received,Receiving Currency,"
    "Amount Paid,Payment Currency,Payment Format,Is Laundering"
)
GOOD = [
    "2022/09/01 00:20,010,8000EBD30,010,8000EBD30,3697.34,US Dollar,3697.34,US Dollar,Reinvestment,0",
    "2022/09/01 00:16,00220,8001C8C51,01420,8003093C1,0.025852,Bitcoin,0.025852,Bitcoin,Bitcoin,0",
    "2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Euro,2848.96,Euro,ACH,1",
    "2022/09/02 08:44,0217,80FD27570,0024856,8090E8EB0,10621.24,Shekel,10621.24,Shekel,ACH,1",
]
# (line, expected field, a fragment of the reason)
BAD = [
    ("2022/09/01 01:00,010,8000EBD30,012,80011F990,12.3.4,Euro,12.3.4,Euro,ACH,0", "Amount Received", "decimal"),
    ("2022/09/01 01:01,010,8000EBD30,012,80011F990,10.00,Dogecoin,10.00,Euro,ACH,0", "Receiving Currency", "currency"),
    ("2022/09/01 01:02,010,8000EBD30,012,,10.00,Euro,10.00,Euro,ACH,0", "To Account", "missing"),
    ("2022/13/01 01:03,010,8000EBD30,012,80011F990,10.00,Euro,10.00,Euro,ACH,0", "Timestamp", "YYYY/MM/DD"),
    ("2022/09/01 01:04,010,8000EBD30,012,80011F990,10.00,Euro,10.00,Euro,ACH,0,extra", "row", "columns"),
]


def _messy_csv(tmp_path):
    """Good and bad rows interleaved; returns the path and {line number: (field, reason)}."""
    lines = [HEADER_LINE]
    expected = {}
    for good, (bad, field, reason) in zip(GOOD, BAD):
        lines.append(good)
        lines.append(bad)
        expected[len(lines)] = (field, reason)
    lines.append(BAD[-1][0])
    expected[len(lines)] = (BAD[-1][1], BAD[-1][2])
    path = tmp_path / "messy_Trans.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, expected


def _rejects(path) -> list[RejectedRecord]:
    return [RejectedRecord.from_dict(json.loads(line)) for line in path.read_text().splitlines()]


def test_bad_rows_are_reported_with_line_and_field_and_good_rows_go_on(tmp_path):
    src, expected = _messy_csv(tmp_path)
    out = tmp_path / "out"
    s = import_amlworld(src, out)
    assert s.rows_read == s.accepted + s.rejected == 9
    assert (s.accepted, s.rejected) == (4, 5)
    rejects = _rejects(out / "rejects.jsonl")
    assert {r.offset: r.field for r in rejects} == {k: v[0] for k, v in expected.items()}
    for r in rejects:
        assert expected[r.offset][1] in r.reason
        assert r.source == str(src)
        assert r.raw == src.read_text().splitlines()[r.offset - 1]
    assert s.rejects_by_field == dict(sorted(Counter(v[0] for v in expected.values()).items()))
    # the canonical copy holds the good rows, in order, and reads back cleanly
    copy = list(read_transactions(s.normalized_csv))
    assert all(isinstance(e, TransactionEvent) for e in copy)
    assert [format_row(e) for e in copy] == [g.split(",") for g in GOOD]


def test_summary_counts(tmp_path):
    src, _ = _messy_csv(tmp_path)
    s = import_amlworld(src, tmp_path / "out")
    assert s.laundering == 2
    assert s.currencies == {"Bitcoin": 1, "Euro": 1, "Shekel": 1, "US Dollar": 1}
    assert s.payment_formats == {"ACH": 2, "Bitcoin": 1, "Reinvestment": 1}
    assert (s.first_timestamp, s.last_timestamp) == (datetime(2022, 9, 1, 0, 6), datetime(2022, 9, 2, 8, 44))
    assert not s.limit_reached and s.patterns is None
    on_disk = json.loads((tmp_path / "out" / "import_summary.json").read_text())
    assert on_disk["rows_read"] == 9 and on_disk["first_timestamp"] == "2022-09-01T00:06"
    text = s.render()
    assert "9 rows read, 4 accepted, 5 rejected" in text


def test_blank_line_counts_as_a_rejected_row(tmp_path):
    src = tmp_path / "b_Trans.csv"
    src.write_text("\n".join([HEADER_LINE, GOOD[0], "", GOOD[1]]) + "\n")
    s = import_amlworld(src, tmp_path / "out")
    assert (s.rows_read, s.accepted, s.rejected) == (3, 2, 1)
    (r,) = _rejects(tmp_path / "out" / "rejects.jsonl")
    assert (r.offset, r.field) == (3, "row")


def test_limit_stops_early(tmp_path):
    src, _ = _messy_csv(tmp_path)
    s = import_amlworld(src, tmp_path / "out", limit=3)
    assert (s.rows_read, s.accepted, s.rejected, s.limit_reached) == (3, 2, 1, True)
    s = import_amlworld(src, tmp_path / "out2", limit=9)
    assert s.rows_read == 9 and not s.limit_reached
    s = import_amlworld(src, tmp_path / "out3", limit=0)
    assert s.rows_read == 0 and s.limit_reached


def test_wrong_header_raises_before_writing(tmp_path):
    src = tmp_path / "x.csv"
    src.write_text("Timestamp,From,To\n" + GOOD[0] + "\n")
    with pytest.raises(FieldError) as e:
        import_amlworld(src, tmp_path / "out")
    assert e.value.field == "header"
    assert not (tmp_path / "out").exists()


def test_refuses_to_overwrite_its_source(tmp_path):
    src, _ = _messy_csv(tmp_path)
    before = src.read_bytes()
    with pytest.raises(ValueError):
        import_amlworld(src, tmp_path)
    assert src.read_bytes() == before


def test_non_canonical_amounts_are_normalized_and_still_match_the_answer_key(tmp_path):
    raw = "2022/09/01 00:06,021174,800737690,012,80011F990,2848.9,Euro,2848.9,Euro,ACH,1"
    src = tmp_path / "n_Trans.csv"
    src.write_text(HEADER_LINE + "\n" + raw + "\n")
    patterns = tmp_path / "n_Patterns.txt"
    patterns.write_text(f"BEGIN LAUNDERING ATTEMPT - FAN-OUT:  Max 4-degree Fan-Out\n{raw}\nEND LAUNDERING ATTEMPT - FAN-OUT\n")
    s = import_amlworld(src, tmp_path / "out", patterns=patterns)
    assert (tmp_path / "out" / "n_Trans.csv").read_text().splitlines()[1].split(",")[5] == "2848.90"
    assert (s.pattern_rows, s.pattern_rows_matched, s.laundering_in_no_attempt) == (1, 1, 0)
    assert s.attempts_by_typology == {"FAN-OUT": 1}


def test_synthetic_data_set_with_its_answer_key(tmp_path, rich_dataset):
    trans, patterns = write_dataset(rich_dataset, tmp_path / "in", name="rich")
    s = import_amlworld(trans, tmp_path / "out", patterns=patterns)
    assert s.rows_read == s.accepted == len(rich_dataset.events) and s.rejected == 0
    assert s.laundering == rich_dataset.laundering_count
    expected = Counter(a.typology for a in rich_dataset.attempts)
    assert s.attempts_by_typology == {t: expected[t] for t in TYPOLOGIES if t in expected}
    assert list(s.attempts_by_typology) == [t for t in TYPOLOGIES if t in expected]
    assert s.pattern_rows == sum(len(a.rows) for a in rich_dataset.attempts)
    assert s.pattern_rows_matched == s.pattern_rows
    assert s.laundering_in_no_attempt == rich_dataset.lone_laundering
    assert len(s.currencies) == 15
    # a canonical input is copied byte for byte
    assert (tmp_path / "out" / "rich_Trans.csv").read_bytes() == trans.read_bytes()
    assert (tmp_path / "out" / "rejects.jsonl").read_text() == ""


def test_answer_key_rows_missing_from_the_transactions(tmp_path, small_dataset):
    trans, patterns = write_dataset(small_dataset, tmp_path / "in")
    half = len(small_dataset.events) // 2
    s = import_amlworld(trans, tmp_path / "out", patterns=patterns, limit=half)
    seen = {row_key(format_row(ev)) for ev in small_dataset.events[:half] if ev.is_laundering}
    rows = [r for a in small_dataset.attempts for r in a.rows]
    assert s.pattern_rows == len(rows)
    assert s.pattern_rows_matched == sum(1 for r in rows if row_key(r) in seen)
    assert 0 < s.pattern_rows_matched < s.pattern_rows


def test_write_rejects_round_trip(tmp_path):
    rejects = [
        RejectedRecord("a.csv", 7, "raw,line", "Amount Paid", "12.3.4", "not a decimal number"),
        RejectedRecord("a.csv", 9, "", "row", "", "blank line"),
    ]
    path = tmp_path / "r.jsonl"
    assert write_rejects(path, iter(rejects)) == 2
    assert _rejects(path) == rejects
    assert write_rejects(tmp_path / "empty.jsonl", []) == 0


def test_summary_to_dict_is_json():
    s = ImportSummary("a", "b", "c", first_timestamp=datetime(2022, 9, 1))
    assert json.loads(s.to_json())["first_timestamp"] == "2022-09-01T00:00"
    assert s.attempts == 0


_good_or_bad = st.sampled_from(GOOD + [b[0] for b in BAD] + ["", "   ", '"unclosed,quote', ",,,,,,,,,,"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_good_or_bad, max_size=30))
def test_every_row_is_read_once_accepted_or_rejected(tmp_path, lines):
    src = tmp_path / "h_Trans.csv"
    src.write_text("\n".join([HEADER_LINE, *lines]) + "\n")
    out = tmp_path / "hout"
    s = import_amlworld(src, out)
    assert s.rows_read == len(lines) == s.accepted + s.rejected
    assert s.accepted == sum(1 for x in lines if x in GOOD)
    assert len((out / "rejects.jsonl").read_text().splitlines()) == s.rejected
    assert sorted(r.offset for r in _rejects(out / "rejects.jsonl")) == [
        i + 2 for i, x in enumerate(lines) if x not in GOOD
    ]
