"""Cron schedules cut time into periods; the periods due catch up after downtime and skip what
is done."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from reports.schedule import Period, Schedule, period_at, periods_due

DAILY = Schedule("daily", "0 0 * * *")
WEEKLY = Schedule("weekly", "0 0 * * 1")


def test_a_daily_period_is_the_calendar_day_holding_the_time():
    p = period_at(DAILY, datetime(2022, 9, 1, 0, 16))
    assert (p.start, p.end, p.period_id) == (datetime(2022, 9, 1), datetime(2022, 9, 2), "daily-2022-09-01")
    assert period_at(DAILY, datetime(2022, 9, 1)).start == datetime(2022, 9, 1)  # a fire time opens its period


def test_a_weekly_period_runs_monday_to_monday():
    p = period_at(WEEKLY, datetime(2022, 9, 1, 12))  # a Thursday
    assert (p.start, p.end) == (datetime(2022, 8, 29), datetime(2022, 9, 5))
    assert p.start.weekday() == 0 and p.end - p.start == timedelta(days=7)


def test_only_ended_periods_are_due_oldest_first():
    due = periods_due(DAILY, start=datetime(2022, 9, 1, 7), now=datetime(2022, 9, 4, 0, 0))
    assert [p.period_id for p in due] == ["daily-2022-09-01", "daily-2022-09-02", "daily-2022-09-03"]
    assert periods_due(DAILY, start=datetime(2022, 9, 1, 7), now=datetime(2022, 9, 1, 23, 59)) == []


def test_catch_up_after_downtime_lists_every_missed_period_once():
    done = {p.period_id for p in periods_due(DAILY, start=datetime(2022, 9, 1), now=datetime(2022, 9, 3))}
    assert done == {"daily-2022-09-01", "daily-2022-09-02"}
    # down for four days, then run again: the four missed days, none twice, none skipped
    later = periods_due(DAILY, start=datetime(2022, 9, 1), now=datetime(2022, 9, 7, 9), done=done)
    assert [p.period_id for p in later] == [f"daily-2022-09-0{d}" for d in (3, 4, 5, 6)]
    assert periods_due(DAILY, start=datetime(2022, 9, 1), now=datetime(2022, 9, 7, 9),
                       done=done | {p.period_id for p in later}) == []


def test_periods_tile_time_without_gaps_or_overlaps():
    for sched in (DAILY, WEEKLY, Schedule("sixhourly", "0 */6 * * *")):
        due = periods_due(sched, start=datetime(2022, 8, 1, 3), now=datetime(2022, 10, 1))
        assert all(a.end == b.start for a, b in zip(due, due[1:])), sched
        assert due[0].start <= datetime(2022, 8, 1, 3) < due[0].end and due[-1].end <= datetime(2022, 10, 1)
        assert len({p.period_id for p in due}) == len(due)


def test_ids_name_the_time_when_not_midnight_and_both_ends_for_a_range():
    assert Period("sixhourly", datetime(2022, 9, 1, 6), datetime(2022, 9, 1, 12)).period_id == "sixhourly-2022-09-01T0600"
    assert Period("range", datetime(2022, 9, 1), datetime(2022, 9, 8)).period_id == "range-2022-09-01-2022-09-08"


def test_bad_schedules_and_periods_are_refused():
    with pytest.raises(ValueError, match="not a cron expression"):
        Schedule("daily", "every day")
    with pytest.raises(ValueError, match="name"):
        Schedule("da ily", "0 0 * * *")
    with pytest.raises(ValueError, match="start must be before end"):
        Period("range", datetime(2022, 9, 2), datetime(2022, 9, 1))
