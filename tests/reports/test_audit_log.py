"""The hash-chained audit log: appends chain, and any edit, deletion, insertion or move shows."""

from __future__ import annotations

import json

import pytest

from reports import GENESIS_HASH, AuditLog, verify_audit_log


@pytest.fixture
def log_path(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.append("run", {"input_sha256": "ab" * 32, "seed": 7})
    for i in range(4):
        log.append("alert", {"alert_id": f"alert-tx-{i}", "score": 0.5 + i / 10})
    log.append("report", {"alert_id": "alert-tx-0", "amount": "0.025852", "currency": "Bitcoin"})
    return path


def lines(path):
    return path.read_text().splitlines(keepends=True)


def test_entries_chain_and_verify(log_path):
    entries = AuditLog(log_path).entries()
    assert [e["seq"] for e in entries] == list(range(6))
    assert entries[0]["prev_hash"] == GENESIS_HASH
    for prev, cur in zip(entries, entries[1:]):
        assert cur["prev_hash"] == prev["entry_hash"]
    assert entries[-1]["payload"]["amount"] == "0.025852"
    assert verify_audit_log(log_path) == []


def test_reopening_continues_the_chain(log_path):
    log = AuditLog(log_path)
    head = log.head
    entry = log.append("run", {"finished": True})
    assert entry["seq"] == 6 and entry["prev_hash"] == head and log.head == entry["entry_hash"]
    assert verify_audit_log(log_path, expected_head=log.head) == []


def test_same_appends_give_identical_files(tmp_path):
    for name in ("a", "b"):
        log = AuditLog(tmp_path / name)
        log.append("run", {"seed": 1, "at": "2022-09-01T00:00"})
        log.append("report", {"alert_id": "x", "nested": {"b": 1, "a": [1, 2]}})
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


def test_modified_line_is_detected_with_its_line_number(log_path):
    text = lines(log_path)
    text[2] = text[2].replace("alert-tx-1", "alert-tx-9")
    log_path.write_text("".join(text))
    problems = verify_audit_log(log_path)
    assert problems and problems[0].startswith("line 3:") and "modified" in problems[0]


def test_deleted_line_is_detected(log_path):
    text = lines(log_path)
    del text[3]
    log_path.write_text("".join(text))
    problems = verify_audit_log(log_path)
    assert problems and all(p.startswith("line 4:") for p in problems)


def test_inserted_line_is_detected(log_path):
    text = lines(log_path)
    forged = dict(json.loads(text[1]), payload={"alert_id": "forged"})
    text.insert(2, json.dumps(forged, sort_keys=True, separators=(",", ":")) + "\n")
    log_path.write_text("".join(text))
    problems = verify_audit_log(log_path)
    assert any(p.startswith("line 3:") for p in problems)


def test_reordered_lines_are_detected(log_path):
    text = lines(log_path)
    text[2], text[3] = text[3], text[2]
    log_path.write_text("".join(text))
    problems = verify_audit_log(log_path)
    assert any(p.startswith("line 3:") for p in problems)
    assert any(p.startswith("line 4:") for p in problems)


def test_whitespace_edit_and_garbage_are_detected(log_path):
    text = lines(log_path)
    text[1] = json.dumps(json.loads(text[1]), sort_keys=True) + "\n"  # same data, new spacing
    text[4] = "not json\n"
    log_path.write_text("".join(text))
    problems = verify_audit_log(log_path)
    assert any(p.startswith("line 2:") and "canonical" in p for p in problems)
    assert any(p.startswith("line 5:") and "JSON" in p for p in problems)


def test_truncation_needs_the_anchored_head(log_path):
    head = AuditLog(log_path).head
    log_path.write_text("".join(lines(log_path)[:-1]))
    assert verify_audit_log(log_path) == []  # a shorter chain is still a valid chain
    problems = verify_audit_log(log_path, expected_head=head)
    assert problems and "cut off" in problems[0]


def test_torn_last_line_is_detected_and_blocks_appending(log_path):
    data = log_path.read_bytes()
    log_path.write_bytes(data[:-10])
    assert any("line 6:" in p for p in verify_audit_log(log_path))
    with pytest.raises(ValueError, match="damaged"):
        AuditLog(log_path)


def test_rejects_bad_appends(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl")
    with pytest.raises(ValueError):
        log.append("", {})
    with pytest.raises(ValueError):
        log.append("run", ["not", "a", "dict"])
    with pytest.raises(ValueError):
        log.append("run", {"x": float("nan")})
    assert len(log) == 0 and not (tmp_path / "a.jsonl").exists()
