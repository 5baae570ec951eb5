"""Import a real AMLworld transactions CSV: validate it row by row, keep a canonical copy.

:func:`import_amlworld` streams the file (the public files hold millions of rows; nothing is
loaded whole) and writes into ``out_dir``:

* ``<same file name>`` - the accepted rows, re-written canonically by
  :func:`ingest.amlworld.format_row` under the AMLworld header. Rejected rows are left out, so line
  numbers (and therefore ``event_id``\\ s) of the copy differ from the source's after the first
  reject; rejects always name the *source* line.
* ``rejects.jsonl`` - one :class:`~auditflow.records.RejectedRecord` JSON per bad row: source
  line number (header = line 1), field, value, reason and the raw line (its first 4 KiB, with
  its length and SHA-256; base64 if it is not UTF-8).
* ``import_summary.json`` - the :class:`ImportSummary`.

The file is read by the one line reader (:func:`ingest.amlworld.read_lines`: bytes, lines end at
``\n``, non-UTF-8 or control characters in a line are that line's reject), so line numbers and
event ids are those ``auditflow produce`` and the file job give the same file. Every data line
is counted once: ``rows_read == accepted + rejected``. A wrong header is not a
row error: it raises :class:`~auditflow.errors.FieldError` before anything is written.

With the answer key (``*_Patterns.txt``) the summary also counts attempts per typology and how
many answer-key rows match an accepted transaction by :func:`ingest.amlworld.row_key` of the
canonical row (so ``3697.3`` and ``3697.30`` match).

Command line: ``auditflow import HI-Small_Trans.csv --out out/import --patterns HI-Small_Patterns.txt``.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from auditflow.errors import FieldError
from auditflow.jsonlines import json_line, open_json_lines, write_json_lines
from auditflow.limits import DEFAULT_EVENT_TIME_WINDOW
from auditflow.records import RejectedRecord
from ingest.amlworld import (
    HEADER,
    TYPOLOGIES,
    TimeWindow,
    format_row,
    parse_row,
    read_patterns,
    read_transactions,
    row_key,
)

__all__ = ["ImportSummary", "import_amlworld", "write_rejects"]

REJECTS_NAME = "rejects.jsonl"
SUMMARY_NAME = "import_summary.json"


def write_rejects(path: str | Path, rejects: Iterable[RejectedRecord]) -> int:
    """Write one :class:`RejectedRecord` JSON per line (streams ``rejects``); returns the count."""
    return write_json_lines(path, (r.to_json() for r in rejects))


@dataclass(slots=True)
class ImportSummary:
    """What an import read, kept and rejected; with an answer key, how it matched."""

    source: str
    normalized_csv: str
    rejects_path: str
    rows_read: int = 0
    accepted: int = 0
    rejected: int = 0
    laundering: int = 0  # accepted rows with Is Laundering = 1
    currencies: dict[str, int] = field(default_factory=dict)  # accepted rows using each currency
    payment_formats: dict[str, int] = field(default_factory=dict)
    rejects_by_field: dict[str, int] = field(default_factory=dict)
    first_timestamp: datetime | None = None
    last_timestamp: datetime | None = None
    limit_reached: bool = False
    patterns: str | None = None
    attempts_by_typology: dict[str, int] = field(default_factory=dict)
    pattern_rows: int = 0  # rows in the answer key, counted once per attempt listing them
    pattern_rows_matched: int = 0  # of those, rows equal to an accepted transaction
    laundering_in_no_attempt: int = 0  # accepted laundering rows the answer key does not list

    @property
    def attempts(self) -> int:
        return sum(self.attempts_by_typology.values())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("first_timestamp", "last_timestamp"):
            d[k] = d[k].strftime("%Y-%m-%dT%H:%M") if d[k] else None
        d["schema"] = "auditflow.import_summary/1"
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def render(self) -> str:
        """A few lines for people."""
        span = (
            f"{self.first_timestamp:%Y-%m-%d %H:%M} .. {self.last_timestamp:%Y-%m-%d %H:%M}"
            if self.first_timestamp and self.last_timestamp
            else "-"
        )
        lines = [
            f"{self.source}: {self.rows_read} rows read, {self.accepted} accepted, "
            f"{self.rejected} rejected{' (limit reached)' if self.limit_reached else ''}",
            f"  laundering rows: {self.laundering}; time range: {span}",
            f"  currencies: {', '.join(f'{k} {v}' for k, v in self.currencies.items()) or '-'}",
            f"  payment formats: {', '.join(f'{k} {v}' for k, v in self.payment_formats.items()) or '-'}",
        ]
        if self.rejects_by_field:
            lines.append(f"  rejects by field: {', '.join(f'{k} {v}' for k, v in self.rejects_by_field.items())}")
        if self.patterns is not None:
            lines.append(
                f"  answer key: {self.attempts} attempts "
                f"({', '.join(f'{k} {v}' for k, v in self.attempts_by_typology.items())}); "
                f"{self.pattern_rows_matched}/{self.pattern_rows} rows match accepted transactions; "
                f"{self.laundering_in_no_attempt} laundering rows in no attempt"
            )
        lines.append(f"  wrote {self.normalized_csv} and {self.rejects_path}")
        return "\n".join(lines)


def _canonical_key(row: tuple[str, ...]) -> str:
    """row_key of the canonical form of an answer-key row (its raw form if it does not parse)."""
    try:
        return row_key(format_row(parse_row(list(row), 0)))
    except FieldError:
        return row_key(row)


def _sorted_counts(counter: Counter[str], order: tuple[str, ...] = ()) -> dict[str, int]:
    first = [k for k in order if k in counter]
    rest = sorted(k for k in counter if k not in order)
    return {k: counter[k] for k in first + rest}


def import_amlworld(
    trans_csv: str | Path,
    out_dir: str | Path,
    patterns: str | Path | None = None,
    limit: int | None = None,
    *,
    time_window: TimeWindow = DEFAULT_EVENT_TIME_WINDOW,
) -> ImportSummary:
    """Validate and normalize ``trans_csv`` into ``out_dir`` (see the module docstring).

    ``limit`` stops after that many data rows (rows read, good or bad). ``time_window``: the
    plausible event times (from inclusive, to exclusive); a row outside is rejected.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    src = Path(trans_csv)
    out = Path(out_dir)
    normalized = out / src.name
    if normalized.exists() and normalized.resolve() == src.resolve():
        raise ValueError(f"out_dir {out} holds the source file: the normalized copy would overwrite it")
    rejects_path = out / REJECTS_NAME
    summary = ImportSummary(str(src), str(normalized), str(rejects_path))

    key_counts: Counter[str] = Counter()
    if patterns is not None:
        summary.patterns = str(patterns)
        typologies: Counter[str] = Counter()
        for attempt in read_patterns(patterns):
            typologies[attempt.typology] += 1
            for row in attempt.rows:
                key_counts[_canonical_key(row)] += 1
        summary.attempts_by_typology = _sorted_counts(typologies, TYPOLOGIES)
        summary.pattern_rows = sum(key_counts.values())
    matched: set[str] = set()

    records = read_transactions(src, time_window=time_window)
    try:
        rec = next(records, None)  # checks the header before anything is written
        out.mkdir(parents=True, exist_ok=True)
        currencies: Counter[str] = Counter()
        formats: Counter[str] = Counter()
        reject_fields: Counter[str] = Counter()
        lo: datetime | None = None
        hi: datetime | None = None
        with (
            open(normalized, "w", newline="", encoding="utf-8") as out_fh,
            open_json_lines(rejects_path) as rej_fh,
        ):
            writer = csv.writer(out_fh, lineterminator="\n")
            writer.writerow(HEADER)
            while rec is not None and (limit is None or summary.rows_read < limit):
                summary.rows_read += 1
                if isinstance(rec, RejectedRecord):
                    summary.rejected += 1
                    reject_fields[rec.field] += 1
                    rej_fh.write(json_line(rec.to_json()))
                else:
                    summary.accepted += 1
                    fields = format_row(rec)
                    writer.writerow(fields)
                    ts = rec.timestamp
                    lo = ts if lo is None or ts < lo else lo
                    hi = ts if hi is None or ts > hi else hi
                    formats[rec.payment_format] += 1
                    currencies[rec.amount_paid.currency] += 1
                    if rec.amount_received.currency != rec.amount_paid.currency:
                        currencies[rec.amount_received.currency] += 1
                    if rec.is_laundering:
                        summary.laundering += 1
                        if patterns is not None:
                            key = row_key(fields)
                            if key in key_counts:
                                matched.add(key)
                            else:
                                summary.laundering_in_no_attempt += 1
                rec = next(records, None)
            summary.limit_reached = rec is not None
    finally:
        records.close()

    summary.currencies = _sorted_counts(currencies)
    summary.payment_formats = _sorted_counts(formats)
    summary.rejects_by_field = _sorted_counts(reject_fields)
    summary.first_timestamp, summary.last_timestamp = lo, hi
    summary.pattern_rows_matched = sum(key_counts[k] for k in matched)
    (out / SUMMARY_NAME).write_text(summary.to_json() + "\n", encoding="utf-8")
    return summary
