"""Secure by default, on the servers deploy/services starts: every listening socket of Kafka,
Neo4j and both Flink daemons is on loopback, idle and while a Python job runs (the gRPC servers a
TaskManager opens for its Python workers: deploy/ patches Beam's to bind loopback); Flink's REST API refuses jar uploads (jobs still go
in through POST /jobs: the ``flink run`` test in test_services.py); Neo4j's password lives in a
0600 file whose path, never the password, ``deploy/services env`` prints; and a Neo4j store that
ran with authentication off gets the generated password on its next start, data kept.

Sockets are read from /proc (tests/deploy/sockets.py): neither ``ss`` nor psutil is needed.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.deploy.sockets import flink_run_marked, is_loopback, listeners_of, listening_sockets, owner_of

REPO = Path(__file__).resolve().parents[2]
SERVICES = REPO / "deploy" / "services"
PRIVATE = Path(__file__).resolve().parent / "private_services.py"
PROBE_JOB = Path(__file__).resolve().parent / "listener_probe_job.py"


def services(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(SERVICES), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "AUDITFLOW_PYTHON": sys.executable})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def private_neo4j_env(tmp_path: Path) -> tuple[dict[str, str], int]:
    """The environment of a private Neo4j (tests/deploy/private_services.py) under ``tmp_path``, on
    a free loopback port, started the current way (authentication on), and that port."""
    bolt = free_port()
    env = {**os.environ, "AUDITFLOW_PYTHON": sys.executable, "AUDITFLOW_VAR": str(tmp_path / "var"),
           "AUDITFLOW_TEST_NEO4J_BOLT_PORT": str(bolt), "AUDITFLOW_NEO4J_HEAP": "512m"}
    env.pop("AUDITFLOW_TEST_NEO4J_LEGACY_NO_AUTH", None)
    return env, bolt


def rest(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data is not None else "GET")
    try:
        with opener.open(req, timeout=15) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _settings():
    from auditflow_app.settings import Settings

    return Settings()


# ------------------------------------------------------------------------------------------


@pytest.mark.services("kafka", "neo4j", "flink")
def test_every_server_listens_on_loopback_only():
    s = _settings()
    kafka_port = int(s.kafka_bootstrap.split(",")[0].rsplit(":", 1)[1])
    bolt_port = int(s.neo4j_uri.rsplit(":", 1)[1])
    rest_port = int(s.flink_rest.rstrip("/").rsplit(":", 1)[1])
    status, body = rest(f"{s.flink_rest.rstrip('/')}/taskmanagers")
    assert status == 200, body
    tms = json.loads(body)["taskmanagers"]
    assert tms, "no TaskManager registered"
    sockets = listening_sockets()
    servers = {"kafka": owner_of(kafka_port, sockets), "neo4j": owner_of(bolt_port, sockets),
               "flink jobmanager": owner_of(rest_port, sockets)}
    for i, tm in enumerate(tms):
        servers[f"flink taskmanager {i}"] = owner_of(int(tm["dataPort"]), sockets)
    seen = {name: listeners_of(pid, sockets) for name, pid in servers.items()}
    exposed = {name: [a for a in addrs if not is_loopback(a[0])] for name, addrs in seen.items()}
    assert not any(exposed.values()), f"listening beyond loopback: {exposed} (all: {seen})"
    # the check saw the servers' known listeners (it would pass vacuously otherwise)
    assert kafka_port in {p for _, p in seen["kafka"]} and len(seen["kafka"]) >= 2  # + KRaft controller
    assert bolt_port in {p for _, p in seen["neo4j"]}
    assert rest_port in {p for _, p in seen["flink jobmanager"]} and len(seen["flink jobmanager"]) >= 3  # + RPC, blob
    assert all(len(seen[n]) >= 2 for n in servers if n.startswith("flink taskmanager"))  # RPC + data


@pytest.mark.services("flink")
def test_a_python_jobs_grpc_servers_on_the_taskmanager_listen_on_loopback_only():
    """Seen from inside a running job: its Python worker lists its TaskManager's sockets."""
    import pyflink

    s = _settings()
    if s.flink_conf_dir is None:
        pytest.fail("AUDITFLOW_FLINK_CONF_DIR is not set: eval \"$(deploy/services env)\"")
    flink_home = s.flink_home or Path(pyflink.__file__).resolve().parent
    probe, _ = flink_run_marked(flink_home, s.flink_conf_dir, PROBE_JOB, "LISTENER_PROBE", REPO)
    assert probe["taskmanager"], probe  # the worker found the TaskManager it descends from
    listeners = [tuple(a) for a in probe["listeners"]]
    # RPC, data and metrics ports, plus the Beam servers of the running worker (>= 3 of them)
    assert len(listeners) >= 6, listeners
    exposed = [a for a in listeners + [tuple(a) for a in probe["worker"]] if not is_loopback(a[0])]
    assert not exposed, f"listening beyond loopback while a Python job runs: {exposed} (all: {listeners})"


@pytest.mark.services("flink")
def test_flink_refuses_jar_uploads():
    base = _settings().flink_rest.rstrip("/")
    boundary = uuid.uuid4().hex
    jar = b"PK\x05\x06" + b"\0" * 18  # an empty zip: a well-formed upload
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"jarfile\"; filename=\"x.jar\"\r\n"
            f"Content-Type: application/x-java-archive\r\n\r\n").encode() + jar + f"\r\n--{boundary}--\r\n".encode()
    status, answer = rest(f"{base}/jars/upload", data=body,
                          headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert status in (400, 404, 405), (status, answer)
    status, _ = rest(f"{base}/jars")
    assert status == 404  # no jar listing (or running) handler at all
    status, config = rest(f"{base}/config")
    assert status == 200 and json.loads(config)["features"]["web-submit"] is False
    status, jobs = rest(f"{base}/jobs/overview")  # the REST API itself still answers
    assert status == 200 and "jobs" in json.loads(jobs)


@pytest.mark.services("neo4j")
def test_env_prints_the_password_file_and_never_the_password():
    res = services("env", timeout=900)
    assert res.returncode == 0, res.stderr
    found = dict(re.findall(r"^export (\w+)=(.*)$", res.stdout, re.M))
    path = Path(found["AUDITFLOW_NEO4J_PASSWORD_FILE"].strip("'"))
    password = path.read_text().strip()
    assert len(password) >= 32
    assert password not in res.stdout and password not in res.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.services()
def test_a_store_that_ran_without_auth_gets_the_password_and_keeps_its_data(tmp_path):
    """The upgrade path of the shared instance: a store from the deploy/services that ran Neo4j
    with auth disabled, then `up` with this one; then a plain restart. Its own Neo4j only."""
    import neo4j

    env, bolt = private_neo4j_env(tmp_path)
    uri = f"bolt://127.0.0.1:{bolt}"
    password_file = tmp_path / "var" / "neo4j" / "auth" / "password"

    def run(cmd: str, legacy: bool = False, rc: int = 0) -> subprocess.CompletedProcess:
        e = {**env, "AUDITFLOW_TEST_NEO4J_LEGACY_NO_AUTH": "1"} if legacy else env
        res = subprocess.run([sys.executable, str(PRIVATE), cmd, "neo4j"], capture_output=True, text=True,
                             timeout=600, env=e)
        assert res.returncode == rc, res.stdout + res.stderr
        return res

    try:
        run("up", legacy=True)
        assert not password_file.exists()
        with neo4j.GraphDatabase.driver(uri, auth=None) as driver:  # auth off: anyone may write
            driver.execute_query("CREATE (:DeployTest {id: 'written-without-auth', v: 1})")
        # `up` while the old server runs: it is not restarted behind the user's back, and says so
        up = run("up", rc=1)
        assert "already running" in up.stderr and "authentication is DISABLED" in up.stderr, up.stderr
        run("down")

        up = run("up")
        assert "generated a password" in up.stderr and "healthy" in up.stderr, up.stderr
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        password = password_file.read_text().strip()
        with neo4j.GraphDatabase.driver(uri, auth=None) as driver:
            with pytest.raises(neo4j.exceptions.AuthError):
                driver.verify_connectivity()
        with neo4j.GraphDatabase.driver(uri, auth=("neo4j", password)) as driver:
            records, _, _ = driver.execute_query("MATCH (n:DeployTest) RETURN n.id AS id, n.v AS v")
            assert [(r["id"], r["v"]) for r in records] == [("written-without-auth", 1)]
        run("down")

        up = run("up")  # a restart: same password, nothing regenerated
        assert "generated a password" not in up.stderr, up.stderr
        assert password_file.read_text().strip() == password
        with neo4j.GraphDatabase.driver(uri, auth=("neo4j", password)) as driver:
            records, _, _ = driver.execute_query("MATCH (n:DeployTest) RETURN count(n) AS n")
            assert records[0]["n"] == 1
    finally:
        subprocess.run([sys.executable, str(PRIVATE), "down", "neo4j"], capture_output=True, text=True,
                       timeout=600, env=env)


@pytest.mark.services()
def test_a_password_that_begins_with_a_dash_is_set_and_accepted(tmp_path):
    """One generated password in 64 begins with '-' (token_urlsafe's alphabet has 64 letters): it
    reaches neo4j-admin's set-initial-password as the password, not as an option. Its own Neo4j,
    fresh store, the password file written by the user beforehand."""
    import neo4j

    env, bolt = private_neo4j_env(tmp_path)
    password_file = tmp_path / "var" / "neo4j" / "auth" / "password"
    password_file.parent.mkdir(parents=True)
    password = "-" + uuid.uuid4().hex + "--help"
    password_file.write_text(password + "\n")
    os.chmod(password_file, 0o600)
    try:
        res = subprocess.run([sys.executable, str(PRIVATE), "up", "neo4j"], capture_output=True, text=True,
                             timeout=600, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "generated a password" not in res.stderr, res.stderr
        with neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{bolt}", auth=("neo4j", password)) as driver:
            records, _, _ = driver.execute_query("RETURN 1 AS one")
            assert records[0]["one"] == 1
    finally:
        subprocess.run([sys.executable, str(PRIVATE), "down", "neo4j"], capture_output=True, text=True,
                       timeout=600, env=env)
