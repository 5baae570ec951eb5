"""The independent fact checker (model_service.fact_audit) against sentences labelled by hand.

The labels are a person's reading of the evidence (bench/data/fact_corpus*.tsv), not any checker's
output; the figures are the issue's floors (catch rate >= 0.95, false alarms <= 0.05) on each
corpus, the two held-out ones included."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.fact_corpus import CORPORA, load, score  # noqa: E402
from model_service.fact_audit import audit, known_of  # noqa: E402
from reports.testing import make_alert, make_reason_codes, make_trace  # noqa: E402

TYPOLOGIES = [("fan-out", "00220/8001C8C51 paid 3 accounts in a burst of one-off transfers")]


@pytest.fixture(scope="module")
def known():
    return known_of(make_alert(), make_trace(), make_reason_codes(), TYPOLOGIES)


@pytest.mark.parametrize("name", CORPORA)
def test_each_corpus_is_caught_and_left_alone_as_labelled(name):
    corpus = load(name)
    labels = [label for label, _, _ in corpus.rows]
    assert labels.count("faithful") >= 30 and labels.count("unsupported") >= 30
    s = score(corpus)
    assert s.catch_rate >= 0.95, s.missed
    assert s.false_alarm_rate <= 0.05, s.alarms


def test_the_corpora_hold_at_least_a_hundred_of_each():
    rows = [r for name in CORPORA for r in load(name).rows]
    assert sum(label == "faithful" for label, _, _ in rows) >= 100
    assert sum(label == "unsupported" for label, _, _ in rows) >= 100


@pytest.mark.parametrize("sentence, kinds", [
    # what the decoder's checker let through (no digits in them)
    ("The money went to a shell company registered in Panama.", {"word", "name"}),
    ("Account 01420/8003093C1 is a known sanctioned entity.", {"word"}),
    ("Account 00220/8001C8C51 sent three thousand six hundred US dollars to account 0119/80F2A3B11.", {"amount"}),
    ("The trace followed the money for a dozen hops.", {"count"}),
    ("The money was sent back to the sender.", {"return"}),
    # relations: who paid whom, and in what order
    ("Account 0119/80F2A3B11 sent 3697.34 US Dollar to account 00220/8001C8C51.", {"direction"}),
    ("Account 00220/8001C8C51 sent 12.05 US Dollar to account 0011/8011D2E40.", {"transfer"}),
    ("Account 0119/80F2A3B11 sent 1,250,000 Euro to account 00220/8009F00D1, then account 00220/8001C8C51 "
     "sent 3697.34 US Dollar to account 0119/80F2A3B11.", {"order"}),
])
def test_what_a_digit_only_check_misses_is_found(sentence, kinds, known):
    assert {f.kind for f in audit(sentence, known)} == kinds


@pytest.mark.parametrize("sentence", [
    "Account 00220/8001C8C51 sent about 3,700 US dollars to account 0119/80F2A3B11.",  # rounded as stated
    "In total, account 00220/8001C8C51 sent 3709.39 US Dollar to account 0119/80F2A3B11.",  # 3697.34 + 12.05
    "Account 0119/80F2A3B11 was paid 12.05 US Dollar by account 00220/8001C8C51.",  # passive
    "One minute later, at 00:41, account 00220/8001C8C51 sent 12.05 US Dollar to account 0119/80F2A3B11.",
])
def test_faithful_restatements_pass(sentence, known):
    assert audit(sentence, known) == []


def test_rounding_is_judged_at_the_precision_stated(known):
    ok = "Account 00220/8001C8C51 sent {} US dollars to account 0119/80F2A3B11."
    assert audit(ok.format("3,697"), known) == []  # 3,697.34 to the dollar
    assert audit(ok.format("3,700"), known) == []  # to the hundred
    assert [f.kind for f in audit(ok.format("3,690"), known)] == ["amount"]  # to the ten: 3,700
    assert [f.kind for f in audit(ok.format("3,600"), known)] == ["amount"]


def test_the_narrators_plan_sentences_pass_it(known):
    """The plan's template sentences (what a narrative falls back to) state only the evidence."""
    from model_service.narrator_facts import narrative_plan

    for item in narrative_plan(make_alert(), make_trace(), make_reason_codes(), TYPOLOGIES):
        assert audit(item.text, known) == [], item.text


def test_it_shares_no_code_with_the_decoders_checker():
    """Another method, not the same one twice: the module imports nothing of narrator_facts (nor of
    the narrator), and builds what is known from the alert, trace and reason codes themselves."""
    tree = ast.parse((ROOT / "model_service" / "fact_audit.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and ("narrator" in m)}, imported
