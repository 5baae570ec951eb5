#!/usr/bin/env python3
"""Run the real servers auditflow needs on loopback, assembled from Maven Central jars (and the
system's PostgreSQL server binaries).

    deploy/services up     [kafka|neo4j|flink|postgres ...]   start (no-op for what already runs)
    deploy/services down   [kafka|neo4j|flink|postgres ...]   stop (SIGTERM, wait, SIGKILL after a timeout)
    deploy/services status [kafka|neo4j|flink|postgres ...]   per-service state; exit 0 only if all healthy
    deploy/services env                                       shell `export` lines for the client settings
    deploy/services connector-jar                             path of Flink's Kafka connector jar (fetched)

Services (no Docker; one JVM each, Flink has two, PostgreSQL its own processes), every listener
on 127.0.0.1 only:
  kafka  Apache Kafka 4.1 single-node KRaft broker+controller, 127.0.0.1:9092 (controller 9093),
         PLAINTEXT without authentication (loopback only; see deploy/README.md for production)
  neo4j  Neo4j 5.26 Community (embedded DBMS + Bolt), bolt://127.0.0.1:7687, HTTP off,
         authentication ON: user `neo4j` with a password generated on first use (`secrets`)
         into $AUDITFLOW_VAR/neo4j/auth/password (mode 0600) and set before the server starts
         (neo4j-admin set-initial-password; also upgrades a store that ran with auth disabled)
  flink  Flink 2.2 standalone session cluster from the pip `apache-flink` package
         (JobManager + TaskManager), REST http://127.0.0.1:8081, web submission off
         (no /jars upload or run; jobs are submitted with `flink run`, i.e. POST /jobs)
  postgres  PostgreSQL (newest /usr/lib/postgresql/*/bin, or AUDITFLOW_PG_BIN), 127.0.0.1:5433,
         unix socket in $AUDITFLOW_VAR/postgres/run; role `auditflow` (CREATEDB, not superuser)
         owning database `auditflow`, SCRAM password generated on first use into
         $AUDITFLOW_VAR/postgres/password (0600). Run as the system user `auditflow-pg`
         (created with useradd) through runuser when this script runs as root.

`env` prints the Neo4j password file's path (AUDITFLOW_NEO4J_PASSWORD_FILE), never the password;
AUDITFLOW_POSTGRES_URL is a SQLAlchemy URL and carries the PostgreSQL password in it.

State lives under $AUDITFLOW_VAR (default <repo>/var): data, logs, pid files, generated config.
Jar sets are resolved once by Maven into <repo>/.cache/deploy (override: AUDITFLOW_DEPLOY_CACHE)
and reused while the pom.xml beside this script is unchanged, so a second `up` never calls Maven.
Run it with the project's virtualenv Python (the deploy/services wrapper does): health checks use
kafka-python and the neo4j driver, and Flink's Python workers use this interpreter.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import logging
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

DEPLOY = Path(__file__).resolve().parent
REPO = DEPLOY.parent
VAR = Path(os.environ.get("AUDITFLOW_VAR") or REPO / "var").expanduser().resolve()
CACHE = Path(os.environ.get("AUDITFLOW_DEPLOY_CACHE") or REPO / ".cache" / "deploy").expanduser().resolve()
RUN = VAR / "run"
LOG = VAR / "log"
# Not resolved on purpose: a venv's bin/python is a symlink, and following it leaves the venv.
PYTHON = os.environ.get("AUDITFLOW_PYTHON") or sys.executable

HOST = "127.0.0.1"
KAFKA_PORT = 9092
KAFKA_CONTROLLER_PORT = 9093
NEO4J_BOLT_PORT = 7687
NEO4J_USER = "neo4j"  # the initial admin user of Neo4j Community (the only one it has)
FLINK_REST_PORT = 8081
FLINK_RPC_PORT = 6123
POSTGRES_PORT = 5433  # not 5432: a system cluster there never clashes
POSTGRES_USER = "auditflow"  # the role clients log in as (owner of POSTGRES_DB, CREATEDB)
POSTGRES_DB = "auditflow"
POSTGRES_OS_USER = "auditflow-pg"  # runs the server when this script runs as root

KAFKA_BOOTSTRAP = f"{HOST}:{KAFKA_PORT}"
NEO4J_URI = f"bolt://{HOST}:{NEO4J_BOLT_PORT}"
FLINK_REST = f"http://{HOST}:{FLINK_REST_PORT}"

KAFKA_HEAP = os.environ.get("AUDITFLOW_KAFKA_HEAP", "512m")
NEO4J_HEAP = os.environ.get("AUDITFLOW_NEO4J_HEAP", "768m")
NEO4J_PAGECACHE_BYTES = 256 * 1024 * 1024
FLINK_JM_PROCESS = os.environ.get("AUDITFLOW_FLINK_JM_MEMORY", "768m")
FLINK_TM_PROCESS = os.environ.get("AUDITFLOW_FLINK_TM_MEMORY", "1536m")
FLINK_SLOTS = int(os.environ.get("AUDITFLOW_FLINK_SLOTS", "2"))
POSTGRES_SHARED_BUFFERS = "64MB"
POSTGRES_MAX_CONNECTIONS = 60  # 3 of them reserved for superusers

MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
# The JVM flags Neo4j's packaged neo4j.conf adds; Netty and the page cache need them on Java 17.
NEO4J_JVM_FLAGS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Djdk.nio.maxCachedBufferSize=1024",
    "-XX:+ExitOnOutOfMemoryError",
]


class DeployError(Exception):
    """A failure with a message meant for the user (no traceback)."""


def info(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Tools: java, mvn
# --------------------------------------------------------------------------------------------

def java_bin() -> Path:
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not java.is_file():
            raise DeployError(f"JAVA_HOME={home} has no bin/java: point it at a JDK 17 or 21, or unset it")
    else:
        found = shutil.which("java")
        if not found:
            raise DeployError(
                "java not found: install a JDK 17 or 21 (Debian: apt-get install openjdk-17-jdk-headless) "
                "or set JAVA_HOME")
        java = Path(found)
    return java


def java_home() -> Path:
    return java_bin().resolve().parent.parent


_JAVA_CHECKED = False


def check_java() -> None:
    global _JAVA_CHECKED
    if _JAVA_CHECKED:
        return
    java = java_bin()
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60).stderr
    except OSError as e:
        raise DeployError(f"cannot run {java}: {e}") from e
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(m.group(1)) if m else 0
    if major == 1 and m and m.group(2):
        major = int(m.group(2))
    if major < 17:
        raise DeployError(f"{java} is Java {major or '?'}; Kafka 4.x and Neo4j 5.26 need Java 17 or newer "
                          f"(set JAVA_HOME to a JDK 17). `java -version` said:\n{out.strip()}")
    _JAVA_CHECKED = True


def mvn_bin() -> str:
    found = shutil.which("mvn")
    if not found:
        raise DeployError(
            "mvn not found, and the jar cache under "
            f"{CACHE} is empty or stale: install Maven 3.6+ (Debian: apt-get install maven), "
            "or copy a filled .cache/deploy from another checkout")
    return found


# --------------------------------------------------------------------------------------------
# Jar sets resolved by Maven, cached under CACHE/<name>/lib with a stamp of the pom's hash
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JarSet:
    name: str            # cache subdir
    pom: Path
    transitive: bool = True

    @property
    def lib(self) -> Path:
        return CACHE / self.name / "lib"

    @property
    def stamp(self) -> Path:
        return self.lib / ".stamp"

    def digest(self) -> str:
        return hashlib.sha256(self.pom.read_bytes()).hexdigest()

    def cached(self) -> bool:
        return self.stamp.is_file() and self.stamp.read_text().strip() == self.digest()

    def ensure(self) -> Path:
        """Return the lib dir, calling Maven only when the cache is missing or the pom changed."""
        if self.cached():
            return self.lib
        mvn = mvn_bin()
        tmp = self.lib.with_name("lib.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        log = CACHE / self.name / "maven.log"
        cmd = [mvn, "-B", "-f", str(self.pom), f"-Dmaven.repo.local={CACHE / 'm2'}",
               f"{MAVEN_DEPENDENCY_PLUGIN}:copy-dependencies", f"-DoutputDirectory={tmp}",
               "-DincludeScope=runtime"]
        if not self.transitive:
            cmd.append("-DexcludeTransitive=true")
        info(f"[{self.name}] resolving jars with Maven (first run only; log: {log})")
        t0 = time.monotonic()
        env = dict(os.environ)
        env.setdefault("JAVA_HOME", str(java_home()))
        with open(log, "w") as fh:
            rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env).returncode
        if rc != 0:
            raise DeployError(f"Maven failed for {self.pom} (exit {rc}); last lines of {log}:\n"
                              + tail(log, 25))
        (tmp / ".stamp").write_text(self.digest() + "\n")
        shutil.rmtree(self.lib, ignore_errors=True)
        tmp.rename(self.lib)
        info(f"[{self.name}] {len(list(self.lib.glob('*.jar')))} jars in {self.lib} "
             f"({time.monotonic() - t0:.0f}s)")
        return self.lib


KAFKA_JARS = JarSet("kafka", DEPLOY / "kafka" / "pom.xml")
NEO4J_JARS = JarSet("neo4j", DEPLOY / "neo4j" / "pom.xml")
FLINK_CONNECTOR_JARS = JarSet("flink", DEPLOY / "flink" / "pom.xml", transitive=False)


def connector_jar(fetch: bool = True) -> Path:
    """Flink's Kafka SQL connector uber jar (fetched by Maven on first use)."""
    lib = FLINK_CONNECTOR_JARS.ensure() if fetch else FLINK_CONNECTOR_JARS.lib
    if not fetch and not FLINK_CONNECTOR_JARS.cached():
        return lib / f"flink-sql-connector-kafka-{pom_property(FLINK_CONNECTOR_JARS.pom, 'flink.kafka.connector.version')}.jar"
    jars = sorted(lib.glob("flink-sql-connector-kafka-*.jar"))
    if len(jars) != 1:
        raise DeployError(f"expected one flink-sql-connector-kafka jar in {lib}, found {jars}")
    return jars[0]


def pom_property(pom: Path, name: str) -> str:
    m = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text())
    return m.group(1).strip() if m else "?"


# --------------------------------------------------------------------------------------------
# Processes, pid files, ports
# --------------------------------------------------------------------------------------------

def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def alive(pid: int, markers: tuple[str, ...]) -> bool:
    """True if pid runs and its command line contains every marker (guards against pid reuse)."""
    if pid <= 0 or is_zombie(pid):
        return False
    args = " ".join(cmdline(pid))
    return bool(args) and all(m in args for m in markers)


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def read_pids(pidfile: Path) -> list[int]:
    try:
        return [int(x) for x in pidfile.read_text().split() if x.strip().isdigit()]
    except OSError:
        return []


def port_in_use(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def port_open(port: int, host: str = HOST, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_owner(port: int) -> str:
    """Best effort description of who listens on a port (needs `ss`; pids only for own processes)."""
    ss = shutil.which("ss")
    if not ss:
        return ""
    try:
        out = subprocess.run([ss, "-Htlnp", f"sport = :{port}"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r'users:\(\("([^"]+)",pid=(\d+)', out)
    if m:
        args = " ".join(" ".join(cmdline(int(m.group(2)))).split())[:160]
        return f"pid {m.group(2)} ({m.group(1)}): {args}"
    return out.strip()[:200]


def terminate(pid: int, markers: tuple[str, ...], timeout: float, what: str,
              sig: int = signal.SIGTERM) -> None:
    """sig (SIGTERM), wait for exit up to timeout, then SIGKILL the process and its process group."""
    if not alive(pid, markers):
        return
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid, markers):
            return
        time.sleep(0.2)
    info(f"{what}: pid {pid} still running {timeout:.0f}s after {signal.Signals(sig).name}; sending SIGKILL")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    # Children (e.g. Flink's Python workers) share the daemon's process group, which this script
    # created (start_new_session) -- never our own group.
    if pgid not in (os.getpgrp(), 0, 1):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for _ in range(50):
        if not alive(pid, markers):
            return
        time.sleep(0.1)
    raise DeployError(f"{what}: pid {pid} survived SIGKILL")


def tail(path: Path, n: int = 30) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no {path})"
    return "\n".join(lines[-n:])


@contextlib.contextmanager
def state_lock() -> Iterator[None]:
    """Serialize concurrent up/down calls on the same var dir."""
    RUN.mkdir(parents=True, exist_ok=True)
    with open(RUN / "services.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------
# Services
# --------------------------------------------------------------------------------------------

@dataclass
class Daemon:
    """One OS process of a service, tracked by a pid file."""
    name: str
    pidfile: Path
    markers: tuple[str, ...]
    stop_timeout: float
    stop_signal: int = signal.SIGTERM  # PostgreSQL: SIGINT, its fast shutdown (SIGTERM waits for clients)

    def pids(self) -> list[int]:
        return [p for p in read_pids(self.pidfile) if alive(p, self.markers)]

    def running(self) -> bool:
        return bool(self.pids())


@dataclass
class Health:
    ok: bool
    detail: str
    final: bool = False  # not healthy, and waiting will not change that (up stops at once)


@dataclass
class Service:
    name: str
    ports: list[tuple[int, str]]
    daemons: list[Daemon]
    endpoint: str
    start_timeout: float
    logs: list[Path] = field(default_factory=list)

    # -- to implement ---------------------------------------------------------------------
    def check_tools(self) -> None:
        """Fail early, before any port check or file is written, if a tool is missing."""
        check_java()

    def prepare(self) -> None:
        """Fetch jars, write config (may call Maven). Runs before launching anything."""

    def launch(self, daemon: Daemon) -> None:
        raise NotImplementedError

    def health(self) -> Health:
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------------
    def check_ports_free(self) -> None:
        for port, what in self.ports:
            if port_in_use(port):
                owner = port_owner(port)
                raise DeployError(
                    f"{self.name}: port {HOST}:{port} ({what}) is already taken by another process"
                    f"{': ' + owner if owner else ''}. Stop it, or stop the other instance "
                    f"(another checkout's deploy/services down), then retry.")

    def start(self) -> bool:
        """Launch whatever daemon is missing. Returns False if everything already ran."""
        missing = [d for d in self.daemons if not d.running()]
        if not missing:
            return False
        self.check_tools()
        if len(missing) == len(self.daemons):
            self.check_ports_free()
        self.prepare()
        for d in missing:
            d.pidfile.unlink(missing_ok=True)  # stale
        self.launch_all(missing)
        return True

    def launch_all(self, daemons: list[Daemon]) -> None:
        for d in daemons:
            self.launch(d)

    def wait_healthy(self) -> Health:
        deadline = time.monotonic() + self.start_timeout
        last = Health(False, "not checked")
        while time.monotonic() < deadline:
            dead = [d.name for d in self.daemons if not d.running()]
            if dead:
                raise DeployError(f"{self.name}: {', '.join(dead)} exited during startup; "
                                  f"see {', '.join(map(str, self.log_files()))}\n" + self.log_excerpt())
            last = self.health()
            if last.ok:
                return last
            if last.final:
                raise DeployError(f"{self.name}: {last.detail}")
            time.sleep(1.0)
        raise DeployError(f"{self.name}: not healthy after {self.start_timeout:.0f}s ({last.detail}); "
                          f"see {', '.join(map(str, self.log_files()))}\n" + self.log_excerpt())

    def log_files(self) -> list[Path]:
        return self.logs

    def log_excerpt(self) -> str:
        parts = []
        for p in self.log_files():
            if p.is_file():
                text = tail(p, 20)
                if "\n==== " in text:  # spawn()'s marker: show only the latest start attempt
                    text = text.rsplit("\n==== ", 1)[1].split("\n", 1)[-1]
                parts.append(f"--- {p} (tail) ---\n{text}")
        return "\n".join(parts)

    def stop(self) -> bool:
        stopped = False
        for d in reversed(self.daemons):
            for pid in d.pids():
                info(f"{self.name}: stopping {d.name} (pid {pid})")
                terminate(pid, d.markers, d.stop_timeout, f"{self.name}/{d.name}", d.stop_signal)
                stopped = True
            d.pidfile.unlink(missing_ok=True)
        return stopped


def spawn(cmd: list[str], logfile: Path, pidfile: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> int:
    logfile.parent.mkdir(parents=True, exist_ok=True)
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    with open(logfile, "ab") as out:
        out.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True, close_fds=True)
    pidfile.write_text(f"{proc.pid}\n")
    return proc.pid


# ---------------------------------------- Kafka -------------------------------------------

class Kafka(Service):
    def __init__(self) -> None:
        self.home = VAR / "kafka"
        self.data = self.home / "data"
        self.props = self.home / "server.properties"
        self.cluster_id_file = self.home / "cluster.id"
        self.logdir = LOG / "kafka"
        super().__init__(
            name="kafka",
            ports=[(KAFKA_PORT, "Kafka PLAINTEXT listener"), (KAFKA_CONTROLLER_PORT, "KRaft controller")],
            daemons=[Daemon("broker", RUN / "kafka.pid", ("kafka.Kafka", str(self.props)), 60.0)],
            endpoint=KAFKA_BOOTSTRAP,
            start_timeout=120.0,
            logs=[self.logdir / "kafka.out", self.logdir / "server.log"],
        )

    def server_properties(self) -> str:
        return "\n".join([
            "# Generated by deploy/services; edits are overwritten on every `up`.",
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers={HOST}:{KAFKA_CONTROLLER_PORT}",
            f"listeners=PLAINTEXT://{HOST}:{KAFKA_PORT},CONTROLLER://{HOST}:{KAFKA_CONTROLLER_PORT}",
            # The CONTROLLER entry is needed by `storage format --standalone` (dynamic quorum).
            f"advertised.listeners=PLAINTEXT://{HOST}:{KAFKA_PORT},CONTROLLER://{HOST}:{KAFKA_CONTROLLER_PORT}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            f"log.dirs={self.data}",
            "num.partitions=1",
            "default.replication.factor=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=8",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=8",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "min.insync.replicas=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "log.retention.hours=168",
            "num.network.threads=2",
            "num.io.threads=4",
            "",
        ])

    def java(self, main: str, *args: str, heap: str = "256m") -> list[str]:
        return [str(java_bin()), f"-Xmx{heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={DEPLOY / 'kafka' / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.logdir}",
                "-cp", f"{KAFKA_JARS.lib}/*", main, *args]

    def prepare(self) -> None:
        check_java()
        KAFKA_JARS.ensure()
        self.data.mkdir(parents=True, exist_ok=True)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.props.write_text(self.server_properties())
        if not self.cluster_id_file.is_file():
            meta = self.data / "meta.properties"
            m = re.search(r"^cluster\.id=(\S+)", meta.read_text(), re.M) if meta.is_file() else None
            if m:  # formatted before, id file lost: keep the storage's id
                cid = m.group(1)
            else:
                res = subprocess.run(self.java("kafka.tools.StorageTool", "random-uuid"),
                                     capture_output=True, text=True)
                if res.returncode != 0 or not res.stdout.strip():
                    raise DeployError(f"kafka: StorageTool random-uuid failed:\n{res.stdout}{res.stderr}")
                cid = res.stdout.strip().splitlines()[-1]
            self.cluster_id_file.write_text(cid + "\n")
        cid = self.cluster_id_file.read_text().strip()
        if not (self.data / "meta.properties").is_file():
            info(f"kafka: formatting {self.data} (cluster id {cid})")
            res = subprocess.run(self.java("kafka.tools.StorageTool", "format", "--standalone", "-t", cid,
                                           "-c", str(self.props), "--ignore-formatted"),
                                 capture_output=True, text=True)
            if res.returncode != 0:
                raise DeployError(f"kafka: storage format failed:\n{res.stdout}{res.stderr}")

    def launch(self, daemon: Daemon) -> None:
        cmd = self.java("kafka.Kafka", str(self.props), heap=KAFKA_HEAP)
        cmd.insert(1, f"-Xms{KAFKA_HEAP}")
        spawn(cmd, self.logdir / "kafka.out", daemon.pidfile, cwd=self.home)

    def health(self) -> Health:
        if not port_open(KAFKA_PORT):
            return Health(False, f"{KAFKA_BOOTSTRAP} not accepting connections")
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        from kafka import KafkaAdminClient  # kafka-python
        try:
            admin = KafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP, client_id="auditflow-deploy-health",
                                     request_timeout_ms=5000)
        except Exception as e:  # noqa: BLE001 - any client error means "not healthy yet"
            return Health(False, f"admin client: {type(e).__name__}: {e}")
        try:
            topics = admin.list_topics()
        except Exception as e:  # noqa: BLE001
            return Health(False, f"list_topics: {type(e).__name__}: {e}")
        finally:
            admin.close()
        user = [t for t in topics if not t.startswith("__")]
        return Health(True, f"list_topics ok ({len(user)} topics)")


# ---------------------------------------- Neo4j -------------------------------------------

def neo4j_password_file() -> Path:
    return VAR / "neo4j" / "auth" / "password"


def ensure_neo4j_password() -> Path:
    """The Neo4j password file, generated once (mode 0600 in a 0700 folder): 256 random bits.

    Written before the server first starts with it (the server applies it to a new store, or to
    one whose `neo4j` user still has the default password, as a store that ran with auth off has).
    """
    return generated_password_file(
        neo4j_password_file(), "neo4j", f"user {NEO4J_USER!r}", folder_mode=0o700,
        empty_hint="delete it (a new one is generated) and, if the store already has a password, reset the store "
                   "(rm -rf var/neo4j)",
    )


class Neo4j(Service):
    def __init__(self) -> None:
        self.home = VAR / "neo4j"
        self.password_file = neo4j_password_file()
        self.classes = CACHE / "neo4j" / "classes"
        self.source = DEPLOY / "neo4j" / "Neo4jServer.java"
        super().__init__(
            name="neo4j",
            ports=[(NEO4J_BOLT_PORT, "Neo4j Bolt")],
            daemons=[Daemon("server", RUN / "neo4j.pid", ("Neo4jServer", str(self.home)), 120.0)],
            endpoint=NEO4J_URI,
            start_timeout=180.0,
            logs=[LOG / "neo4j.out", self.home / "logs" / "debug.log"],
        )

    def compiled(self) -> bool:
        """Compile Neo4jServer.java once (falls back to Java's source-file mode without javac)."""
        javac = java_bin().resolve().parent / "javac"
        if not javac.is_file():
            return False
        stamp = self.classes / ".stamp"
        digest = hashlib.sha256(self.source.read_bytes() + NEO4J_JARS.digest().encode()).hexdigest()
        if stamp.is_file() and stamp.read_text().strip() == digest:
            return True
        shutil.rmtree(self.classes, ignore_errors=True)
        self.classes.mkdir(parents=True)
        res = subprocess.run([str(javac), "-d", str(self.classes), "-cp", f"{NEO4J_JARS.lib}/*", str(self.source)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise DeployError(f"neo4j: javac failed:\n{res.stdout}{res.stderr}")
        stamp.write_text(digest + "\n")
        return True

    def prepare(self) -> None:
        check_java()
        NEO4J_JARS.ensure()
        self.home.mkdir(parents=True, exist_ok=True)
        ensure_neo4j_password()
        self._compiled = self.compiled()

    def launch(self, daemon: Daemon) -> None:
        cp = f"{NEO4J_JARS.lib}/*"
        main = "Neo4jServer"
        if self._compiled:
            cp += f":{self.classes}"
        else:
            main = str(self.source)
        cmd = [str(java_bin()), "-Xms256m", f"-Xmx{NEO4J_HEAP}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
               *NEO4J_JVM_FLAGS, "-cp", cp, main, str(self.home), f"{HOST}:{NEO4J_BOLT_PORT}",
               str(NEO4J_PAGECACHE_BYTES), "true", str(self.password_file)]
        spawn(cmd, LOG / "neo4j.out", daemon.pidfile, cwd=self.home)

    def health(self) -> Health:
        """A refusal without credentials, then RETURN 1 as `neo4j` with the password file's password.

        A server that accepts a connection without credentials (one started by a deploy/services
        from before authentication) or a running server without a password file is final: `up`
        stops at once instead of waiting for what will not change."""
        if not port_open(NEO4J_BOLT_PORT):
            return Health(False, f"{NEO4J_URI} not accepting connections")
        logging.getLogger("neo4j").setLevel(logging.CRITICAL)
        import neo4j
        from neo4j.exceptions import AuthError
        try:
            with neo4j.GraphDatabase.driver(NEO4J_URI, auth=None, connection_timeout=5.0) as driver:
                driver.verify_connectivity()
        except AuthError:
            pass  # as it must: no password, no access
        except Exception as e:  # noqa: BLE001 - not up yet
            return Health(False, f"connection without credentials: {type(e).__name__}: {e}")
        else:
            return Health(False, "authentication is DISABLED on this server (started by an older "
                                 "deploy/services?): restart it with `deploy/services down neo4j && "
                                 "deploy/services up neo4j`", final=True)
        try:
            password = self.password_file.read_text().strip()
        except OSError as e:
            return Health(False, f"no password file ({e}) for this running server", final=True)
        try:
            with neo4j.GraphDatabase.driver(NEO4J_URI, auth=(NEO4J_USER, password), connection_timeout=5.0) as driver:
                with driver.session(database="neo4j") as session:
                    value = session.run("RETURN 1 AS ok").single(strict=True)["ok"]
                agent = driver.get_server_info().agent
        except AuthError as e:
            return Health(False, f"user {NEO4J_USER!r} refused with the password in {self.password_file} "
                                 f"({e.message}); the store's password is another one: reset the store "
                                 f"(down neo4j, rm -rf {self.home}, up neo4j) or put that password in the file")
        except Exception as e:  # noqa: BLE001
            return Health(False, f"RETURN 1: {type(e).__name__}: {e}")
        return Health(value == 1, f"refused without credentials, RETURN 1 ok as {NEO4J_USER!r} ({agent})")


# ---------------------------------------- Flink -------------------------------------------

def flink_home() -> Path:
    """The Flink distribution inside the installed pyflink package (its bin/, lib/, opt/, conf/)."""
    try:
        out = subprocess.run([PYTHON, "-c", "import pyflink, os; print(os.path.dirname(os.path.abspath(pyflink.__file__)))"],
                             capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise DeployError(f"cannot run {PYTHON}: {e}") from e
    home = Path(out.stdout.strip()) if out.returncode == 0 else None
    if not home or not (home / "bin" / "jobmanager.sh").is_file():
        raise DeployError(f"pyflink (pip apache-flink) with bin/jobmanager.sh not found for {PYTHON}: "
                          f"{out.stderr.strip()[-300:]}")
    return home


def site_packages() -> str:
    out = subprocess.run([PYTHON, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


# Beam's gRPC servers for Python workers (control, data, state, logging, artifacts, provisioning:
# a set per Python worker, while a Python job runs on a TaskManager) announce a loopback URL but
# bind every interface: ServerFactory$InetSocketAddressServerFactory.createServer calls
# NettyServerBuilder.forPort(port). No Flink or Beam option changes that, so deploy/ ships a
# copy of that one class, patched to call forAddress(the loopback InetSocketAddress it already
# holds), in a jar that comes first on the cluster's classpath (FLINK_LIB_DIR, sorted by name;
# org.apache.beam. is loaded parent-first). The patch is a same-length bytecode edit, checked
# against the exact instructions it replaces: a flink-python whose class differs stops `up`.
BEAM_SERVER_FACTORY = "org/apache/beam/sdk/fn/server/ServerFactory$InetSocketAddressServerFactory.class"
BEAM_GRPC = "org/apache/beam/vendor/grpc/v1p60p1/io/grpc"
LOOPBACK_GRPC_JAR = "0-auditflow-beam-grpc-loopback.jar"


def _class_constants(data: bytes) -> tuple[list, int]:
    """A class file's constant pool (index -> (tag, raw)) and the offset just after it."""
    import struct

    count = struct.unpack_from(">H", data, 8)[0]
    pool: list = [None] * count
    pos, i = 10, 1
    while i < count:
        tag = data[pos]
        if tag == 1:
            n = struct.unpack_from(">H", data, pos + 1)[0]
            pool[i] = (1, data[pos + 3:pos + 3 + n].decode("utf-8", "surrogateescape"))
            pos += 3 + n
        elif tag in (7, 8, 16, 19, 20):
            pool[i] = (tag, struct.unpack_from(">H", data, pos + 1))
            pos += 3
        elif tag == 15:
            pool[i] = (tag, None)
            pos += 4
        elif tag in (3, 4, 9, 10, 11, 12, 17, 18):
            pool[i] = (tag, struct.unpack_from(">HH", data, pos + 1))
            pos += 5
        elif tag in (5, 6):
            pool[i] = (tag, None)
            pos += 9
            i += 1  # 8-byte constants take two slots
        else:
            raise DeployError(f"flink: unknown constant tag {tag} in {BEAM_SERVER_FACTORY}")
        i += 1
    return pool, pos


def loopback_grpc_class(data: bytes) -> bytes:
    """Beam's InetSocketAddressServerFactory with `forPort(address.getPort())` replaced by
    `forAddress(address)` (+3 nops): its gRPC servers then bind the loopback address only."""
    import struct

    pool, end = _class_constants(data)

    def utf8(i: int) -> str:
        return pool[i][1]

    def methodref(owner: str, name: str, desc: str) -> int:
        for i, c in enumerate(pool):
            if c and c[0] == 10:
                cls, nat = c[1]
                if utf8(pool[cls][1][0]) == owner and (utf8(pool[nat][1][0]), utf8(pool[nat][1][1])) == (name, desc):
                    return i
        raise DeployError(f"flink: {BEAM_SERVER_FACTORY} has no call to {owner}.{name}{desc}: this "
                          f"flink-python is not the one deploy/ patches (see BEAM_SERVER_FACTORY)")

    builder = f"{BEAM_GRPC}/netty/NettyServerBuilder"
    get_port = methodref("java/net/InetSocketAddress", "getPort", "()I")
    for_port = methodref(builder, "forPort", f"(I)L{builder};")
    old = struct.pack(">BBHBH", 0x2B, 0xB6, get_port, 0xB8, for_port)  # aload_1 getPort forPort
    if data.count(old) != 1:
        raise DeployError(f"flink: {BEAM_SERVER_FACTORY}: expected one `forPort(address.getPort())`, "
                          f"found {data.count(old)}")
    n = len(pool)  # new constants: "forAddress", its descriptor, NameAndType, Methodref
    name, desc = "forAddress".encode(), f"(Ljava/net/SocketAddress;)L{builder};".encode()
    added = (struct.pack(">BH", 1, len(name)) + name + struct.pack(">BH", 1, len(desc)) + desc
             + struct.pack(">BHH", 12, n, n + 1) + struct.pack(">BHH", 10, pool[for_port][1][0], n + 2))
    new = struct.pack(">BBHBBB", 0x2B, 0xB8, n + 3, 0, 0, 0)  # aload_1 forAddress nop nop nop
    out = data[:8] + struct.pack(">H", n + 4) + data[10:end] + added + data[end:]
    return out.replace(old, new)


def write_loopback_grpc_jar(flink_python_jar: Path, dest: Path) -> None:
    import zipfile

    with zipfile.ZipFile(flink_python_jar) as z:
        original = z.read(BEAM_SERVER_FACTORY)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: auditflow deploy/services\n")
        z.writestr(BEAM_SERVER_FACTORY, loopback_grpc_class(original))


class Flink(Service):
    IDENT = "auditflow"

    def __init__(self) -> None:
        self.base = VAR / "flink"
        self.conf = self.base / "conf"
        self.piddir = RUN / "flink"
        self.logdir = LOG / "flink"
        self._home: Path | None = None
        super().__init__(
            name="flink",
            ports=[(FLINK_REST_PORT, "Flink REST"), (FLINK_RPC_PORT, "Flink JobManager RPC")],
            daemons=[
                Daemon("jobmanager", self.piddir / f"flink-{self.IDENT}-standalonesession.pid",
                       ("StandaloneSessionClusterEntrypoint", str(self.conf)), 60.0),
                Daemon("taskmanager", self.piddir / f"flink-{self.IDENT}-taskexecutor.pid",
                       ("TaskManagerRunner", str(self.conf)), 60.0),
            ],
            endpoint=FLINK_REST,
            start_timeout=180.0,
            logs=[self.logdir],
        )

    @property
    def home(self) -> Path:
        if self._home is None:
            self._home = flink_home()
        return self._home

    def log_files(self) -> list[Path]:
        return sorted(self.logdir.glob(f"flink-{self.IDENT}-*-0-*.log")) + [self.logdir / "daemon-scripts.out"]

    def settings(self) -> dict[str, object]:
        return {
            "jobmanager.bind-host": HOST,
            "jobmanager.rpc.address": HOST,
            "jobmanager.rpc.port": FLINK_RPC_PORT,
            "jobmanager.memory.process.size": FLINK_JM_PROCESS,
            "taskmanager.bind-host": HOST,
            "taskmanager.host": HOST,
            "taskmanager.numberOfTaskSlots": FLINK_SLOTS,
            "taskmanager.memory.process.size": FLINK_TM_PROCESS,
            "parallelism.default": 1,
            # A TaskManager that died is noticed after 2 failed heartbeat RPCs, 2 s apart (Flink's
            # default: 10 s apart, so ~20 s of a job's recovery); one alive but slow to answer
            # still has 20 s (default 50 s) before it is declared lost.
            "heartbeat.interval": 2000,
            "heartbeat.timeout": 20000,
            "rest.address": HOST,
            "rest.bind-address": HOST,
            "rest.port": FLINK_REST_PORT,
            # No jar upload/run through the REST API or web UI (/jars/*): anyone who can reach the
            # port could run code on the cluster. `flink run` submits a JobGraph (POST /jobs).
            "web.submit.enable": False,
            # Python UDF workers (TaskManager) and the `flink run -py` driver (client).
            "python.executable": PYTHON,
            "python.client.executable": PYTHON,
            "io.tmp.dirs": str(self.base / "tmp"),
            "web.tmpdir": str(self.base / "web"),
            "blob.storage.directory": str(self.base / "blob"),
            "execution.checkpointing.dir": f"file://{self.base / 'checkpoints'}",
            "execution.checkpointing.savepoint-dir": f"file://{self.base / 'savepoints'}",
            "env.log.dir": str(self.logdir),
            "env.pid.dir": str(self.piddir),
            # PyFlink's embedded interpreter (pemja) loads libpython once per JVM: its classes must
            # come from the cluster's lib/ (see lib_dir), never again from a job's user jar, or the
            # second Python job on a TaskManager fails with NoSuchFieldException: loadedLibraryNames.
            "classloader.parent-first-patterns.additional": "pemja.;org.apache.flink.python.;org.apache.beam.",
        }

    @property
    def lib_dir(self) -> Path:
        return self.base / "lib"

    def write_lib_dir(self) -> None:
        """pyflink's lib/ plus opt/flink-python, as links, and first the jar with Beam's gRPC
        server factory bound to loopback (see BEAM_SERVER_FACTORY): the cluster's FLINK_LIB_DIR."""
        tmp = self.lib_dir.with_name("lib.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        python_jars = sorted((self.home / "opt").glob("flink-python-*.jar"))
        for jar in sorted((self.home / "lib").glob("*.jar")) + python_jars:
            (tmp / jar.name).symlink_to(jar)
        if len(python_jars) != 1:
            raise DeployError(f"flink: expected one flink-python jar in {self.home / 'opt'}, found {python_jars}")
        write_loopback_grpc_jar(python_jars[0], tmp / LOOPBACK_GRPC_JAR)
        shutil.rmtree(self.lib_dir, ignore_errors=True)
        tmp.rename(self.lib_dir)

    def write_conf(self) -> None:
        """Copy pyflink's conf/ and overlay the local-cluster settings (flattened YAML keys)."""
        import yaml  # PyYAML: a dependency of apache-beam, hence of apache-flink

        src = self.home / "conf"
        tmp = self.conf.with_name("conf.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp)
        base = yaml.safe_load((src / "config.yaml").read_text()) or {}

        def flatten(d: dict, prefix: str = "") -> Iterator[tuple[str, object]]:
            for k, v in d.items():
                key = f"{prefix}{k}"
                if isinstance(v, dict):
                    yield from flatten(v, key + ".")
                else:
                    yield key, v

        conf = dict(flatten(base))
        conf.update(self.settings())
        header = ("# Generated by deploy/services from pyflink's conf/config.yaml plus local settings;\n"
                  "# rewritten on every `up`. Flat keys are valid Flink 2.x config.yaml.\n")
        (tmp / "config.yaml").write_text(header + yaml.safe_dump(conf, sort_keys=True, width=10_000))
        (tmp / "masters").write_text(f"{HOST}:{FLINK_REST_PORT}\n")
        (tmp / "workers").write_text(f"{HOST}\n")
        shutil.rmtree(self.conf, ignore_errors=True)
        tmp.rename(self.conf)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("FLINK_ENV_JAVA_OPTS", None)  # would replace Flink's required --add-opens list
        # What a local PyFlink job leaves in its process's environment: a TaskManager started from
        # such a process would send its Python workers to that process's loopback server.
        for k in ("PYTHON_LOOPBACK_SERVER_ADDRESS", "PYFLINK_GATEWAY_DISABLED", "_PYFLINK_CONN_INFO_PATH",
                  "_python_worker_execution_mode"):
            env.pop(k, None)
        venv_bin = str(Path(PYTHON).parent)
        pythonpath = [str(REPO), site_packages()]
        if env.get("PYTHONPATH"):
            pythonpath.append(env["PYTHONPATH"])
        env.update({
            "JAVA_HOME": str(java_home()),
            "FLINK_HOME": str(self.home),
            "FLINK_CONF_DIR": str(self.conf),
            "FLINK_LIB_DIR": str(self.lib_dir),
            "FLINK_LOG_DIR": str(self.logdir),
            "FLINK_PID_DIR": str(self.piddir),
            "FLINK_IDENT_STRING": self.IDENT,
            "PYTHONPATH": os.pathsep.join(pythonpath),
            "PATH": venv_bin + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
        })
        return env

    def prepare(self) -> None:
        check_java()
        FLINK_CONNECTOR_JARS.ensure()  # jobs need it (env.add_jars / pipeline.jars); fetch it with the cluster
        for d in (self.base / "tmp", self.base / "web", self.base / "blob", self.logdir, self.piddir):
            d.mkdir(parents=True, exist_ok=True)
        if not any(d.running() for d in self.daemons):
            self.write_conf()  # never rewrite the conf under a running daemon
            self.write_lib_dir()

    def launch_all(self, daemons: list[Daemon]) -> None:
        """Run bin/jobmanager.sh start and bin/taskmanager.sh start concurrently.

        Each script spends seconds reading config.yaml through several short JVM runs before it
        daemonizes the real JVM; a TaskManager that comes up first keeps retrying registration.
        """
        env = self.env()
        out = self.logdir / "daemon-scripts.out"
        procs = []
        with open(out, "ab") as fh:
            for d in daemons:
                script = {"jobmanager": "jobmanager.sh", "taskmanager": "taskmanager.sh"}[d.name]
                procs.append((d, script, subprocess.Popen(
                    [str(self.home / "bin" / script), "start"], env=env, cwd=self.base, stdout=fh,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)))
            for d, script, p in procs:
                try:
                    rc = p.wait(timeout=180)
                except subprocess.TimeoutExpired:
                    p.kill()
                    rc = "timeout"
                if rc != 0 or not d.pidfile.is_file():
                    raise DeployError(f"flink: {script} start failed (exit {rc}); see {out}\n{tail(out, 20)}")

    def health(self) -> Health:
        try:
            # No proxy for loopback, whatever http_proxy says.
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(f"{FLINK_REST}/overview", timeout=5) as r:
                ov = json.load(r)
        except (urllib.error.URLError, OSError, ValueError) as e:
            return Health(False, f"GET /overview: {e}")
        tms = ov.get("taskmanagers", 0)
        detail = (f"/overview: {tms} taskmanager(s), {ov.get('slots-total')} slots "
                  f"({ov.get('slots-available')} free), {ov.get('jobs-running')} running jobs, "
                  f"flink {ov.get('flink-version')}")
        # A TaskManager shows up in /overview before its slot report lands: wait for both.
        return Health(tms >= 1 and (ov.get("slots-total") or 0) >= 1, detail)


# ---------------------------------------- PostgreSQL --------------------------------------

PG_TOOLS = ("initdb", "pg_ctl", "postgres", "psql")
PG_LIB = Path("/usr/lib/postgresql")  # Debian/Ubuntu: one <version>/bin per installed server


def postgres_password_file() -> Path:
    return VAR / "postgres" / "password"


def postgres_url(password: str) -> str:
    """The SQLAlchemy URL (psycopg 3 driver) of POSTGRES_DB as POSTGRES_USER. The password is
    token_urlsafe: nothing in it needs percent-encoding."""
    return f"postgresql+psycopg://{POSTGRES_USER}:{password}@{HOST}:{POSTGRES_PORT}/{POSTGRES_DB}"


def ensure_postgres_password() -> Path:
    """The password file of role `auditflow`, generated once (mode 0600): 256 random bits, URL-safe.

    Its folder (var/postgres) stays this script's user's, mode 0711: the server's user reaches its
    data/ and run/ folders through it, but neither lists it nor reads the file. Every `up` that
    starts the server gives the role the file's password (as a SCRAM verifier), so a new file
    takes effect at the next start.
    """
    return generated_password_file(
        postgres_password_file(), "postgres", f"role {POSTGRES_USER!r}", folder_mode=0o711,
        empty_hint="delete it (a new one is generated and given to the role at the next `up`)",
    )


def generated_password_file(path: Path, service: str, owner: str, *, folder_mode: int, empty_hint: str) -> Path:
    """A password file made once (mode 0600, 256 random bits, URL-safe) in a folder of
    ``folder_mode``; an existing one is kept (made 0600 if others could read it), an empty one refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, folder_mode)
    if path.is_file():
        if path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)
            info(f"{service}: {path} was readable by others; now mode 0600")
        if not path.read_text().strip():
            raise DeployError(f"{service}: password file {path} is empty: {empty_hint}")
        return path
    tmp = path.with_name(f".password.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_urlsafe(32) + "\n")
    os.replace(tmp, path)
    info(f"{service}: generated a password for {owner} in {path} (mode 0600)")
    return path


def scram_sha_256(password: str, iterations: int = 4096) -> str:
    """PostgreSQL's stored form of a SCRAM-SHA-256 password (RFC 5802/5803), as the server itself
    computes it: `ALTER ROLE ... PASSWORD '<this>'` sets the password without sending it."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    stored_key = hashlib.sha256(hmac.new(salted, b"Client Key", "sha256").digest()).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()

    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def _pg_version(name: str) -> tuple[int, ...] | None:
    return tuple(int(x) for x in name.split(".")) if re.fullmatch(r"\d+(\.\d+)*", name) else None


def pg_bin(data: Path | None = None) -> Path:
    """The directory of the PostgreSQL server binaries: AUDITFLOW_PG_BIN, else the newest
    /usr/lib/postgresql/*/bin (Debian's layout) -- but the version of an existing data directory
    when that one is installed too."""
    override = os.environ.get("AUDITFLOW_PG_BIN")
    if override:
        d = Path(override).expanduser()
        missing = [t for t in PG_TOOLS if not (d / t).is_file()]
        if missing:
            raise DeployError(f"AUDITFLOW_PG_BIN={override} has no {', '.join(missing)}: point it at a "
                              "PostgreSQL server's bin/ (e.g. /usr/lib/postgresql/15/bin), or unset it")
        return d
    found = {}
    for d in PG_LIB.glob("*/bin"):
        version = _pg_version(d.parent.name)
        if version and all((d / t).is_file() for t in PG_TOOLS):
            found[version] = d
    if not found:
        raise DeployError(f"PostgreSQL server binaries ({', '.join(PG_TOOLS)}) not found under "
                          f"{PG_LIB}/*/bin: install them (Debian: apt-get install postgresql) "
                          "or set AUDITFLOW_PG_BIN to their directory")
    pinned = _pg_version(data_version) if data and (data_version := pg_data_version(data)) else None
    return found.get(pinned) or found[max(found)]


def pg_data_version(data: Path) -> str | None:
    try:
        return (data / "PG_VERSION").read_text().strip()
    except OSError:
        return None


def pg_binaries_version(bindir: Path) -> str:
    """The major version of the server binaries ("15"), as a data directory's PG_VERSION writes it."""
    try:
        out = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except OSError as e:
        raise DeployError(f"cannot run {bindir / 'postgres'}: {e}") from e
    m = re.search(r"\)\s+(\d+)(?:\.(\d+))?", out)
    if not m:
        raise DeployError(f"{bindir / 'postgres'} --version said {out.strip()!r}: no version")
    major = int(m.group(1))
    return str(major) if major >= 10 else f"{major}.{m.group(2)}"


def pg_os_user() -> pwd.struct_passwd:
    """Who runs PostgreSQL: this script's user, or POSTGRES_OS_USER (created here) when that is
    root -- the server refuses to run as root."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(POSTGRES_OS_USER)
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    if not Path(useradd).is_file():
        raise DeployError(f"postgres: running as root, and useradd (to create the system user "
                          f"{POSTGRES_OS_USER!r} that runs the server) not found: install passwd, or "
                          f"create that user yourself")
    cmd = [useradd, "--system", "--no-create-home", "--user-group", "--home-dir", "/nonexistent",
           "--comment", "auditflow PostgreSQL (deploy/services)"]
    if Path("/usr/sbin/nologin").is_file():
        cmd += ["--shell", "/usr/sbin/nologin"]
    res = subprocess.run([*cmd, POSTGRES_OS_USER], capture_output=True, text=True, timeout=60)
    try:
        user = pwd.getpwnam(POSTGRES_OS_USER)
    except KeyError:
        raise DeployError(f"postgres: useradd {POSTGRES_OS_USER} failed (exit {res.returncode}): "
                          f"{(res.stdout + res.stderr).strip()}") from None
    info(f"postgres: created the system user {POSTGRES_OS_USER!r} (uid {user.pw_uid}) that runs the server "
         f"(PostgreSQL refuses root)")
    return user


def runuser_bin() -> str:
    found = shutil.which("runuser") or "/usr/sbin/runuser"
    if not Path(found).is_file():
        raise DeployError("postgres: running as root needs runuser (util-linux) to start the server as "
                          f"{POSTGRES_OS_USER!r}: install util-linux, or run deploy/services as a normal user")
    return found


class Postgres(Service):
    def __init__(self) -> None:
        self.base = VAR / "postgres"
        self.data = self.base / "data"
        self.sockdir = self.base / "run"
        self.password_file = postgres_password_file()
        self.logfile = LOG / "postgres.log"
        self._bin: Path | None = None
        super().__init__(
            name="postgres",
            ports=[(POSTGRES_PORT, "PostgreSQL")],
            # The postmaster: pg_ctl execs `<bin>/postgres -D <data> ...`, then exits (pid read from
            # data/postmaster.pid). SIGINT = fast shutdown (pg_ctl stop -m fast): open sessions are
            # rolled back and closed; SIGTERM (smart) would wait for every client to disconnect.
            daemons=[Daemon("postmaster", RUN / "postgres.pid", (f"postgres -D {self.data}",), 60.0,
                            signal.SIGINT)],
            endpoint=f"postgresql://{HOST}:{POSTGRES_PORT}/{POSTGRES_DB}",
            start_timeout=60.0,
            logs=[self.logfile],
        )

    @property
    def bin(self) -> Path:
        if self._bin is None:
            self._bin = pg_bin(self.data)
        return self._bin

    def check_tools(self) -> None:
        self.bin  # noqa: B018 - fails with what to install
        if os.geteuid() == 0:
            runuser_bin()

    def command(self, tool: str, *args: str) -> list[str]:
        """A PostgreSQL tool's command line, as the server's user (runuser when we are root)."""
        cmd = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            return [runuser_bin(), "-u", self.user.pw_name, "--", *cmd]
        return cmd

    def run(self, tool: str, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        # PG* variables (PGDATA, PGPORT, PGHOST...) would redirect the tools; cwd: a folder the
        # server's user can reach (ours may be /root).
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        return subprocess.run(self.command(tool, *args), input=input, capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=self.base,
                              stdin=None if input is not None else subprocess.DEVNULL, start_new_session=True)

    def owned(self, path: Path, mode: int) -> None:
        os.chmod(path, mode)
        if os.geteuid() == 0:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def log_marker(self, what: str) -> None:
        with open(self.logfile, "a") as fh:
            fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} {what}\n")

    def prepare(self) -> None:
        self.user = pg_os_user()
        ensure_postgres_password()  # also creates self.base, mode 0711
        socket_path = self.sockdir / f".s.PGSQL.{POSTGRES_PORT}"
        if len(str(socket_path).encode()) > 107:  # sun_path is 108 bytes
            raise DeployError(f"postgres: the unix socket path {socket_path} is longer than 107 bytes: "
                              "set AUDITFLOW_VAR to a shorter path")
        self.sockdir.mkdir(exist_ok=True)
        self.owned(self.sockdir, 0o700)
        LOG.mkdir(parents=True, exist_ok=True)
        self.logfile.touch()
        self.owned(self.logfile, 0o600)  # pg_ctl's shell appends to it as the server's user
        if os.geteuid() == 0:  # the server's user must reach var/postgres: every folder above it o+x
            test = shutil.which("test") or "/usr/bin/test"
            res = subprocess.run([runuser_bin(), "-u", self.user.pw_name, "--", test, "-w", str(self.sockdir)],
                                 capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            if res.returncode != 0:
                raise DeployError(f"postgres: the server's user {self.user.pw_name!r} cannot reach {self.sockdir}: "
                                  f"a folder above it is not searchable by others (chmod o+x it), or set "
                                  f"AUDITFLOW_VAR to a path it can reach {(res.stdout + res.stderr).strip()}".rstrip())
        version = pg_data_version(self.data)
        binaries = pg_binaries_version(self.bin)
        if version is None:
            self.initdb()
        elif version != binaries:
            raise DeployError(f"postgres: {self.data} is a PostgreSQL {version} cluster but {self.bin} is "
                              f"PostgreSQL {binaries}: install {version} (Debian: apt-get install "
                              f"postgresql-{version}) or set AUDITFLOW_PG_BIN to its bin/, or reset the data "
                              f"(deploy/services down postgres; rm -rf {self.base})")

    def initdb(self) -> None:
        """A new cluster in data.tmp, renamed to data once complete. The bootstrap superuser is the
        server's OS user, reachable only through the unix socket (peer); TCP needs a password."""
        if self.data.exists():
            raise DeployError(f"postgres: {self.data} exists but has no PG_VERSION (not a PostgreSQL data "
                              f"directory): move it away or delete it")
        tmp = self.base / "data.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        self.owned(tmp, 0o700)
        info(f"postgres: initdb {self.data} (PostgreSQL {pg_binaries_version(self.bin)}, first run only)")
        self.log_marker(f"initdb -D {tmp}")
        res = self.run("initdb", "-D", str(tmp), f"--username={self.user.pw_name}", "--encoding=UTF8",
                       "--locale=C.UTF-8", "--auth-local=peer", "--auth-host=scram-sha-256", timeout=300)
        with open(self.logfile, "a") as fh:
            fh.write(res.stdout + res.stderr)
        if res.returncode != 0:
            raise DeployError(f"postgres: initdb failed (exit {res.returncode}):\n"
                              f"{(res.stdout + res.stderr).strip()[-2000:]}")
        tmp.rename(self.data)

    def launch(self, daemon: Daemon) -> None:
        opts = ["-c", f"listen_addresses={HOST}", "-p", str(POSTGRES_PORT), "-k", str(self.sockdir),
                "-c", f"shared_buffers={POSTGRES_SHARED_BUFFERS}", "-c", f"max_connections={POSTGRES_MAX_CONNECTIONS}"]
        args = ["-D", str(self.data), "-l", str(self.logfile), "-w", "-t", str(int(self.start_timeout)),
                "-o", " ".join(map(shlex.quote, opts)), "start"]
        self.log_marker(f"starting: {' '.join(map(shlex.quote, self.command('pg_ctl', *args)))}")
        res = self.run("pg_ctl", *args, timeout=self.start_timeout + 30)
        pids = read_pids(self.data / "postmaster.pid")[:1]  # its first line: the postmaster's pid
        if res.returncode != 0 or not pids:
            raise DeployError(f"postgres: pg_ctl start failed (exit {res.returncode}): "
                              f"{(res.stdout + res.stderr).strip()}\n" + self.log_excerpt())
        daemon.pidfile.parent.mkdir(parents=True, exist_ok=True)
        daemon.pidfile.write_text(f"{pids[0]}\n")
        self.provision()

    def provision(self) -> None:
        """Role and database, idempotent: the role gets the password file's password on every start
        (sent as a SCRAM verifier: the password itself reaches neither the server nor its log)."""
        password = self.password_file.read_text().strip()
        sql = "\n".join([
            (f"SELECT 'CREATE ROLE {POSTGRES_USER}' WHERE NOT EXISTS "
             f"(SELECT FROM pg_roles WHERE rolname = '{POSTGRES_USER}') \\gexec"),
            f"ALTER ROLE {POSTGRES_USER} LOGIN CREATEDB NOSUPERUSER PASSWORD '{scram_sha_256(password)}';",
            (f"SELECT 'CREATE DATABASE {POSTGRES_DB} OWNER {POSTGRES_USER}' WHERE NOT EXISTS "
             f"(SELECT FROM pg_database WHERE datname = '{POSTGRES_DB}') \\gexec"),
            "",
        ])
        res = self.run("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(self.sockdir), "-p", str(POSTGRES_PORT),
                       "-d", "postgres", "-f", "-", input=sql)
        if res.returncode != 0:
            raise DeployError(f"postgres: creating role {POSTGRES_USER!r} and database {POSTGRES_DB!r} failed "
                              f"(exit {res.returncode}): {(res.stdout + res.stderr).strip()}")

    def health(self) -> Health:
        """SELECT 1 over TCP as `auditflow` on database `auditflow`, with the password file's password."""
        if not port_open(POSTGRES_PORT):
            return Health(False, f"{HOST}:{POSTGRES_PORT} not accepting connections")
        import psycopg

        try:
            password = self.password_file.read_text().strip()
        except OSError as e:
            return Health(False, f"no password file ({e}) for this running server", final=True)
        try:
            with psycopg.connect(host=HOST, port=POSTGRES_PORT, user=POSTGRES_USER, password=password,
                                 dbname=POSTGRES_DB, connect_timeout=5) as conn:
                value = conn.execute("SELECT 1").fetchone()[0]
                version = conn.execute("SHOW server_version").fetchone()[0]
        except psycopg.Error as e:
            msg = " ".join(str(e).split())
            if "password authentication failed" in msg:
                return Health(False, f"role {POSTGRES_USER!r} refused with the password in {self.password_file}: "
                                     "the file changed after the server started; `deploy/services down postgres && "
                                     "deploy/services up postgres` gives the role the file's password")
            return Health(False, f"SELECT 1: {type(e).__name__}: {msg}")
        return Health(value == 1,
                      f"SELECT 1 ok as {POSTGRES_USER!r} on database {POSTGRES_DB!r} (PostgreSQL {version})")


# Launched in this order (then all waited for), stopped in reverse. PostgreSQL last: its launch
# waits for the server (pg_ctl -w, then the role and database), while the JVMs already start.
SERVICES: dict[str, Callable[[], Service]] = {"kafka": Kafka, "neo4j": Neo4j, "flink": Flink,
                                              "postgres": Postgres}


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------

def cmd_up(names: list[str]) -> int:
    t0 = time.monotonic()
    services = [SERVICES[n]() for n in names]
    with state_lock():
        failures = []
        launched = []
        for s in services:  # launch everything first, then wait: JVM startups overlap
            t = time.monotonic()
            try:
                if s.start():
                    info(f"{s.name}: starting ({time.monotonic() - t:.1f}s to launch)")
                else:
                    info(f"{s.name}: already running")
                launched.append(s)
            except DeployError as e:
                failures.append(str(e))
        for s in launched:
            try:
                h = s.wait_healthy()
                info(f"{s.name}: healthy at {s.endpoint} after {time.monotonic() - t0:.1f}s -- {h.detail}")
            except DeployError as e:
                failures.append(str(e))
    info(f"up: {', '.join(names)} in {time.monotonic() - t0:.1f}s")
    if failures:
        raise DeployError("\n\n".join(failures))
    return 0


def cmd_down(names: list[str]) -> int:
    with state_lock():
        for n in reversed(names):
            s = SERVICES[n]()
            info(f"{s.name}: {'stopped' if s.stop() else 'not running'}")
    return 0


def cmd_status(names: list[str]) -> int:
    all_ok = True
    for n in names:
        s = SERVICES[n]()
        procs = []
        for d in s.daemons:
            for pid in d.pids():
                rss = rss_mib(pid)
                procs.append(f"{d.name} pid {pid} rss {rss:.0f}MiB" if rss else f"{d.name} pid {pid}")
        if not procs:
            all_ok = False
            taken = [f"{p}" for p, _ in s.ports if port_in_use(p)]
            note = f" (port {', '.join(taken)} taken by another process)" if taken else ""
            print(f"{s.name:8} stopped{note}")
            continue
        missing = [d.name for d in s.daemons if not d.running()]
        h = s.health()
        state = "running" if h.ok and not missing else "degraded"
        all_ok &= state == "running"
        miss = f"; missing: {', '.join(missing)}" if missing else ""
        print(f"{s.name:8} {state:8} {s.endpoint}  {'; '.join(procs)}{miss}  "
              f"[{'healthy' if h.ok else 'unhealthy'}: {h.detail}]")
    return 0 if all_ok else 3


def locked_connector_jar() -> Path:
    if FLINK_CONNECTOR_JARS.cached():
        return connector_jar(fetch=True)
    with state_lock():  # Maven may run: not concurrently with an `up` filling the same cache
        return connector_jar(fetch=True)


def cmd_env() -> int:
    jar = locked_connector_jar()
    flink = flink_home()
    password_file = neo4j_password_file()  # the path is printed, never the password
    if not password_file.is_file():  # generated here when `up` has not run yet
        with state_lock():
            ensure_neo4j_password()
    pg_password_file = postgres_password_file()
    if not pg_password_file.is_file():  # likewise; `up` gives it to the role when it starts
        with state_lock():
            ensure_postgres_password()
    for k, v in [("AUDITFLOW_KAFKA_BOOTSTRAP", KAFKA_BOOTSTRAP), ("AUDITFLOW_NEO4J_URI", NEO4J_URI),
                 ("AUDITFLOW_NEO4J_USER", NEO4J_USER), ("AUDITFLOW_NEO4J_PASSWORD_FILE", str(password_file)),
                 ("AUDITFLOW_FLINK_REST", FLINK_REST), ("AUDITFLOW_FLINK_KAFKA_JAR", str(jar)),
                 ("FLINK_HOME", str(flink)), ("AUDITFLOW_FLINK_CONF_DIR", str(Flink().conf)),
                 ("AUDITFLOW_POSTGRES_URL", postgres_url(pg_password_file.read_text().strip()))]:
        print(f"export {k}={shell_quote(v)}")
    return 0


def shell_quote(v: str) -> str:
    return v if re.fullmatch(r"[A-Za-z0-9_./:@%+=,-]+", v) else "'" + v.replace("'", "'\"'\"'") + "'"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="deploy/services", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See deploy/README.md.")
    p.add_argument("command", choices=["up", "down", "status", "env", "connector-jar"])
    p.add_argument("services", nargs="*", metavar="SERVICE", help="kafka, neo4j, flink, postgres (default: all)")
    a = p.parse_args(argv)
    unknown = [s for s in a.services if s not in SERVICES]
    if unknown:
        p.error(f"unknown service(s) {', '.join(unknown)}; choose from {', '.join(SERVICES)}")
    names = [n for n in SERVICES if n in a.services] if a.services else list(SERVICES)
    try:
        if a.command == "up":
            return cmd_up(names)
        if a.command == "down":
            return cmd_down(names)
        if a.command == "status":
            return cmd_status(names)
        if a.command == "env":
            return cmd_env()
        print(locked_connector_jar())
        return 0
    except DeployError as e:
        info(f"deploy/services: error: {e}")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
