"""The plausible event-time window: one setting (AUDITFLOW_EVENT_TIME_WINDOW), its default
defined once (auditflow.limits), invalid values refused naming the variable's field."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError

from auditflow import limits
from auditflow.records import parse_time_window
from auditflow.settings import Settings


def test_the_default_is_the_limit_and_covers_the_public_data():
    assert Settings().event_time_window == limits.DEFAULT_EVENT_TIME_WINDOW == (datetime(1970, 1, 1), datetime(2100, 1, 1))
    start, end = limits.DEFAULT_EVENT_TIME_WINDOW
    assert start <= datetime(2022, 8, 1) and datetime(2023, 12, 31, 23, 59) < end  # AMLworld: 2022-2023


@pytest.mark.parametrize(("value", "expected"), [
    ("2022-01-01..2024-01-01", (datetime(2022, 1, 1), datetime(2024, 1, 1))),
    ("2022-09-01T06:00..2022-09-02T18:30", (datetime(2022, 9, 1, 6), datetime(2022, 9, 2, 18, 30))),
    (" 1900-01-01 .. 2200-01-01 ", (datetime(1900, 1, 1), datetime(2200, 1, 1))),
])
def test_the_window_comes_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("AUDITFLOW_EVENT_TIME_WINDOW", value)
    assert Settings().event_time_window == expected
    assert parse_time_window(value) == expected


@pytest.mark.parametrize("value", ["2024-01-01..2022-01-01", "2022-01-01..2022-01-01", "2022-01-01", "x..y",
                                   "2022-13-01..2023-01-01", "2022-01-01..2023-01-01..2024-01-01"])
def test_an_invalid_window_is_refused_naming_field_and_value(monkeypatch, value):
    monkeypatch.setenv("AUDITFLOW_EVENT_TIME_WINDOW", value)
    with pytest.raises(ValidationError) as e:
        Settings()
    assert "event_time_window" in str(e.value) and value in str(e.value)
