"""Verify a reports folder: every report, its signature, its place in the audit log, the log
against its signed tree head and, when given, against a tree head kept elsewhere.

:func:`verify_reports` returns every problem it finds as a :class:`Finding` naming the file or
log entry and what failed; an empty list means every check passed:

* the audit log parses line by line (canonical entries, consecutive indices); it must exist
  when anything else does, and a folder with nothing in it verifies nothing (a failure: only a
  kept tree head can say what was there);
* ``tree_head.json`` is signed by a trusted key and the log is consistent with it (RFC 9162
  consistency proof from its size to the log's): lines cut off, rewritten or reordered show;
  a log longer than its head (a run that never finished) is reported;
* a kept tree head (``--tree-head``) likewise: the log must extend the state it signed;
* every report entry of the log: its manifest exists, hashes to what the entry records, is
  signed by a trusted key, names the entry's alert (or period), index and files, sits under the
  file names that alert's stem gives, and every file it lists hashes to its digest; the entry's
  inclusion proof verifies against the signed root;
* every other file of the folder belongs to a logged report (a PDF or manifest nobody logged,
  e.g. a swapped-in copy, is reported).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from reports.audit_log import TreeHead, check_audit_log, check_tree_head, inclusion_ok
from reports.manifest import manifest_problem, read_manifest, sha256_hex
from reports.names import base_stem
from reports.signing import Keyring
from reports.store import (
    LOG_NAME,
    MANIFEST_SUFFIX,
    REPORT_KINDS,
    STORE_FILES,
    TREE_HEAD_NAME,
    stem_for,
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One failed check: ``item`` (a file name, ``log entry N``, a tree head) and what failed."""

    item: str
    problem: str

    def __str__(self) -> str:
        return f"{self.item}: {self.problem}"


@dataclass
class VerifyResult:
    """What was checked and what failed (``ok`` when nothing did)."""

    directory: Path
    log_size: int = 0
    reports: int = 0  # report entries checked
    files: int = 0  # report files hashed
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, item: str, problem: str) -> None:
        self.findings.append(Finding(item, problem))


def _payload_shape(payload: dict) -> str | None:
    try:
        name, digest = payload["manifest"]
        files = [(str(n), str(d)) for n, d in payload["files"]]
        if not all(isinstance(x, str) for x in (name, digest, payload["subject_id"], payload["report_kind"])):
            raise TypeError
        del files
    except (KeyError, TypeError, ValueError):
        return "entry payload lacks manifest, files, subject_id or report_kind"
    return None


def verify_reports(directory: str | Path, keyring: Keyring, *, tree_head: TreeHead | None = None,
                   tree_head_name: str = "kept tree head") -> VerifyResult:
    """Check the folder (see the module docstring); ``keyring``: the public keys to trust."""
    directory = Path(directory)
    res = VerifyResult(directory)
    if len(keyring) == 0:
        res.add("keys", "no trusted public keys: no signature can be checked")
    files = sorted(p.name for p in directory.iterdir() if p.is_file()) if directory.is_dir() else []
    log_path = directory / LOG_NAME
    if not log_path.exists():
        if tree_head is not None:
            res.add(LOG_NAME, f"missing, but the {tree_head_name} records {tree_head.tree_size} entries "
                              "(the log was deleted or the folder emptied)")
        elif [n for n in files if n not in STORE_FILES]:
            res.add(LOG_NAME, "missing: the reports here are in no audit log (the log was deleted)")
        else:
            res.add(str(directory), "nothing to verify: no audit log and no reports (an emptied folder "
                                    "shows only against a kept tree head, --tree-head)")
        for name in files:
            if name.endswith(MANIFEST_SUFFIX):
                res.add(name, "manifest not in any audit log")
        return res

    check = check_audit_log(log_path)
    tree = check.tree
    res.log_size = tree.size
    for p in check.problems:
        res.add(LOG_NAME, p)

    # -- the folder's signed tree head, and a kept one
    head: TreeHead | None = None
    head_path = directory / TREE_HEAD_NAME
    try:
        head = TreeHead.load(head_path)
    except FileNotFoundError:
        if tree.size:
            res.add(TREE_HEAD_NAME, f"missing: the log's {tree.size} entries are signed by no tree head")
    except ValueError as e:
        res.add(TREE_HEAD_NAME, str(e))
    if head is not None:
        for p in check_tree_head(tree, head, keyring):
            res.add(TREE_HEAD_NAME, p)
        if head.tree_size < tree.size:
            res.add(TREE_HEAD_NAME, f"signs {head.tree_size} of the log's {tree.size} entries: the entries after "
                                    "it are signed by no tree head (a run did not finish, or entries were added)")
    if tree_head is not None:
        for p in check_tree_head(tree, tree_head, keyring):
            res.add(tree_head_name, p)
    signed = head if head is not None and head.problem(keyring) is None and head.tree_size <= tree.size else None

    # -- every report the log names
    logged: dict[str, int] = {}
    for e in check.entries:
        if e.kind not in REPORT_KINDS:
            continue
        item = f"log entry {e.index}"
        shape = _payload_shape(e.payload)
        if shape is not None:
            res.add(item, shape)
            continue
        res.reports += 1
        if not inclusion_ok(tree, e.index, signed):
            res.add(item, "inclusion proof does not verify against the signed tree head")
        name, digest = e.payload["manifest"]
        entry_files = [(str(n), str(d)) for n, d in e.payload["files"]]
        for n in [name, *(n for n, _ in entry_files)]:
            if n in logged:
                res.add(n, f"logged twice: by log entries {logged[n]} and {e.index}")
            logged[n] = e.index
        subject = f"{e.payload['report_kind']} {e.payload['subject_id']!r}"
        path = directory / name
        if not path.is_file():
            res.add(name, f"missing: the manifest of {subject} (log entry {e.index}) was deleted")
        else:
            data = path.read_bytes()
            if sha256_hex(data) != digest:
                res.add(name, f"is not the manifest log entry {e.index} recorded (sha256 {sha256_hex(data)[:16]}..., "
                              f"logged {digest[:16]}...): replaced or edited")
            m, problems = read_manifest(path)
            for p in problems:
                res.add(name, p.split(": ", 1)[-1])
            if m is not None:
                why = manifest_problem(m, keyring)
                if why is not None:
                    res.add(name, why)
                if m.log_index != e.index:
                    res.add(name, f"says log index {m.log_index}, but log entry {e.index} holds it (moved or swapped)")
                if (m.kind, m.alert_id) != (e.payload["report_kind"], e.payload["subject_id"]):
                    res.add(name, f"is about {m.kind} {m.alert_id!r}, log entry {e.index} about {subject}")
                vstem = name[: -len(MANIFEST_SUFFIX)] if name.endswith(MANIFEST_SUFFIX) else name
                if base_stem(vstem)[0] != stem_for(m.kind, m.alert_id):
                    res.add(name, f"file name is not the one {m.kind} {m.alert_id!r} has "
                                  f"({stem_for(m.kind, m.alert_id)}{MANIFEST_SUFFIX}): a manifest copied over another")
                if [tuple(f) for f in m.files] != entry_files:
                    res.add(name, f"lists other files than log entry {e.index}")
                for n, _ in m.files:
                    if not n.startswith(vstem + "."):
                        res.add(name, f"lists {n!r}, not a file of this report ({vstem}.*)")
        for n, d in entry_files:
            fp = directory / n
            if "/" in n or "\\" in n or n in (".", ".."):
                res.add(item, f"file name {n!r} is not a plain name in the folder")
                continue
            if not fp.is_file():
                res.add(n, f"missing: a file of {subject} (log entry {e.index}) was deleted")
                continue
            res.files += 1
            actual = sha256_hex(fp.read_bytes())
            if actual != d:
                res.add(n, f"sha256 {actual[:16]}... is not the {d[:16]}... its manifest and log entry "
                           f"{e.index} record: the file was altered or replaced")

    # -- files no logged report accounts for
    for name in files:
        if name in STORE_FILES or name in logged:
            continue
        what = "manifest" if name.endswith(MANIFEST_SUFFIX) else "file"
        res.add(name, f"{what} not in the audit log (written outside it, or put there)")
    return res
