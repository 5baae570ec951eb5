"""The demo, end to end, through the real CLI: generate -> train -> PyFlink job -> graph -> reports.

One run of ``auditflow demo`` on a small set (module fixture); the tests read what it wrote and
check it against independent computations: the planted answer key, a networkx shortest-path
computation over the graph file, the PDF text, and the CSV the run started from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import networkx as nx
import pytest
from pypdf import PdfReader

from auditflow.money import format_amount
from auditflow.records import TransactionEvent
from evidence_graph import open_store, trace_evidence
from ingest.amlworld import read_patterns, read_transactions, row_key

pytestmark = pytest.mark.flink

ACCOUNTS, DAYS, SEED = 500, 2, 11


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    cmd = [sys.executable, "-m", "auditflow_app.cli", "demo", "--out", str(out), "--accounts", str(ACCOUNTS),
           "--days", str(DAYS), "--seed", str(SEED), "--max-reports", "12"]
    # What a user's shell has on a fresh setup: none of the settings, none of what a PyFlink job run
    # earlier in this process (loopback mode) leaves in the environment for its Python workers.
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "JAVA_HOME", "TMPDIR") if k in os.environ}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (out / "demo_stdout.txt").write_text(proc.stdout)
    return out


def _live_events(out: Path) -> list[TransactionEvent]:
    return [e for e in read_transactions(out / "data" / "live_Trans.csv") if isinstance(e, TransactionEvent)]


def _alerts(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "alerts.jsonl").read_text().splitlines()]


def test_counts_balance_and_summary(demo_out: Path) -> None:
    summary = json.loads((demo_out / "run_summary.json").read_text())
    events = _live_events(demo_out)
    assert summary["events_in"] == len(events) == summary["processed"] + summary["rejected"]
    assert summary["laundering_planted"] == sum(e.is_laundering for e in events)
    stdout = (demo_out / "demo_stdout.txt").read_text()
    assert "recall of planted laundering transactions among alerts" in stdout
    assert str(demo_out / "reports") in stdout.replace("\n", "")


def test_alerts_exist_for_planted_patterns(demo_out: Path) -> None:
    attempts = list(read_patterns(demo_out / "data" / "live_Patterns.txt"))
    planted_keys = set().union(*(a.row_keys() for a in attempts))
    events = {e.event_id: e for e in _live_events(demo_out)}
    from ingest.amlworld import format_row

    alerted = [events[a["event"]["event_id"]] for a in _alerts(demo_out)]
    hits = [e for e in alerted if row_key(format_row(e)) in planted_keys]
    assert hits, "no alert on any transaction of a planted laundering attempt"
    assert all(e.is_laundering for e in hits)
    summary = json.loads((demo_out / "run_summary.json").read_text())
    assert summary["laundering_alerted"] == sum(1 for e in alerted if e.is_laundering)


def test_graph_holds_every_event_and_trace_depths_match_time_ordered_paths(demo_out: Path) -> None:
    events = _live_events(demo_out)
    cycle = next(a for a in read_patterns(demo_out / "data" / "live_Patterns.txt") if a.typology == "CYCLE")
    by_key = {row_key(r): r for r in cycle.rows}
    from evidence_graph.follow import Budget
    from ingest.amlworld import format_row

    cyc_events = sorted((e for e in events if row_key(format_row(e)) in by_key), key=lambda e: e.timestamp)
    root = cyc_events[0].sender.node_id
    start, end = cyc_events[0].timestamp, cyc_events[-1].timestamp
    with open_store(f"embedded:{demo_out / 'graph.jsonl'}") as store:
        assert store.edge_count() == len(events)
        trace = trace_evidence(store, root, max_hops=5, direction="out", fanout_cap=10_000, window=(start, end),
                               hop_horizon=None, hub_degree=None,
                               budget=Budget(max_nodes=10**6, max_edges=10**7, max_seconds=None))
    # Independent: the fewest hops of a time-ordered path (each transfer not earlier than the one
    # that brought money to its payer) inside the window, from the CSV, by dynamic programming
    # over hop counts: the earliest time money can be at each account after k hops.
    inside = [e for e in events if start <= e.timestamp <= end and e.sender != e.receiver]
    arrival = {root: start}
    expected = {root: 0}
    for hop in range(1, 6):
        nxt = dict(arrival)
        for e in inside:
            a = arrival.get(e.sender.node_id)
            if a is not None and e.timestamp >= a:
                v = e.receiver.node_id
                if v not in nxt or e.timestamp < nxt[v]:
                    nxt[v] = e.timestamp
                expected.setdefault(v, hop)
        arrival = nxt
    assert trace.depths() == expected
    # a sanity check of the oracle: what money reaches in time order is reachable ignoring time
    g = nx.DiGraph((e.sender.node_id, e.receiver.node_id) for e in inside)
    assert set(nx.single_source_shortest_path_length(g, root, cutoff=5)) >= set(expected)
    members = [e.receiver.node_id for e in cyc_events]
    assert all(m in trace.depths() for m in members)
    assert any(e.dst == root for e in trace.edges), "the edge closing the cycle is in the trace"


def test_pdf_holds_alert_id_reason_codes_and_exact_money(demo_out: Path) -> None:
    alerts = [a for a in _alerts(demo_out) if a["report"]]
    assert alerts
    for a in alerts[:3]:
        text = "\n".join(p.extract_text() for p in PdfReader(a["report"]).pages)
        flat = " ".join(text.split())
        assert a["alert_id"] in flat
        assert len(a["reason_codes"]) >= 1
        for rc in a["reason_codes"]:
            assert rc["feature"] in flat
        ev = TransactionEvent.from_dict(a["event"])
        assert format_amount(ev.amount_paid) in flat
        assert ev.sender.node_id in flat or ev.sender.account in flat


def test_money_round_trips_exactly_csv_json_report(demo_out: Path) -> None:
    events = {e.event_id: e for e in _live_events(demo_out)}
    csv_amounts = {}
    with open(demo_out / "data" / "live_Trans.csv") as fh:
        next(fh)
        for line, ev in zip(fh, events.values()):
            fields = line.rstrip("\n").split(",")
            csv_amounts[ev.event_id] = (Decimal(fields[5]), Decimal(fields[7]))
    for a in _alerts(demo_out):
        ev = TransactionEvent.from_dict(a["event"])  # JSON wire form written by the stream job
        assert ev == events[ev.event_id]
        recv, paid = csv_amounts[ev.event_id]
        assert ev.amount_received.to_decimal() == recv
        assert ev.amount_paid.to_decimal() == paid


def test_reports_verify(demo_out: Path) -> None:
    # the demo signs with the public development key: verify trusts it only when told to
    env = {**os.environ, "AUDITFLOW_OUT_DIR": str(demo_out)}
    env.pop("AUDITFLOW_SIGNING_KEY_FILE", None)
    env.pop("AUDITFLOW_TRUSTED_KEYS_FILE", None)
    proc = subprocess.run([sys.executable, "-m", "auditflow_app.cli", "verify", str(demo_out / "reports")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "--allow-dev-key" in proc.stdout and len(proc.stdout.splitlines()) == 1
    proc = subprocess.run([sys.executable, "-m", "auditflow_app.cli", "verify", "--allow-dev-key", str(demo_out / "reports")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verified: " in proc.stdout and "cases log of" in proc.stdout


def test_demo_opens_a_case_per_subject_and_every_case_files_a_valid_sar(demo_out: Path, tmp_path: Path) -> None:
    """The demo's alerts are in cases: one per paying account (read with sqlite3 from the rows, not
    through the store), each alert in exactly one; every case worked to an approved SAR exports
    XML that FinCEN's schema (loaded here with lxml) accepts; the cases log verifies."""
    import sqlite3
    from datetime import UTC, datetime

    from lxml import etree

    from auditflow_app import case_flow
    from auditflow_app.settings import Settings
    from cases.users import Users, add_user

    alerts = _alerts(demo_out)
    with sqlite3.connect(demo_out / "cases.sqlite") as db:
        rows = [json.loads(line)["payload"] for (line,) in db.execute("SELECT line FROM case_log ORDER BY idx")]
    subjects = {r["case_id"]: (r["subject"]["bank"], r["subject"]["account"]) for r in rows if "subject" in r}
    taken = [r["alert"]["alert_id"] for r in rows if "alert" in r]
    assert sorted(taken) == sorted(a["alert_id"] for a in alerts)
    assert sorted(subjects.values()) == sorted({(a["event"]["from_bank"], a["event"]["from_account"]) for a in alerts})
    assert all("is_laundering" not in json.dumps(r) for r in rows)  # the label stays out of cases
    users_file = tmp_path / "users.json"
    add_user(users_file, "root", "admin")
    for name, role in (("ana", "analyst"), ("bob", "approver")):
        add_user(users_file, name, role)
    users = Users.load(users_file)
    settings = Settings(out_dir=demo_out, users_file=users_file,
                        sar_filer_file=Path(__file__).parents[1] / "deploy" / "filer.example.json")
    schema = etree.XMLSchema(etree.parse(str(Path(__file__).parents[1] / "cases" / "schemas" / "EFL_SARXBatchSchema.xsd")))
    now = datetime(2026, 12, 1, tzinfo=UTC)
    ana, bob = users.get("ana"), users.get("bob")
    with case_flow.open_case_store(settings) as store:  # the demo's log is dev-key signed: so are these entries
        for case_id in subjects:
            for user, action, payload in ((ana, "assign", {}), (ana, "start", {}),
                                          (ana, "propose", {"narrative": f"Transfers of case {case_id}."}),
                                          (bob, "approve", {})):
                case_flow.act(store, user, case_id, action, payload, settings=settings, now=now)
            xml = case_flow.export_sar(store, ana, case_id, settings=settings, now=now).xml
            assert schema.validate(etree.fromstring(xml)), (case_id, schema.error_log.last_error)
            assert store.case(case_id).state == "sar_filed"
    proc = subprocess.run([sys.executable, "-m", "auditflow_app.cli", "case", "verify", "--allow-dev-key"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "AUDITFLOW_OUT_DIR": str(demo_out)})
    assert proc.returncode == 0 and "verified: cases log of" in proc.stdout, proc.stdout + proc.stderr
