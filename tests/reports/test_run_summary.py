from __future__ import annotations

from rich.console import Console

from reports import render_run_summary


def text_of(table) -> str:
    console = Console(width=100, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_summary_lists_counts_recall_and_timing():
    text = text_of(render_run_summary({
        "events_in": 1_000_000, "processed": 999_990, "rejected": 10, "alerts": 412,
        "reports_written": 412, "laundering_planted": 50, "laundering_alerted": 41,
        "elapsed_s": 125.0, "timings": {"ingest": 20.5, "score": 80.25}, "backend": "networkx",
    }))
    for expected in ("1,000,000", "999,990", "412", "41 / 50 (82.0%)", "125.00 s", "8,000 events/s",
                     "ingest", "80.25 s", "backend", "networkx"):
        assert expected in text, expected


def test_missing_values_show_as_dashes():
    text = text_of(render_run_summary({"laundering_planted": 0, "laundering_alerted": 0}))
    assert "0 / 0 (n/a)" in text
    assert "Elapsed" in text and "-" in text
