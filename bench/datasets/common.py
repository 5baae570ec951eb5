"""What the converters share: the AMLworld fields, ids, amounts, minutes, the answer key, a set on disk.

Pure standard library, no import of the product: the product's reader checks what these write
(``build.py`` after every set, ``tests/bench_datasets``), so it must not also be what writes it.

>>> account_id(15), bank_id(0), amount("1.2345678E7"), amount("100.0"), hhmm(605)
('8000000F0', '001', '12345678.00', '100.00', '10:05')
>>> day_minutes(3, seed=3, day="2022-09-01") == day_minutes(3, seed=3, day="2022-09-01")
True
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import random
import shutil
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path

from ingest.amlworld import HEADER as AMLWORLD_HEADER

#: The AMLworld transactions header (``Account`` twice: sender, then receiver): the product's own.
HEADER = AMLWORLD_HEADER
#: Neither source has currencies; their amounts are read as US dollars.
CURRENCY = "US Dollar"
#: The eight AMLworld typology labels, as the answer key spells them.
TYPOLOGIES = ("FAN-OUT", "FAN-IN", "GATHER-SCATTER", "SCATTER-GATHER", "CYCLE", "RANDOM", "BIPARTITE", "STACK")
MINUTES_PER_DAY = 24 * 60
_CENT = Decimal("0.01")


def account_id(n: int | str) -> str:
    """The AMLworld-like account number of a source's integer account id: ``8``, the id as seven
    hex digits, ``0`` (nine characters, as in the public files; one to one, so reversible)."""
    v = int(n)
    if not 0 <= v < 16**7:
        raise ValueError(f"account id {n!r} outside 0..{16**7 - 1}")
    return f"8{v:07X}0"


def bank_id(index: int) -> str:
    """The bank id string of the ``index``-th bank (0-based): ``001``, ``002``, ... (a string:
    AMLworld bank ids keep their leading zeros)."""
    if not 0 <= index < 999:
        raise ValueError(f"bank index {index} outside 0..998")
    return f"{index + 1:03d}"


def amount(text: str | float) -> str:
    """A source amount (``125.05``, ``100.0``, ``1.2345678E7``, a float's repr) as fiat text
    with two decimals, rounded half to even."""
    try:
        d = Decimal(str(text).strip())
    except InvalidOperation:
        raise ValueError(f"not an amount: {text!r}") from None
    if not d.is_finite() or d < 0:
        raise ValueError(f"not a non-negative amount: {text!r}")
    return f"{d.quantize(_CENT, rounding=ROUND_HALF_EVEN):f}"


def day_minutes(n: int, *, seed: int, day: str) -> list[int]:
    """Minutes of the day (0..1439) for a day's ``n`` transactions, in order: ``n`` draws of
    ``random.Random(f"{seed}:{day}").randrange(1440)``, sorted. The k-th transaction of the day
    (in the source's order) gets the k-th minute, so the source's order within a day is kept;
    several can share a minute, as in the public files."""
    rng = random.Random(f"{seed}:{day}")
    return sorted(rng.randrange(MINUTES_PER_DAY) for _ in range(n))


def hhmm(minute: int) -> str:
    if not 0 <= minute < MINUTES_PER_DAY:
        raise ValueError(f"minute {minute} outside a day")
    return f"{minute // 60:02d}:{minute % 60:02d}"


def row(ts: str, from_bank: str, from_acct: str, to_bank: str, to_acct: str, amt: str, fmt: str,
        laundering: bool) -> tuple[str, ...]:
    """One AMLworld row (same amount and currency received and paid)."""
    return (ts, from_bank, from_acct, to_bank, to_acct, amt, CURRENCY, amt, CURRENCY, fmt, "1" if laundering else "0")


@dataclass(frozen=True, slots=True)
class Block:
    """One answer-key attempt: typology label, free-text qualifier, its rows (AMLworld fields)."""

    typology: str
    qualifier: str
    rows: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        if self.typology not in TYPOLOGIES:
            raise ValueError(f"not an AMLworld typology: {self.typology!r}")
        if not self.rows:
            raise ValueError("an attempt without rows")


def csv_line(fields: Sequence[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(fields)
    return buf.getvalue()


def patterns_text(blocks: Iterable[Block]) -> str:
    """The ``_Patterns.txt`` text: per block ``BEGIN LAUNDERING ATTEMPT - T`` (``:  qualifier``
    when there is one), its rows, ``END LAUNDERING ATTEMPT - T``; a blank line between blocks."""
    parts = []
    for b in blocks:
        head = f"BEGIN LAUNDERING ATTEMPT - {b.typology}" + (f":  {b.qualifier}" if b.qualifier else "")
        parts.append("\n".join([head, *(csv_line(r) for r in b.rows), f"END LAUNDERING ATTEMPT - {b.typology}"]) + "\n")
    return "\n".join(parts)


def transactions_text(rows: Iterable[Sequence[str]]) -> str:
    return "\n".join([csv_line(HEADER), *(csv_line(r) for r in rows)]) + "\n"


def summary(rows: Sequence[Sequence[str]], blocks: Sequence[Block]) -> dict:
    """Counts of a converted set, for its meta."""
    laundering = sum(1 for r in rows if r[10] == "1")
    by_typology: dict[str, int] = {}
    for b in blocks:
        by_typology[b.typology] = by_typology.get(b.typology, 0) + 1
    accounts = {(r[1], r[2]) for r in rows} | {(r[3], r[4]) for r in rows}
    spans: dict[str, list[float]] = {}
    sizes: dict[str, list[int]] = {}
    for b in blocks:
        times = [datetime.strptime(r[0], "%Y/%m/%d %H:%M") for r in b.rows]
        spans.setdefault(b.typology, []).append((max(times) - min(times)).total_seconds() / 86400)
        sizes.setdefault(b.typology, []).append(len(b.rows))

    def spread(values: dict) -> dict:  # typology -> [min, median, max]
        return {k: [round(x, 2) for x in (min(v), statistics.median(v), max(v))] for k, v in sorted(values.items())}

    return {
        "rows": len(rows),
        "laundering_rows": laundering,
        "laundering_rate": round(laundering / len(rows), 6) if rows else 0.0,
        "accounts": len(accounts),
        "banks": len({a[0] for a in accounts}),
        "first_timestamp": min((r[0] for r in rows), default=None),
        "last_timestamp": max((r[0] for r in rows), default=None),
        "attempts": len(blocks),
        "attempts_by_typology": dict(sorted(by_typology.items())),
        "pattern_rows": sum(len(b.rows) for b in blocks),
        "laundering_rows_in_attempts": len({r for b in blocks for r in b.rows}),
        "attempt_span_days": spread(spans),  # first to last transfer of an attempt
        "attempt_rows": spread(sizes),
    }


def cache_key(obj: object) -> str:
    """SHA-256 of the canonical JSON of ``obj`` (what a set was made from)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def set_paths(out_dir: Path, name: str) -> dict[str, Path]:
    return {"trans": out_dir / f"{name}_Trans.csv", "patterns": out_dir / f"{name}_Patterns.txt",
            "meta": out_dir / "meta.json"}


def cached_meta(out_dir: Path, name: str, key: str) -> dict | None:
    """The set's meta if all three files are there and it was made from ``key``; else None."""
    paths = set_paths(out_dir, name)
    if not all(p.is_file() for p in paths.values()):
        return None
    try:
        meta = json.loads(paths["meta"].read_text())
    except ValueError:
        return None
    return meta if meta.get("cache_key") == key else None


def write_set(out_dir: Path, name: str, rows: Iterable[Sequence[str]], blocks: Iterable[Block],
              meta: dict) -> dict[str, Path]:
    """Write ``<name>_Trans.csv``, ``<name>_Patterns.txt`` and ``meta.json`` into ``out_dir``,
    whole or not at all (into a sibling folder first, then renamed over the old one)."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    paths = set_paths(tmp, name)
    paths["trans"].write_text(transactions_text(rows), encoding="utf-8", newline="")
    paths["patterns"].write_text(patterns_text(blocks), encoding="utf-8", newline="")
    paths["meta"].write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    return set_paths(out_dir, name)
