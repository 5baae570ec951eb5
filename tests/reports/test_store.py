"""The write-once reports folder: reruns change nothing, new content is a new version, and a
crash between the report and its log entry is repaired by the next writer."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

import pytest

from reports.audit_log import AuditLog, verify_audit_log
from reports.manifest import verify_manifest
from reports.store import LOG_NAME, ReportStore
from reports.alert_report import make_case, prepare_alert_report
from reports.testing import INPUT_SHA256, KEYRING, SIGNER, make_alert, make_reason_codes, make_trace


def prepared(seed: int = 7):
    return prepare_alert_report(make_case(make_alert(), make_trace(), make_reason_codes(), input_sha256=INPUT_SHA256,
                                          code_version="v", seed=seed))


def snapshot(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_publish_binds_the_manifest_to_its_log_entry(tmp_path):
    store = ReportStore(tmp_path, SIGNER)
    stem, contents, unsigned = prepared()
    out = store.publish(stem, contents, unsigned)
    assert out.status == "written" and out.manifest.log_index == 0 and out.manifest.key_id == SIGNER.key_id
    entry = AuditLog(tmp_path / LOG_NAME).entries()[0]
    manifest_bytes = (tmp_path / f"{stem}.manifest.json").read_bytes()
    assert entry.payload["manifest"] == [f"{stem}.manifest.json", hashlib.sha256(manifest_bytes).hexdigest()]
    assert entry.payload["files"] == [[f"{stem}.pdf", hashlib.sha256(contents[0][1]).hexdigest()],
                                      [f"{stem}.trace.json.gz", hashlib.sha256(contents[1][1]).hexdigest()]]
    assert verify_manifest(tmp_path / f"{stem}.manifest.json", KEYRING) == []


def test_a_rerun_with_the_same_inputs_changes_no_byte_and_logs_nothing(tmp_path):
    stem, contents, unsigned = prepared()
    ReportStore(tmp_path, SIGNER).publish(stem, contents, unsigned)
    before = snapshot(tmp_path)
    again = ReportStore(tmp_path, SIGNER).publish(*prepared())
    assert again.status == "unchanged" and snapshot(tmp_path) == before


def test_new_content_for_the_same_alert_is_a_new_version_never_an_overwrite(tmp_path):
    store = ReportStore(tmp_path, SIGNER)
    first = store.publish(*prepared(seed=7))
    before = snapshot(tmp_path)
    second = store.publish(*prepared(seed=8))
    stem = prepared()[0]
    assert second.status == "new version" and second.stem == f"{stem}@2" and second.manifest.log_index == 1
    assert [n for n, _ in second.manifest.files] == [f"{stem}@2.pdf", f"{stem}@2.trace.json.gz"]
    after = snapshot(tmp_path)
    for name in (f"{stem}.pdf", f"{stem}.trace.json.gz", f"{stem}.manifest.json"):
        assert after[name] == before[name]  # version 1 untouched
    assert store.publish(*prepared(seed=8)).status == "unchanged"
    assert store.publish(*prepared(seed=7)).manifest == first.manifest


def test_a_crash_between_manifest_and_log_append_is_repaired(tmp_path, monkeypatch):
    stem, contents, unsigned = prepared()
    store = ReportStore(tmp_path, SIGNER)
    store.publish(*prepared(seed=9))  # one report already logged

    def crash(*args, **kwargs):
        raise SystemExit("killed before the log append")

    monkeypatch.setattr(AuditLog, "append", crash)
    with pytest.raises(SystemExit):
        ReportStore(tmp_path, SIGNER).publish(stem, contents, unsigned)
    monkeypatch.undo()
    # the report is there but unlogged: what verify would call an unlogged manifest
    assert (tmp_path / f"{stem}@2.manifest.json").exists() and AuditLog(tmp_path / LOG_NAME).size == 1
    repair = ReportStore(tmp_path, SIGNER).repair()
    assert repair.appended == [f"{stem}@2.manifest.json"] and not repair.quarantined
    entries = AuditLog(tmp_path / LOG_NAME).entries()
    assert [e.kind for e in entries] == ["report", "report"] and entries[1].payload["manifest"][0] == f"{stem}@2.manifest.json"
    # exactly the entry an uninterrupted run writes
    clean = tmp_path / "clean"
    ReportStore(clean, SIGNER).publish(*prepared(seed=9))
    ReportStore(clean, SIGNER).publish(stem, contents, unsigned)
    assert (tmp_path / LOG_NAME).read_bytes() == (clean / LOG_NAME).read_bytes()
    assert ReportStore(tmp_path, SIGNER).repair().nothing


def test_a_crash_before_the_manifest_leaves_files_that_are_quarantined(tmp_path):
    stem, contents, _ = prepared()
    ReportStore(tmp_path, SIGNER)
    (tmp_path / f"{stem}.pdf").write_bytes(contents[0][1])  # written, then killed
    (tmp_path / f"{stem}.trace.json.tmp").write_bytes(b"{")
    repair = ReportStore(tmp_path, SIGNER).repair()
    assert sorted(repair.quarantined) == sorted([f"{stem}.pdf", f"{stem}.trace.json.tmp"])
    assert sorted(p.name for p in (tmp_path / "quarantine").iterdir()) == sorted(repair.quarantined)
    log = AuditLog(tmp_path / LOG_NAME)
    assert log.entries()[-1].kind == "quarantined" and verify_audit_log(tmp_path / LOG_NAME) == []
    # and the rerun then writes the report as version 1
    assert ReportStore(tmp_path, SIGNER).publish(*prepared()).status == "written"


def test_a_manifest_expecting_another_index_is_quarantined_not_appended(tmp_path):
    store = ReportStore(tmp_path, SIGNER)
    stem, contents, unsigned = prepared()
    out = store.publish(stem, contents, unsigned)
    lines = (tmp_path / LOG_NAME).read_bytes()
    (tmp_path / LOG_NAME).write_bytes(b"")  # the log lost its entry: the manifest says index 0...
    AuditLog(tmp_path / LOG_NAME).append("run", {})  # ... but index 0 is now something else
    repair = ReportStore(tmp_path, SIGNER).repair()
    assert f"{stem}.manifest.json" in repair.quarantined and not repair.appended
    assert lines and out.manifest.log_index == 0


def test_a_torn_log_line_is_cut_then_the_orphan_appended(tmp_path):
    stem, contents, unsigned = prepared()
    ReportStore(tmp_path, SIGNER).publish(stem, contents, unsigned)
    whole = (tmp_path / LOG_NAME).read_bytes()
    (tmp_path / LOG_NAME).write_bytes(whole[: len(whole) // 2])  # the append was cut mid-line
    repair = ReportStore(tmp_path, SIGNER).repair()
    assert repair.torn_bytes == len(whole) // 2 and repair.appended == [f"{stem}.manifest.json"]
    assert (tmp_path / LOG_NAME).read_bytes() == whole


def test_the_stem_must_be_the_subjects(tmp_path):
    stem, contents, unsigned = prepared()
    with pytest.raises(ValueError, match="is not the stem"):
        ReportStore(tmp_path, SIGNER).publish("other-alert", contents, unsigned)
    with pytest.raises(ValueError, match="is not the stem"):
        ReportStore(tmp_path, SIGNER).publish(stem, contents, replace(unsigned, alert_id="alert-other"))
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".pdf")]


_WRITER = """
import sys
from pathlib import Path
from reports.testing import make_reports_folder
make_reports_folder(Path(sys.argv[1]), 400)
"""


@pytest.mark.parametrize("kill_after_reports", [2, 7, 15])
def test_a_writer_killed_mid_run_leaves_a_folder_the_next_run_repairs(tmp_path, kill_after_reports):
    """SIGKILL a process writing reports once it has logged some (wherever it is then: rendering,
    writing files, between manifest and log line); the next writer repairs, and the folder
    verifies with every logged report intact and nothing unlogged left."""
    import signal
    import subprocess
    import sys
    import time

    folder = tmp_path / "reports"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(folder)],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    log = folder / LOG_NAME
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not log.exists() or log.read_bytes().count(b"\n") < kill_after_reports):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert log.read_bytes().count(b"\n") >= kill_after_reports
    store = ReportStore(folder, SIGNER)
    repair = store.repair()
    store.finish()
    from reports.verify import verify_reports

    res = verify_reports(folder, KEYRING)
    assert res.ok, (repair, res.findings)
    logged = {e.payload["manifest"][0] for e in store.log.entries() if e.kind == "report"}
    assert logged == {p.name for p in folder.glob("*.manifest.json")}
    assert ReportStore(folder, SIGNER).repair().nothing
