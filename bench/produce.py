"""`auditflow produce` throughput, and what parsing costs, in one run.

    python bench/produce.py            # ~300k rows
    python bench/produce.py --quick    # ~100k rows (well under a minute)
    python bench/produce.py --tuning   # also confluent-kafka with each compression codec / linger

Needs Kafka from ``deploy/services up kafka`` at $AUDITFLOW_KAFKA_BOOTSTRAP (default
127.0.0.1:9092). Every topic is private (``prodbench-<uuid>-...``, 3 partitions) and deleted at
the end.

One seeded CSV (``ingest.synthetic.generate`` + ``write_dataset``) with ``--bad`` malformed rows
spliced in at evenly spaced lines, then, in this order:

* **parse**: :func:`ingest.amlworld.read_transactions` alone (the codec: split, validation,
  ``TransactionEvent`` objects) -> ``parse_events_per_s``.
* **reference encode**: ``read_transactions`` + ``to_wire().encode()`` (the af1 wire form the
  stream job decodes) + key: what each row costs the producer through the codec (its CPU work
  without any client) -> ``reference_encode_events_per_s``.
* **encode**: :func:`ingest.kafka_io.wire_records`, the producer's fast path (same validation,
  byte-identical key and value, no objects) -> ``encode_events_per_s``. Checked here: its output
  equals the reference encoding, item by item, and a sample of its values decodes back
  (``TransactionEvent.from_wire``) to the events read.
* **produce** (confluent-kafka, the producer's client): :func:`ingest.kafka_io.produce_file` as
  ``auditflow produce`` runs it, ``--repeat`` times into fresh topics; the headline is the
  median -> ``produce_events_per_s``. ``produce_ref_encode_events_per_s``: the same with the fast
  path switched off (every row through parse_line + to_wire), to show what each change brings.
* **no transactions**: the same with ``resume=False`` (idempotent, not transactional: no
  resume after a crash) -> ``no_transactions_events_per_s``, the cost of the transactions of
  :data:`~ingest.kafka_io.RESUME_CHUNK_ROWS` rows and their progress records.

Rates are events produced (acknowledged, ``acks=all``) / ``ProduceSummary.elapsed_s`` (producer
start, connection and idempotence handshake included, to the last acknowledgement). CPU per row
is this process's user+system time (librdkafka's threads included; the broker not). After each
produce run: ``read == produced + dead_lettered`` (produce_file raises otherwise) and a
read_committed reader finds exactly the events (each value once) and dead letters sent (no
duplicates, nothing lost).

The last line is the headline: ``produce produce_events_per_s=... parse_events_per_s=... ...``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PARTITIONS = 3
BAD_ROWS = [
    "2022/09/01 01:00,010,8000EBD30,012,80011F990,12.3.4,Euro,12.3.4,Euro,ACH,0",
    "2022/09/01 01:01,010,8000EBD30,012,80011F990,10.00,Dogecoin,10.00,Euro,ACH,0",
    "2022/13/01 01:03,010,8000EBD30,012,80011F990,10.00,Euro,10.00,Euro,ACH,0",
    "not,a,transaction",
    "",
    "2022/09/01 01:05,010,8000EBD30,012,80011F990,10.00,Euro,10.00,Euro,Teleport,0",
]


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def make_csv(out_dir: Path, rows: int, bad: int, seed: int) -> tuple[Path, int, int]:
    """Generated rows (about ``rows``) with ``bad`` malformed ones spliced in; (path, good, bad)."""
    from ingest.synthetic import generate, write_dataset

    accounts = 2000 if rows <= 150_000 else 5000
    days = max(1, round(rows / (accounts * 4.5)))
    ds = generate(accounts=accounts, days=days, seed=seed)
    path, _ = write_dataset(ds, out_dir, name="prodbench")
    lines = path.read_text(encoding="utf-8").splitlines()
    header, body = lines[0], lines[1:]
    step = max(1, len(body) // (bad + 1))
    for i in range(bad, 0, -1):  # from the end, so earlier positions stay put
        body.insert(i * step, BAD_ROWS[i % len(BAD_ROWS)])
    path.write_text("\n".join([header, *body]) + "\n", encoding="utf-8")
    return path, len(ds.events), bad


def timed(fn):
    c0, t0 = cpu_s(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, cpu_s() - c0


def committed(bootstrap: str, topic: str) -> tuple[int, int]:
    """(records, distinct values) a read_committed reader finds on ``topic``: transaction markers
    take offsets too, so end offsets no longer count records once production is transactional."""
    from ingest.kafka_io import consume_all

    recs = consume_all(bootstrap, topic, timeout_s=120, quiet_s=0.0)
    return len(recs), len({r.value for r in recs})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="~100k rows")
    ap.add_argument("--rows", type=int, help="about this many generated rows (default 300k; quick 100k)")
    ap.add_argument("--bad", type=int, default=30, help="malformed rows spliced in")
    ap.add_argument("--repeat", type=int, default=3, help="confluent-kafka produce runs (median reported)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tuning", action="store_true", help="also compression none/gzip/lz4/zstd and linger 5/50 ms")
    args = ap.parse_args()

    from auditflow.records import TransactionEvent
    from auditflow_app.settings import Settings
    from ingest import kafka_io
    from ingest.amlworld import parse_line, read_transactions

    base = Settings()
    bootstrap = base.kafka_bootstrap
    rows = args.rows or (100_000 if args.quick else 300_000)
    run = uuid.uuid4().hex[:10]
    made: list[str] = []
    results: dict[str, dict] = {}

    with tempfile.TemporaryDirectory(prefix="prodbench-") as tmp:
        (path, good, bad), gen_s, _ = timed(lambda: make_csv(Path(tmp), rows, args.bad, args.seed))
        total = good + bad
        print(f"data: {path.name}: {good:,} events + {bad} malformed rows = {total:,} rows "
              f"({path.stat().st_size / 2**20:.1f} MiB, generated in {gen_s:.1f} s)", flush=True)

        # ---- CPU-only: parse, reference encoding, fast encoding
        n, dt, cpu = timed(lambda: sum(1 for _ in read_transactions(path)))
        results["parse"] = {"rate": n / dt, "cpu_us": cpu / n * 1e6}

        def ref_encode():
            out = []
            for item in read_transactions(path):
                if type(item) is TransactionEvent:
                    out.append((item.sender.node_id.encode(), item.to_wire().encode()))
                else:
                    out.append(item)
            return out

        ref, dt, cpu = timed(ref_encode)
        results["reference encode"] = {"rate": len(ref) / dt, "cpu_us": cpu / len(ref) * 1e6}
        fast, dt, cpu = timed(lambda: list(kafka_io.wire_records(path)))
        results["encode"] = {"rate": len(fast) / dt, "cpu_us": cpu / len(fast) * 1e6}
        same = fast == ref
        del ref
        if not same:
            print("ERROR: wire_records differs from read_transactions + to_wire", file=sys.stderr)
            return 1
        lines = path.read_text(encoding="utf-8").splitlines()  # item i is data line i + 2
        for i in range(0, len(fast), 997):
            if type(fast[i]) is tuple:
                ev = parse_line(lines[i + 1], i + 2, str(path))
                if TransactionEvent.from_wire(fast[i][1].decode()) != ev:
                    print(f"ERROR: line {i + 2}: the wire value does not decode to its event", file=sys.stderr)
                    return 1
        del fast, lines

        # ---- produce
        def produce(label: str, overrides: dict | None = None, fast_wire: bool = True, **kw) -> dict:
            i = len(made) // 2
            options = kafka_io.ProducerOptions(bootstrap, f"prodbench-{run}-{i}", f"prodbench-{run}-{i}.dlq", PARTITIONS)
            made.extend([options.topic, options.dlq_topic])
            kafka_io.ensure_topics(bootstrap, {options.topic: PARTITIONS, options.dlq_topic: PARTITIONS})
            saved = kafka_io._FAST_WIRE
            kafka_io._FAST_WIRE = fast_wire
            try:
                s, _, cpu = timed(lambda: kafka_io.produce_file(
                    path, options, producer_overrides=overrides, create_topics=False, **kw))
            finally:
                kafka_io._FAST_WIRE = saved
            assert (s.read, s.produced, s.dead_lettered) == (total, good, bad), s.render()
            (n_ev, d_ev), (n_dl, _) = committed(bootstrap, s.topic), committed(bootstrap, s.dlq_topic)
            ends = (n_ev, n_dl)
            assert (n_ev, d_ev, n_dl) == (good, good, bad), f"{label}: committed {ends} ({d_ev} distinct), expected {(good, bad)}"
            r = {"rate": s.events_per_s, "cpu_us": cpu / total * 1e6, "elapsed_s": s.elapsed_s}
            print(f"  {label:<34} {s.events_per_s:>10,.0f} events/s  {r['cpu_us']:5.1f} us CPU/row  "
                  f"({s.elapsed_s:.2f} s; committed {ends[0]:,} + {ends[1]})", flush=True)
            return r

        try:
            print("produce runs:", flush=True)
            runs = [produce(f"confluent-kafka #{k + 1}") for k in range(max(1, args.repeat))]
            med = statistics.median(r["rate"] for r in runs)
            results["produce (confluent-kafka)"] = {
                "rate": med, "cpu_us": statistics.median(r["cpu_us"] for r in runs),
            }
            results["produce, no transactions"] = produce("confluent-kafka, resume=False", resume=False)
            results["produce, reference encoding"] = produce("confluent-kafka, reference encoding", fast_wire=False)
            if args.tuning:
                for label, ov in [
                    ("confluent-kafka compression=none", {"compression.type": "none"}),
                    ("confluent-kafka compression=gzip", {"compression.type": "gzip"}),
                    ("confluent-kafka compression=lz4", {"compression.type": "lz4"}),
                    ("confluent-kafka compression=zstd", {"compression.type": "zstd"}),
                    ("confluent-kafka linger.ms=5", {"linger.ms": 5}),
                    ("confluent-kafka linger.ms=50", {"linger.ms": 50}),
                ]:
                    results[label] = produce(label, ov)
                for rows in (10_000, 20_000, 200_000):
                    label = f"confluent-kafka chunk_rows={rows}"
                    results[label] = produce(label, chunk_rows=rows)
        finally:
            kafka_io.delete_topics(bootstrap, made)

    print(f"\nproduce ({'quick' if args.quick else 'full'}, {total:,} rows, {PARTITIONS} partitions, "
          f"acks=all, idempotent; {os.cpu_count()} CPUs, broker on this machine)")
    for label, r in results.items():
        print(f"  {label:<34} {r['rate']:>10,.0f} rows or events/s  {r['cpu_us']:5.1f} us CPU/row")
    chosen = results["produce (confluent-kafka)"]["rate"]
    head = {
        "produce_events_per_s": round(chosen),
        "parse_events_per_s": round(results["parse"]["rate"]),
        "encode_events_per_s": round(results["encode"]["rate"]),
        "reference_encode_events_per_s": round(results["reference encode"]["rate"]),
        "produce_ref_encode_events_per_s": round(results["produce, reference encoding"]["rate"]),
        "no_transactions_events_per_s": round(results["produce, no transactions"]["rate"]),
        "client": kafka_io.DEFAULT_CLIENT,
        "rows": total,
        "meets_50k": int(chosen >= 50_000),
    }
    print("produce " + " ".join(f"{k}={v}" for k, v in head.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
