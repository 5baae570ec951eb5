"""Report file names from hostile alert ids, and a run's reports when some of them fail."""

from __future__ import annotations

import hashlib
import io
import json
import re
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from pypdf import PdfReader

from auditflow.records import Alert, alert_id_for
from reports import (
    AuditLog,
    ReportFailure,
    ReportWriter,
    render_alert_report,
    report_file_stem,
    verify_audit_log,
    verify_manifest,
)
from reports.alert_report import MAX_FILE_STEM
from reports.store import STORE_FILES
from reports.testing import INPUT_SHA256, KEYRING, SIGNER, make_alert, make_reason_codes, make_trace

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~-]*")
SUFFIXES = (".pdf", ".pdf.tmp", ".trace.json", ".manifest.json", ".manifest.json.tmp")


def alert_with_event_id(event_id: str) -> Alert:
    a = make_alert()
    return replace(a, alert_id=alert_id_for(event_id), event=replace(a.event, event_id=event_id))


def hash_of(alert_id: str) -> str:
    return hashlib.sha256(alert_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def usable(stem: str) -> bool:
    """A single plain file name on any common file system, with every report suffix."""
    return (SAFE_NAME.fullmatch(stem) is not None or stem.startswith("~")) and all(
        len((stem + sfx).encode()) <= 255 and "/" not in stem for sfx in SUFFIXES)


def test_plain_short_ids_keep_their_name() -> None:
    for plain in ("alert-tx-4b1d0c9e7f2a3b65", "alert-42", "A.b_c-9", "x" * MAX_FILE_STEM):
        assert report_file_stem(plain) == plain


def test_other_ids_get_safe_characters_and_the_hash_of_the_whole_id() -> None:
    cases = {
        "alert-01/0X": "alert-01_0X",
        "alert-0/1": "alert-0_1",
        "../escape": "escape",
        ".hidden": "hidden",
        "-rf": "rf",
        "a b\x00c\nd": "a_b_c_d",
        "é漢字": "",  # replaced, then stripped like any leading "._-"
        "sur\ud800": "sur_",
        "": "",
    }
    for alert_id, kept in cases.items():
        assert report_file_stem(alert_id) == f"{kept}~{hash_of(alert_id)}", alert_id
    long = "alert-" + "y" * 5000
    stem = report_file_stem(long)
    assert stem == long[: MAX_FILE_STEM - 17] + "~" + hash_of(long)
    assert len(stem) == MAX_FILE_STEM


def test_ids_that_look_alike_get_different_names() -> None:
    # '/' -> '_' and cutting long ids would merge these; the hash keeps them apart, and a plain
    # id never holds '~', so it cannot take a hashed id's name
    ids = ["alert-01/0X", "alert-010/X", "alert-01_0X", "alert-01\\0X", "alert-01 0X",
           "a" * 200, "a" * 201, "a" * 200 + "/", f"alert-01_0X~{hash_of('alert-01/0X')}"]
    stems = [report_file_stem(i) for i in ids]
    assert len(set(stems)) == len(ids)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=400), min_size=2, max_size=8, unique=True))
def test_any_ids_give_distinct_usable_names(ids: list[str]) -> None:
    stems = [report_file_stem(i) for i in ids]
    assert all(usable(s) for s in stems), stems
    assert len(set(stems)) == len(ids)


def test_a_report_for_a_hostile_id_is_written_and_keeps_the_full_id(tmp_path: Path) -> None:
    event_id = "01/0X/" + "9" * 300  # a '/' and longer than a file name allows
    alert = alert_with_event_id(event_id)
    m = render_alert_report(alert, make_trace(), make_reason_codes(), out_dir=tmp_path,
                            input_sha256=INPUT_SHA256, code_version="v", seed=1, signer=SIGNER)
    stem = report_file_stem(alert.alert_id)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in STORE_FILES) == sorted(
        f"{stem}{s}" for s in (".pdf", ".trace.json.gz", ".manifest.json"))
    assert [n for n, _ in m.files] == [f"{stem}.pdf", f"{stem}.trace.json.gz"]
    manifest_path = tmp_path / f"{stem}.manifest.json"
    assert json.loads(manifest_path.read_text())["alert_id"] == alert.alert_id == "alert-" + event_id
    assert verify_manifest(manifest_path, KEYRING) == []
    pdf = PdfReader(io.BytesIO((tmp_path / f"{stem}.pdf").read_bytes()))
    text = "".join("".join(page.extract_text() for page in pdf.pages).split())  # unwrap cells
    assert event_id in text and f"{stem}.manifest.json" in text


def test_one_failing_report_does_not_stop_the_others(tmp_path: Path) -> None:
    good = make_alert()
    slash = alert_with_event_id("01/0X")
    huge = alert_with_event_id("z" * 100_000)  # too tall for its table cell: reportlab LayoutError
    surrogate = alert_with_event_id("sur\ud800")  # a lone surrogate cannot be encoded
    unrooted = alert_with_event_id("elsewhere")
    writer = ReportWriter(tmp_path / "reports", input_sha256=INPUT_SHA256, code_version="v", seed=1,
                          signer=SIGNER)
    trace = make_trace()
    outcomes = [writer.write(a, trace if a is not unrooted else replace(trace, root="999/ELSE"),
                             make_reason_codes())
                for a in (good, huge, slash, surrogate, unrooted)]
    alerts_in = 5
    assert alerts_in == len(writer.written) + len(writer.failed) == writer.attempted
    assert [m.alert_id for m in writer.written] == [good.alert_id, slash.alert_id]
    failed = {f.alert_id: f.reason for f in writer.failed}
    assert list(failed) == [huge.alert_id, surrogate.alert_id, unrooted.alert_id]
    assert failed[huge.alert_id].startswith("LayoutError: ")
    assert failed[surrogate.alert_id].startswith("CanonicalJSONError: ")  # RFC 8785 is valid Unicode only
    assert failed[unrooted.alert_id].startswith("ValueError: trace ") and "rooted" in failed[unrooted.alert_id]
    assert [type(o) for o in outcomes] == [type(writer.written[0]), ReportFailure, type(writer.written[0]),
                                          ReportFailure, ReportFailure]
    # only the written reports' files are there, each verified; a failed one leaves nothing
    names = sorted(p.name for p in (tmp_path / "reports").iterdir() if p.name not in STORE_FILES)
    expected = sorted(f"{report_file_stem(a.alert_id)}{s}" for a in (good, slash)
                      for s in (".pdf", ".trace.json.gz", ".manifest.json"))
    assert names == expected
    for m in writer.written:
        assert verify_manifest(tmp_path / "reports" / f"{report_file_stem(m.alert_id)}.manifest.json",
                               KEYRING) == []
    # the audit log records every outcome in order, failures with the alert id and reason
    entries = [e.to_dict() for e in AuditLog(tmp_path / "reports" / "audit_log.jsonl").entries()]
    assert verify_audit_log(tmp_path / "reports" / "audit_log.jsonl") == []
    subject = {"report": "subject_id", "report_failed": "alert_id"}
    assert [(e["kind"], e["payload"][subject[e["kind"]]]) for e in entries] == [
        ("report", good.alert_id), ("report_failed", huge.alert_id), ("report", slash.alert_id),
        ("report_failed", "alert-sur\\ud800"), ("report_failed", unrooted.alert_id)]
    assert entries[1]["payload"]["reason"] == failed[huge.alert_id]
    assert entries[0]["payload"]["files"] == [list(f) for f in writer.written[0].files]
    assert [m.log_index for m in writer.written] == [0, 2]
