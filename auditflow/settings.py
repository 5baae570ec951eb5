"""One typed settings object; every field can be set by an ``AUDITFLOW_*`` environment variable.

=============================  ===============================================  =========================
variable                       meaning                                          default
=============================  ===============================================  =========================
AUDITFLOW_OUT_DIR              where runs write data, models, reports           ``out``
AUDITFLOW_GRAPH_URL            ``embedded:PATH`` (networkx file), ``memory:``    ``embedded:`` + out/graph
                               or ``bolt://HOST:PORT`` (Neo4j)
AUDITFLOW_NEO4J_URI            Neo4j Bolt address used by ``--neo4j``           ``bolt://127.0.0.1:7687``
AUDITFLOW_NEO4J_USER           Neo4j user (unset: no auth)                      unset
AUDITFLOW_NEO4J_PASSWORD       Neo4j password (secret)                          unset
AUDITFLOW_GRAPH_NAMESPACE      Neo4j label suffix isolating one graph           unset
AUDITFLOW_KAFKA_BOOTSTRAP      Kafka bootstrap servers                          ``127.0.0.1:9092``
AUDITFLOW_TOPIC_TRANSACTIONS   input topic                                      ``transactions``
AUDITFLOW_TOPIC_DLQ            dead-letter topic                                ``transactions.dlq``
AUDITFLOW_TOPIC_ALERTS         fast-path alerts topic                           ``alerts``
AUDITFLOW_FLINK_REST           Flink session cluster REST address               ``http://127.0.0.1:8081``
AUDITFLOW_FLINK_KAFKA_JAR      flink-sql-connector-kafka jar (deploy/ fetches)  unset
AUDITFLOW_WINDOW_MINUTES       feature and graph-feature window                 ``1440``
AUDITFLOW_TRACE_HOPS           evidence trace depth (at most 5)                 ``5``
AUDITFLOW_TRACE_FANOUT_CAP     edges kept per account per hop                   ``50``
AUDITFLOW_PARALLELISM          stream job parallelism                           ``1``
AUDITFLOW_SIGNING_KEY          HMAC key for report manifests (secret)           a development key
AUDITFLOW_SEED                 seed for generators and models                   ``7``
=============================  ===============================================  =========================
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_SIGNING_KEY = "auditflow-development-key-not-for-production"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AUDITFLOW_", extra="ignore")

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
    window_minutes: int = Field(default=1440, ge=1)
    trace_hops: int = Field(default=5, ge=1, le=5)
    trace_fanout_cap: int = Field(default=50, ge=1)
    parallelism: int = Field(default=1, ge=1)
    signing_key: SecretStr = SecretStr(DEV_SIGNING_KEY)
    seed: int = 7

    @field_validator("graph_url")
    @classmethod
    def _known_scheme(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("embedded:", "memory:", "bolt://", "neo4j://", "bolt+s://", "neo4j+s://")):
            raise ValueError(f"graph_url={v!r}: expected embedded:PATH, memory: or bolt://HOST:PORT")
        return v

    @property
    def effective_graph_url(self) -> str:
        return self.graph_url or f"embedded:{(self.out_dir / 'graph.jsonl').resolve()}"

    @property
    def graph_options(self) -> dict:
        """Backend options for :func:`evidence_graph.open_store` (Neo4j auth and namespace)."""
        if not self.effective_graph_url.startswith(("bolt", "neo4j")):
            return {}
        opts: dict = {}
        if self.neo4j_user:
            opts["user"] = self.neo4j_user
            opts["password"] = self.neo4j_password.get_secret_value() if self.neo4j_password else None
        if self.graph_namespace:
            opts["namespace"] = self.graph_namespace
        return opts

    def open_graph(self):
        from evidence_graph import open_store

        return open_store(self.effective_graph_url, **self.graph_options)

    @property
    def signing_key_bytes(self) -> bytes:
        return self.signing_key.get_secret_value().encode()
