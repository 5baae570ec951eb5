"""Settings: defaults equal auditflow.limits, every field from its environment variable, errors
that name the field and the value, and graph URLs accepted exactly where open_store opens them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import neo4j
import pytest
from pydantic import ValidationError

from auditflow import limits
from auditflow.graph_url import BOLT_SCHEMES
from auditflow_app.settings import Settings
from evidence_graph import NetworkxGraphStore, open_store


def test_defaults_are_the_limits_defined_once():
    s = Settings()
    assert s.trace_hops == limits.MAX_TRACE_HOPS == 5
    assert s.trace_fanout_cap == limits.DEFAULT_FANOUT_CAP == 50
    assert s.trace_horizon == limits.DEFAULT_TRACE_HORIZON == timedelta(days=3)
    assert s.trace_horizon_minutes == 3 * 24 * 60
    assert s.typology_window == limits.DEFAULT_TYPOLOGY_WINDOW
    assert s.typology_window_minutes == 21 * 24 * 60
    # the deep path's window reaches as far as the detectors follow a shape (three weeks)
    from auditflow.typologies import MAX_HOP_HORIZON
    assert s.typology_window == MAX_HOP_HORIZON
    assert (s.out_dir, s.seed, s.graph_url, s.flink_home, s.flink_conf_dir) == (Path("out"), 7, None, None, None)
    assert s.signing_key_file is None and s.trusted_keys_file is None  # no key: signing is refused


def test_trace_hops_is_bounded_by_the_limit(monkeypatch):
    monkeypatch.setenv("AUDITFLOW_TRACE_HOPS", str(limits.MAX_TRACE_HOPS))
    assert Settings().trace_hops == limits.MAX_TRACE_HOPS
    monkeypatch.setenv("AUDITFLOW_TRACE_HOPS", str(limits.MAX_TRACE_HOPS + 1))
    with pytest.raises(ValidationError, match="less than or equal to 5"):
        Settings()


@pytest.mark.parametrize(
    ("variable", "value", "attribute", "expected"),
    [
        ("AUDITFLOW_OUT_DIR", "/data/run1", "out_dir", Path("/data/run1")),
        ("AUDITFLOW_SEED", "11", "seed", 11),
        ("AUDITFLOW_TRACE_HOPS", "2", "trace_hops", 2),
        ("AUDITFLOW_TRACE_FANOUT_CAP", "7", "trace_fanout_cap", 7),
        ("AUDITFLOW_TRACE_HORIZON_MINUTES", "90", "trace_horizon", timedelta(minutes=90)),
        ("AUDITFLOW_TYPOLOGY_WINDOW_MINUTES", "30", "typology_window", timedelta(minutes=30)),
        ("AUDITFLOW_PARALLELISM", "3", "parallelism", 3),
        ("AUDITFLOW_GRAPH_URL", "memory:", "effective_graph_url", "memory:"),
        ("AUDITFLOW_GRAPH_URL", "bolt+ssc://db.internal:7687", "graph_url", "bolt+ssc://db.internal:7687"),
        ("AUDITFLOW_NEO4J_URI", "neo4j+ssc://db.internal:7687", "neo4j_uri", "neo4j+ssc://db.internal:7687"),
        ("AUDITFLOW_KAFKA_BOOTSTRAP", "k1:9092,k2:9092", "kafka_bootstrap", "k1:9092,k2:9092"),
        ("AUDITFLOW_TOPIC_ALERTS", "a2", "topic_alerts", "a2"),
        ("AUDITFLOW_FLINK_REST", "http://jm:8081", "flink_rest", "http://jm:8081"),
        ("AUDITFLOW_FLINK_KAFKA_JAR", "/jars/k.jar", "flink_kafka_jar", Path("/jars/k.jar")),
        ("AUDITFLOW_FLINK_HOME", "/opt/flink", "flink_home", Path("/opt/flink")),
        ("FLINK_HOME", "/opt/flink-std", "flink_home", Path("/opt/flink-std")),
        ("AUDITFLOW_FLINK_CONF_DIR", "/etc/flink", "flink_conf_dir", Path("/etc/flink")),
        ("FLINK_CONF_DIR", "/etc/flink-std", "flink_conf_dir", Path("/etc/flink-std")),
        ("AUDITFLOW_SIGNING_KEY_FILE", "keys/signing.pem", "signing_key_file", Path("keys/signing.pem")),
    ],
)
def test_each_field_comes_from_its_environment_variable(monkeypatch, variable, value, attribute, expected):
    monkeypatch.setenv(variable, value)
    assert getattr(Settings(), attribute) == expected


def test_the_auditflow_name_wins_over_flinks_own(monkeypatch):
    monkeypatch.setenv("FLINK_HOME", "/opt/flink-std")
    monkeypatch.setenv("AUDITFLOW_FLINK_HOME", "/opt/flink")
    monkeypatch.setenv("FLINK_CONF_DIR", "/etc/flink-std")
    monkeypatch.setenv("AUDITFLOW_FLINK_CONF_DIR", "/etc/flink")
    s = Settings()
    assert (s.flink_home, s.flink_conf_dir) == (Path("/opt/flink"), Path("/etc/flink"))


def test_neo4j_credentials_and_namespace_go_to_bolt_stores_only(monkeypatch):
    monkeypatch.setenv("AUDITFLOW_NEO4J_USER", "auditor")
    monkeypatch.setenv("AUDITFLOW_NEO4J_PASSWORD", "pw")
    monkeypatch.setenv("AUDITFLOW_GRAPH_NAMESPACE", "ns1")
    assert Settings().graph_options == {}  # the default embedded store takes no credentials
    monkeypatch.setenv("AUDITFLOW_GRAPH_URL", "neo4j+s://db:7687")
    assert Settings().graph_options == {"user": "auditor", "password": "pw", "namespace": "ns1"}
    assert "pw" not in repr(Settings())  # a secret


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("AUDITFLOW_TRACE_HOPS", "6", "trace_hops"),
        ("AUDITFLOW_TRACE_HOPS", "0", "trace_hops"),
        ("AUDITFLOW_TRACE_FANOUT_CAP", "0", "trace_fanout_cap"),
        ("AUDITFLOW_TRACE_HORIZON_MINUTES", "-5", "trace_horizon_minutes"),
        ("AUDITFLOW_TYPOLOGY_WINDOW_MINUTES", "0", "typology_window_minutes"),
        ("AUDITFLOW_SEED", "seven", "seed"),
        ("AUDITFLOW_GRAPH_URL", "http://db:7687", "graph_url"),
        ("AUDITFLOW_GRAPH_URL", "embedded:", "graph_url"),
        ("AUDITFLOW_NEO4J_URI", "embedded:/tmp/g.jsonl", "neo4j_uri"),
    ],
)
def test_validation_errors_name_the_field_and_the_value(monkeypatch, variable, value, field):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as err:
        Settings()
    (problem,) = err.value.errors()
    assert problem["loc"] == (field,)
    assert problem["input"] == value
    assert field in str(err.value) and value in str(err.value)


# ------------------------------------------------------------------ graph URLs, on both sides

NEO4J_URLS = [f"{scheme}127.0.0.1:7687" for scheme in BOLT_SCHEMES]


def test_the_schemes_are_the_drivers_bolt_and_neo4j_schemes():
    assert {s.removesuffix("://") for s in BOLT_SCHEMES} == {"bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc"}
    for url in NEO4J_URLS:  # the driver itself takes each (it connects lazily)
        neo4j.GraphDatabase.driver(url).close()
    with pytest.raises(neo4j.exceptions.ConfigurationError):
        neo4j.GraphDatabase.driver("bolt+x://127.0.0.1:7687")


@pytest.fixture
def opened_neo4j(monkeypatch) -> list[tuple[str, dict]]:
    """open_store hands Neo4j URLs to this recorder instead of connecting."""
    import evidence_graph.neo4j_store as neo4j_store

    calls: list[tuple[str, dict]] = []

    class Recorder:
        def __init__(self, uri, **options):
            calls.append((uri, options))

    monkeypatch.setattr(neo4j_store, "Neo4jGraphStore", Recorder)
    return calls


@pytest.mark.parametrize("url", NEO4J_URLS)
def test_neo4j_schemes_are_accepted_by_settings_and_opened_by_open_store(monkeypatch, opened_neo4j, url):
    monkeypatch.setenv("AUDITFLOW_GRAPH_URL", url)
    monkeypatch.setenv("AUDITFLOW_GRAPH_NAMESPACE", "ns1")
    s = Settings()
    assert s.effective_graph_url == url
    monkeypatch.setenv("AUDITFLOW_NEO4J_URI", url)
    assert Settings().neo4j_uri == url
    from auditflow_app.flow import open_graph

    open_graph(s)
    open_store(url)
    assert opened_neo4j == [(url, {"namespace": "ns1"}), (url, {})]


@pytest.mark.parametrize("url", ["memory:", "embedded:{tmp}/graph.jsonl"])
def test_embedded_urls_are_accepted_by_both(tmp_path, url):
    url = url.format(tmp=tmp_path)
    assert Settings(graph_url=url).effective_graph_url == url
    with open_store(url) as store:
        assert isinstance(store, NetworkxGraphStore)


@pytest.mark.parametrize(
    "url", ["http://db:7687", "bolt+x://db:7687", "bolt:/db", "embedded:", "memory:x", "neo4j+ssc://", "graph.jsonl"]
)
def test_other_urls_are_refused_by_both_naming_the_url(opened_neo4j, url):
    with pytest.raises(ValidationError, match="graph_url") as err:
        Settings(graph_url=url)
    assert repr(url) in str(err.value)
    with pytest.raises(ValueError, match="graph url") as err2:
        open_store(url)
    assert repr(url) in str(err2.value)
    assert opened_neo4j == []


def test_report_schedules_are_cron_expressions(monkeypatch):
    assert Settings().report_schedules == {"daily": "0 0 * * *", "weekly": "0 0 * * 1"}
    monkeypatch.setenv("AUDITFLOW_SCHEDULE_WEEKLY", "")
    monkeypatch.setenv("AUDITFLOW_SCHEDULE_DAILY", "30 6 * * *")
    assert Settings().report_schedules == {"daily": "30 6 * * *"}
    monkeypatch.setenv("AUDITFLOW_SCHEDULE_DAILY", "every morning")
    with pytest.raises(ValidationError, match="not a cron expression"):
        Settings()
