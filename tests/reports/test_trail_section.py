"""The report for people, read back from the PDF: the first page's plain lines on the money trail
with figures worked out by hand, the trail's headline table and the typology's members, reasons
in the mapping's words (no sentinel, no "not paid by ..." absence, no value twice), no figure of
more than 4 significant digits before the appendix, exact values in it, and the trail file signed
beside the PDF (verify passes, and the file decodes to the same trail)."""

from __future__ import annotations

import gzip
import io
import re
from datetime import datetime
from pathlib import Path

import pytest
from pypdf import PdfReader

from auditflow.money import Money
from auditflow.records import AccountRef, MoneyTrail, ReasonCode, TransactionEvent
from evidence_graph import NetworkxGraphStore
from evidence_graph.trail import money_trail
from reports import ReportWriter
from reports.testing import INPUT_SHA256, KEYRING, SIGNER, make_alert, make_trace
from reports.verify import verify_reports

MEMBER = "0555/MEMBER1"
FUNDER, NEXT, LAST = "0099/FUND1", "0011/8011D2E40", "0077/ONWARD"


def _usd(eid: str, src: str, dst: str, t: datetime, dollars: int) -> TransactionEvent:
    m = Money("US Dollar", dollars * 100)
    return TransactionEvent(eid, t, AccountRef.from_node_id(src), AccountRef.from_node_id(dst), m, m, "Wire", False, 0)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    # the alerted transfer: 0.025852 BTC = 297.298 USD at the reference rate (11,500) -> 29,730 cents
    alert = make_alert()
    subject, receiver = alert.event.sender.node_id, alert.event.receiver.node_id
    store = NetworkxGraphStore()
    store.add_transactions([
        alert.event,
        _usd("f1", FUNDER, subject, datetime(2022, 8, 31, 9, 0), 200),  # the subject's only money in
        _usd("o1", receiver, NEXT, datetime(2022, 9, 1, 2, 5), 100),  # 1 h 49 min after the alert
        _usd("o2", NEXT, LAST, datetime(2022, 9, 1, 5, 5), 100),
    ])
    trail = money_trail(store, alert.event, keep=[MEMBER, receiver])
    out = tmp_path_factory.mktemp("trail-report")
    writer = ReportWriter(out, input_sha256=INPUT_SHA256, code_version="t", seed=1, signer=SIGNER)
    manifest = writer.write(alert, make_trace(), CODES, trail=trail)
    writer.finish()
    text = "\n".join(p.extract_text() for p in PdfReader(io.BytesIO((out / manifest.files[0][0]).read_bytes())).pages)
    return out, manifest, trail, " ".join(text.split()), subject, receiver


#: Reason codes of the kinds people misread: a sentinel (-1: no money received), a yes/no factor
#: that is off yet raised the score, an exact amount, a factor that lowered the score.
CODES = [
    ReasonCode("g_fwd_share_7d", -1.0, 0.91, "sender received no money in the 7 days before"),
    ReasonCode("fmt_cheque", 0.0, 0.55, "not paid by Cheque"),
    ReasonCode("amount_usd", 7603.15, 0.4412345678, "amount paid: USD 7,603.15"),
    ReasonCode("snd_out_cp_24h", 7.0, 0.2, "sender paid 7 distinct accounts in the last 24 hours"),
    ReasonCode("cross_currency", 0.0, -0.2047, "paid and received in the same currency"),
]


def _part(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


def test_the_first_page_says_where_the_money_went_and_came_from_in_rounded_words(written) -> None:
    _, _, _, text, subject, receiver = written
    section = _part(text, "Summary", "Case")
    # 10,000 of 29,730 cents passed on: 33.6 % -> 34 %; 1 h 49 min -> "within 2 hours" (a bound)
    assert f"34 % was passed on by {receiver} within 2 hours to 1 account" in section
    assert "the trail follows it through 2 accounts, up to 3 transfers from the subject" in section
    # the receiver keeps 19,730 (66 %), the last account 10,000 (34 %): all of it in the trail
    assert "At the end of the window: 100 % in 2 accounts of the trail." in section
    # 20,000 of 29,730 came from the funder (67 %); 9,730 (33 %) the subject held before
    assert (f"67 % of it came from what {subject} received in the 3 days before (the trail follows 1 account "
            f"that paid it in, up to 1 transfer back); 33 % was money {subject} held before the window.") in section


def test_the_table_lists_the_headline_accounts_and_the_typology_members(written) -> None:
    _, _, _, text, subject, receiver = written
    section = _part(text, "Money trail", "Narrative")
    assert f"subject (sent it) 0 {subject} 200 297.3 97.3" in section
    assert f"receiver 1 {receiver} 297.3 100 197.3" in section
    assert f"paid in (before) 1 {FUNDER} 200 200" in section
    assert f"paid on (after) 3 {LAST} 100 100" in section
    assert f"typology member {MEMBER}" in section
    assert section.count(receiver) == 1  # a member on the trail is listed once, in its trail role


def test_the_reasons_are_the_mappings_words_without_sentinels_absences_or_repeats(written) -> None:
    text = written[3]
    summary = _part(text, "Summary", "Case")
    assert ("What raised it most: sender received no money in the 7 days before; amount paid: USD 7,603; sender "
            "paid 7 distinct accounts in the last 24 hours.") in summary
    body = text.split("Appendix: exact values")[0]
    for shown_raw in ("-1.0", "-1 ", "Cheque", "7603.15", "7,603.15", "0.4412345678", "g_fwd_share_7d"):
        assert shown_raw not in body, shown_raw
    appendix = text.split("Appendix: exact values")[1]
    for exact in ("-1.0", "7603.15", "0.4412345678", "fmt_cheque"):  # every value exactly, in the appendix
        assert exact in appendix, exact


def test_no_figure_before_the_appendix_has_more_than_four_significant_digits(written) -> None:
    body = written[3].split("Appendix: exact values")[0]
    numbers = [t.strip(".,;:()") for t in body.split() if re.fullmatch(r"\(?[0-9][0-9,]*(\.[0-9]+)?[.,;:)]*", t)]
    assert len(numbers) > 20, body
    for n in numbers:
        plain = n.replace(",", "")
        digits = plain.replace(".", "").lstrip("0") if "." in plain else plain.lstrip("0").rstrip("0")
        assert len(digits) <= 4, (n, body)


def test_the_trail_file_is_signed_beside_the_pdf_and_reads_back(written) -> None:
    out, manifest, trail, *_ = written
    names = [n for n, _ in manifest.files]
    assert names[-1].endswith(".trail.json.gz") and ("trail_id", trail.trail_id) in manifest.extra
    assert MoneyTrail.from_json(gzip.decompress((out / names[-1]).read_bytes())) == trail
    assert verify_reports(out, KEYRING).findings == []


def test_a_trail_of_another_transfer_is_refused(tmp_path: Path) -> None:
    alert = make_alert()
    other = _usd("other", "0099/X", "0099/Y", datetime(2022, 9, 1), 5)
    store = NetworkxGraphStore()
    store.add_transactions([other])
    writer = ReportWriter(tmp_path, input_sha256=INPUT_SHA256, code_version="t", seed=1, signer=SIGNER)
    failed = writer.write(alert, make_trace(), CODES, trail=money_trail(store, other))
    assert "follows transfer 'other'" in failed.reason


def test_the_summary_states_the_trails_own_share_and_no_more() -> None:
    from reports.alert_report import trail_summary

    alert = make_alert()
    subject, receiver = alert.event.sender.node_id, alert.event.receiver.node_id
    store = NetworkxGraphStore()
    # the receiver passes on 4 % of the alerted 29,730 cents: under a 5 % share, not followed
    store.add_transactions([alert.event, _usd("small", receiver, NEXT, datetime(2022, 9, 1, 1, 0), 12)])
    lines = trail_summary(money_trail(store, alert.event, min_share="0.05"))
    assert f"Where it went: {receiver} passed none of it on in transfers of 5 % or more within 3 days." in lines
    assert "At the end of the window: 96 % in 1 account of the trail; 4 % in 1 smaller transfer not followed." in lines
    assert f"Where it came from: 100 % was money {subject} held before the window." in lines
