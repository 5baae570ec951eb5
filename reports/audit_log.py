"""The append-only audit log: JSON lines that are the leaves of an RFC 6962 Merkle tree.

Each line is the RFC 8785 canonical JSON of ``{"index", "kind", "payload"}`` (``index`` 0-based,
the line's position); its **leaf hash** is ``SHA-256(0x00 || line bytes)`` (without the newline)
and the tree over all lines is the log's state (:mod:`reports.merkle`). A **signed tree head**
(:class:`TreeHead`: size, root hash, key id, Ed25519 signature over its canonical body) is
written at the end of each run as ``tree_head.json`` and can be kept anywhere else; a later log
must be *consistent* with it (its first ``tree_size`` lines give the same root), so cutting,
rewriting or reordering lines is caught by anyone holding an older head.

Appends are serialised across processes with ``fcntl.flock`` on ``<log>.lock``: a writer
re-reads what others appended before it writes, so two writers never fork the log. A line cut
off by a crash (no newline) is removed by the next writer (:meth:`AuditLog.repair_tail`).
Nothing here reads the clock.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "audit_log.jsonl"
>>> log = AuditLog(path)
>>> log.append("run", {"input_sha256": "ab" * 32}).index, log.append("report", {"alert_id": "a-1"}).index
(0, 1)
>>> verify_audit_log(path)
[]
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditflow.canonical import CanonicalJSONError, canonical_json
from reports.merkle import MerkleTree, leaf_hash, verify_consistency, verify_inclusion
from reports.signing import Keyring, Signer

TREE_HEAD_SCHEMA = "auditflow.tree_head/1"
TREE_HEAD_ALGORITHM = "RFC6962-SHA256"
_FIELDS = {"index", "kind", "payload"}


class AuditLogDamaged(ValueError):
    """The log file is not a valid log (a line edited, not canonical, out of order)."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    index: int
    kind: str
    payload: dict[str, Any]
    leaf_hash: bytes

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "payload": self.payload}


def entry_line(index: int, kind: str, payload: dict[str, Any]) -> bytes:
    """The canonical bytes of an entry (its leaf data), without the newline."""
    return canonical_json({"index": index, "kind": kind, "payload": payload})


def parse_line(raw: bytes, expected_index: int) -> tuple[LogEntry | None, str | None]:
    """An entry from one line, or why the line is not one (naming what is wrong)."""
    try:
        d = json.loads(raw)
    except ValueError:
        return None, "not valid JSON"
    if not isinstance(d, dict) or set(d) != _FIELDS:
        got = sorted(d) if isinstance(d, dict) else type(d).__name__
        if isinstance(d, dict) and {"seq", "prev_hash", "entry_hash"} <= set(d):
            return None, ("a hash-chained log of an earlier auditflow (before the Merkle log): keep it as it is "
                          "and write new reports into a new folder")
        return None, f"expected fields {sorted(_FIELDS)}, got {got}"
    if not isinstance(d["kind"], str) or not isinstance(d["payload"], dict):
        return None, "kind must be a string and payload an object"
    if d["index"] != expected_index or isinstance(d["index"], bool):
        return None, f"index {d['index']!r}, expected {expected_index} (a line was deleted, inserted or moved)"
    try:
        canonical = canonical_json(d)
    except CanonicalJSONError as e:
        return None, str(e)
    if canonical != raw:
        return None, "not in canonical form (the line was edited)"
    return LogEntry(d["index"], d["kind"], d["payload"], leaf_hash(raw)), None


# ----------------------------------------------------------------------------- tree heads


@dataclass(frozen=True, slots=True)
class TreeHead:
    """A signed statement of the log's state: its size and Merkle root."""

    tree_size: int
    root_hash: str  # hex
    key_id: str = ""
    signature: str = ""

    def body(self) -> dict[str, Any]:
        return {"schema": TREE_HEAD_SCHEMA, "algorithm": TREE_HEAD_ALGORITHM, "tree_size": self.tree_size,
                "root_hash": self.root_hash, "key_id": self.key_id}

    def to_dict(self) -> dict[str, Any]:
        return {**self.body(), "signature": self.signature}

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n").encode("ascii")

    def signed(self, signer: Signer) -> TreeHead:
        keyed = TreeHead(self.tree_size, self.root_hash, signer.key_id)
        return TreeHead(self.tree_size, self.root_hash, signer.key_id, signer.sign(canonical_json(keyed.body())))

    def problem(self, keyring: Keyring) -> str | None:
        """Why its signature is not trusted, or None."""
        return keyring.check(self.key_id, canonical_json(self.body()), self.signature)

    @classmethod
    def from_dict(cls, d: object) -> TreeHead:
        if not isinstance(d, dict) or d.get("schema") != TREE_HEAD_SCHEMA:
            raise ValueError(f"not a {TREE_HEAD_SCHEMA} document")
        if set(d) != set(cls(0, "").to_dict()) or d.get("algorithm") != TREE_HEAD_ALGORITHM:
            raise ValueError(f"expected fields {sorted(cls(0, '').to_dict())} and algorithm {TREE_HEAD_ALGORITHM}")
        size, root = d["tree_size"], d["root_hash"]
        if type(size) is not int or size < 0 or not isinstance(root, str) or len(root) != 64:
            raise ValueError("tree_size must be a non-negative integer and root_hash 64 hex digits")
        bytes.fromhex(root)
        return cls(size, root, str(d["key_id"]), str(d["signature"]))

    @classmethod
    def load(cls, path: str | Path) -> TreeHead:
        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError) as e:
            raise ValueError(f"tree head {path}: {e}") from None

    def write(self, path: str | Path) -> None:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(self.to_bytes())
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)


# ----------------------------------------------------------------------------- the log


class AuditLog:
    """The log file and its Merkle tree; appends locked across processes.

    Opening reads and checks every line (:class:`AuditLogDamaged` on the first bad one, except a
    torn last line without its newline, which only a writer's :meth:`repair_tail` removes).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._tree = MerkleTree()
        self._entries: list[LogEntry] = []
        self._offset = 0  # bytes of the file read into the tree (whole lines only)
        self._lock_depth = 0
        self._lock_fd: int | None = None
        self._read_new()

    # -- reading

    def _read_new(self) -> None:
        """Read the lines appended since the last read (by this or another process)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        end = data.rfind(b"\n") + 1  # a torn last line stays unread
        for raw in data[:end].split(b"\n")[:-1]:
            entry, why = parse_line(raw, self._tree.size)
            if entry is None:
                raise AuditLogDamaged(f"audit log {self.path} is damaged, not using it: line {self._tree.size + 1}: {why}")
            self._entries.append(entry)
            self._tree.append(entry.leaf_hash)
        self._offset += end

    @property
    def size(self) -> int:
        return self._tree.size

    def __len__(self) -> int:
        return self._tree.size

    def entries(self) -> list[LogEntry]:
        return list(self._entries)

    def root(self, size: int | None = None) -> bytes:
        return self._tree.root(size)

    def leaf_hash(self, index: int) -> bytes:
        return self._tree.leaf(index)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        return self._tree.inclusion_proof(index, size)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        return self._tree.consistency_proof(old_size, new_size)

    def tree_head(self, signer: Signer) -> TreeHead:
        """The signed head of the log as it is now."""
        return TreeHead(self.size, self.root().hex()).signed(signer)

    # -- writing

    @contextlib.contextmanager
    def locked(self) -> Iterator[AuditLog]:
        """Hold the log's exclusive lock (re-entrant in this object); what others appended is read
        first, so appends under it continue the latest log."""
        if self._lock_depth == 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._lock_fd = fd
        self._lock_depth += 1
        try:
            if self._lock_depth == 1:
                self._read_new()
            yield self
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0 and self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None

    def repair_tail(self) -> int:
        """Cut a torn last line (a crash mid-append: no newline); returns the bytes removed."""
        with self.locked():
            try:
                total = self.path.stat().st_size
            except FileNotFoundError:
                return 0
            torn = total - self._offset
            if torn > 0:
                with open(self.path, "r+b") as fh:
                    fh.truncate(self._offset)
                    fh.flush()
                    os.fsync(fh.fileno())
            return max(torn, 0)

    def append(self, kind: str, payload: dict[str, Any]) -> LogEntry:
        """Append one entry (under the lock) and return it; durable when this returns."""
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"kind must be a non-empty string, got {kind!r}")
        if not isinstance(payload, dict):
            raise ValueError(f"payload must be a dict, got {type(payload).__name__}")
        with self.locked():
            if self.path.exists() and self.path.stat().st_size != self._offset:
                raise AuditLogDamaged(f"audit log {self.path} ends in a torn line: repair_tail() first")
            # Round-trip so what is hashed is exactly what a reader loads (tuples -> lists...).
            payload = json.loads(canonical_json(payload))
            raw = entry_line(self.size, kind, payload)
            new_file = not self.path.exists()
            with open(self.path, "ab") as fh:
                fh.write(raw + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
            if new_file:
                _fsync_dir(self.path.parent)
            entry = LogEntry(self.size, kind, payload, leaf_hash(raw))
            self._entries.append(entry)
            self._tree.append(entry.leaf_hash)
            self._offset += len(raw) + 1
            return entry


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- verification


@dataclass
class LogCheck:
    """What :func:`check_audit_log` found: the entries read (up to the first bad line), their
    tree, and the problems (each naming a line or the tree head)."""

    entries: list[LogEntry]
    tree: MerkleTree
    problems: list[str]


def check_audit_log(path: str | Path) -> LogCheck:
    path = Path(path)
    tree, entries, problems = MerkleTree(), [], []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LogCheck([], tree, [f"{path.name}: audit log not found"])
    lines = data.split(b"\n")
    if lines[-1] != b"":
        problems.append(f"{path.name} line {len(lines)}: incomplete last line (no newline: a torn append)")
    for lineno, raw in enumerate(lines[:-1], start=1):
        entry, why = parse_line(raw, len(entries))
        if entry is None:
            problems.append(f"{path.name} line {lineno}: {why}")
            break  # the tree cannot be followed past a bad leaf
        entries.append(entry)
        tree.append(entry.leaf_hash)
    return LogCheck(entries, tree, problems)


def check_tree_head(tree: MerkleTree, head: TreeHead, keyring: Keyring, *, what: str = "") -> list[str]:
    """Problems of the log (as ``tree``) against a signed tree head: its signature, and that the
    log extends it (a consistency proof from its size to the log's, checked RFC 9162 style).
    Each starts with ``what: `` when given."""
    problems = []
    pre = f"{what}: " if what else ""
    why = head.problem(keyring)
    if why is not None:
        problems.append(f"{pre}{why}")
    if head.tree_size > tree.size:
        problems.append(f"{pre}records {head.tree_size} log entries, the log has {tree.size} "
                        "(entries were cut off or the log replaced)")
        return problems
    proof = tree.consistency_proof(head.tree_size, tree.size)
    if not verify_consistency(head.tree_size, tree.size, bytes.fromhex(head.root_hash), tree.root(), proof):
        problems.append(f"{pre}the log's first {head.tree_size} entries do not give its root "
                        f"{head.root_hash[:16]}... (the log was rewritten or reordered)")
    return problems


def inclusion_ok(tree: MerkleTree, index: int, head: TreeHead | None) -> bool:
    """Leaf ``index`` is in the tree the head signs (or, past the head, in the log's own root)."""
    size = head.tree_size if head is not None and index < head.tree_size else tree.size
    root = bytes.fromhex(head.root_hash) if head is not None and index < head.tree_size else tree.root()
    return verify_inclusion(index, size, tree.leaf(index), tree.inclusion_proof(index, size), root)


def verify_audit_log(path: str | Path, *, tree_head: TreeHead | None = None,
                     keyring: Keyring | None = None) -> list[str]:
    """Problems found in the log (empty list = intact); with ``tree_head`` (and the ``keyring``
    that must trust it) also that the log is consistent with that head."""
    check = check_audit_log(path)
    problems = list(check.problems)
    if tree_head is not None:
        problems += check_tree_head(check.tree, tree_head, keyring or Keyring(), what="tree head")
    return problems
