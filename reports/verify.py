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

**The root cause first.** One edited log line makes every inclusion proof fail and can orphan
every report after it; those findings are consequences. Each trusted manifest records its log
index, and a report's log entry is a function of its manifest alone
(:func:`reports.store.entry_payload`), so the entry each manifest vouches for is rebuilt and
compared with the line at its index: a line that differs is a **cause** (``log entry 50 was
rewritten``). Where the log with those lines restored gives the signed tree head's root again,
nothing else in it was changed, and the cause says so. :meth:`VerifyResult.grouped` folds
repeated findings into one line with a count.
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
    causes: list[Finding] = field(default_factory=list)  # what the findings follow from, where found

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, item: str, problem: str) -> None:
        self.findings.append(Finding(item, problem))

    def grouped(self) -> list[tuple[str, str, int]]:
        """The findings as (items, problem, count): those with the same problem folded into one,
        their items listed (``log entries 0-59``), in the order each problem first appeared."""
        by_problem: dict[str, list[str]] = {}
        for f in self.findings:
            by_problem.setdefault(f.problem, []).append(f.item)
        return [(_items(items), problem, len(items)) for problem, items in by_problem.items()]


def _items(items: list[str]) -> str:
    """``log entry 3``, ``log entry 4``, ``log entry 5`` -> ``log entries 3-5``; other items as
    they are (all of them: nothing is cut)."""
    entries = sorted(int(i.rsplit(" ", 1)[1]) for i in items if i.startswith("log entry "))
    others = [i for i in items if not i.startswith("log entry ")]
    if len(entries) <= 1:
        return ", ".join(items)
    runs, start = [], entries[0]
    for a, b in zip(entries, [*entries[1:], None]):
        if b != a + 1:
            runs.append(f"{start}-{a}" if a != start else f"{a}")
            start = b if b is not None else start
    return ", ".join([f"log entries {', '.join(runs)}", *others])


def diagnose(directory: Path, keyring: Keyring, head: TreeHead | None) -> list[Finding]:
    """The log entries the trusted manifests say were rewritten or removed (see the module
    docstring), each confirmed, where the signed head allows, by the root the restored log gives."""
    from reports.audit_log import entry_line
    from reports.merkle import MerkleTree, leaf_hash
    from reports.store import entry_payload

    log_path = directory / LOG_NAME
    try:
        raw = log_path.read_bytes().split(b"\n")[:-1]
    except FileNotFoundError:
        return []
    vouched: dict[int, tuple[str, bytes]] = {}
    for path in sorted(directory.glob(f"*{MANIFEST_SUFFIX}")):
        m, problems = read_manifest(path)
        if m is None or problems or manifest_problem(m, keyring) is not None or m.log_index < 0:
            continue  # only a trusted manifest vouches for an entry
        kind = "period_report" if m.kind == "period" else "report"
        line = entry_line(m.log_index, kind, entry_payload(m, path.name, sha256_hex(path.read_bytes())))
        vouched.setdefault(m.log_index, (path.name, line))
    position = {line: i for i, line in enumerate(raw)}
    causes, restored, moved = [], list(raw), []
    vouched_lines = {line for _, line in vouched.values()}
    for index, (name, line) in sorted(vouched.items()):
        if index < len(raw) and raw[index] == line:
            continue
        if line in position:  # the entry is in the log, elsewhere: lines were removed, inserted or swapped
            moved.append((index, position[line]))
        elif index < len(raw) and raw[index] not in vouched_lines:
            causes.append(Finding(f"log entry {index}", f"was rewritten: it is not the entry the signed manifest "
                                                        f"{name} records there"))
        else:
            causes.append(Finding(f"log entry {index}", f"was removed: the signed manifest {name} records its report "
                                                        "there and the log holds it nowhere"))
        if index < len(restored):
            restored[index] = line
    if moved:
        shifts = sorted({p - i for i, p in moved})
        where = "; ".join(f"{i} on line {p + 1} (its place: line {i + 1})" for i, p in moved[:10]) + (
            " ..." if len(moved) > 10 else ""
        )
        why = ("a line before them was removed or one inserted" if len(shifts) == 1 and not any(
            c.problem.startswith("was rewritten") for c in causes) else "the log was reordered")
        causes.append(Finding(_items([f"log entry {i}" for i, _ in moved]),
                              f"{'is' if len(moved) == 1 else 'are'} out of place ({why}): {where}"))
    if causes and head is not None and head.problem(keyring) is None and head.tree_size == len(raw):
        tree = MerkleTree([leaf_hash(r) for r in restored])
        if tree.root().hex() == head.root_hash:
            causes = [Finding(c.item, c.problem + "; with the entries the manifests record restored the log gives "
                                                  "the signed root again: nothing else in the log was changed")
                      for c in causes]
    return causes


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
    if res.findings:
        res.causes = diagnose(directory, keyring, head)
    return res
