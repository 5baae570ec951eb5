"""The stream job on the real servers: Kafka in, Kafka and Neo4j out, locally and on the
Flink session cluster. No mocks: ``make test`` starts Kafka, Neo4j and Flink via deploy/.

One module fixture trains a small cascade and generates a small live set; the file (embedded)
run is the reference the generated set's Kafka runs are compared with. Independently of any run
of the pipeline, a hand-written set of transfers goes through Kafka with a model that alerts on
every event, and the features each alert carries are checked against counts and sums computed
here from the rows themselves (``test_hand_computed_features_through_kafka``).

Needs Kafka and Neo4j (and the Flink session cluster for the submit test): see ``services`` in
tests/conftest.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import uuid
from datetime import datetime

import pytest

from auditflow_app import flow
from auditflow.records import MAX_RAW_BYTES, PAYMENT_FORMATS, RejectedRecord, TransactionEvent
from auditflow_app.settings import Settings
from evidence_graph import trace_evidence
from ingest.kafka_io import consume_all, delete_topics, ensure_topics, produce_file, produce_raw
from ingest.synthetic import generate, write_dataset
from pipelines.flink_client import cluster_job_id

pytestmark = pytest.mark.services("kafka", "neo4j")

#: Records the job must dead-letter; the last two once failed it: bytes that are not UTF-8 (kept
#: as base64 now) and a 700 KB record whose dead letter was 1.4 MB of JSON, beyond Kafka's 1 MiB.
MALFORMED = [b"{not json", b'{"schema":"auditflow.transaction/1"}', b"", "caf\u00e9,1,2".encode(),
             b"af1,\xff\xfe,1", b'"' * 700_000]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("kafka")
    base = Settings(out_dir=root, seed=5)
    hist_csv, _ = write_dataset(generate(accounts=300, days=4, laundering_rate=0.02, seed=5), root, name="history")
    flow.train(hist_csv, root / "model", base)
    # drift against the history's last two days, in 6-hour windows: in the file run and through Kafka
    base = base.model_copy(update={"drift_window_minutes": 360})  # the reference's dispersion is on these
    ref = flow.build_reference(hist_csv, root / "model", base, datetime(2022, 9, 3), datetime(2022, 9, 5))
    base = base.model_copy(update={"drift_reference": ref.path})
    live = generate(accounts=200, days=2, laundering_rate=0.002, seed=6)
    live_csv, _ = write_dataset(live, root, name="live")
    embedded = base.model_copy(update={"graph_url": f"embedded:{root / 'graph.jsonl'}"})
    reference = flow.run_stream(live_csv, root / "model", embedded)
    suffix = uuid.uuid4().hex[:8]
    kafka = base.model_copy(update={
        "topic_transactions": f"t-tx-{suffix}", "topic_alerts": f"t-alerts-{suffix}",
        "topic_dlq": f"t-dlq-{suffix}", "graph_url": base.neo4j_uri, "graph_namespace": f"t{suffix}",
        "topic_drift_scores": f"t-drift-{suffix}", "topic_drift_alerts": f"t-drift-alerts-{suffix}",
    })
    topics = (kafka.topic_transactions, kafka.topic_alerts, kafka.topic_dlq, kafka.topic_drift_scores,
              kafka.topic_drift_alerts)
    ensure_topics(kafka.kafka_bootstrap, {t: 3 for t in topics})
    produced = produce_file(live_csv, flow.producer_options(kafka))
    bad_offsets = produce_raw(kafka.kafka_bootstrap, kafka.topic_transactions, MALFORMED)
    yield {"root": root, "live": live, "live_csv": live_csv, "reference": reference, "embedded": embedded,
           "kafka": kafka, "produced": produced, "bad_offsets": bad_offsets, "suffix": suffix}
    delete_topics(kafka.kafka_bootstrap, topics)
    with flow.open_graph(kafka) as store:
        store.drop()


@pytest.fixture(scope="module")
def local_run(world):
    k = world["kafka"]
    res = flow.run_kafka_job(k, world["root"] / "model", bounded=True, group_id=f"g1-{world['suffix']}")
    alerts = consume_all(k.kafka_bootstrap, k.topic_alerts, timeout_s=120)
    dead = consume_all(k.kafka_bootstrap, k.topic_dlq, timeout_s=60)
    drift = consume_all(k.kafka_bootstrap, k.topic_drift_scores, timeout_s=60)
    drift_alerts = consume_all(k.kafka_bootstrap, k.topic_drift_alerts, timeout_s=30)
    with flow.open_graph(k) as store:
        counts = (store.node_count(), store.edge_count())
    return {"alerts": alerts, "dead": dead, "counts": counts, "result": res, "drift": drift,
            "drift_alerts": drift_alerts}


def test_drift_records_through_kafka_are_the_file_runs(world, local_run):
    """The same events through Kafka (three partitions, interleaved, dead letters among them)
    give the file run's drift records and drift alerts, byte for byte once ordered by key."""
    from pipelines.stream_job import drift_record_order

    file_records = world["reference"].drift_records
    assert len(file_records) > 500 and {r["window_end"] - r["window_start"] for r in file_records} == {360 * 60_000}
    kafka_records = sorted((json.loads(m.value) for m in local_run["drift"]), key=drift_record_order)
    assert kafka_records == file_records
    file_alerts = sorted(a["alert_id"] for a in world["reference"].drift_alerts)
    assert sorted(json.loads(m.value)["alert_id"] for m in local_run["drift_alerts"]) == file_alerts


def _alert_scores(messages) -> dict[str, float]:
    out = {}
    for m in messages:
        a = json.loads(m)
        out[a["event"]["event_id"]] = a["score"]
    return out


def test_planted_laundering_alerts_through_kafka(world, local_run):
    alerted = _alert_scores(r.value for r in local_run["alerts"])
    laundering = {e.event_id for e in world["live"].events if e.is_laundering}
    assert laundering & set(alerted), "no planted laundering transfer among the Kafka alerts"
    # The same events and the same scores as the embedded file run (event-time ordered features).
    reference = {ev.event_id for ev, _ in world["reference"].candidates}
    assert set(alerted) == reference


def test_dead_letters_carry_offsets_and_counts_balance(world, local_run):
    k = world["kafka"]
    dead = [json.loads(r.value) for r in local_run["dead"]]
    by_offset = {(d["partition"], d["offset"]): d for d in dead}
    for (partition, offset), raw in zip(world["bad_offsets"], MALFORMED):
        d = by_offset[(partition, offset)]
        assert d["topic"] == k.topic_transactions and d["stage"] == "decode"
        assert (d["raw_length"], d["raw_sha256"]) == (len(raw), hashlib.sha256(raw).hexdigest())
        assert RejectedRecord.from_dict(d).raw_bytes() == raw[:MAX_RAW_BYTES] and d["field"] == "value"
        assert d["raw_encoding"] == ("base64" if b"\xff" in raw else "utf-8")
        assert d["reason"]
    nodes, edges = local_run["counts"]
    res = local_run["result"]
    records_in = world["produced"].produced + len(MALFORMED)
    # in = processed + rejected + late + duplicate, each counted by the job itself
    assert records_in == res.processed + len(dead) + res.duplicate
    assert res.processed == edges == len(world["live"].events) and res.duplicate == 0


def test_replay_from_the_beginning_changes_no_graph_counts(world, local_run):
    k = world["kafka"]
    flow.run_kafka_job(k, world["root"] / "model", bounded=True, group_id=f"g2-{world['suffix']}")
    with flow.open_graph(k) as store:
        assert (store.node_count(), store.edge_count()) == local_run["counts"]


def test_neo4j_and_embedded_traces_are_identical(world, local_run):
    roots = sorted({ev.sender.node_id for ev, _ in world["reference"].candidates})[:15]
    assert roots
    with flow.open_graph(world["kafka"]) as neo, flow.open_graph(world["embedded"]) as emb:
        for root in roots:
            a = trace_evidence(neo, root, max_hops=5, direction="out", fanout_cap=20)
            b = trace_evidence(emb, root, max_hops=5, direction="out", fanout_cap=20)
            assert (a.trace_id, a.nodes, a.edges) == (b.trace_id, b.nodes, b.edges)


@pytest.mark.services("flink")
def test_job_submitted_to_the_session_cluster_matches_the_local_run(world, local_run):
    k = world["kafka"].model_copy(update={"topic_alerts": f"t-alerts2-{world['suffix']}"})
    ensure_topics(k.kafka_bootstrap, {k.topic_alerts: 3})
    try:
        flow.submit_kafka_job(k, world["root"] / "model", bounded=True, group_id=f"g3-{world['suffix']}")
        alerts = consume_all(k.kafka_bootstrap, k.topic_alerts, timeout_s=120)
    finally:
        delete_topics(k.kafka_bootstrap, [k.topic_alerts])
    assert _alert_scores(r.value for r in alerts) == _alert_scores(r.value for r in local_run["alerts"])


@pytest.mark.services("flink")
def test_an_unbounded_job_scores_each_window_once_the_watermark_passed_it(world):
    """A job that never reaches the end of its input (on the session cluster) scores drift as it
    goes: every window the watermark has passed is in the drift topic while the job still runs,
    each the file run's records exactly. (A table made from a DataStream drops the watermarks
    unless its schema keeps them: the pane counter then closed no pane before the end of the
    input, so an unbounded job scored none at all.)"""
    from pipelines.stream_job import drift_record_order
    from tests.support.recovery_drill import cancel_cluster_job

    suffix = world["suffix"]
    k = world["kafka"].model_copy(update={
        "topic_alerts": f"u-alerts-{suffix}", "topic_dlq": f"u-dlq-{suffix}", "topic_drift_scores": f"u-drift-{suffix}",
        "topic_drift_alerts": f"u-drift-alerts-{suffix}", "graph_url": "memory:", "checkpoint_interval_ms": 500})
    outputs = (k.topic_alerts, k.topic_dlq, k.topic_drift_scores, k.topic_drift_alerts)
    ensure_topics(k.kafka_bootstrap, {t: 1 for t in outputs})
    # The watermark trails each partition's latest event time by the out-of-orderness bound; a
    # window is closed once the watermark passes its last millisecond plus the allowed lateness.
    latest: dict[int, int] = {}
    for r in consume_all(k.kafka_bootstrap, k.topic_transactions, timeout_s=60):
        try:
            ts = int(TransactionEvent.from_wire(r.value.decode()).timestamp.timestamp() * 1000)
        except (ValueError, UnicodeDecodeError):
            continue  # the dead letters: they cannot move the watermark
        latest[r.partition] = max(latest.get(r.partition, ts), ts)
    cut = min(latest.values()) - k.out_of_orderness_ms - k.allowed_lateness_ms - 60_000
    file_windows: dict[int, list[dict]] = {}
    for r in world["reference"].drift_records:
        file_windows.setdefault(r["window_start"], []).append(r)
    settled = {w for w, recs in file_windows.items() if recs[0]["window_end"] - 1 <= cut}
    assert len(settled) >= 3

    job_id = None
    try:
        proc = flow.submit_kafka_job(k, world["root"] / "model", bounded=False, detached=True,
                                     group_id=f"u-{suffix}", job_name=f"unbounded-{suffix}")
        job_id = cluster_job_id(proc.stdout + proc.stderr)
        deadline = time.monotonic() + 300
        while True:
            got: dict[int, list[dict]] = {}
            for m in consume_all(k.kafka_bootstrap, k.topic_drift_scores, timeout_s=30):
                d = json.loads(m.value)
                got.setdefault(d["window_start"], []).append(d)
            if settled <= set(got) or time.monotonic() > deadline:
                break
            time.sleep(2)
        # still running: the windows came from a job that had not reached an end of its input
        assert cancel_cluster_job(k.flink_rest, job_id) == "CANCELED"
        job_id = None
    finally:
        if job_id is not None:
            cancel_cluster_job(k.flink_rest, job_id)
        delete_topics(k.kafka_bootstrap, outputs)
    assert settled <= set(got), f"windows {sorted(settled - set(got))} never scored while the job ran"
    for w, recs in got.items():  # complete windows only, each exactly once
        assert sorted(recs, key=drift_record_order) == file_windows[w]


def test_alert_messages_carry_exact_events(world, local_run):
    events = {e.event_id: e for e in world["live"].events}
    for r in local_run["alerts"][:50]:
        a = json.loads(r.value)
        assert TransactionEvent.from_dict(a["event"]).amount_paid == events[a["event"]["event_id"]].amount_paid


# ---------------------------------------------------------------------------- hand-computed

WINDOW = 1440  # minutes: the 24 h feature window (a leg exactly 24 h old has left it)
HOUR = 60
LONG = 10080  # the 7 d window: gap_min's cap (all of HAND is within it)
A, B, C, D = "010/800000A01", "010/800000B02", "020/800000C03", "020/800000D04"
#: (line, time, sender, receiver, US dollars paid and received, payment format)
HAND = [
    (2, "2022/09/01 00:10", A, B, "100.00", "ACH"),
    (3, "2022/09/01 00:30", A, C, "250.50", "Wire"),
    (4, "2022/09/01 00:50", A, B, "300.00", "Wire"),
    (5, "2022/09/01 02:00", B, C, "120.00", "ACH"),
    (6, "2022/09/01 03:15", C, A, "70.25", "Cheque"),
    (7, "2022/09/02 01:00", A, D, "1000.00", "Wire"),  # A's three payments are now over 24 h old
    (8, "2022/09/02 01:20", D, A, "999.99", "ACH"),
]


def _minute(text: str) -> int:
    return int((datetime.strptime(text, "%Y/%m/%d %H:%M") - datetime(1970, 1, 1)).total_seconds() // 60)


def _cents(dollars: str) -> int:
    whole, frac = dollars.split(".")
    return int(whole) * 100 + int(frac)


def expected_features(line: int) -> dict[str, float]:
    """Brute force over HAND, written from the feature descriptions: each account's legs up to
    and including this transfer, filtered by time, counted and summed."""
    row = {r[0]: r for r in HAND}[line]
    _, when, snd, rcv, dollars, fmt = row
    now = _minute(when)
    legs = []  # (line, minute, account, is_out, counterparty, cents), every transfer so far
    for ln, t, s, r, d, _ in HAND:
        if (_minute(t), ln) <= (now, line):
            legs += [(ln, _minute(t), s, True, r, _cents(d)), (ln, _minute(t), r, False, s, _cents(d))]

    def side(account: str, is_out: bool, cp: str) -> dict[str, float]:
        mine = [g for g in legs if g[2] == account]
        live = [g for g in mine if g[1] > now - WINDOW]
        outs, ins = [g for g in live if g[3]], [g for g in live if not g[3]]
        before = [g for g in mine if g[0] != line]
        hour = [g for g in mine if g[1] > now - HOUR]
        return {
            "out_n_24h": len(outs), "in_n_24h": len(ins),
            "out_usd_24h": float(sum(g[5] for g in outs)) / 100.0, "in_usd_24h": float(sum(g[5] for g in ins)) / 100.0,
            "out_cp_24h": len({g[4] for g in outs}), "in_cp_24h": len({g[4] for g in ins}),
            "out_n_1h": sum(g[3] for g in hour), "in_n_1h": sum(not g[3] for g in hour),
            "gap_min": min(LONG, now - max(g[1] for g in before)) if before else LONG,
            "cp_legs_24h": sum(g[3] == is_out and g[4] == cp for g in live),
            "cp_new": float(all(g[4] != cp for g in before)),  # within 7 days: all of HAND is
            "n_life": len(mine),
            "age_min": now - min(g[1] for g in mine),
        }

    cents = _cents(dollars)
    out = {"amount_usd": float(cents) / 100.0, "cross_currency": 0.0, "self_transfer": 0.0,
           "format": float(PAYMENT_FORMATS.index(fmt)), "hour": float(int(when[11:13])),
           "round_amount": float(cents % 10_000 == 0)}
    out |= {f"snd_{k}": float(v) for k, v in side(snd, True, rcv).items()}
    out |= {f"rcv_{k}": float(v) for k, v in side(rcv, False, snd).items()}
    return out


def test_the_hand_computed_expectation_itself():
    """Spot values worked out on paper, so the brute force above is checked too."""
    f = expected_features(4)  # A's third payment, B's second receipt from A
    assert (f["snd_out_n_24h"], f["snd_out_cp_24h"], f["snd_out_n_1h"], f["snd_cp_legs_24h"], f["snd_cp_new"]) == (
        3, 2, 3, 2, 0)
    assert f["snd_out_usd_24h"] == 650.50 and f["rcv_in_usd_24h"] == 400.00
    assert (f["round_amount"], f["hour"], f["snd_gap_min"], f["rcv_gap_min"]) == (1, 0, 20, 40)
    f = expected_features(7)  # a day later: only C's 70.25 into A (03:15) is still in A's window
    assert (f["snd_out_n_24h"], f["snd_in_n_24h"], f["snd_n_life"], f["snd_gap_min"], f["snd_age_min"]) == (
        1, 1, 5, 1305, 1490)
    assert f["snd_in_usd_24h"] == 70.25 and f["rcv_n_life"] == 1 and f["rcv_cp_new"] == 1
    f = expected_features(8)
    assert f["rcv_in_usd_24h"] == 1070.24 and (f["rcv_in_cp_24h"], f["rcv_out_n_1h"], f["rcv_in_n_1h"]) == (2, 1, 1)
    assert f["snd_cp_new"] == 0  # D was paid by A: dealt with before, the other way


@pytest.fixture(scope="module")
def hand_run(world, tmp_path_factory):
    """HAND as a CSV through Kafka and the job, with a copy of the model whose candidate
    threshold is 0: every event alerts, so every event's feature vector comes back."""
    from evidence_graph import open_store
    from model_service import Cascade

    root = tmp_path_factory.mktemp("hand")
    model = dataclasses.replace(Cascade.load(world["root"] / "model"), candidate_threshold=0.0)
    model.save(root / "model")
    csv = root / "hand_Trans.csv"
    lines = ["Timestamp,From Bank,Account,To Bank,Account,Amount Received,Receiving Currency,Amount Paid,"
             "Payment Currency,Payment Format,Is Laundering"]
    for _, when, snd, rcv, dollars, fmt in HAND:
        (sb, sa), (rb, ra) = snd.split("/"), rcv.split("/")
        lines.append(f"{when},{sb},{sa},{rb},{ra},{dollars},US Dollar,{dollars},US Dollar,{fmt},0")
    csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    suffix = "h" + uuid.uuid4().hex[:8]
    k = world["kafka"].model_copy(update={
        "topic_transactions": f"t-tx-{suffix}", "topic_alerts": f"t-alerts-{suffix}",
        "topic_dlq": f"t-dlq-{suffix}", "graph_namespace": f"t{suffix}",
    })
    topics = (k.topic_transactions, k.topic_alerts, k.topic_dlq)
    ensure_topics(k.kafka_bootstrap, {t: 3 for t in topics})
    try:
        produced = produce_file(csv, flow.producer_options(k))
        flow.run_kafka_job(k, root / "model", bounded=True, group_id=f"g-{suffix}")
        alerts = [json.loads(r.value) for r in consume_all(k.kafka_bootstrap, k.topic_alerts, timeout_s=120,
                                                           expect=len(HAND))]
        dead = consume_all(k.kafka_bootstrap, k.topic_dlq, timeout_s=20, quiet_s=1)
        with open_store(k.effective_graph_url, **k.graph_options) as store:
            edges = {n: store.out_edges(n) for n in (A, B, C, D)}
            counts = (store.node_count(), store.edge_count())
        yield {"produced": produced, "alerts": alerts, "dead": dead, "edges": edges, "counts": counts}
    finally:
        delete_topics(k.kafka_bootstrap, topics)
        with open_store(k.effective_graph_url, **k.graph_options) as store:
            store.drop()


def test_hand_computed_features_through_kafka(hand_run):
    assert hand_run["produced"].produced == len(HAND) and hand_run["dead"] == []
    by_line = {a["event"]["source_offset"]: a for a in hand_run["alerts"]}
    assert sorted(by_line) == [r[0] for r in HAND] and len(hand_run["alerts"]) == len(HAND)
    for line, when, snd, rcv, dollars, _ in HAND:
        alert = by_line[line]
        ev = TransactionEvent.from_dict(alert["event"])
        assert (ev.sender.node_id, ev.receiver.node_id, ev.amount_paid.units) == (snd, rcv, _cents(dollars))
        got = dict(alert["features"])
        want = expected_features(line)
        assert {n: got[n] for n in want} == pytest.approx(want, rel=1e-12, abs=1e-12), f"line {line}"


def test_hand_rows_land_in_neo4j_exactly(hand_run):
    assert hand_run["counts"] == (4, len(HAND))
    for account in (A, B, C, D):
        want = sorted((datetime.strptime(r[1], "%Y/%m/%d %H:%M"), r[3], _cents(r[4]), r[5]) for r in HAND if r[2] == account)
        got = sorted((e.timestamp, e.dst, e.amount_paid.units, e.payment_format) for e in hand_run["edges"][account])
        assert got == want, account
