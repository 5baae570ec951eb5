"""Stream job throughput, JVM ceiling, reference, produce rate and live event->alert latency, in one run.

    python bench/stream_throughput.py --quick    # ~200k events, ~20 s of live latency (under 3 minutes)
    python bench/stream_throughput.py            # ~650k events, ~30 s of live latency
    python bench/stream_throughput.py --memory   # also the JVM's heap after 1M events through the job
    python bench/stream_throughput.py --profile  # also one more job run under Java Flight Recorder

On a shared machine run it as ``flock /tmp/af-heavy.lock .venv/bin/python bench/stream_throughput.py ...``.
Kafka (parts 4 and 5) from ``deploy/services up kafka``: $AUDITFLOW_KAFKA_BOOTSTRAP and
$AUDITFLOW_FLINK_KAFKA_JAR (``eval "$(deploy/services env)"``); without it those parts are ``na``.

Data: one seeded live set (``ingest.synthetic.generate`` + ``write_dataset``; 9 days, so the 7-day
window fills and slides), turned into a wire file by the job's own ingestion
(:func:`pipelines.stream_job.write_wire_file`, the ``af1`` form); a cascade trained first
(:func:`auditflow_app.flow.train`) on a separate seeded history set (laundering_rate=0.01). Every
figure below is over those same events.

1. **Stream job** (:func:`pipelines.stream_job.run_wire_job`, ``graph_url=None``, scorer
   :func:`model_service.fast_path.batch_scorer`: the full feature set and the real xgboost fast
   score; default event-time rules). Steady state by difference, both runs in this process after
   a 300-record warm-up job (which launches PyFlink's gateway JVM): the job over the first
   ``N_small = 0.15 N`` wire records and over all ``N``; ``steady = (N - N_small) / (t(N) -
   t(N_small))``, so the job's start (MiniCluster, planning and code generation, Python workers,
   model load) cancels out; it is reported as ``startup_s = t(N_small) - N_small / steady``. ``t``
   is the wall time of the whole ``run_wire_job`` call (the job's outputs collected). At
   parallelism 1 and 2: ``scale_p2 = steady_p2 / steady_p1``. CPU and peak RSS are read from /proc
   during each job: the gateway JVM (this process's child ``java``: it runs the MiniCluster,
   JobManager and TaskManager in one JVM), its descendants (the Python UDF workers) and this
   process (the PyFlink client). The JVM's CPU per thread (task threads are named by operator
   chain with one ``jstack`` once the tasks are deployed) of the full run minus the small run
   shows where the steady-state time goes; ``--profile`` adds a run under JFR (stack samples per
   thread, grouped by what the code does).
2. **JVM ceiling**: a Flink SQL job, no Python at all, over the same wire file with the same
   window shapes: both legs of each transfer, three event-time OVER windows (RANGE 1 h, 1 d, 7 d,
   PARTITION BY account ORDER BY ts) each with COUNT and SUM per direction and COUNT(DISTINCT
   counterparty) per direction, each its own OVER subquery, joined back per leg, then both legs
   joined per transfer (interval joins ``b.ts BETWEEN a.ts AND a.ts``: state stays bounded), into
   a blackhole sink; the job's environment (``table_environment``) and watermark bound, the same
   method. ``ratio_to_jvm = steady / ceiling``.
3. **Reference**: plain Python over the same wire records: ``TransactionEvent.from_wire`` ->
   :func:`pipelines.features.admit` -> :func:`pipelines.features.iter_features` -> the same
   scorer in 1000-row batches -> the alert JSON of the alerted rows. ``alerts_match``: its alerted
   event ids equal the job's at p=1 and p=2, and so do the processed / late / duplicate counts.
4. **Produce**: :func:`ingest.kafka_io.produce_file` of the live CSV into a private 3-partition
   topic (as ``auditflow produce`` does: af1 values, acks=all) -> ``produce_events_per_s``.
5. **Live latency** (Kafka): :func:`pipelines.kafka_job.start_kafka_job`, unbounded, at-least-once sinks, spec with
   ``out_of_orderness_ms = --bound-ms`` (default 1000), ``allowed_lateness_ms = 0``, and the
   job's own latency settings (:class:`pipelines.kafka_job.KafkaJobConfig`, what ``auditflow job
   run`` uses): watermarks every 20 ms (``--watermark-ms``; 0: after every record), Python bundles
   of up to 1000 rows (``--arrow-batch``) that end when full or after 20 ms (``--bundle-time-ms``;
   Flink's default 1000 ms), network buffers sent after at most 5 ms (``--buffer-timeout-ms``;
   Flink's default 100 ms): batches stay large under load and small when the stream is slow.
   Checkpoints go to ``execution.checkpointing.dir`` (every 5 s; with the default storage, the
   JobManager's memory, checkpoints fail once the state passes 5 MiB and the job restarts,
   then fails). Scorer :func:`pipelines.testing.linear_scorer` on ``amount_usd``, threshold at the
   pool's 97th percentile (~3% of events alert). Once the job is RUNNING, events are sent
   (confluent-kafka, keyed by sender, ``linger.ms=1``; the af1 value of a pool event with a new
   id, offset and event time, checked against ``TransactionEvent.to_wire``) at ``--rate-frac``
   (0.5) of the p=1 steady rate (or ``--live-rate``), each stamped with its send time (naive UTC,
   ms) as event time. Warm-up until the job keeps up (a new job JIT-compiles its code for its
   first tens of seconds and falls behind): every alert of the last 2 s within bound + 500 ms, at
   most ``--warm-max-s``. If it does not keep up by then (the live job, with the sender and the
   broker on the same cores, can take less than the file job), its live capacity is estimated
   from how fast its alerts' event time advanced, the backlog drained (a trickle keeps the
   watermark going) and the rate lowered to ``--rate-frac`` of that capacity (reported). Then the
   measured phase (``--latency-s``), then ``bound + 1.5 s`` more so the watermark passes the last
   measured events. A consumer thread reads the alerts topic meanwhile; latency = receive time - event
   time of each alert of a measured event (the event time is kept at send: the alert's own
   timestamp has minute resolution): p50 / p99, and ``alert_p99_over_bound_ms = p99 - bound``
   (the bound is the least an alert can wait: legs are applied once the watermark, the latest
   event time minus the bound, passes them). Per 5 s slices of send time too (flat: the job
   keeps up). The job is cancelled and the topics deleted at the end.
6. ``--memory`` (not with ``--quick``): the job over ~1M events of its own (10k accounts, 22
   days: state expires after 7 days idle, windows slide) while the JVM's heap is read every 5 s
   right after a full GC (``jcmd GC.run`` + ``GC.heap_info``), and the RSS from /proc; the peak
   of those readings -> ``mem_heap_after_gc_mb`` (the median of the run's second half and the heap
   after the job are printed too).

The last line is the headline: ``stream_throughput steady_events_per_s=... jvm_ceiling_events_per_s=...
ratio_to_jvm=... scale_p2=... produce_events_per_s=... alert_p99_ms=... alert_p99_over_bound_ms=...
reference_events_per_s=...`` then more keys (alerts_match, startup_s, alert_p50_ms, events, ...).
Figures that could not be measured are ``na`` (e.g. Kafka not up), with the reason in a NOTE.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BATCH = 1000  # reference scoring batch (= the job's Arrow batch)
PARTITIONS = 3
log = functools.partial(print, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ /proc


def _stat(path: str) -> tuple[str, list[str]] | None:
    try:
        with open(path) as fh:
            s = fh.read()
    except OSError:
        return None
    r = s.rfind(")")
    return s[s.find("(") + 1 : r], s[r + 2 :].split()


TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def gateway_jvm() -> int | None:
    """The pid of this process's child ``java`` (PyFlink's gateway: it runs the MiniCluster)."""
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            st = _stat(f"/proc/{pid}/stat")
            if st and st[0] == "java" and st[1][1] == me:
                return int(pid)
    return None


def _descendants(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            st = _stat(f"/proc/{pid}/stat")
            if st:
                kids.setdefault(int(st[1][1]), []).append(int(pid))
    out, todo = [], [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _cpu(st) -> float:
    return (int(st[1][11]) + int(st[1][12])) / TICK


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE / 2**20
    except OSError:
        return 0.0


_NID = re.compile(r'^"(.*)" .*?\bnid=(0x[0-9a-f]+|[0-9]+)', re.M)


def jstack_names(pid: int) -> dict[int, str]:
    try:
        out = subprocess.run(["jstack", str(pid)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(nid, 0): name for name, nid in _NID.findall(out)}


class ProcWatch:
    """Samples the gateway JVM (per thread) and its descendants (the Python UDF workers) from /proc
    in a background thread while a job runs. With ``name_threads``, one ``jstack`` (~0.4 s of JVM
    time) names the threads as soon as the job's tasks are deployed (a thread whose name starts
    with ``deployed_prefix`` appears): /proc only holds the first 15 characters of a name."""

    def __init__(self, interval: float = 0.5, name_threads: bool = False,
                 deployed_prefix: str = "account-feature"):
        self.interval, self.name_threads, self.deployed_prefix = interval, name_threads, deployed_prefix
        self.jvm = gateway_jvm()
        self.base_threads: dict[int, float] = {}
        self.threads: dict[int, tuple[str, float]] = {}
        self.base_workers: dict[int, float] = {}
        self.workers: dict[int, float] = {}
        self.thread_names: dict[int, str] = {}
        self.jvm_rss_max = self.workers_rss_max = 0.0
        self.jvm_cpu0 = self.jvm_cpu1 = 0.0
        self._stop = threading.Event()
        self._t: threading.Thread | None = None
        self.t0 = self.t1 = 0.0

    def _sample(self, first: bool = False) -> None:
        if self.jvm is None:
            self.jvm = gateway_jvm()
            if self.jvm is None:
                return
        st = _stat(f"/proc/{self.jvm}/stat")
        if st is None:
            return
        if first:
            self.jvm_cpu0 = _cpu(st)
        self.jvm_cpu1 = _cpu(st)
        self.jvm_rss_max = max(self.jvm_rss_max, _rss_mb(self.jvm))
        try:
            tids = os.listdir(f"/proc/{self.jvm}/task")
        except OSError:
            tids = []
        for tid in tids:
            t = _stat(f"/proc/{self.jvm}/task/{tid}/stat")
            if t is None:
                continue
            c = _cpu(t)
            if first:
                self.base_threads[int(tid)] = c
            self.threads[int(tid)] = (t[0], c)
        rss = 0.0
        for pid in _descendants(self.jvm):
            s = _stat(f"/proc/{pid}/stat")
            if s is None:
                continue
            if first:
                self.base_workers[pid] = _cpu(s)
            # the last value seen: a worker's CPU after the last sample before it exits is lost
            # (it is killed with the job and not waited for, so it is in no parent's totals)
            self.workers[pid] = _cpu(s)
            rss += _rss_mb(pid)
        self.workers_rss_max = max(self.workers_rss_max, rss)

    def _deployed(self) -> bool:
        return any(comm.startswith(self.deployed_prefix) for comm, _ in self.threads.values())

    def _run(self) -> None:
        named = not self.name_threads
        while not self._stop.wait(self.interval):
            self._sample()
            if not named and self.jvm and self._deployed():
                self.thread_names.update(jstack_names(self.jvm))
                named = True

    def __enter__(self):
        self.t0 = time.perf_counter()
        self._sample(first=True)
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._t:
            self._t.join()
        self._sample()
        self.t1 = time.perf_counter()

    @property
    def jvm_cpu(self) -> float:
        return self.jvm_cpu1 - self.jvm_cpu0

    @property
    def workers_cpu(self) -> float:
        """CPU of the Python workers during the watch (to their last sample, every 0.5 s)."""
        return sum(c - self.base_workers.get(p, 0.0) for p, c in self.workers.items())

    def thread_cpu(self) -> dict[str, float]:
        """{thread group: CPU seconds during the watch}: task threads by operator chain (ids and
        subtask numbers dropped, so runs of one job compare), the rest by kind."""
        agg: dict[str, float] = {}
        for tid, (comm, c) in self.threads.items():
            d = c - self.base_threads.get(tid, 0.0)
            if d > 0:
                name = thread_group(self.thread_names.get(tid, comm))
                agg[name] = agg.get(name, 0.0) + d
        return agg


def thread_group(name: str) -> str:
    name = re.sub(r" \(\d+/\d+\)#\d+$", "", name)
    if name.startswith("Thread-"):
        return "py4j gateway threads (planning, job submission, collect)"
    if re.match(r"C[12] CompilerThread", name):
        return "JIT compiler (C1/C2)"
    if re.match(r"GC Thread|G1 ", name):
        return "GC"
    if re.search(r"\[\d+\]| -> ", name):  # an operator chain
        return re.sub(r"\$\d+\*", "*", re.sub(r"\[\d+\]", "", name))
    return re.sub(r"-?\d+$|#\d+$", "*", name)


# ------------------------------------------------------------------------------ data


@dataclass
class Data:
    work: Path
    model_dir: str
    live_csv: Path
    wire: Path
    wire_small: Path
    n: int
    n_small: int
    events: list  # the first 50k live events (TransactionEvent)
    hist_n: int
    train_s: float
    gen_s: float


def head_file(src: Path, dst: Path, lines: int) -> Path:
    with open(src, "rb") as a, open(dst, "wb") as b:
        for i, line in enumerate(a):
            if i >= lines:
                break
            b.write(line)
    return dst


def make_data(work: Path, accounts: int, days: int, seed: int, hist: tuple[int, int], small_frac: float) -> Data:
    from auditflow_app.flow import train
    from auditflow.records import TransactionEvent
    from auditflow_app.settings import Settings
    from ingest.synthetic import generate, write_dataset
    from pipelines.stream_job import write_wire_file

    t0 = time.perf_counter()
    h = generate(accounts=hist[0], days=hist[1], laundering_rate=0.01, seed=seed + 1000)
    hist_csv, _ = write_dataset(h, work, name="history")
    live = generate(accounts=accounts, days=days, seed=seed)
    live_csv, _ = write_dataset(live, work, name="live")
    wire = work / "live.af1"
    lines, rejects = write_wire_file(live_csv, wire)
    if rejects:
        raise RuntimeError(f"{len(rejects)} generated rows rejected by the reader")
    n = lines
    n_small = max(1000, int(n * small_frac))
    small = head_file(wire, work / "live_small.af1", n_small)
    with open(wire, encoding="utf-8") as fh:  # the live latency part's pool of accounts and amounts
        events = [TransactionEvent.from_wire(x.rstrip("\n")) for x, _ in zip(fh, range(50_000))]
    gen_s = time.perf_counter() - t0
    log(f"[data] history {len(h.events):,} events, live {n:,} events ({accounts} accounts, {days} days), "
        f"small {n_small:,} ({gen_s:.1f}s)")
    t0 = time.perf_counter()
    model_dir = str((work / "model").resolve())
    train(hist_csv, model_dir, Settings(out_dir=work, seed=seed))
    train_s = time.perf_counter() - t0
    log(f"[data] cascade trained in {train_s:.1f}s")
    return Data(work, model_dir, live_csv, wire, small, n, n_small, events, len(h.events), train_s, gen_s)


# ------------------------------------------------------------------------------ 3. reference


def alert_json(ev, score, vec, digest) -> str:
    # what the job's alert UDF emits
    return json.dumps({"event": ev.to_dict(), "score": score, "features": [[k, v] for k, v in vec.items()],
                       "model": digest}, separators=(",", ":"))


def reference(wire: Path, model_dir: str, bound_ms: int, lateness_ms: int) -> dict:
    """decode -> admit -> iter_features -> batch score -> alert JSON, timed per stage."""
    import numpy as np

    from auditflow.records import TransactionEvent
    from model_service.fast_path import batch_scorer
    from pipelines.features import admit, iter_features

    predict, threshold, digest, _names = batch_scorer(model_dir)
    stages = {"decode": 0.0, "admit": 0.0, "features": 0.0, "score": 0.0, "alert json": 0.0}
    ids: list[str] = []
    t0 = time.perf_counter()
    with open(wire, encoding="utf-8") as fh:
        events = [TransactionEvent.from_wire(line.rstrip("\n")) for line in fh]
    t1 = time.perf_counter()
    adm = admit(events, bound_ms, lateness_ms)
    t2 = time.perf_counter()
    stages["decode"], stages["admit"] = t1 - t0, t2 - t1
    pending: list = []

    def flush():
        a = time.perf_counter()
        scores = predict(np.array([list(v.values()) for _, v in pending], dtype=np.float64))
        b = time.perf_counter()
        for (ev, vec), s in zip(pending, scores):
            if s >= threshold:
                alert_json(ev, float(s), vec, digest)
                ids.append(ev.event_id)
        stages["score"] += b - a
        stages["alert json"] += time.perf_counter() - b
        pending.clear()

    it = iter_features(adm.processed)
    while True:
        a = time.perf_counter()
        for item in it:
            pending.append(item)
            if len(pending) >= BATCH:
                break
        stages["features"] += time.perf_counter() - a
        if not pending:
            break
        flush()
    total = time.perf_counter() - t0
    return {"seconds": total, "stages": stages, "ids": ids, "processed": len(adm.processed),
            "late": len(adm.late), "duplicates": len(adm.duplicates), "threshold": threshold}


# ------------------------------------------------------------------------------ 1. the stream job


@dataclass
class Run:
    label: str
    events: int
    wall: float
    jvm_cpu: float
    workers_cpu: float
    jvm_rss: float
    workers_rss: float
    out: object = None
    threads: dict = field(default_factory=dict)
    driver_cpu: float = 0.0  # this process (PyFlink client: planning calls, the collect loop)


def self_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def job_run(label: str, wire: Path, events: int, spec) -> Run:
    from pipelines.stream_job import run_wire_job

    c0 = self_cpu()
    with ProcWatch(name_threads=True) as w:
        out = run_wire_job(wire, spec)
    r = Run(label, events, w.t1 - w.t0, w.jvm_cpu, w.workers_cpu, w.jvm_rss_max, w.workers_rss_max, out,
            w.thread_cpu(), self_cpu() - c0)
    log(f"[job] {label}: {events:,} records in {r.wall:.2f}s ({events / r.wall:,.0f}/s overall), JVM cpu "
        f"{r.jvm_cpu:.1f}s, python workers cpu {r.workers_cpu:.1f}s, driver cpu {r.driver_cpu:.1f}s, JVM rss "
        f"{r.jvm_rss:.0f} MB, {len(out.alerts)} alerts")
    return r


def steady(small: Run, full: Run) -> tuple[float, float]:
    """(steady events/s, startup seconds) from two runs of different size."""
    dt = full.wall - small.wall
    if dt <= 0:
        return float("nan"), float("nan")
    rate = (full.events - small.events) / dt
    return rate, small.wall - small.events / rate


# what a sampled stack is doing: the innermost frame (from the top) that holds one of these
# substrings; within a frame the first match counts
CATEGORIES = [
    ("py4j", "py4j gateway"),
    ("SqlFunctionUtils.splitIndex", "SQL SPLIT_INDEX (splits the whole record per call)"),
    ("SqlFunctionUtils.regExp", "SQL REGEXP"),
    ("java/util/regex", "SQL REGEXP"),
    ("/arrow/", "Arrow batches to/from Python"),
    ("python/", "Python operator (bundles, gRPC)"),
    ("AccountWindow", "AccountWindow.apply (features)"),
    ("InternalTimerServiceImpl", "timers / watermarks"),
    ("HeapPriorityQueue", "timers / watermarks"),
    ("heap/StateTable", "keyed state access"),
    ("heap/CopyOnWriteStateMap", "keyed state access"),
    ("kryo", "Kryo (generic-type state or records)"),
    ("SpillingAdaptiveSpanningRecordDeserializer", "records between tasks: deserialize"),
    ("RecordWriter", "records between tasks: serialize"),
    ("StreamElementSerializer", "records between tasks: (de)serialize"),
    ("BinaryStringData.toString", "SQL string conversion"),
    ("StringUtf8Utils", "SQL string conversion"),
    ("DataStructureConverter", "Table <-> DataStream conversion"),
    ("InputConversionOperator", "Table <-> DataStream conversion"),
    ("OutputConversionOperator", "Table <-> DataStream conversion"),
    ("StreamExecCalc", "generated SQL Calc (other)"),
    ("connector/file", "file source"),
    ("collect/", "collect sink"),
]


def jfr_profile(wire: Path, spec, work: Path, top: int = 8) -> list[str]:
    """Run the job once more under Java Flight Recorder (default settings: ~20 ms stack samples),
    recorded from 2 s after its tasks are deployed to its end; returns a summary per thread."""
    from collections import Counter, defaultdict

    from pipelines.stream_job import run_wire_job

    path = work / "job.jfr"
    pid = gateway_jvm()
    started = threading.Event()

    def start():
        while not started.is_set():
            comms = []
            for tid in os.listdir(f"/proc/{pid}/task"):
                st = _stat(f"/proc/{pid}/task/{tid}/stat")
                comms.append(st[0] if st else "")
            if any(c.startswith("account-feature") for c in comms):
                time.sleep(2.0)
                subprocess.run(["jcmd", str(pid), "JFR.start", "name=stbench", "settings=default",
                                f"filename={path}"], capture_output=True, text=True, timeout=60)
                started.set()
                return
            time.sleep(0.3)

    th = threading.Thread(target=start, daemon=True)
    th.start()
    t0 = time.perf_counter()
    run_wire_job(wire, spec)
    wall = time.perf_counter() - t0
    started.set()
    th.join(5)
    subprocess.run(["jcmd", str(pid), "JFR.stop", "name=stbench"], capture_output=True, text=True, timeout=120)
    out = subprocess.run(["jfr", "print", "--json", "--stack-depth", "48", "--events", "jdk.ExecutionSample",
                          str(path)], capture_output=True, text=True, timeout=600).stdout
    try:
        events = json.loads(out)["recording"]["events"]
    except (ValueError, KeyError):
        return [f"    (no JFR samples: {out[:200]!r})"]
    per: Counter = Counter()
    selfs: dict[str, Counter] = defaultdict(Counter)
    cats: dict[str, Counter] = defaultdict(Counter)
    for e in events:
        v = e["values"]
        t = thread_group(v["sampledThread"].get("javaName") or v["sampledThread"].get("osName") or "?")
        frames = [f"{f['method']['type']['name']}.{f['method']['name']}" for f in (v["stackTrace"] or {}).get("frames", [])]
        if not frames:
            continue
        per[t] += 1
        selfs[t][frames[0].rsplit("/", 1)[-1]] += 1
        cat = next((label for f in frames for key, label in CATEGORIES if key in f), "other")
        cats[t][cat] += 1
    n = sum(per.values())
    lines = [f"  JFR stack samples of a further p=1 full run ({wall:.1f} s, {n} samples of running Java code):"]
    for t, c in per.most_common(6):
        lines.append(f"    {100 * c / n:5.1f}%  {t[:150]}")
        lines.append("           by what it does: " + "; ".join(f"{k} {100 * m / c:.0f}%" for k, m in cats[t].most_common(top)))
        lines.append("           top frames: " + "; ".join(f"{k} {100 * m / c:.0f}%" for k, m in selfs[t].most_common(top)))
    return lines


# ------------------------------------------------------------------------------ 2. the JVM ceiling


def ceiling_sql(wire: Path, bound_ms: int) -> tuple[list[str], str]:
    """(DDL statements, final query) of the SQL-only job with the job's window shapes."""
    from auditflow.limits import FEATURE_WINDOWS
    from auditflow.records import WIRE_FIELDS

    def _field(name: str) -> str:
        return f"SPLIT_INDEX(`value`, ',', {WIRE_FIELDS.index(name)})"

    def sql_interval(ms: int) -> str:
        s, milli = divmod(ms, 1000)
        m, s = divmod(s, 60)
        h, m = divmod(m, 60)
        d, h = divmod(h, 24)
        return f"INTERVAL '{d} {h:02d}:{m:02d}:{s:02d}.{milli:03d}' DAY TO SECOND(3)"

    path = "'" + str(wire.resolve()).replace("'", "''") + "'"
    event_time = f"TO_TIMESTAMP_LTZ(COALESCE(TRY_CAST({_field('ts_ms')} AS BIGINT), 0), 3)"
    ddl = [f"""
        CREATE TEMPORARY TABLE cl_src (
            `value` STRING,
            `ts` AS {event_time},
            WATERMARK FOR `ts` AS `ts` - {sql_interval(bound_ms)}
        ) WITH ('connector' = 'filesystem', 'path' = {path}, 'format' = 'raw')""",
           f"""
        CREATE TEMPORARY VIEW cl_tx AS
        SELECT {_field('event_id')} AS eid, `ts`,
               {_field('from_bank')} || '/' || {_field('from_account')} AS snd,
               {_field('to_bank')} || '/' || {_field('to_account')} AS rcv,
               CAST({_field('paid_usd_cents')} AS BIGINT) AS paid, CAST({_field('received_usd_cents')} AS BIGINT) AS recv
        FROM cl_src""",
           """
        CREATE TEMPORARY VIEW cl_legs AS
        SELECT eid, `ts`, snd AS acct, rcv AS cp, paid AS cents, TRUE AS is_out FROM cl_tx
        UNION ALL
        SELECT eid, `ts`, rcv AS acct, snd AS cp, recv AS cents, FALSE AS is_out FROM cl_tx"""]
    names = []
    for suffix, minutes in FEATURE_WINDOWS:
        name = f"cl_w{suffix}"
        names.append(name)
        ddl.append(f"""
        CREATE TEMPORARY VIEW {name} AS
        SELECT eid, is_out, `ts`,
               COUNT(CASE WHEN is_out THEN 1 END) OVER w AS out_n,
               COUNT(CASE WHEN is_out THEN NULL ELSE 1 END) OVER w AS in_n,
               SUM(CASE WHEN is_out THEN cents ELSE 0 END) OVER w AS out_c,
               SUM(CASE WHEN is_out THEN 0 ELSE cents END) OVER w AS in_c,
               COUNT(DISTINCT CASE WHEN is_out THEN cp END) OVER w AS out_cp,
               COUNT(DISTINCT CASE WHEN is_out THEN NULL ELSE cp END) OVER w AS in_cp
        FROM cl_legs
        WINDOW w AS (PARTITION BY acct ORDER BY `ts` RANGE BETWEEN {sql_interval(minutes * 60_000)} PRECEDING
                     AND CURRENT ROW)""")
    cols = ["out_n", "in_n", "out_c", "in_c", "out_cp", "in_cp"]
    a = names[0]
    sel = [f"{a}.eid", f"{a}.is_out", f"{a}.`ts`"]
    joins = []
    for k, nm in enumerate(names):
        sel += [f"{nm}.{c} AS {c}_{k}" for c in cols]
        if k:
            joins.append(f"JOIN {nm} ON {nm}.eid = {a}.eid AND {nm}.is_out = {a}.is_out "
                         f"AND {nm}.`ts` BETWEEN {a}.`ts` AND {a}.`ts`")
    ddl.append(f"CREATE TEMPORARY VIEW cl_leg_features AS SELECT {', '.join(sel)} FROM {a} {' '.join(joins)}")
    per_leg = [f"{c}_{k}" for k in range(len(names)) for c in cols]
    query = ("SELECT s.eid, " + ", ".join(f"s.{c} AS s_{c}" for c in per_leg) + ", "
             + ", ".join(f"r.{c} AS r_{c}" for c in per_leg)
             + " FROM cl_leg_features s JOIN cl_leg_features r ON s.eid = r.eid AND s.is_out AND NOT r.is_out "
               "AND r.`ts` BETWEEN s.`ts` AND s.`ts`")
    return ddl, query


def ceiling_run(label: str, wire: Path, events: int, bound_ms: int, parallelism: int = 1) -> Run:
    from pipelines.stream_job import table_environment

    with ProcWatch() as w:
        _, t_env = table_environment(parallelism)
        ddl, query = ceiling_sql(wire, bound_ms)
        for stmt in ddl:
            t_env.execute_sql(stmt)
        tab = t_env.sql_query(query)
        schema = tab.get_schema()
        cols = ", ".join(f"`{n}` {t}" for n, t in zip(schema.get_field_names(), schema.get_field_data_types()))
        t_env.create_temporary_view("cl_result", tab)
        t_env.execute_sql(f"CREATE TEMPORARY TABLE cl_sink ({cols}) WITH ('connector' = 'blackhole')")
        t_env.execute_sql("INSERT INTO cl_sink SELECT * FROM cl_result").wait()
    r = Run(label, events, w.t1 - w.t0, w.jvm_cpu, w.workers_cpu, w.jvm_rss_max, w.workers_rss_max)
    log(f"[sql] {label}: {events:,} records in {r.wall:.2f}s, JVM cpu {r.jvm_cpu:.1f}s, rss {r.jvm_rss:.0f} MB")
    return r


# ------------------------------------------------------------------------------ 4./5. Kafka


def kafka_env() -> tuple[str, str | None, str | None]:
    """(bootstrap, connector jar or None, why Kafka is unusable or None)."""
    from auditflow_app.settings import Settings

    s = Settings()
    bootstrap = s.kafka_bootstrap
    jar = str(s.flink_kafka_jar) if s.flink_kafka_jar else os.environ.get("AUDITFLOW_FLINK_KAFKA_JAR")
    if not jar:
        root = Path(__file__).resolve().parent.parent
        found = sorted((root / ".cache" / "deploy" / "flink" / "lib").glob("flink-sql-connector-kafka-*.jar"))
        jar = str(found[-1]) if found else None
    try:
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000}).list_topics(timeout=5)
        if md.brokers is None or not md.brokers:
            return bootstrap, jar, f"no broker at {bootstrap}"
    except Exception as e:
        return bootstrap, jar, f"Kafka not reachable at {bootstrap} ({type(e).__name__}: {e}); start it with " \
                               "`deploy/services up kafka`"
    return bootstrap, jar, None


def produce_bench(bootstrap: str, csv: Path, n: int, tag: str) -> dict:
    from ingest.kafka_io import ProducerOptions, delete_topics, ensure_topics, produce_file

    s = ProducerOptions(bootstrap, f"{tag}-produce", f"{tag}-produce.dlq", PARTITIONS)
    try:
        ensure_topics(bootstrap, {s.topic: PARTITIONS, s.dlq_topic: PARTITIONS})
        summary = produce_file(csv, s, create_topics=False)
        if summary.produced != n or summary.dead_lettered:
            raise RuntimeError(f"produced {summary.produced} of {n}, {summary.dead_lettered} dead-lettered")
        log(f"[produce] {summary.render()}")
        return {"rate": summary.events_per_s, "seconds": summary.elapsed_s}
    finally:
        delete_topics(bootstrap, [s.topic, s.dlq_topic])


def _now_naive_ms():
    from datetime import datetime, timezone

    t = datetime.now(timezone.utc).replace(tzinfo=None)
    return t.replace(microsecond=t.microsecond // 1000 * 1000)


def latency_bench(bootstrap: str, jar: str, pool: list, rate: float, bound_ms: int, measure_s: float,
                  tag: str, flink_conf: dict, warm_s: float = 60.0, drain_s: float = 5.0,
                  start_timeout_s: float = 150.0, rate_frac: float = 0.5, arrow_batch: int = 1000,
                  watermark_ms: int | None = None) -> dict:
    """Live event->alert latency through the unbounded Kafka job (see the module docstring, 5.)."""
    import dataclasses

    import numpy as np
    from confluent_kafka import Consumer, Producer, TopicPartition

    from auditflow.money import usd_cents
    from auditflow.records import epoch_millis
    from ingest.kafka_io import delete_topics, ensure_topics, producer_config
    from pipelines.kafka_job import KafkaJobConfig, job_conf, start_kafka_job
    from pipelines.stream_job import StreamSpec
    from pipelines.testing import linear_scorer

    amounts = np.array([usd_cents(e.amount_paid) / 100.0 for e in pool])
    q = float(np.quantile(amounts, 0.97))
    divisor = 2.0 * q  # score = amount / (2q) >= 0.5  <=>  amount >= q (exact: /2 is exact)
    alerting = amounts / divisor >= 0.5
    conf = dict(flink_conf)
    spec = StreamSpec(scorer_factory=linear_scorer("amount_usd", divisor, 0.5, "bench-latency"),
                      out_of_orderness_ms=bound_ms, allowed_lateness_ms=0, flink_conf=conf,
                      arrow_batch=arrow_batch)
    topics = {f"{tag}-tx": PARTITIONS, f"{tag}-alerts": PARTITIONS, f"{tag}-dlq": PARTITIONS}
    tx, alerts_topic, dlq = list(topics)
    # at-least-once: an alert is visible as soon as it is written; with the product's default,
    # exactly-once, a read_committed reader sees it when the next checkpoint completes
    # (bench/recovery.py measures that latency)
    cfg = KafkaJobConfig(bootstrap, tx, alerts_topic, dlq, jar, group_id=tag, bounded=False,
                         job_name=f"{tag}-latency", delivery="at-least-once")
    if watermark_ms is not None:
        cfg.watermark_interval_ms = watermark_ms
    ensure_topics(bootstrap, topics)
    received: list[tuple[float, bytes]] = []
    stop = threading.Event()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{tag}-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 5, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(alerts_topic, p, 0) for p in range(PARTITIONS)])

    def consume():
        while not stop.is_set():
            msgs = consumer.consume(num_messages=1000, timeout=0.02)
            now = time.time()
            for m in msgs:
                if m.error() is None:
                    received.append((now, m.value()))

    reader = threading.Thread(target=consume, daemon=True, name="alerts-reader")
    reader.start()
    producer = Producer(producer_config(bootstrap, **{"linger.ms": 1, "client.id": f"{tag}-sender"}))
    client = None
    # event id -> (phase, alerting, event time in epoch ms): the alert's own event timestamp
    # (TransactionEvent.to_dict) has minute resolution, so the event time is kept here
    sent: dict[str, tuple[str, bool, int]] = {}
    seq = [0]
    rate_now = [rate]

    # The wire value of pool event j with a new id, event time and offset is
    # "af1,<id>,<ts_ms>,<offset>," + the rest of its own: built from that (a few us an event, where
    # dataclasses.replace + to_wire take ~25 us: at the live rates here the sender would take CPU
    # from the job on this machine); checked against TransactionEvent.to_wire below.
    rests = [e.to_wire().split(",", 4)[4] for e in pool]
    keys = [e.sender.node_id.encode() for e in pool]
    for j in range(0, len(pool), max(1, len(pool) // 50)):
        ev = dataclasses.replace(pool[j], event_id=f"x{j}", timestamp=_now_naive_ms(), source_offset=j)
        if ev.to_wire() != f"af1,x{j},{epoch_millis(ev.timestamp)},{j},{rests[j]}":
            raise AssertionError(f"fast wire value differs from TransactionEvent.to_wire: {ev.to_wire()}")

    def send_for(phase: str, seconds: float, until=None, at: float | None = None) -> int:
        """Send at ``at`` (default: the current rate) events/s for ``seconds`` (or until
        ``until()``), event time = send time (ms)."""
        r = at or rate_now[0]
        t0 = time.perf_counter()
        k = 0
        tag = phase[0]
        while True:
            el = time.perf_counter() - t0
            if el >= seconds or (until is not None and until()):
                break
            due = int(el * r) + 1
            ts_ms = time.time_ns() // 1_000_000  # naive UTC epoch ms, what epoch_millis gives
            while k < due:
                i = seq[0]
                seq[0] += 1
                j = i % len(pool)
                eid = f"{tag}{i}"
                value = f"af1,{eid},{ts_ms},{i},{rests[j]}".encode()
                while True:
                    try:
                        producer.produce(tx, value, keys[j])
                        break
                    except BufferError:  # librdkafka's queue is full: let it drain
                        producer.poll(0.05)
                        if time.perf_counter() - t0 > seconds + 30:
                            raise RuntimeError("the producer's queue stays full: is the broker up?") from None
                sent[eid] = (phase, bool(alerting[j]), ts_ms)
                k += 1
            producer.poll(0)
            time.sleep(0.001)
        producer.flush(10)
        return k

    try:
        t_start = time.perf_counter()
        client = start_kafka_job(cfg, spec)
        while True:
            status = str(client.get_job_status().result())
            if "RUNNING" in status:
                break
            if any(s in status for s in ("FAILED", "CANCELED", "FINISHED")):
                raise RuntimeError(f"Kafka job {status} before running")
            if time.perf_counter() - t_start > start_timeout_s:
                raise RuntimeError(f"Kafka job not RUNNING after {start_timeout_s:.0f}s ({status})")
            time.sleep(0.2)
        running_s = time.perf_counter() - t_start
        log(f"[latency] job RUNNING after {running_s:.1f}s; warming up at {rate:,.0f} events/s")
        # warm-up: until the job keeps up (a fresh job spends its first tens of seconds JIT-compiling
        # its generated code and builds a backlog), i.e. every alert of the last 2 s came back within
        # bound + slack, at least 5 of them; at most warm_s
        slack_ms = max(500.0, bound_ms / 2)
        parsed: list[tuple[float, float, int]] = []  # (receive time, latency ms, event time) of warm-up alerts

        check = [0.0, False]

        def caught_up() -> bool:
            if time.perf_counter() - check[0] < 0.25:
                return check[1]
            check[0] = time.perf_counter()
            for t_recv, v in received[len(parsed):]:
                ph, _, ts_ms = sent.get(json.loads(v)["event"]["event_id"], ("", True, 0))
                parsed.append((t_recv, t_recv * 1000.0 - ts_ms if ph == "warm" else float("inf"), ts_ms))
            now = time.time()
            last = [lt for tr, lt, _ in parsed[-5000:] if tr >= now - 2.0]
            check[1] = len(last) >= 5 and max(last) <= bound_ms + slack_ms
            return check[1]

        def live_capacity(window_s: float = 8.0) -> float | None:
            """Events/s the job got through lately: how fast the event time of its alerts advanced
            (send-time seconds per second) times the rate they were sent at."""
            now = time.time()
            before = [ts for tr, _, ts in parsed if tr <= now - window_s]
            if not before:
                return None
            advance_ms = max(ts for _, _, ts in parsed) - max(before)
            return rate_now[0] * advance_ms / (window_s * 1000.0) if advance_ms > 0 else None

        warm_n = send_for("warm", warm_s, until=caught_up)
        if not received:
            raise RuntimeError(f"no alert within {warm_s:.0f} s of sending")
        check[0] = 0.0
        kept_up = caught_up()
        capacity = None
        if not kept_up:
            # the target rate is more than the live job takes on this machine: measure at rate_frac of
            # what it got through instead, once the backlog is gone (a trickle keeps the watermark going)
            caught_up()
            capacity = live_capacity()
            lower = (rate_frac * capacity) if capacity else rate_now[0] / 4
            log(f"[latency] NOT keeping up at {rate_now[0]:,.0f}/s after {warm_s:.0f}s: the job got through "
                f"~{capacity or float('nan'):,.0f}/s; draining the backlog, then {lower:,.0f}/s")
            warm_n += send_for("warm", 2 * warm_s, until=caught_up, at=min(200.0, lower))
            rate_now[0] = lower
            check[0] = 0.0
            warm_n += send_for("warm", warm_s, until=caught_up)
            check[0] = 0.0
            if not caught_up():
                log("[latency] still not keeping up: measuring anyway")
        warm_done_s = time.perf_counter() - t_start
        warm_n += send_for("warm", 0.5)
        check[0] = 0.0
        ready = caught_up()
        log(f"[latency] warm-up {warm_done_s - running_s:.1f}s ({warm_n:,} events): "
            + ("keeping up" if ready else f"NOT keeping up (alerts later than bound + {slack_ms:.0f} ms)")
            + f"; measuring {measure_s:.0f}s at {rate_now[0]:,.0f}/s")
        t_m = time.perf_counter()
        m_n = send_for("measure", measure_s)
        measured_rate = m_n / (time.perf_counter() - t_m)
        tail_n = send_for("tail", bound_ms / 1000 + 1.5)
        expected = {e for e, (ph, al, _) in sent.items() if ph == "measure" and al}
        deadline = time.perf_counter() + drain_s
        while time.perf_counter() < deadline:
            got = {json.loads(v)["event"]["event_id"] for _, v in list(received)}
            if expected <= got:
                break
            time.sleep(0.2)
    finally:
        stop.set()
        reader.join(5)
        consumer.close()
        if client is not None:
            try:
                client.cancel().result()
            except Exception as e:
                log(f"[latency] cancel: {type(e).__name__}: {e}")
        try:
            delete_topics(bootstrap, list(topics))
        except Exception as e:
            log(f"[latency] could not delete topics {list(topics)}: {e}")
    lat, seen, wrong, by_send = [], set(), 0, []
    t0_ms = min((ts for ph, _, ts in sent.values() if ph == "measure"), default=0)
    for t_recv, v in received:
        eid = json.loads(v)["event"]["event_id"]
        phase, alerts, ts_ms = sent.get(eid, ("", True, 0))
        wrong += not alerts
        if phase != "measure" or eid in seen:
            continue
        seen.add(eid)
        lat.append(t_recv * 1000.0 - ts_ms)
        by_send.append(((ts_ms - t0_ms) / 1000.0, lat[-1]))
    # latency by send time, 5 s slices: shows whether the job kept up (flat) or fell behind (rising)
    slices = []
    for k in range(int(measure_s // 5) + 1):
        xs = [l for t, l in by_send if 5 * k <= t < 5 * (k + 1)]
        if xs:
            slices.append((5 * k, len(xs), float(np.percentile(xs, 50)), float(np.percentile(xs, 99))))
    arr = np.array(lat)
    res = {"rate": measured_rate, "target_rate": rate, "capacity": capacity, "measured_events": m_n, "expected": len(expected),
           "alerts": len(lat), "unexpected": wrong, "running_s": running_s, "warm_s": warm_done_s - running_s,
           "kept_up": kept_up, "ready": ready, "measure_rate": rate_now[0],
           "p50": float(np.percentile(arr, 50)) if lat else float("nan"),
           "p99": float(np.percentile(arr, 99)) if lat else float("nan"),
           "max": float(arr.max()) if lat else float("nan"), "min": float(arr.min()) if lat else float("nan"),
           "tail_events": tail_n, "flink_conf": {**job_conf(cfg), **conf}, "threshold_usd": q, "slices": slices,
           "by_send": by_send}
    log(f"[latency] {len(lat)} of {len(expected)} expected alerts of the measured phase ({m_n:,} events at "
        f"{measured_rate:,.0f}/s): p50 {res['p50']:.0f} ms, p99 {res['p99']:.0f} ms, max {res['max']:.0f} ms; "
        "by send time (s: n p50/p99): " + "; ".join(f"{t}: {n} {a:.0f}/{b:.0f}" for t, n, a, b in slices))
    return res


# ------------------------------------------------------------------------------ 6. memory


def heap_after_gc_mb(pid: int) -> float | None:
    """Heap used right after a full GC (``jcmd GC.run`` then ``GC.heap_info``), MiB."""
    try:
        subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True, text=True, timeout=60)
        out = subprocess.run(["jcmd", str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"total (\d+)K, used (\d+)K", out)
    return int(m.group(2)) / 1024 if m else None


def memory_bench(work: Path, model_dir: str, events: int, seed: int, spec_kw: dict, every_s: float = 5.0) -> dict:
    from ingest.synthetic import generate, write_dataset
    from pipelines.stream_job import run_wire_job, write_wire_file

    accounts = 10_000
    days = max(8, round(events / (accounts * 4.5)))
    ds = generate(accounts=accounts, days=days, seed=seed + 77)
    csv, _ = write_dataset(ds, work, name="memory")
    wire = work / "memory.af1"
    n, _ = write_wire_file(csv, wire)
    del ds
    log(f"[memory] {n:,} events ({accounts} accounts, {days} days); heap after GC every {every_s:.0f}s")
    from pipelines.stream_job import StreamSpec

    samples: list[tuple[float, float | None, float]] = []
    stop = threading.Event()
    pid = gateway_jvm()

    def sample():
        t0 = time.perf_counter()
        while not stop.wait(every_s):
            h = heap_after_gc_mb(pid) if pid else None
            samples.append((time.perf_counter() - t0, h, _rss_mb(pid) if pid else 0.0))

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.perf_counter()
    out = run_wire_job(wire, StreamSpec(**spec_kw))
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    good = [s for s in samples if s[1] is not None]
    late_half = [s[1] for s in good if s[0] >= wall / 2] or [s[1] for s in good]
    res = {"median_late_heap": statistics.median(late_half) if late_half else None,"events": n, "processed": out.processed, "alerts": len(out.alerts), "wall": wall, "samples": samples,
           "last_heap": good[-1][1] if good else None, "max_heap": max(s[1] for s in good) if good else None,
           "max_rss": max((s[2] for s in samples), default=0.0), "idle_heap": heap_after_gc_mb(pid) if pid else None}
    log(f"[memory] {n:,} events in {wall:.1f}s ({len(out.alerts):,} alerts); heap after GC: last {res['last_heap']} MB, max {res['max_heap']} MB; "
        f"JVM rss max {res['max_rss']:.0f} MB; after the job {res['idle_heap']} MB")
    return res


# ------------------------------------------------------------------------------ main


def fmt(x, spec=",.0f", na="na") -> str:
    return na if x is None or (isinstance(x, float) and x != x) else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="~200k events, ~20 s of live latency (under 3 minutes)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--accounts", type=int, help="live set accounts (default 16000; quick 5000)")
    ap.add_argument("--days", type=int, help="live set days (default 9; quick 9)")
    ap.add_argument("--small-frac", type=float, default=0.15, help="N_small / N for the steady-state difference")
    ap.add_argument("--bound-ms", type=int, default=1000, help="out-of-orderness bound of the live latency job")
    ap.add_argument("--latency-s", type=float, help="measured seconds of the live stream (default 30; quick 20)")
    ap.add_argument("--rate-frac", type=float, default=0.5, help="live send rate / the p=1 steady rate")
    ap.add_argument("--live-rate", type=float, help="live send rate in events/s (instead of --rate-frac)")
    ap.add_argument("--buffer-timeout-ms", type=int, help="execution.buffer-timeout of the latency job "
                    "(default: the Kafka job's, 5; Flink's: 100)")
    ap.add_argument("--watermark-ms", type=int, help="watermark interval of the latency job "
                    "(default: the Kafka job's, 20; 0: after every record)")
    ap.add_argument("--arrow-batch", type=int, default=1000,
                    help="most rows per Arrow batch (and bundle) of the latency job")
    ap.add_argument("--bundle-time-ms", type=int, help="python.fn-execution.bundle.time of the latency job "
                    "(default: the Kafka job's, 20; Flink's: 1000)")
    ap.add_argument("--warm-max-s", type=float,
                    help="longest live warm-up at the target rate before lowering it (default 45; quick 30)")
    ap.add_argument("--no-p2", action="store_true", help="skip parallelism 2")
    ap.add_argument("--skip-kafka", action="store_true", help="skip produce and live latency")
    ap.add_argument("--memory", action="store_true", help="also the JVM's memory after --memory-events (not quick)")
    ap.add_argument("--memory-events", type=int, default=1_000_000)
    ap.add_argument("--profile", action="store_true",
                    help="also one more p=1 full run under Java Flight Recorder: where its JVM time goes")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it")
    args = ap.parse_args(argv)
    quick = args.quick
    if quick and args.memory:
        ap.error("--memory is not part of --quick")
    accounts = args.accounts or (5000 if quick else 16_000)
    days = args.days or 9
    # the same history (and so model) for quick and full: stage 1's candidate threshold is set in
    # training for recall, and the alert rate it gives on the live set changes the job's work
    # (every alert is collected through the PyFlink client)
    hist = (300, 4)
    latency_s = args.latency_s or (20.0 if quick else 30.0)
    t_begin = time.perf_counter()

    from auditflow.limits import DEFAULT_ALLOWED_LATENESS_MS, DEFAULT_OUT_OF_ORDERNESS_MS
    from model_service.fast_path import batch_scorer
    from pipelines.stream_job import StreamSpec

    tmp = None
    if args.keep:
        work = Path(args.keep).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_stream_")
        work = Path(tmp.name)
    # this process's own PyFlink log, not the one shared in the pyflink package
    os.environ.setdefault("FLINK_LOG_DIR", str(work / "flink-log"))
    tag = f"stbench-{uuid.uuid4().hex[:10]}"
    notes: list[str] = []
    try:
        d = make_data(work, accounts, days, args.seed, hist, args.small_frac)
        bound, lateness = DEFAULT_OUT_OF_ORDERNESS_MS, DEFAULT_ALLOWED_LATENESS_MS
        spec_kw = dict(scorer_factory=functools.partial(batch_scorer, d.model_dir), graph_url=None,
                       out_of_orderness_ms=bound, allowed_lateness_ms=lateness)

        # 3. the reference (no JVM running yet)
        ref = reference(d.wire, d.model_dir, bound, lateness)
        ref_rate = d.n / ref["seconds"]
        log(f"[reference] {d.n:,} events in {ref['seconds']:.1f}s ({ref_rate:,.0f}/s): "
            + ", ".join(f"{k} {v:.1f}s" for k, v in ref["stages"].items()) + f"; {len(ref['ids'])} alerts")
        ref_ids = sorted(ref["ids"])

        # 1. the stream job: a warm-up (launches the gateway JVM, builds the operator jar), small, full
        warm_wire = head_file(d.wire, work / "live_warm.af1", 300)
        warm = job_run("warm-up (JVM launch)", warm_wire, 300, StreamSpec(**spec_kw))
        runs: dict[str, tuple[Run, Run]] = {}
        for p in ([1] if args.no_p2 else [1, 2]):
            spec = StreamSpec(**spec_kw, parallelism=p)
            small = job_run(f"p={p} small", d.wire_small, d.n_small, spec)
            full = job_run(f"p={p} full", d.wire, d.n, spec)
            runs[f"p{p}"] = (small, full)
        profile = jfr_profile(d.wire, StreamSpec(**spec_kw), work) if args.profile else []
        matches = {}
        for k, (_, full) in runs.items():
            out = full.out
            ids = sorted(a["event"]["event_id"] for a in out.alerts)
            counts_ok = (out.processed, len(out.late), len(out.duplicates), len(out.rejects)) == \
                        (ref["processed"], ref["late"], ref["duplicates"], 0)
            matches[k] = ids == ref_ids and counts_ok
            if not matches[k]:
                notes.append(f"{k}: job {len(ids)} alerts / processed {out.processed} late {len(out.late)} dup "
                             f"{len(out.duplicates)}; reference {len(ref_ids)} / {ref['processed']} {ref['late']} "
                             f"{ref['duplicates']}; common alerts {len(set(ids) & set(ref_ids))}")
        alerts_match = all(matches.values())
        p1_rate, p1_start = steady(*runs["p1"])
        p2_rate, p2_start = steady(*runs["p2"]) if "p2" in runs else (None, None)

        # 2. the JVM ceiling
        c_small = ceiling_run("ceiling small", d.wire_small, d.n_small, bound)
        c_full = ceiling_run("ceiling full", d.wire, d.n, bound)
        ceil_rate, ceil_start = steady(c_small, c_full)

        # 4. produce and 5. live latency
        prod = lat = None
        if args.skip_kafka:
            notes.append("Kafka parts skipped (--skip-kafka)")
        else:
            bootstrap, jar, why = kafka_env()
            if why:
                notes.append(f"Kafka parts n/a: {why}")
                log(f"[kafka] SKIPPED: {why}")
            else:
                try:
                    prod = produce_bench(bootstrap, d.live_csv, d.n, tag)
                except Exception as e:
                    notes.append(f"produce failed: {type(e).__name__}: {e}")
                    log(f"[produce] FAILED: {type(e).__name__}: {e}")
                if not jar or not Path(jar).is_file():
                    notes.append(f"latency n/a: no Kafka connector jar ({jar}); run `deploy/services connector-jar`")
                elif not (p1_rate and p1_rate == p1_rate):
                    notes.append("latency n/a: no steady rate measured")
                else:
                    try:
                        # the job's default checkpoint storage (the JobManager's memory) takes at
                        # most 5 MiB of state: past that checkpoints fail and the job restarts,
                        # then fails; a directory makes it the file system's
                        conf = {"execution.checkpointing.dir": (work / "checkpoints").as_uri()}
                        if args.buffer_timeout_ms is not None:
                            conf["execution.buffer-timeout"] = f"{args.buffer_timeout_ms} ms"
                        if args.bundle_time_ms is not None:
                            conf["python.fn-execution.bundle.time"] = str(args.bundle_time_ms)
                        lat = latency_bench(bootstrap, jar, d.events[:50_000],
                                            args.live_rate or args.rate_frac * p1_rate,
                                            args.bound_ms, latency_s, tag, conf,
                                            warm_s=args.warm_max_s or (30.0 if quick else 45.0),
                                            rate_frac=args.rate_frac, arrow_batch=args.arrow_batch,
                                            watermark_ms=args.watermark_ms)
                        if not lat["kept_up"]:
                            notes.append(f"latency: the live Kafka job did not keep up with {lat['target_rate']:,.0f} "
                                         f"events/s ({args.rate_frac} x the file job's steady rate) in its "
                                         f"warm-up; it got through ~{fmt(lat['capacity'])}/s, so the "
                                         f"latency is measured at {lat['measure_rate']:,.0f}/s")
                        if not lat["ready"]:
                            notes.append("latency: the job was still behind when the measurement began")
                        if lat["alerts"] < lat["expected"]:
                            notes.append(f"latency: {lat['expected'] - lat['alerts']} expected alerts did not "
                                         "come back in time")
                        if lat["unexpected"]:
                            notes.append(f"latency: {lat['unexpected']} alerts on events that should not alert")
                    except Exception as e:
                        notes.append(f"latency failed: {type(e).__name__}: {str(e)[:300]}")
                        log(f"[latency] FAILED: {type(e).__name__}: {e}")

        # 6. memory
        mem = None
        if args.memory:
            mem = memory_bench(work, d.model_dir, args.memory_events, args.seed, spec_kw)
    finally:
        if tmp is not None:
            tmp.cleanup()

    # ---------------------------------------------------------------- report
    total_s = time.perf_counter() - t_begin
    rows: list[tuple[str, str, str]] = [
        ("events (live set)", f"{d.n:,}", f"{accounts} accounts, {days} days; N_small {d.n_small:,}; seed {args.seed}"),
        ("history / train", f"{d.train_s:.1f} s", f"{d.hist_n:,} events, laundering_rate 0.01"),
        ("reference (admit+iter_features+batch)", f"{fmt(ref_rate)} ev/s",
         f"{ref['seconds']:.1f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in ref["stages"].items())),
        ("alerts job p=1 / p=2 / reference",
         " / ".join(str(len(f.out.alerts)) for _, f in runs.values()) + f" / {len(ref_ids)}",
         "alerts_match=" + ("yes" if alerts_match else "no") + " (same event ids, same processed/late/dup)"),
        ("job warm-up (cold JVM, 300 records)", f"{warm.wall:.1f} s", ""),
    ]
    for k, (small, full) in runs.items():
        rate, start = steady(small, full)
        rows += [
            (f"job {k} small / full", f"{small.wall:.1f} / {full.wall:.1f} s",
             f"JVM cpu {small.jvm_cpu:.1f} / {full.jvm_cpu:.1f} s, python workers cpu {small.workers_cpu:.1f} / "
             f"{full.workers_cpu:.1f} s, driver (this process) cpu {small.driver_cpu:.1f} / {full.driver_cpu:.1f} s"),
            (f"job {k} steady", f"{fmt(rate)} ev/s", f"startup {start:.1f} s; JVM rss peak {full.jvm_rss:.0f} MB, "
                                                    f"workers {full.workers_rss:.0f} MB"),
            (f"job {k} CPU per event (full - small)",
             f"{(full.jvm_cpu - small.jvm_cpu) / (full.events - small.events) * 1e6:.0f} us JVM",
             f"+ {(full.workers_cpu - small.workers_cpu) / (full.events - small.events) * 1e6:.0f} us python workers "
             f"+ {(full.driver_cpu - small.driver_cpu) / (full.events - small.events) * 1e6:.0f} us driver"),
        ]
    rows += [
        ("JVM ceiling (SQL) small / full", f"{c_small.wall:.1f} / {c_full.wall:.1f} s",
         f"JVM cpu {c_small.jvm_cpu:.1f} / {c_full.jvm_cpu:.1f} s, rss peak {c_full.jvm_rss:.0f} MB"),
        ("JVM ceiling steady", f"{fmt(ceil_rate)} ev/s", f"startup {ceil_start:.1f} s"),
        ("ratio_to_jvm (job p=1 / ceiling)", fmt(p1_rate / ceil_rate, ".3f"), ""),
    ]
    if "p2" in runs:
        rows.append(("scale_p2 (p=2 / p=1)", fmt(p2_rate / p1_rate, ".3f"), f"{os.cpu_count()} cpus"))
    rows.append(("produce (confluent-kafka)", f"{fmt(prod['rate'])} ev/s" if prod else "na",
                 f"{prod['seconds']:.1f} s, {PARTITIONS} partitions" if prod else ""))
    if lat:
        rows += [
            ("live stream sent", f"{lat['rate']:,.0f} ev/s",
             f"target {lat['target_rate']:,.0f} = {args.rate_frac} x p=1 steady"
             + ("" if lat["kept_up"] else f" (not kept up: live capacity ~{fmt(lat['capacity'])}/s)")
             + f", {lat['measured_events']:,} events in {latency_s:.0f} s; flink_conf {lat['flink_conf'] or 'defaults'}"),
            ("alerts measured", f"{lat['alerts']} of {lat['expected']}",
             f"amount_usd >= {lat['threshold_usd']:,.2f}; {lat['unexpected']} unexpected; job RUNNING after "
             f"{lat['running_s']:.1f} s, warm-up {lat['warm_s']:.1f} s"
             + ("" if lat["kept_up"] else f" (NOT keeping up at {lat['target_rate']:,.0f}/s: measured at "
                                          f"{lat['measure_rate']:,.0f}/s)")),
            ("latency by send time", "5 s slices", "; ".join(f"{t}s: p50 {a:.0f} p99 {b:.0f}"
                                                             for t, _, a, b in lat["slices"])),
            ("event->alert latency p50 / p99", f"{lat['p50']:.0f} / {lat['p99']:.0f} ms",
             f"min {lat['min']:.0f} max {lat['max']:.0f} ms; bound {args.bound_ms} ms -> p99 over bound "
             f"{lat['p99'] - args.bound_ms:.0f} ms"),
        ]
    else:
        rows.append(("event->alert latency", "na", ""))
    if mem:
        rows.append((f"JVM heap after GC, {mem['events']:,} events", f"{fmt(mem['max_heap'])} MB peak",
                     f"median of the 2nd half of the run {fmt(mem['median_late_heap'])} MB, last {fmt(mem['last_heap'])} MB, "
                     f"after the job {fmt(mem['idle_heap'])} MB; JVM rss max {mem['max_rss']:.0f} MB; "
                     f"{mem['events'] / mem['wall']:,.0f} ev/s with a GC every 5 s"))
    w = max(len(r[0]) for r in rows)
    print(f"\nstream_throughput ({'quick' if quick else 'full'}, {os.cpu_count()} cpus, load "
          f"{os.getloadavg()[0]:.1f}, total {total_s:.0f} s)")
    for a, b, c in rows:
        print(f"  {a:<{w}}  {b:>22}  {c}")
    full1, small1 = runs["p1"][1], runs["p1"][0]
    extra = full1.events - small1.events
    diff = {k: full1.threads.get(k, 0.0) - small1.threads.get(k, 0.0) for k in set(full1.threads) | set(small1.threads)}
    tot = sum(diff.values())
    print(f"\n  JVM CPU by thread, job p=1, steady part (full - small run: {extra:,} more events, "
          f"{full1.jvm_cpu - small1.jvm_cpu:.1f} s JVM + {full1.workers_cpu - small1.workers_cpu:.1f} s python workers):")
    for name, c in sorted(diff.items(), key=lambda kv: -kv[1])[:14]:
        if c > 0.05:
            print(f"    {c:6.1f} s  {100 * c / tot:5.1f}%  {c / extra * 1e6:5.0f} us/event  {name[:160]}")
    for line in profile:
        print(line)
    if mem:
        print("\n  memory samples (s, heap after GC MB, JVM rss MB): "
              + "; ".join(f"{t:.0f} {fmt(h)} {r:.0f}" for t, h, r in mem["samples"]))
    for n_ in notes:
        print(f"  NOTE: {n_}")

    head = {
        "steady_events_per_s": fmt(p1_rate, ".0f"),
        "jvm_ceiling_events_per_s": fmt(ceil_rate, ".0f"),
        "ratio_to_jvm": fmt(p1_rate / ceil_rate, ".3f"),
        "scale_p2": fmt(p2_rate / p1_rate, ".3f") if p2_rate else "na",
        "produce_events_per_s": fmt(prod["rate"], ".0f") if prod else "na",
        "alert_p99_ms": fmt(lat["p99"], ".0f") if lat else "na",
        "alert_p99_over_bound_ms": fmt(lat["p99"] - args.bound_ms, ".0f") if lat else "na",
        "reference_events_per_s": fmt(ref_rate, ".0f"),
        "alerts_match": "yes" if alerts_match else "no",
        "startup_s": fmt(p1_start, ".1f"),
        "steady_p2_events_per_s": fmt(p2_rate, ".0f") if p2_rate else "na",
        "alert_p50_ms": fmt(lat["p50"], ".0f") if lat else "na",
        "bound_ms": str(args.bound_ms),
        "live_rate": fmt(lat["rate"], ".0f") if lat else "na",
        "events": str(d.n),
        "tm_rss_mb": f"{full1.jvm_rss:.0f}",
        "jvm_cpu_us_per_event": f"{(full1.jvm_cpu - runs['p1'][0].jvm_cpu) / (d.n - d.n_small) * 1e6:.0f}",
        "py_cpu_us_per_event": f"{(full1.workers_cpu - runs['p1'][0].workers_cpu) / (d.n - d.n_small) * 1e6:.0f}",
    }
    if mem:
        head["mem_heap_after_gc_mb"] = fmt(mem["max_heap"], ".0f")
        head["mem_events"] = str(mem["events"])
    print("stream_throughput " + " ".join(f"{k}={v}" for k, v in head.items()))
    return 0 if alerts_match else 1


if __name__ == "__main__":
    raise SystemExit(main())
