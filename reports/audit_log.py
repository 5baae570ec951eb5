"""A tamper-evident, append-only audit log: one canonical JSON entry per line, hash-chained.

Each entry holds ``seq`` (0-based), ``kind``, ``payload``, ``prev_hash`` (the previous entry's
``entry_hash``; 64 zeros for the first) and ``entry_hash`` = SHA-256 of the canonical JSON of
``{"kind", "payload", "prev_hash", "seq"}``. Editing, deleting, inserting or reordering any line
breaks the chain at that line. Cutting lines off the *end* leaves a valid shorter chain; to
detect that, keep the head (:attr:`AuditLog.head`) somewhere else, e.g. in a run manifest, and
pass it as ``expected_head``. Nothing here reads the clock: put times in the payload.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "audit.jsonl"
>>> log = AuditLog(path)
>>> log.append("run", {"input_sha256": "ab" * 32})["seq"]
0
>>> log.append("report", {"alert_id": "alert-tx-1"})["prev_hash"] == log.entries()[0]["entry_hash"]
True
>>> verify_audit_log(path)
[]
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from auditflow.canonical import canonical_json

GENESIS_HASH = "0" * 64
_FIELDS = {"seq", "kind", "payload", "prev_hash", "entry_hash"}


def _canonical(obj: Any) -> str:
    return canonical_json(obj).decode("utf-8")


def entry_hash(seq: int, kind: str, payload: dict[str, Any], prev_hash: str) -> str:
    body = {"seq": seq, "kind": kind, "payload": payload, "prev_hash": prev_hash}
    return hashlib.sha256(_canonical(body).encode("utf-8")).hexdigest()


def make_entry(seq: int, kind: str, payload: dict[str, Any], prev_hash: str) -> dict[str, Any]:
    return {"seq": seq, "kind": kind, "payload": payload, "prev_hash": prev_hash,
            "entry_hash": entry_hash(seq, kind, payload, prev_hash)}


class AuditLog:
    """Appends hash-chained entries to a JSON-lines file; refuses to extend a damaged log."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._next_seq, self._head = self._read_tail()

    def _read_tail(self) -> tuple[int, str]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return 0, GENESIS_HASH
        problems = verify_audit_log(self.path)
        if problems:
            raise ValueError(f"audit log {self.path} is damaged, not appending: {problems[0]}")
        last = self.path.read_bytes().splitlines()[-1]
        entry = json.loads(last)
        return entry["seq"] + 1, entry["entry_hash"]

    @property
    def head(self) -> str:
        """The last entry's hash (64 zeros when empty): anchor it elsewhere to detect truncation."""
        return self._head

    def __len__(self) -> int:
        return self._next_seq

    def append(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"kind must be a non-empty string, got {kind!r}")
        if not isinstance(payload, dict):
            raise ValueError(f"payload must be a dict, got {type(payload).__name__}")
        # Round-trip now so what is hashed is exactly what a reader will load (tuples -> lists...).
        payload = json.loads(_canonical(payload))
        entry = make_entry(self._next_seq, kind, payload, self._head)
        line = _canonical(entry) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._next_seq += 1
        self._head = entry["entry_hash"]
        return entry

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines()]


def verify_audit_log(path: str | Path, *, expected_head: str | None = None) -> list[str]:
    """Problems found in the log, each naming its 1-based line (empty list = intact).

    ``expected_head``, when given, is the ``entry_hash`` the last line must carry; it catches
    lines cut off the end, which the chain alone cannot.
    """
    path = Path(path)
    if not path.exists():
        return [f"{path.name}: audit log not found"]
    data = path.read_bytes()
    problems: list[str] = []
    if data and not data.endswith(b"\n"):
        last_line = data.count(b"\n") + 1
        problems.append(f"line {last_line}: incomplete last line (no newline)")
    prev_hash = GENESIS_HASH
    last_hash = GENESIS_HASH
    expected_seq = 0
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            entry = json.loads(raw)
        except ValueError:
            problems.append(f"line {lineno}: not valid JSON")
            prev_hash = None  # the chain cannot be followed through this line
            expected_seq += 1
            continue
        if not isinstance(entry, dict) or set(entry) != _FIELDS:
            got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            problems.append(f"line {lineno}: expected fields {sorted(_FIELDS)}, got {got}")
            prev_hash = None
            expected_seq += 1
            continue
        seq, kind, payload = entry["seq"], entry["kind"], entry["payload"]
        if seq != expected_seq:
            problems.append(f"line {lineno}: seq {seq!r}, expected {expected_seq} "
                            "(a line was deleted, inserted or moved)")
        # Follow the sequence from here, so one deletion is reported once, not on every later line.
        expected_seq = seq + 1 if isinstance(seq, int) and not isinstance(seq, bool) else expected_seq + 1
        if prev_hash is not None and entry["prev_hash"] != prev_hash:
            problems.append(f"line {lineno}: prev_hash does not match the entry_hash of line "
                            f"{lineno - 1 if lineno > 1 else 'none (genesis)'} "
                            "(a line before it was changed, deleted, inserted or moved)")
        try:
            recomputed = entry_hash(seq, kind, payload, entry["prev_hash"])
        except (TypeError, ValueError) as e:
            problems.append(f"line {lineno}: cannot be hashed ({e})")
            recomputed = None
        if recomputed is not None and recomputed != entry["entry_hash"]:
            problems.append(f"line {lineno}: entry_hash does not match its contents (line was modified)")
        elif recomputed is not None and raw.decode("utf-8", "replace") != _canonical(entry):
            problems.append(f"line {lineno}: not in canonical form (line was edited)")
        prev_hash = entry["entry_hash"]
        last_hash = entry["entry_hash"]
    if expected_head is not None and last_hash != expected_head:
        problems.append(f"end of log: last entry_hash {last_hash} is not the expected head "
                        f"{expected_head} (entries were cut off or replaced)")
    return problems
