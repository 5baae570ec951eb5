"""Suite-wide rules for integration tests against the real servers of ``deploy/services``.

A test that talks to Kafka, Neo4j, the Flink session cluster or PostgreSQL says so with one marker::

    pytestmark = pytest.mark.services("kafka", "neo4j")    # a whole module
    @pytest.mark.services("flink")                         # one test (marks add up)
    pytest.param("neo4j", marks=pytest.mark.services("neo4j"))

Every test so marked is also marked ``integration`` (``pytest -m "not integration"`` leaves it
out). Before such a test runs:

* without ``AUDITFLOW_SERVICES=1`` it is **skipped** on a developer machine, but if ``CI`` is set
  it **errors**, naming the services it needed: CI must never go green by skipping them;
* with ``AUDITFLOW_SERVICES=1`` each named server is probed once per session at the address the
  settings give (``AUDITFLOW_KAFKA_BOOTSTRAP``, ``AUDITFLOW_NEO4J_URI``, ``AUDITFLOW_FLINK_REST``,
  ``AUDITFLOW_POSTGRES_URL``); one that does not answer makes the test **error** with the address
  and the client's error (never a skip: the run asked for real servers).

A test marked ``services("postgres")`` that asks for the ``postgres_url`` fixture gets the
SQLAlchemy URL of a new, empty database of its own on that server, dropped after the test.

``make test`` starts the servers and sets ``AUDITFLOW_SERVICES=1``; by hand::

    deploy/services up && eval "$(deploy/services env)" && AUDITFLOW_SERVICES=1 pytest ...
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import urllib.request
from collections.abc import Callable, Iterator

import pytest

SERVICE_NAMES = ("kafka", "neo4j", "flink", "postgres")
_HOW = "`deploy/services up`, `eval \"$(deploy/services env)\"`, then AUDITFLOW_SERVICES=1 (make test does all three)"


def services_requested() -> bool:
    return os.environ.get("AUDITFLOW_SERVICES") == "1"


def in_ci() -> bool:
    """``CI`` set to anything but empty, ``0`` or ``false`` (GitHub, GitLab and most set CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


# ------------------------------------------------------------------ probes (one per service)


def _settings():
    from auditflow_app.settings import Settings

    return Settings()


def _probe_kafka() -> tuple[str, str | None]:
    bootstrap = _settings().kafka_bootstrap
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except (OSError, ValueError) as e:
        return bootstrap, f"no TCP connection ({e})"
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    from kafka import KafkaAdminClient

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="auditflow-tests-probe",
                                 request_timeout_ms=15000)
        try:
            admin.list_topics()
        finally:
            admin.close()
    except Exception as e:  # noqa: BLE001 - any client error: the broker does not answer
        return bootstrap, f"metadata request failed ({type(e).__name__}: {e})"
    return bootstrap, None


def _probe_neo4j() -> tuple[str, str | None]:
    s = _settings()
    logging.getLogger("neo4j").setLevel(logging.CRITICAL)
    import neo4j

    auth = (s.neo4j_user, s.neo4j_password.get_secret_value() if s.neo4j_password else "") if s.neo4j_user else None
    try:
        with neo4j.GraphDatabase.driver(s.neo4j_uri, auth=auth, connection_timeout=10.0) as driver:
            with driver.session() as session:  # an auto-commit query: one try, no retry loop
                ok = session.run("RETURN 1 AS ok").single(strict=True)["ok"]
            if ok != 1:
                return s.neo4j_uri, f"RETURN 1 gave {ok!r}"
    except Exception as e:  # noqa: BLE001
        return s.neo4j_uri, f"RETURN 1 failed ({type(e).__name__}: {e})"
    return s.neo4j_uri, None


def _probe_flink() -> tuple[str, str | None]:
    rest = _settings().flink_rest.rstrip("/")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    try:
        with opener.open(f"{rest}/overview", timeout=10) as r:
            overview = json.load(r)
    except Exception as e:  # noqa: BLE001
        return rest, f"GET /overview failed ({type(e).__name__}: {e})"
    if (overview.get("taskmanagers") or 0) < 1:
        return rest, f"no TaskManager registered (/overview: {overview})"
    return rest, None


def _postgres_url() -> str | None:
    return os.environ.get("AUDITFLOW_POSTGRES_URL") or None


def _without_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL: show nothing of it
        return "AUDITFLOW_POSTGRES_URL (not a SQLAlchemy URL)"


def _probe_postgres() -> tuple[str, str | None]:
    url = _postgres_url()
    if url is None:
        return "AUDITFLOW_POSTGRES_URL", 'not set: eval "$(deploy/services env)" sets it'
    import sqlalchemy

    address = _without_password(url)
    try:
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
        try:
            with engine.connect() as conn:
                ok = conn.execute(sqlalchemy.text("SELECT 1")).scalar_one()
        finally:
            engine.dispose()
    except Exception as e:  # noqa: BLE001
        return address, f"SELECT 1 failed ({type(e).__name__}: {' '.join(str(e).split())[:500]})"
    if ok != 1:
        return address, f"SELECT 1 gave {ok!r}"
    return address, None


PROBES: dict[str, Callable[[], tuple[str, str | None]]] = {
    "kafka": _probe_kafka,
    "neo4j": _probe_neo4j,
    "flink": _probe_flink,
    "postgres": _probe_postgres,
}
_probed: dict[str, tuple[str, str | None]] = {}


def probe(name: str) -> tuple[str, str | None]:
    """``(address, None)`` if the server answers, else ``(address, why not)``; once per session."""
    if name not in _probed:
        _probed[name] = PROBES[name]()
    return _probed[name]


# ------------------------------------------------------------------ hooks


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "services(*names): needs the real servers named (kafka, neo4j, flink, postgres) from deploy/services; "
        "skipped without AUDITFLOW_SERVICES=1, an error if CI is set or if a server does not answer",
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the added mark must count there
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("services") is not None and item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(tryfirst=True)  # before any fixture of the test is set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    marks = list(item.iter_markers(name="services"))
    if not marks:
        return
    names = sorted({n for m in marks for n in m.args}, key=SERVICE_NAMES.index)
    for n in names:
        if n not in SERVICE_NAMES:
            pytest.fail(f"{item.nodeid}: unknown service {n!r} in @services; choose from {list(SERVICE_NAMES)}",
                        pytrace=False)
    what = ", ".join(names) if names else "the deploy/ toolchain"
    if not services_requested():
        msg = f"needs {what} (real servers): {_HOW}"
        if in_ci():
            pytest.fail(f"CI is set but AUDITFLOW_SERVICES is not 1: this test {msg}", pytrace=False)
        pytest.skip(msg)
    down = [(n, *probe(n)) for n in names]
    down = [(n, addr, why) for n, addr, why in down if why is not None]
    if down:
        detail = "; ".join(f"{n} at {addr}: {why}" for n, addr, why in down)
        pytest.fail(f"AUDITFLOW_SERVICES=1 but {', '.join(n for n, _, _ in down)} does not answer: {detail}. "
                    f"Start it with `deploy/services up` (status: `deploy/services status`).", pytrace=False)


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The SQLAlchemy URL of a new, empty database ``auditflow_test_<16 hex>`` on the PostgreSQL
    of ``deploy/services`` (created through ``AUDITFLOW_POSTGRES_URL`` as its role, which owns
    it), dropped ``WITH (FORCE)`` after the test, so no test sees another's data. The test must
    be marked ``@pytest.mark.services("postgres")``: skipped, an error under CI, or an error when
    the server does not answer, exactly like the other services, before this runs."""
    marked = {n for m in request.node.iter_markers(name="services") for n in m.args}
    if "postgres" not in marked:
        pytest.fail(f'{request.node.nodeid} uses postgres_url: mark it @pytest.mark.services("postgres")',
                    pytrace=False)
    url = _postgres_url()
    if url is None:  # the probe already failed the test; this only guards direct use
        pytest.fail('AUDITFLOW_POSTGRES_URL is not set: eval "$(deploy/services env)"', pytrace=False)
    import sqlalchemy

    server = sqlalchemy.engine.make_url(url)
    name = f"auditflow_test_{secrets.token_hex(8)}"
    admin = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT", poolclass=sqlalchemy.pool.NullPool)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield server.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:  # FORCE: connections the test left open are closed
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()
