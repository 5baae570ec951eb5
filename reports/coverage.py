"""What the processed data covers: its transfers counted per hour of event time, so that a signed
period summary states what it saw -- how many transfers, the first and the last, the gaps -- and
is written only for a period the data covers.

A **gap** is a run of whole hours of event time without any transfer. The data **covers** a period when it reaches
both of its ends: the first transfer less than :data:`GAP` after the period's start (or before
it) and the last less than :data:`GAP` before its end (or after it). Gaps inside a period do not
stop its summary; they are stated in it. Times are naive UTC; nothing here reads the clock.

>>> from datetime import datetime as dt
>>> from reports.schedule import Period
>>> cov = Coverage.of([dt(2022, 9, 1, 0, 5), dt(2022, 9, 1, 13, 0), dt(2022, 9, 2, 23, 30)])
>>> day = lambda d: Period("daily", dt(2022, 9, d), dt(2022, 9, d + 1))
>>> cov.covers(day(1)), cov.covers(day(2)), cov.covers(day(3))
(True, True, False)
>>> seen = cov.within(Period("daily", dt(2022, 9, 1), dt(2022, 9, 2)))
>>> seen.transfers, f"{seen.first:%H:%M}", [(f"{a:%H:%M}", f"{b:%H:%M}") for a, b in seen.gaps]
(2, '00:05', [('01:00', '13:00'), ('14:00', '00:00')])
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from reports.schedule import Period

#: the shortest stretch without a transfer that counts as a gap in the data
GAP = timedelta(hours=1)
COVERAGE_SCHEMA = "auditflow.coverage/1"
_HOUR = "%Y-%m-%dT%H"


def _hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Seen:
    """What the data holds of one period: transfers, first and last, and the gaps."""

    transfers: int
    first: datetime | None
    last: datetime | None
    gaps: tuple[tuple[datetime, datetime], ...]

    def to_extra(self) -> tuple[tuple[str, str], ...]:
        """As manifest ``extra`` fields (what the summary states, signed)."""
        gaps = ";".join(f"{a:%Y-%m-%dT%H:%M}..{b:%Y-%m-%dT%H:%M}" for a, b in self.gaps)
        return (
            ("transfers_in_data", str(self.transfers)),
            ("first_transfer", self.first.isoformat() if self.first else ""),
            ("last_transfer", self.last.isoformat() if self.last else ""),
            ("gaps", gaps),
        )


@dataclass(frozen=True)
class Coverage:
    """The processed data: per hour of event time, its transfers and their first and last time."""

    hours: Mapping[datetime, tuple[int, datetime, datetime]]

    @property
    def first(self) -> datetime | None:
        return min((f for _, f, _ in self.hours.values()), default=None)

    @property
    def last(self) -> datetime | None:
        return max((last for _, _, last in self.hours.values()), default=None)

    @property
    def transfers(self) -> int:
        return sum(n for n, _, _ in self.hours.values())

    @classmethod
    def of(cls, times: Iterable[datetime]) -> Coverage:
        return cls({}).merged_times(times)

    def merged_times(self, times: Iterable[datetime]) -> Coverage:
        hours = dict(self.hours)
        for t in times:
            h = _hour(t)
            n, f, last = hours.get(h, (0, t, t))
            hours[h] = (n + 1, min(f, t), max(last, t))
        return Coverage(hours)

    def merged(self, other: Coverage) -> Coverage:
        """Two runs' data together (a run appended to its folder)."""
        hours = dict(self.hours)
        for h, (n, f, last) in other.hours.items():
            m, g, k = hours.get(h, (0, f, last))
            hours[h] = (m + n, min(f, g), max(last, k))
        return Coverage(hours)

    def covers(self, period: Period) -> bool:
        """The data reaches both ends of ``period`` (see the module docstring)."""
        first, last = self.first, self.last
        if first is None or last is None:
            return False
        return first < period.start + GAP and last > period.end - GAP

    def within(self, period: Period) -> Seen:
        """What the data holds of ``period``: its transfers (those of the hours that start in it),
        the first and the last, and its gaps: runs of whole hours without a transfer."""
        start, end = _hour(period.start), period.end
        inside = [(h, v) for h, v in sorted(self.hours.items()) if start <= h < end]
        gaps, h, run = [], start, None
        while h < end:
            empty = h not in self.hours
            if empty and run is None:
                run = h
            if not empty and run is not None:
                gaps.append((run, h))
                run = None
            h += GAP
        if run is not None:
            gaps.append((run, end))
        return Seen(sum(n for _, (n, _, _) in inside), min((f for _, (_, f, _) in inside), default=None),
                    max((la for _, (_, _, la) in inside), default=None), tuple(gaps))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": COVERAGE_SCHEMA,
            "hours": {
                h.strftime(_HOUR): [n, f.isoformat(), la.isoformat()] for h, (n, f, la) in sorted(self.hours.items())
            },
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Coverage:
        if d.get("schema") != COVERAGE_SCHEMA:
            raise ValueError(f"coverage record: expected schema {COVERAGE_SCHEMA}, got {d.get('schema')!r}")
        return cls({datetime.strptime(h, _HOUR): (int(n), datetime.fromisoformat(f), datetime.fromisoformat(la))
                    for h, (n, f, la) in d["hours"].items()})  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> Coverage | None:
        """The record in ``path``; None when there is none (no run processed data there)."""
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None

    def write(self, path: str | Path) -> None:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)
