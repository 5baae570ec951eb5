"""The narrator's fact extractor and checker on hand-written sentences (no model)."""

from __future__ import annotations


import pytest

from model_service.narrator_facts import (
    check_sentence,
    evidence_for,
    extract_facts,
    narrative_plan,
    recall,
    unsupported_facts,
)
from reports.testing import (
    A1,
    A2,
    A3,
    B1,
    B2,
    ROOT,
    figures_over_four_digits,
    make_alert,
    make_reason_codes,
    make_trace,
)

TYPOLOGIES = [("fan-out", "The sender paid 7 distinct payees within 24 hours.")]


@pytest.fixture(scope="module")
def ev():
    return evidence_for(make_alert(), make_trace(), make_reason_codes(), TYPOLOGIES)


def keys(text, ev):
    return [(f.kind, f.value) for f in extract_facts(text, ev)]


@pytest.mark.parametrize("text, expected", [
    (f"On 2022-09-01 at 00:16, account {ROOT} sent 0.025852 Bitcoin to account {A1}.",
     [("date", "2022-09-01"), ("time", "00:16"), ("account", ROOT), ("amount", "0.025852 Bitcoin"), ("account", A1)]),
    ("Account 8003093C1 at bank 01420 received it.", [("account", A1)]),
    ("bank 0119 account 80F2A3B11 paid USD 12.05", [("account", A2), ("amount", "12.05 US Dollar")]),
    ("1,250,000.00 Euro left on September 1, 2022 at 03:00.",
     [("amount", "1250000.00 Euro"), ("date", "2022-09-01"), ("time", "03:00")]),
    ("It crossed 3 hops, seven accounts and 7 transfers in hop 2.",
     [("count", "hops:3"), ("count", "accounts:7"), ("count", "transfers:7"), ("hop", "2")]),
    ("The pattern is a fan-out, not a cycle.", [("typology", "fan-out"), ("typology", "cycle")]),
    ("The sender's distinct payees in the last 24 hours were 7.", [("duration", "hours:24"), ("value", "7")]),
    ("At 2022-09-01T00:40 the money moved.", [("date", "2022-09-01"), ("time", "00:40")]),
    ("Case 1. Reference 4711.", [("number", "1"), ("number", "4711")]),
    ("No digits here, only words about money.", []),
    (f"Account {ROOT} sent USD 3,697 and EUR 1.25 million.", [("account", ROOT), ("amount", "3697 US Dollar"),
                                                              ("amount", "1250000 Euro")]),
])
def test_extracts_the_facts_a_sentence_states(text, expected, ev):
    assert keys(text, ev) == expected


@pytest.mark.parametrize("text", [
    f"On 2022-09-01 at 00:16, account {ROOT} sent 0.025852 Bitcoin to account {A1} by Bitcoin.",
    f"Account {A2} sent 1250000.00 Euro to account {B2} on 2022-09-01 at 03:00.",
    f"Account {B2} received 1250000.00 Euro from {A2}.",
    f"{A1} and {A2} were both paid by {ROOT}.",
    "It was flagged because the evidence matches the fan-out pattern.",
    "The trace followed the money for up to 3 hops and reached 6 accounts through 7 transfers.",
    "The sender paid 7 distinct payees.",
    "Nothing in this sentence is a fact.",
    # rounded for people: true to the precision stated (3697.34 -> 3,697 / 3,700; 1,250,000.00 -> 1.25 million)
    f"Account {ROOT} sent USD 3,697 to account {A2}.",
    f"Account {ROOT} sent 3,700 US Dollar to account {A2}.",
    f"Account {A2} sent EUR 1.25 million to account {B2}.",
])
def test_supported_sentences_pass(text, ev):
    assert check_sentence(text, ev) == []


@pytest.mark.parametrize("text, why", [
    (f"Account {ROOT} sent 3697.35 US Dollar to account {A2}.", "unsupported amount 3697.35 US Dollar"),
    (f"Account {ROOT} sent 3697.34 Euro to account {A2}.", "unsupported amount 3697.34 Euro"),
    (f"Account {ROOT} sent 3697.34 US Dollar to account {B1}.", "no transfer"),  # wrong receiver
    (f"Account {A2} sent 3697.34 US Dollar to account {ROOT}.", "no transfer"),  # reversed
    (f"Account {B2} received 1250000.00 Euro from {A1}.", "no transfer"),
    (f"On 2022-09-01 at 00:40, account {ROOT} sent 0.025852 Bitcoin to {A1}.", "no transfer"),  # another time
    (f"On 2022-09-02 the account {ROOT} paid out.", "unsupported date 2022-09-02"),
    ("The money went to account 0999/8000ABCD0.", "unsupported account 0999/8000ABCD0"),
    ("It moved through 4 hops.", "unsupported count hops:4"),
    ("It reached 9 accounts.", "unsupported count accounts:9"),
    ("The evidence matches the cycle pattern.", "unsupported typology cycle"),
    ("It was flagged 12 times.", "unsupported number 12"),
    (f"{A1} and {A3} both paid {B1}.", "no transfer"),  # A3 never paid B1
    ("Within 48 hours it was gone.", "unsupported duration hours:48"),
    ("On March 3, 2021 it started.", "unsupported date 2021-03-03"),
    ("It was flagged, matching the fan-out pattern of 7.", "value 7 not stated with what it measures"),
    ("It was flagged for 24 hours later.", "duration hours:24 not stated as a factor's window"),
    # a rounded figure the amount does not round to (3697.34 is not 3,000 nor 3,698 nor EUR 1.3 million)
    (f"Account {ROOT} sent USD 3,000 to account {A2}.", "unsupported amount 3000 US Dollar"),
    (f"Account {ROOT} sent USD 3,698 to account {A2}.", "unsupported amount 3698 US Dollar"),
    (f"Account {A2} sent EUR 1.26 million to account {B2}.", "unsupported amount 1260000 Euro"),
])
def test_unsupported_facts_and_transfers_are_caught(text, why, ev):
    found = check_sentence(text, ev)
    assert found and why in found[0].reason, (text, found)


def test_every_plan_sentence_is_supported_and_states_its_facts(ev):
    items = narrative_plan(make_alert(), make_trace(), make_reason_codes(), TYPOLOGIES, evidence=ev)
    assert len(items) == 5
    text = " ".join(it.text for it in items)
    assert unsupported_facts(text, ev) == []
    stated, total = recall(text, items, ev)
    assert stated == total > 10
    assert items[0].evidence == (make_alert().event.event_id,)
    assert items[-1].evidence == (make_trace().trace_id,)


def test_a_narrative_with_one_invented_fact_reports_that_fact(ev):
    text = (f"On 2022-09-01 at 00:16, account {ROOT} sent 0.025852 Bitcoin to account {A1}. "
            f"On 2022-09-01 at 00:40, account {ROOT} sent 3697.43 US Dollar to account {A2}.")
    found = unsupported_facts(text, ev)
    assert [v.reason for v in found] == ["unsupported amount 3697.43 US Dollar"]
    assert text[found[0].start:].startswith("3697.43")


def test_only_alerts_of_the_narrative_tier_get_a_narrator(monkeypatch):
    from dataclasses import replace

    from auditflow_app.flow import narrated_alerts, narrative_for
    from auditflow_app.settings import Settings

    for name in ("AUDITFLOW_NARRATOR_MIN_SCORE", "AUDITFLOW_NARRATOR_TOP", "AUDITFLOW_NARRATOR_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    alert = make_alert()  # scored 0.973...
    assert narrated_alerts(Settings(), [(alert, "critical")]) == set()
    assert narrated_alerts(Settings(narrator_min_score=0.99), [(alert, "critical")]) == set()
    assert narrative_for(Settings(), alert, make_trace(), make_reason_codes(), [], set()) is None
    # the top 3 by score (ties by id), and whatever scores at least the bar
    run = [(replace(alert, alert_id=f"a{i}", score=score), tier) for i, (score, tier) in
           enumerate([(0.99, "critical"), (0.95, "critical"), (0.97, "critical"), (0.97, "critical"),
                      (0.5, "normal"), (0.6, "normal")])]
    assert narrated_alerts(Settings(narrator_top=3), run) == {"a0", "a2", "a3"}
    assert narrated_alerts(Settings(narrator_top=2), run) == {"a0", "a2"}  # a2 before a3 at 0.97
    assert narrated_alerts(Settings(narrator_top=5), run) == {"a0", "a1", "a2", "a3", "a5"}
    assert narrated_alerts(Settings(narrator_top=1, narrator_min_score=0.96), run) == {"a0", "a2", "a3"}
    assert narrated_alerts(Settings(narrator_top=0), run) == set()
    monkeypatch.setenv("AUDITFLOW_NARRATOR_MIN_SCORE", "0.5")
    monkeypatch.setenv("AUDITFLOW_NARRATOR_TOP", "3")
    monkeypatch.setenv("AUDITFLOW_NARRATOR_DEVICE", "cpu")
    s = Settings()
    assert (s.narrator_min_score, s.narrator_top, s.narrator_device) == (0.5, 3, "cpu")


def test_an_alert_of_the_narrative_tier_is_narrated_with_the_configured_model_and_seed(monkeypatch):
    """At or above ``narrator_min_score`` the alert's narrative is the narrator's: its model loaded
    on the configured device and threads, the matches passed as (typology, explanation), the run's
    seed (the model itself is replaced here: nothing is loaded)."""
    from auditflow_app.flow import narrated_alerts, narrative_for
    from auditflow_app.settings import Settings
    from evidence_graph import TypologyMatch
    from model_service import narrator

    calls = []
    model = object()
    monkeypatch.setattr(narrator, "load_model", lambda device, *, threads=None: calls.append(("load", device, threads))
                        or model)

    def fake_narrate(alert, trace, codes, typologies, *, lm, seed):
        calls.append(("narrate", alert, trace, codes, typologies, lm, seed))
        return "the narrative"

    monkeypatch.setattr(narrator, "narrate", fake_narrate)
    alert, trace, codes = make_alert(), make_trace(), make_reason_codes()
    match = TypologyMatch("fan-out", (ROOT, A1, A2), ("e1", "e2"), "The sender paid 7 distinct payees.")
    settings = Settings(narrator_min_score=alert.score, narrator_device="cpu", narrator_threads=2, seed=11)
    narrated = narrated_alerts(settings, [(alert, "normal")])  # a score equal to the bar
    assert narrative_for(settings, alert, trace, codes, [match], narrated) == "the narrative"
    assert calls == [("load", "cpu", 2),
                     ("narrate", alert, trace, codes, [("fan-out", "The sender paid 7 distinct payees.")], model, 11)]


def test_the_model_service_hosts_the_narrators_router_on_the_device_it_is_given(monkeypatch):
    """The service's hosted routers: the narrator's ``POST /narrate``, its model loaded on the first
    well-formed request on the device and threads given (the model and the decoding are replaced
    here: nothing is loaded)."""
    from types import SimpleNamespace

    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from model_service import narrator, narrator_service
    from model_service.service import hosted_routers

    routers = hosted_routers(narrator_device="cpu", narrator_threads=2)
    assert [[r.path for r in router.routes] for router in routers] == [["/narrate"]]
    app = FastAPI()
    app.include_router(routers[0])
    client = TestClient(app)
    calls = []
    monkeypatch.setattr(narrator_service, "load_model",
                        lambda device, *, threads=None: calls.append(("load", device, threads)) or "the model")
    monkeypatch.setattr(narrator, "narrate", lambda alert, trace, codes, typologies, *, lm, params, seed, mode:
                        SimpleNamespace(to_dict=lambda: {"alert": alert.alert_id, "lm": lm, "seed": seed}))
    r = client.post("/narrate", json={"alert": {}})  # refused before any model is loaded
    assert r.status_code == 422 and "schema" in r.json()["detail"] and calls == []
    alert = make_alert()
    r = client.post("/narrate", json={"alert": alert.to_dict(), "trace": make_trace().to_dict(), "seed": 3})
    assert r.status_code == 200, r.text
    assert r.json() == {"alert": alert.alert_id, "lm": "the model", "seed": 3}
    assert calls == [("load", "cpu", 2)]




def test_the_plan_states_amounts_rounded_for_people(ev):
    """What the narrator is steered to write: the alerted 3,697.34 USD as "USD 3,697", the onward
    1,250,000.00 EUR as "EUR 1.25 million" (4 significant digits; the exact ones stay in the appendix)."""
    items = narrative_plan(make_alert(), make_trace(), make_reason_codes(), TYPOLOGIES, evidence=ev)
    text = " ".join(it.text for it in items)
    assert figures_over_four_digits(text) == [], text
    assert "USD 3,697" in items[0].text or "XBT 0.02585" in items[0].text
    assert "3697.34" not in text and "1250000" not in text and "1,250,000" not in text


def test_the_decoders_mask_lets_a_grouped_amount_be_written_word_by_word():
    """The mask works on words (a comma or a space ends one): "USD 77,940" and "EUR 1.25 million"
    are written as their digit words, nothing else with digits; a banned word stays banned."""
    from model_service.narrator import _Mask

    m = _Mask(frozenset({"77,940", "1.25 million"}))
    assert m.piece_ok("", "77") and m.piece_ok("77", ",") and m.piece_ok("", "940")
    assert m.piece_ok("1.2", "5") and m.piece_ok("1.25", " million")
    assert not m.piece_ok("", "78") and not m.piece_ok("77", "1") and not m.piece_ok("940", "0")
    banned = m.without({"77"})
    assert not banned.piece_ok("77", ",") and banned.piece_ok("", "940")


def test_a_yes_no_reason_is_stated_not_given_a_value():
    """The strongest reason that is on is a statement, not "... was 1"; one that is off ("not
    paid by Cheque", true of most transfers) is no reason at all, as in the report."""
    from auditflow.records import ReasonCode

    codes = [ReasonCode("fmt_cheque", 0.0, 0.9, "not paid by Cheque"),
             ReasonCode("rcv_cp_new", 1.0, 0.5, "receiver had not dealt with this payer in the 7 days before")]
    ev = evidence_for(make_alert(), make_trace(), codes, [("cycle", "")])
    items = narrative_plan(make_alert(), make_trace(), codes, [("cycle", "")], evidence=ev)
    assert items[1].text == ("It was flagged because the evidence matches the cycle pattern, and the receiver had "
                             "not dealt with this payer in the 7 days before.")
    assert check_sentence(items[1].text, ev) == []


def test_a_reason_whose_words_the_checker_cannot_hold_to_the_evidence_is_left_out():
    """A description with its value written in ("first seen 1 day 16 h before") cannot be checked
    (the demo once stopped on it): the sentence keeps the typology and leaves the factor out."""
    from auditflow.records import ReasonCode

    codes = [ReasonCode("snd_age_min", 2436.0, 0.9, "sender was first seen 1 day 16 h before")]
    items = narrative_plan(make_alert(), make_trace(), codes, [("cycle", "")])
    assert items[1].text == "It was flagged because the evidence matches the cycle pattern."
    assert len(narrative_plan(make_alert(), make_trace(), codes, [])) == 4  # no typology, no such sentence
