"""The plausible event-time window: one setting (AUDITFLOW_EVENT_TIME_WINDOW), its default
defined once (auditflow.limits), invalid values refused naming the variable's field."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError

from auditflow import limits
from auditflow.records import parse_time_window
from auditflow_app.settings import Settings


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


HEADER = ("Timestamp,From Bank,Account,To Bank,Account,Amount Received,Receiving Currency,Amount Paid,"
          "Payment Currency,Payment Format,Is Laundering")
ROWS = ["2022/09/01 00:20,010,8000EBD30,011,8000EBD31,10.00,Euro,10.00,Euro,ACH,0",
        "2023/05/01 10:00,010,8000EBD30,011,8000EBD31,12.00,Euro,12.00,Euro,ACH,0",  # line 3: outside
        "2022/12/31 23:59,010,8000EBD30,011,8000EBD31,14.00,Euro,14.00,Euro,ACH,0"]


def test_every_reader_of_the_app_obeys_the_setting(monkeypatch, tmp_path):
    """import (CLI), the flow's reader (training, recall) and the file job's source all reject
    the row outside AUDITFLOW_EVENT_TIME_WINDOW, at its line, naming the Timestamp field."""
    import json

    from typer.testing import CliRunner

    from auditflow_app import cli, flow
    from pipelines.stream_job import StreamSpec, write_wire_file

    csv_path = tmp_path / "w_Trans.csv"
    csv_path.write_text("\n".join([HEADER, *ROWS]) + "\n", encoding="utf-8")
    monkeypatch.setenv("AUDITFLOW_EVENT_TIME_WINDOW", "2022-01-01..2023-01-01")
    settings = Settings()

    result = CliRunner().invoke(cli.app, ["import", str(csv_path), "--out", str(tmp_path / "imp"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["rows_read"], summary["accepted"], summary["rejected"]) == (3, 2, 1)
    rejected = [json.loads(x) for x in (tmp_path / "imp" / "rejects.jsonl").read_text().splitlines()]
    assert [(r["offset"], r["field"]) for r in rejected] == [(3, "Timestamp")]

    events, rejects = flow.read_events(csv_path, settings)
    assert [e.source_offset for e in events] == [2, 4] and [(r.offset, r.field) for r in rejects] == [(3, "Timestamp")]

    spec = flow.stream_spec(tmp_path / "no-model", settings)
    assert isinstance(spec, StreamSpec) and spec.time_window == (datetime(2022, 1, 1), datetime(2023, 1, 1))
    n, wire_rejects = write_wire_file(csv_path, tmp_path / "w.af1", time_window=spec.time_window)
    assert n == 3 and [(r.offset, r.field) for r in wire_rejects] == [(3, "Timestamp")]
    assert len((tmp_path / "w.af1").read_bytes().splitlines()) == 2
