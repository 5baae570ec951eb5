"""Synthetic data with planted rules for the model-service tests (small, seeded, fast)."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from auditflow.money import Money
from auditflow.records import PAYMENT_FORMATS, AccountRef, TransactionEvent
from model_service import BoosterParams
from pipelines.features import compute_features

#: Small models keep the suite fast; the planted rules are easy enough for them.
SMALL = BoosterParams(n_estimators=30, max_depth=4, nthread=2)

START = datetime(2022, 9, 1)
N_ACCOUNTS = 200
MULES = frozenset(range(0, N_ACCOUNTS, 5))  # every fifth account launders
BIG_CENTS = 800_000  # $8,000


def planted_events(n: int = 6000, days: int = 20, seed: int = 11) -> list[TransactionEvent]:
    """Events where laundering == (sender is a mule) and (amount paid >= $8,000).

    The stream features see the amount but not who the mules are; the graph feature
    ``g_mule`` (see :func:`mule_graph_features`) does. So stage 1 can reach high recall with
    poor precision, and stage 2 can fix the precision: the cascade's reason to exist.
    """
    rng = np.random.default_rng(seed)
    minutes = np.sort(rng.integers(0, days * 24 * 60, size=n))
    senders = rng.integers(0, N_ACCOUNTS, size=n)
    receivers = rng.integers(0, N_ACCOUNTS, size=n)
    cents = np.round(rng.lognormal(mean=12.0, sigma=1.3, size=n)).astype(np.int64)
    formats = rng.integers(0, len(PAYMENT_FORMATS), size=n)
    events = []
    for i in range(n):
        s, r = int(senders[i]), int(receivers[i])
        amount = Money("US Dollar", int(cents[i]))
        events.append(
            TransactionEvent(
                event_id=f"tx-{i:05d}",
                timestamp=START + timedelta(minutes=int(minutes[i])),
                sender=AccountRef("010", f"A{s:04d}"),
                receiver=AccountRef("020", f"B{r:04d}"),
                amount_received=amount,
                amount_paid=amount,
                payment_format=PAYMENT_FORMATS[int(formats[i])],
                is_laundering=bool(s in MULES and cents[i] >= BIG_CENTS),
                source_offset=i + 2,
            )
        )
    return events


def mule_graph_features(ev: TransactionEvent) -> dict[str, float]:
    """A stand-in for evidence_graph.graph_features: reveals the sender's mule status."""
    return {"g_mule": float(int(ev.sender.account[1:]) in MULES), "g_dummy": 0.0}


GRAPH_NAMES = ("g_mule", "g_dummy")
GRAPH_DESCRIPTIONS = {"g_mule": "sender is in a known mule ring", "g_dummy": "always zero"}


@pytest.fixture(scope="session")
def planted():
    return compute_features(planted_events())
