"""Recall and precision of the typology detectors against an answer key (for tests and benchmarks:
the answer key is read here, never by the detectors).

An answer-key instance is ``(typology, its transfers' event ids, its accounts)``. Detection runs
from every account of every instance and from the ``background`` accounts (legitimate look-alikes
and ordinary accounts); findings are pooled, one per instance (same typology and transfers). A
finding *matches* an instance of its own typology when they share at least half of the finding's
transfers and at least half of the instance's. Per typology:

* recall: the share of its instances some finding matches;
* precision: the share of its findings that match one of its instances (a finding that matches
  nothing, or only an instance of another typology, is a false positive).

``unscored`` instances (by default ``instances.unscored`` where the answer key carries it, as
:meth:`ingest.synthetic.Dataset.planted` does) are real ones only partly inside the window: an
attempt that began before it. What is visible of them is not their shape (a stack whose first
layer lies before the window shows a bipartite), so a finding with at least half of its transfers
in one of them, of whatever typology, is left out of the scores: neither a hit nor a false
positive. They are not counted for recall either.

>>> s = TypologyScore("cycle", planted=4, recalled=3, findings=5, correct=4)
>>> s.recall, s.precision
(0.75, 0.8)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from auditflow.typologies import TYPOLOGIES
from evidence_graph.store import GraphStore
from evidence_graph.typologies import TypologyMatch, detect_typologies

Instance = tuple[str, frozenset[str], tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class TypologyScore:
    typology: str
    planted: int
    recalled: int
    findings: int
    correct: int

    @property
    def recall(self) -> float:
        return self.recalled / self.planted if self.planted else 1.0

    @property
    def precision(self) -> float:
        return self.correct / self.findings if self.findings else 1.0


def _matches(found: TypologyMatch, inst: Instance) -> bool:
    typology, ids, _ = inst
    shared = len(set(found.event_ids) & ids)
    return found.typology == typology and 2 * shared >= len(found.event_ids) and 2 * shared >= len(ids)


def score_typologies(
    store: GraphStore,
    instances: Sequence[Instance],
    background: Iterable[str],
    window: tuple[datetime | None, datetime | None] | None = None,
    unscored: Sequence[Instance] | None = None,
) -> dict[str, TypologyScore]:
    """Per typology of :data:`TYPOLOGIES`, its score (see the module docstring)."""
    if unscored is None:
        unscored = getattr(instances, "unscored", ())
    accounts = list(dict.fromkeys([a for _, _, members in instances for a in members] + list(background)))
    findings: dict[tuple[str, tuple[str, ...]], TypologyMatch] = {}
    for account in accounts:
        for m in detect_typologies(store, account, window):  # a cycle found from two members: once
            findings.setdefault((m.typology, tuple(sorted(m.event_ids))), m)
    for key, m in list(findings.items()):
        if any(2 * len(set(m.event_ids) & ids) >= len(m.event_ids) for _, ids, _ in unscored):
            del findings[key]
    scores = {}
    for t in TYPOLOGIES:
        mine = [i for i in instances if i[0] == t]
        found = [m for m in findings.values() if m.typology == t]
        scores[t] = TypologyScore(
            t,
            planted=len(mine),
            recalled=sum(any(_matches(m, i) for m in found) for i in mine),
            findings=len(found),
            correct=sum(any(_matches(m, i) for i in mine) for m in found),
        )
    return scores
