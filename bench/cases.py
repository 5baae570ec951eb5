"""Cases driven through the HTTP API by 20 concurrent users, on SQLite and on PostgreSQL, in one run.

    python bench/cases.py            # 400 alerts over 250 subject accounts (~200 cases), 20 users
    python bench/cases.py --quick    # 120 alerts over 75 subject accounts (~60 cases), 20 users

PostgreSQL is the server of ``deploy/services up postgres`` (``eval "$(deploy/services env)"``
sets ``AUDITFLOW_POSTGRES_URL``); without it the PostgreSQL figures are ``nan`` and a line says
why (``--require-postgres``: exit 1 instead). Per backend, in this order:

1. **Open cases** from a run's alerts: ``--alerts PATH`` (a run's ``alerts.jsonl``), else
   ``out/alerts.jsonl`` of ``make demo`` when there is one, else a seeded set of alert rows made
   here as the deep path writes them (several alerts per subject: later ones join the subject's
   open case). :func:`auditflow_app.case_flow.open_cases` into a fresh database (SQLite: a file in
   a temporary folder; PostgreSQL: a new database ``auditflow_bench_<hex>`` made through the
   server URL and dropped at the end), timed -> cases opened per second.
2. **Work them through the API**: :func:`auditflow_app.analyst_api.create_app` (the cases routes
   of ``auditflow_app.cases_api``, mounted with ``AUDITFLOW_USERS_FILE``) under uvicorn on a free
   loopback port (a thread of this process, or with ``--server process`` a process of its own);
   a users file of analysts and approvers (:func:`cases.users.add_user`), a fresh signing key
   (:func:`reports.signing.generate_key_file`). ``--users`` (20, quick too) users, one thread and
   one ``httpx.Client`` with its own bearer token each, all at once:

   * an analyst takes a ``new`` case from the queue (``GET /cases?state=new``, one of the first
     few: users collide on purpose), assigns it to themself, starts, notes twice, then proposes a
     SAR (narrative; categories given on half the cases, suggested by the server on the others) or,
     on about one case in five, closes it with no action;
   * an approver first looks for a proposal they did not make (``GET /cases?state=sar_proposed``,
     ``allowed`` of ``GET /cases/{id}`` holds ``approve``), approves it and exports the SAR
     (``POST /cases/{id}/export-sar``: the XML, and the case is filed); with none, they work a new
     case as an analyst does (their proposals are approved by another approver), and with no new
     case left either they look at the proposals again 0.2-0.4 s later.

   Every action carries the ``expected_version`` its user read; a ``409`` (someone moved the case
   on) is counted, the user re-reads the case and goes on (on with the case when it is still
   theirs, else to another). Every request's latency is recorded, per action, and the reads
   (``GET /cases``, ``GET /cases/{id}``) apart. The run ends when every case is closed or filed (or
   ``--timeout``). Two phases, half of the cases each, on the same server: **saturated**, no think
   time (the 20 users keep 20 requests in flight, so a request's latency is about 20 / the
   server's request rate: this phase gives the capacity, ``actions_per_s``), then **users**, each
   user waiting a think time before each request (exponential, mean ``--think-ms``, 1 s: a person
   reading the page before the next click; 20 such users are a busy team) -- the latency a user
   sees, ``p99_ms`` (the CPU line says what the server spends per request with ``--server
   process``).
3. **Check**: every exported SAR XML is validated against ``cases/schemas/EFL_SARXBatchSchema.xsd``
   with lxml here (not the product's validator) -> ``sar_xml_valid``; then
   :func:`auditflow_app.case_flow.verify_cases` must pass (``verify_ok``), then one note entry's
   line is edited in the database (its text, in the canonical JSON bytes) and verify must fail
   (``verify_detects_edit``).

Floors (reported, never asserted): p99 <= 100 ms per action at 20 concurrent users on PostgreSQL;
every exported SAR valid; verify passes after the run and fails after one edited entry. Latencies
are seen by the clients: with ``--server thread`` (the default) the 20 client threads and the
server share one interpreter (and its GIL), so a request's time includes waiting for the clients'
own Python; ``--server process`` measures the server without that.

Last line: ``cases actions_per_s_sqlite=... actions_per_s_postgres=... p99_ms=... sar_xml_valid=N/M
verify_ok=1 p99_ms_sqlite=... verify_detects_edit=1 ...`` (``p99_ms`` is PostgreSQL's, over every
action at 20 users, 409s included; ``sar_xml_valid``: valid XML of the SARs approved, both backends
together, an export that failed counting as not valid). Exit status 1 when a check fails, a request
got an error status (not 409), the users ran out of time, or ``--require-postgres`` found none.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import multiprocessing as mp
import os
import random
import secrets
import socket
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# this file is bench/cases.py: the bench folder must not shadow the ``cases`` package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

XSD = ROOT / "cases/schemas/EFL_SARXBatchSchema.xsd"
FILER_EXAMPLE = ROOT / "deploy/filer.example.json"
DEMO_ALERTS = ROOT / "out/alerts.jsonl"
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
#: the actions the users take, in the order tables list them
ACTIONS = ("assign", "start", "note", "propose", "close", "approve", "export-sar")
READS = ("GET /cases", "GET /cases/{id}")
TYPOLOGIES = ("fan-in", "fan-out", "cycle", "scatter-gather", "gather-scatter", "bipartite", "stack")
CURRENCIES = ("US Dollar",) * 8 + ("Euro", "UK Pound")
FORMATS = ("Wire", "ACH", "Cheque", "Credit Card", "Cash")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = (len(s) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def fmt(x: float, nd: int = 1) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


# ---------------------------------------------------------------------------- alerts


def make_alert_rows(n_alerts: int, n_subjects: int, seed: int) -> list[dict]:
    """``n_alerts`` rows of ``alerts.jsonl`` as the deep path writes them, their senders drawn
    among ``n_subjects`` accounts (seeded): a subject's later alerts join its case."""
    from auditflow.money import Money
    from auditflow.records import Alert, alert_id_for
    from evidence_graph.testing import tx

    rng = random.Random(seed)
    subjects = [f"8{i:04d}A" for i in range(n_subjects)]
    rows = []
    for i in range(n_alerts):
        event_id = f"bench-{seed}-{i:06d}"
        src = rng.choice(subjects)
        dst = f"9{rng.randrange(10 * n_subjects):05d}B"
        cents = int(10 ** rng.uniform(4, 8))
        ev = tx(event_id, src, dst, minute=rng.randrange(0, 60 * 24 * 20),
                amount=Money(rng.choice(CURRENCIES), cents), fmt=rng.choice(FORMATS))
        score = round(rng.uniform(0.5, 0.999), 6)
        alert = Alert(alert_id_for(event_id), ev, score, 0.5, "sha256:bench-model", (("amount_usd", cents / 100),))
        tier = "critical" if score >= 0.9 else "normal"
        typologies = rng.sample(TYPOLOGIES, rng.choice((0, 0, 1, 1, 2)))
        rows.append({**alert.to_dict(), "reason_codes": [], "trace_id": "t-" + event_id, "input_sha256": "ab" * 32,
                     "typologies": typologies, "report": f"/run/reports/{alert.alert_id}.pdf",
                     "report_error": None, "deep_ms": round(rng.uniform(5, 50), 1), "tier": tier})
    return rows


def alerts_file(args: argparse.Namespace, tmp: Path) -> tuple[Path, str]:
    """The alerts file cases are opened from, and where it came from."""
    if args.alerts is not None:
        return args.alerts, f"--alerts {args.alerts}"
    if DEMO_ALERTS.is_file() and not args.generated:
        return DEMO_ALERTS, f"{DEMO_ALERTS.relative_to(ROOT)} (make demo)"
    n_alerts, n_subjects = (120, 75) if args.quick else (400, 250)
    rows = make_alert_rows(n_alerts, n_subjects, args.seed)
    path = tmp / "alerts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, f"generated: {n_alerts} alerts over {n_subjects} subject accounts, seed {args.seed}"


# ---------------------------------------------------------------------------- backends


@contextlib.contextmanager
def sqlite_database(tmp: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp / 'cases.sqlite'}"


@contextlib.contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A fresh database ``auditflow_bench_<hex>`` on the server of ``server_url`` (made with
    AUTOCOMMIT, dropped at the end, its connections closed by force)."""
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    name = f"auditflow_bench_{secrets.token_hex(6)}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def postgres_answers(server_url: str) -> str | None:
    """None when the server answers, else why not."""
    import sqlalchemy as sa

    try:
        engine = sa.create_engine(server_url, connect_args={"connect_timeout": 5})
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        finally:
            engine.dispose()
    except Exception as e:  # noqa: BLE001 -- any failure: PostgreSQL is not there
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


# ---------------------------------------------------------------------------- the server


def free_socket() -> socket.socket:
    """A loopback socket on a free port. Made with ``IPPROTO_TCP`` named: asyncio sets
    ``TCP_NODELAY`` only on connections of a socket whose ``proto`` says TCP, and a plain
    ``socket.socket(AF_INET, SOCK_STREAM)`` (proto 0) leaves Nagle on: uvicorn's two writes per
    answer then wait for the client's delayed ACK, ~40 ms on every request."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def build_app(settings_kwargs: dict[str, Any]):
    from auditflow_app.analyst_api import create_app
    from auditflow_app.settings import Settings
    from evidence_graph import NetworkxGraphStore

    # an empty graph: the cases routes do not read it; without one create_app opens out/graph.jsonl
    return create_app(Settings(**settings_kwargs), NetworkxGraphStore())


def _uvicorn(app, sock: socket.socket):
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, log_config=None, lifespan="on")
    return uvicorn.Server(config)


@contextlib.contextmanager
def serve_thread(settings_kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The app under uvicorn in a thread of this process; yields its base URL and a function
    giving the CPU seconds the server used so far (None here: it shares the process)."""
    app = build_app(settings_kwargs)
    sock = free_socket()
    port = sock.getsockname()[1]
    srv = _uvicorn(app, sock)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True, name="uvicorn")
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", lambda: None
    finally:
        srv.should_exit = True
        thread.join(15)
        sock.close()


def _serve_process_main(settings_kwargs: dict[str, Any], port: int, ready) -> None:
    sys.path.insert(0, str(ROOT))
    app = build_app(settings_kwargs)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    srv = _uvicorn(app, sock)
    threading.Thread(target=lambda: (_wait_started(srv), ready.set()), daemon=True).start()
    srv.run(sockets=[sock])


def _wait_started(srv) -> None:
    while not srv.started:
        time.sleep(0.02)


@contextlib.contextmanager
def serve_process(settings_kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The app under uvicorn in a process of its own (spawned); yields its base URL and a function
    giving the CPU seconds (user + system) the server process used so far."""
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()  # the child binds it again (SO_REUSEADDR)
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_serve_process_main, args=(settings_kwargs, port, ready), daemon=True)
    proc.start()
    try:
        if not ready.wait(60) or not proc.is_alive():
            raise RuntimeError(f"the server process did not start (exit code {proc.exitcode})")
        yield f"http://127.0.0.1:{port}", lambda: _cpu_seconds(proc.pid)
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join(15)
        if proc.is_alive():
            proc.kill()
            proc.join(5)


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------- the users


@dataclass
class Tally:
    """What every user saw, shared (one lock)."""

    targets: set[str]
    deadline: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    ok: Counter = field(default_factory=Counter)
    conflicts: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    done: dict[str, str] = field(default_factory=dict)  # case -> closed | filed | error
    sars: dict[str, bytes] = field(default_factory=dict)
    approved: set[str] = field(default_factory=set)
    no_new: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def record(self, what: str, seconds: float, status: int) -> None:
        with self.lock:
            self.latencies[what].append(seconds * 1000)
            if status == 200:
                self.ok[what] += 1
            elif status == 409:
                self.conflicts[what] += 1
            else:
                self.errors[f"{what} {status}"] += 1

    def error(self, text: str) -> None:
        with self.lock:
            if len(self.error_samples) < 8:
                self.error_samples.append(text)

    def finish(self, case_id: str, how: str) -> None:
        with self.lock:
            self.done.setdefault(case_id, how)
            if len(self.done) >= len(self.targets):
                self.stop.set()

    def over(self) -> bool:
        if time.monotonic() > self.deadline:
            self.stop.set()
        return self.stop.is_set()


class Worker:
    """One user: a thread with its own client and token."""

    def __init__(self, name: str, role: str, token: str, base: str, tally: Tally, seed: int,
                 page: int, close_share: float, think_s: float = 0.0) -> None:
        import httpx

        self.name, self.role, self.tally, self.think_s = name, role, tally, think_s
        self.rng = random.Random(f"{seed}:{name}")
        self.seed, self.page, self.close_share = seed, page, close_share
        self.http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60.0)

    # -- requests

    def _request(self, what: str, method: str, url: str, **kw: Any):
        if self.think_s:  # a person reads the page before the next click (exponential, mean think_s)
            time.sleep(self.rng.expovariate(1.0 / self.think_s))
        t0 = time.perf_counter()
        try:
            r = self.http.request(method, url, **kw)
        except Exception as e:  # noqa: BLE001 -- a broken connection is an error, counted
            self.tally.record(what, time.perf_counter() - t0, 599)
            self.tally.error(f"{self.name} {method} {url}: {type(e).__name__}: {e}")
            return None
        self.tally.record(what, time.perf_counter() - t0, r.status_code)
        if r.status_code not in (200, 409):
            self.tally.error(f"{self.name} {method} {url} -> {r.status_code}: {r.text[:300]}")
        return r

    def queue(self, state: str) -> list[dict]:
        """The target cases in ``state``, in the queue's order (every page)."""
        out, offset = [], 0
        while True:
            params = {"state": state, "limit": self.page, "offset": offset}
            r = self._request("GET /cases", "GET", "/cases", params=params)
            if r is None or r.status_code != 200:
                return out
            body = r.json()
            out += [c for c in body.get("items", []) if c.get("case_id") in self.tally.targets]
            offset = body.get("next_offset")
            if offset is None or len(out) >= 10:
                return out

    def read(self, case_id: str) -> dict | None:
        r = self._request("GET /cases/{id}", "GET", f"/cases/{case_id}")
        return r.json() if r is not None and r.status_code == 200 else None

    def act(self, case_id: str, action: str, version: int, body: dict | None = None):
        """``action`` at ``version``: (status, the case after it or None)."""
        body = {**(body or {}), "expected_version": version}
        r = self._request(action, "POST", f"/cases/{case_id}/{action}", json=body)
        if r is None:
            return 599, None
        if r.status_code == 200:
            doc = r.json().get("case")
            return 200, doc if isinstance(doc, dict) and "version" in doc and "timeline" in doc else None
        return r.status_code, None

    # -- a case's next step

    def _plan_close(self, case_id: str) -> bool:
        return random.Random(f"{self.seed}:close:{case_id}").random() < self.close_share

    def next_step(self, doc: dict) -> tuple[str, dict] | None:
        state, assignee = doc.get("state"), doc.get("assignee")
        case_id = doc["case_id"]
        if state in ("new", "reopened"):
            return "assign", {}
        if assignee != self.name:
            return None  # someone else's now
        if state == "assigned":
            return "start", {}
        if state == "investigating":
            mine = [e for e in doc.get("timeline", []) if e.get("kind") == "noted" and e.get("actor") == self.name]
            if len(mine) < 2:
                return "note", {"text": f"note {len(mine) + 1} by {self.name}: reviewed the counterparties of "
                                        f"{case_id} and the transfers around the alerted ones"}
            if self._plan_close(case_id):
                return "close", {"reason": f"{self.name}: the transfers match the customer's known business"}
            body: dict[str, Any] = {
                "narrative": (f"{self.name} proposes a SAR on {case_id}: the subject's account moved funds through "
                              "a pattern of transfers with no apparent economic purpose; see the case's alerts "
                              "and notes for the counterparties, amounts and dates."),
            }
            if random.Random(f"{self.seed}:cats:{case_id}").random() < 0.5:
                body["categories"] = [[8, 824]]
            return "propose", body
        return None

    def drive(self, case_id: str, doc: dict | None) -> None:
        """Take the case as far as an analyst does (until someone else holds it)."""
        if doc is None:
            doc = self.read(case_id)
            if doc is None:
                return
        for _ in range(20):
            if self.tally.over():
                return
            step = self.next_step(doc)
            if step is None:
                return
            action, body = step
            status, after = self.act(case_id, action, doc["version"], body)
            if status == 200:
                if action == "close":
                    self.tally.finish(case_id, "closed")
                    return
                if action == "propose":
                    return
                doc = after if after is not None else self.read(case_id)
            elif status == 409:
                doc = self.read(case_id)
            else:
                if action != "assign":  # ours and broken: nobody will finish it
                    self.tally.finish(case_id, "error")
                return
            if doc is None:
                return

    def work_one(self) -> bool:
        """Take a new case and drive it; False when the queue had none."""
        items = self.queue("new")
        if not items:
            self.tally.no_new.set()
            return False
        item = self.rng.choice(items[:10])  # one of the first few: users collide now and then
        status, after = self.act(item["case_id"], "assign", item["version"])
        if status == 200:
            self.drive(item["case_id"], after)
        elif status == 409:
            self.drive(item["case_id"], None)  # re-read: still ours to take? (rarely)
        return True

    def approve_one(self) -> bool:
        """Approve a proposal someone else made, and export its SAR; False when there was none."""
        items = self.queue("sar_proposed")
        self.rng.shuffle(items)
        for item in items:
            if self.tally.over():
                return True
            doc = self.read(item["case_id"])
            if doc is None or doc.get("state") != "sar_proposed" or "approve" not in doc.get("allowed", []):
                continue
            status, _ = self.act(item["case_id"], "approve", doc["version"])
            if status == 409:
                continue  # another approver took it (the re-read above is the next item's)
            if status != 200:
                self.tally.finish(item["case_id"], "error")
                return True
            with self.tally.lock:
                self.tally.approved.add(item["case_id"])
            self.export(item["case_id"], doc["version"] + 1)
            return True
        return False

    def export(self, case_id: str, version: int) -> None:
        r = self._request("export-sar", "POST", f"/cases/{case_id}/export-sar", json={"expected_version": version})
        if r is not None and r.status_code == 200:
            with self.tally.lock:
                self.tally.sars[case_id] = r.content
            self.tally.finish(case_id, "filed")
        else:
            self.tally.finish(case_id, "error")

    def run(self) -> None:
        try:
            while not self.tally.over():
                did = False
                if self.role == "approver":
                    did = self.approve_one()
                if not did and not self.tally.no_new.is_set():
                    did = self.work_one()
                if not did:
                    if self.role != "approver":
                        return  # no new case left: an analyst is done
                    time.sleep(0.2 + 0.2 * self.rng.random())  # an approver looks again
        except Exception as e:  # noqa: BLE001 -- a user's crash is an error, the others go on
            with self.tally.lock:
                self.tally.errors[f"crash {type(e).__name__}"] += 1
            self.tally.error(f"{self.name} crashed: {type(e).__name__}: {e}")
        finally:
            self.http.close()


# ---------------------------------------------------------------------------- one backend


def make_users(path: Path, n_users: int, n_approvers: int) -> list[tuple[str, str, str]]:
    from cases.users import add_user

    users = [("admin", "admin", add_user(path, "admin", "admin"))]
    for i in range(n_users):
        role = "approver" if i < n_approvers else "analyst"
        name = f"{role[:3]}{i:02d}"
        users.append((name, role, add_user(path, name, role)))
    return users


def check_sars(sars: dict[str, bytes]) -> tuple[int, list[str]]:
    """How many SAR XML documents FinCEN's schema accepts (lxml, here), and why the others not."""
    from lxml import etree

    schema = etree.XMLSchema(etree.parse(str(XSD)))
    valid, why = 0, []
    for case_id, xml in sorted(sars.items()):
        try:
            doc = etree.fromstring(xml)
        except etree.XMLSyntaxError as e:
            why.append(f"{case_id}: not XML: {e}")
            continue
        if schema.validate(doc):
            valid += 1
        else:
            why.append(f"{case_id}: {schema.error_log.last_error}")
    return valid, why


def edit_one_entry(url: str) -> str:
    """Change one note's text in its stored line (the canonical JSON bytes); what was edited."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            q = "SELECT idx, line FROM case_log WHERE kind = 'noted' ORDER BY idx LIMIT 1"
            row = conn.execute(sa.text(q)).first()
            if row is None:
                row = conn.execute(sa.text("SELECT idx, line FROM case_log ORDER BY idx DESC LIMIT 1")).first()
            idx, line = row[0], bytes(row[1])
            edited = line.replace(b'"text":"note', b'"text":"NOTE', 1)
            if edited == line:  # no note text: change the entry's time instead
                edited = line.replace(b'"at":"2', b'"at":"1', 1)
            conn.execute(sa.text("UPDATE case_log SET line = :line WHERE idx = :idx"), {"line": edited, "idx": idx})
        return f"entry {idx}"
    finally:
        engine.dispose()


def drive(label: str, phase: str, base: str, server_cpu, users, targets: set[str], think_s: float,
          args: argparse.Namespace) -> dict[str, Any]:
    """The users on ``targets`` until each is closed or filed (or the time is up)."""
    tally = Tally(targets=targets, deadline=time.monotonic() + args.timeout)
    workers = [Worker(n, r, tok, base, tally, args.seed, args.page, args.close_share, think_s)
               for n, r, tok in users if r != "admin"]
    threads = [threading.Thread(target=w.run, name=w.name, daemon=True) for w in workers]
    t0, cpu0, server0 = time.perf_counter(), os.times(), server_cpu()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu1, server1 = os.times(), server_cpu()
    res: dict[str, Any] = {"phase": phase, "think_s": think_s, "tally": tally, "wall": wall, "targets": len(targets)}
    res["cpu_s"] = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    res["server_cpu_s"] = None if server0 is None or server1 is None else server1 - server0
    res["timed_out"] = len(tally.done) < len(targets)
    res["actions"] = actions = sum(tally.ok[a] for a in ACTIONS)
    res["actions_per_s"] = actions / wall if wall else float("nan")
    res["lat"] = [x for a in ACTIONS for x in tally.latencies.get(a, [])]
    res["conflicts"] = sum(tally.conflicts.values())
    res["errors"] = sum(tally.errors.values())
    states = Counter(tally.done.values())
    log(f"[{label}/{phase}] {len(workers)} users, think {think_s:.2f} s: {actions} actions in {wall:.1f} s = "
        f"{res['actions_per_s']:.1f}/s; cases closed {states['closed']}, filed {states['filed']}, errors "
        f"{states['error']}, unfinished {len(targets) - len(tally.done)}; 409s {res['conflicts']}; other errors "
        f"{res['errors']}" + ("; TIMED OUT" if res["timed_out"] else ""))
    return res


def run_backend(label: str, url: str, alerts_path: Path, tmp: Path, args: argparse.Namespace,
                filer: Path | None) -> dict[str, Any]:
    from auditflow_app import case_flow
    from auditflow_app.settings import Settings
    from reports.signing import generate_key_file

    work = tmp / label
    work.mkdir()
    users_file = work / "users.json"
    key_file = work / "signing.pem"
    generate_key_file(key_file)
    users = make_users(users_file, args.users, args.approvers)
    settings_kwargs = dict(out_dir=str(work / "out"), cases_url=url, users_file=str(users_file),
                           signing_key_file=str(key_file), analyst_max_results=args.page)
    if filer is not None:
        settings_kwargs["sar_filer_file"] = str(filer)
    settings = Settings(**settings_kwargs)

    # 1. open cases
    t0 = time.perf_counter()
    opened = case_flow.open_cases(settings, alerts_path, now=NOW)
    open_s = time.perf_counter() - t0
    res: dict[str, Any] = {"label": label, "alerts": opened.alerts, "opened": opened.opened, "joined": opened.joined,
                           "open_s": open_s}
    case_ids = sorted({r.entry.case_id for r in opened.receipts if r.entry.kind == "opened"})
    targets = set(case_ids[: args.cases]) if args.cases else set(case_ids)
    log(f"[{label}] opened {opened.opened} cases from {opened.alerts} alerts ({opened.joined} joined a case, "
        f"{opened.already} already in one) in {open_s:.2f} s: {opened.opened / open_s:.1f} cases/s, "
        f"{opened.alerts / open_s:.1f} alerts/s; driving {len(targets)} of them")

    # 2. the users: first with no think time (the server's capacity: actions/s), then as people
    #    (think time between requests: the latency a user sees at 20 users)
    serve = serve_process if args.server == "process" else serve_thread
    ordered = sorted(targets)
    halves = {"saturated": (set(ordered[: len(ordered) // 2]), 0.0),
              "users": (set(ordered[len(ordered) // 2:]), args.think_ms / 1000.0)}
    with serve(settings_kwargs) as (base, server_cpu):
        for phase, (phase_targets, think_s) in halves.items():
            res[phase] = drive(label, phase, base, server_cpu, users, phase_targets, think_s, args)
    res["targets"] = len(targets)
    res["timed_out"] = any(res[p]["timed_out"] for p in halves)
    res["errors"] = sum(res[p]["errors"] for p in halves)
    sars = {**res["saturated"]["tally"].sars, **res["users"]["tally"].sars}
    approved = res["saturated"]["tally"].approved | res["users"]["tally"].approved
    for p in halves:
        for e in res[p]["tally"].error_samples:
            log(f"[{label}]   error: {e}")

    # 3. the checks
    valid, why = check_sars(sars)
    res["sar_valid"], res["sar_total"] = valid, len(approved)
    for w in why[:5]:
        log(f"[{label}]   SAR invalid: {w}")
    t0 = time.perf_counter()
    v = case_flow.verify_cases(settings)
    res["verify_s"] = time.perf_counter() - t0
    res["verify_ok"] = v.ok
    log(f"[{label}] verify: {v.entries} entries, {v.cases} cases, {'ok' if v.ok else 'FAILED'} "
        f"in {res['verify_s']:.2f} s" + ("" if v.ok else f": {v.problems[:3]}"))
    what = edit_one_entry(url)
    v2 = case_flow.verify_cases(settings)
    res["verify_detects_edit"] = not v2.ok
    log(f"[{label}] verify after editing {what}: "
        + (f"fails as it must: {v2.problems[0]}" if not v2.ok else "PASSES (the edit was not detected)"))
    res["entries"] = v.entries
    return res


# ---------------------------------------------------------------------------- the report


def print_backend(b: dict[str, Any]) -> None:
    print(f"{b['label']}: {b['opened']} cases opened from {b['alerts']} alerts in {b['open_s']:.2f} s "
          f"({b['opened'] / b['open_s']:.1f} cases/s); {b['targets']} driven by the users; {b['entries']} log entries; "
          f"SAR XML valid {b['sar_valid']}/{b['sar_total']}, verify {'ok' if b['verify_ok'] else 'FAILED'} "
          f"({b['verify_s']:.2f} s), edit detected {'yes' if b['verify_detects_edit'] else 'NO'}")
    for phase in ("saturated", "users"):
        r = b[phase]
        t: Tally = r["tally"]
        print(f"  {phase}: {r['targets']} cases, think time {r['think_s']:.2f} s (exponential mean), "
              f"{r['wall']:.1f} s")
        print(f"  {'request':<16} {'n':>6} {'409':>5} {'err':>4} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
              f"{'max ms':>8}")
        rows = [(a, t.latencies.get(a, [])) for a in ACTIONS] + [("all actions", r["lat"])]
        rows += [(g, t.latencies.get(g, [])) for g in READS]
        for name, xs in rows:
            if name == "all actions":
                c, e = r["conflicts"], sum(v for k, v in t.errors.items() if k.split(" ")[0] in ACTIONS)
            else:
                c = t.conflicts.get(name, 0)
                e = sum(v for k, v in t.errors.items() if k.rsplit(" ", 1)[0] == name)
            print(f"  {name:<16} {len(xs):>6} {c:>5} {e:>4} {fmt(pct(xs, 50)):>8} {fmt(pct(xs, 95)):>8} "
                  f"{fmt(pct(xs, 99)):>8} {fmt(max(xs) if xs else float('nan')):>8}")
        n_req = sum(len(v) for v in t.latencies.values())
        cpu = (f"CPU: this process {r['cpu_s']:.1f} s"
               + (" (server and clients)" if r["server_cpu_s"] is None else
                  f" (the clients), the server process {r['server_cpu_s']:.1f} s = "
                  f"{1000 * r['server_cpu_s'] / max(n_req, 1):.1f} ms per request")
               + f"; {n_req} requests in {r['wall']:.1f} s = {n_req / r['wall']:.0f}/s")
        print(f"  {cpu}")
        print(f"  actions {r['actions']} ({r['actions_per_s']:.1f}/s), 409s {r['conflicts']}, errors {r['errors']}")


def side_by_side(sq: dict | None, pg: dict | None) -> None:
    def val(b, phase, key):
        return float("nan") if b is None else b[phase][key]

    def lat(b, phase, q, action=None):
        if b is None:
            return float("nan")
        r = b[phase]
        return pct(r["lat"] if action is None else r["tally"].latencies.get(action, []), q)

    rows = [("actions/s saturated", lambda b: val(b, "saturated", "actions_per_s")),
            ("cases opened/s", lambda b: float("nan") if b is None else b["opened"] / b["open_s"])]
    for phase in ("saturated", "users"):
        rows += [(f"p{q} ms {phase}", functools.partial(lambda p, q, b: lat(b, p, q), phase, q)) for q in (50, 95, 99)]
    rows += [(f"p99 ms users {a}", functools.partial(lambda a, b: lat(b, "users", 99, a), a)) for a in ACTIONS]
    rows += [("409s", lambda b: float("nan") if b is None else float(b["saturated"]["conflicts"]
                                                                     + b["users"]["conflicts"]))]
    print(f"  {'':<24} {'sqlite':>10} {'postgres':>10} {'pg/sqlite':>10}")
    for name, f in rows:
        a, b = f(sq), f(pg)
        ratio = b / a if a and not math.isnan(a) and not math.isnan(b) else float("nan")
        print(f"  {name:<24} {fmt(a):>10} {fmt(b):>10} {fmt(ratio, 2):>10}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer alerts and cases (still 20 users)")
    ap.add_argument("--alerts", type=Path, help="a run's alerts.jsonl (default: out/alerts.jsonl, else generated)")
    ap.add_argument("--generated", action="store_true", help="generated alerts even where out/alerts.jsonl exists")
    ap.add_argument("--cases", type=int, help="drive at most this many cases (default 200; quick 60)")
    ap.add_argument("--users", type=int, default=20, help="concurrent users (default 20, quick too)")
    ap.add_argument("--approvers", type=int, default=5, help="how many of the users are approvers (default 5)")
    ap.add_argument("--close-share", type=float, default=0.2, help="share of cases closed with no action")
    ap.add_argument("--page", type=int, default=100, help="queue page size (AUDITFLOW_ANALYST_MAX_RESULTS)")
    ap.add_argument("--server", choices=("thread", "process"), default="thread",
                    help="uvicorn in a thread of the bench (default) or in a process of its own")
    ap.add_argument("--backends", default="sqlite,postgres", help="which backends (default sqlite,postgres)")
    ap.add_argument("--require-postgres", action="store_true", help="fail when PostgreSQL is not there")
    ap.add_argument("--filer", type=Path, help=f"the SAR filer file (default {FILER_EXAMPLE.relative_to(ROOT)})")
    ap.add_argument("--timeout", type=float, help="seconds the users may take per backend (default 600; quick 240)")
    ap.add_argument("--think-ms", type=float, default=1000.0,
                    help="mean think time of a user between requests in the second phase (default 1000)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    if args.cases is None:
        args.cases = 60 if args.quick else 200
    if args.timeout is None:
        args.timeout = 240.0 if args.quick else 600.0
    if not 1 <= args.approvers < args.users:
        ap.error("--approvers must be at least 1 and fewer than --users")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    filer = args.filer or (FILER_EXAMPLE if FILER_EXAMPLE.is_file() else None)
    if filer is None:
        log(f"no SAR filer file ({FILER_EXAMPLE.relative_to(ROOT)} is missing; --filer PATH): "
            "export-sar will be refused")

    t_begin = time.perf_counter()
    results: dict[str, dict | None] = {"sqlite": None, "postgres": None}
    pg_note = ""
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench_cases_") as tmp_name:
        tmp = Path(tmp_name)
        alerts_path, source = alerts_file(args, tmp)
        log(f"alerts: {source}")
        if "sqlite" in backends:
            with sqlite_database(tmp) as url:
                results["sqlite"] = run_backend("sqlite", url, alerts_path, tmp, args, filer)
        if "postgres" in backends:
            server_url = os.environ.get("AUDITFLOW_POSTGRES_URL")
            why = ("AUDITFLOW_POSTGRES_URL is not set (deploy/services up postgres && "
                   'eval "$(deploy/services env)")') if not server_url else postgres_answers(server_url)
            if why:
                pg_note = f"PostgreSQL not run: {why}"
                log(pg_note)
                failed |= args.require_postgres
            else:
                with postgres_database(server_url) as url:
                    results["postgres"] = run_backend("postgres", url, alerts_path, tmp, args, filer)

    sq, pg = results["sqlite"], results["postgres"]
    ran = [r for r in (sq, pg) if r is not None]
    print(f"cases ({'quick, ' if args.quick else ''}{args.users} concurrent users ({args.approvers} approvers), "
          f"server in a {args.server}, alerts: {source}; {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}, "
          f"total {time.perf_counter() - t_begin:.0f} s)")
    for r in ran:
        print_backend(r)
    if pg_note:
        print(f"postgres: {pg_note}")
    side_by_side(sq, pg)
    valid = sum(r["sar_valid"] for r in ran)
    total = sum(r["sar_total"] for r in ran)
    verify_ok = int(bool(ran) and all(r["verify_ok"] for r in ran))
    detects = int(bool(ran) and all(r["verify_detects_edit"] for r in ran))
    p99_pg = pct(pg["users"]["lat"], 99) if pg else float("nan")
    p99_sq = pct(sq["users"]["lat"], 99) if sq else float("nan")
    floor = "nan" if pg is None else ("yes" if p99_pg <= 100 else "no")
    print(f"floors: p99 <= 100 ms per action at {args.users} users on PostgreSQL: {floor} ({fmt(p99_pg)} ms); "
          f"every exported SAR valid: {'yes' if valid == total else 'no'} ({valid}/{total}); "
          f"verify passes after the run: {'yes' if verify_ok else 'no'}; fails after one edited entry: "
          f"{'yes' if detects else 'no'}")
    failed |= not ran or valid != total or not verify_ok or not detects
    failed |= any(r["timed_out"] or r["errors"] for r in ran)
    head = {
        "actions_per_s_sqlite": fmt(sq["saturated"]["actions_per_s"]) if sq else "nan",
        "actions_per_s_postgres": fmt(pg["saturated"]["actions_per_s"]) if pg else "nan",
        "p99_ms": fmt(p99_pg),
        "sar_xml_valid": f"{valid}/{total}",
        "verify_ok": str(verify_ok),
        "p99_ms_sqlite": fmt(p99_sq),
        "p99_ms_saturated": fmt(pct(pg["saturated"]["lat"], 99)) if pg else "nan",
        "p99_ms_saturated_sqlite": fmt(pct(sq["saturated"]["lat"], 99)) if sq else "nan",
        "verify_detects_edit": str(detects),
        "think_ms": fmt(args.think_ms, 0),
        "errors": str(sum(r["errors"] for r in ran)),
        "cases_opened_per_s_sqlite": fmt(sq["opened"] / sq["open_s"]) if sq else "nan",
        "cases_opened_per_s_postgres": fmt(pg["opened"] / pg["open_s"]) if pg else "nan",
        "users": str(args.users),
        "cases": str(max((r["targets"] for r in ran), default=0)),
    }
    print("cases " + " ".join(f"{k}={v}" for k, v in head.items()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
