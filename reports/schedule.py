"""Report schedules: cron expressions (croniter) cut time into periods, and the periods due.

A schedule's period runs from one cron fire time to the next: ``0 0 * * *`` gives calendar days,
``0 0 * * 1`` weeks from Monday. :func:`periods_due` lists, oldest first, every period that has
ended by ``now`` from the one holding ``start`` on, less those already done: run it after any
downtime and it catches up every missed period, run it twice and the second time there is
nothing to do. Times are naive UTC; nothing here reads the clock.

>>> from datetime import datetime
>>> [p.period_id for p in periods_due(Schedule("daily", "0 0 * * *"), start=datetime(2022, 9, 1, 7),
...                                   now=datetime(2022, 9, 3, 12), done={"daily-2022-09-01"})]
['daily-2022-09-02']
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from croniter import croniter

#: Never list more periods than this in one call (a start years back with an hourly cron).
MAX_PERIODS = 10_000


@dataclass(frozen=True, slots=True)
class Schedule:
    """A named cron schedule (``daily``, ``weekly``...)."""

    name: str
    cron: str

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").isalnum():
            raise ValueError(f"schedule name {self.name!r}: letters, digits and '-' only")
        if not croniter.is_valid(self.cron):
            raise ValueError(f"schedule {self.name}: {self.cron!r} is not a cron expression")


@dataclass(frozen=True, slots=True)
class Period:
    """``[start, end)`` of one schedule (or of an explicit range: ``schedule`` ``range``)."""

    schedule: str
    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        if not self.start < self.end:
            raise ValueError(f"period {self.start:%Y-%m-%d %H:%M}..{self.end:%Y-%m-%d %H:%M}: start must be before end")

    @property
    def period_id(self) -> str:
        """``daily-2022-09-01`` (midnight starts), ``hourly-2022-09-01T0600``; an explicit range
        names both ends: ``range-2022-09-01-2022-09-08``."""
        def t(x: datetime) -> str:
            return x.strftime("%Y-%m-%d") if (x.hour, x.minute, x.second) == (0, 0, 0) else x.strftime("%Y-%m-%dT%H%M")

        return f"{self.schedule}-{t(self.start)}" + (f"-{t(self.end)}" if self.schedule == "range" else "")

    def __contains__(self, when: datetime) -> bool:
        return self.start <= when < self.end


def period_at(schedule: Schedule, when: datetime) -> Period:
    """The schedule's period holding ``when``."""
    it = croniter(schedule.cron, when + timedelta(microseconds=1))
    start = it.get_prev(datetime)
    return Period(schedule.name, start, croniter(schedule.cron, start).get_next(datetime))


def periods_due(schedule: Schedule, *, start: datetime, now: datetime, done: Collection[str] = ()) -> list[Period]:
    """Every period of ``schedule`` from the one holding ``start`` that has ended by ``now``
    (``end <= now``), oldest first, without those whose id is in ``done``."""
    out: list[Period] = []
    period = period_at(schedule, start)
    while period.end <= now:
        if len(out) >= MAX_PERIODS:
            raise ValueError(f"schedule {schedule.name}: more than {MAX_PERIODS} periods from {start} to {now}")
        if period.period_id not in done:
            out.append(period)
        period = Period(schedule.name, period.end, croniter(schedule.cron, period.end).get_next(datetime))
    return out
