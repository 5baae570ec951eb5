"""Audit reports cost: reports/s, verify time, Merkle log append and proof cost, tamper detection.

    python bench/reports.py            # 100 reports, 1,000 proofs per log size
    python bench/reports.py --quick    # 20 reports, 200 proofs per log size

What is measured (wall clock; the process pinned to one CPU where the OS allows):

* **reports/s**: :class:`reports.ReportWriter` writing N alert reports without a narrative
  (template narrative, ``sar`` profile) into a fresh folder: PDF, compressed trace, signed
  manifest, locked and fsynced log append each; then the signed tree head -> ``per_s``.
  The alerts are the hand-built case of ``reports.testing`` with their own event ids.
* **verify**: :func:`reports.verify.verify_reports` of that folder against the trusted key and
  the kept tree head, divided by N -> ``verify_ms`` (per report; best of 3).
* **log**: audit logs of 10^3, 10^4 and 10^5 entries (the lines written in one go, then opened,
  which checks and hashes every line into the tree). At each size: one locked, fsynced
  ``append`` (median of 50) -> append_us; an inclusion proof of a random entry made and verified
  against the root (median) -> ``proof_us`` (``proof_us_at_1e5`` at 10^5); a consistency proof
  from a random older size, made and verified (median) -> consistency_us; the proof lengths.
  Proofs are O(log n): the columns should grow like log2(n) (10, 13.3, 16.6), not like n.
* **tamper**: every case of ``reports.testing.TAMPER_CASES`` applied to a copy of a small
  signed folder; a case counts as detected when verify (with the kept tree head) fails naming
  what the case expects -> ``tamper_detected`` (share of cases, 1 = all) of ``tamper_cases``.
* **evidence** of alerts on real graphs, per source: our generator at the demo's density
  (``ingest.synthetic.generate``, 800 accounts, 12 days; quick: 300 accounts, 8 days) and, where
  its converted files are cached (``python bench/datasets/build.py``), IBM's AMLSim (third
  party, ``amlsim-days-s3``). Alerts are transfers drawn with a seeded RNG after the first 3 days:
  half laundering, half not (a model's alerts are both). Per alert, as the deep path makes it
  (:func:`auditflow_app.flow.trace_and_typologies`, :func:`auditflow_app.flow.alert_trail`,
  :func:`auditflow_app.flow.sar_context` with the default settings): the money trail (accounts on
  it, distinct -> ``trail_accounts_median``; headline accounts), and the report with the trail and
  the SAR facts (``sar`` profile, template narrative, hand-built reason codes) -> its page count
  (``pages_median``, read back with pypdf).
* **Neo4j** (when the server of ``deploy/services up neo4j`` answers; else ``na``): the
  generator's set written into a private namespace; 200 accounts' neighbour lookups
  (``GraphStore.expand`` of one account, both directions, the trail's window of 3 days either
  side of one of its transfers) -> ``neighbour_p99_ms_neo4j``; the alerts' money trails on Neo4j
  -> ``trail_p99_ms_neo4j`` (each must equal the embedded store's, ``trail_id``: exit 1 if not).
  First 20 lookups and trails on other accounts, untimed (query plans, page cache), and
  ``gc.freeze()`` around the timings (the process holds the embedded stores and the reports: the
  cyclic collector's pauses would be timed as Neo4j's).

Figures are printed, never asserted (a loaded machine is slow, not wrong); the exit status is 1
when a tamper case goes undetected. Floors the issue sets: per_s >= 10, verify_ms <= 100,
tamper_detected = 1.

Last line: ``reports pages_median=... trail_accounts_median=... reports_per_s=... neighbour_p99_ms_neo4j=...
trail_p99_ms_neo4j=... verify_ms=... proof_us_at_1e5=... tamper_detected=... tamper_cases=...``
(``pages_median`` and ``trail_accounts_median``: the largest median over the sources.)
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditflow.canonical import canonical_json  # noqa: E402
from reports import ReportWriter  # noqa: E402
from reports.audit_log import AuditLog, TreeHead, entry_line  # noqa: E402
from reports.merkle import verify_consistency, verify_inclusion  # noqa: E402
from reports.testing import (  # noqa: E402
    INPUT_SHA256,
    KEYRING,
    SIGNER,
    TAMPER_CASES,
    alert_number,
    make_reason_codes,
    make_reports_folder,
    make_trace,
)
from reports.verify import verify_reports  # noqa: E402

SIZES = (1_000, 10_000, 100_000)


def pin_one_cpu() -> str:
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to cpu {cpu}"
    except (AttributeError, OSError):
        return "not pinned"


def bench_reports(root: Path, n: int) -> tuple[float, float, Path]:
    folder = root / "reports"
    alerts = [alert_number(i) for i in range(n)]
    trace, codes = make_trace(), make_reason_codes()
    t0 = time.perf_counter()
    writer = ReportWriter(folder, input_sha256=INPUT_SHA256, code_version="bench", seed=7, signer=SIGNER)
    for a in alerts:
        writer.write(a, trace, codes, typologies=[("fan-out", "The sender paid 7 distinct payees within 24 hours.")])
    writer.finish()
    seconds = time.perf_counter() - t0
    if writer.failed:
        raise SystemExit(f"reports failed: {writer.failed[:3]}")
    kept = root / "kept_head.json"
    shutil.copy(folder / "tree_head.json", kept)
    best = float("inf")
    for _ in range(3):
        t1 = time.perf_counter()
        res = verify_reports(folder, KEYRING, tree_head=TreeHead.load(kept))
        best = min(best, time.perf_counter() - t1)
        if not res.ok:
            raise SystemExit(f"verify failed on an untouched folder: {res.findings[:3]}")
    return n / seconds, 1000 * best / n, folder


def build_log(path: Path, n: int) -> None:
    """``n`` entries as appends would write them, in one go (fsynced once)."""
    with open(path, "wb") as fh:
        for i in range(n):
            payload = {"subject_id": f"alert-tx-{i:016x}", "report_kind": "alert", "report_id": f"report-{i:016x}",
                       "manifest": [f"alert-tx-{i:016x}.manifest.json", canonical_json(i).hex().rjust(64, "0")],
                       "files": [], "key_id": SIGNER.key_id}
            fh.write(entry_line(i, "report", payload) + b"\n")
        fh.flush()
        os.fsync(fh.fileno())


def bench_log(root: Path, n: int, samples: int, rng: random.Random) -> dict[str, float]:
    path = root / f"log_{n}.jsonl"
    build_log(path, n)
    t0 = time.perf_counter()
    log = AuditLog(path)
    open_s = time.perf_counter() - t0
    appends = []
    for i in range(50):
        t1 = time.perf_counter()
        log.append("run", {"bench": i})
        appends.append(time.perf_counter() - t1)
    size, root_hash = log.size, log.root()
    incl, cons, incl_len, cons_len = [], [], [], []
    for _ in range(samples):
        i = rng.randrange(size)
        t1 = time.perf_counter()
        proof = log.inclusion_proof(i)
        ok = verify_inclusion(i, size, log.leaf_hash(i), proof, root_hash)
        incl.append(time.perf_counter() - t1)
        m = rng.randrange(1, size)
        t1 = time.perf_counter()
        cproof = log.consistency_proof(m)
        ok = ok and verify_consistency(m, size, log.root(m), root_hash, cproof)
        cons.append(time.perf_counter() - t1)
        if not ok:
            raise SystemExit(f"a proof failed at size {size}")
        incl_len.append(len(proof))
        cons_len.append(len(cproof))
    return {"open_s": open_s, "append_us": 1e6 * statistics.median(appends),
            "proof_us": 1e6 * statistics.median(incl), "consistency_us": 1e6 * statistics.median(cons),
            "proof_len": max(incl_len), "consistency_len": max(cons_len)}


def bench_tamper(root: Path) -> tuple[int, int, list[str]]:
    pristine = root / "pristine"
    make_reports_folder(pristine, 3)
    kept = root / "pristine_head.json"
    shutil.copy(pristine / "tree_head.json", kept)
    missed = []
    for i, (name, (tamper, expected, _)) in enumerate(sorted(TAMPER_CASES.items())):
        d = root / f"tamper_{i}"
        shutil.copytree(pristine, d)
        tamper(d)
        res = verify_reports(d, KEYRING, tree_head=TreeHead.load(kept))
        if res.ok or not any(expected in str(f) for f in res.findings):
            missed.append(name)
    return len(TAMPER_CASES) - len(missed), len(TAMPER_CASES), missed


def _sources(quick: bool):
    """(name, events) of each source the evidence is measured on (AMLSim when cached)."""
    from ingest.synthetic import generate

    ds = generate(accounts=300 if quick else 800, days=8 if quick else 12, laundering_rate=0.015, seed=3)
    yield "generator", ds.events
    cached = ROOT / ".cache" / "datasets" / "amlsim-days-s3" / "amlsim-days-s3_Trans.csv"
    if cached.exists():
        from ingest.amlworld import read_transactions

        yield "amlsim-days-s3", [e for e in read_transactions(cached) if hasattr(e, "event_id")]


def _alerts(events, n: int, seed: int):
    from datetime import timedelta

    start = events[0].timestamp + timedelta(days=3)
    pool = [e for e in events if e.timestamp >= start and not e.is_self_transfer]
    rng = random.Random(seed)
    laundering = [e for e in pool if e.is_laundering]
    other = [e for e in pool if not e.is_laundering]
    k = min(n // 2, len(laundering))
    return sorted(rng.sample(laundering, k) + rng.sample(other, n - k), key=lambda e: (e.timestamp, e.event_id))


def bench_evidence(root: Path, n: int, seed: int, log) -> dict:
    """Per source: trail sizes and report pages of ``n`` alerts; the generator's on Neo4j too."""
    from pypdf import PdfReader

    from auditflow.records import Alert, alert_id_for
    from auditflow_app import flow
    from auditflow_app.settings import Settings
    from evidence_graph import NetworkxGraphStore

    settings = Settings()
    out: dict = {"sources": {}}
    for name, events in _sources(n <= 20):
        store = NetworkxGraphStore()
        store.add_transactions(events)
        alerts = _alerts(events, n, seed)
        writer = ReportWriter(root / f"evidence-{name}", input_sha256=INPUT_SHA256, code_version="bench", seed=7,
                              signer=SIGNER)
        sizes, heads, pages, ms, trails = [], [], [], [], {}
        run = [Alert(alert_id_for(ev.event_id), ev, 0.9, 0.5, "bench-model", (("amount_usd", 0.0),)) for ev in alerts]
        by_account = flow.alerts_by_account(run)
        for alert in run:
            ev = alert.event
            trace, matches = flow.trace_and_typologies(store, alert, settings)
            t0 = time.perf_counter()
            trail = flow.alert_trail(store, alert, settings, matches)
            ms.append(1000 * (time.perf_counter() - t0))
            trails[ev.event_id] = (alert, matches, trail)
            sizes.append(len({a.node_id for a in trail.accounts}))
            heads.append(len({a.node_id for a in trail.accounts if a.headline} | set(trail.members)))
            sar = flow.sar_context(store, alert, settings, matches, flow.prior_alerts(by_account, alert))
            m = writer.write(alert, trace, make_reason_codes(), trail=trail, sar=sar,
                             typologies=[(x.typology, x.explanation) for x in matches])
            if not hasattr(m, "files"):
                raise SystemExit(f"report failed: {m}")
            pages.append(len(PdfReader(root / f"evidence-{name}" / m.files[0][0]).pages))
        writer.finish()
        out["sources"][name] = {"alerts": len(alerts), "events": len(events), "trail_accounts": sizes,
                                "headline": heads, "pages": pages, "trail_ms_embedded": ms}
        log(f"[evidence] {name}: {len(alerts)} alerts, trail accounts median {statistics.median(sizes)}, "
            f"pages median {statistics.median(pages)}")
        if name == "generator":
            out["neo4j"] = bench_neo4j(settings, events, trails, seed, log)
    return out


def _p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, math.ceil(0.99 * len(xs)) - 1)]


def bench_neo4j(settings, events, trails: dict, seed: int, log) -> dict | None:
    """Neighbour lookups and the alerts' trails on Neo4j (None when no server answers)."""
    from datetime import timedelta

    from auditflow_app import flow
    from evidence_graph.neo4j_store import Neo4jGraphStore
    from evidence_graph.trail import money_trail

    try:
        store = Neo4jGraphStore(settings.neo4j_uri, namespace=f"bench_reports_{os.getpid()}", **settings.neo4j_auth)
        store.node_count()
    except Exception as e:  # noqa: BLE001 - no server: the figures are "na"
        log(f"[neo4j] not measured: {type(e).__name__}: {str(e)[:200]}")
        return None
    try:
        store.add_transactions(events)
        rng = random.Random(seed)
        window = timedelta(days=3)
        picks = rng.sample(events, 220)
        gc.collect()
        gc.freeze()  # the loaded stores and reports out of the collector's reach (its pauses are not Neo4j's)
        for e in picks[200:]:  # warm-up on other accounts: query plans, page cache
            store.expand([(e.sender.node_id, e.timestamp - window, e.timestamp + window)], "both")
            money_trail(store, e)
        lookups = []
        for e in picks[:200]:
            t0 = time.perf_counter()
            store.expand([(e.sender.node_id, e.timestamp - window, e.timestamp + window)], "both")
            lookups.append(1000 * (time.perf_counter() - t0))
        times, same = [], 0
        for alert, matches, embedded in trails.values():
            t0 = time.perf_counter()
            got = flow.alert_trail(store, alert, settings, matches)
            times.append(1000 * (time.perf_counter() - t0))
            same += got.trail_id == embedded.trail_id
        log(f"[neo4j] neighbour lookups p50 {statistics.median(lookups):.1f} ms p99 {_p99(lookups):.1f} ms; "
            f"trails p50 {statistics.median(times):.1f} ms p99 {_p99(times):.1f} ms; same trails {same}/{len(times)}")
        return {"neighbour_ms": lookups, "trail_ms": times, "same": same, "trails": len(times)}
    finally:
        gc.unfreeze()
        store.drop()
        store.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 reports, 200 proofs per log size")
    ap.add_argument("--reports", type=int, help="reports to write (default 100; quick 20)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--alerts", type=int, help="alerts per source for the evidence figures (default 40; quick 10)")
    args = ap.parse_args(argv)
    n = args.reports or (20 if args.quick else 100)
    samples = 200 if args.quick else 1000
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    pinned = pin_one_cpu()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-reports-") as tmp:
        root = Path(tmp)
        log(f"writing {n} reports ...")
        per_s, verify_ms, _ = bench_reports(root, n)
        logs = {}
        for size in SIZES:
            log(f"audit log of {size:,} entries ...")
            logs[size] = bench_log(root, size, samples, rng)
        log("tamper cases ...")
        detected, cases, missed = bench_tamper(root)
        log("evidence of alerts ...")
        evidence = bench_evidence(root, args.alerts or (10 if args.quick else 40), args.seed, log)

    print(f"reports ({'quick' if args.quick else 'full'}, {n} reports, {samples} proofs per size, {pinned}, "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f})")
    print(f"  writing: {per_s:.1f} reports/s (PDF, trace, signed manifest, fsynced log append each); "
          f"verify: {verify_ms:.2f} ms per report")
    print(f"  {'log entries':>12} {'open s':>8} {'append us':>10} {'proof us':>9} {'consist. us':>11} "
          f"{'proof len':>9} {'consist. len':>12} {'log2 n':>7}")
    for size, r in logs.items():
        print(f"  {size:>12,} {r['open_s']:>8.3f} {r['append_us']:>10.0f} {r['proof_us']:>9.1f} "
              f"{r['consistency_us']:>11.1f} {r['proof_len']:>9} {r['consistency_len']:>12} {math.log2(size):>7.1f}")
    growth = logs[SIZES[-1]]["proof_us"] / logs[SIZES[0]]["proof_us"]
    print(f"  proof cost 10^5 / 10^3: x{growth:.2f} (log2 ratio x{math.log2(SIZES[-1]) / math.log2(SIZES[0]):.2f}, "
          f"linear would be x{SIZES[-1] / SIZES[0]:.0f})")
    print(f"  tamper cases detected: {detected} of {cases}" + (f"; missed: {', '.join(missed)}" if missed else ""))
    share = detected / cases
    print(f"  {'evidence source':<16} {'alerts':>6} {'events':>8} {'trail accts p50':>15} {'max':>5} "
          f"{'headline p50':>12} {'pages p50':>9} {'max':>4} {'trail ms p50':>12} {'p99':>7}")
    for name, r in evidence["sources"].items():
        print(f"  {name:<16} {r['alerts']:>6} {r['events']:>8,} {statistics.median(r['trail_accounts']):>15g} "
              f"{max(r['trail_accounts']):>5} {statistics.median(r['headline']):>12g} "
              f"{statistics.median(r['pages']):>9g} {max(r['pages']):>4} "
              f"{statistics.median(r['trail_ms_embedded']):>12.1f} {_p99(r['trail_ms_embedded']):>7.1f}")
    neo = evidence.get("neo4j")
    if neo:
        print(f"  neo4j: neighbour lookups p50 {statistics.median(neo['neighbour_ms']):.1f} ms, "
              f"p99 {_p99(neo['neighbour_ms']):.1f} ms ({len(neo['neighbour_ms'])}); trails p50 "
              f"{statistics.median(neo['trail_ms']):.1f} ms, p99 {_p99(neo['trail_ms']):.1f} ms; "
              f"same trail as embedded {neo['same']}/{neo['trails']}")
    pages = max(statistics.median(r["pages"]) for r in evidence["sources"].values())
    trail_accounts = max(statistics.median(r["trail_accounts"]) for r in evidence["sources"].values())
    neighbour = f"{_p99(neo['neighbour_ms']):.1f}" if neo else "na"
    trail_p99 = f"{_p99(neo['trail_ms']):.1f}" if neo else "na"
    print(f"reports pages_median={pages:g} trail_accounts_median={trail_accounts:g} reports_per_s={per_s:.1f} "
          f"neighbour_p99_ms_neo4j={neighbour} trail_p99_ms_neo4j={trail_p99} verify_ms={verify_ms:.2f} "
          f"proof_us_at_1e5={logs[100_000]['proof_us']:.1f} tamper_detected={share:g} tamper_cases={cases}")
    return 0 if not missed and (not neo or neo["same"] == neo["trails"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
