"""The JVM stream job against the plain-Python reference: the same features bit for bit, and
the same split into processed, rejected, late and duplicate records, on input that arrives out
of order, late and twice."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from auditflow.features import FEATURE_NAMES
from auditflow.records import TransactionEvent
from ingest.amlworld import read_transactions
from ingest.synthetic import generate, write_dataset
from pipelines.features import admit, iter_features
from pipelines.stream_job import StreamSpec, run_file_job, run_wire_job
from pipelines.testing import linear_scorer

pytestmark = pytest.mark.flink

BOUND_MS = 30 * 60_000  # out-of-orderness bound
LATENESS_MS = 10 * 60_000  # allowed lateness
MALFORMED = [  # (the field its reject names, the record)
    ("ts_ms", "af1,tx-bad1,12x,5,010,A,011,B,100,Euro,100,Euro,117,117,ACH,0"),
    # beyond year 9999: no event time at all (a NULL rowtime once failed the whole job)
    ("ts_ms", "af1,tx-bad4,999999999999999999,7,010,A,011,B,100,Euro,100,Euro,117,117,ACH,0"),
    ("paid_currency", "af1,tx-bad2,1661991600000,6,010,A,011,B,100,Doubloon,100,Euro,117,117,ACH,0"),
    ("value", "2022/09/01 00:20,010,8000EBD30,010,8000EBD30,3697.34,US Dollar,3697.34,US Dollar,Reinvestment,0"),
]


def arrival_order(events: list[TransactionEvent], rng: random.Random) -> list[TransactionEvent]:
    """Out of order within the bound, a few far behind it (late), a few sent twice."""
    out = list(events)
    for i in range(0, len(out) - 3, 7):  # local swaps: at most a few minutes out of order
        j = i + rng.randrange(1, 4)
        out[i], out[j] = out[j], out[i]
    late = rng.sample(range(len(out) // 2), 12)
    moved = [out[i] for i in sorted(late)]
    for i in sorted(late, reverse=True):
        del out[i]
    for ev in moved:  # re-inserted far later in the stream
        out.insert(min(len(out), out.index(ev) if ev in out else len(out) // 2 + rng.randrange(len(out) // 2)), ev)
    again = rng.sample(range(len(out)), 15)
    for i in sorted(again, reverse=True):  # the same record again, soon or much later
        out.insert(min(len(out), i + rng.choice([1, 5, 400])), out[i])
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream")
    ds = generate(accounts=200, days=9, laundering_rate=0.01, seed=5)  # past the 7-day window and reset
    csv_path, _ = write_dataset(ds, root, name="world")
    events = [e for e in read_transactions(csv_path) if isinstance(e, TransactionEvent)]
    arrivals = arrival_order(events, random.Random(11))
    wire = root / "arrivals.af1"
    lines = [e.to_wire() for e in arrivals]
    for k, (_, bad) in enumerate(MALFORMED):
        lines.insert(100 + 500 * k, bad)
    wire.write_text("\n".join(lines) + "\n")
    spec = StreamSpec(scorer_factory=linear_scorer(threshold=0.0), out_of_orderness_ms=BOUND_MS,
                      allowed_lateness_ms=LATENESS_MS)
    out = run_wire_job(wire, spec)
    return {"csv": csv_path, "arrivals": arrivals, "out": out, "lines": len(lines), "wire": wire}


def test_counts_balance(world):
    out = world["out"]
    assert out.records_in == world["lines"]
    assert out.records_in == out.processed + len(out.rejects) + len(out.late) + len(out.duplicates)


def test_split_matches_the_reference(world):
    out, expected = world["out"], admit(world["arrivals"], BOUND_MS, LATENESS_MS)
    assert expected.late and expected.duplicates  # the input does exercise both
    assert sorted(e.event_id for e in out.duplicates) == sorted(e.event_id for e in expected.duplicates)
    assert sorted(r.raw.split(",")[1] for r in out.late) == sorted(e.event_id for e in expected.late)
    assert out.processed == len(expected.processed)
    assert {r.stage for r in out.late} == {"late"}


def test_features_equal_the_reference_bit_for_bit(world):
    expected = admit(world["arrivals"], BOUND_MS, LATENESS_MS)
    reference = {ev.event_id: feats for ev, feats in iter_features(expected.processed)}
    got = {a["event"]["event_id"]: a["features"] for a in world["out"].alerts}
    assert set(got) == set(reference)
    mismatched = []
    for eid, feats in got.items():
        assert [n for n, _ in feats] == list(FEATURE_NAMES)
        want = reference[eid]
        bad = [(n, v, want[n]) for n, v in feats if v != want[n]]  # exact, not approximate
        if bad:
            mismatched.append((eid, bad[:3]))
    assert not mismatched, f"{len(mismatched)} events differ, e.g. {mismatched[:3]}"


def test_features_are_the_same_with_a_checkpoint_every_50_ms(world, tmp_path):
    """Checkpoints taken all through the run: the heap state backend then copies each account's
    state with its serializer (AccountStateSerializer) when it is written during a snapshot; a
    copy that shared a mutable part with the original would change later features. (A finished
    job deletes its checkpoints: a thread notes them while it runs.)"""
    import threading
    import time

    chk = tmp_path / "chk"
    spec = StreamSpec(scorer_factory=linear_scorer(threshold=0.0), out_of_orderness_ms=BOUND_MS,
                      allowed_lateness_ms=LATENESS_MS,
                      flink_conf={"execution.checkpointing.interval": "50 ms",
                                  "execution.checkpointing.min-pause": "0 ms",
                                  "execution.checkpointing.dir": chk.as_uri()})
    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(p.name for p in chk.glob("*/chk-*"))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out = run_wire_job(world["wire"], spec)
    finally:
        done.set()
        watcher.join()
    assert len(seen) >= 3, seen  # checkpoints were taken during the run
    expected = admit(world["arrivals"], BOUND_MS, LATENESS_MS)
    reference = {ev.event_id: feats for ev, feats in iter_features(expected.processed)}
    got = {a["event"]["event_id"]: dict(a["features"]) for a in out.alerts}
    assert set(got) == set(reference)
    assert [eid for eid, feats in got.items() if feats != reference[eid]] == []


def test_malformed_records_are_rejected_with_field_and_reason(world):
    rejects = world["out"].rejects
    assert sorted((r.field, r.raw) for r in rejects) == sorted(MALFORMED)
    for r in rejects:
        assert r.reason and r.stage == "decode"


def test_csv_file_run_counts_and_alerts(tmp_path):
    ds = generate(accounts=120, days=2, laundering_rate=0.01, seed=3)
    csv_path, _ = write_dataset(ds, tmp_path, name="small")
    lines = Path(csv_path).read_text().splitlines()
    lines.insert(40, "2022/09/01 00:20,010,8000EBD30,010,8000EBD30,12.3.4,US Dollar,1,US Dollar,ACH,0")
    Path(csv_path).write_text("\n".join(lines) + "\n")
    out = run_file_job(csv_path, StreamSpec(scorer_factory=linear_scorer(threshold=0.5)))
    good = [e for e in read_transactions(csv_path) if isinstance(e, TransactionEvent)]
    assert [(r.offset, r.field) for r in out.rejects] == [(41, "Amount Received")]
    assert out.records_in == len(lines) - 1 == out.processed + len(out.rejects) + len(out.late) + len(out.duplicates)
    reference = dict((ev.event_id, f) for ev, f in iter_features(good))
    expected = {eid for eid, f in reference.items() if f["amount_usd"] / 20_000.0 >= 0.5}
    assert expected and {a["event"]["event_id"] for a in out.alerts} == expected


def test_a_warm_up_history_fills_the_windows_and_nothing_of_it_is_scored_or_written(tmp_path):
    """``warmup``: the history's last seven days go through the accounts' windows first, so the live
    events' features are those of the plain-Python reference run over that week and the live file
    together, bit for bit; the warm-up events themselves are counted apart, never scored, alerted
    or written to the graph, and the live file's counts balance on their own."""
    from datetime import timedelta

    from ingest.synthetic import generate_phases

    history, live = generate_phases(150, [(9, 0.01), (1, 0.01)], seed=23)
    h_csv, _ = write_dataset(history, tmp_path, name="history")
    l_csv, _ = write_dataset(live, tmp_path, name="live")
    graph = tmp_path / "graph.jsonl"
    spec = StreamSpec(scorer_factory=linear_scorer(threshold=0.0), graph_url=f"embedded:{graph}")
    before = time.time() * 1000
    out = run_file_job(l_csv, spec, warmup=h_csv)
    after = time.time() * 1000
    # each alert carries its record's arrival at the job: while the job ran, by the wall clock
    assert all(before <= a["arrived_ms"] <= after for a in out.alerts)

    start = min(e.timestamp for e in live.events)
    week = [e for e in history.events if start - timedelta(days=7) <= e.timestamp < start]
    assert len(week) < len(history.events)  # the history's first days are not needed, nor sent
    assert out.warmup == len(week)
    assert out.records_in == len(live.events) == out.processed and not (out.rejects or out.late or out.duplicates)
    reference = {ev.event_id: f for ev, f in iter_features([*week, *live.events]) if ev.timestamp >= start}
    got = {a["event"]["event_id"]: dict(a["features"]) for a in out.alerts}  # threshold 0: every scored event
    assert set(got) == {e.event_id for e in live.events} == set(reference)
    differ = [eid for eid, f in got.items() if any(f[n] != reference[eid][n] for n in FEATURE_NAMES)]
    assert not differ, f"{len(differ)} live events differ from the warm reference, e.g. {differ[:3]}"
    cold = {ev.event_id: f for ev, f in iter_features(live.events)}
    assert sum(got[e]["snd_n_life"] != cold[e]["snd_n_life"] for e in got) > len(got) // 2  # the warm-up mattered
    written = [json.loads(line)["event_id"] for line in graph.read_text().splitlines()]
    assert sorted(written) == sorted(e.event_id for e in live.events)  # each live event once, no history
