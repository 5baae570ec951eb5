"""Figures for people: amounts rounded to 4 significant digits with thousands separators and a
unit (ties to the even digit), shares as whole percentages, durations in the largest whole unit
(rounded up: they are bounds).
The exact values stay in the report's appendix and its files.

>>> amount_text(4_821_357)
'USD 48,210'
>>> amount_text(760_315), amount_text(1_234), amount_text(12_345), amount_text(10_000), amount_text(123_456_789_00)
('USD 7,603', 'USD 12.34', 'USD 123.4', 'USD 100', 'USD 123.5 million')
>>> share_text(9_212, 10_000), share_text(3, 10_000), share_text(0, 5), share_text(10_000, 10_000)
('92 %', 'under 1 %', '0 %', '100 %')
>>> from datetime import timedelta
>>> duration_text(timedelta(hours=6, minutes=10)), duration_text(timedelta(days=3)), duration_text(timedelta(0))
('7 hours', '3 days', 'the same minute')
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

from auditflow.money import SIGNIFICANT, figure_text, money_plain

__all__ = ["amount_text", "count_text", "duration_text", "money_plain", "round_figures", "score_text", "share_text"]

def amount_text(cents: int, unit: str = "USD") -> str:
    """``cents`` as ``USD 48,210``: 4 significant digits (no cents at 1,000 and above), millions
    and billions in words; ``unit=""``: the number alone (a table whose header names the unit)."""
    text = figure_text(Decimal(cents) / 100)
    return f"{unit} {text}" if unit else text


def score_text(x: float) -> str:
    """A model score for people: two decimals (``0.97``); the exact value is in the appendix."""
    return f"{x:.2f}"


_NUMBER = re.compile(r"(?<![\w./-])\d[\d,]*(?:\.\d+)?(?![\w/-])")


def round_figures(text: str) -> str:
    """``text`` with every standalone number of more than 4 significant digits rounded to 4
    (ids, dates and times are not standalone numbers and stay as they are).

    >>> round_figures("amount paid: USD 7,603.15; 12 payees; 0.123456 of it; on 2022-09-01 00:16")
    'amount paid: USD 7,603; 12 payees; 0.1235 of it; on 2022-09-01 00:16'
    """

    def one(m: re.Match[str]) -> str:
        digits = m.group().replace(",", "").replace(".", "").lstrip("0")
        if len(digits.rstrip("0") if "." not in m.group() else digits) <= SIGNIFICANT:
            return m.group()
        return figure_text(Decimal(m.group().replace(",", "")))

    return _NUMBER.sub(one, text)


def share_text(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a whole percentage; ``under 1 %`` rather than a 0 that is not."""
    if whole <= 0 or part <= 0:
        return "0 %"
    pct = round(Decimal(part) * 100 / Decimal(whole))
    if pct == 0:
        return "under 1 %"
    if pct == 100 and part < whole:
        return "over 99 %"
    return f"{pct} %"


def duration_text(d: timedelta) -> str:
    """``d`` in its largest whole unit, rounded up (a bound: "within 2 hours" for 1 h 49 min):
    ``3 days``, ``7 hours``, ``25 minutes``."""
    minutes = -(-d // timedelta(minutes=1))
    if minutes <= 0:
        return "the same minute"
    for unit, size in (("day", 1440), ("hour", 60), ("minute", 1)):
        if minutes >= size:
            n = -(-minutes // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return "the same minute"  # pragma: no cover - minutes >= 1 always matches


def count_text(n: int, noun: str, plural: str | None = None) -> str:
    """``1 account``, ``5 accounts``."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"
