"""One typed settings object; every field can be set by an ``AUDITFLOW_*`` environment variable.

This is the only place the product reads its configuration from the environment: stages get
values (a URI, a window, a path) from the caller, never from ``os.environ``. Defaults of the
windows and limits come from :mod:`auditflow.limits`, where they are defined once.

=================================  ===============================================  =========================
variable                           meaning                                          default
=================================  ===============================================  =========================
AUDITFLOW_OUT_DIR                  where runs write data, models, reports           ``out``
AUDITFLOW_GRAPH_URL                ``embedded:PATH`` (networkx file), ``memory:``   ``embedded:`` + out/graph
                                   or a Neo4j URI: ``bolt://HOST:PORT``,
                                   ``neo4j://``, ``+s`` / ``+ssc`` TLS variants
AUDITFLOW_NEO4J_URI                Neo4j address used by ``--neo4j``                ``bolt://127.0.0.1:7687``
AUDITFLOW_NEO4J_USER               Neo4j user (unset: no auth)                      unset
AUDITFLOW_NEO4J_PASSWORD           Neo4j password (secret)                          unset
AUDITFLOW_GRAPH_NAMESPACE          Neo4j label suffix isolating one graph           unset
AUDITFLOW_KAFKA_BOOTSTRAP          Kafka bootstrap servers                          ``127.0.0.1:9092``
AUDITFLOW_TOPIC_TRANSACTIONS       input topic                                      ``transactions``
AUDITFLOW_TOPIC_DLQ                dead-letter topic                                ``transactions.dlq``
AUDITFLOW_TOPIC_ALERTS             fast-path alerts topic                           ``alerts``
AUDITFLOW_TOPIC_PARTITIONS         partitions of the topics the demo creates        ``3``
AUDITFLOW_FLINK_REST               Flink session cluster REST address               ``http://127.0.0.1:8081``
AUDITFLOW_FLINK_KAFKA_JAR          flink-sql-connector-kafka jar (deploy/ fetches)  unset
AUDITFLOW_FLINK_HOME               Flink distribution ``job submit`` runs;          the one in ``pyflink``
                                   also read from ``FLINK_HOME``
AUDITFLOW_FLINK_CONF_DIR           Flink client configuration for ``job submit``;   unset
                                   also read from ``FLINK_CONF_DIR``
AUDITFLOW_WINDOW_MINUTES           feature and graph-feature window                 ``1440`` (24 h)
AUDITFLOW_TRACE_HOPS               evidence trace depth (at most 5)                 ``5``
AUDITFLOW_TRACE_FANOUT_CAP         edges kept per account per hop                   ``50``
AUDITFLOW_TRACE_HORIZON_MINUTES    traces follow the money this long after the      ``4320`` (3 days)
                                   alerted transfer
AUDITFLOW_TYPOLOGY_WINDOW_MINUTES  typology detection looks this far either side    ``4320`` (3 days)
                                   of the alerted transfer
AUDITFLOW_PARALLELISM              stream job parallelism                           ``1``
AUDITFLOW_OUT_OF_ORDERNESS_MS      watermarks trail the latest event time by this   ``3600000`` (1 hour)
AUDITFLOW_ALLOWED_LATENESS_MS      records this far behind the watermark are still  ``0``
                                   applied in order; later ones are split off late
AUDITFLOW_SIGNING_KEY              HMAC key for report manifests (secret)           a development key
AUDITFLOW_SEED                     seed for generators and models                   ``7``
=================================  ===============================================  =========================

Where both names of the Flink variables are set, the ``AUDITFLOW_`` one wins.

>>> s = Settings(trace_hops=3)
>>> s.trace_hops, s.window_minutes, s.trace_horizon
(3, 1440, datetime.timedelta(days=3))
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from auditflow.graph_url import BOLT_SCHEMES, graph_backend
from auditflow.limits import (
    DEFAULT_ALLOWED_LATENESS_MS,
    DEFAULT_OUT_OF_ORDERNESS_MS,
    DEFAULT_FANOUT_CAP,
    DEFAULT_TRACE_HORIZON,
    DEFAULT_TYPOLOGY_WINDOW,
    DEFAULT_WINDOW_MINUTES,
    MAX_TRACE_HOPS,
)

DEV_SIGNING_KEY = "auditflow-development-key-not-for-production"
_MINUTE = timedelta(minutes=1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AUDITFLOW_", extra="ignore", populate_by_name=True)

    out_dir: Path = Path("out")
    graph_url: str | None = None
    neo4j_uri: str = "bolt://127.0.0.1:7687"
    neo4j_user: str | None = None
    neo4j_password: SecretStr | None = None
    graph_namespace: str = ""
    kafka_bootstrap: str = "127.0.0.1:9092"
    topic_transactions: str = "transactions"
    topic_dlq: str = "transactions.dlq"
    topic_alerts: str = "alerts"
    topic_partitions: int = Field(default=3, ge=1)
    flink_rest: str = "http://127.0.0.1:8081"
    flink_kafka_jar: Path | None = None
    flink_home: Path | None = Field(default=None, validation_alias=AliasChoices("AUDITFLOW_FLINK_HOME", "FLINK_HOME"))
    flink_conf_dir: Path | None = Field(
        default=None, validation_alias=AliasChoices("AUDITFLOW_FLINK_CONF_DIR", "FLINK_CONF_DIR")
    )
    window_minutes: int = Field(default=DEFAULT_WINDOW_MINUTES, ge=1)
    trace_hops: int = Field(default=MAX_TRACE_HOPS, ge=1, le=MAX_TRACE_HOPS)
    trace_fanout_cap: int = Field(default=DEFAULT_FANOUT_CAP, ge=1)
    trace_horizon_minutes: int = Field(default=DEFAULT_TRACE_HORIZON // _MINUTE, ge=1)
    typology_window_minutes: int = Field(default=DEFAULT_TYPOLOGY_WINDOW // _MINUTE, ge=1)
    parallelism: int = Field(default=1, ge=1)
    out_of_orderness_ms: int = Field(default=DEFAULT_OUT_OF_ORDERNESS_MS, ge=0)
    allowed_lateness_ms: int = Field(default=DEFAULT_ALLOWED_LATENESS_MS, ge=0)
    signing_key: SecretStr = SecretStr(DEV_SIGNING_KEY)
    seed: int = 7

    @field_validator("graph_url")
    @classmethod
    def _known_scheme(cls, v: str | None) -> str | None:
        if v is not None:
            graph_backend(v)  # the rule evidence_graph.open_store applies: ValueError names the URL
        return v

    @field_validator("neo4j_uri")
    @classmethod
    def _bolt_uri(cls, v: str) -> str:
        if graph_backend(v) != "neo4j":
            raise ValueError(f"neo4j_uri {v!r}: expected one of {', '.join(BOLT_SCHEMES)} then HOST:PORT")
        return v

    @property
    def effective_graph_url(self) -> str:
        return self.graph_url or f"embedded:{(self.out_dir / 'graph.jsonl').resolve()}"

    @property
    def graph_options(self) -> dict:
        """Backend options for :func:`evidence_graph.open_store` (Neo4j auth and namespace)."""
        if graph_backend(self.effective_graph_url) != "neo4j":
            return {}
        opts: dict = {}
        if self.neo4j_user:
            opts["user"] = self.neo4j_user
            opts["password"] = self.neo4j_password.get_secret_value() if self.neo4j_password else None
        if self.graph_namespace:
            opts["namespace"] = self.graph_namespace
        return opts

    @property
    def trace_horizon(self) -> timedelta:
        """How long after the alerted transfer an evidence trace follows the money."""
        return self.trace_horizon_minutes * _MINUTE

    @property
    def typology_window(self) -> timedelta:
        """How far either side of the alerted transfer typology detection looks."""
        return self.typology_window_minutes * _MINUTE

    @property
    def signing_key_bytes(self) -> bytes:
        return self.signing_key.get_secret_value().encode()
