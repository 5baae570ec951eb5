"""The independent fact checker's hand-labelled corpora (``bench/data/fact_corpus*.tsv``), each with
the evidence its sentences speak of (``bench/data/fact_corpus_evidence.json``), and their score.

Each row is a sentence, labelled by hand (not by any checker) ``faithful`` (every fact it states is
in the evidence) or ``unsupported`` (with what it gets wrong: a word or name, an amount, a count, a
duration, a transfer, its direction, the order, money coming back, an id, a date or time).

* ``fact_corpus.tsv``: 105 faithful and 109 unsupported sentences about reports.testing's alert;
  :mod:`model_service.fact_audit` was developed against it.
* ``fact_corpus_heldout.tsv`` (50 + 50) and ``fact_corpus_heldout2.tsv`` (30 + 30): written after
  it, on two generated alerts' evidence, and scored once as written before the checker was changed
  again (their first scores are in the closing note of the change that added them: after a fix,
  a held-out set is held out no more).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
CORPORA = ("fact_corpus.tsv", "fact_corpus_heldout.tsv", "fact_corpus_heldout2.tsv")


@dataclass
class Corpus:
    name: str
    alert: object
    trace: object
    reason_codes: list
    typologies: list[tuple[str, str]]
    rows: list[tuple[str, str, str]]  # (label, kind, sentence)


@dataclass
class Score:
    faithful: int = 0
    unsupported: int = 0
    caught: int = 0
    false_alarms: int = 0
    missed: list[tuple[str, str]] = field(default_factory=list)  # (kind, sentence)
    alarms: list[tuple[str, list]] = field(default_factory=list)  # (sentence, findings)

    def add(self, other: Score) -> Score:
        return Score(self.faithful + other.faithful, self.unsupported + other.unsupported,
                     self.caught + other.caught, self.false_alarms + other.false_alarms,
                     self.missed + other.missed, self.alarms + other.alarms)

    @property
    def catch_rate(self) -> float:
        return self.caught / self.unsupported if self.unsupported else 1.0

    @property
    def false_alarm_rate(self) -> float:
        return self.false_alarms / self.faithful if self.faithful else 0.0


def load(name: str) -> Corpus:
    from auditflow.records import Alert, EvidenceTrace, ReasonCode

    ev = json.loads((DATA / "fact_corpus_evidence.json").read_text())[name]
    rows = []
    for line in (DATA / name).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            label, kind, sentence = line.split("\t")
            if label not in ("faithful", "unsupported"):
                raise ValueError(f"{name}: label {label!r}: expected faithful or unsupported")
            rows.append((label, kind, sentence))
    return Corpus(name, Alert.from_dict(ev["alert"]), EvidenceTrace.from_dict(ev["trace"]),
                  [ReasonCode.from_dict(d) for d in ev["reason_codes"]], [tuple(t) for t in ev["typologies"]], rows)


def score(corpus: Corpus) -> Score:
    """:func:`model_service.fact_audit.audit` over the corpus: unsupported sentences with a finding
    (caught), faithful ones with one (false alarms)."""
    from model_service.fact_audit import audit, known_of

    known = known_of(corpus.alert, corpus.trace, corpus.reason_codes, corpus.typologies)
    s = Score()
    for label, kind, sentence in corpus.rows:
        found = audit(sentence, known)
        if label == "faithful":
            s.faithful += 1
            if found:
                s.false_alarms += 1
                s.alarms.append((sentence, found))
        else:
            s.unsupported += 1
            if found:
                s.caught += 1
            else:
                s.missed.append((kind, sentence))
    return s
