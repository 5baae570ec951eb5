"""The public IBM AML ("AMLworld") file formats: transactions CSV and the patterns answer key.

Readers stream (the public files hold millions of rows); every bad row becomes a
:class:`RejectedRecord` naming its line, field, value and reason, never a silent drop.

>>> fields = "2022/09/01 00:16,00220,8001C8C51,01420,8003093C1,0.025852,Bitcoin,0.025852,Bitcoin,Bitcoin,0".split(",")
>>> ev = parse_row(fields, source_offset=2)
>>> ev.sender.bank, ev.amount_paid.units, format_row(ev) == fields
('00220', 2585200, True)
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from auditflow.errors import FieldError
from auditflow.money import CURRENCIES, format_amount, parse_amount
from auditflow.records import PAYMENT_FORMATS, AccountRef, RejectedRecord, TransactionEvent
from auditflow.typologies import AMLWORLD_LABELS

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


def parse_row(fields: list[str], source_offset: int) -> TransactionEvent:
    """Parse one CSV row strictly; raises :class:`FieldError` naming field and value."""
    if len(fields) != len(HEADER):
        raise FieldError("row", ",".join(fields), f"expected {len(HEADER)} columns, got {len(fields)}")
    ts = _parse_timestamp(fields[0])
    from_bank, from_acct = _require(fields, 1), _require(fields, 2)
    to_bank, to_acct = _require(fields, 3), _require(fields, 4)
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
        sender=AccountRef(from_bank, from_acct),
        receiver=AccountRef(to_bank, to_acct),
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


def parse_line(line: str, source_offset: int, source: str = "") -> TransactionEvent | RejectedRecord:
    """Parse one raw CSV line; a bad line becomes a :class:`RejectedRecord`."""
    raw = line.rstrip("\r\n")
    try:
        if '"' in raw:
            fields = next(csv.reader([raw]))
        else:
            fields = raw.split(",") if raw else []
        return parse_row(fields, source_offset)
    except FieldError as e:
        return RejectedRecord(source, source_offset, raw, e.field, str(e.value), e.reason)
    except csv.Error as e:
        return RejectedRecord(source, source_offset, raw, "row", raw[:80], f"CSV error: {e}")


def check_header(line: str, source: str = "") -> None:
    fields = tuple(f.strip() for f in next(csv.reader([line.rstrip("\r\n")]), []))
    if fields != HEADER:
        raise FieldError("header", ",".join(fields), f"{source or 'file'} is not an AMLworld transactions CSV")


def read_transactions(path: str | Path) -> Iterator[TransactionEvent | RejectedRecord]:
    """Stream a transactions CSV: yields events and rejects in file order (line 1 is the header)."""
    source = str(path)
    with open(path, newline="", encoding="utf-8-sig") as fh:
        header = fh.readline()
        check_header(header, source)
        for lineno, line in enumerate(fh, start=2):
            if not line.strip():
                yield RejectedRecord(source, lineno, line.rstrip("\r\n"), "row", "", "blank line")
                continue
            yield parse_line(line, lineno, source)


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
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
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
