"""Fixtures of the cases tests: alert rows as a run writes them, users, stores on SQLite and
(marked ``services("postgres")``) on the PostgreSQL ``deploy/services`` runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from auditflow.money import Money
from auditflow.records import Alert, alert_id_for
from evidence_graph.testing import tx
from reports.signing import Signer

SIGNER = Signer.from_seed(b"cases-test-key-0123456789abcdef!")
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def alert_row(event_id: str, src: str, dst: str, cents: int, *, minute: int = 0, tier: str = "normal",
              typologies=(), fmt: str = "Wire", score: float = 0.8) -> dict:
    """One ``alerts.jsonl`` row as the deep path writes it."""
    ev = tx(event_id, src, dst, minute, amount=Money("US Dollar", cents), fmt=fmt)
    alert = Alert(alert_id_for(event_id), ev, score, 0.5, "sha256:model", (("amount_usd", cents / 100),))
    return {**alert.to_dict(), "reason_codes": [], "trace_id": "t-" + event_id, "input_sha256": "ab" * 32,
            "typologies": list(typologies), "report": f"/run/reports/{alert.alert_id}.pdf", "report_error": None,
            "deep_ms": 12.5, "tier": tier}


def write_rows(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'cases.sqlite'}"


def later(minutes: int) -> datetime:
    return NOW + timedelta(minutes=minutes)
