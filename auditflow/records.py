"""Domain records, defined once: every stage reads and writes these, never loose dicts.

Each record has a JSON wire form carrying ``schema`` (name and version), money as exact decimal
strings with their currency, timestamps as ``YYYY-MM-DDTHH:MM``.

>>> ev = TransactionEvent(
...     event_id="tx-1", timestamp=datetime(2022, 9, 1, 0, 20),
...     sender=AccountRef("010", "8000EBD30"), receiver=AccountRef("010", "8000EBD30"),
...     amount_received=Money("US Dollar", 369734), amount_paid=Money("US Dollar", 369734),
...     payment_format="Reinvestment", is_laundering=False, source_offset=2)
>>> TransactionEvent.from_json(ev.to_json()) == ev
True
>>> ev.sender.node_id
'010/8000EBD30'
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from auditflow.errors import FieldError
from auditflow.money import CURRENCIES, Money, format_amount, parse_amount

SCHEMA_VERSION = 1
EPOCH = datetime(1970, 1, 1)
_TS = "%Y-%m-%dT%H:%M"

PAYMENT_FORMATS = ("Reinvestment", "Cheque", "ACH", "Credit Card", "Wire", "Cash", "Bitcoin")


def _schema(name: str) -> str:
    return f"auditflow.{name}/{SCHEMA_VERSION}"


def _check_schema(d: dict[str, Any], name: str) -> None:
    got = d.get("schema")
    if got != _schema(name):
        raise FieldError("schema", got, f"expected {_schema(name)}")


def money_to_wire(m: Money) -> dict[str, str]:
    return {"amount": format_amount(m), "currency": m.currency}


def money_from_wire(d: dict[str, str], field_name: str) -> Money:
    if not isinstance(d, dict) or "amount" not in d or "currency" not in d:
        raise FieldError(field_name, d, "expected {amount, currency}")
    return parse_amount(str(d["amount"]), str(d["currency"]), field=field_name)


def ts_to_wire(ts: datetime) -> str:
    return ts.strftime(_TS)


def ts_from_wire(text: str, field_name: str = "timestamp") -> datetime:
    try:
        return datetime.strptime(text, _TS)
    except (TypeError, ValueError):
        raise FieldError(field_name, text, "expected YYYY-MM-DDTHH:MM") from None


def epoch_minutes(ts: datetime) -> int:
    return int((ts - EPOCH) // timedelta(minutes=1))


def from_epoch_minutes(minutes: int) -> datetime:
    return EPOCH + timedelta(minutes=minutes)


def epoch_millis(ts: datetime) -> int:
    """Event time in the stream: milliseconds since the epoch (timestamps are naive UTC)."""
    return (ts - EPOCH) // timedelta(milliseconds=1)


def from_epoch_millis(millis: int) -> datetime:
    return EPOCH + timedelta(milliseconds=millis)


@dataclass(frozen=True, slots=True, order=True)
class AccountRef:
    """An account is identified by (bank, account); bank ids keep their leading zeros."""

    bank: str
    account: str

    @property
    def node_id(self) -> str:
        return f"{self.bank}/{self.account}"

    @classmethod
    def from_node_id(cls, node_id: str) -> AccountRef:
        bank, sep, account = node_id.partition("/")
        if not sep or not bank or not account:
            raise FieldError("account", node_id, "expected BANK/ACCOUNT")
        return cls(bank, account)


@dataclass(frozen=True, slots=True)
class TransactionEvent:
    """One transfer in the AMLworld schema plus a stable ``event_id`` and its source offset."""

    event_id: str
    timestamp: datetime
    sender: AccountRef
    receiver: AccountRef
    amount_received: Money
    amount_paid: Money
    payment_format: str
    is_laundering: bool
    source_offset: int

    @property
    def minute(self) -> int:
        return epoch_minutes(self.timestamp)

    @property
    def is_self_transfer(self) -> bool:
        return self.sender == self.receiver

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": _schema("transaction"),
            "event_id": self.event_id,
            "timestamp": ts_to_wire(self.timestamp),
            "from_bank": self.sender.bank,
            "from_account": self.sender.account,
            "to_bank": self.receiver.bank,
            "to_account": self.receiver.account,
            "amount_received": money_to_wire(self.amount_received),
            "amount_paid": money_to_wire(self.amount_paid),
            "payment_format": self.payment_format,
            "is_laundering": self.is_laundering,
            "source_offset": self.source_offset,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TransactionEvent:
        _check_schema(d, "transaction")
        try:
            fmt = d["payment_format"]
            if fmt not in PAYMENT_FORMATS:
                raise FieldError("payment_format", fmt, "unknown payment format")
            return cls(
                event_id=str(d["event_id"]),
                timestamp=ts_from_wire(d["timestamp"]),
                sender=AccountRef(str(d["from_bank"]), str(d["from_account"])),
                receiver=AccountRef(str(d["to_bank"]), str(d["to_account"])),
                amount_received=money_from_wire(d["amount_received"], "amount_received"),
                amount_paid=money_from_wire(d["amount_paid"], "amount_paid"),
                payment_format=fmt,
                is_laundering=bool(d["is_laundering"]),
                source_offset=int(d["source_offset"]),
            )
        except KeyError as e:
            raise FieldError(str(e.args[0]), None, "missing field") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> TransactionEvent:
        try:
            d = json.loads(text)
        except (ValueError, UnicodeDecodeError) as e:
            raise FieldError("value", text[:80] if text else text, f"not JSON: {e}") from None
        if not isinstance(d, dict):
            raise FieldError("value", d, "expected a JSON object")
        return cls.from_dict(d)


    # ------------------------------------------------------------------ the stream wire form

    def to_wire(self) -> str:
        """The compact wire form the stream job decodes in the JVM: one comma-separated line of
        :data:`WIRE_FIELDS`: event time in epoch milliseconds, money as integer units plus the exact
        US-cent values the features use.

        >>> ev = TransactionEvent("tx-1", datetime(2022, 9, 1, 0, 20), AccountRef("010", "A"),
        ...     AccountRef("011", "B"), Money("Euro", 1000), Money("Euro", 1000), "ACH", False, 2)
        >>> ev.to_wire()
        'af1,tx-1,1661991600000,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0'
        >>> TransactionEvent.from_wire(ev.to_wire()) == ev
        True
        """
        from auditflow.money import usd_cents

        return ",".join((
            WIRE_TAG, _wire_escape(self.event_id), str(epoch_millis(self.timestamp)), str(self.source_offset),
            _wire_escape(self.sender.bank), _wire_escape(self.sender.account),
            _wire_escape(self.receiver.bank), _wire_escape(self.receiver.account),
            str(self.amount_paid.units), self.amount_paid.currency,
            str(self.amount_received.units), self.amount_received.currency,
            str(usd_cents(self.amount_paid)), str(usd_cents(self.amount_received)),
            self.payment_format, "1" if self.is_laundering else "0",
        ))

    @classmethod
    def from_wire(cls, text: str) -> TransactionEvent:
        """Decode :meth:`to_wire`; a :class:`FieldError` names the first bad field."""
        parts = text.split(",")
        if len(parts) != len(WIRE_FIELDS) or parts[0] != WIRE_TAG:
            raise FieldError("value", text[:80], f"not an {WIRE_TAG} wire record of {len(WIRE_FIELDS)} fields")
        d = dict(zip(WIRE_FIELDS, parts))

        def integer(name: str) -> int:
            v = d[name]
            if not _WIRE_INT.fullmatch(v):
                raise FieldError(name, v, "expected an integer")
            return int(v)

        for name in ("ts_ms", "source_offset", "paid_units", "received_units", "paid_usd_cents", "received_usd_cents"):
            integer(name)
        for name in ("paid_currency", "received_currency"):
            if d[name] not in CURRENCIES:
                raise FieldError(name, d[name], "unknown currency")
        fmt = d["payment_format"]
        if fmt not in PAYMENT_FORMATS:
            raise FieldError("payment_format", fmt, "unknown payment format")
        if d["is_laundering"] not in ("0", "1"):
            raise FieldError("is_laundering", d["is_laundering"], "expected 0 or 1")
        return cls(
            event_id=_wire_unescape(d["event_id"]),
            timestamp=from_epoch_millis(integer("ts_ms")),
            sender=AccountRef(_wire_unescape(d["from_bank"]), _wire_unescape(d["from_account"])),
            receiver=AccountRef(_wire_unescape(d["to_bank"]), _wire_unescape(d["to_account"])),
            amount_received=Money(d["received_currency"], integer("received_units")),
            amount_paid=Money(d["paid_currency"], integer("paid_units")),
            payment_format=fmt,
            is_laundering=d["is_laundering"] == "1",
            source_offset=integer("source_offset"),
        )


#: The stream wire form's tag and fields, in order (see :meth:`TransactionEvent.to_wire`).
WIRE_TAG = "af1"
WIRE_FIELDS: tuple[str, ...] = (
    "tag", "event_id", "ts_ms", "source_offset", "from_bank", "from_account", "to_bank", "to_account",
    "paid_units", "paid_currency", "received_units", "received_currency", "paid_usd_cents",
    "received_usd_cents", "payment_format", "is_laundering",
)


_WIRE_INT = re.compile(r"-?[0-9]{1,18}")


def _wire_escape(text: str) -> str:
    """Percent-escape what would break the comma-separated wire form (rare in bank data)."""
    if "%" in text or "," in text or "\n" in text or "\r" in text:
        return text.replace("%", "%25").replace(",", "%2C").replace("\n", "%0A").replace("\r", "%0D")
    return text


def _wire_unescape(text: str) -> str:
    if "%" not in text:
        return text
    return text.replace("%2C", ",").replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")

@dataclass(frozen=True, slots=True)
class RejectedRecord:
    """A record that failed a stage: raw text, where it came from, and why."""

    source: str  # file path or topic/partition
    offset: int  # line number (1-based, header is line 1) or Kafka offset
    raw: str
    field: str
    value: str
    reason: str
    stage: str = "parse"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": _schema("rejected"),
            "source": self.source,
            "offset": self.offset,
            "raw": self.raw,
            "field": self.field,
            "value": self.value,
            "reason": self.reason,
            "stage": self.stage,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RejectedRecord:
        _check_schema(d, "rejected")
        return cls(**{k: d[k] for k in ("source", "offset", "raw", "field", "value", "reason", "stage")})


@dataclass(frozen=True, slots=True)
class ReasonCode:
    """One adverse reason: a feature, its actual value, and its exact SHAP contribution."""

    feature: str
    value: float
    contribution: float  # SHAP value in log-odds
    description: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature": self.feature,
            "value": self.value,
            "contribution": self.contribution,
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReasonCode:
        return cls(d["feature"], float(d["value"]), float(d["contribution"]), d["description"])


@dataclass(frozen=True, slots=True)
class Alert:
    """A scored event above threshold. ``features`` are the model inputs as scored."""

    alert_id: str
    event: TransactionEvent
    score: float
    threshold: float
    model_digest: str
    features: tuple[tuple[str, float], ...]

    @property
    def account(self) -> AccountRef:
        return self.event.sender

    def feature_map(self) -> dict[str, float]:
        return dict(self.features)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": _schema("alert"),
            "alert_id": self.alert_id,
            "event": self.event.to_dict(),
            "score": self.score,
            "threshold": self.threshold,
            "model_digest": self.model_digest,
            "features": [[k, v] for k, v in self.features],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Alert:
        _check_schema(d, "alert")
        return cls(
            alert_id=d["alert_id"],
            event=TransactionEvent.from_dict(d["event"]),
            score=float(d["score"]),
            threshold=float(d["threshold"]),
            model_digest=d["model_digest"],
            features=tuple((k, float(v)) for k, v in d["features"]),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Alert:
        return cls.from_dict(json.loads(text))


def alert_id_for(event_id: str) -> str:
    return f"alert-{event_id}"


@dataclass(frozen=True, slots=True)
class TraceNode:
    """An account reached by a trace, at ``hop_depth`` hops from the root, via ``upstream_ids``."""

    node_id: str
    hop_depth: int
    upstream_ids: tuple[str, ...]  # nodes one hop closer to the root that reached this one


@dataclass(frozen=True, slots=True)
class TraceEdge:
    """A transaction used by a trace (always written sender -> receiver)."""

    event_id: str
    src: str
    dst: str
    amount_paid: Money
    timestamp: datetime
    hop: int  # the hop at which the trace crossed it (1-based)


@dataclass(frozen=True, slots=True)
class EvidenceTrace:
    """The result of a multi-hop evidence trace, with the query and parameters that made it."""

    trace_id: str
    root: str
    direction: str  # "out", "in" or "both"
    max_hops: int
    fanout_cap: int
    window_start: datetime | None
    window_end: datetime | None
    nodes: tuple[TraceNode, ...]
    edges: tuple[TraceEdge, ...]
    backend: str = ""
    truncated: bool = False  # True when the fan-out cap dropped edges

    def node(self, node_id: str) -> TraceNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(node_id)

    def depths(self) -> dict[str, int]:
        return {n.node_id: n.hop_depth for n in self.nodes}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": _schema("trace"),
            "trace_id": self.trace_id,
            "root": self.root,
            "direction": self.direction,
            "max_hops": self.max_hops,
            "fanout_cap": self.fanout_cap,
            "window_start": ts_to_wire(self.window_start) if self.window_start else None,
            "window_end": ts_to_wire(self.window_end) if self.window_end else None,
            "nodes": [[n.node_id, n.hop_depth, list(n.upstream_ids)] for n in self.nodes],
            "edges": [
                [e.event_id, e.src, e.dst, money_to_wire(e.amount_paid), ts_to_wire(e.timestamp), e.hop]
                for e in self.edges
            ],
            "backend": self.backend,
            "truncated": self.truncated,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvidenceTrace:
        _check_schema(d, "trace")
        return cls(
            trace_id=d["trace_id"],
            root=d["root"],
            direction=d["direction"],
            max_hops=int(d["max_hops"]),
            fanout_cap=int(d["fanout_cap"]),
            window_start=ts_from_wire(d["window_start"]) if d["window_start"] else None,
            window_end=ts_from_wire(d["window_end"]) if d["window_end"] else None,
            nodes=tuple(TraceNode(n, int(h), tuple(u)) for n, h, u in d["nodes"]),
            edges=tuple(
                TraceEdge(eid, s, t, money_from_wire(m, "amount_paid"), ts_from_wire(ts), int(h))
                for eid, s, t, m, ts, h in d["edges"]
            ),
            backend=d.get("backend", ""),
            truncated=bool(d.get("truncated", False)),
        )


def trace_id_for(root: str, params: dict[str, Any], edge_ids: list[str]) -> str:
    """A content address: same root, parameters and edges give the same id on any backend."""
    payload = json.dumps({"root": root, "params": params, "edges": sorted(edge_ids)}, sort_keys=True)
    return "trace-" + hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ReportManifest:
    """What a report was made from, hashed; ``signature`` is an HMAC over the canonical body."""

    report_id: str
    alert_id: str
    files: tuple[tuple[str, str], ...]  # (file name, sha256)
    input_sha256: str
    model_digest: str
    trace_id: str
    code_version: str
    seed: int
    signature: str = ""
    extra: tuple[tuple[str, str], ...] = field(default=())

    def body(self) -> dict[str, Any]:
        return {
            "schema": _schema("manifest"),
            "report_id": self.report_id,
            "alert_id": self.alert_id,
            "files": [[n, h] for n, h in self.files],
            "input_sha256": self.input_sha256,
            "model_digest": self.model_digest,
            "trace_id": self.trace_id,
            "code_version": self.code_version,
            "seed": self.seed,
            "extra": [[k, v] for k, v in self.extra],
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.body(), "signature": self.signature}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReportManifest:
        _check_schema(d, "manifest")
        return cls(
            report_id=d["report_id"],
            alert_id=d["alert_id"],
            files=tuple((n, h) for n, h in d["files"]),
            input_sha256=d["input_sha256"],
            model_digest=d["model_digest"],
            trace_id=d["trace_id"],
            code_version=d["code_version"],
            seed=int(d["seed"]),
            signature=d.get("signature", ""),
            extra=tuple((k, v) for k, v in d.get("extra", [])),
        )
