"""The reports folder as a write-once store whose every report is in the audit log.

:meth:`ReportStore.publish` writes a report's files and its signed manifest, then appends the
log entry, all under the log's lock; the manifest is bound to its place: its ``alert_id`` (or
period id), its file names (``<stem><suffix>``, the stem a function of that id) and the
``log_index`` of its entry. Reports are **write-once**: publishing content identical to a
version already there changes nothing (same files, no new entry); different content for the
same alert becomes a new version ``<stem>@2``, ``@3``..., never an overwrite.

Crash safety: files are written (temp file, fsync, rename), then the manifest, then the log
entry. :meth:`ReportStore.repair`, run by every writer before it writes, finishes what a crash
left: a torn last log line is cut, a manifest whose entry is missing is appended when its files
are intact and it expects the next index (exactly the entry the crashed run would have written),
anything else unlogged (files without a manifest, a manifest that cannot be logged where it
says) is moved to ``quarantine/`` and the log records what was moved.

At the end of a run :meth:`ReportStore.finish` writes the signed tree head ``tree_head.json``
and adds the signer's public key to ``public_keys.json`` (published for verifiers to copy:
``verify`` trusts only keys configured outside the folder).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from auditflow.records import ReportManifest
from reports.audit_log import AuditLog, TreeHead
from reports.manifest import manifest_bytes, read_manifest, sha256_hex, sign_manifest, write_durable
from reports.names import period_file_stem, report_file_stem, versioned_stem
from reports.signing import Keyring, Signer, SigningKeyError

LOG_NAME = "audit_log.jsonl"
TREE_HEAD_NAME = "tree_head.json"
PUBLIC_KEYS_NAME = "public_keys.json"
QUARANTINE_DIRNAME = "quarantine"
MANIFEST_SUFFIX = ".manifest.json"
#: Files of the folder itself, not of any report.
STORE_FILES = frozenset({LOG_NAME, LOG_NAME + ".lock", TREE_HEAD_NAME, PUBLIC_KEYS_NAME})
#: Log entry kinds that publish a report (their payload names the manifest and files).
REPORT_KINDS = ("report", "period_report")


def stem_for(kind: str, subject_id: str) -> str:
    """The file stem of the report about ``subject_id`` (an alert id, or a period id)."""
    return period_file_stem(subject_id) if kind == "period" else report_file_stem(subject_id)


def entry_payload(manifest: ReportManifest, manifest_name: str, manifest_digest: str) -> dict[str, Any]:
    """What the log records of a published report: a function of its manifest only, so a repair
    writes exactly the entry the crashed run would have."""
    return {"subject_id": manifest.alert_id, "report_kind": manifest.kind, "report_id": manifest.report_id,
            "manifest": [manifest_name, manifest_digest], "files": [list(f) for f in manifest.files],
            "key_id": manifest.key_id}


@dataclass(frozen=True)
class Published:
    """A publish outcome: the manifest in the folder and ``status`` ``written``, ``unchanged``
    (identical content was already there) or ``new version`` (``manifest.files`` name ``@n``)."""

    manifest: ReportManifest
    status: str
    stem: str


@dataclass
class Repair:
    """What :meth:`ReportStore.repair` did (all empty: nothing to repair)."""

    torn_bytes: int = 0
    appended: list[str] = field(default_factory=list)  # manifests whose missing entry was appended
    quarantined: list[str] = field(default_factory=list)  # files moved to quarantine/

    @property
    def nothing(self) -> bool:
        return not (self.torn_bytes or self.appended or self.quarantined)


class ReportStore:
    """A reports folder, its audit log and the signer of its manifests and tree heads."""

    def __init__(self, directory: str | Path, signer: Signer) -> None:
        if not isinstance(signer, Signer):
            raise ValueError(f"signer must be a reports.signing.Signer, got {type(signer).__name__}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.signer = signer
        self.log = AuditLog(self.directory / LOG_NAME)

    # -- what is logged

    def _logged_names(self) -> set[str]:
        names: set[str] = set()
        for e in self.log.entries():
            if e.kind in REPORT_KINDS:
                names.add(e.payload["manifest"][0])
                names.update(n for n, _ in e.payload["files"])
        return names

    def _versions(self, stem: str) -> list[tuple[int, Path]]:
        """The report's versions there, 1, 2, ... up to the first missing one (a stat per version,
        never a listing of a folder that may hold every report ever written)."""
        found, version = [], 1
        while (path := self.directory / f"{versioned_stem(stem, version)}{MANIFEST_SUFFIX}").exists():
            found.append((version, path))
            version += 1
        return found

    # -- writing

    def publish(self, stem: str, contents: list[tuple[str, bytes]], unsigned: ReportManifest) -> Published:
        """Write ``contents`` (suffix, bytes) as ``<stem><suffix>`` with the signed manifest and
        log entry, unless a version with the same file contents is there already."""
        if stem != stem_for(unsigned.kind, unsigned.alert_id):
            raise ValueError(f"stem {stem!r} is not the stem of {unsigned.kind} {unsigned.alert_id!r}")
        digests = [sha256_hex(data) for _, data in contents]
        with self.log.locked():
            versions = self._versions(stem)
            for version, path in versions:
                existing, problems = read_manifest(path)
                if existing is not None and not problems and [d for _, d in existing.files] == digests \
                        and existing.report_id == unsigned.report_id:
                    return Published(existing, "unchanged", versioned_stem(stem, version))
            version = versions[-1][0] + 1 if versions else 1
            vstem = versioned_stem(stem, version)
            files = tuple((f"{vstem}{suffix}", d) for (suffix, _), d in zip(contents, digests))
            manifest = sign_manifest(replace(unsigned, files=files, log_index=self.log.size), self.signer)
            for (name, _), (_, data) in zip(files, contents):
                write_durable(self.directory / name, data)
            name = f"{vstem}{MANIFEST_SUFFIX}"
            data = manifest_bytes(manifest)
            write_durable(self.directory / name, data)
            self.log.append("period_report" if manifest.kind == "period" else "report",
                            entry_payload(manifest, name, sha256_hex(data)))
            return Published(manifest, "written" if version == 1 else "new version", vstem)

    def record(self, kind: str, payload: dict[str, Any]):
        """Append a non-report entry (``report_failed``, ``run``...)."""
        return self.log.append(kind, payload)

    def repair(self) -> Repair:
        """Finish what a crashed writer left (see the module docstring)."""
        out = Repair()
        with self.log.locked():
            out.torn_bytes = self.log.repair_tail()
            logged = self._logged_names()
            orphans = sorted(p for p in self.directory.glob(f"*{MANIFEST_SUFFIX}") if p.name not in logged)
            for path in orphans:
                m, problems = read_manifest(path)
                intact = m is not None and not problems and m.log_index == self.log.size and all(
                    (self.directory / n).is_file() and sha256_hex((self.directory / n).read_bytes()) == d
                    for n, d in m.files)
                if intact:
                    data = path.read_bytes()
                    self.log.append("period_report" if m.kind == "period" else "report",
                                    entry_payload(m, path.name, sha256_hex(data)))
                    out.appended.append(path.name)
            logged = self._logged_names()
            strays = sorted(p for p in self.directory.iterdir()
                            if p.is_file() and p.name not in logged and p.name not in STORE_FILES)
            if strays:
                q = self.directory / QUARANTINE_DIRNAME
                q.mkdir(exist_ok=True)
                for p in strays:
                    p.replace(q / p.name)
                    out.quarantined.append(p.name)
                self.log.append("quarantined", {"files": out.quarantined,
                                                "reason": "not in the audit log (a crashed or foreign write)"})
        return out

    def finish(self) -> TreeHead:
        """Sign and write the tree head; publish the signer's public key beside it."""
        with self.log.locked():
            head = self.log.tree_head(self.signer)
            head.write(self.directory / TREE_HEAD_NAME)
        keys_path = self.directory / PUBLIC_KEYS_NAME
        try:
            ring = Keyring.load(keys_path) if keys_path.exists() else Keyring()
        except SigningKeyError:
            ring = Keyring()
        if self.signer.key_id not in ring:
            ring.add(self.signer.public_key)
            ring.save(keys_path)
        return head

