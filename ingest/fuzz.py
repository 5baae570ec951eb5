"""Hostile input for the line reader and the decoders: seeded random and mutated bytes.

The properties every input must keep (each ``check_*`` raises :class:`FuzzFailure` otherwise,
and any exception but :class:`~auditflow.errors.FieldError` escaping a decoder is one):

* :func:`check_line_reader`: a transactions file (a valid header, then any bytes) is read by the
  importer's path (:func:`~ingest.amlworld.read_transactions`) and the producer's and file job's
  (:func:`~ingest.kafka_io.wire_records`) with no exception; each yields one item per data line
  (``in = processed + rejected``, the lines counted independently: the pieces between ``b"\\n"``);
  both agree line by line (an event on one is the same event, same line number and event id, on
  the other, a reject on one is the same reject on the other); every value decodes back
  (``from_wire``) to the event; every reject's JSON stays under :data:`MAX_DEAD_LETTER_BYTES` and
  decodes back to it.
* :func:`check_json_decoder`, :func:`check_wire_decoder`, :func:`check_reject_decoder`:
  ``TransactionEvent.from_json``, ``TransactionEvent.from_wire`` and ``RejectedRecord.from_json``
  either decode (and then re-encode to something that decodes to the same record) or raise
  ``FieldError``.

:func:`fuzz_cases` runs ``n`` seeded cases over all four and counts crashes, for benchmarks
(``fuzz_cases=... fuzz_crashes=...``); the tests drive the same checks with hypothesis.

>>> report = fuzz_cases(40, seed=1)
>>> report.cases, report.crashes
(40, 0)
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass, field

from auditflow.errors import FieldError
from auditflow.records import RejectedRecord, TransactionEvent
from ingest.amlworld import HEADER, parse_line, read_transactions
from ingest.kafka_io import wire_records

__all__ = [
    "MAX_DEAD_LETTER_BYTES",
    "FuzzFailure",
    "FuzzReport",
    "check_json_decoder",
    "check_line_reader",
    "check_reject_decoder",
    "check_wire_decoder",
    "fuzz_cases",
    "mutate",
    "SEED_ROWS",
]

#: A dead letter's JSON must stay below this (Kafka's default request limit is 1 MiB).
MAX_DEAD_LETTER_BYTES = 64 * 1024

HEADER_LINE = ",".join(HEADER).encode()
#: Valid rows in the layouts of the public data (mutated into hostile ones).
SEED_ROWS: tuple[bytes, ...] = (
    b"2022/09/01 00:20,010,8000EBD30,010,8000EBD30,3697.34,US Dollar,3697.34,US Dollar,Reinvestment,0",
    b"2022/09/01 00:16,00220,8001C8C51,01420,8003093C1,0.025852,Bitcoin,0.025852,Bitcoin,Bitcoin,0",
    b"2022/09/01 00:06,021174,800737690,012,80011F990,2848.96,Euro,3333.28,US Dollar,ACH,1",
    b"2022/09/02 08:44,0217,80FD27570,0024856,8090E8EB0,10621.24,Shekel,10621.24,Shekel,Credit Card,1",
    b'2023/01/31 23:59,1,"8000EBD30",00001,A,0.00,Yen,000.10,Yuan,Cash,0',
)
#: Byte strings that have broken readers before: line ends, control and non-UTF-8 bytes, the
#: node-id separator, the wire form's escape, huge numbers, far timestamps, loose booleans.
TOKENS: tuple[bytes, ...] = (
    b"\r", b"\n", b"\r\n", b"\x00", b"\t", b"\x7f", b"\xc2\x85", b"\xe2\x80\xa8", b"\xef\xbb\xbf", b"\xff", b"\xc3",
    b"\xed\xa0\x80", b"/", b",", b'"', b"%", b"%2C", b"\\", b" ", b"-", b".", b"9" * 31, b"1" * 19, b"0" * 40,
    b"9999/12/31 23:59", b"0001/01/01 00:00", b"1969/12/31 23:59", b"2100/01/01 00:00", b"true", b"false",
    b"null", b"[]", b"{}", b"\xd9\xa1\xd9\xa2", b"\xef\xbc\x92", b"e5", b"NaN", b"Infinity", b"A" * 65,
)


class FuzzFailure(AssertionError):
    """A property of the readers or decoders did not hold (or an exception escaped)."""


def _fail(what: str, data: object, detail: str) -> FuzzFailure:
    return FuzzFailure(f"{what}: {detail} (input {data!r:.300})")


def _seed_corpus() -> dict[str, list[bytes]]:
    events = [parse_line(r, 2 + i) for i, r in enumerate(SEED_ROWS)]
    events = [e for e in events if isinstance(e, TransactionEvent)]
    reject = RejectedRecord("f.csv", 7, "2022/09/01 00:20,x", "row", "x", "expected 11 columns, got 2")
    return {
        "rows": list(SEED_ROWS),
        "json": [e.to_json().encode() for e in events],
        "wire": [e.to_wire().encode() for e in events],
        "reject": [reject.to_json().encode(), RejectedRecord.from_bytes("t/0", 3, b"\xff" * 5000, "row", "\\xff",
                                                                       "not valid UTF-8 at byte 0").to_json().encode()],
    }


def mutate(rng: random.Random, data: bytes, corpus: list[bytes] | None = None, rounds: int | None = None) -> bytes:
    """``data`` after a few random edits: byte flips, tokens inserted or replacing a span, spans
    deleted or repeated, a splice with another corpus item, truncation."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4) if rounds is None else rounds):
        op = rng.randrange(8)
        i = rng.randint(0, len(out))
        j = min(len(out), i + rng.randint(0, 12))
        if op == 0 and out:
            k = rng.randrange(len(out))
            out[k] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[i:i] = rng.choice(TOKENS)
        elif op == 2:
            out[i:j] = rng.choice(TOKENS)
        elif op == 3:
            del out[i:j]
        elif op == 4:
            out[i:i] = out[i:j] * rng.randint(1, 50)
        elif op == 5 and corpus:
            other = rng.choice(corpus)
            out[i:] = other[rng.randint(0, len(other)):]
        elif op == 6:
            out[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            del out[j:]
    return bytes(out)


# ------------------------------------------------------------------------------ the checks


def _data_lines(body: bytes) -> int:
    """Data lines after the header, counted independently of the reader: the pieces between
    ``b"\\n"`` (a final piece without its line end counts, an empty one after the last does not)."""
    if not body:
        return 0
    return body.count(b"\n") + (0 if body.endswith(b"\n") else 1)


def check_line_reader(body: bytes, *, source: str = "fuzz.csv") -> int:
    """Read ``HEADER + "\\n" + body`` on both paths and check the properties (module docstring).
    Returns the number of data lines."""
    data = HEADER_LINE + b"\n" + body
    expected = _data_lines(body)
    try:
        parsed = list(read_transactions(io.BytesIO(data), source=source))
        wired = list(wire_records(io.BytesIO(data), source=source))
    except Exception as e:  # noqa: BLE001 - any exception is the finding
        raise _fail("line reader", body, f"{type(e).__name__}: {e}") from e
    if len(parsed) != expected or len(wired) != expected:
        raise _fail("line reader", body, f"{expected} data lines, read {len(parsed)} (importer) and "
                                         f"{len(wired)} (producer): in != processed + rejected")
    for lineno, (p, w) in enumerate(zip(parsed, wired), start=2):
        if type(p) is TransactionEvent:
            if type(w) is not tuple:
                raise _fail("line reader", body, f"line {lineno}: an event for the importer, {w!r:.200} for the producer")
            back = TransactionEvent.from_wire(w[1].decode())
            if back != p or p.source_offset != lineno or w[0] != p.sender.node_id.encode():
                raise _fail("line reader", body, f"line {lineno}: the producer's value decodes to {back!r:.200}, "
                                                 f"not {p!r:.200}")
        else:
            if w != p or p.offset != lineno:
                raise _fail("line reader", body, f"line {lineno}: importer {p!r:.200} != producer {w!r:.200}")
            _check_dead_letter(p, body)
    return expected


def _check_dead_letter(r: RejectedRecord, data: object) -> None:
    text = r.to_json()
    if len(text.encode()) > MAX_DEAD_LETTER_BYTES:
        raise _fail("dead letter", data, f"{len(text)} bytes of JSON")
    if not (r.field and r.reason) or RejectedRecord.from_json(text) != r:
        raise _fail("dead letter", data, f"does not decode back or names no field/reason: {text[:200]}")


def _decoder_check(what: str, decode, encode, data: object) -> bool:
    """True if ``data`` decoded (and re-encoded to the same record), False if it was refused by a
    FieldError; FuzzFailure otherwise."""
    try:
        rec = decode(data)
    except FieldError:
        return False
    except Exception as e:  # noqa: BLE001 - any other exception is the finding
        raise _fail(what, data, f"{type(e).__name__} escaped: {e}") from e
    try:
        again = decode(encode(rec))
    except Exception as e:  # noqa: BLE001
        raise _fail(what, data, f"decoded, but its own encoding does not decode: {type(e).__name__}: {e}") from e
    if again != rec:
        raise _fail(what, data, "decoded, but its own encoding decodes to another record")
    return True


def check_json_decoder(data: bytes | str) -> bool:
    """``TransactionEvent.from_json`` on ``data``: decodes (and round-trips) or raises FieldError."""
    return _decoder_check("TransactionEvent.from_json", TransactionEvent.from_json, TransactionEvent.to_json, data)


def check_wire_decoder(text: object) -> bool:
    """``TransactionEvent.from_wire`` on ``text``: decodes (and round-trips) or raises FieldError."""
    return _decoder_check("TransactionEvent.from_wire", TransactionEvent.from_wire, TransactionEvent.to_wire, text)


def check_reject_decoder(data: bytes | str) -> bool:
    """``RejectedRecord.from_json``: decodes (round-trips, stays small) or raises FieldError."""
    ok = _decoder_check("RejectedRecord.from_json", RejectedRecord.from_json, RejectedRecord.to_json, data)
    if ok:
        _check_dead_letter(RejectedRecord.from_json(data), data)
    return ok


# ------------------------------------------------------------------------------ the driver


@dataclass
class FuzzReport:
    """What :func:`fuzz_cases` ran: cases, crashes (failed properties, escaped exceptions) and
    the first few failures' messages; ``lines``: data lines read, ``decoded``: inputs a decoder
    accepted (the rest it refused with a FieldError)."""

    cases: int = 0
    crashes: int = 0
    lines: int = 0
    decoded: int = 0
    failures: list[str] = field(default_factory=list)


def fuzz_cases(n: int, seed: int = 0) -> FuzzReport:
    """Run ``n`` seeded hostile inputs through the line reader and the three decoders (in turn),
    counting crashes; the same ``(n, seed)`` always runs the same inputs."""
    rng = random.Random(seed)
    corpus = _seed_corpus()
    everything = [x for items in corpus.values() for x in items]
    report = FuzzReport()
    for case in range(n):
        kind = case % 4
        try:
            if kind == 0:
                lines = [mutate(rng, rng.choice(corpus["rows"]), everything) if rng.random() < 0.7
                         else rng.choice(corpus["rows"]) for _ in range(rng.randint(1, 6))]
                body = b"\n".join(lines) + rng.choice([b"", b"\n", b"\r\n"])
                if rng.random() < 0.1:
                    body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
                report.lines += check_line_reader(body)
            elif kind == 1:
                report.decoded += check_json_decoder(mutate(rng, rng.choice(corpus["json"]), everything))
            elif kind == 2:
                raw = mutate(rng, rng.choice(corpus["wire"]), everything)
                report.decoded += check_wire_decoder(raw.decode("utf-8", "surrogateescape"))
            else:
                report.decoded += check_reject_decoder(mutate(rng, rng.choice(corpus["reject"]), everything))
        except FuzzFailure as e:
            report.crashes += 1
            if len(report.failures) < 5:
                report.failures.append(str(e))
        report.cases += 1
    return report


if __name__ == "__main__":  # pragma: no cover - python -m ingest.fuzz [N] [SEED]
    import sys

    r = fuzz_cases(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print(json.dumps({"fuzz_cases": r.cases, "fuzz_crashes": r.crashes, "lines": r.lines, "decoded": r.decoded}))
    for f in r.failures:
        print(f, file=sys.stderr)
    sys.exit(1 if r.crashes else 0)
