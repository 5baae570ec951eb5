"""Reports: per-alert PDF audit reports, signed manifests and the Merkle-tree audit log.

This package owns what an auditor receives from a run:

* :func:`render_alert_report` / :class:`ReportWriter` publish ``<stem>.pdf`` (deterministic,
  byte-identical for the same inputs), the complete trace beside it and ``<stem>.manifest.json``
  (file hashes, the alert id, the log index, an Ed25519 signature with its key id over the
  RFC 8785 canonical :class:`~auditflow.records.ReportManifest` body) into a write-once
  :class:`~reports.store.ReportStore`; ``stem`` is :func:`report_file_stem` of the alert id.
  A run's failing report is a :class:`ReportFailure`; the others are still written.
* :mod:`reports.signing`: keys, key ids, the :class:`Keyring` verifiers trust, rotation, the
  development key.
* :class:`AuditLog`: every report is a leaf of an RFC 6962 Merkle tree (:mod:`reports.merkle`:
  inclusion and consistency proofs), appends locked across processes, a signed
  :class:`TreeHead` per run.
* :mod:`reports.period_report` and :mod:`reports.schedule`: compliance summaries of a period
  (daily, weekly from cron expressions, or any range), published into the same store.
* :func:`verify_reports` (:mod:`reports.verify`) checks a whole folder and names every failure.
* :func:`render_run_summary` turns run counters into a :mod:`rich` table for the terminal.

Domain records come from :mod:`auditflow.records`; nothing here redefines them.
"""

from reports.alert_report import (
    ReportFailure,
    ReportWriter,
    render_alert_pdf,
    render_alert_report,
    report_file_stem,
    report_id_for,
)
from reports.audit_log import AuditLog, AuditLogDamaged, TreeHead, verify_audit_log
from reports.manifest import sign_manifest, verify_manifest
from reports.run_summary import render_run_summary
from reports.signing import DevelopmentKeyRefused, Keyring, PublicKey, Signer, SigningKeyError
from reports.store import ReportStore
from reports.verify import Finding, VerifyResult, verify_reports

__all__ = [
    "AuditLog",
    "AuditLogDamaged",
    "Finding",
    "DevelopmentKeyRefused",
    "Keyring",
    "PublicKey",
    "ReportFailure",
    "ReportStore",
    "ReportWriter",
    "Signer",
    "SigningKeyError",
    "TreeHead",
    "VerifyResult",
    "render_alert_pdf",
    "render_alert_report",
    "render_run_summary",
    "report_file_stem",
    "report_id_for",
    "sign_manifest",
    "verify_audit_log",
    "verify_manifest",
    "verify_reports",
]
