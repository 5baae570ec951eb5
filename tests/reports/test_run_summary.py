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


def rows_of(text: str) -> dict[str, str]:
    """The table's body rows as measure -> value, read back from the rendered text."""
    cells = (line.split("│")[1:3] for line in text.splitlines() if line.startswith("│"))
    return {measure.strip(): value.strip() for measure, value in cells}


def test_missing_values_show_as_dashes():
    rows = rows_of(text_of(render_run_summary({"laundering_planted": 0, "laundering_alerted": 0})))
    assert rows == {
        "Events in": "-", "Processed": "-", "Rejected (dead-letter)": "-", "Late (behind the watermark)": "-",
        "Duplicates (event id seen)": "-", "Alerts": "-", "Reports written": "-", "Reports failed": "-",
        "Recall: planted laundering alerted": "0 / 0 (n/a)", "Elapsed": "-",
    }  # no throughput without an elapsed time, no stage timings
    assert rows_of(text_of(render_run_summary({})))["Recall: planted laundering alerted"] == "-"
