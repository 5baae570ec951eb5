"""The stream job's JVM decoder (Decode.java) and TransactionEvent.from_wire reject the same af1
records, naming the same field with the same reason: what the JVM lets through, the Python
stages after it (fast path, graph writes) decode, so no record that reaches the job stops it.

Runs the file job on a local MiniCluster (marker ``flink``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditflow.errors import FieldError
from auditflow.records import ID_REASON, WIRE_TS_MAX_MS, WIRE_TS_MIN_MS, TransactionEvent
from ingest.amlworld import read_transactions
from ingest.synthetic import generate, write_dataset

DECODE_JAVA = Path(__file__).resolve().parents[2] / "pipelines" / "jvm" / "src" / "io" / "auditflow" / "stream" / "Decode.java"

GOOD = "af1,tx-{i},1662000000000,{i},010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0"
HOSTILE = [
    "af1,tx-h1,1662000000000,2,010,A,011,B,-1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-h2,1662000000000,2,010,A,011,B,1000,Euro,1000,Euro,1170,-0001,ACH,0",
    "af1,tx-h3,1662000000000,2,01/0,X,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-h4,1662000000000,2,010,A,011,0/X,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx/h5,1662000000000,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-h6,1662000000000,2,0%2C1,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-h7,1662000000000,2,010,8000 EBD30,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-h8,1662000000000,2,010,8000\u00e9,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-h9,1662000000000,2,010," + "A" * 65 + ",011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,,1662000000000,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    "af1,tx-h11,1662000000000,2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,true",
]
# Not in the job run: a ts_ms beyond the years 1-9999 (an OverflowError in from_wire once) is
# rejected by both decoders, but the source's SQL event-time column (pipelines/stream_job.py,
# event_time_column) turns it into a NULL rowtime first, which fails the job before Decode sees it.
OUT_OF_RANGE_TS = [
    f"af1,tx-h12,{WIRE_TS_MIN_MS - 1},2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
    f"af1,tx-h13,{WIRE_TS_MAX_MS + 1},2,010,A,011,B,1000,Euro,1000,Euro,1170,1170,ACH,0",
]


def python_reject(record: str) -> tuple[str, str]:
    with pytest.raises(FieldError) as e:
        TransactionEvent.from_wire(record)
    return e.value.field, e.value.reason


def test_from_wire_refuses_event_times_beyond_the_years_1_to_9999():
    for r in OUT_OF_RANGE_TS:
        assert python_reject(r) == ("ts_ms", "outside the years 1-9999")
    for ms in (WIRE_TS_MIN_MS, WIRE_TS_MAX_MS):
        assert TransactionEvent.from_wire(OUT_OF_RANGE_TS[0].replace(str(WIRE_TS_MIN_MS - 1), str(ms))).timestamp.year in (1, 9999)


def test_the_jvm_decoder_carries_the_same_constants():
    """Decode.java's copies of the ts range and the id rule (a cheap check before the job runs)."""
    java = DECODE_JAVA.read_text()
    assert f"WIRE_TS_MIN_MS = {WIRE_TS_MIN_MS}L" in java and f"WIRE_TS_MAX_MS = {WIRE_TS_MAX_MS}L" in java
    assert f'"{ID_REASON}"' in java.replace('"\n            + "', "").replace("=\n            ", "= ")
    assert "ID_MAX_LENGTH = 64" in java and "c == '_' || c == '.' || c == ':' || c == '-'" in java


@pytest.mark.flink
def test_the_jvm_decoder_rejects_what_from_wire_rejects_with_the_same_field_and_reason(tmp_path):
    from pipelines.stream_job import StreamSpec, run_wire_job
    from pipelines.testing import linear_scorer

    ds = generate(accounts=60, days=1, seed=4)
    csv_path, _ = write_dataset(ds, tmp_path, name="agree")
    good = [e.to_wire() for e in read_transactions(csv_path) if isinstance(e, TransactionEvent)][:300]
    wire = tmp_path / "agree.af1"
    wire.write_text("\n".join(good + HOSTILE) + "\n", encoding="utf-8")  # hostile ones last: none is late
    expected = {r.split(",")[1] or "(empty)": python_reject(r) for r in HOSTILE}
    out = run_wire_job(wire, StreamSpec(scorer_factory=linear_scorer(threshold=2.0)))
    assert out.records_in == len(good) + len(HOSTILE) == out.processed + len(out.rejects) + len(out.late) + len(out.duplicates)
    assert out.processed == len(good) and not out.late
    got = {r.raw.split(",")[1] or "(empty)": (r.field, r.reason) for r in out.rejects}
    assert got == expected
    assert all(r.stage == "decode" for r in out.rejects)
