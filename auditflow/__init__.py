"""auditflow core: the domain records every stage shares, exact money and the shared vocabulary.

Data flows ``ingest`` -> ``pipelines`` -> ``evidence_graph`` -> ``model_service`` -> ``reports``;
this package owns what they all speak: :mod:`auditflow.records` (events, rejects, alerts,
evidence traces, reason codes, report manifests), :mod:`auditflow.money`, and the feature,
reason, typology, drift and limits vocabulary. It imports no stage; the settings, the
orchestration and the CLI live in :mod:`auditflow_app` on top.

``__version__`` is the installed distribution's version; report manifests record
:func:`auditflow.version.code_version` (``git describe`` of a checkout) instead.
"""

from auditflow.errors import FieldError
from auditflow.money import CURRENCIES, CurrencyMismatchError, Money, format_amount, parse_amount
from auditflow.records import (
    SCHEMA_VERSION,
    AccountRef,
    Alert,
    EvidenceTrace,
    ReasonCode,
    RejectedRecord,
    ReportManifest,
    TraceEdge,
    TraceNode,
    TransactionEvent,
)
from auditflow.version import code_version, distribution_version


def __getattr__(name: str) -> str:
    if name == "__version__":  # looked up on first use: metadata lookups cost an import's time
        return distribution_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CURRENCIES",
    "SCHEMA_VERSION",
    "AccountRef",
    "Alert",
    "CurrencyMismatchError",
    "EvidenceTrace",
    "FieldError",
    "Money",
    "ReasonCode",
    "RejectedRecord",
    "ReportManifest",
    "TraceEdge",
    "TraceNode",
    "TransactionEvent",
    "__version__",
    "code_version",
    "format_amount",
    "parse_amount",
]
