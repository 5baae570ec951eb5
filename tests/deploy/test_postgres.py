"""Integration tests for the PostgreSQL of deploy/services (the cases store's server).

They assume it is UP (``deploy/services up postgres``, ``eval "$(deploy/services env)"``,
``AUDITFLOW_SERVICES=1``; ``make test`` does all three): see ``services`` in tests/conftest.py.
Nothing is faked: a real server, real connections, real authentication.

The restart test never touches the shared server: it runs its own PostgreSQL (its own
``AUDITFLOW_VAR`` under /tmp and its own loopback port, through this file run as a script, which
loads deploy/services.py and changes its ``POSTGRES_PORT``), stops and starts that one, and checks
that the shared server ran throughout (same pid).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.deploy.services_cli import client_settings, services
from tests.deploy.sockets import is_loopback, listeners_of

REPO = Path(__file__).resolve().parents[2]
SHARED_PORT = 5433
URL = re.compile(r"postgresql\+psycopg://auditflow:([A-Za-z0-9_-]{32,})@127\.0\.0\.1:(\d+)/auditflow")

pytestmark = pytest.mark.services("postgres")


@pytest.fixture(scope="module")
def settings() -> dict[str, str]:
    """The client settings exactly as `deploy/services env` prints them."""
    return client_settings()


def shared_pid() -> int:
    res = services("status", "postgres", timeout=120)
    m = re.search(r"^postgres\s+running\b.*\bpostmaster pid (\d+)", res.stdout, re.M)
    assert m, res.stdout + res.stderr
    return int(m.group(1))


def connect(password: str, port: int = SHARED_PORT, user: str = "auditflow", dbname: str = "auditflow"):
    import psycopg

    return psycopg.connect(host="127.0.0.1", port=port, user=user, password=password, dbname=dbname,
                           connect_timeout=10, autocommit=True)


# ------------------------------------------------------------------------------------------


def test_env_prints_the_url_with_the_password_file_s_password(settings):
    url = settings["AUDITFLOW_POSTGRES_URL"]
    m = URL.fullmatch(url)
    assert m and int(m.group(2)) == SHARED_PORT, re.sub(r":[^:@/]+@", ":***@", url)
    var = Path(os.environ.get("AUDITFLOW_VAR") or REPO / "var").resolve()
    password_file = var / "postgres" / "password"
    assert m.group(1) == password_file.read_text().strip()  # URL-safe: no percent-encoding in the URL
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert os.environ.get("AUDITFLOW_POSTGRES_URL") == url  # what the suite's probe and fixture use


def test_status_reports_running():
    res = services("status", "postgres", timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"^postgres\s+running\s+postgresql://127\.0\.0\.1:5433/auditflow\b.*\[healthy: SELECT 1 ok",
                     res.stdout, re.M), res.stdout


def test_up_when_up_is_a_no_op():
    before = shared_pid()
    res = services("up", "postgres")
    assert res.returncode == 0, res.stderr
    assert "postgres: already running" in res.stderr and "postgres: starting" not in res.stderr, res.stderr
    assert shared_pid() == before


def test_select_1_with_the_password_and_a_wrong_one_refused(settings):
    import psycopg
    import sqlalchemy

    engine = sqlalchemy.create_engine(settings["AUDITFLOW_POSTGRES_URL"], poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT 1")).scalar_one() == 1
            row = conn.execute(sqlalchemy.text(
                "SELECT current_user, current_database(), r.rolsuper, r.rolcreatedb, "
                "pg_encoding_to_char(d.encoding), pg_get_userbyid(d.datdba) "
                "FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = current_database()"
            )).one()
            superusers = conn.execute(sqlalchemy.text("SELECT rolname FROM pg_roles WHERE rolsuper")).scalars().all()
    finally:
        engine.dispose()
    assert tuple(row) == ("auditflow", "auditflow", False, True, "UTF8", "auditflow")

    password = URL.fullmatch(settings["AUDITFLOW_POSTGRES_URL"]).group(1)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        connect(password[:-1] + ("A" if password[-1] != "A" else "B"))
    assert superusers  # the bootstrap superuser: over the unix socket only (peer), never over TCP
    for name in superusers:
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            connect(password, user=name, dbname="postgres")


def test_listens_on_loopback_only():
    found = listeners_of(shared_pid())
    assert ("127.0.0.1", SHARED_PORT) in found, found
    assert all(is_loopback(addr) for addr, _ in found), found


_seen: list[tuple[str, object]] = []  # (database name, a connection the test left open)


@pytest.mark.parametrize("turn", [1, 2])
def test_postgres_url_fixture_gives_an_empty_database_of_its_own(postgres_url, settings, turn):
    import sqlalchemy

    url = sqlalchemy.engine.make_url(postgres_url)
    assert re.fullmatch(r"auditflow_test_[0-9a-f]{16}", url.database), url.database
    engine = sqlalchemy.create_engine(postgres_url)
    conn = engine.connect()
    tables = conn.execute(sqlalchemy.text(
        "SELECT table_schema || '.' || table_name FROM information_schema.tables "
        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")).scalars().all()
    assert tables == []
    conn.execute(sqlalchemy.text("CREATE TABLE fixture_check (turn int)"))
    conn.execute(sqlalchemy.text("INSERT INTO fixture_check VALUES (:turn)"), {"turn": turn})
    conn.commit()
    assert conn.execute(sqlalchemy.text("SELECT turn FROM fixture_check")).scalars().all() == [turn]
    if turn == 1:
        _seen.append((url.database, (engine, conn)))  # left open: the fixture drops WITH (FORCE)
        return
    conn.close()
    engine.dispose()
    if not _seen:
        pytest.skip("turn 1 did not run")
    before, (old_engine, old_conn) = _seen.pop()
    assert before != url.database
    server = sqlalchemy.create_engine(settings["AUDITFLOW_POSTGRES_URL"], poolclass=sqlalchemy.pool.NullPool)
    try:
        with server.connect() as c:
            names = c.execute(sqlalchemy.text("SELECT datname FROM pg_database")).scalars().all()
    finally:
        server.dispose()
    assert before not in names and url.database in names  # turn 1's database is gone, open connection and all
    with contextlib.suppress(Exception):  # its server side was terminated by DROP ... WITH (FORCE)
        old_conn.close()
    old_engine.dispose()


# ------------------------------------------------------------------ a private server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def private_postgres():
    """A PostgreSQL of our own: own AUDITFLOW_VAR (short, under /tmp: the unix socket's path has a
    107-byte limit; searchable by others: as root the server runs as another user), own port;
    stopped and deleted at the end whatever happens."""
    var = Path(tempfile.mkdtemp(prefix="afpg-")) / "var"
    var.parent.chmod(0o755)
    port = free_port()
    env = {**os.environ, "AUDITFLOW_PYTHON": sys.executable, "AUDITFLOW_VAR": str(var),
           "AUDITFLOW_TEST_POSTGRES_PORT": str(port),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, __file__, *args, "postgres"], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=REPO)

    try:
        yield {"run": run, "port": port, "password_file": var / "postgres" / "password"}
    finally:
        down = run("down")
        assert down.returncode == 0, down.stdout + down.stderr
        shutil.rmtree(var.parent, ignore_errors=True)


def test_restart_keeps_a_table_and_does_not_wait_for_clients(private_postgres):
    """Our own server: up (initdb), a table, down while a client is connected (fast shutdown: it
    does not wait for the client), up: the table is there; the shared server ran throughout."""
    import psycopg

    run, port = private_postgres["run"], private_postgres["port"]
    shared_before = shared_pid()

    up = run("up")
    assert up.returncode == 0, up.stderr
    assert "postgres: initdb" in up.stderr and "postgres: starting" in up.stderr, up.stderr
    password = private_postgres["password_file"].read_text().strip()
    with connect(password, port) as conn:
        conn.execute("CREATE TABLE restart_check (v int)")
        conn.execute("INSERT INTO restart_check VALUES (7)")
    idle = connect(password, port)  # still connected while the server stops

    t0 = time.monotonic()
    down = run("down")
    assert down.returncode == 0, down.stderr
    assert "postgres: stopped" in down.stderr, down.stderr
    assert time.monotonic() - t0 < 30, down.stderr  # SIGTERM (smart) would wait for `idle`: 60 s, then SIGKILL
    assert "SIGKILL" not in down.stderr, down.stderr
    with pytest.raises(psycopg.OperationalError):
        idle.execute("SELECT 1")
    idle.close()
    status = run("status", timeout=120)
    assert status.returncode != 0
    assert re.search(r"^postgres\s+stopped", status.stdout, re.M), status.stdout
    assert shared_pid() == shared_before  # the shared server still runs, untouched

    up = run("up")
    assert up.returncode == 0, up.stderr
    assert "initdb" not in up.stderr and "generated a password" not in up.stderr, up.stderr
    with connect(password, port) as conn:
        assert conn.execute("SELECT v FROM restart_check").fetchall() == [(7,)]
    assert shared_pid() == shared_before


def _private_main(argv: list[str]) -> int:
    """deploy/services.py on a private AUDITFLOW_VAR and port, for PostgreSQL only."""
    var = os.environ.get("AUDITFLOW_VAR")
    if not var or Path(var).resolve() == (REPO / "var").resolve():
        sys.exit("test_postgres: set AUDITFLOW_VAR to a private directory")
    port = int(os.environ["AUDITFLOW_TEST_POSTGRES_PORT"])
    if argv[1:] != ["postgres"] or port == SHARED_PORT:
        sys.exit(f"test_postgres: only `{{up|down|status}} postgres` on a private port (got {argv}, {port})")
    spec = importlib.util.spec_from_file_location("auditflow_private_pg_services", REPO / "deploy" / "services.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)  # reads AUDITFLOW_VAR here
    if mod.POSTGRES_PORT != SHARED_PORT:
        sys.exit(f"test_postgres: deploy/services.py's POSTGRES_PORT is {mod.POSTGRES_PORT}: update {__file__}")
    mod.POSTGRES_PORT = port
    return mod.main(argv)


if __name__ == "__main__":
    sys.exit(_private_main(sys.argv[1:]))
