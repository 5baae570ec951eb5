"""The stream job's own dead letters (Decode.java) stay small whatever the record, and keep bytes
that are not UTF-8: at most MAX_RAW_BYTES of the record (text cut on a whole character, or base64),
with the whole record's length and SHA-256, and the field value cut to MAX_VALUE_CHARS.

Runs the file job on a local MiniCluster (marker ``flink``) over a wire file of hostile records;
each expectation is computed here from the record's bytes (hashlib, base64). The same records
through Kafka, where a dead letter over 1 MiB would fail the sink, are in test_kafka_job.py."""

from __future__ import annotations

import base64
import hashlib

import pytest

from auditflow.records import ID_REASON, MAX_RAW_BYTES, MAX_VALUE_CHARS, TransactionEvent
from ingest.amlworld import read_transactions
from ingest.synthetic import generate, write_dataset

GOOD_TAIL = ",1662000000000,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0"
BIG_ID = "A" * 300_000
HOSTILE: list[tuple[bytes, str, str, str]] = [  # (record, field, value, reason)
    (b"af1,tx-u1,\xff\xfe" + GOOD_TAIL.encode(), "value", "\\xff", "not valid UTF-8 at byte 10"),
    (("af1,tx-u2,1662000000000,2,010," + BIG_ID + ",011,B,1000,Euro,1000,Euro,1170,1170,ACH,0").encode(),
     "from_account", BIG_ID[:MAX_VALUE_CHARS - 3] + "...", ID_REASON),
    (b'"' * 700_000, "value", '"' * 77 + "...", "not an af1 wire record of 16 fields"),
    (("\u00e9" * 5000).encode(), "value", "\u00e9" * 77 + "...", "not an af1 wire record of 16 fields"),
    (b"caf\xc3", "value", "\\xc3", "not valid UTF-8 at byte 3"),
]


def expected_raw(record: bytes) -> tuple[str, str]:
    """(raw, encoding) a capped dead letter keeps of ``record``."""
    try:
        record.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(record[:MAX_RAW_BYTES]).decode("ascii"), "base64"
    return record[:MAX_RAW_BYTES].decode("utf-8", "ignore"), "utf-8"


@pytest.mark.flink
def test_the_jobs_dead_letters_are_capped_and_keep_non_utf8_bytes(tmp_path):
    from pipelines.stream_job import StreamSpec, run_wire_job
    from pipelines.testing import linear_scorer

    ds = generate(accounts=60, days=1, seed=4)
    csv_path, _ = write_dataset(ds, tmp_path, name="dl")
    good = [e.to_wire().encode() for e in read_transactions(csv_path) if isinstance(e, TransactionEvent)][:200]
    wire = tmp_path / "dl.af1"
    wire.write_bytes(b"\n".join(good + [h[0] for h in HOSTILE]) + b"\n")  # hostile ones last: none is late
    out = run_wire_job(wire, StreamSpec(scorer_factory=linear_scorer(threshold=2.0)))
    assert out.records_in == len(good) + len(HOSTILE) == out.processed + len(out.rejects) + len(out.late) + len(out.duplicates)
    assert out.processed == len(good) and len(out.rejects) == len(HOSTILE)
    by_sha = {r.raw_sha256: r for r in out.rejects}
    for record, field, value, reason in HOSTILE:
        r = by_sha[hashlib.sha256(record).hexdigest()]
        raw, encoding = expected_raw(record)
        assert (r.stage, r.field, r.value, r.reason) == ("decode", field, value, reason)
        assert (r.raw, r.raw_encoding, r.raw_length) == (raw, encoding, len(record))
        assert r.truncated == (len(record) > MAX_RAW_BYTES)
        assert len(r.to_json()) < 16 * 1024  # the 700 KB record's letter was 1.4 MB of JSON
    cut = by_sha[hashlib.sha256(HOSTILE[3][0]).hexdigest()]
    assert cut.raw == "\u00e9" * (MAX_RAW_BYTES // 2)  # cut on a whole character, not in one
