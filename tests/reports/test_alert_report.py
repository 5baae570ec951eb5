"""Alert PDF reports: content read back with pypdf, byte-identical reruns, signed manifests."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from pypdf import PdfReader

from auditflow.records import EvidenceTrace, ReportManifest
from reports import render_alert_report, verify_manifest
from reports._charts import MAX_DRAWN_NODES, select_drawn_nodes, shorten_label, trace_subgraph
from reports.signing import Keyring, Signer
from reports.store import STORE_FILES
from reports.testing import (
    INPUT_SHA256,
    KEYRING,
    SIGNER,
    make_alert,
    make_big_trace,
    make_reason_codes,
    make_trace,
)

TYPOLOGIES = [("fan-out", "The sender paid 7 distinct payees within 24 hours.")]
NARRATIVE = "First of a burst of outgoing payments.\n\nConfirm the beneficial owner."


def render(out_dir: Path, *, trace=None, **overrides) -> ReportManifest:
    kwargs = dict(out_dir=out_dir, input_sha256=INPUT_SHA256, code_version="0.1.0+gtest", seed=7,
                  typologies=TYPOLOGIES, narrative=NARRATIVE, signer=SIGNER)
    kwargs.update(overrides)
    return render_alert_report(make_alert(), trace or make_trace(), make_reason_codes(), **kwargs)


def pdf_text(path: Path) -> str:
    reader = PdfReader(io.BytesIO(path.read_bytes()))
    return "\n".join(page.extract_text() for page in reader.pages)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> tuple[Path, ReportManifest, str]:
    out = tmp_path_factory.mktemp("report")
    manifest = render(out)
    pdf = out / f"{manifest.alert_id}.pdf"
    return out, manifest, pdf_text(pdf)


def test_writes_pdf_and_manifest_named_after_the_alert(rendered):
    out, manifest, _ = rendered
    alert_id = make_alert().alert_id
    assert sorted(p.name for p in out.iterdir() if p.name not in STORE_FILES) == [
        f"{alert_id}.manifest.json", f"{alert_id}.pdf", f"{alert_id}.trace.json.gz"]
    assert manifest.alert_id == alert_id
    assert [name for name, _ in manifest.files] == [f"{alert_id}.pdf", f"{alert_id}.trace.json.gz"]
    trace = EvidenceTrace.from_dict(json.loads(gzip.decompress((out / f"{alert_id}.trace.json.gz").read_bytes())))
    assert trace == make_trace()
    assert (out / f"{alert_id}.pdf").read_bytes().startswith(b"%PDF-")


def test_pdf_shows_alert_summary(rendered):
    _, _, text = rendered
    alert = make_alert()
    ev = alert.event
    for expected in (alert.alert_id, ev.event_id, "2022-09-01 00:16", ev.sender.node_id,
                     ev.receiver.node_id, "Bitcoin", repr(alert.score), repr(alert.threshold),
                     alert.model_digest[:12], str(ev.source_offset)):
        assert expected in text, expected


def test_pdf_shows_each_reason_code_exactly(rendered):
    _, _, text = rendered
    flowed = " ".join(text.split())  # a long description wraps in its table cell
    for rc in make_reason_codes():
        assert rc.feature in text
        assert rc.description in flowed
        assert repr(rc.value) in text
        assert repr(rc.contribution) in text


def test_the_summary_names_the_factors_that_raised_the_score_in_the_mappings_words(rendered):
    _, _, text = rendered
    flowed = " ".join(text.split())
    summary = flowed.split("Summary", 1)[1].split("Case", 1)[0]
    # the fixture's three factors that raised the score, as auditflow.reasons words them
    assert ("What raised it most: sender paid 7 distinct accounts in the last 24 hours; sender made 4 outgoing "
            "transfers in the last hour; amount paid: USD 297.3.") in summary
    assert "currencies" not in summary  # a factor that lowered the score is not among them
    assert "snd_out_cp_24h" not in summary and "log-odds" not in summary  # no raw feature names, no SHAP


def test_money_is_rounded_before_the_appendix_and_exact_in_it(rendered):
    _, _, text = rendered
    flowed = " ".join(text.split())
    body, appendix = flowed.split("Appendix: exact values", 1)
    assert "XBT 0.02585 (about USD 297.3)" in body and "0.025852" not in body
    assert "0.025852 Bitcoin (XBT)" in appendix  # the alerted amount exactly as it arrived
    assert "0.02585200" not in flowed


def test_the_appendix_names_the_complete_trace_and_its_file_holds_every_transfer(rendered):
    out, manifest, text = rendered
    flowed = " ".join(text.split())
    appendix = flowed.split("Appendix: exact values", 1)[1]
    trace = make_trace()
    assert trace.trace_id in appendix and "6 accounts, 7 transfers" in appendix
    assert "Hop table" not in flowed  # the transfers are in the trace file, not the PDF
    in_file = EvidenceTrace.from_dict(json.loads(gzip.decompress((out / manifest.files[1][0]).read_bytes())))
    assert {e.event_id for e in in_file.edges} == {e.event_id for e in trace.edges}


def test_pdf_shows_typologies_narrative_and_manifest_fields(rendered):
    _, manifest, text = rendered
    assert "fan-out" in text and TYPOLOGIES[0][1] in text
    assert "First of a burst of outgoing payments." in text
    for value in (manifest.input_sha256, manifest.model_digest, manifest.trace_id,
                  manifest.code_version, manifest.report_id):
        assert value in text
    assert "Seed" in text


def test_same_inputs_give_identical_bytes_whatever_the_environment(tmp_path, monkeypatch):
    a = render(tmp_path / "a")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # reportlab would otherwise honour it
    b = render(tmp_path / "b")
    name = f"{a.alert_id}.pdf"
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert a == b
    assert (tmp_path / "a" / f"{a.alert_id}.manifest.json").read_bytes() == (
        tmp_path / "b" / f"{a.alert_id}.manifest.json").read_bytes()
    assert b"D:20000101000000+00'00'" in (tmp_path / "a" / name).read_bytes()


def test_different_inputs_give_a_different_report(tmp_path):
    a = render(tmp_path / "a")
    b = render(tmp_path / "b", seed=8)
    assert a.report_id != b.report_id and a.files[0][1] != b.files[0][1]


def test_manifest_verifies(rendered):
    out, manifest, _ = rendered
    path = out / f"{manifest.alert_id}.manifest.json"
    assert verify_manifest(path, KEYRING) == []
    assert ReportManifest.from_dict(json.loads(path.read_text())) == manifest


def test_flipping_one_pdf_byte_is_detected(tmp_path):
    m = render(tmp_path)
    pdf = tmp_path / f"{m.alert_id}.pdf"
    data = bytearray(pdf.read_bytes())
    data[len(data) // 2] ^= 0x01
    pdf.write_bytes(bytes(data))
    problems = verify_manifest(tmp_path / f"{m.alert_id}.manifest.json", KEYRING)
    assert len(problems) == 1 and "does not match" in problems[0] and pdf.name in problems[0]


def test_missing_pdf_is_detected(tmp_path):
    m = render(tmp_path)
    (tmp_path / f"{m.alert_id}.pdf").unlink()
    assert any("missing" in p for p in verify_manifest(tmp_path / f"{m.alert_id}.manifest.json",
                                                       KEYRING))


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(seed=8),
        lambda d: d.update(input_sha256="00" * 32),
        lambda d: d.update(model_digest="sha256:other"),
        lambda d: d.update(files=[[d["files"][0][0], "00" * 32]]),
        lambda d: d.update(signature="00" * 32),
        lambda d: d.update(comment="added after signing"),
        lambda d: d.update(seed="7"),
    ],
    ids=["seed", "input", "model", "file-hash", "signature", "extra-field", "non-canonical"],
)
def test_editing_the_manifest_is_detected(tmp_path, edit):
    m = render(tmp_path)
    path = tmp_path / f"{m.alert_id}.manifest.json"
    d = json.loads(path.read_text())
    edit(d)
    path.write_text(json.dumps(d, indent=2))
    assert verify_manifest(path, KEYRING) != []


def test_wrong_key_or_garbled_manifest_is_reported(tmp_path):
    m = render(tmp_path)
    path = tmp_path / f"{m.alert_id}.manifest.json"
    other = Keyring([Signer.from_seed(bytes(32)).public_key])  # trusts another key only
    assert any(f"signed by key {SIGNER.key_id!r}, which is not among the trusted keys" in p
               for p in verify_manifest(path, other))
    path.write_text("{not json")
    assert verify_manifest(path, KEYRING) != []
    assert verify_manifest(tmp_path / "absent.manifest.json", KEYRING) != []


def test_manifest_file_names_cannot_escape_the_folder(tmp_path):
    from reports.manifest import sign_manifest, write_manifest

    (tmp_path / "secret.pdf").write_bytes(b"x")
    inner = tmp_path / "inner"
    inner.mkdir()
    m = sign_manifest(ReportManifest("r", "a", (("../secret.pdf", "00" * 32),), "i", "m", "t", "v", 1),
                      SIGNER)
    write_manifest(m, inner / "a.manifest.json")
    assert any("plain name" in p for p in verify_manifest(inner / "a.manifest.json", KEYRING))


def test_rejects_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="signer"):
        render(tmp_path, signer=b"an HMAC key")
    with pytest.raises(ValueError, match="rooted"):
        render(tmp_path, trace=replace(make_trace(), root="999/NOTINALERT"))
    assert list(tmp_path.iterdir()) == []
    # an id that is no file name is no error: its files get a safe name inside out_dir
    # (tests/reports/test_report_names.py)
    inner = tmp_path / "inner"
    m = render_alert_report(replace(make_alert(), alert_id="../escape"), make_trace(), make_reason_codes(),
                            out_dir=inner, input_sha256=INPUT_SHA256, code_version="v", seed=1,
                            signer=SIGNER)
    assert m.alert_id == "../escape" and sorted(p.name for p in tmp_path.iterdir()) == ["inner"]
    assert all(p.name.startswith("escape~") for p in inner.iterdir() if p.name not in STORE_FILES)


def test_minimal_report_without_optional_sections(tmp_path):
    m = render_alert_report(make_alert(), make_trace(), [], out_dir=tmp_path, input_sha256=INPUT_SHA256,
                            code_version="v", seed=0, signer=SIGNER)
    text = pdf_text(tmp_path / f"{m.alert_id}.pdf")
    assert "No reason codes" in text and "No known laundering typology" in text
    assert "Source: template (no narrator output for this alert)" in " ".join(text.split())
    assert "Drift at alert time" not in text  # no drift figures: no drift section
    assert verify_manifest(tmp_path / f"{m.alert_id}.manifest.json", KEYRING) == []


def test_a_large_trace_keeps_the_report_short_and_names_its_cuts(tmp_path):
    big = make_big_trace()
    m = render(tmp_path, trace=big)
    pdf = tmp_path / f"{m.alert_id}.pdf"
    flat = " ".join(pdf_text(pdf).split())
    assert "The trace was cut (fan-out cap, hub)" in flat and "(cut: fan-out cap, hub)." in flat
    assert f"{len(big.nodes)} accounts, {len(big.edges)} transfers" in flat
    assert len(PdfReader(io.BytesIO(pdf.read_bytes())).pages) <= 4  # its size is in the trace file


def test_drawn_subgraph_selection_is_capped_deterministic_and_keeps_the_root():
    big = make_big_trace()
    chosen = select_drawn_nodes(big)
    assert len(chosen) <= MAX_DRAWN_NODES
    assert chosen[0] == (big.root, 0)
    assert chosen == sorted(chosen, key=lambda kv: (kv[1], kv[0]))
    shuffled = replace(big, nodes=tuple(reversed(big.nodes)), edges=tuple(reversed(big.edges)))
    assert select_drawn_nodes(shuffled) == chosen
    _, info = trace_subgraph(big, width=500)
    assert info.capped and info.drawn_nodes == len(chosen) and info.total_nodes == len(big.nodes)
    _, info = trace_subgraph(make_trace(), width=500)
    assert not info.capped and info.drawn_edges == len(make_trace().edges)


def test_labels_are_shortened_deterministically():
    assert shorten_label("00220/8001C8C51", 20) == "00220/8001C8C51"
    assert shorten_label("0123456789ABCDEFGHIJ", 9) == "0123..HIJ"
    with pytest.raises(ValueError):
        shorten_label("abcdef", 4)


def test_identical_bytes_in_a_fresh_process_with_another_hash_seed(tmp_path):
    here = render(tmp_path / "here")
    script = "\n".join([
        "import sys",
        "from pathlib import Path",
        "from reports import render_alert_report",
        "from reports.testing import INPUT_SHA256, KEYRING, SIGNER, make_alert, make_reason_codes, make_trace",
        "render_alert_report(make_alert(), make_trace(), make_reason_codes(), out_dir=Path(sys.argv[1]),",
        "    input_sha256=INPUT_SHA256, code_version='0.1.0+gtest', seed=7,",
        f"    typologies={TYPOLOGIES!r}, narrative={NARRATIVE!r}, signer=SIGNER)",
    ])
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "there")], check=True, env=env)
    name = f"{here.alert_id}.pdf"
    assert (tmp_path / "there" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()


def test_a_narrators_narrative_reads_back_exactly_and_names_its_template_sentences(tmp_path):
    from auditflow.records import Narrative, NarrativeSentence
    from reports.alert_report import narrative_from_pdf_text

    trace = make_trace()
    n = Narrative(
        alert_id=make_alert().alert_id, trace_id=trace.trace_id,
        sentences=(NarrativeSentence("On 2022-09-01 at 00:16, account 00220/8001C8C51 sent 0.025852 Bitcoin to "
                                     "account 01420/8003093C1 by Bitcoin.", ("tx-4b1d0c9e7f2a3b65",)),
                   NarrativeSentence("It was flagged because the evidence matches the fan-out pattern.",
                                     ("typology:fan-out",), "template"),
                   NarrativeSentence("The trace followed the money for up to 3 hops and reached 6 accounts through "
                                     "7 transfers.", (trace.trace_id,))),
        mode="constrained", model_digest="sha256:" + "ab" * 32, decoding=(("temperature", 0.3), ("top_k", 20)),
        seed=11, stats=(("seconds", 1.5),))
    manifest = render(tmp_path, narrative=n, seed=11)
    text = pdf_text(tmp_path / manifest.files[0][0])
    assert narrative_from_pdf_text(text) == n.text
    assert "sentence 2 came from the template" in " ".join(text.split())
    extra = dict(manifest.extra)
    assert extra["narrative_model_digest"] == n.model_digest and extra["narrative_seed"] == "11"
    assert extra["narrative_template_sentences"] == "2" and json.loads(extra["narrative_decoding"])["top_k"] == 20
    # timing is no part of what the report is made from: the same narrative, other stats, same report
    from dataclasses import replace as _replace

    again = render(tmp_path / "again", narrative=_replace(n, stats=(("seconds", 9.9),)), seed=11)
    assert again.report_id == manifest.report_id
