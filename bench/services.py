"""The real services: Neo4j write rate, 5-hop evidence traces (Neo4j vs embedded), Kafka->Flink->Kafka.

    python bench/services.py            # ~1M-edge graph, 200 traces per configuration
    python bench/services.py --quick    # ~50k-edge graph, 50 traces per configuration

Needs the services of ``deploy/services up`` (Neo4j on $AUDITFLOW_NEO4J_URI, default
bolt://127.0.0.1:7687, with the credentials of the settings: ``eval "$(deploy/services env)"``;
Kafka on $AUDITFLOW_KAFKA_BOOTSTRAP). Everything goes into a private
Neo4j namespace (``bench_<pid>``) and private Kafka topics, removed at the end.

(a) **Neo4j writes**: :meth:`Neo4jGraphStore.add_transactions` (its batched ``UNWIND ... MERGE``,
    1000 rows a transaction) over the whole generated set, timed -> ``neo4j_edges_per_s``. If
    the writes pass ``--neo4j-budget`` seconds (default 600) they stop there, the rate is the
    rate so far and the headline says ``neo4j_partial=1``; the traces then run on exactly the
    edges written (the embedded store gets the same subset).
(b) **Traces**: :func:`trace_evidence` (time-respecting: money flows forward in time along each
    path, each hop within the hop horizon of the one before), 5 hops, direction out, default
    fan-out cap, on Neo4j and on the embedded :class:`NetworkxGraphStore` holding the same edges;
    roots drawn with a seeded RNG among accounts that sent money, each from one of its transfers'
    times; without a window, and with the deep path's window (from that time to the trace
    horizon after it, like ``auditflow_app.flow.run_deep_path``). Per root the backends run back to
    back, in alternating order (noise hits both alike), and must give the same ``trace_id``. The
    embedded store is timed twice: as is, and with ``gc.freeze()`` around the trace
    (``embedded_gcfrozen``): with a million edges in the process, Python's cyclic GC full
    collections (seconds each) land inside some traces and make the embedded p99. A few warm-up
    traces on other roots run first (Neo4j query plans, the embedded store's first lookups).
(c) **Kafka -> Flink -> Kafka**: :func:`auditflow_app.flow.run_kafka_job` (the app's entry to
    :mod:`pipelines.kafka_job`, imported lazily; if it is missing or fails,
    ``kafka_flink_events_per_s=na`` and the reason goes to stderr) on a local MiniCluster,
    bounded, graph into ``memory:``, over a seeded live set produced beforehand (untimed, af1 wire
    values keyed by sender, :func:`ingest.kafka_io.produce_file`) into private topics; events/s =
    events / ``KafkaJobResult.seconds`` (the job's execution, its startup included, gateway JVM
    launch not). Not quick: a 10-event job first gives the job's startup and
    ``steady_kafka_flink_events_per_s``. The alerts read back from Kafka must be exactly those
    the plain-Python reference computes with the same model (:func:`pipelines.features.iter_features`
    scored in batches by :func:`model_service.fast_path.batch_scorer`), with no dead letters.

(d) **Service start-up** (first, before anything loads the machine): ``deploy/services status``
    and then ``deploy/services up`` for the services status reports running, each timed as a
    subprocess, ``--startup-repeats`` times (best and median). With everything up, ``up`` only
    checks pid files and health: ``up_noop_s`` (best) is the cost a ``make test`` or a restarted
    client pays when the servers already run; ``status_s`` is the health check alone. Services
    not running are left alone (never started by the bench) and listed as ``startup_skipped``.
    (Cold start-up of a fresh instance is not measured: deploy/services has fixed ports, so a
    second instance cannot start beside the shared one.)

Graph: ``ingest.synthetic.generate`` (seeded, realistic hubs: merchants, payroll processors) over
10 days at AMLworld's density of about one transfer per account and day, so accounts = edges / 10
(1M edges: 100k accounts; generating them takes ~25 s). A 5-hop trace on such a graph reaches
thousands of accounts and tens of thousands of edges (the fan-out cap keeps 50 per account and
hop), so traces take long on Neo4j: ``--trace-budget`` seconds per configuration (no window /
window) stops starting new roots, and the headline gives how many were traced (``traces``,
``traces_window``) of the ``traces_drawn`` roots. Roots are always taken in the same seeded order.

Last line: ``services kafka_flink_events_per_s=... neo4j_edges_per_s=... trace_p99_ms_neo4j=...
trace_p99_ms_embedded=... up_noop_s=... status_s=...`` plus p50s and the rest.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditflow.limits import DEFAULT_TRACE_HORIZON  # noqa: E402

DAYS = 10
# AMLworld density: HI-Small holds ~5.1M transfers between ~515k accounts over ~10 busy days, about
# 1 a day per account. (ingest.synthetic's default, 4.5, makes every 5-hop trace the whole graph.)
TX_PER_ACCOUNT_DAY = 1.0
TRACE_HORIZON = DEFAULT_TRACE_HORIZON  # the deep path's window: the alert's time to this after it (settings.trace_horizon)
log = functools.partial(print, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ data


def make_events(edges: int, seed: int):
    from ingest.synthetic import generate

    accounts = max(20, round(edges / (DAYS * TX_PER_ACCOUNT_DAY)))
    t0 = time.perf_counter()
    ds = generate(accounts=accounts, days=DAYS, seed=seed, tx_per_account_day=TX_PER_ACCOUNT_DAY)
    log(f"[data] {len(ds.events):,} events, {accounts:,} accounts, {DAYS} days "
        f"({time.perf_counter() - t0:.1f}s)")
    return ds.events, accounts


# ------------------------------------------------------------------------------ (a) neo4j writes


def neo4j_write(store, events, budget_s: float, chunk: int = 50_000):
    """Write in chunks (progress, budget). Returns (events written, seconds, created, partial)."""
    t0 = time.perf_counter()
    created, done = 0, 0
    while done < len(events):
        part = events[done : done + chunk]
        created += store.add_transactions(part)
        done += len(part)
        el = time.perf_counter() - t0
        log(f"[neo4j] {done:,}/{len(events):,} edges, {el:.1f}s, {done / el:,.0f} edges/s")
        if el > budget_s and done < len(events):
            log(f"[neo4j] budget of {budget_s:.0f}s spent: stopping at {done:,} edges (partial)")
            return done, el, created, True
    return done, time.perf_counter() - t0, created, False


def cleanup(store) -> float | None:
    """Remove the bench namespace. Relationships go first in small transactions: the store's
    ``drop()`` alone DETACH DELETEs 5000 accounts per transaction, which on a 1M-edge graph passes
    Neo4j's per-transaction memory limit (dbms.memory.transaction.total.max) on hub accounts."""
    t0 = time.perf_counter()
    try:
        while store._run(f"MATCH ()-[t:{store.rel_type}]->() WITH t LIMIT 20000 DELETE t RETURN count(*) AS n"
                         ).records[0]["n"]:
            pass
        store.drop()
        seconds = time.perf_counter() - t0
        log(f"[neo4j] namespace {store.namespace} dropped in {seconds:.1f}s")
        return seconds
    except Exception as e:
        log(f"[neo4j] WARNING: could not drop namespace {store.namespace} ({type(e).__name__}: {str(e)[:300]}); "
            f"labels {store.label}/{store.rel_type} are left on the server")
        return None
    finally:
        store.close()


# ------------------------------------------------------------------------------ (b) traces


def pick_roots(events, n: int, seed: int):
    """n distinct senders, each with one of its own transfers as the window's centre."""
    stamps: dict[str, list] = {}
    for ev in events:
        stamps.setdefault(ev.sender.node_id, []).append(ev.timestamp)
    senders = sorted(stamps)
    rng = random.Random(seed)
    roots = rng.sample(senders, min(n, len(senders)))
    return [(r, rng.choice(stamps[r])) for r in roots]


def trace_pass(stores: dict, roots, windowed: bool, budget_s: float = float("inf")):
    """Trace each root on every store, back to back; stop starting new roots after budget_s.

    ``stores`` maps a name to ``(store, freeze_gc)``; with ``freeze_gc`` the trace runs after
    ``gc.freeze()`` (the loaded graph moved out of the cyclic collector's reach). The order of
    the stores alternates from one root to the next, so no variant always gets the warm caches.
    """
    from evidence_graph import trace_evidence

    times = {name: [] for name in stores}
    sizes = {name: [] for name in stores}
    mismatches = 0
    deadline = time.perf_counter() + budget_s
    order = list(stores)
    for i, (root, ts) in enumerate(roots):
        if time.perf_counter() > deadline:
            break
        window = (ts, ts + TRACE_HORIZON) if windowed else None
        ids = set()
        for name in order if i % 2 == 0 else order[::-1]:
            store, freeze = stores[name]
            if freeze:
                gc.freeze()
            t0 = time.perf_counter()
            tr = trace_evidence(store, root, max_hops=5, direction="out", window=window)
            times[name].append(time.perf_counter() - t0)
            if freeze:
                gc.unfreeze()
            sizes[name].append((len(tr.nodes), len(tr.edges)))
            ids.add(tr.trace_id)
        mismatches += len(ids) > 1
    return times, sizes, mismatches


def pct(xs, q) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, q)) if xs else float("nan")


# ------------------------------------------------------------------------------ (c) kafka


class JobTimeout(Exception):
    pass


def run_with_timeout(fn, timeout_s: float, *args, **kwargs):
    """fn(*args, **kwargs) in a daemon thread; JobTimeout if it has not returned in time (a hung
    MiniCluster job then stays behind until this process exits, which stops its gateway JVM)."""
    import threading

    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the caller
            box["error"] = e

    t = threading.Thread(target=target, daemon=True, name="kafka-job")
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise JobTimeout(f"the job did not finish within {timeout_s:.0f}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def flink_log_hint(log_dir: Path) -> str:
    """The most telling error line of this process's own PyFlink log (FLINK_LOG_DIR), if any."""
    lines: list[str] = []
    for f in sorted(log_dir.glob("*.log")):
        lines += [ln.strip() for ln in f.read_text(errors="replace").splitlines()
                  if "Caused by:" in ln or "Exception:" in ln]
    if not lines:
        return ""
    root = [ln for ln in lines if "Caused by:" in ln] or lines
    return root[-1][:300]


def kafka_flink(events_n: int, seed: int, work: Path, warmup: bool, timeout_s: float = 600.0,
                log_dir: Path | None = None) -> tuple[dict | None, str]:
    """Kafka -> :func:`auditflow_app.flow.run_kafka_job` (local MiniCluster) -> Kafka.

    A seeded live set is produced (af1 wire form, keyed by sender) into private topics first,
    untimed; then the bounded job runs (timed: ``KafkaJobResult.seconds``, the job's execution,
    which includes its own startup, but not the gateway JVM launch); then the alerts topic is
    read back and must hold exactly the alerts the plain-Python reference computes with the same
    model. Returns (figures, detail) or (None, why it could not run).
    """
    try:
        from auditflow_app.flow import run_kafka_job
    except ImportError as e:
        return None, f"auditflow_app.flow.run_kafka_job is not importable ({type(e).__name__}: {e})"

    from auditflow_app.flow import producer_options, train
    from auditflow.records import TransactionEvent
    from model_service.fast_path import batch_scorer
    from auditflow_app.settings import Settings
    from ingest.kafka_io import consume_all, delete_topics, ensure_topics, produce_file
    from ingest.synthetic import generate, write_dataset
    from pipelines.features import iter_features

    bootstrap = os.environ.get("AUDITFLOW_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    jar = os.environ.get("AUDITFLOW_FLINK_KAFKA_JAR")
    if not jar:
        found = sorted((ROOT / ".cache" / "deploy" / "flink" / "lib").glob("flink-sql-connector-kafka-*.jar"))
        jar = str(found[-1]) if found else None
    tag = f"bench_{os.getpid()}"
    settings = Settings(
        out_dir=work, seed=seed, kafka_bootstrap=bootstrap, graph_url="memory:", flink_kafka_jar=jar,
        topic_transactions=f"transactions.{tag}", topic_alerts=f"alerts.{tag}", topic_dlq=f"transactions.dlq.{tag}",
    )
    topics = [settings.topic_transactions, settings.topic_alerts, settings.topic_dlq]

    hist = generate(accounts=200, days=3, laundering_rate=0.01, seed=seed + 1000)
    hist_csv, _ = write_dataset(hist, work, name="kafka_history")
    model_dir = str((work / "kafka_model").resolve())
    t0 = time.perf_counter()
    train(hist_csv, model_dir, settings)
    log(f"[kafka] model trained in {time.perf_counter() - t0:.1f}s")
    accounts = max(20, round(events_n / (2 * 4.5)))  # the generator's default density, like the demo
    live = generate(accounts=accounts, days=2, seed=seed)
    live_csv, _ = write_dataset(live, work, name="kafka_live")
    n = len(live.events)
    predict, threshold = batch_scorer(model_dir)[:2]
    featured = list(iter_features(live.events))
    scores = predict(np.array([list(vec.values()) for _, vec in featured], dtype=np.float64))
    expected_ids = {ev.event_id for (ev, _), s in zip(featured, scores) if s >= threshold}
    del featured
    expected = len(expected_ids)
    try:
        startup = None
        if warmup:  # the job's fixed cost: the same job over 10 records in topics of their own
            small = settings.model_copy(update={
                "topic_transactions": f"transactions.{tag}_w", "topic_alerts": f"alerts.{tag}_w",
                "topic_dlq": f"transactions.dlq.{tag}_w"})
            topics += [small.topic_transactions, small.topic_alerts, small.topic_dlq]
            # the broker does not auto-create topics: the job's sinks need theirs to exist
            ensure_topics(bootstrap, {t: small.topic_partitions for t in topics[3:]})
            tiny = work / "kafka_tiny_Trans.csv"
            with open(live_csv, encoding="utf-8") as src, open(tiny, "w", encoding="utf-8") as dst:
                dst.writelines(line for i, line in zip(range(11), src))
            produce_file(tiny, producer_options(small))
            res = run_with_timeout(run_kafka_job, timeout_s, small, model_dir, bounded=True, group_id=f"{tag}_w",
                                   job_name=f"{tag}-warmup")
            startup = res.seconds
            log(f"[kafka] warm-up job (10 events): {startup:.1f}s")
        ensure_topics(bootstrap, {t: settings.topic_partitions for t in topics[:3]})
        t0 = time.perf_counter()
        summary = produce_file(live_csv, producer_options(settings))
        produce_s = time.perf_counter() - t0
        if summary.produced != n:
            return None, f"produced {summary.produced} of {n} events"
        log(f"[kafka] produced {n:,} events in {produce_s:.1f}s; running run_kafka_job (bounded)")
        t0 = time.perf_counter()
        res = run_with_timeout(run_kafka_job, timeout_s, settings, model_dir, bounded=True, group_id=tag,
                               job_name=f"{tag}-bench")
        wall = time.perf_counter() - t0
        alerts = consume_all(bootstrap, settings.topic_alerts, timeout_s=120, expect=expected, quiet_s=3)
        dlq = consume_all(bootstrap, settings.topic_dlq, timeout_s=30, quiet_s=1)
        ids = [TransactionEvent.from_dict(json.loads(r.value)["event"]).event_id for r in alerts]
        complete = len(set(ids)) == len(expected_ids) and set(ids) == expected_ids and not dlq
        figures = {
            "events": n, "seconds": res.seconds, "wall": wall, "startup": startup, "produce_s": produce_s,
            "alerts": len(ids), "distinct_alerts": len(set(ids)), "expected_alerts": expected,
            "dead_letters": len(dlq), "complete": complete,
        }
        if not complete:
            return None, (f"alerts differ from the reference's: {len(set(ids))} distinct alerts read back, "
                          f"reference {expected}, common {len(set(ids) & expected_ids)}; {len(dlq)} dead letters")
        return figures, f"{n} events, job {res.seconds:.1f}s (wall {wall:.1f}s), {len(ids)} alerts = reference"
    except JobTimeout as e:
        hint = flink_log_hint(log_dir) if log_dir else ""
        return None, f"run_kafka_job: {e}" + (f"; Flink log: {hint}" if hint else "")
    except Exception as e:  # a job that cannot run is reported, never faked
        text = str(e)
        causes = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("Caused by:")]
        (work / "kafka_job_error.txt").write_text(text)
        log("[kafka] run_kafka_job failed; Java causes:\n  " + "\n  ".join(causes[-6:]))
        first = text.strip().splitlines()[0] if text.strip() else ""
        return None, f"run_kafka_job failed: {type(e).__name__}: {first[:200]} / root cause: {(causes or ['?'])[-1][:300]}"
    finally:
        try:
            delete_topics(bootstrap, topics)
        except Exception as e:
            log(f"[kafka] could not delete bench topics {topics}: {e}")


# ------------------------------------------------------------------------------ (d) start-up


def services_cmd(*args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "AUDITFLOW_PYTHON": sys.executable}
    t0 = time.perf_counter()
    res = subprocess.run([str(ROOT / "deploy" / "services"), *args], capture_output=True, text=True,
                         timeout=timeout, env=env)
    return res, time.perf_counter() - t0


def startup(repeats: int) -> dict:
    """Time `deploy/services status`, then `up` of what runs (a no-op: nothing is started)."""
    status_s, up_s = [], []
    res, t = services_cmd("status", timeout=300)
    status_s.append(t)
    running = [n for n in ("kafka", "neo4j", "flink") if re.search(rf"^{n}\s+running\b", res.stdout, re.M)]
    skipped = [n for n in ("kafka", "neo4j", "flink") if n not in running]
    for _ in range(repeats - 1):
        status_s.append(services_cmd("status", timeout=300)[1])
    started = []
    if running:
        for _ in range(repeats):
            res, t = services_cmd("up", *running, timeout=600)
            up_s.append(t)
            started += [n for n in running if f"{n}: starting" in res.stderr]
            if res.returncode != 0:
                log(f"[startup] deploy/services up {' '.join(running)} failed: {res.stderr[-500:]}")
                break
    log(f"[startup] running: {', '.join(running) or 'none'}; status {min(status_s):.2f}s, "
        + (f"up (no-op) best {min(up_s):.2f}s median {statistics.median(up_s):.2f}s" if up_s else "up not timed"))
    if started:
        log(f"[startup] WARNING: up restarted {sorted(set(started))} (it was not running after all)")
    return {"running": running, "skipped": skipped, "status_s": status_s, "up_s": up_s}


# ------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="~50k edges, 50 traces")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--edges", type=int, help="graph size (default 1,000,000; quick 50,000)")
    ap.add_argument("--traces", type=int, help="roots per configuration (default 200; quick 50)")
    ap.add_argument("--trace-budget", type=float,
                    help="seconds per configuration after which no new root is started (default 300; quick 5)")
    ap.add_argument("--neo4j-budget", type=float, default=600.0, help="seconds of Neo4j writes at most")
    ap.add_argument("--kafka-events", type=int, help="events through Kafka->Flink->Kafka (default 50k; quick 2k)")
    ap.add_argument("--kafka-timeout", type=float, help="seconds the Kafka job may run (default 600; quick 180)")
    ap.add_argument("--skip-kafka", action="store_true")
    ap.add_argument("--startup-repeats", type=int, help="timed status/up calls (default 5; quick 2)")
    args = ap.parse_args(argv)
    quick = args.quick
    edges = args.edges or (50_000 if quick else 1_000_000)
    n_traces = args.traces or (50 if quick else 200)
    kafka_events = args.kafka_events or (1_000 if quick else 50_000)
    trace_budget = args.trace_budget or (5.0 if quick else 300.0)

    from auditflow_app.settings import Settings
    from evidence_graph import NetworkxGraphStore
    from evidence_graph.neo4j_store import Neo4jGraphStore

    boot = startup(args.startup_repeats or (2 if quick else 5))
    events, accounts = make_events(edges, args.seed)
    namespace = f"bench_{os.getpid()}"
    settings = Settings()  # AUDITFLOW_NEO4J_URI and its credentials (deploy/services env)
    store = Neo4jGraphStore(settings.neo4j_uri, namespace=namespace, **settings.neo4j_auth)
    log(f"[neo4j] {store!r}")
    try:
        written, w_s, created, partial = neo4j_write(store, events, args.neo4j_budget)
        events = events[:written]
        neo4j_rate = written / w_s
        neo4j_edges = store.edge_count()
        t0 = time.perf_counter()
        embedded = NetworkxGraphStore()
        embedded.add_transactions(events)
        e_s = time.perf_counter() - t0
        log(f"[embedded] {embedded.edge_count():,} edges loaded in {e_s:.1f}s")
        if neo4j_edges != embedded.edge_count():
            log(f"[neo4j] WARNING: {neo4j_edges} edges in Neo4j, {embedded.edge_count()} embedded")

        n_accounts_graph = embedded.node_count()
        stores = {"embedded": (embedded, False), "neo4j": (store, False), "embedded_gcfrozen": (embedded, True)}
        roots = pick_roots(events, n_traces + 5, args.seed)
        warm, roots = roots[:5], roots[5:]
        trace_pass(stores, warm, False)
        trace_pass(stores, warm, True)
        results = {}
        for windowed in (False, True):
            t0 = time.perf_counter()
            results[windowed] = trace_pass(stores, roots, windowed, trace_budget)
            done = len(results[windowed][0]["neo4j"])
            log(f"[trace] {'3-day window' if windowed else 'no window'}: {done}/{len(roots)} roots x 2 backends "
                f"in {time.perf_counter() - t0:.1f}s")
    finally:
        drop_s = cleanup(store)


    n_events = len(events)
    del events, embedded, stores  # free the graph before the Kafka part
    kafka, kafka_rate, kafka_steady = None, None, None
    if args.skip_kafka:
        why = "--skip-kafka"
    else:
        with tempfile.TemporaryDirectory(prefix="bench_services_") as tmp:
            own_log = not os.environ.get("FLINK_LOG_DIR")
            if own_log:  # this process's own PyFlink log, not the shared one in the pyflink package
                os.environ["FLINK_LOG_DIR"] = str(Path(tmp) / "flink-log")
            log_dir = Path(os.environ["FLINK_LOG_DIR"])
            kafka, why = kafka_flink(kafka_events, args.seed, Path(tmp), warmup=not quick,
                                     timeout_s=args.kafka_timeout or (180.0 if quick else 600.0), log_dir=log_dir)
            if kafka is None and own_log and log_dir.is_dir():
                kept = Path(tempfile.gettempdir()) / f"bench_services_flink_log_{os.getpid()}"
                shutil.copytree(log_dir, kept, dirs_exist_ok=True)
                log(f"[kafka] the job's Flink log is kept in {kept}")
    if kafka is None:
        log(f"[kafka] kafka_flink_events_per_s=na: {why}")
    else:
        kafka_rate = kafka["events"] / kafka["seconds"]
        if kafka["startup"] is not None and kafka["seconds"] > kafka["startup"]:
            kafka_steady = kafka["events"] / (kafka["seconds"] - kafka["startup"])

    rows = [
        ("graph", f"{n_events:,} edges", f"{n_accounts_graph:,} accounts ({accounts:,} generated), {DAYS} days"),
        ("neo4j writes", f"{w_s:.1f} s", f"{neo4j_rate:,.0f} edges/s{' (PARTIAL: budget hit)' if partial else ''}, "
                                          f"{created:,} created"),
        ("embedded load", f"{e_s:.1f} s", f"{n_events / e_s:,.0f} edges/s"),
        ("neo4j namespace drop", "failed" if drop_s is None else f"{drop_s:.1f} s", ""),
    ]
    head_trace = {}
    mism_total, traced = 0, {}
    for windowed, label in ((False, "no window"), (True, "+-3 days")):
        times, sizes, mism = results[windowed]
        mism_total += mism
        traced[windowed] = len(times["neo4j"])
        label = f"{label}, {traced[windowed]} roots"
        for name in ("embedded", "neo4j", "embedded_gcfrozen"):
            ts = times[name]
            nn = np.mean([s[0] for s in sizes[name]])
            ne = np.mean([s[1] for s in sizes[name]])
            rows.append((f"trace 5 hops, {label}, {name}",
                         f"p50 {pct(ts, 50):.1f} ms",
                         f"p99 {pct(ts, 99):.1f} ms, mean {np.mean(ts) * 1000:.1f} ms, "
                         f"{nn:.0f} nodes / {ne:.0f} edges avg"))
        sfx = "" if not windowed else "_window"
        for name in ("neo4j", "embedded", "embedded_gcfrozen"):
            head_trace[f"trace_p50_ms_{name}{sfx}"] = f"{pct(times[name], 50):.1f}"
            head_trace[f"trace_p99_ms_{name}{sfx}"] = f"{pct(times[name], 99):.1f}"
    n_traced = traced[False] + traced[True]
    rows.append(("trace ids equal across backends", f"{n_traced - mism_total}/{n_traced}", ""))
    rows.append(("kafka->flink->kafka", "na" if kafka_rate is None else f"{kafka_rate:,.0f} ev/s", why))
    if kafka is not None:
        rows.append(("  kafka produce (untimed above)", f"{kafka['produce_s']:.1f} s",
                     f"{kafka['events'] / kafka['produce_s']:,.0f} ev/s (ingest.kafka_io.produce_file)"))
        if kafka["startup"] is not None:
            rows.append(("  kafka job startup (10 events)", f"{kafka['startup']:.1f} s",
                         "steady " + (f"{kafka_steady:,.0f} ev/s" if kafka_steady else "n/a")))

    rows.append(("deploy/services status", f"{min(boot['status_s']):.2f} s",
                 f"median {statistics.median(boot['status_s']):.2f} s of {len(boot['status_s'])}"))
    rows.append(("deploy/services up (all up: no-op)",
                 f"{min(boot['up_s']):.2f} s" if boot["up_s"] else "na",
                 (f"median {statistics.median(boot['up_s']):.2f} s of {len(boot['up_s'])}, "
                  f"services {', '.join(boot['running'])}") if boot["up_s"] else "nothing running"))

    w = max(len(r[0]) for r in rows)
    print(f"services ({'quick' if quick else 'full'}, seed {args.seed}, {len(roots)} roots drawn per configuration, "
          f"trace budget {trace_budget:.0f} s per configuration, "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f})")
    for a, b, c in rows:
        print(f"  {a:<{w}}  {b:>16}  {c}")
    head = {
        "kafka_flink_events_per_s": "na" if kafka_rate is None else f"{kafka_rate:.0f}",
        "neo4j_edges_per_s": f"{neo4j_rate:.0f}",
        "trace_p99_ms_neo4j": head_trace.pop("trace_p99_ms_neo4j"),
        "trace_p99_ms_embedded": head_trace.pop("trace_p99_ms_embedded"),
        "trace_p50_ms_neo4j": head_trace.pop("trace_p50_ms_neo4j"),
        "trace_p50_ms_embedded": head_trace.pop("trace_p50_ms_embedded"),
        **head_trace,
        "edges": str(n_events),
        "traces": str(traced[False]),
        "traces_window": str(traced[True]),
        "traces_drawn": str(len(roots)),
        "traces_match": "yes" if mism_total == 0 else "no",
    }
    if kafka_steady is not None:
        head["steady_kafka_flink_events_per_s"] = f"{kafka_steady:.0f}"
    if kafka is not None:
        head["kafka_events"] = str(kafka["events"])
    if partial:
        head["neo4j_partial"] = "1"
    head["up_noop_s"] = f"{min(boot['up_s']):.2f}" if boot["up_s"] else "na"
    head["status_s"] = f"{min(boot['status_s']):.2f}"
    if boot["skipped"]:
        head["startup_skipped"] = ",".join(boot["skipped"])
    print("services " + " ".join(f"{k}={v}" for k, v in head.items()))
    return 0 if mism_total == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
