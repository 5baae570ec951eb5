"""The public IBM AML ("AMLworld") file formats: transactions CSV and the patterns answer key.

Readers stream (the public files hold millions of rows); every bad row becomes a
:class:`RejectedRecord` naming its line, field, value and reason, never a silent drop.

**One line reader**, :func:`read_lines`, for every path that reads a transactions file (the
importer, ``auditflow produce``, the file job): it reads bytes, and a *line* is what lies between
two ``b"\n"`` (one trailing ``b"\r"`` is dropped: CRLF files read like LF files); line 1 is the
header (a UTF-8 BOM before it is dropped). A data line that is not UTF-8 (``row``, the reason names
the byte offset), holds any other control character (``\r`` included; ``row``, its byte offset)
or is blank becomes a reject; so do a line's fields that break the strict schema of
:func:`parse_row`: ids by :data:`~auditflow.records.ID_PATTERN`, amounts within their currency's
cap (:data:`~auditflow.money.MAX_AMOUNT_DIGITS`), a timestamp inside the plausible window
(``time_window``, default :data:`~auditflow.limits.DEFAULT_EVENT_TIME_WINDOW`), a ``0``/``1``
label. So every path gives the same line numbers, and the same event ids, for the same file.

>>> fields = "2022/09/01 00:16,00220,8001C8C51,01420,8003093C1,0.025852,Bitcoin,0.025852,Bitcoin,Bitcoin,0".split(",")
>>> ev = parse_row(fields, source_offset=2)
>>> ev.sender.bank, ev.amount_paid.units, format_row(ev) == fields
('00220', 2585200, True)
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from auditflow.errors import FieldError, InputError
from auditflow.limits import DEFAULT_EVENT_TIME_WINDOW
from auditflow.money import CURRENCIES, format_amount, parse_amount
from auditflow.records import (
    ID_PATTERN,
    MAX_RAW_BYTES,
    PAYMENT_FORMATS,
    AccountRef,
    RejectedRecord,
    TransactionEvent,
    check_event_time,
    check_id,
)
from auditflow.typologies import AMLWORLD_LABELS

TimeWindow = tuple[datetime, datetime]  # plausible event times: from (inclusive), to (exclusive)

HEADER = (
    "Timestamp",
    "From Bank",
    "Account",
    "To Bank",
    "Account",
    "Amount Received",
    "Receiving Currency",
    "Amount Paid",
    "Payment Currency",
    "Payment Format",
    "Is Laundering",
)
_FIELD_NAMES = (
    "Timestamp",
    "From Bank",
    "From Account",
    "To Bank",
    "To Account",
    "Amount Received",
    "Receiving Currency",
    "Amount Paid",
    "Payment Currency",
    "Payment Format",
    "Is Laundering",
)
_TS_FORMAT = "%Y/%m/%d %H:%M"


def row_key(fields: Iterable[str]) -> str:
    """Content key of a row (used to match answer-key rows to transactions)."""
    return hashlib.sha256(",".join(f.strip() for f in fields).encode()).hexdigest()[:16]


def event_id_for(fields: list[str], source_offset: int) -> str:
    """Stable id: the row's content plus its line, so identical rows stay distinct events."""
    digest = hashlib.sha256(f"{source_offset}|{','.join(fields)}".encode()).hexdigest()
    return "tx-" + digest[:16]


def _parse_timestamp(text: str) -> datetime:
    t = text.strip()
    # Fixed layout YYYY/MM/DD HH:MM, parsed by slicing (strptime costs ~20 us a row).
    if len(t) == 16 and t[4] == t[7] == "/" and t[10] == " " and t[13] == ":":
        parts = (t[0:4], t[5:7], t[8:10], t[11:13], t[14:16])
        if all(p.isdigit() and p.isascii() for p in parts):
            try:
                return datetime(*map(int, parts))
            except ValueError:
                pass
    raise FieldError("Timestamp", text, "expected YYYY/MM/DD HH:MM")


def _require(fields: list[str], i: int) -> str:
    value = fields[i].strip()
    if not value:
        raise FieldError(_FIELD_NAMES[i], fields[i], "missing value")
    return value


_IDS4 = re.compile(r"{0},{0},{0},{0}".format(ID_PATTERN.pattern))


def _id(fields: list[str], i: int) -> str:
    return check_id(_require(fields, i), _FIELD_NAMES[i])


def parse_row(fields: list[str], source_offset: int, *, time_window: TimeWindow = DEFAULT_EVENT_TIME_WINDOW) -> TransactionEvent:
    """Parse one CSV row strictly; raises :class:`FieldError` naming field and value.

    Fields may be padded with spaces; ids must match :data:`~auditflow.records.ID_PATTERN`, the
    timestamp lie in ``time_window`` and amounts within their currency's digit cap."""
    if len(fields) != len(HEADER):
        raise FieldError("row", ",".join(fields), f"expected {len(HEADER)} columns, got {len(fields)}")
    ts = _parse_timestamp(fields[0])
    if not time_window[0] <= ts < time_window[1]:
        check_event_time(ts, time_window, "Timestamp", fields[0])  # raises, naming the window
    from_bank, from_acct, to_bank, to_acct = ids = (
        fields[1].strip(), fields[2].strip(), fields[3].strip(), fields[4].strip())
    if _IDS4.fullmatch("%s,%s,%s,%s" % ids) is None:  # one match for the four; then find the culprit
        for i in (1, 2, 3, 4):
            _id(fields, i)
    recv_cur, paid_cur = _require(fields, 6), _require(fields, 8)
    for name, cur in (("Receiving Currency", recv_cur), ("Payment Currency", paid_cur)):
        if cur not in CURRENCIES:
            raise FieldError(name, cur, "unknown currency")
    received = parse_amount(fields[5], recv_cur, field="Amount Received")
    paid = parse_amount(fields[7], paid_cur, field="Amount Paid")
    fmt = _require(fields, 9)
    if fmt not in PAYMENT_FORMATS:
        raise FieldError("Payment Format", fmt, "unknown payment format")
    label = fields[10].strip()
    if label not in ("0", "1"):
        raise FieldError("Is Laundering", fields[10], "expected 0 or 1")
    return TransactionEvent(
        event_id=event_id_for([f.strip() for f in fields], source_offset),
        timestamp=ts,
        sender=AccountRef._checked(from_bank, from_acct),
        receiver=AccountRef._checked(to_bank, to_acct),
        amount_received=received,
        amount_paid=paid,
        payment_format=fmt,
        is_laundering=label == "1",
        source_offset=source_offset,
    )


def format_row(ev: TransactionEvent) -> list[str]:
    return [
        ev.timestamp.strftime(_TS_FORMAT),
        ev.sender.bank,
        ev.sender.account,
        ev.receiver.bank,
        ev.receiver.account,
        format_amount(ev.amount_received),
        ev.amount_received.currency,
        format_amount(ev.amount_paid),
        ev.amount_paid.currency,
        ev.payment_format,
        "1" if ev.is_laundering else "0",
    ]


# ---------------------------------------------------------------- the one line reader

#: Control characters no line may hold: C0 (tab and CR included), DEL, C1, and the Unicode line
#: and paragraph separators (``str.splitlines`` splits on all of them).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_BOM = b"\xef\xbb\xbf"


def _strip_line_end(data: bytes) -> bytes:
    """``data`` without one trailing ``b"\n"``, then without one trailing ``b"\r"``."""
    if data[-1:] == b"\n":
        data = data[:-1]
    if data[-1:] == b"\r":
        data = data[:-1]
    return data


def _str_line_end(text: str) -> str:
    if text[-1:] == "\n":
        text = text[:-1]
    if text[-1:] == "\r":
        text = text[:-1]
    return text


def check_line(text: str, lineno: int, source: str = "") -> str | RejectedRecord:
    """``text`` (a line without its end) if it may hold a row: no control character and not
    blank; its :class:`RejectedRecord` otherwise (field ``row``, the reason naming the offset)."""
    if not text.isprintable():  # fast: every printable line passes here
        m = _CONTROL.search(text)
        if m is not None:
            at = len(text[: m.start()].encode("utf-8", "surrogatepass"))
            return RejectedRecord(source, lineno, text, "row", f"U+{ord(m.group()):04X}",
                                  f"control character U+{ord(m.group()):04X} at byte {at}")
    if not text.strip():
        return RejectedRecord(source, lineno, text, "row", "", "blank line")
    return text


def decode_line(data: bytes, lineno: int, source: str = "") -> str | RejectedRecord:
    """One line of the file as bytes (with or without its line end) -> its text, checked by
    :func:`check_line`, or the reject: not UTF-8 (field ``row``, the byte offset and the bad bytes)."""
    data = _strip_line_end(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = data[e.start : e.end].decode("ascii", "backslashreplace")
        return RejectedRecord.from_bytes(source, lineno, data, "row", bad,
                                         f"not valid UTF-8 at byte {e.start}: {e.reason}")
    return check_line(text, lineno, source)


def check_header(line: str, source: str = "") -> None:
    try:
        fields = tuple(f.strip() for f in next(csv.reader([_str_line_end(line)]), []))
    except csv.Error:
        fields = ()
    if fields != HEADER:
        raise FieldError("header", ",".join(fields)[:200], f"{source or 'file'} is not an AMLworld transactions CSV")


#: A line longer than this is a reject without being held in memory whole (its first
#: MAX_RAW_BYTES, length and SHA-256 are kept); no AMLworld row comes near it.
MAX_LINE_BYTES = 1 << 20
_CHUNK_BYTES = 1 << 20
#: The C0 controls and DEL but \n and \r, as bytes (for bytes.translate: a fast scan).
_C0_BYTES = bytes(range(0x20)).replace(b"\n", b"").replace(b"\r", b"") + b"\x7f"
#: The other control characters check_line refuses, in UTF-8: C1, U+2028, U+2029.
_NON_ASCII_CONTROLS = re.compile(rb"\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]")


def _no_controls(block: bytes) -> bool:
    """Whether no line of ``block`` (lines joined by \n; the last one's end cut off) holds a
    control character check_line refuses: a \r may only end a line."""
    if len(block.translate(None, _C0_BYTES)) != len(block):
        return False
    cr = block.count(b"\r")
    if cr and cr != block.count(b"\r\n") + block.endswith(b"\r"):
        return False
    return block.isascii() or _NON_ASCII_CONTROLS.search(block) is None


def check_transactions_file(path: str | Path) -> None:
    """Before a job starts on ``path``: it is an AMLworld transactions CSV with at least one line
    after its header. :class:`~auditflow.errors.InputError` naming the file when it is missing,
    empty or a header only; :class:`~auditflow.errors.FieldError` naming its header when that is not
    the AMLworld one (what a job would find only after starting)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p} is not a file (expected an AMLworld transactions CSV)")
    if p.stat().st_size == 0:
        raise InputError(f"{p} is empty: expected an AMLworld transactions CSV, a header ({','.join(HEADER)}) "
                         "and a line per transfer")
    if next(read_lines(p), None) is None:
        raise InputError(f"{p} holds the header and no transfer: nothing to run")


def read_lines(file: str | Path | BinaryIO, source: str | None = None, *,
               chunk_bytes: int = _CHUNK_BYTES) -> Iterator[tuple[int, str | RejectedRecord]]:
    """The one line reader: ``(line number, text)`` of every data line of a transactions CSV (a
    path, or a binary file positioned at its start), the text as :func:`decode_line` gives it
    (checked, without its line end), or ``(line number, RejectedRecord)`` in its place. Checks the
    header first (:class:`~auditflow.errors.FieldError` if it is not the AMLworld one); line 1 is
    the header. Every data line yields exactly one item (see the module docstring for what a line
    is); a line of more than :data:`MAX_LINE_BYTES` is rejected as such, never held whole.

    It reads ``chunk_bytes`` (at most MAX_LINE_BYTES) at a time and checks a chunk's whole lines
    together (UTF-8, control characters) where it can; the items are :func:`decode_line`'s."""
    if isinstance(file, (str, Path)):
        with open(file, "rb") as fh:
            yield from read_lines(fh, str(file) if source is None else source, chunk_bytes=chunk_bytes)
        return
    source = "" if source is None else source
    header = file.readline(MAX_LINE_BYTES)
    if header.startswith(_BOM):
        header = header[len(_BOM):]
    try:
        header_text = _strip_line_end(header).decode("utf-8")
    except UnicodeDecodeError:
        raise FieldError("header", header[:80], f"{source or 'file'} is not an AMLworld transactions CSV "
                                                "(not UTF-8)") from None
    check_header(header_text, source)
    chunk_bytes = max(1, min(chunk_bytes, MAX_LINE_BYTES))
    lineno = 1
    pending: list[bytes] = []  # pieces of a line that did not end in the chunks read so far
    pending_len = 0
    long_line: _LongLine | None = None  # that line, once longer than MAX_LINE_BYTES
    while block := file.read(chunk_bytes):
        start = 0
        if pending or long_line is not None:
            end = block.find(b"\n")
            piece = block if end < 0 else block[:end]
            if long_line is None and pending_len + len(piece) > MAX_LINE_BYTES:
                long_line, pending, pending_len = _LongLine(pending), [], 0
            if long_line is not None:
                long_line.add(piece)
            else:
                pending.append(piece)
                pending_len += len(piece)
            if end < 0:
                continue
            lineno += 1
            if long_line is not None:
                yield lineno, long_line.reject(lineno, source)
                long_line = None
            else:
                yield lineno, decode_line(b"".join(pending), lineno, source)
                pending, pending_len = [], 0
            start = end + 1
        cut = block.rfind(b"\n")
        if cut >= start:
            lineno = yield from _chunk_lines(block[start:cut], lineno, source)
            start = cut + 1
        if start < len(block):
            pending, pending_len = [block[start:]], len(block) - start
    if long_line is not None:
        yield lineno + 1, long_line.reject(lineno + 1, source)
    elif pending:  # a last line without its line end
        yield lineno + 1, decode_line(b"".join(pending), lineno + 1, source)


def _chunk_lines(block: bytes, lineno: int, source: str) -> Generator[tuple[int, str | RejectedRecord], None, int]:
    """The lines of ``block`` (whole lines, the last one's line end cut off), numbered from
    ``lineno + 1``, as decode_line gives them: UTF-8 and control characters checked once for all.
    Returns the last line's number."""
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:  # some line is not UTF-8: every line on its own
        for data in block.split(b"\n"):
            lineno += 1
            yield lineno, decode_line(data, lineno, source)
        return lineno
    clean = _no_controls(block)
    for line in text.split("\n"):
        lineno += 1
        if line[-1:] == "\r":
            line = line[:-1]
        if clean and line and line[0] != " ":  # printable, so not blank either
            yield lineno, line
        else:
            yield lineno, check_line(line, lineno, source)
    return lineno


class _LongLine:
    """A line longer than MAX_LINE_BYTES, read in pieces: its head, length and SHA-256 (of the
    line without its line end, as decode_line would measure it)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.head = b""
        self.length = 0
        self.sha = hashlib.sha256()
        self.cr = False  # a b"\r" held back: dropped if it ends the line
        for piece in pieces:
            self.add(piece)

    def _feed(self, data: bytes) -> None:
        if len(self.head) < MAX_RAW_BYTES:
            self.head += data[: MAX_RAW_BYTES - len(self.head)]
        self.length += len(data)
        self.sha.update(data)

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        if self.cr:
            self._feed(b"\r")
        self.cr = piece[-1:] == b"\r"
        self._feed(piece[:-1] if self.cr else piece)

    def reject(self, lineno: int, source: str) -> RejectedRecord:
        raw, encoding = base64.b64encode(self.head).decode("ascii"), "base64"
        for k in range(4):  # the head may end inside a character
            try:
                raw, encoding = self.head[: len(self.head) - k].decode("utf-8"), "utf-8"
                break
            except UnicodeDecodeError:
                continue
        return RejectedRecord(source, lineno, raw, "row", f"{self.length} bytes",
                              f"line longer than {MAX_LINE_BYTES} bytes", "parse", self.length,
                              self.sha.hexdigest(), encoding)


def _split_fields(text: str) -> list[str]:
    if '"' in text:
        return next(csv.reader([text]))
    return text.split(",") if text else []


def parse_text_line(text: str, source_offset: int, source: str = "", *,
                    time_window: TimeWindow = DEFAULT_EVENT_TIME_WINDOW) -> TransactionEvent | RejectedRecord:
    """Parse a line :func:`read_lines` let through (checked text, no line end)."""
    try:
        return parse_row(_split_fields(text), source_offset, time_window=time_window)
    except FieldError as e:
        return RejectedRecord(source, source_offset, text, e.field, str(e.value), e.reason)
    except csv.Error as e:
        return RejectedRecord(source, source_offset, text, "row", text[:80], f"CSV error: {e}")


def parse_line(line: str | bytes, source_offset: int, source: str = "", *,
               time_window: TimeWindow = DEFAULT_EVENT_TIME_WINDOW) -> TransactionEvent | RejectedRecord:
    """Parse one raw CSV line (text or bytes, with or without its line end) exactly as
    :func:`read_transactions` reads it at that line; a bad line becomes a :class:`RejectedRecord`."""
    text = decode_line(line, source_offset, source) if isinstance(line, bytes) else check_line(
        _str_line_end(line), source_offset, source)
    if type(text) is not str:
        return text
    return parse_text_line(text, source_offset, source, time_window=time_window)


def read_transactions(file: str | Path | BinaryIO, *, source: str | None = None,
                      time_window: TimeWindow = DEFAULT_EVENT_TIME_WINDOW) -> Iterator[TransactionEvent | RejectedRecord]:
    """Stream a transactions CSV: yields events and rejects in file order (line 1 is the header),
    one per data line, through :func:`read_lines`."""
    if source is None:
        source = str(file) if isinstance(file, (str, Path)) else ""
    for lineno, text in read_lines(file, source):
        if type(text) is str:
            yield parse_text_line(text, lineno, source, time_window=time_window)
        else:
            yield text


def write_transactions(path: str | Path, events: Iterable[TransactionEvent]) -> int:
    n = 0
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(HEADER)
        for ev in events:
            w.writerow(format_row(ev))
            n += 1
    return n


def csv_line(fields: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(fields)
    return buf.getvalue()


# ---------------------------------------------------------------- patterns (answer key)

#: Typology labels as the AMLworld answer key spells them (see :mod:`auditflow.typologies`).
TYPOLOGIES = AMLWORLD_LABELS


@dataclass(frozen=True, slots=True)
class LaunderingAttempt:
    """One ``BEGIN LAUNDERING ATTEMPT`` block: typology, optional qualifier, its rows."""

    typology: str
    qualifier: str
    rows: tuple[tuple[str, ...], ...]

    def row_keys(self) -> set[str]:
        return {row_key(r) for r in self.rows}


def write_patterns(path: str | Path, attempts: Iterable[LaunderingAttempt]) -> int:
    n = 0
    with open(path, "w", newline="", encoding="utf-8") as fh:
        for i, a in enumerate(attempts):
            if i:
                fh.write("\n")
            head = f"BEGIN LAUNDERING ATTEMPT - {a.typology}"
            fh.write(f"{head}:  {a.qualifier}\n" if a.qualifier else f"{head}\n")
            for r in a.rows:
                fh.write(csv_line(list(r)) + "\n")
            fh.write(f"END LAUNDERING ATTEMPT - {a.typology}\n")
            n += 1
    return n


def read_patterns(path: str | Path) -> Iterator[LaunderingAttempt]:
    """Stream the answer key's blocks; raises :class:`FieldError` on a malformed block."""
    current: tuple[str, str] | None = None
    rows: list[tuple[str, ...]] = []
    with open(path, "rb") as fh:
        for lineno, data in enumerate(fh, start=1):  # lines end at b"\n", as in read_lines
            try:
                text = data.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                raise FieldError(f"line {lineno}", data[:80], f"not valid UTF-8 at byte {e.start}") from None
            if not text:
                continue
            if text.startswith("BEGIN LAUNDERING ATTEMPT - "):
                if current is not None:
                    raise FieldError(f"line {lineno}", text, "BEGIN inside an open attempt")
                rest = text[len("BEGIN LAUNDERING ATTEMPT - ") :]
                typ, _, qual = rest.partition(":")
                current, rows = (typ.strip(), qual.strip()), []
            elif text.startswith("END LAUNDERING ATTEMPT - "):
                if current is None:
                    raise FieldError(f"line {lineno}", text, "END without BEGIN")
                yield LaunderingAttempt(current[0], current[1], tuple(rows))
                current = None
            else:
                if current is None:
                    raise FieldError(f"line {lineno}", text, "row outside an attempt")
                rows.append(tuple(f.strip() for f in next(csv.reader([text]))))
    if current is not None:
        raise FieldError("patterns", current[0], "file ends inside an attempt")
