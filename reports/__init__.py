"""Reports: per-alert PDF audit reports, signed manifests and the tamper-evident audit log."""
