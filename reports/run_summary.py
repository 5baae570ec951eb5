"""The end-of-run summary for the terminal, as a :mod:`rich` table (pure: nothing is printed).

Recognised keys of the summary dict (all optional; a missing one shows as ``-``):
``events_in``, ``processed``, ``rejected``, ``late``, ``duplicates``, ``alerts``, ``reports_written``,
``reports_failed`` (reports that could not be written: the audit log names each),
``laundering_planted`` and ``laundering_alerted`` (planted laundering events in the input, and how
many of them raised an alert: recall), ``elapsed_s`` (wall seconds for the run) and ``timings``
(stage name -> seconds). Any other keys are listed after these, sorted by name.

>>> import io
>>> from rich.console import Console
>>> console = Console(file=io.StringIO(), width=60, color_system=None)
>>> console.print(render_run_summary({"events_in": 1000, "processed": 985, "rejected": 10, "late": 3,
...     "duplicates": 2, "alerts": 12, "laundering_planted": 8, "laundering_alerted": 6, "elapsed_s": 2.5}))
>>> print(console.file.getvalue())  # doctest: +NORMALIZE_WHITESPACE
                    auditflow run
┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┓
┃ Measure                            ┃         Value ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━┩
│ Events in                          │         1,000 │
│ Processed                          │           985 │
│ Rejected (dead-letter)             │            10 │
│ Late (behind the watermark)        │             3 │
│ Duplicates (event id seen)         │             2 │
│ Alerts                             │            12 │
│ Reports written                    │             - │
│ Reports failed                     │             - │
│ Recall: planted laundering alerted │ 6 / 8 (75.0%) │
│ Elapsed                            │        2.50 s │
│ Throughput                         │  400 events/s │
└────────────────────────────────────┴───────────────┘
<BLANKLINE>
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

_COUNTS = (
    ("events_in", "Events in"),
    ("processed", "Processed"),
    ("rejected", "Rejected (dead-letter)"),
    ("late", "Late (behind the watermark)"),
    ("duplicates", "Duplicates (event id seen)"),
    ("alerts", "Alerts"),
    ("reports_written", "Reports written"),
    ("reports_failed", "Reports failed"),
)
#: shown where the summary has them (runs that open cases)
_CASES = (("cases_opened", "Cases opened"), ("cases_joined", "Alerts joining an open case"))
_KNOWN = {k for k, _ in _COUNTS + _CASES} | {"laundering_planted", "laundering_alerted", "elapsed_s", "timings"}


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def recall_text(alerted: int | None, planted: int | None) -> str:
    """``6 / 8 (75.0%)``; ``-`` when unknown, ``n/a`` when nothing was planted."""
    if alerted is None or planted is None:
        return "-"
    if planted == 0:
        return f"{alerted} / 0 (n/a)"
    return f"{alerted} / {planted} ({100 * alerted / planted:.1f}%)"


def render_run_summary(summary: Mapping[str, Any], *, title: str = "auditflow run") -> Table:
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("Measure")
    table.add_column("Value", justify="right")
    for key, label in _COUNTS:
        table.add_row(label, _count(summary.get(key)))
    for key, label in _CASES:
        if key in summary:
            table.add_row(label, _count(summary[key]))
    table.add_row("Recall: planted laundering alerted",
                  recall_text(summary.get("laundering_alerted"), summary.get("laundering_planted")))
    elapsed = summary.get("elapsed_s")
    if elapsed is None:
        table.add_row("Elapsed", "-")
    else:
        table.add_row("Elapsed", f"{elapsed:.2f} s")
        events = summary.get("events_in")
        if isinstance(events, int) and elapsed > 0:
            table.add_row("Throughput", f"{events / elapsed:,.0f} events/s")
    for stage, seconds in sorted((summary.get("timings") or {}).items()):
        table.add_row(f"  {stage}", f"{seconds:.2f} s")
    for key in sorted(set(summary) - _KNOWN):
        table.add_row(key, _count(summary[key]))
    return table
