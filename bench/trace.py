"""Evidence traces and typologies: 5-hop trace latency on both backends, the same question as
naive Cypher path enumeration, and per-typology recall and precision.

    python bench/trace.py            # ~1M-edge graph, 1,000 traces per backend, 20 naive queries
    python bench/trace.py --quick    # ~50k-edge graph, 50 traces per backend, 5 naive queries
    python bench/trace.py --no-neo4j # embedded only (neo4j figures: na)

Neo4j: the server of ``deploy/services up neo4j`` with the settings' credentials
(``eval "$(deploy/services env)"``), in a private namespace (``bench_<pid>``) removed at the end.

(a) **Traces**: :func:`trace_evidence` as the deep path asks it: 5 hops downstream from an account
    over the 3 days after one of its transfers (hop horizon, fan-out cap 50, hub degree, budgets:
    the defaults of :mod:`auditflow.limits`), roots drawn with a seeded RNG among senders (the
    full run 1,000 of them: with 200 the p99 was the second-slowest trace, and one scheduling
    hiccup on two cores moved it by a third between runs). Each
    backend runs all roots in a phase of its own (interleaved, the Neo4j server's work after each
    answer landed inside the next embedded trace: p99 9.9 ms against 3.3 ms alone on the quick
    graph), the embedded one before the graph is written to Neo4j (the server's checkpoints and
    index updates after a bulk load land inside the traces too); per root, their traces must be
    identical (a time-budget cut excepted). The embedded
    store runs with ``gc.freeze()`` around each trace (a million edges in the process otherwise
    puts cyclic-GC pauses inside some traces). The slowest 1% of the Neo4j traces run once more,
    instrumented: their frontier queries, the server's share of their time (result summaries) and
    a bare read's round trip (``p99_server_ms_neo4j``: the median server time of those traces).
(b) **Naive Cypher**: for the first roots, the same question as one variable-length pattern,
    ``MATCH p=(a {id: $root})-[:TX*1..5]->(b)`` with every transfer inside the window, in time
    order along the path and within the hop horizon of the one before, ``count(DISTINCT b)``, run with a transaction timeout of
    ``--naive-cap`` seconds; ``naive_cypher_ratio`` = its median time / the hop-by-hop trace's
    median time on Neo4j for the same roots. A query that hits the cap counts as the cap (so the
    ratio is then a lower bound) and ``naive_capped`` says how many did.
(c) **Typologies**: :func:`evidence_graph.evaluation.score_typologies` on a generated set with
    planted typologies and legitimate look-alikes (12 days; scored over the last five, a week of
    history behind them), detection run from every member of every planted instance and from
    every look-alike account; ``typology_recall_min`` / ``typology_precision_min`` are the minimum
    over the eight typologies (each typology's figures are printed above); ``typology_p99_ms``:
    the p99 of one account's detection (each query of the scoring timed).

Graph for (a)/(b): :func:`ingest.synthetic.generate` over 10 days at AMLworld's density (about one
transfer per account and day), accounts = edges / 10.

Last line: ``trace p99_ms_embedded=... p99_ms_neo4j=... naive_cypher_ratio=...
typology_recall_min=... typology_precision_min=...`` plus p50s, sizes and counts.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DAYS = 10
TX_PER_ACCOUNT_DAY = 1.0
HORIZON = timedelta(days=3)
log = functools.partial(print, file=sys.stderr, flush=True)


def pct(xs, q) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, q)) if xs else float("nan")


def make_graph(edges: int, seed: int):
    from ingest.synthetic import generate

    accounts = max(20, round(edges / (DAYS * TX_PER_ACCOUNT_DAY)))
    t0 = time.perf_counter()
    ds = generate(accounts=accounts, days=DAYS, seed=seed, tx_per_account_day=TX_PER_ACCOUNT_DAY)
    log(f"[data] {len(ds.events):,} events, {accounts:,} accounts ({time.perf_counter() - t0:.1f}s)")
    return ds.events


def pick_roots(events, n: int, seed: int):
    stamps: dict[str, list] = {}
    for ev in events:
        stamps.setdefault(ev.sender.node_id, []).append(ev.timestamp)
    rng = random.Random(seed)
    roots = rng.sample(sorted(stamps), min(n, len(stamps)))
    return [(r, rng.choice(stamps[r])) for r in roots]


def traces(store, roots):
    """One backend over all roots, back to back: each trace's time and the trace."""
    times, got = [], []
    for root, ts in roots:
        gc.freeze()
        t0 = time.perf_counter()
        tr = trace_evidence_5(store, root, ts)
        times.append(time.perf_counter() - t0)
        gc.unfreeze()
        got.append(tr)
    return times, got


def compare(got: dict[str, list]):
    """Root by root, the backends' traces: their sizes (of the first backend's) and how many
    roots the backends answer differently (a time-budget cut excepted)."""
    first = next(iter(got))
    sizes, mismatches = [], 0
    for i, tr in enumerate(got[first]):
        per_root = [got[name][i] for name in got]
        sizes.append((len(tr.nodes), len(tr.edges)))
        timed_out = any(c.reason == "time budget" for t in per_root for c in t.cuts)
        if len({t.trace_id for t in per_root}) > 1 and not timed_out:
            mismatches += 1
    return sizes, mismatches


def naive(store, roots, cap_s: float):
    """Variable-length path enumeration on Neo4j, the same question, each under a timeout."""
    import neo4j
    from neo4j.exceptions import ClientError

    from auditflow.records import epoch_minutes

    from auditflow.limits import TRACE_HOP_HORIZON

    # the trace's question: inside the window, in time order, each transfer within the hop
    # horizon of the one before (the first within it of the window's start)
    text = (f"MATCH p=(a:{store.label} {{id: $root}})-[:{store.rel_type}*1..5]->(b) "
            "WHERE all(r IN relationships(p) WHERE r.ts >= $lo AND r.ts <= $hi) "
            "AND relationships(p)[0].ts <= $lo + $h "
            "AND all(i IN range(0, size(relationships(p)) - 2) "
            "WHERE relationships(p)[i].ts <= relationships(p)[i + 1].ts "
            "AND relationships(p)[i + 1].ts <= relationships(p)[i].ts + $h) "
            "RETURN count(DISTINCT b) AS n")
    h = int(TRACE_HOP_HORIZON / timedelta(minutes=1))
    times, capped = [], 0
    for root, ts in roots:
        t0 = time.perf_counter()
        try:
            store._run(neo4j.Query(text, timeout=cap_s), read=True, root=root,
                       lo=epoch_minutes(ts), hi=epoch_minutes(ts + HORIZON), h=h)
            times.append(time.perf_counter() - t0)
        except ClientError as e:
            if "TransactionTimedOut" not in (e.code or ""):
                raise
            times.append(cap_s)
            capped += 1
        log(f"[naive] {root}: {times[-1]:.3f}s" + (" (capped)" if times[-1] >= cap_s else ""))
    return times, capped


def neo4j_breakdown(store, roots, times):
    """Where the slowest 1% of Neo4j traces spend their time: the same roots again, each frontier
    query's server time (its result summary: until the result was available plus until it was
    consumed) and their number, beside the round trip of a bare read (``RETURN 1`` in a read
    session, median of 200). Instruments the driver's ``Session.run`` for this phase only."""
    import neo4j

    slow = sorted(range(len(roots)), key=times.__getitem__)[-max(1, len(roots) // 100):]
    rtt = []
    with store._driver.session(database=store.database, default_access_mode=neo4j.READ_ACCESS) as session:
        for _ in range(200):
            t0 = time.perf_counter()
            session.run("RETURN 1").consume()
            rtt.append(time.perf_counter() - t0)
    calls: list[float] = []
    run = neo4j.Session.run

    class Timed:
        def __init__(self, result):
            self.result = result

        def single(self, strict=False):
            record = self.result.single(strict=strict)
            summary = self.result.consume()
            calls.append((summary.result_available_after or 0) + (summary.result_consumed_after or 0))
            return record

    neo4j.Session.run = lambda self, *a, **kw: Timed(run(self, *a, **kw))
    per_trace = []
    try:
        for i in slow:
            root, ts = roots[i]
            calls.clear()
            t0 = time.perf_counter()
            trace_evidence_5(store, root, ts)
            per_trace.append((time.perf_counter() - t0, sum(calls), len(calls)))
    finally:
        neo4j.Session.run = run
    return {
        "traces": len(per_trace),
        "total_ms": statistics.median(t for t, _, _ in per_trace) * 1000,
        "server_ms": statistics.median(s for _, s, _ in per_trace),
        "queries": statistics.median(n for _, _, n in per_trace),
        "rtt_ms": statistics.median(rtt) * 1000,
    }


def trace_evidence_5(store, root, ts):
    from evidence_graph import trace_evidence

    return trace_evidence(store, root, max_hops=5, direction="out", window=(ts, ts + HORIZON))


def typology_scores(quick: bool, seed: int):
    import evidence_graph.evaluation as evaluation
    from evidence_graph import NetworkxGraphStore
    from ingest.synthetic import generate

    accounts = 800 if quick else 2000
    ds = generate(accounts=accounts, days=12, laundering_rate=0.015, seed=seed)
    store = NetworkxGraphStore()
    store.add_transactions(ds.events)
    start = ds.events[0].timestamp.replace(hour=0, minute=0) + timedelta(days=7)
    instances = ds.planted(start)
    detect, per_query = evaluation.detect_typologies, []

    def timed(*a, **kw):  # each query's time, as an analyst or the deep path waits for it
        t0 = time.perf_counter()
        try:
            return detect(*a, **kw)
        finally:
            per_query.append(time.perf_counter() - t0)

    evaluation.detect_typologies = timed
    t0 = time.perf_counter()
    try:
        scores = evaluation.score_typologies(store, instances, [r.node_id for r in ds.lookalikes()],
                                             (start, ds.events[-1].timestamp))
    finally:
        evaluation.detect_typologies = detect
    log(f"[typologies] {len(ds.events):,} events, {len(instances)} instances, {len(per_query)} accounts "
        f"scored ({time.perf_counter() - t0:.1f}s)")
    return scores, per_query


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-neo4j", action="store_true")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--edges", type=int, default=None)
    ap.add_argument("--traces", type=int, default=None)
    ap.add_argument("--naive", type=int, default=None, help="roots asked the naive Cypher question")
    ap.add_argument("--naive-cap", type=float, default=None, help="seconds per naive query")
    args = ap.parse_args(argv)
    q = args.quick
    edges = args.edges or (50_000 if q else 1_000_000)
    n_traces = args.traces or (50 if q else 1000)
    n_naive = args.naive if args.naive is not None else (5 if q else 20)
    cap = args.naive_cap or (10.0 if q else 30.0)

    from evidence_graph import NetworkxGraphStore

    events = make_graph(edges, args.seed)
    roots = pick_roots(events, n_traces + 5, args.seed)
    embedded = NetworkxGraphStore()
    embedded.add_transactions(events)
    # each backend in a phase of its own, the embedded one before anything is written to Neo4j:
    # a query leaves the server busy for a while after it answers, and a bulk load for much
    # longer (checkpoints, index updates), which on two cores lands inside the embedded traces
    traces(embedded, roots[:5])  # warm-up
    times, got = {}, {}
    times["embedded"], got["embedded"] = traces(embedded, roots[5:])
    neo = None
    breakdown = None
    naive_times, capped = ([], 0)
    ratio = "na"
    if not args.no_neo4j:
        from auditflow_app.settings import Settings
        from evidence_graph.neo4j_store import Neo4jGraphStore

        s = Settings()
        neo = Neo4jGraphStore(s.neo4j_uri, namespace=f"bench_{os.getpid()}", **s.neo4j_auth)
        try:
            t0 = time.perf_counter()
            for i in range(0, len(events), 50_000):
                neo.add_transactions(events[i : i + 50_000])
                log(f"[neo4j] {min(i + 50_000, len(events)):,} edges written ({time.perf_counter() - t0:.0f}s)")
            traces(neo, roots[:5])  # warm-up: query plans, caches
            times["neo4j"], got["neo4j"] = traces(neo, roots[5:])
            breakdown = neo4j_breakdown(neo, roots[5:], times["neo4j"])
            if n_naive:
                naive_times, capped = naive(neo, roots[5 : 5 + n_naive], cap)
                ours = times["neo4j"][:n_naive]
                ratio = f"{statistics.median(naive_times) / statistics.median(ours):.0f}"
        finally:
            while neo._run(f"MATCH ()-[t:{neo.rel_type}]->() WITH t LIMIT 20000 DELETE t RETURN count(*) AS n"
                           ).records[0]["n"]:
                pass
            neo.drop()
            neo.close()
    sizes, mismatches = compare(got)
    scores, typology_times = typology_scores(q, args.seed)

    print(f"trace ({'quick' if q else 'full'}, seed {args.seed}): {len(events):,} edges, "
          f"{len(times['embedded'])} traces per backend, 5 hops over 3 days")
    for name, ts in times.items():
        print(f"  {name:<9} p50 {pct(ts, 50):8.2f} ms   p99 {pct(ts, 99):8.2f} ms")
    print(f"  trace size: median {statistics.median(n for n, _ in sizes):.0f} accounts, "
          f"{statistics.median(e for _, e in sizes):.0f} transfers; max {max(n for n, _ in sizes)} / "
          f"{max(e for _, e in sizes)}; backends differing: {mismatches}")
    if breakdown:
        b = breakdown
        print(f"  neo4j slowest 1% ({b['traces']} traces, again): median {b['total_ms']:.1f} ms, "
              f"{b['queries']:.0f} frontier queries, {b['server_ms']:.0f} ms of them on the server "
              f"(result summaries); a bare read's round trip {b['rtt_ms']:.2f} ms")
    if naive_times:
        print(f"  naive Cypher [*1..5]: median {statistics.median(naive_times) * 1000:.0f} ms over "
              f"{len(naive_times)} roots ({capped} hit the {cap:.0f} s cap)")
    print(f"  typology queries: {len(typology_times)}, p50 {pct(typology_times, 50):.1f} ms, "
          f"p99 {pct(typology_times, 99):.1f} ms, max {max(typology_times) * 1000:.0f} ms (embedded)")
    for t, s in scores.items():
        print(f"  {t:<15} planted {s.planted:3d}  recall {s.recall:.2f}  findings {s.findings:3d}  "
              f"precision {s.precision:.2f}")
    head = {
        "p99_ms_embedded": f"{pct(times['embedded'], 99):.2f}",
        "p99_ms_neo4j": f"{pct(times['neo4j'], 99):.2f}" if "neo4j" in times else "na",
        "naive_cypher_ratio": ratio,
        "typology_recall_min": f"{min(s.recall for s in scores.values()):.2f}",
        "typology_precision_min": f"{min(s.precision for s in scores.values()):.2f}",
        "p50_ms_embedded": f"{pct(times['embedded'], 50):.2f}",
        "p50_ms_neo4j": f"{pct(times['neo4j'], 50):.2f}" if "neo4j" in times else "na",
        "p99_server_ms_neo4j": f"{breakdown['server_ms']:.0f}" if breakdown else "na",
        "typology_p99_ms": f"{pct(typology_times, 99):.1f}",
        "naive_capped": capped,
        "mismatches": mismatches,
        "edges": len(events),
    }
    print("trace " + " ".join(f"{k}={v}" for k, v in head.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
