"""The one line reader (ingest.amlworld.read_lines): what a line is, and the same lines, line
numbers and event ids on every path that reads a transactions file (the importer, the producer,
the file job)."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditflow.errors import FieldError
from auditflow.records import MAX_RAW_BYTES, RejectedRecord, TransactionEvent
from ingest import amlworld, kafka_io
from ingest.amlworld import HEADER, decode_line, read_lines, read_transactions
from ingest.importer import import_amlworld

HEADER_LINE = ",".join(HEADER).encode()
ROW = b"2022/09/01 00:20,010,8000EBD30,012,80011F990,3697.34,US Dollar,3697.34,US Dollar,Reinvestment,0"
ROW2 = b"2022/09/01 00:16,00220,8001C8C51,01420,8003093C1,0.025852,Bitcoin,0.025852,Bitcoin,Bitcoin,0"


def _reference_lines(body: bytes) -> list[tuple[int, object]]:
    """The definition, written out plainly: the pieces between b"\\n" (no empty piece after a
    final line end), each through decode_line."""
    pieces = body.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    return [(n, decode_line(p, n, "f.csv")) for n, p in enumerate(pieces, start=2)]


def _file(body: bytes) -> io.BytesIO:
    return io.BytesIO(HEADER_LINE + b"\n" + body)


# hostile bodies: rows and pieces of rows with line ends, control and non-UTF-8 bytes in between
_piece = st.one_of(
    st.sampled_from([ROW, ROW2, b"", b" ", b"\r", b"\r\r", b"\x00", b"\t", b"\xff", b"\xc3", b"\xc2\x85",
                     b"\xe2\x80\xa8", b"\xe9", "é".encode(), b"\x7f", b"a,b"]),
    st.binary(max_size=20),
)
_body = st.lists(st.tuples(_piece, st.sampled_from([b"\n", b"\r\n", b"", b"\r"])), max_size=25).map(
    lambda parts: b"".join(p + end for p, end in parts))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(_body, st.sampled_from([1, 2, 3, 7, 64, 1 << 20]))
def test_chunked_reading_gives_the_lines_of_the_definition(body, chunk):
    """Whatever the bytes and wherever the chunks end, read_lines yields exactly the pieces
    between b"\\n", each as decode_line gives it (the reference here splits the whole body)."""
    got = list(read_lines(_file(body), "f.csv", chunk_bytes=chunk))
    assert got == _reference_lines(body)


def test_what_a_line_is():
    body = b"".join([
        ROW + b"\r\n",  # 2: CRLF: one \r dropped
        ROW + b"\n",  # 3
        ROW[:20] + b"\r" + ROW[20:] + b"\n",  # 4: a \r inside a line: a reject, not a line break
        ROW + b"\r\r\n",  # 5: only one \r is a line end
        b"\n",  # 6: blank
        b"   \r\n",  # 7: blank
        ROW[:30] + b"\xff" + ROW[31:] + b"\n",  # 8: not UTF-8
        ROW[:10] + b"\t" + ROW[11:] + b"\n",  # 9: a tab
        ROW[:10] + "\u2028".encode() + ROW[11:] + b"\n",  # 10: a Unicode line separator
        ROW,  # 11: the last line, without its line end
    ])
    items = dict(read_lines(_file(body), "f.csv"))
    assert sorted(items) == list(range(2, 12))
    assert items[2] == items[3] == items[11] == ROW.decode()
    expect = {4: ("U+000D", "control character U+000D at byte 20"), 5: ("U+000D", f"control character U+000D at byte {len(ROW)}"),
              6: ("", "blank line"), 7: ("", "blank line"), 8: ("\\xff", "not valid UTF-8 at byte 30: invalid start byte"),
              9: ("U+0009", "control character U+0009 at byte 10"), 10: ("U+2028", "control character U+2028 at byte 10")}
    for n, (value, reason) in expect.items():
        r = items[n]
        assert isinstance(r, RejectedRecord), n
        assert (r.offset, r.field, r.value, r.reason, r.source) == (n, "row", value, reason, "f.csv")
    assert items[8].raw_encoding == "base64" and items[8].raw_bytes() == ROW[:30] + b"\xff" + ROW[31:]
    assert items[4].raw == (ROW[:20] + b"\r" + ROW[20:]).decode()


def test_bom_header_and_a_header_that_is_not_one():
    assert list(read_lines(io.BytesIO(b"\xef\xbb\xbf" + HEADER_LINE + b"\r\n" + ROW))) == [(2, ROW.decode())]
    for bad in (b"a,b,c\n" + ROW, HEADER_LINE[:-1] + b"\xff\n" + ROW, b"", ROW + b"\n"):
        with pytest.raises(FieldError) as e:
            list(read_lines(io.BytesIO(bad), "x.csv"))
        assert e.value.field == "header"


@pytest.mark.parametrize("chunk", [1 << 20, 1000, 7])
def test_a_line_longer_than_the_limit_is_rejected_without_being_held_whole(chunk, monkeypatch):
    monkeypatch.setattr(amlworld, "MAX_LINE_BYTES", 5000)
    long = b"2022/09/01 00:20," + "é".encode() * 4000 + b"\r"  # 8017 bytes, a multi-byte character at the cut
    body = ROW + b"\n" + long + b"\n" + ROW + b"\n" + long  # the second one is the last line, no line end
    items = list(read_lines(_file(body), "f.csv", chunk_bytes=chunk))
    assert [n for n, _ in items] == [2, 3, 4, 5]
    assert items[0][1] == items[2][1] == ROW.decode()
    for n in (3, 5):
        r = items[n - 2][1]
        whole = long[:-1]  # the line without its \r, as decode_line would measure it
        assert (r.offset, r.field, r.reason) == (n, "row", "line longer than 5000 bytes")
        assert (r.raw_length, r.raw_sha256) == (len(whole), hashlib.sha256(whole).hexdigest())
        assert r.raw_encoding == "utf-8" and whole.startswith(r.raw.encode())
        assert MAX_RAW_BYTES - 1 <= len(r.raw.encode()) <= MAX_RAW_BYTES  # cut on a whole character
        assert RejectedRecord.from_json(r.to_json()) == r


def _hostile_file(tmp_path):
    """Rows with every line-level trap between good rows; (path, raw lines)."""
    lines = [
        ROW,
        ROW[:25] + b"\r" + ROW[25:],  # \r inside: one line for everyone (it used to split in two)
        ROW2,
        b"2022/09/01 00:21,010,8000EBD30,012,80011F\xe9990,1.00,Euro,1.00,Euro,ACH,0",  # Latin-1 byte
        ROW.replace(b"00:20", b"00:22"),
        b"",
        ROW2.replace(b"00:16", b"00:17") + b"\r",  # CRLF line
        ROW.replace(b"3697.34", b"9" * 31),  # a 31-digit amount
        ROW.replace(b"00:20", b"00:23"),
    ]
    path = tmp_path / "hostile_Trans.csv"
    path.write_bytes(HEADER_LINE + b"\n" + b"\n".join(lines) + b"\n")
    return path, lines


def test_importer_producer_and_file_job_read_the_same_lines_and_event_ids(tmp_path):
    """The same line numbers, event ids and rejects on the importer (import_amlworld), the
    producer (wire_records, what `auditflow produce` sends) and the file job's ingestion
    (pipelines.stream_job.write_wire_file); nothing crashes on the non-UTF-8 line."""
    from pipelines.stream_job import write_wire_file

    path, lines = _hostile_file(tmp_path)
    n_lines = len(lines)
    assert kafka_io.count_data_lines(path) == n_lines  # the progress bar counts the same lines

    summary = import_amlworld(path, tmp_path / "imp")
    rejects = [RejectedRecord.from_dict(json.loads(x)) for x in (tmp_path / "imp" / "rejects.jsonl").read_text().splitlines()]
    assert summary.rows_read == n_lines == summary.accepted + summary.rejected
    imported_rejects = {r.offset: (r.field, r.reason) for r in rejects}
    events = [e for e in read_transactions(path) if isinstance(e, TransactionEvent)]

    wired = list(kafka_io.wire_records(path))
    assert len(wired) == n_lines
    wire_events = [TransactionEvent.from_wire(w[1].decode()) for w in wired if type(w) is tuple]
    wire_rejects = {r.offset: (r.field, r.reason) for r in wired if isinstance(r, RejectedRecord)}

    n, job_rejects = write_wire_file(path, tmp_path / "events.af1")
    job_events = [TransactionEvent.from_wire(x) for x in (tmp_path / "events.af1").read_text().splitlines()]
    assert n == n_lines

    want_rejects = {3: "row", 5: "row", 7: "row", 9: "Amount Received"}  # line: field
    for got in (imported_rejects, wire_rejects, {r.offset: (r.field, r.reason) for r in job_rejects}):
        assert {k: f for k, (f, _) in got.items()} == want_rejects
        assert got[3][1].startswith("control character U+000D at byte 25")
        assert got[5][1] == "not valid UTF-8 at byte 41: invalid continuation byte"
        assert got[7][1] == "blank line"
    # the accepted lines, numbered as in the file (header = 1) with the same ids on every path
    assert [e.source_offset for e in events] == [2, 4, 6, 8, 10]
    assert events == wire_events == job_events
    texts = {n: lines[n - 2].removesuffix(b"\r") for n in (2, 4, 6, 8, 10)}
    assert [e.event_id for e in events] == [
        "tx-" + hashlib.sha256(str(n).encode() + b"|" + texts[n]).hexdigest()[:16] for n in texts]
