"""What an alert report says: case header, summary, narrative source, drift, lineage and the
compliance profile, read back from the PDF; embedded fonts; the SHAP bars measured on the page."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
from pypdf import PdfReader

from auditflow.canonical import canonical_json
from reports.alert_report import DriftStatus, render_alert_report
from reports.profile import ProfileError, load_profile, parse_profile, profile_names
from reports.testing import INPUT_SHA256, SIGNER, make_alert, make_reason_codes, make_trace

ORG = dict(institution="Example Bank plc", contact="privacy@bank.example")


def render(out: Path, **kw):
    args = dict(out_dir=out, input_sha256=INPUT_SHA256, code_version="0.1.0+gtest", seed=7, signer=SIGNER,
                typologies=[("fan-out", "The sender paid 7 distinct payees within 24 hours.")])
    args.update(kw)
    m = render_alert_report(make_alert(), make_trace(), make_reason_codes(), **args)
    return m, out / f"{m.alert_id}.pdf"


def text_of(pdf: Path) -> str:
    return " ".join(" ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf.read_bytes())).pages).split())


@pytest.fixture(scope="module")
def sar(tmp_path_factory):
    m, pdf = render(tmp_path_factory.mktemp("sar"))
    return m, pdf, text_of(pdf)


def digest16(obj) -> str:
    return hashlib.sha256(canonical_json(obj)).hexdigest()[:16]


def test_case_header_ids_are_the_content_addresses_spelled_out(sar):
    m, _, text = sar
    alert, trace = make_alert(), make_trace()
    run_id = "run-" + digest16({"input_sha256": INPUT_SHA256, "model_digest": alert.model_digest,
                                "code_version": "0.1.0+gtest", "seed": 7})
    chain_id = "chain-" + digest16({"input_sha256": INPUT_SHA256, "source_offset": 1874, "event_id": alert.event.event_id,
                                    "alert_id": alert.alert_id, "trace_id": trace.trace_id,
                                    "model_digest": alert.model_digest})
    case = text.split("Case", 1)[1].split("Narrative", 1)[0]
    for expected in (chain_id, alert.alert_id, "2022-09-01 00:16 (UTC)", alert.model_digest, run_id,
                     "sar: Suspicious activity report narrative"):
        assert expected in case, expected
    assert dict(m.extra)["run_id"] == run_id and dict(m.extra)["audit_chain_id"] == chain_id


def test_the_first_page_says_who_what_when_how_much_and_why_in_rounded_words(sar):
    _, _, text = sar
    summary = text.split("Summary", 1)[1].split("Case", 1)[0]
    # 0.025852 BTC at 4 significant digits; at the reference rate (11,500) 297.298 USD -> 297.3
    assert ("On 2022-09-01 at 00:16 UTC, account 00220/8001C8C51 (bank 00220) paid XBT 0.02585 (about USD 297.3) "
            "by Bitcoin to account 01420/8003093C1 (bank 01420).") in summary
    assert "The model scored the transfer 0.97, at or above the alert threshold of 0.62." in summary
    assert "Pattern: fan-out. The sender paid 7 distinct payees within 24 hours." in summary
    assert "following the money out of 00220/8001C8C51 reached 6 accounts through 7 transfers within 3 hops" in summary
    narrative = text.split("Narrative", 1)[1].split("Typologies found", 1)[0]
    assert "Source: template (no narrator output for this alert)" in narrative


def test_a_narrators_text_is_labelled_as_such(tmp_path):
    _, pdf = render(tmp_path, narrative="The payer split funds across seven new payees.")
    text = text_of(pdf)
    assert "Source: the narrator" in text and "The payer split funds across seven new payees." in text
    assert "no narrator output" not in text


def test_lineage_names_input_record_graph_query_model_and_code(sar):
    _, _, text = sar
    lineage = text.split("Data lineage", 1)[1]
    t = make_trace()
    assert INPUT_SHA256 in lineage and "offset 1874 (event tx-4b1d0c9e7f2a3b65)" in lineage
    query = (f"trace_evidence(root={t.root}, direction=out, max_hops=3, fanout_cap=25, "
             "window=[2022-09-01 00:00, 2022-09-03 00:00)) on networkx")
    assert query.replace(" ", "") in lineage.replace(" ", "")  # the cell wraps: compare without spaces
    assert make_alert().model_digest in lineage and "0.1.0+gtest" in lineage
    assert dict(sar[0].extra)["graph_query"] == query  # and signed in the manifest


def test_sar_profile_answers_who_what_when_where_why_how(sar):
    _, _, text = sar
    section = text.split("Compliance: Suspicious activity report narrative", 1)[1]
    for heading in ("Who is conducting the suspicious activity", "What instruments or mechanisms were involved",
                    "When did the activity occur", "Where did the activity take place",
                    "Why is the activity suspicious", "How did the activity occur"):
        assert heading in section, heading
    assert "The paying account bank 00220 / account 8001C8C51 (00220/8001C8C51) sent the transfer" in section
    assert "A Bitcoin transfer of XBT 0.02585 (about USD 297.3) (event tx-4b1d0c9e7f2a3b65)" in section
    assert "from bank 00220 to bank 01420" in section
    assert "FinCEN" in section


def test_drift_section_only_when_drift_figures_exist(tmp_path, sar):
    assert "Drift at alert time" not in sar[2]
    _, pdf = render(tmp_path, drift=[DriftStatus("amount_usd, segment Bitcoin, 24 h PSI", "0.31", "drift"),
                                     DriftStatus("snd_out_n_1h, segment all, 1 h PSI", "0.02", "ok")])
    text = text_of(pdf)
    drift = text.split("Drift at alert time", 1)[1]
    assert "amount_usd, segment Bitcoin, 24 h PSI 0.31 drift" in drift
    assert "snd_out_n_1h, segment all, 1 h PSI 0.02 ok" in drift


@pytest.mark.parametrize("profile, headings", [
    ("gdpr-art22", ["Controller", "Logic involved", "Significance and envisaged consequences", "Your rights"]),
    ("ccpa", ["Categories of personal information used", "Purpose", "Consumer rights"]),
])
def test_privacy_profiles_need_the_controller_and_a_contact(tmp_path, profile, headings):
    with pytest.raises(ProfileError) as err:
        render(tmp_path / "bare", profile=profile)
    msg = str(err.value)
    assert f"profile {profile!r} requires" in msg and "'contact'" in msg
    assert not list((tmp_path / "bare").glob("*.pdf")) if (tmp_path / "bare").exists() else True
    m, pdf = render(tmp_path / "ok", profile=profile, **ORG)
    text = text_of(pdf)
    for h in headings:
        assert h in text, h
    assert "Example Bank plc" in text and "privacy@bank.example" in text
    assert dict(m.extra)["profile"] == profile


def test_another_profile_is_another_version_not_an_overwrite(tmp_path):
    first, _ = render(tmp_path)
    second, _ = render(tmp_path, profile="gdpr-art22", **ORG)
    assert first.report_id != second.report_id
    assert second.files[0][0].endswith("@2.pdf") and (tmp_path / first.files[0][0]).exists()


def test_every_shipped_profile_loads_and_fills_from_a_full_case():
    assert profile_names() == ["ccpa", "gdpr-art22", "sar"]
    for name in profile_names():
        p = load_profile(name)
        assert p.name == name and p.sections


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("required"), "expected keys"),
    (lambda d: d["sections"].append({"heading": "x", "text": "{undeclared}"}), "uses ['undeclared']"),
    (lambda d: d.update(sections=[]), "no sections"),
    (lambda d: d["sections"][0].pop("text"), "section 1 must be"),
    (lambda d: d.update(title=""), "non-empty strings"),
])
def test_a_malformed_profile_is_refused_naming_what(edit, message):
    d = json.loads(json.dumps({"name": "t", "title": "T", "basis": "B", "required": ["a"],
                               "sections": [{"heading": "h", "text": "{a}"}], "note": "n"}))
    parse_profile(d, "t.json")
    edit(d)
    with pytest.raises(ProfileError, match="t.json") as err:
        parse_profile(d, "t.json")
    assert message in str(err.value)


def test_unknown_profile_names_the_choices(tmp_path):
    with pytest.raises(ProfileError, match=r"unknown report profile 'fatca'.*\['ccpa', 'gdpr-art22', 'sar'\]"):
        render(tmp_path, profile="fatca")


def test_fonts_are_embedded(sar):
    reader = PdfReader(io.BytesIO(sar[1].read_bytes()))
    fonts = {}
    for page in reader.pages:
        for f in page["/Resources"]["/Font"].values():
            f = f.get_object()
            fonts[str(f["/BaseFont"])] = f
    assert fonts and all("+BitstreamVeraSans" in name for name in fonts), sorted(fonts)  # subsets of Vera
    for name, f in fonts.items():
        desc = (f["/DescendantFonts"][0].get_object() if "/DescendantFonts" in f else f)["/FontDescriptor"]
        assert "/FontFile2" in desc.get_object(), name  # the TrueType program is in the file


def test_the_shap_bars_on_the_page_are_proportional_to_the_contributions(sar):
    """Rasterise the page with the chart and measure the red (raises) and blue (lowers) bars:
    equal heights, so their areas stand as the summed contributions do."""
    import pypdfium2 as pdfium

    codes = make_reason_codes()
    up = sum(rc.contribution for rc in codes if rc.contribution > 0)
    down = -sum(rc.contribution for rc in codes if rc.contribution < 0)
    doc = pdfium.PdfDocument(sar[1].read_bytes())
    counts = []
    for i in range(len(doc)):
        img = doc[i].render(scale=4).to_pil().convert("RGB")
        data = img.getdata()
        red = sum(1 for px in data if px == (0xC0, 0x39, 0x2B))
        blue = sum(1 for px in data if px == (0x2E, 0x6D, 0xA4))
        counts.append((red, blue))
    red, blue = max(counts)
    assert red > 0 and blue > 0
    assert red / blue == pytest.approx(up / down, rel=0.05)
