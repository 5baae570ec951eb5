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

import base64
import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from auditflow.canonical import canonical_sha256, compact_json
from auditflow.errors import FieldError
from auditflow.money import CURRENCIES, Money, format_amount, parse_amount

SCHEMA_VERSION = 1
EPOCH = datetime(1970, 1, 1)
_TS = "%Y-%m-%dT%H:%M"
_TS_WIRE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}")

#: Bank, account and event ids: 1 to 64 of ``A-Z a-z 0-9 _ . : -`` (printable ASCII; no ``/``,
#: the ``BANK/ACCOUNT`` separator of node ids, no ``,``, ``%``, whitespace or control characters).
#: The public AMLworld data has decimal bank numbers with their leading zeros (``00220``, ``1``)
#: and hex account numbers (``8000EBD30``); event ids are ``tx-`` and 16 hex digits.
ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
ID_REASON = "expected 1 to 64 of A-Z a-z 0-9 _ . : - (no '/', whitespace or control characters)"


def check_id(value: object, field_name: str) -> str:
    """``value`` if it is an id by :data:`ID_PATTERN`; :class:`FieldError` naming the field otherwise.

    >>> check_id("8000EBD30", "account")
    '8000EBD30'
    >>> check_id("01/0", "bank")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    auditflow.errors.FieldError: bank='01/0': expected 1 to 64 of A-Z a-z 0-9 _ . : - (no '/', whitespace or ...)
    """
    if type(value) is not str or ID_PATTERN.fullmatch(value) is None:
        raise FieldError(field_name, value, ID_REASON)
    return value


def check_event_time(ts: datetime, window: tuple[datetime, datetime], field_name: str, text: object = None) -> datetime:
    """``ts`` if ``window[0] <= ts < window[1]`` (the plausible event-time window, see
    :data:`auditflow.limits.DEFAULT_EVENT_TIME_WINDOW`); :class:`FieldError` otherwise."""
    start, end = window
    if start <= ts < end:
        return ts
    raise FieldError(
        field_name,
        ts_to_wire(ts) if text is None else text,
        f"outside the plausible event-time window {ts_to_wire(start)} .. {ts_to_wire(end)} "
        "(from inclusive, to exclusive)",
    )


def parse_when(text: str) -> datetime:
    """``YYYY-MM-DD`` or ``YYYY-MM-DDTHH:MM`` (UTC, naive) -> datetime; ``ValueError`` otherwise.

    >>> parse_when("2022-09-01"), parse_when("2022-09-01T12:30")
    (datetime.datetime(2022, 9, 1, 0, 0), datetime.datetime(2022, 9, 1, 12, 30))
    """
    t = text.strip()
    return datetime.strptime(t, "%Y-%m-%dT%H:%M" if "T" in t else "%Y-%m-%d")


def parse_time_window(text: str) -> tuple[datetime, datetime]:
    """``"FROM..TO"`` (each ``YYYY-MM-DD`` or ``YYYY-MM-DDTHH:MM``) -> (from, to): a plausible
    event-time window, from inclusive, to exclusive; ``ValueError`` naming the text otherwise.

    >>> parse_time_window("2022-01-01..2024-01-01T12:00")
    (datetime.datetime(2022, 1, 1, 0, 0), datetime.datetime(2024, 1, 1, 12, 0))
    """
    start, sep, end = text.partition("..") if isinstance(text, str) else ("", "", "")
    try:
        if not sep:
            raise ValueError("no '..'")
        window = tuple(parse_when(t) for t in (start, end))
    except ValueError as e:
        raise ValueError(f"{text!r}: expected FROM..TO, each YYYY-MM-DD or YYYY-MM-DDTHH:MM ({e})") from None
    if not window[0] < window[1]:
        raise ValueError(f"{text!r}: FROM must be before TO")
    return window  # type: ignore[return-value]


def _excerpt(value: object, n: int = 80) -> object:
    """The start of a long string or bytes value (for an error naming it), anything else as is."""
    return value[:n] if isinstance(value, (str, bytes, bytearray)) else value


#: What a malformed decoded document can raise inside a decoder besides FieldError.
_DECODE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError)


def _decoder(what: str):
    """A decoder (``from_dict``/``from_json``) raises :class:`FieldError` on any malformed input,
    never another exception: what its own checks do not name is reported against ``what``."""

    def wrap(fn):
        @functools.wraps(fn)
        def decode(cls, *args, **kwargs):
            try:
                return fn(cls, *args, **kwargs)
            except FieldError:
                raise
            except _DECODE_ERRORS as e:
                raise FieldError(
                    what, _excerpt(args[0] if args else None), f"malformed {what}: {type(e).__name__}: {str(e)[:200]}"
                ) from None

        return decode

    return wrap


def _load_json(text: object) -> Any:
    """``json.loads`` of a document, or :class:`FieldError` (never ValueError, RecursionError...)."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise FieldError("value", _excerpt(text), "expected JSON text")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise FieldError("value", _excerpt(text), f"not JSON: {type(e).__name__}: {str(e)[:200]}") from None


def _field(d: dict[str, Any], name: str, typ: type) -> Any:
    """``d[name]``, which must be of exactly type ``typ`` (so ``True`` is no int, ``"1"`` no bool)."""
    try:
        v = d[name]
    except KeyError:
        raise FieldError(name, None, "missing field") from None
    if type(v) is not typ:
        raise FieldError(name, _excerpt(v), f"expected a JSON {_JSON_TYPES.get(typ, typ.__name__)}")
    return v


_JSON_TYPES = {str: "string", int: "integer", bool: "boolean (true or false)", dict: "object", list: "array"}

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
    if type(d) is not dict or type(d.get("amount")) is not str or type(d.get("currency")) is not str:
        raise FieldError(field_name, _excerpt(d), "expected {amount, currency} (both strings)")
    return parse_amount(d["amount"], d["currency"], field=field_name)


def ts_to_wire(ts: datetime) -> str:
    # 4-digit years (strftime writes years below 1000 with fewer digits)
    return f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d}T{ts.hour:02d}:{ts.minute:02d}"


def ts_from_wire(text: str, field_name: str = "timestamp") -> datetime:
    if type(text) is not str or _TS_WIRE_RE.fullmatch(text) is None:
        raise FieldError(field_name, _excerpt(text), "expected YYYY-MM-DDTHH:MM")
    try:
        return datetime.strptime(text, _TS)
    except ValueError:
        raise FieldError(field_name, text, "expected YYYY-MM-DDTHH:MM") from None


def opt_ts_to_wire(ts: datetime | None) -> str | None:
    """:func:`ts_to_wire`, or None for no time."""
    return ts_to_wire(ts) if ts else None


def opt_ts_from_wire(text: str | None, field_name: str = "timestamp") -> datetime | None:
    """:func:`ts_from_wire`, or None for no time."""
    return ts_from_wire(text, field_name) if text else None


def epoch_minutes(ts: datetime) -> int:
    return int((ts - EPOCH) // timedelta(minutes=1))


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

    def __post_init__(self) -> None:
        # ids by ID_PATTERN: no '/' in either part, so node ids never collide ('01/0'+'X' vs '01'+'0/X')
        check_id(self.bank, "bank")
        check_id(self.account, "account")

    @classmethod
    def _checked(cls, bank: str, account: str) -> AccountRef:
        """An AccountRef of ids the caller has just checked (skips the second check)."""
        ref = object.__new__(cls)
        object.__setattr__(ref, "bank", bank)
        object.__setattr__(ref, "account", account)
        return ref

    @property
    def node_id(self) -> str:
        return f"{self.bank}/{self.account}"

    @classmethod
    def from_node_id(cls, node_id: str) -> AccountRef:
        bank, sep, account = node_id.partition("/") if type(node_id) is str else ("", "", "")
        if not sep or not bank or not account:
            raise FieldError("account", _excerpt(node_id), "expected BANK/ACCOUNT")
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
        return compact_json(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TransactionEvent:
        """Decode :meth:`to_dict` strictly: every field present with its JSON type (booleans are
        ``true``/``false`` only, ids by :data:`ID_PATTERN`, amounts within their currency's cap);
        :class:`FieldError` naming the field on anything else."""
        if type(d) is not dict:
            raise FieldError("value", _excerpt(d), "expected a JSON object")
        _check_schema(d, "transaction")
        fmt = _field(d, "payment_format", str)
        if fmt not in PAYMENT_FORMATS:
            raise FieldError("payment_format", _excerpt(fmt), "unknown payment format")
        offset = _field(d, "source_offset", int)
        if not -_WIRE_INT_LIMIT < offset < _WIRE_INT_LIMIT:
            raise FieldError("source_offset", offset, f"more than {_WIRE_INT_DIGITS} digits")
        return cls(
            event_id=check_id(_field(d, "event_id", str), "event_id"),
            timestamp=ts_from_wire(_field(d, "timestamp", str)),
            sender=AccountRef._checked(
                check_id(_field(d, "from_bank", str), "from_bank"),
                check_id(_field(d, "from_account", str), "from_account"),
            ),
            receiver=AccountRef._checked(
                check_id(_field(d, "to_bank", str), "to_bank"), check_id(_field(d, "to_account", str), "to_account")
            ),
            amount_received=money_from_wire(_field(d, "amount_received", dict), "amount_received"),
            amount_paid=money_from_wire(_field(d, "amount_paid", dict), "amount_paid"),
            payment_format=fmt,
            is_laundering=_field(d, "is_laundering", bool),
            source_offset=offset,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> TransactionEvent:
        return cls.from_dict(_load_json(text))

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

        return ",".join(
            (
                WIRE_TAG,
                _wire_escape(self.event_id),
                str(epoch_millis(self.timestamp)),
                str(self.source_offset),
                _wire_escape(self.sender.bank),
                _wire_escape(self.sender.account),
                _wire_escape(self.receiver.bank),
                _wire_escape(self.receiver.account),
                str(self.amount_paid.units),
                self.amount_paid.currency,
                str(self.amount_received.units),
                self.amount_received.currency,
                str(usd_cents(self.amount_paid)),
                str(usd_cents(self.amount_received)),
                self.payment_format,
                "1" if self.is_laundering else "0",
            )
        )

    @classmethod
    def from_wire(cls, text: str) -> TransactionEvent:
        """Decode :meth:`to_wire`; a :class:`FieldError` names the first bad field.

        The checks, in order (``Decode.java`` in the stream job makes the same ones, in the same
        order, with the same field names and reasons): 16 fields, the tag; the integers (at most
        18 digits: they fit a signed 64-bit integer); amounts and US cents not negative; currencies;
        payment format; label ``0``/``1``; the event time within the years 1-9999
        (:data:`WIRE_TS_MIN_MS` .. :data:`WIRE_TS_MAX_MS`; the plausible-time window is the
        parser's, at ingestion); then the ids (:data:`ID_PATTERN`).
        """
        if type(text) is not str:
            raise FieldError("value", _excerpt(text), f"expected the text of an {WIRE_TAG} wire record")
        parts = text.split(",")
        if len(parts) != len(WIRE_FIELDS) or parts[0] != WIRE_TAG:
            raise FieldError("value", text[:80], f"not an {WIRE_TAG} wire record of {len(WIRE_FIELDS)} fields")
        (
            _,
            event_id,
            ts_ms,
            offset,
            from_bank,
            from_acct,
            to_bank,
            to_acct,
            paid_units,
            paid_cur,
            recv_units,
            recv_cur,
            paid_cents,
            recv_cents,
            fmt,
            label,
        ) = parts
        ints: dict[str, int] = {}
        for name, v in (
            ("ts_ms", ts_ms),
            ("source_offset", offset),
            ("paid_units", paid_units),
            ("received_units", recv_units),
            ("paid_usd_cents", paid_cents),
            ("received_usd_cents", recv_cents),
        ):
            if not _WIRE_INT.fullmatch(v):
                raise FieldError(name, v, "expected an integer")
            ints[name] = int(v)
        for name, v in (
            ("paid_units", paid_units),
            ("received_units", recv_units),
            ("paid_usd_cents", paid_cents),
            ("received_usd_cents", recv_cents),
        ):
            if ints[name] < 0:
                raise FieldError(name, v, "negative amount")
        for name, v in (("paid_currency", paid_cur), ("received_currency", recv_cur)):
            if v not in CURRENCIES:
                raise FieldError(name, v, "unknown currency")
        if fmt not in PAYMENT_FORMATS:
            raise FieldError("payment_format", fmt, "unknown payment format")
        if label != "0" and label != "1":
            raise FieldError("is_laundering", label, "expected 0 or 1")
        if not WIRE_TS_MIN_MS <= ints["ts_ms"] <= WIRE_TS_MAX_MS:
            raise FieldError("ts_ms", ts_ms, "outside the years 1-9999")
        for name, v in (
            ("event_id", event_id),
            ("from_bank", from_bank),
            ("from_account", from_acct),
            ("to_bank", to_bank),
            ("to_account", to_acct),
        ):
            check_id(v, name)
        return cls(
            event_id=event_id,
            timestamp=from_epoch_millis(ints["ts_ms"]),
            sender=AccountRef._checked(from_bank, from_acct),
            receiver=AccountRef._checked(to_bank, to_acct),
            amount_received=Money(recv_cur, ints["received_units"]),
            amount_paid=Money(paid_cur, ints["paid_units"]),
            payment_format=fmt,
            is_laundering=label == "1",
            source_offset=ints["source_offset"],
        )


#: The stream wire form's tag and fields, in order (see :meth:`TransactionEvent.to_wire`).
WIRE_TAG = "af1"
WIRE_FIELDS: tuple[str, ...] = (
    "tag",
    "event_id",
    "ts_ms",
    "source_offset",
    "from_bank",
    "from_account",
    "to_bank",
    "to_account",
    "paid_units",
    "paid_currency",
    "received_units",
    "received_currency",
    "paid_usd_cents",
    "received_usd_cents",
    "payment_format",
    "is_laundering",
)


_WIRE_INT_DIGITS = 18  # auditflow.money.MAX_INTEGER_DIGITS: fits a signed 64-bit integer
_WIRE_INT_LIMIT = 10**_WIRE_INT_DIGITS
_WIRE_INT = re.compile(r"-?[0-9]{1,18}")
#: The event times the wire form carries: the years 1 to 9999 (what a ``datetime`` holds), in
#: epoch milliseconds. ``Decode.java`` has the same two constants.
WIRE_TS_MIN_MS = -62135596800000  # 0001-01-01T00:00:00.000
WIRE_TS_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999


def _wire_escape(text: str) -> str:
    """Percent-escape what would break the comma-separated wire form. Valid ids (:data:`ID_PATTERN`)
    never need it; an event built in code with another id is then refused by :meth:`from_wire`
    naming that id, instead of its commas shifting the fields into another, valid record."""
    if "%" in text or "," in text or "\n" in text or "\r" in text:
        return text.replace("%", "%25").replace(",", "%2C").replace("\n", "%0A").replace("\r", "%0D")
    return text


#: A rejected record keeps at most this many bytes of its raw form (a dead letter stays far below
#: Kafka's 1 MiB request limit): longer ones are truncated, with their length and SHA-256 kept.
MAX_RAW_BYTES = 4096
#: A rejected record's ``value`` and ``reason`` are cut to at most this many characters.
MAX_VALUE_CHARS = 200
MAX_REASON_CHARS = 500
RAW_ENCODINGS = ("utf-8", "base64")


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _utf8_head(data: bytes, n: int = MAX_RAW_BYTES) -> str:
    """The longest prefix of valid UTF-8 ``data`` of at most ``n`` bytes that ends on a whole character."""
    return data[:n].decode("utf-8", "ignore") if len(data) > n else data.decode("utf-8")


@dataclass(frozen=True, slots=True)
class RejectedRecord:
    r"""A record that failed a stage: where it came from, which field, value and why, and its raw
    form, capped at :data:`MAX_RAW_BYTES`.

    ``raw`` is the record's text, or (``raw_encoding`` ``"base64"``) the base64 of its bytes when
    they are not UTF-8; only its first :data:`MAX_RAW_BYTES` bytes are kept, ``raw_length`` and
    ``raw_sha256`` are those of the whole. Built from text, the record measures, hashes and cuts
    it itself; :meth:`from_bytes` builds one from bytes. ``value`` and ``reason`` are cut too
    (:data:`MAX_VALUE_CHARS`, :data:`MAX_REASON_CHARS`), so a dead letter's JSON stays under ~40 KiB
    whatever the record was.

    >>> r = RejectedRecord("f.csv", 2, "x" * 100_000, "row", "x" * 100_000, "too long")
    >>> len(r.raw), r.raw_length, r.truncated, len(r.value), len(r.to_json()) < 5000
    (4096, 100000, True, 200, True)
    >>> RejectedRecord.from_dict(json.loads(r.to_json())) == r
    True
    >>> b = RejectedRecord.from_bytes("f.csv", 3, b"A\xff", "row", "\\xff", "not valid UTF-8 at byte 1")
    >>> b.raw, b.raw_encoding, b.raw_bytes()
    ('Qf8=', 'base64', b'A\xff')
    """

    source: str  # file path or topic/partition
    offset: int | None  # line number (1-based, header is line 1) or Kafka offset (None: not known)
    raw: str
    field: str
    value: str
    reason: str
    stage: str = "parse"
    raw_length: int = -1  # bytes of the whole raw record; -1: measure ``raw`` (text) when built
    raw_sha256: str = ""  # of the whole raw record's bytes; "": hash ``raw`` when built
    raw_encoding: str = "utf-8"

    def __post_init__(self) -> None:
        for name in ("source", "raw", "field", "value", "reason", "stage", "raw_sha256", "raw_encoding"):
            if type(getattr(self, name)) is not str:
                raise FieldError(name, _excerpt(getattr(self, name)), "expected a string")
        for name in ("field", "reason", "stage"):
            if not getattr(self, name):
                raise FieldError(name, "", "missing: a reject names its stage, field and reason")
        if self.offset is not None and type(self.offset) is not int:
            raise FieldError("offset", _excerpt(self.offset), "expected an integer or null")
        if type(self.raw_length) is not int:
            raise FieldError("raw_length", _excerpt(self.raw_length), "expected an integer")
        if self.raw_encoding not in RAW_ENCODINGS:
            raise FieldError("raw_encoding", _excerpt(self.raw_encoding), f"expected one of {', '.join(RAW_ENCODINGS)}")
        if not self.raw_sha256:  # built from text: measure, hash and cut it here
            if self.raw_encoding != "utf-8" or self.raw_length != -1:
                raise FieldError("raw_sha256", "", "missing (needed with raw_length or base64)")
            data = self.raw.encode("utf-8", "surrogatepass")
            object.__setattr__(self, "raw_length", len(data))
            object.__setattr__(self, "raw_sha256", hashlib.sha256(data).hexdigest())
            if len(data) > MAX_RAW_BYTES:
                try:
                    object.__setattr__(self, "raw", _utf8_head(data))
                except UnicodeDecodeError:  # lone surrogates: keep the bytes instead
                    object.__setattr__(self, "raw", base64.b64encode(data[:MAX_RAW_BYTES]).decode("ascii"))
                    object.__setattr__(self, "raw_encoding", "base64")
        else:
            if not _SHA256_HEX.fullmatch(self.raw_sha256):
                raise FieldError("raw_sha256", _excerpt(self.raw_sha256), "expected 64 lowercase hex digits")
            kept = self.raw_bytes()
            if len(kept) > MAX_RAW_BYTES or len(kept) > self.raw_length:
                raise FieldError("raw", _excerpt(self.raw), f"more than min({MAX_RAW_BYTES}, raw_length) bytes")
        object.__setattr__(self, "value", _cut(self.value, MAX_VALUE_CHARS))
        object.__setattr__(self, "reason", _cut(self.reason, MAX_REASON_CHARS))

    @classmethod
    def from_bytes(
        cls, source: str, offset: int | None, data: bytes, field: str, value: str, reason: str, stage: str = "parse"
    ) -> RejectedRecord:
        """A reject of raw bytes: their text if they are UTF-8, else their base64; capped."""
        try:
            raw, encoding = _utf8_head(data), "utf-8"
            if len(data) > MAX_RAW_BYTES:
                data.decode("utf-8")  # the whole must be text to be kept as text
        except UnicodeDecodeError:
            raw, encoding = base64.b64encode(data[:MAX_RAW_BYTES]).decode("ascii"), "base64"
        return cls(
            source, offset, raw, field, value, reason, stage, len(data), hashlib.sha256(data).hexdigest(), encoding
        )

    def raw_bytes(self) -> bytes:
        """The raw record's bytes kept here (all of them unless :attr:`truncated`)."""
        if self.raw_encoding == "base64":
            try:
                return base64.b64decode(self.raw, validate=True)
            except ValueError:
                raise FieldError("raw", _excerpt(self.raw), "not base64") from None
        return self.raw.encode("utf-8", "surrogatepass")

    @property
    def truncated(self) -> bool:
        return len(self.raw_bytes()) < self.raw_length

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": _schema("rejected"),
            "source": self.source,
            "offset": self.offset,
            "raw": self.raw,
            "raw_encoding": self.raw_encoding,
            "raw_length": self.raw_length,
            "raw_sha256": self.raw_sha256,
            "field": self.field,
            "value": self.value,
            "reason": self.reason,
            "stage": self.stage,
        }

    def to_json(self) -> str:
        return compact_json(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RejectedRecord:
        """Decode :meth:`to_dict` (or the stream job's JSON, which has no ``raw_*`` fields and adds
        ``topic`` and ``partition``: ignored); :class:`FieldError` on anything malformed."""
        if type(d) is not dict:
            raise FieldError("value", _excerpt(d), "expected a JSON object")
        _check_schema(d, "rejected")
        for k in ("source", "offset", "raw", "field", "value", "reason", "stage"):
            if k not in d:
                raise FieldError(k, None, "missing field")
        extra = {k: d[k] for k in ("raw_length", "raw_sha256", "raw_encoding") if k in d}
        return cls(**{k: d[k] for k in ("source", "offset", "raw", "field", "value", "reason", "stage")}, **extra)

    @classmethod
    def from_json(cls, text: str | bytes) -> RejectedRecord:
        return cls.from_dict(_load_json(text))


_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


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
    @_decoder("reason code")
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
        return compact_json(self.to_dict())

    @classmethod
    @_decoder("alert")
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
        return cls.from_dict(_load_json(text))


def alert_id_for(event_id: str) -> str:
    return f"alert-{event_id}"


@dataclass(frozen=True, slots=True)
class TraceNode:
    """An account reached by a trace, at ``hop_depth`` hops from the root, via ``upstream_ids``."""

    node_id: str
    hop_depth: int
    upstream_ids: tuple[str, ...]  # nodes one hop closer to the root that reached this one
    #: the event ids that explain it: the time-ordered transfers from the root to it (upstream
    #: traces: from it to the root), ``hop_depth`` of them (empty for the root)
    path: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TraceCut:
    """Where and why a trace left something out: at ``hop``, at account ``node_id`` (empty when
    a whole hop was cut), for ``reason`` (``fan-out cap``, ``amount``, ``hub``, ``node budget``,
    ``edge budget``, ``time budget``), ``dropped`` transfers (accounts, for ``node budget``; the
    frontier accounts not expanded, for ``time budget``)."""

    hop: int
    node_id: str
    reason: str
    dropped: int

    def to_wire(self) -> list[Any]:
        return [self.hop, self.node_id, self.reason, self.dropped]

    @classmethod
    def from_wire(cls, row: list[Any]) -> TraceCut:
        hop, node_id, reason, dropped = row
        return cls(int(hop), node_id, reason, int(dropped))


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
    truncated: bool = False  # True when anything was cut (see ``cuts``)
    hubs: tuple[str, ...] = ()  # accounts reached but not expanded: above the hub degree
    cuts: tuple[TraceCut, ...] = ()
    #: every parameter the trace id is computed over (horizon, tolerance, budgets, ...)
    params: tuple[tuple[str, Any], ...] = ()

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
            "window_start": opt_ts_to_wire(self.window_start),
            "window_end": opt_ts_to_wire(self.window_end),
            "nodes": [[n.node_id, n.hop_depth, list(n.upstream_ids), list(n.path)] for n in self.nodes],
            "edges": [
                [e.event_id, e.src, e.dst, money_to_wire(e.amount_paid), ts_to_wire(e.timestamp), e.hop]
                for e in self.edges
            ],
            "backend": self.backend,
            "truncated": self.truncated,
            "hubs": list(self.hubs),
            "cuts": [c.to_wire() for c in self.cuts],
            "params": dict(self.params),
        }

    def to_json(self) -> str:
        return compact_json(self.to_dict())

    @classmethod
    @_decoder("trace")
    def from_dict(cls, d: dict[str, Any]) -> EvidenceTrace:
        _check_schema(d, "trace")
        return cls(
            trace_id=d["trace_id"],
            root=d["root"],
            direction=d["direction"],
            max_hops=int(d["max_hops"]),
            fanout_cap=int(d["fanout_cap"]),
            window_start=opt_ts_from_wire(d["window_start"]),
            window_end=opt_ts_from_wire(d["window_end"]),
            nodes=tuple(TraceNode(n[0], int(n[1]), tuple(n[2]), tuple(n[3]) if len(n) > 3 else ()) for n in d["nodes"]),
            edges=tuple(
                TraceEdge(eid, s, t, money_from_wire(m, "amount_paid"), ts_from_wire(ts), int(h))
                for eid, s, t, m, ts, h in d["edges"]
            ),
            backend=d.get("backend", ""),
            truncated=bool(d.get("truncated", False)),
            hubs=tuple(d.get("hubs", ())),
            cuts=tuple(TraceCut.from_wire(c) for c in d.get("cuts", ())),
            params=tuple(sorted(d.get("params", {}).items())),
        )


def trace_id_for(root: str, params: dict[str, Any], edge_ids: list[str]) -> str:
    """A content address: same root, parameters and edges give the same id on any backend."""
    return "trace-" + canonical_sha256({"root": root, "params": params, "edges": sorted(edge_ids)})[:16]


#: Sides of a money trail: the subject paid the alerted transfer to the receiver; ``upstream``
#: accounts funded the subject, ``downstream`` ones received the alerted funds after the receiver
#: (``both`` when the money came back round a cycle).
TRAIL_SIDES = ("subject", "receiver", "upstream", "downstream", "both")


@dataclass(frozen=True, slots=True)
class TrailAccount:
    """An account of a money trail (:mod:`evidence_graph.trail`). Traced amounts are US cents of
    the alerted transfer's money, rounded half-even from exact shares: ``received_cents`` of it
    reached the account (downstream), ``sent_cents`` left it (downstream: passed on; upstream:
    what the account contributed towards the alerted transfer), ``held_cents`` stayed in it at
    the end of the window (upstream: the part of what it sent on that its window does not
    explain, older money). ``hop``: hops from the subject (the receiver 1); ``hub``: too busy
    to follow (more than the hub degree of transfers in the window), an end of the trail;
    ``headline``: among the accounts the report shows first; ``first_seen``/``last_seen``: its
    first and last transfer in the window, where fetched."""

    node_id: str
    side: str
    hop: int
    received_cents: int
    sent_cents: int
    held_cents: int
    hub: bool = False
    headline: bool = False
    first_seen: datetime | None = None
    last_seen: datetime | None = None


@dataclass(frozen=True, slots=True)
class TrailFlow:
    """A transfer that carried traced money (``side`` ``upstream`` or ``downstream``):
    ``traced_cents`` of its ``amount_paid`` (US cents, rounded half-even)."""

    event_id: str
    src: str
    dst: str
    amount_paid: Money
    timestamp: datetime
    side: str
    traced_cents: int


@dataclass(frozen=True, slots=True)
class MoneyTrail:
    """Where the money of one alerted transfer came from and where it went, attributed pro rata
    (:mod:`evidence_graph.trail`). ``amount_cents``: the alerted transfer in US cents; ``flows``:
    every transfer that carried at least ``min_share`` of it, both sides; ``dropped``: per side and
    why (``small``: under the share; ``limit``: past the hop limit or a budget), the transfers and
    traced cents not followed; ``cuts``: where a limit stopped it."""

    trail_id: str
    event_id: str
    subject: str
    receiver: str
    amount_paid: Money
    amount_cents: int
    window_start: datetime
    window_end: datetime
    accounts: tuple[TrailAccount, ...]
    flows: tuple[TrailFlow, ...]
    dropped: tuple[tuple[str, str, int, int], ...]  # (side, why, transfers, cents)
    cuts: tuple[TraceCut, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()
    backend: str = ""
    #: the members of the typology instance the alerted transfer belongs to (on the trail or not)
    members: tuple[str, ...] = ()

    @property
    def truncated(self) -> bool:
        return bool(self.cuts)

    def account(self, node_id: str) -> TrailAccount:
        for a in self.accounts:
            if a.node_id == node_id:
                return a
        raise KeyError(node_id)

    def downstream_trace(self) -> EvidenceTrace:
        """Where the alerted money went, as an :class:`EvidenceTrace` rooted at the subject: the
        alerted transfer and the downstream flows the trail followed, each account at its hop
        (what the narrator narrates: the money, not every transfer the accounts made)."""
        hop = {self.subject: 0, self.receiver: 1}
        hop |= {a.node_id: a.hop for a in self.accounts if a.side == "downstream" and a.node_id not in hop}
        flows = [f for f in self.flows if f.side in ("alerted", "downstream") and f.src in hop and f.dst in hop]
        upstream: dict[str, set[str]] = {}
        for f in flows:
            upstream.setdefault(f.dst, set()).add(f.src)
        nodes = tuple(
            TraceNode(n, h, tuple(sorted(upstream.get(n, ()))) if n != self.subject else ())
            for n, h in sorted(hop.items(), key=lambda kv: (kv[1], kv[0]))
        )
        edges = tuple(
            sorted(
                (TraceEdge(f.event_id, f.src, f.dst, f.amount_paid, f.timestamp, max(1, hop[f.dst])) for f in flows),
                key=lambda e: (e.hop, e.event_id),
            )
        )
        params = {"trail_id": self.trail_id, "direction": "out"}
        return EvidenceTrace(
            trace_id=trace_id_for(self.subject, params, [e.event_id for e in edges]),
            root=self.subject,
            direction="out",
            max_hops=int(dict(self.params).get("max_hops", max(hop.values()))),
            fanout_cap=0,
            window_start=self.window_start,
            window_end=self.window_end,
            nodes=nodes,
            edges=edges,
            backend=self.backend,
            truncated=self.truncated,
            params=tuple(sorted(params.items())),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": _schema("trail"),
            "trail_id": self.trail_id,
            "event_id": self.event_id,
            "subject": self.subject,
            "receiver": self.receiver,
            "amount_paid": money_to_wire(self.amount_paid),
            "amount_cents": self.amount_cents,
            "window_start": ts_to_wire(self.window_start),
            "window_end": ts_to_wire(self.window_end),
            "accounts": [
                [
                    a.node_id,
                    a.side,
                    a.hop,
                    a.received_cents,
                    a.sent_cents,
                    a.held_cents,
                    a.hub,
                    a.headline,
                    opt_ts_to_wire(a.first_seen),
                    opt_ts_to_wire(a.last_seen),
                ]
                for a in self.accounts
            ],
            "flows": [
                [
                    f.event_id,
                    f.src,
                    f.dst,
                    money_to_wire(f.amount_paid),
                    ts_to_wire(f.timestamp),
                    f.side,
                    f.traced_cents,
                ]
                for f in self.flows
            ],
            "dropped": [list(d) for d in self.dropped],
            "cuts": [c.to_wire() for c in self.cuts],
            "params": dict(self.params),
            "backend": self.backend,
            "members": list(self.members),
        }

    def to_json(self) -> str:
        return compact_json(self.to_dict())

    @classmethod
    @_decoder("trail")
    def from_dict(cls, d: dict[str, Any]) -> MoneyTrail:
        _check_schema(d, "trail")
        return cls(
            trail_id=d["trail_id"],
            event_id=d["event_id"],
            subject=d["subject"],
            receiver=d["receiver"],
            amount_paid=money_from_wire(d["amount_paid"], "amount_paid"),
            amount_cents=int(d["amount_cents"]),
            window_start=ts_from_wire(d["window_start"]),
            window_end=ts_from_wire(d["window_end"]),
            accounts=tuple(
                TrailAccount(
                    n,
                    side,
                    int(h),
                    int(r),
                    int(s),
                    int(k),
                    bool(hub),
                    bool(head),
                    opt_ts_from_wire(f),
                    opt_ts_from_wire(last),
                )
                for n, side, h, r, s, k, hub, head, f, last in d["accounts"]
            ),
            flows=tuple(
                TrailFlow(eid, s, t, money_from_wire(m, "amount_paid"), ts_from_wire(ts), side, int(c))
                for eid, s, t, m, ts, side, c in d["flows"]
            ),
            dropped=tuple((side, why, int(n), int(c)) for side, why, n, c in d["dropped"]),
            cuts=tuple(TraceCut.from_wire(c) for c in d.get("cuts", ())),
            params=tuple(sorted(d.get("params", {}).items())),
            backend=d.get("backend", ""),
            members=tuple(d.get("members", ())),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> MoneyTrail:
        return cls.from_dict(_load_json(text))


def trail_id_for(event_id: str, params: dict[str, Any], flows: list[tuple[str, str, int]]) -> str:
    """A content address over the alerted transfer, the parameters and the traced flows."""
    return "trail-" + canonical_sha256({"event": event_id, "params": params, "flows": sorted(flows)})[:16]


@dataclass(frozen=True, slots=True)
class AccountActivity:
    """One account's transfers in a window (a SAR's subject block): how many and how much each way
    (US cents at the reference rates), its first and last transfer in the window; ``capped`` when
    it had more transfers than were counted."""

    node_id: str
    window_start: datetime
    window_end: datetime
    transfers_in: int
    transfers_out: int
    usd_in_cents: int
    usd_out_cents: int
    first_seen: datetime | None
    last_seen: datetime | None
    capped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "window": [ts_to_wire(self.window_start), ts_to_wire(self.window_end)],
            "transfers": [self.transfers_in, self.transfers_out],
            "usd_cents": [self.usd_in_cents, self.usd_out_cents],
            "seen": [opt_ts_to_wire(self.first_seen), opt_ts_to_wire(self.last_seen)],
            "capped": self.capped,
        }


@dataclass(frozen=True, slots=True)
class PriorAlert:
    """An earlier alert of the same run on one of the same accounts (``account``)."""

    alert_id: str
    timestamp: datetime
    account: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "alert_id": self.alert_id,
            "timestamp": ts_to_wire(self.timestamp),
            "account": self.account,
            "score": self.score,
        }


#: Where a narrative sentence came from: the language model, or the deterministic template of its
#: facts (the model's attempts were rejected by the fact check until the retry budget ran out).
NARRATIVE_SOURCES = ("model", "template")


@dataclass(frozen=True, slots=True)
class NarrativeSentence:
    """One sentence of an alert narrative and the evidence items it states: event ids, the trace
    id, ``reason:<feature>`` and ``typology:<name>``."""

    text: str
    evidence: tuple[str, ...]
    source: str = "model"

    def __post_init__(self) -> None:
        if self.source not in NARRATIVE_SOURCES:
            raise FieldError("source", self.source, f"expected one of {', '.join(NARRATIVE_SOURCES)}")


@dataclass(frozen=True, slots=True)
class Narrative:
    """An alert narrative (SAR style) as the narrator wrote it, with what made it: the model's
    digest, the decoding parameters and the seed (the same inputs give the same narrative), the
    ``mode`` (``constrained``: fact-checked with backtracking; ``baseline``: plain sampling) and
    the decode statistics (``tokens``, ``backtracks``, ``tokens_rolled_back``,
    ``template_fallbacks``, ``seconds``, ...; timing varies, so :meth:`content` leaves them out)."""

    alert_id: str
    trace_id: str
    sentences: tuple[NarrativeSentence, ...]
    mode: str
    model_digest: str
    decoding: tuple[tuple[str, Any], ...]
    seed: int
    stats: tuple[tuple[str, Any], ...] = ()

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.sentences)

    @property
    def template_sentences(self) -> tuple[int, ...]:
        """1-based numbers of the sentences that came from the template."""
        return tuple(i for i, s in enumerate(self.sentences, 1) if s.source == "template")

    def content(self) -> dict[str, Any]:
        """Everything but the statistics: what a report shows and is addressed by."""
        return {
            "schema": _schema("narrative"),
            "alert_id": self.alert_id,
            "trace_id": self.trace_id,
            "sentences": [[s.text, list(s.evidence), s.source] for s in self.sentences],
            "mode": self.mode,
            "model_digest": self.model_digest,
            "decoding": dict(self.decoding),
            "seed": self.seed,
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.content(), "stats": dict(self.stats)}

    def to_json(self) -> str:
        return compact_json(self.to_dict())

    @classmethod
    @_decoder("narrative")
    def from_dict(cls, d: dict[str, Any]) -> Narrative:
        _check_schema(d, "narrative")
        return cls(
            alert_id=_field(d, "alert_id", str),
            trace_id=_field(d, "trace_id", str),
            sentences=tuple(NarrativeSentence(t, tuple(e), s) for t, e, s in _field(d, "sentences", list)),
            mode=_field(d, "mode", str),
            model_digest=_field(d, "model_digest", str),
            decoding=tuple(sorted(_field(d, "decoding", dict).items())),
            seed=_field(d, "seed", int),
            stats=tuple(sorted(d.get("stats", {}).items())),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Narrative:
        return cls.from_dict(_load_json(text))


@dataclass(frozen=True, slots=True)
class ReportManifest:
    """What a report was made from, hashed, and where it sits: ``kind`` ``alert`` (``alert_id`` the
    alert) or ``period`` (``alert_id`` the period id, e.g. ``daily-2022-09-01``), its ``files``
    (name, SHA-256), the audit log index its entry has (``log_index``). ``signature`` is an
    Ed25519 signature (base64) by ``key_id`` over the RFC 8785 canonical :meth:`body`."""

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
    kind: str = "alert"
    key_id: str = ""
    log_index: int = -1

    def body(self) -> dict[str, Any]:
        return {
            "schema": _schema("manifest"),
            "kind": self.kind,
            "key_id": self.key_id,
            "log_index": self.log_index,
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
    @_decoder("manifest")
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
            kind=d.get("kind", "alert"),
            key_id=d.get("key_id", ""),
            log_index=d.get("log_index", -1),
        )
