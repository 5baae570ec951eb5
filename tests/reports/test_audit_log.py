"""The Merkle-tree audit log: lines are RFC 6962 leaves; edits, cuts and rewrites show against
a signed tree head; appends from two processes never fork the log; a torn line is repaired."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from pathlib import Path

import pytest

from auditflow.canonical import canonical_json
from reports.audit_log import AuditLog, AuditLogDamaged, TreeHead, check_audit_log, verify_audit_log
from reports.merkle import verify_consistency, verify_inclusion
from reports.signing import Keyring, Signer
from reports.testing import KEYRING, SIGNER


@pytest.fixture
def log_path(tmp_path) -> Path:
    path = tmp_path / "audit_log.jsonl"
    log = AuditLog(path)
    log.append("run", {"input_sha256": "ab" * 32, "seed": 7})
    for i in range(4):
        log.append("report", {"alert_id": f"alert-tx-{i}", "score": 0.5 + i / 10})
    log.append("report", {"alert_id": "alert-tx-9", "amount": "0.025852", "currency": "Bitcoin"})
    return path


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def independent_root(leaves: list[bytes]) -> bytes:
    """RFC 6962 MTH, written out recursively here (not reports.merkle)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + independent_root(leaves[:k]) + independent_root(leaves[k:])).digest()


def test_lines_are_canonical_entries_and_the_root_is_rfc6962(log_path):
    raw = [ln.rstrip(b"\n") for ln in lines(log_path)]
    assert raw[5] == b'{"index":5,"kind":"report","payload":{"alert_id":"alert-tx-9","amount":"0.025852","currency":"Bitcoin"}}'
    assert raw[0] == canonical_json({"index": 0, "kind": "run", "payload": {"input_sha256": "ab" * 32, "seed": 7}})
    log = AuditLog(log_path)
    assert log.size == 6 and log.root() == independent_root(raw)
    assert [e.index for e in log.entries()] == list(range(6))
    assert verify_audit_log(log_path) == []


def test_reopening_continues_the_log(log_path):
    log = AuditLog(log_path)
    before = log.root()
    assert log.append("run", {"finished": True}).index == 6
    again = AuditLog(log_path)
    assert again.size == 7 and again.root() != before
    assert verify_consistency(6, 7, before, again.root(), again.consistency_proof(6))


def test_every_entry_has_an_inclusion_proof_against_the_signed_head(log_path):
    log = AuditLog(log_path)
    head = log.tree_head(SIGNER)
    assert head.problem(KEYRING) is None and head.tree_size == 6
    for e in log.entries():
        assert verify_inclusion(e.index, 6, e.leaf_hash, log.inclusion_proof(e.index), bytes.fromhex(head.root_hash))


@pytest.mark.parametrize("edit, line, why", [
    (lambda ls: ls.__setitem__(2, ls[2].replace(b"alert-tx-1", b"alert-tx-7")), 3, None),  # detected vs head
    (lambda ls: ls.__delitem__(1), 2, "index 2, expected 1"),
    (lambda ls: ls.insert(2, ls[2]), 4, "index 2, expected 3"),
    (lambda ls: ls.__setitem__(1, json.dumps(json.loads(ls[1])).encode() + b"\n"), 2, "not in canonical form"),
    (lambda ls: ls.__setitem__(3, b"{not json\n"), 4, "not valid JSON"),
])
def test_each_edit_is_named(log_path, edit, line, why):
    head = AuditLog(log_path).tree_head(SIGNER)
    ls = lines(log_path)
    edit(ls)
    log_path.write_bytes(b"".join(ls))
    problems = verify_audit_log(log_path, tree_head=head, keyring=KEYRING)
    assert problems, "an edit went unnoticed"
    if why:
        assert any(f"line {line}: " in p and why in p for p in problems), problems
    else:  # a value edited into another valid canonical line: only the tree head shows it
        assert check_audit_log(log_path).problems == []
        assert any("do not give its root" in p for p in problems), problems


def test_cutting_lines_off_the_end_shows_against_the_head(log_path):
    head = AuditLog(log_path).tree_head(SIGNER)
    log_path.write_bytes(b"".join(lines(log_path)[:-2]))
    assert verify_audit_log(log_path) == []  # a shorter log is a valid log by itself...
    problems = verify_audit_log(log_path, tree_head=head, keyring=KEYRING)
    assert any("records 6 log entries, the log has 4" in p for p in problems)


def test_a_rewritten_log_re_signed_by_another_key_is_not_trusted(log_path, tmp_path):
    head = AuditLog(log_path).tree_head(SIGNER)
    forged_path = tmp_path / "forged.jsonl"
    forged = AuditLog(forged_path)
    for e in AuditLog(log_path).entries():
        forged.append(e.kind, {**e.payload, "seed": 8} if e.kind == "run" else e.payload)
    mallory = Signer.from_seed(bytes(32))
    forged_head = forged.tree_head(mallory)
    assert any("not among the trusted keys" in p
               for p in verify_audit_log(forged_path, tree_head=forged_head, keyring=KEYRING))
    assert any("do not give its root" in p for p in verify_audit_log(forged_path, tree_head=head, keyring=KEYRING))


def test_tree_head_round_trip_and_tampering(tmp_path, log_path):
    head = AuditLog(log_path).tree_head(SIGNER)
    head.write(tmp_path / "head.json")
    assert TreeHead.load(tmp_path / "head.json") == head
    for field, value in (("tree_size", 5), ("root_hash", "00" * 32)):
        d = head.to_dict() | {field: value}
        assert "does not verify" in TreeHead.from_dict(d).problem(KEYRING)
    with pytest.raises(ValueError, match="tree_size"):
        TreeHead.from_dict(head.to_dict() | {"tree_size": -1})
    with pytest.raises(ValueError):
        TreeHead.from_dict(head.to_dict() | {"extra": 1})


def test_a_torn_append_is_cut_by_the_next_writer(log_path):
    whole = log_path.read_bytes()
    log_path.write_bytes(whole + b'{"index":6,"kind":"rep')  # a crash mid-write
    assert any("incomplete last line" in p for p in verify_audit_log(log_path))
    log = AuditLog(log_path)  # readers see the complete lines
    assert log.size == 6
    with pytest.raises(AuditLogDamaged, match="torn"):
        log.append("report", {"alert_id": "x"})
    assert log.repair_tail() == len(b'{"index":6,"kind":"rep')
    assert log_path.read_bytes() == whole
    assert log.append("report", {"alert_id": "x"}).index == 6
    assert verify_audit_log(log_path) == []


def test_a_damaged_log_is_not_extended(log_path):
    ls = lines(log_path)
    del ls[2]
    log_path.write_bytes(b"".join(ls))
    with pytest.raises(AuditLogDamaged, match="line 3"):
        AuditLog(log_path)


def _append_many(path: str, who: str, n: int) -> None:
    log = AuditLog(path)  # opened before the other writer's appends: must catch up under the lock
    for i in range(n):
        log.append("report", {"writer": who, "i": i})


def test_two_processes_appending_at_once_never_fork_the_log(tmp_path):
    path = tmp_path / "audit_log.jsonl"
    AuditLog(path).append("run", {})
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), w, 60)) for w in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert verify_audit_log(path) == []
    entries = AuditLog(path).entries()
    assert [e.index for e in entries] == list(range(121))
    for w in ("a", "b"):  # each writer's entries all there, in its own order
        assert [e.payload["i"] for e in entries if e.payload.get("writer") == w] == list(range(60))


def test_keyring_must_trust_the_head(log_path):
    head = AuditLog(log_path).tree_head(SIGNER)
    assert any("not among the trusted keys" in p
               for p in verify_audit_log(log_path, tree_head=head, keyring=Keyring()))


def test_a_log_of_the_earlier_hash_chain_format_is_named_as_such(tmp_path):
    path = tmp_path / "audit_log.jsonl"
    path.write_text('{"entry_hash":"' + "a" * 64 + '","kind":"run","payload":{},"prev_hash":"' + "0" * 64 + '","seq":0}\n')
    with pytest.raises(AuditLogDamaged, match="earlier auditflow"):
        AuditLog(path)
