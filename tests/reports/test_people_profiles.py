"""The SAR and GDPR Art. 22 profiles of the report for people, read back from the PDF: the SAR's
subject block, suspicious total and date range, FinCEN activity categories (checked against
FinCEN's own schema), prior alerts and the blank disposition and sign-off; the GDPR notice with
no other account's id or activity and its logic in lay words."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

import pytest
from pypdf import PdfReader

from auditflow.fincen import TYPOLOGY_CATEGORIES, activity_categories
from auditflow.money import Money
from auditflow.records import AccountActivity, AccountRef, PriorAlert, ReasonCode, TransactionEvent
from auditflow.typologies import TYPOLOGIES
from evidence_graph import NetworkxGraphStore
from evidence_graph.trail import money_trail
from reports import ReportWriter
from reports.alert_report import SarContext
from reports.testing import A2, A3, B1, B2, INPUT_SHA256, SIGNER, make_alert, make_trace

SCHEMA = Path(__file__).resolve().parents[2].parent / "shared" / "schemas" / "fincen" / "EFL_SARXBatchSchema.xsd"
FUNDER, NEXT, MEMBER = "0099/FUND1", "0011/NEXT1", "0555/MEMBER1"
CODES = [
    ReasonCode("rcv_in_cp_7d", 14.0, 0.9, "receiver was paid by 14 distinct accounts in the last 7 days"),
    ReasonCode("snd_out_cp_24h", 7.0, 0.6, "sender paid 7 distinct accounts in the last 24 hours"),
    ReasonCode("amount_usd", 297.3, 0.3, "amount paid: USD 297.30"),
]
FAN_IN = ("fan-in", f"Accounts {MEMBER} and {FUNDER} paid 01420/8003093C1 within 3 hours.")


def _usd(eid: str, src: str, dst: str, t: datetime, dollars: int) -> TransactionEvent:
    m = Money("US Dollar", dollars * 100)
    return TransactionEvent(eid, t, AccountRef.from_node_id(src), AccountRef.from_node_id(dst), m, m, "Wire", False, 0)


def _write(out: Path, profile: str, sar: SarContext | None = None) -> str:
    alert = make_alert()
    store = NetworkxGraphStore()
    store.add_transactions([alert.event, _usd("f1", FUNDER, alert.event.sender.node_id, datetime(2022, 8, 31, 9), 200),
                            _usd("o1", alert.event.receiver.node_id, NEXT, datetime(2022, 9, 1, 2, 5), 100)])
    trail = money_trail(store, alert.event, keep=[MEMBER])
    writer = ReportWriter(out, input_sha256=INPUT_SHA256, code_version="t", seed=1, signer=SIGNER, profile=profile,
                          institution="Example Bank plc", contact="privacy@example.com")
    m = writer.write(alert, make_trace(), CODES, typologies=[FAN_IN], trail=trail, sar=sar)
    writer.finish()
    return " ".join(" ".join(p.extract_text() for p in PdfReader(io.BytesIO((out / m.files[0][0]).read_bytes())).pages
                             ).split())


SAR = SarContext(
    subject=AccountActivity("00220/8001C8C51", datetime(2022, 8, 29, 0, 16), datetime(2022, 9, 4, 0, 16), 3, 9,
                            1_234_567, 4_821_357, datetime(2022, 8, 30, 10, 5), datetime(2022, 9, 2, 7, 40)),
    suspicious_transfers=5, suspicious_cents=4_821_357, first=datetime(2022, 8, 31, 9, 0),
    last=datetime(2022, 9, 1, 2, 5),
    prior_alerts=(PriorAlert("alert-tx-0000000000000001", datetime(2022, 8, 30, 12, 0), "00220/8001C8C51", 0.81234),),
)


@pytest.fixture(scope="module")
def sar_text(tmp_path_factory) -> str:
    return _write(tmp_path_factory.mktemp("sar"), "sar", SAR)


def test_the_sar_profile_has_the_subject_block_total_range_and_prior_alerts(sar_text) -> None:
    section = sar_text.split("Compliance: Suspicious activity report narrative", 1)[1]
    # 12,345.67 received -> 12,350; 48,213.57 sent -> 48,210 (4 significant digits)
    assert ("bank 00220 / account 8001C8C51 (00220/8001C8C51). In the 3 days before and after the alert "
            "(2022-08-29 00:16 to 2022-09-04 00:16): first seen 2022-08-30 10:05, last seen 2022-09-02 07:40; "
            "received USD 12,350 in 3 transfers and sent USD 48,210 in 9 transfers.") in section
    assert "USD 48,210 in 5 transfers (the alerted transfer and the typology instance it belongs to), from " \
           "2022-08-31 09:00 to 2022-09-01 02:05." in section
    assert "Money laundering: Funnel account (code 8/824)" in section
    assert "1 earlier alert in this run on the same accounts: alert-tx-0000000000000001 on 2022-08-30 12:00 " \
           "(00220/8001C8C51, score 0.81)." in section
    for blank in ("file a SAR", "close, no further action", "Investigator: ____", "Approved by (a second person)"):
        assert blank in section, blank


def test_without_sar_facts_the_profile_says_what_it_lacks(tmp_path) -> None:
    section = _write(tmp_path, "sar").split("Compliance: Suspicious activity report narrative", 1)[1]
    assert "its activity was not computed for this report" in section and "not looked up for this report" in section


def test_the_categories_are_fincens_own_codes_and_wording() -> None:
    x = "{http://www.w3.org/2001/XMLSchema}"
    enums = {}
    for st in ET.parse(SCHEMA).iter(f"{x}simpleType"):
        if st.get("name") in ("ValidateSuspiciousActivityTypeID", "ValidateSuspiciousActivitySubtypeID"):
            for e in st.iter(f"{x}enumeration"):
                enums[(st.get("name"), int(e.get("value")))] = "".join(d.text or "" for d in e.iter(f"{x}documentation"))
    assert set(TYPOLOGY_CATEGORIES) <= set(TYPOLOGIES)
    used = {c for t in TYPOLOGIES for c in activity_categories([t], "Wire", cross_currency=True)}
    used |= set(activity_categories([], "ACH", cross_currency=False))
    for c in used:
        assert enums[("ValidateSuspiciousActivityTypeID", c.type_id)] == c.text.split(": ")[0]
        assert enums[("ValidateSuspiciousActivitySubtypeID", c.subtype_id)] == c.subtype


def test_the_gdpr_notice_holds_only_the_subjects_own_data(tmp_path) -> None:
    text = _write(tmp_path, "gdpr-art22", SAR)
    alert = make_alert()
    others = {alert.event.receiver.node_id, alert.event.receiver.account, FUNDER, NEXT, MEMBER, A2, A3, B1, B2}
    for other in others:
        assert other not in text, other
    assert alert.event.sender.node_id in text
    assert "rcv_in_cp_7d" not in text and "receiver was paid" not in text  # the receiver's activity
    assert "What raised it most: sender paid 7 distinct accounts in the last 24 hours; amount paid: USD 297.3." in text
    logic = text.split("Logic involved", 1)[1].split("The factors in this case", 1)[0]
    assert "score between 0 and 1" in logic and "a person, who decides" in logic
    for jargon in ("TreeSHAP", "gradient", "log-odds", "SHAP"):
        assert jargon not in logic, jargon
