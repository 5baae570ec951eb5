"""The cases store on SQLite and on the real PostgreSQL: alerts into cases, the log's proofs
(verify passes after a history, names the entry after one is edited, removed or reordered), the
same histories on both databases, and two analysts at once (one wins, the other gets a 409)."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from auditflow_app.case_flow import alert_ref
from cases.store import CaseStore, verify_cases_log
from cases.workflow import Actor, Conflict, fold
from reports.audit_log import parse_line
from reports.merkle import MerkleTree, leaf_hash
from reports.signing import Keyring, Signer

from .conftest import NOW, SIGNER, alert_row, later

ANA, AMY, BOB = Actor("ana", "analyst"), Actor("amy", "analyst"), Actor("bob", "approver")
KEYS = Keyring([SIGNER.public_key])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.services("postgres"))])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cases.sqlite'}"
    return request.getfixturevalue("postgres_url")


def refs(*rows):
    return [alert_ref(r) for r in rows]


ROWS = [
    alert_row("e1", "A", "B", 500_000, tier="normal"),
    alert_row("e2", "C", "D", 90_000, tier="background"),
    alert_row("e3", "A", "E", 7_500_000, minute=30, tier="critical", typologies=["fan-out"]),
]


def script(store: CaseStore) -> None:
    """A history: three alerts (two on subject A: one case), worked to a filed SAR and a closing."""
    store.take_alerts(refs(*ROWS), NOW, "2026-12-31")
    a, c = store.cases()
    store.act(a.case_id, ANA, "assign", {"assignee": "ana", "assignee_role": "analyst"}, later(1))
    store.act(a.case_id, ANA, "start", {}, later(2))
    store.act(a.case_id, ANA, "note", {"text": "Two wires out of A in 30 minutes; E is new — « ünïcode »."}, later(3))
    store.act(a.case_id, ANA, "propose", {"narrative": "A paid B and E.", "categories": [[8, 807]]}, later(4))
    store.act(a.case_id, BOB, "approve", {}, later(5))
    store.act(a.case_id, ANA, "file", {"xml_sha256": "ab" * 32, "file_name": "x.xml"}, later(6))
    store.act(c.case_id, BOB, "assign", {"assignee": "amy", "assignee_role": "analyst"}, later(7))
    store.act(c.case_id, AMY, "start", {}, later(8))
    store.act(c.case_id, AMY, "close", {"reason": "monthly rent"}, later(9))


def test_alerts_open_and_join_cases_by_subject(url):
    with CaseStore(url, SIGNER) as store:
        got = store.take_alerts(refs(*ROWS), NOW, "2026-12-31")
        assert [r.entry.kind for r in got] == ["opened", "opened", "alert_joined"]
        cases = store.cases()
        assert [(c.subject["account"], c.alert_ids, c.priority) for c in cases] == [
            ("A", ("alert-e1", "alert-e3"), "critical"),  # the most urgent tier of its alerts
            ("C", ("alert-e2",), "background"),
        ]
        assert store.take_alerts(refs(*ROWS), NOW, "2026-12-31") == []  # the same alerts again: nothing
        assert store.size() == 3
        # a closed case takes no new alert: the subject's next alert opens a new case
        a = cases[0]
        for actor, action, p in [(ANA, "assign", {"assignee": "ana", "assignee_role": "analyst"}), (ANA, "start", {}),
                                 (ANA, "close", {"reason": "payroll"})]:
            store.act(a.case_id, actor, action, p, NOW)
        ref, subject = alert_ref(alert_row("e4", "A", "F", 100, minute=90))
        r = store.take_alert(ref, subject, NOW, "2027-01-01")
        assert r is not None and r.entry.kind == "opened" and r.case.case_id != a.case_id


def test_the_log_is_the_audit_log_format_and_verifies(url):
    with CaseStore(url, SIGNER) as store:
        script(store)
        lines, heads = store.log_lines(), store.tree_heads()
    assert [i for i, _ in lines] == list(range(len(lines))) == [h.tree_size - 1 for h in heads]
    # independent recomputation: each line parses as an audit log line, each head is the root of its prefix
    tree = MerkleTree()
    for (i, raw), head in zip(lines, heads, strict=True):
        entry, why = parse_line(raw, i)
        assert why is None and entry.kind.startswith("case.")
        tree.append(leaf_hash(raw))
        assert head.root_hash == tree.root().hex() and head.problem(KEYS) is None
    assert verify_cases_log(lines, heads, KEYS) == []
    assert verify_cases_log(lines, heads, Keyring([Signer.from_seed(b"x" * 32).public_key]))[0].startswith(
        "cases log tree head at size 1: signed by key"
    )


def _edit(url, sql, **params):
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(sql), params)
    engine.dispose()


def test_verify_names_an_edited_removed_or_reordered_entry(url):
    with CaseStore(url, SIGNER) as store:
        script(store)
        kept = store.tree_head()
    line = dict(CaseStore(url).log_lines())[5]
    assert b"Two wires" in line
    _edit(url, "UPDATE case_log SET line = :l WHERE idx = 5", l=line.replace(b"Two wires", b"One wire "))
    with CaseStore(url) as store:
        problems = verify_cases_log(store.log_lines(), store.tree_heads(), KEYS)
    assert problems[0] == ("cases log entry 5 was changed after it was signed (the signed tree head at size 6 "
                           "does not match the log's first 6 entries)"), problems
    _edit(url, "UPDATE case_log SET line = :l WHERE idx = 5", l=line)  # back as it was
    with CaseStore(url) as store:
        assert verify_cases_log(store.log_lines(), store.tree_heads(), KEYS) == []
        lines = store.log_lines()
    # reordered: entries 6 and 7 swap places (each line keeps its own bytes)
    _edit(url, "UPDATE case_log SET line = :l WHERE idx = 6", l=lines[7][1])
    _edit(url, "UPDATE case_log SET line = :l WHERE idx = 7", l=lines[6][1])
    with CaseStore(url) as store:
        problems = verify_cases_log(store.log_lines(), store.tree_heads(), KEYS)
    assert problems[0].startswith("cases log entry 6 was changed after it was signed"), problems
    assert any("entry 6 was rewritten: index 7, expected 6" in p for p in problems), problems
    _edit(url, "UPDATE case_log SET line = :l WHERE idx = 6", l=lines[6][1])
    _edit(url, "UPDATE case_log SET line = :l WHERE idx = 7", l=lines[7][1])
    # removed: the last entries and their heads go (as one who cuts the log would do)
    _edit(url, "DELETE FROM case_log WHERE idx >= 10")
    _edit(url, "DELETE FROM case_tree_heads WHERE tree_size > 10")
    with CaseStore(url) as store:
        alone = verify_cases_log(store.log_lines(), store.tree_heads(), KEYS)
        against_kept = verify_cases_log(store.log_lines(), store.tree_heads(), KEYS, trusted_head=kept)
    assert alone == []  # a clean cut is only seen against a head kept elsewhere
    assert any(f"records {kept.tree_size} log entries, the log has 10" in p for p in against_kept), against_kept
    _edit(url, "DELETE FROM case_log WHERE idx = 3")
    with CaseStore(url) as store:
        problems = verify_cases_log(store.log_lines(), store.tree_heads(), KEYS)
    assert problems[0] == "cases log entry 3 is missing (the next row has index 4): an entry was removed", problems


@pytest.mark.services("postgres")
def test_sqlite_and_postgresql_give_the_same_histories(tmp_path, postgres_url):
    got = []
    for url in (f"sqlite:///{tmp_path / 'c.sqlite'}", postgres_url):
        with CaseStore(url, SIGNER) as store:
            script(store)
            got.append((store.log_lines(), store.tree_heads()))
    assert got[0] == got[1]


def test_two_analysts_at_once_one_wins_the_other_gets_409(url):
    with CaseStore(url, SIGNER) as store:
        store.take_alerts(refs(*ROWS), NOW, "2026-12-31")
        case = store.cases()[0]
        store.act(case.case_id, BOB, "assign", {"assignee": "ana", "assignee_role": "analyst"}, NOW)
        store.act(case.case_id, ANA, "start", {}, NOW)
        version = store.case(case.case_id).version
        barrier, results = threading.Barrier(2), {}

        def note(who: Actor) -> None:
            barrier.wait()
            try:
                store.act(case.case_id, who, "note", {"text": f"by {who.name}"}, NOW, expected_version=version)
                results[who.name] = "ok"
            except Conflict as e:
                results[who.name] = str(e)

        threads = [threading.Thread(target=note, args=(a,)) for a in (ANA, AMY)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(v == "ok" for v in results.values()) == [False, True], results
        loser = next(v for v in results.values() if v != "ok")
        assert f"changed since version {version}" in loser and "reload it" in loser
        notes = [e.payload["text"] for e in store.case(case.case_id).notes]
        assert len(notes) == 1 and notes[0] == f"by {next(k for k, v in results.items() if v == 'ok')}"


def test_many_writers_lose_nothing(url):
    with CaseStore(url, SIGNER) as store:
        store.take_alerts(refs(*ROWS), NOW, "2026-12-31")
        ids = [c.case_id for c in store.cases()]

    def writer(k: int) -> None:
        with CaseStore(url, SIGNER) as mine:  # a store each: as separate processes would
            for j in range(5):
                mine.act(ids[k % 2], Actor(f"u{k}", "analyst"), "note", {"text": f"{k}-{j}"}, NOW)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with CaseStore(url) as store:
        lines, heads = store.log_lines(), store.tree_heads()
        texts = sorted(e.payload["text"] for c in store.cases() for e in c.notes)
    assert texts == sorted(f"{k}-{j}" for k in range(8) for j in range(5))
    assert len(lines) == 3 + 40 and verify_cases_log(lines, heads, KEYS) == []
    assert all(fold(c.entries) == c for c in CaseStore(url).cases())


USERS = [ANA, AMY, BOB, Actor("bea", "approver"), Actor("aud", "auditor"), Actor("adm", "admin")]
PAYLOADS = {
    "assign": {}, "start": {}, "note": {"text": "n"}, "escalate": {"reason": "r"}, "close": {"reason": "r"},
    "propose": {"narrative": "A paid B.", "categories": [[8, 807]]}, "approve": {}, "reject": {"reason": "r"},
    "file": {"xml_sha256": "ab" * 32}, "reopen": {"reason": "r"},
}


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.services("postgres"))])
def test_random_histories_through_the_store_fold_from_the_raw_log(backend, tmp_path, request):
    """Random actions by random users through the store: refused ones leave the log as it was; the
    case read back equals the fold of its entries parsed from the raw rows; every approval's
    proposer (found in the raw rows) is someone else; the log verifies."""
    from hypothesis import HealthCheck, given
    from hypothesis import settings as hsettings
    from hypothesis import strategies as st

    from cases.workflow import CaseEntry, CaseError

    base = f"sqlite:///{tmp_path}/h" if backend == "sqlite" else None
    counter = iter(range(10_000))

    @hsettings(max_examples=15 if backend == "sqlite" else 6, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.tuples(st.sampled_from(USERS), st.sampled_from(sorted(PAYLOADS)), st.sampled_from(USERS)),
                    min_size=5, max_size=30))
    def run(steps):
        url = f"{base}{next(counter)}.sqlite" if base else request.getfixturevalue("postgres_url")
        with CaseStore(url, SIGNER) as store:
            store.take_alerts(refs(ROWS[0]), NOW, "2026-12-31")
            case_id = store.cases()[0].case_id
            for actor, action, other in steps:
                payload = dict(PAYLOADS[action])
                if action == "assign":
                    payload = {"assignee": other.name if actor.role == "approver" else actor.name,
                               "assignee_role": other.role if actor.role == "approver" else actor.role}
                before = store.size()
                try:
                    store.act(case_id, actor, action, payload, NOW)
                except CaseError:
                    assert store.size() == before
            lines, heads = store.log_lines(), store.tree_heads()
            raw = [parse_line(line, i)[0] for i, line in lines]
            entries = [CaseEntry.from_log(e.kind, e.payload) for e in raw]
            assert fold(entries) == store.case(case_id)
            for e in entries:
                if e.kind == "sar_approved":
                    assert entries[e.payload["proposal_seq"]].actor != e.actor
            assert verify_cases_log(lines, heads, KEYS) == []
        if not base:
            sa.create_engine(url).dispose()

    run()


def test_processes_opening_a_new_sqlite_store_at_once_migrate_it_once(tmp_path):
    """Four processes open the same new SQLite file at the same instant and each takes an alert:
    all succeed, the schema is made once, and the log holds the four entries."""
    import subprocess
    import sys
    import time

    url = f"sqlite:///{tmp_path / 'new.sqlite'}"
    start = time.time() + 3
    code = ("import sys, time; from datetime import datetime, UTC; from cases.store import CaseStore; "
            "from reports.signing import Signer; time.sleep(max(0, float(sys.argv[2]) - time.time())); "
            "s = CaseStore(sys.argv[1], Signer.from_seed(b'k' * 32)); "
            "s.take_alert({'alert_id': 'alert-' + sys.argv[3]}, {'bank': '1', 'account': sys.argv[3]}, "
            "datetime(2026, 12, 1, tzinfo=UTC), '2026-12-31')")
    procs = [subprocess.Popen([sys.executable, "-c", code, url, str(start), f"A{i}"], stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    with CaseStore(url) as store:
        assert store.size() == 4 and sorted(c.subject["account"] for c in store.cases()) == ["A0", "A1", "A2", "A3"]
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM alembic_version")).scalar() == 1
    engine.dispose()
