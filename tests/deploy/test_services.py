"""Integration tests for deploy/services: real Kafka, Neo4j and Flink servers on loopback.

They assume the services are already UP (``deploy/services up``; ``make test`` starts them and
sets AUDITFLOW_SERVICES=1): see ``services`` in tests/conftest.py (skipped without it, an error
under CI or when a server does not answer). Nothing is faked.

The restart test never touches the shared servers: it runs its own Kafka and Neo4j (its own
``AUDITFLOW_VAR`` and loopback ports, through tests/deploy/private_services.py), stops and starts
those, and checks that the shared servers kept running throughout (same pids). Start-up times
are measured by ``bench/services.py``, not asserted here.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.deploy.services_cli import client_settings, services
from tests.deploy.sockets import flink_run_marked

REPO = Path(__file__).resolve().parents[2]
TINY_JOB = Path(__file__).resolve().parent / "tiny_keyed_job.py"
PRIVATE = Path(__file__).resolve().parent / "private_services.py"

pytestmark = pytest.mark.services("kafka", "neo4j", "flink")


@pytest.fixture(scope="module")
def settings() -> dict[str, str]:
    """The client settings exactly as `deploy/services env` prints them."""
    return client_settings()


def kafka_admin(bootstrap: str):
    from kafka import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="deploy-tests", request_timeout_ms=30000)


def produce_one(bootstrap: str, topic: str, key: bytes, value: bytes):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    try:
        meta = producer.send(topic, key=key, value=value).get(timeout=60)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    return meta


def consume_at(bootstrap: str, topic: str, partition: int, offset: int, deadline_s: float = 60):
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            for records in consumer.poll(timeout_ms=1000).values():
                for rec in records:
                    if rec.offset == offset:
                        return rec
        raise AssertionError(f"no record at {topic}[{partition}]@{offset} within {deadline_s}s")
    finally:
        consumer.close()


def neo4j_driver(uri: str, password_file: str | Path):
    """A driver as user neo4j with the password deploy/services generated (auth is on)."""
    import neo4j
    return neo4j.GraphDatabase.driver(uri, auth=("neo4j", Path(password_file).read_text().strip()))


def rest(url: str):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    with opener.open(url, timeout=10) as r:
        return json.load(r)


# ------------------------------------------------------------------------------------------

def test_env_prints_client_settings(settings):
    assert settings["AUDITFLOW_KAFKA_BOOTSTRAP"] == "127.0.0.1:9092"
    assert settings["AUDITFLOW_NEO4J_URI"] == "bolt://127.0.0.1:7687"
    assert settings["AUDITFLOW_NEO4J_USER"] == "neo4j"
    password_file = Path(settings["AUDITFLOW_NEO4J_PASSWORD_FILE"])  # the path, not the password
    assert password_file.is_absolute() and password_file.is_file(), password_file
    assert "AUDITFLOW_NEO4J_PASSWORD" not in settings
    assert settings["AUDITFLOW_FLINK_REST"] == "http://127.0.0.1:8081"
    jar = Path(settings["AUDITFLOW_FLINK_KAFKA_JAR"])
    assert jar.is_absolute() and jar.is_file(), jar
    assert jar.name == "flink-sql-connector-kafka-5.0.0-2.2.jar"
    assert (Path(settings["FLINK_HOME"]) / "bin" / "flink").is_file()


def test_status_reports_all_running():
    res = services("status", timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    for name in ("kafka", "neo4j", "flink"):
        assert re.search(rf"^{name}\s+running\b", res.stdout, re.M), res.stdout


def test_up_when_up_is_a_no_op():
    before = shared_pids()
    res = services("up", timeout=300)
    assert res.returncode == 0, res.stderr
    for name in ("kafka", "neo4j", "flink"):
        assert f"{name}: already running" in res.stderr, res.stderr
        assert f"{name}: starting" not in res.stderr, res.stderr
    assert shared_pids() == before  # nothing was restarted


def test_kafka_topic_with_3_partitions_and_round_trip(settings):
    from kafka.admin import NewTopic
    bootstrap = settings["AUDITFLOW_KAFKA_BOOTSTRAP"]
    topic = f"deploy-test-{uuid.uuid4().hex[:8]}"
    admin = kafka_admin(bootstrap)
    try:
        admin.create_topics([NewTopic(name=topic, num_partitions=3, replication_factor=1)])
        assert topic in admin.list_topics()
        [desc] = admin.describe_topics([topic])
        assert len(desc["partitions"]) == 3
        value = json.dumps({"tx": "t-1", "amount": "12.50"}).encode()
        meta = produce_one(bootstrap, topic, b"acct-1", value)
        assert meta.topic == topic and meta.partition in (0, 1, 2)
        rec = consume_at(bootstrap, topic, meta.partition, meta.offset)
        assert (rec.key, rec.value) == (b"acct-1", value)
    finally:
        try:
            admin.delete_topics([topic])
        finally:
            admin.close()


def test_neo4j_return_1_and_write_read(settings):
    node_id = f"deploy-test-{uuid.uuid4().hex[:8]}"
    with neo4j_driver(settings["AUDITFLOW_NEO4J_URI"], settings["AUDITFLOW_NEO4J_PASSWORD_FILE"]) as driver:
        records, _, _ = driver.execute_query("RETURN 1 AS ok")
        assert records[0]["ok"] == 1
        try:
            driver.execute_query("MERGE (a:DeployTest {id: $id}) SET a.amount = $amount "
                                 "MERGE (b:DeployTest {id: $id + '-b'}) MERGE (a)-[:SENT {n: 1}]->(b)",
                                 id=node_id, amount=42)
            records, _, _ = driver.execute_query(
                "MATCH (a:DeployTest {id: $id})-[r:SENT]->(b) RETURN a.amount AS amount, r.n AS n, b.id AS b",
                id=node_id, routing_="r")
            assert [(r["amount"], r["n"], r["b"]) for r in records] == [(42, 1, node_id + "-b")]
        finally:
            driver.execute_query("MATCH (n:DeployTest) WHERE n.id STARTS WITH $id DETACH DELETE n", id=node_id)


def test_flink_overview_has_a_taskmanager(settings):
    ov = rest(settings["AUDITFLOW_FLINK_REST"] + "/overview")
    assert ov["taskmanagers"] >= 1
    assert ov["slots-total"] >= 1
    assert ov["flink-version"] == "2.2.0"


def test_flink_run_tiny_keyed_pyflink_job(settings):
    flink_home = Path(settings["FLINK_HOME"])
    result, out = flink_run_marked(flink_home, settings["AUDITFLOW_FLINK_CONF_DIR"], TINY_JOB, "TINY_JOB_RESULT", REPO)
    assert result["final"] == {"k0": [165, 10], "k1": [145, 10], "k2": [155, 10]}
    assert result["records_out"] == 30
    assert result["worker_pythons"] == [sys.executable]  # python.executable / -pyexec reached the TM
    assert result["repo_importable"] is True              # PYTHONPATH of the daemons has the repo root
    job_id = re.search(r"JobID ([0-9a-f]{32})", out).group(1)
    job = rest(f"{settings['AUDITFLOW_FLINK_REST']}/jobs/{job_id}")
    assert job["state"] == "FINISHED"


def shared_pids() -> dict[str, list[int]]:
    """Pids per service of the shared instance, from `deploy/services status`."""
    res = services("status", timeout=120)
    out = {}
    for name in ("kafka", "neo4j", "flink"):
        line = re.search(rf"^{name}\s.*$", res.stdout, re.M)
        out[name] = sorted(int(p) for p in re.findall(r"pid (\d+)", line.group(0))) if line else []
    return out


def free_ports(n: int) -> list[int]:
    """n distinct loopback ports free right now (the kernel's picks)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture
def private_instance(tmp_path):
    """Kafka and Neo4j of our own: own AUDITFLOW_VAR, own ports; stopped at the end whatever happens."""
    kafka, controller, bolt = free_ports(3)
    env = {
        **os.environ,
        "AUDITFLOW_PYTHON": sys.executable,
        "AUDITFLOW_VAR": str(tmp_path / "var"),
        "AUDITFLOW_TEST_KAFKA_PORT": str(kafka),
        "AUDITFLOW_TEST_KAFKA_CONTROLLER_PORT": str(controller),
        "AUDITFLOW_TEST_NEO4J_BOLT_PORT": str(bolt),
        "AUDITFLOW_KAFKA_HEAP": "256m",
        "AUDITFLOW_NEO4J_HEAP": "512m",
    }

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(PRIVATE), *args, "kafka", "neo4j"], capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=REPO)

    try:
        yield {"run": run, "bootstrap": f"127.0.0.1:{kafka}", "uri": f"bolt://127.0.0.1:{bolt}",
               "password_file": tmp_path / "var" / "neo4j" / "auth" / "password"}
    finally:
        down = run("down")
        assert down.returncode == 0, down.stdout + down.stderr


def test_restart_keeps_neo4j_node_and_kafka_topic(settings, private_instance):
    """Our own Kafka and Neo4j: up, write, down, up: data written before must survive; the
    shared servers neither see our data nor notice the restarts."""
    from kafka.admin import NewTopic
    run = private_instance["run"]
    bootstrap, uri = private_instance["bootstrap"], private_instance["uri"]
    password_file = private_instance["password_file"]
    shared_before = shared_pids()
    tag = uuid.uuid4().hex[:8]
    topic, node_id = f"deploy-restart-{tag}", f"deploy-restart-{tag}"

    up = run("up")
    assert up.returncode == 0, up.stderr
    assert "kafka: starting" in up.stderr and "neo4j: starting" in up.stderr, up.stderr
    admin = kafka_admin(bootstrap)
    try:
        admin.create_topics([NewTopic(name=topic, num_partitions=3, replication_factor=1)])
    finally:
        admin.close()
    meta = produce_one(bootstrap, topic, b"k", b"before-restart")
    with neo4j_driver(uri, password_file) as driver:
        driver.execute_query("CREATE (:DeployTest {id: $id, v: 7})", id=node_id)

    down = run("down")
    assert down.returncode == 0, down.stderr
    status = run("status", timeout=120)
    assert status.returncode != 0
    assert re.search(r"^kafka\s+stopped", status.stdout, re.M), status.stdout
    assert re.search(r"^neo4j\s+stopped", status.stdout, re.M), status.stdout
    assert shared_pids() == shared_before  # the shared servers still run, untouched

    up = run("up")
    assert up.returncode == 0, up.stderr
    assert "generated a password" not in up.stderr  # the store keeps the password of the first up
    admin = kafka_admin(bootstrap)
    try:
        assert topic in admin.list_topics()
        [desc] = admin.describe_topics([topic])
        assert len(desc["partitions"]) == 3
    finally:
        admin.close()
    rec = consume_at(bootstrap, topic, meta.partition, meta.offset)
    assert rec.value == b"before-restart"
    with neo4j_driver(uri, password_file) as driver:
        records, _, _ = driver.execute_query("MATCH (n:DeployTest {id: $id}) RETURN n.v AS v", id=node_id)
        assert [r["v"] for r in records] == [7]

    # our data never reached the shared servers, which ran throughout
    admin = kafka_admin(settings["AUDITFLOW_KAFKA_BOOTSTRAP"])
    try:
        assert topic not in admin.list_topics()
    finally:
        admin.close()
    with neo4j_driver(settings["AUDITFLOW_NEO4J_URI"], settings["AUDITFLOW_NEO4J_PASSWORD_FILE"]) as driver:
        records, _, _ = driver.execute_query("MATCH (n:DeployTest {id: $id}) RETURN n", id=node_id)
        assert records == []
    assert shared_pids() == shared_before
