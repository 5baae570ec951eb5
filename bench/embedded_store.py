"""Embedded graph store cost: the JSON-lines store against a SQLite WAL prototype, side by side.

    python bench/embedded_store.py            # 200k events
    python bench/embedded_store.py --quick    # 20k events
    python bench/embedded_store.py --events N

Why: issue 8 asks the embedded store to survive a torn write, either by a JSON-lines log that
cuts a torn tail (what ``evidence_graph/embedded.py`` does) or by moving to SQLite in WAL mode,
and to measure the load and trace cost either way. Both run here on the same events in one run.

The events: the seeded synthetic generator (``ingest.synthetic.generate``, enough accounts over
3 days for N events; the first N in time order). What is timed (wall clock, best of the repeats):

* **write**: a fresh store, ``add_transactions`` + ``flush()`` per batch of 2,000 (the stream
  job's graph writer does exactly this per Arrow batch), fsync on -> ``*_write_ev_s``.
* **load**: opening a store on the written file, ready to answer -> ``*_load_s``. The JSON-lines
  store parses every line into the in-memory graph; SQLite opens the database (no load).
  ``sqlite_log_load_s``: SQLite kept as a log only (rows read back into the in-memory graph), the
  other way SQLite could be used.
* **trace**: ``trace_evidence`` 5 hops out, fan-out cap 50, over the 3 days after the transfer
  (the deep path's parameters), from the senders of 50 sampled events -> ``*_trace_ms`` (median).
  The first trace after a load also fills the in-memory store's per-node sort cache.
* **batch**: one ``neighbors_batch`` of 200 sampled accounts, ``both`` directions, limit 50 ->
  ``*_batch_ms`` (median of 20 distinct frontiers).

The SQLite prototype (``SqliteWalStore`` below, a bench-only :class:`GraphStore`) is a table
``edges(event_id PRIMARY KEY, src, dst, ts, json)`` with ``(src, ts, event_id)`` and
``(dst, ts, event_id)`` indexes, ``journal_mode=WAL``, ``synchronous=FULL`` (a commit is durable,
as the JSON-lines fsync is), ``INSERT OR IGNORE`` for idempotence; each query reads the rows'
JSON back into :class:`GraphEdge` with the same parser the JSON-lines store uses. Its traces are
checked equal (``trace_id``) to the JSON-lines store's for every sampled root: ``same_traces``;
exit status 1 when they differ.

Figures are printed, never asserted (a loaded machine is slow, not wrong).

Last line: ``embedded_store events=... jsonl_load_s=... sqlite_load_s=... sqlite_log_load_s=...
jsonl_write_ev_s=... sqlite_write_ev_s=... jsonl_trace_ms=... sqlite_trace_ms=...
jsonl_batch_ms=... sqlite_batch_ms=... jsonl_bytes=... sqlite_bytes=... same_traces=...``.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auditflow.records import TransactionEvent  # noqa: E402
from evidence_graph import NetworkxGraphStore, trace_evidence  # noqa: E402
from evidence_graph.store import Direction, GraphEdge, GraphStore  # noqa: E402

BATCH = 2000
TRACE_ROOTS = 50
FRONTIER = 200
FRONTIERS = 20
HORIZON = timedelta(days=3)
_EPOCH = datetime(1970, 1, 1)
_US = timedelta(microseconds=1)


def _us(ts: datetime) -> int:
    return (ts - _EPOCH) // _US


class SqliteWalStore(GraphStore):
    """Bench-only prototype: the graph in one SQLite file in WAL mode, queried in place."""

    backend = "sqlite"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript("""
            CREATE TABLE IF NOT EXISTS edges (
                event_id TEXT PRIMARY KEY, src TEXT NOT NULL, dst TEXT NOT NULL,
                ts INTEGER NOT NULL, json TEXT NOT NULL) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS edges_out ON edges (src, ts, event_id);
            CREATE INDEX IF NOT EXISTS edges_in ON edges (dst, ts, event_id);
        """)
        self._rows: list[tuple[str, str, str, int, str]] = []

    def add_transactions(self, events: Iterable[TransactionEvent]) -> int:
        before = len(self._rows)
        self._rows += [(ev.event_id, ev.sender.node_id, ev.receiver.node_id, _us(ev.timestamp), ev.to_json())
                       for ev in events]
        return len(self._rows) - before  # upper bound: duplicates are found on flush

    def flush(self) -> None:
        if self._rows:
            with self._db:  # one transaction, durable on commit (synchronous=FULL)
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR IGNORE INTO edges VALUES (?, ?, ?, ?, ?)", self._rows)
            self._rows.clear()

    def close(self) -> None:
        self.flush()
        self._db.close()

    def node_count(self) -> int:
        return self._db.execute("SELECT count(*) FROM (SELECT src FROM edges UNION SELECT dst FROM edges)").fetchone()[0]

    def edge_count(self) -> int:
        return self._db.execute("SELECT count(*) FROM edges").fetchone()[0]

    def has_node(self, node_id: str) -> bool:
        q = "SELECT EXISTS(SELECT 1 FROM edges WHERE src = ?) OR EXISTS(SELECT 1 FROM edges WHERE dst = ?)"
        return bool(self._db.execute(q, (node_id, node_id)).fetchone()[0])

    def _side(self, col: str, node: str, lo: int, hi: int, limit: int) -> list[tuple[int, str, str]]:
        q = (f"SELECT ts, event_id, json FROM edges WHERE {col} = ? AND ts BETWEEN ? AND ? "
             f"ORDER BY ts, event_id LIMIT ?")
        return self._db.execute(q, (node, lo, hi, limit)).fetchall()

    def _neighbors_batch(
        self,
        frontier: Sequence[str],
        direction: Direction,
        start: datetime | None,
        end: datetime | None,
        limit: int | None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        lo = -(1 << 62) if start is None else _us(start)
        hi = 1 << 62 if end is None else _us(end)
        cap = -1 if limit is None else limit  # SQLite: LIMIT -1 is no limit
        out: dict[str, tuple[GraphEdge, ...]] = {}
        for node in frontier:
            if node in out:
                continue
            rows = []
            if direction in ("out", "both"):
                rows += self._side("src", node, lo, hi, cap)
            if direction in ("in", "both"):
                rows += self._side("dst", node, lo, hi, cap)
            if direction == "both":
                rows = sorted(set(rows))  # a self-loop comes back from both sides: listed once
                if limit is not None:
                    rows = rows[:limit]
            out[node] = tuple(GraphEdge.from_event(TransactionEvent.from_json(j)) for _, _, j in rows)
        return out

    def load_into_memory(self) -> NetworkxGraphStore:
        """SQLite used as a log only: every row read back into the in-memory graph."""
        mem = NetworkxGraphStore()
        mem.add_transactions(TransactionEvent.from_json(j) for (j,) in self._db.execute("SELECT json FROM edges"))
        return mem


def make_events(n: int, seed: int) -> list[TransactionEvent]:
    from ingest.synthetic import generate

    accounts = max(200, n // 13)  # about 4.5 background rows per account and day, 3 days
    events: list[TransactionEvent] = []
    while len(events) < n:
        events = sorted(generate(accounts=accounts, days=3, seed=seed).events, key=lambda e: (e.timestamp, e.event_id))
        accounts = int(accounts * 1.3) + 1
    return events[:n]


def best(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def write_store(store: GraphStore, events: list[TransactionEvent]) -> None:
    for i in range(0, len(events), BATCH):
        store.add_transactions(events[i:i + BATCH])
        store.flush()
    store.close()


def time_traces(store: GraphStore, roots: list[tuple[str, datetime]]) -> tuple[list[float], list[str]]:
    ms, ids = [], []
    for node, t in roots:
        t0 = time.perf_counter()
        tr = trace_evidence(store, node, max_hops=5, direction="out", fanout_cap=50, window=(t, t + HORIZON))
        ms.append((time.perf_counter() - t0) * 1e3)
        ids.append(tr.trace_id)
    return ms, ids


def time_batches(store: GraphStore, frontiers: list[list[str]]) -> tuple[list[float], list[tuple]]:
    ms, answers = [], []
    for f in frontiers:
        t0 = time.perf_counter()
        got = store.neighbors_batch(f, "both", limit=50)
        ms.append((time.perf_counter() - t0) * 1e3)
        answers.append(tuple(tuple(e.event_id for e in got[n]) for n in f))
    return ms, answers


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20k events, 2 repeats")
    ap.add_argument("--events", type=int, help="events (default 200,000; quick 20,000)")
    ap.add_argument("--repeats", type=int, help="repeats of write and load (default 3; quick 2)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    n = args.events or (20_000 if args.quick else 200_000)
    repeats = args.repeats or (2 if args.quick else 3)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    t0 = time.perf_counter()
    events = make_events(n, args.seed)
    log(f"  {len(events):,} events generated in {time.perf_counter() - t0:.1f} s")
    rng = random.Random(args.seed)
    roots = [(e.sender.node_id, e.timestamp) for e in rng.sample(events, TRACE_ROOTS)]
    nodes = sorted({e.sender.node_id for e in events} | {e.receiver.node_id for e in events})
    frontiers = [rng.sample(nodes, min(FRONTIER, len(nodes))) for _ in range(FRONTIERS)]

    res: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench_embedded_store_") as tmp:
        jpath, spath = Path(tmp) / "g.jsonl", Path(tmp) / "g.sqlite"

        def write_jsonl() -> None:
            jpath.unlink(missing_ok=True)
            write_store(NetworkxGraphStore(jpath, flush_every=BATCH), events)

        def write_sqlite() -> None:
            for p in (spath, Path(f"{spath}-wal"), Path(f"{spath}-shm")):
                p.unlink(missing_ok=True)
            write_store(SqliteWalStore(spath), events)

        for name, fn in (("jsonl", write_jsonl), ("sqlite", write_sqlite)):
            s, _ = best(fn, repeats)
            res[f"{name}_write_ev_s"] = n / s
            log(f"  write  {name:6} {s:7.2f} s  {n / s:>9,.0f} events/s")
        res["jsonl_bytes"] = jpath.stat().st_size
        res["sqlite_bytes"] = sum(p.stat().st_size for p in (spath, Path(f"{spath}-wal")) if p.exists())

        res["jsonl_load_s"], jstore = best(lambda: NetworkxGraphStore(jpath), repeats)
        res["sqlite_load_s"], sstore = best(lambda: SqliteWalStore(spath), repeats)
        sq = SqliteWalStore(spath)
        res["sqlite_log_load_s"], _ = best(sq.load_into_memory, repeats)
        sq.close()
        assert jstore.edge_count() == sstore.edge_count() == n, (jstore.edge_count(), sstore.edge_count(), n)
        for k in ("jsonl_load_s", "sqlite_load_s", "sqlite_log_load_s"):
            log(f"  load   {k.removesuffix('_load_s'):10} {res[k]:7.3f} s")

        first_j, _ = time_traces(jstore, roots[:1])
        jms, jids = time_traces(jstore, roots)
        sms, sids = time_traces(sstore, roots)
        jb, janswers = time_batches(jstore, frontiers)
        sb, sanswers = time_batches(sstore, frontiers)
        sstore.close()
    same = jids == sids and janswers == sanswers
    res["jsonl_trace_ms"], res["sqlite_trace_ms"] = statistics.median(jms), statistics.median(sms)
    res["jsonl_batch_ms"], res["sqlite_batch_ms"] = statistics.median(jb), statistics.median(sb)
    log(f"  trace  jsonl  median {res['jsonl_trace_ms']:.2f} ms (max {max(jms):.1f}; first after load "
        f"{first_j[0]:.1f}), sqlite median {res['sqlite_trace_ms']:.2f} ms (max {max(sms):.1f})")
    log(f"  batch  jsonl  median {res['jsonl_batch_ms']:.2f} ms, sqlite median {res['sqlite_batch_ms']:.2f} ms")

    print(f"embedded_store ({'quick' if args.quick else 'full'}, seed {args.seed}, {repeats} repeats, "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f})")
    fmt = {"events": str(n)}
    for k in ("jsonl_load_s", "sqlite_load_s", "sqlite_log_load_s"):
        fmt[k] = f"{res[k]:.3f}"
    for k in ("jsonl_write_ev_s", "sqlite_write_ev_s"):
        fmt[k] = f"{res[k]:.0f}"
    for k in ("jsonl_trace_ms", "sqlite_trace_ms", "jsonl_batch_ms", "sqlite_batch_ms"):
        fmt[k] = f"{res[k]:.2f}"
    fmt["jsonl_bytes"], fmt["sqlite_bytes"] = str(int(res["jsonl_bytes"])), str(int(res["sqlite_bytes"]))
    fmt["same_traces"] = "yes" if same else "no"
    print("embedded_store " + " ".join(f"{k}={v}" for k, v in fmt.items()))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
