"""Reports: per-alert PDF audit reports, signed manifests and the tamper-evident audit log.

This package owns what an auditor receives from a run:

* :func:`render_alert_report` writes ``<stem>.pdf`` (deterministic, byte-identical for the
  same inputs) and ``<stem>.manifest.json`` (file hashes plus an Ed25519 signature with its key
  id over the RFC 8785 canonical :class:`~auditflow.records.ReportManifest` body);
  :func:`verify_manifest` checks both against a :class:`Keyring` of trusted public keys
  (:mod:`reports.signing`: keys, key ids, rotation, the development key). ``stem`` is :func:`report_file_stem` of the alert id: the id itself when it is a
  plain short name, else a safe name with a hash of the id. :class:`ReportWriter` writes a run's
  reports, recording one that fails as a :class:`ReportFailure` and going on with the others.
* :class:`AuditLog` appends hash-chained JSON lines; :func:`verify_audit_log` names the line
  where the chain was edited, cut, extended or reordered.
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
from reports.audit_log import GENESIS_HASH, AuditLog, verify_audit_log
from reports.manifest import sign_manifest, verify_manifest
from reports.signing import DevelopmentKeyRefused, Keyring, PublicKey, Signer, SigningKeyError
from reports.run_summary import render_run_summary

__all__ = [
    "GENESIS_HASH",
    "AuditLog",
    "ReportFailure",
    "ReportWriter",
    "DevelopmentKeyRefused",
    "Keyring",
    "PublicKey",
    "Signer",
    "SigningKeyError",
    "render_alert_pdf",
    "render_alert_report",
    "render_run_summary",
    "report_file_stem",
    "report_id_for",
    "sign_manifest",
    "verify_audit_log",
    "verify_manifest",
]
