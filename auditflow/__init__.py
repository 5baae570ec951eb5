"""auditflow core: the domain records every stage shares, exact money, settings and the CLI.

Data flows ``ingest`` -> ``pipelines`` -> ``evidence_graph`` -> ``model_service`` -> ``reports``;
this package owns what they all speak: :mod:`auditflow.records` (events, rejects, alerts,
evidence traces, reason codes, report manifests) and :mod:`auditflow.money`.
"""

from auditflow.errors import FieldError
from auditflow.money import CURRENCIES, Money, format_amount, parse_amount
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

__version__ = "0.1.0"

__all__ = [
    "CURRENCIES",
    "SCHEMA_VERSION",
    "AccountRef",
    "Alert",
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
    "format_amount",
    "parse_amount",
]
