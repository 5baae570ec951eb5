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
AUDITFLOW_NEO4J_USER               Neo4j user (unset: ``neo4j`` where a password    unset
                                   is set, else no auth)
AUDITFLOW_NEO4J_PASSWORD_FILE      file holding the Neo4j password (secret): what   unset
                                   ``deploy/services env`` prints; the only form
                                   the stream job takes
AUDITFLOW_NEO4J_PASSWORD           Neo4j password (secret); not with ``_FILE``      unset
AUDITFLOW_GRAPH_NAMESPACE          Neo4j label suffix isolating one graph           unset
AUDITFLOW_KAFKA_BOOTSTRAP          Kafka bootstrap servers                          ``127.0.0.1:9092``
AUDITFLOW_TOPIC_TRANSACTIONS       input topic                                      ``transactions``
AUDITFLOW_TOPIC_DLQ                dead-letter topic                                ``transactions.dlq``
AUDITFLOW_TOPIC_ALERTS             fast-path alerts topic                           ``alerts``
AUDITFLOW_TOPIC_PARTITIONS         partitions of the topics the demo creates        ``3``
AUDITFLOW_TOPIC_DRIFT_SCORES       drift records topic                              ``drift-scores``
AUDITFLOW_TOPIC_DRIFT_ALERTS       drift alerts topic                               ``drift-alerts``
AUDITFLOW_DRIFT_REFERENCE          drift reference (``reference build``'s JSON);    unset: no drift scores
                                   the stream job scores drift against it
AUDITFLOW_DRIFT_WINDOW_MINUTES     tumbling event-time window of drift scores       ``60``
AUDITFLOW_DRIFT_RULES_FILE         drift alert rules (JSON list of rules,           unset: drift on 3
                                   ``auditflow.drift.DriftRule``)                   consecutive windows
AUDITFLOW_FLINK_REST               Flink session cluster REST address               ``http://127.0.0.1:8081``
AUDITFLOW_FLINK_KAFKA_JAR          flink-sql-connector-kafka jar (deploy/ fetches)  unset
AUDITFLOW_FLINK_HOME               Flink distribution ``job submit`` runs;          the one in ``pyflink``
                                   also read from ``FLINK_HOME``
AUDITFLOW_FLINK_CONF_DIR           Flink client configuration for ``job submit``;   unset
                                   also read from ``FLINK_CONF_DIR``
AUDITFLOW_TRACE_HOPS               evidence trace depth (at most 5)                 ``5``
AUDITFLOW_TRACE_FANOUT_CAP         edges kept per account per hop                   ``50``
AUDITFLOW_TRACE_HORIZON_MINUTES    traces follow the money this long after the      ``4320`` (3 days)
                                   alerted transfer (money trails: before and after)
AUDITFLOW_TRAIL_MIN_SHARE          a money trail follows transfers carrying at      ``0.01``
                                   least this share of the alerted amount
AUDITFLOW_TYPOLOGY_WINDOW_MINUTES  typology detection looks this far either side    ``30240`` (21 days)
                                   of the alerted transfer
AUDITFLOW_PARALLELISM              stream job parallelism                           ``1``
AUDITFLOW_OUT_OF_ORDERNESS_MS      watermarks trail the latest event time by this   ``3600000`` (1 hour)
AUDITFLOW_ALLOWED_LATENESS_MS      records this far behind the watermark are still  ``0``
                                   applied in order; later ones are split off late
AUDITFLOW_EVENT_TIME_WINDOW        plausible event times, ``FROM..TO`` (dates or    ``1970-01-01..2100-01-01``
                                   ``YYYY-MM-DDTHH:MM``; TO exclusive): ingestion
                                   rejects a timestamp outside, naming the field
AUDITFLOW_ALERT_DELIVERY           Kafka job's alert and dead-letter sinks:         ``exactly-once``
                                   ``exactly-once`` (read_committed readers see
                                   each record once, after a checkpoint) or
                                   ``at-least-once`` (at once; replays possible)
AUDITFLOW_CHECKPOINT_INTERVAL_MS   Kafka job checkpoint interval                    ``5000``
AUDITFLOW_SIGNING_KEY_FILE         Ed25519 private key (PKCS#8 PEM, secret) that    unset: refused, but
                                   signs manifests and tree heads                   the demo's dev key
AUDITFLOW_TRUSTED_KEYS_FILE        published public keys (keyring JSON) ``verify``  the signing key's
                                   trusts; keep retired keys for old reports        public key
AUDITFLOW_REPORT_PROFILE           compliance section of alert reports: ``sar``,    ``sar``
                                   ``gdpr-art22``, ``ccpa`` (``reports/profiles``)
AUDITFLOW_REPORT_INSTITUTION       the institution reports name (controller,        unset
                                   business); the privacy profiles require it
AUDITFLOW_REPORT_CONTACT           where a subject asks for review or exercises     unset
                                   rights; the privacy profiles require it
AUDITFLOW_SCHEDULE_DAILY           cron of the daily compliance summary (a period   ``0 0 * * *``
                                   runs from one fire time to the next; empty: off)
AUDITFLOW_SCHEDULE_WEEKLY          cron of the weekly compliance summary            ``0 0 * * 1``
AUDITFLOW_SCHEDULE_START           first period ``schedule run`` catches up from    the first transfer
                                   (``YYYY-MM-DD`` or ``YYYY-MM-DDTHH:MM``)
AUDITFLOW_SCHEDULE_MAX_CATCHUP     ``schedule run`` writes at most this many        ``31``
                                   periods at once without ``--catch-up``
AUDITFLOW_ANALYST_TOKENS_FILE      bearer tokens the analyst API accepts (secret;   unset: the API refuses
                                   one line, comma-separated: rotation adds one)    to start
AUDITFLOW_ANALYST_LISTEN           ``HOST:PORT`` ``serve analyst`` listens on       ``127.0.0.1:8088``
AUDITFLOW_ANALYST_TIMEOUT_S        per-query time limit of the analyst API          ``5``
AUDITFLOW_ANALYST_MAX_RESULTS      most items one analyst API page returns          ``500``
AUDITFLOW_CASES_URL                where cases are kept: ``sqlite:///PATH`` or      ``sqlite:///`` +
                                   ``postgresql+psycopg://USER:PASS@HOST/DB``       out/cases.sqlite
AUDITFLOW_USERS_FILE               users, roles and token hashes (``auditflow       unset: case commands and
                                   case user-add`` writes it)                       routes refused
AUDITFLOW_TOKEN                    the token ``auditflow case`` acts with (secret)  unset
AUDITFLOW_SAR_DUE_DAYS             a SAR is due this many days after its case's     ``30``
                                   first alert was detected
AUDITFLOW_SAR_FILER_FILE           the filing institution's fixed SAR fields        unset: ``export-sar``
                                   (JSON, ``deploy/filer.example.json``)            refused
AUDITFLOW_NARRATOR_MIN_SCORE       alerts scored at least this get a narrator's     unset: none (the report's
                                   narrative in their report (the narrative tier)   template narrative)
AUDITFLOW_NARRATOR_TOP             the N highest-scoring alerts (the critical tier  unset: none (``demo``: 20)
                                   first) get a narrator's narrative too
AUDITFLOW_NARRATOR_DEVICE          where the narrator's model runs: ``auto``        ``auto``
                                   (CUDA when there is one), ``cpu``, ``cuda``
AUDITFLOW_NARRATOR_THREADS         CPU threads of the narrator                      all cores (llama.cpp)
AUDITFLOW_ALERT_BUDGET_PER_10K     alerts per 10,000 transfers the evaluation       ``20``
                                   measures precision at
AUDITFLOW_MODEL_LISTEN             ``HOST:PORT`` ``serve model`` listens on         ``127.0.0.1:8090``
AUDITFLOW_MODEL_DIR                the cascade ``serve model`` loads                OUT_DIR/model
AUDITFLOW_MODEL_BATCH_MAX          rows the model service scores in one micro-batch ``512``
AUDITFLOW_MODEL_BATCH_WAIT_MS      how long a micro-batch waits for more requests   ``2``
AUDITFLOW_TIER_CRITICAL_SCORE      deep-path tiers by score: critical at or above,  ``0.9``
AUDITFLOW_TIER_NORMAL_SCORE        normal at or above, background at or above the   ``0.5``
                                   cascade's alert threshold, else none
AUDITFLOW_TIER_CRITICAL_MS         latency targets of the tiers (queue wait plus    ``100``
AUDITFLOW_TIER_NORMAL_MS           scoring); a request past its target is counted   ``1000``
AUDITFLOW_TIER_BACKGROUND_MS       as a miss                                        ``10000``
AUDITFLOW_SEED                     seed for generators and models                   ``7``
=================================  ===============================================  =========================

Where both names of the Flink variables are set, the ``AUDITFLOW_`` one wins.

Secrets are never held as plain strings: the signing key is a file (read by ``reports.signing``
where it is used), the Neo4j password a :class:`~pydantic.SecretStr`: ``repr``, ``str``
and JSON dumps show ``**********``. The Neo4j password file is read once, here, into
``neo4j_password``; what runs in this process gets the password (:attr:`Settings.graph_options`),
what is shipped elsewhere -- the stream job, pickled into a Flink job graph and passed as
``flink run`` arguments -- gets the file's path only (:attr:`Settings.graph_job_options`) and reads
the file where it runs (the TaskManager).

>>> s = Settings(trace_hops=3)
>>> s.trace_hops, s.trace_fanout_cap, s.trace_horizon
(3, 50, datetime.timedelta(days=3))
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from auditflow.errors import ConfigError
from auditflow.graph_url import BOLT_SCHEMES, graph_backend
from auditflow.limits import (
    DEFAULT_ALLOWED_LATENESS_MS,
    DEFAULT_EVENT_TIME_WINDOW,
    DEFAULT_FANOUT_CAP,
    DEFAULT_OUT_OF_ORDERNESS_MS,
    DEFAULT_TRACE_HORIZON,
    DEFAULT_TRAIL_MIN_SHARE,
    DEFAULT_TYPOLOGY_WINDOW,
    MAX_TRACE_HOPS,
)
from auditflow.secret_file import read_secret_file

#: The Neo4j user when a password is set and no user: Neo4j's initial admin (the only user of
#: the Community server deploy/services starts).
DEFAULT_NEO4J_USER = "neo4j"
_MINUTE = timedelta(minutes=1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AUDITFLOW_", extra="ignore", populate_by_name=True)

    out_dir: Path = Path("out")
    graph_url: str | None = None
    neo4j_uri: str = "bolt://127.0.0.1:7687"
    neo4j_user: str | None = None
    neo4j_password: SecretStr | None = None
    neo4j_password_file: Path | None = None
    graph_namespace: str = ""
    kafka_bootstrap: str = "127.0.0.1:9092"
    topic_transactions: str = "transactions"
    topic_dlq: str = "transactions.dlq"
    topic_alerts: str = "alerts"
    topic_partitions: int = Field(default=3, ge=1)
    topic_drift_scores: str = "drift-scores"
    topic_drift_alerts: str = "drift-alerts"
    drift_reference: Path | None = None
    drift_window_minutes: int = Field(default=60, ge=1, le=7 * 1440)
    drift_rules_file: Path | None = None
    flink_rest: str = "http://127.0.0.1:8081"
    flink_kafka_jar: Path | None = None
    flink_home: Path | None = Field(default=None, validation_alias=AliasChoices("AUDITFLOW_FLINK_HOME", "FLINK_HOME"))
    flink_conf_dir: Path | None = Field(
        default=None, validation_alias=AliasChoices("AUDITFLOW_FLINK_CONF_DIR", "FLINK_CONF_DIR")
    )
    trace_hops: int = Field(default=MAX_TRACE_HOPS, ge=1, le=MAX_TRACE_HOPS)
    trace_fanout_cap: int = Field(default=DEFAULT_FANOUT_CAP, ge=1)
    trace_horizon_minutes: int = Field(default=DEFAULT_TRACE_HORIZON // _MINUTE, ge=1)
    typology_window_minutes: int = Field(default=DEFAULT_TYPOLOGY_WINDOW // _MINUTE, ge=1)
    #: the share of the alerted amount a transfer must carry for the money trail to follow it
    trail_min_share: Decimal = Field(default=Decimal(DEFAULT_TRAIL_MIN_SHARE), gt=0, le=1)
    parallelism: int = Field(default=1, ge=1)
    out_of_orderness_ms: int = Field(default=DEFAULT_OUT_OF_ORDERNESS_MS, ge=0)
    allowed_lateness_ms: int = Field(default=DEFAULT_ALLOWED_LATENESS_MS, ge=0)
    event_time_window: Annotated[tuple[datetime, datetime], NoDecode] = DEFAULT_EVENT_TIME_WINDOW
    alert_delivery: Literal["exactly-once", "at-least-once"] = "exactly-once"
    checkpoint_interval_ms: int = Field(default=5000, ge=10)
    signing_key_file: Path | None = None
    trusted_keys_file: Path | None = None
    report_profile: str = Field(default="sar", pattern=r"^[a-z0-9][a-z0-9-]*$")
    report_institution: str | None = None
    report_contact: str | None = None
    schedule_daily: str = "0 0 * * *"
    schedule_weekly: str = "0 0 * * 1"
    schedule_start: datetime | None = None
    schedule_max_catchup: int = Field(default=31, ge=1)
    analyst_tokens_file: Path | None = None
    analyst_listen: str = Field(default="127.0.0.1:8088", pattern=r"^[^:\s]+:[0-9]{1,5}$")
    analyst_timeout_s: float = Field(default=5.0, gt=0, le=600)
    analyst_max_results: int = Field(default=500, ge=1, le=100_000)
    cases_url: str | None = Field(default=None, pattern=r"^(sqlite|postgresql)(\+[a-z0-9]+)?://")
    users_file: Path | None = None
    token: SecretStr | None = None
    sar_due_days: int = Field(default=30, ge=1, le=365)
    sar_filer_file: Path | None = None
    narrator_min_score: float | None = Field(default=None, ge=0, le=1)
    narrator_top: int | None = Field(default=None, ge=0)
    narrator_device: Literal["auto", "cpu", "cuda"] = "auto"
    narrator_threads: int | None = Field(default=None, ge=1)
    alert_budget_per_10k: float = Field(default=20.0, gt=0, le=10_000)
    model_listen: str = Field(default="127.0.0.1:8090", pattern=r"^[^:\s]+:[0-9]{1,5}$")
    model_dir: Path | None = None
    model_batch_max: int = Field(default=512, ge=1, le=100_000)
    model_batch_wait_ms: float = Field(default=2.0, ge=0, le=1000)
    tier_critical_score: float = Field(default=0.9, ge=0, le=1)
    tier_normal_score: float = Field(default=0.5, ge=0, le=1)
    tier_critical_ms: float = Field(default=100.0, gt=0)
    tier_normal_ms: float = Field(default=1000.0, gt=0)
    tier_background_ms: float = Field(default=10_000.0, gt=0)
    seed: int = 7

    @field_validator("event_time_window", mode="before")
    @classmethod
    def _time_window(cls, v: object) -> object:
        from auditflow.records import parse_time_window

        return parse_time_window(v) if isinstance(v, str) else v  # "FROM..TO" from the environment

    @field_validator("event_time_window")
    @classmethod
    def _ordered_window(cls, v: tuple[datetime, datetime]) -> tuple[datetime, datetime]:
        if v[0].tzinfo is not None or v[1].tzinfo is not None or not v[0] < v[1]:
            raise ValueError(f"event_time_window {v!r}: expected naive (UTC) times, FROM before TO")
        return v

    @field_validator("schedule_daily", "schedule_weekly")
    @classmethod
    def _cron(cls, v: str) -> str:
        from croniter import croniter

        if v.strip() and not croniter.is_valid(v):
            raise ValueError(f"{v!r} is not a cron expression (minute hour day-of-month month day-of-week)")
        return v.strip()

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

    @field_validator("neo4j_password_file")
    @classmethod
    def _readable_password_file(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        # Errors name the file, never its content (the CLI prints a failed field's input).
        if v is not None:
            if info.data.get("neo4j_password") is not None:
                raise ValueError("AUDITFLOW_NEO4J_PASSWORD is set too: set one of the two")
            read_secret_file(v)  # SecretFileError (a ValueError) naming the file
        return v

    @model_validator(mode="after")
    def _password_from_file(self) -> Settings:
        if self.neo4j_password_file is not None and self.neo4j_password is None:
            self.neo4j_password = SecretStr(read_secret_file(self.neo4j_password_file))
        return self

    @property
    def effective_graph_url(self) -> str:
        return self.graph_url or f"embedded:{(self.out_dir / 'graph.jsonl').resolve()}"

    @property
    def effective_cases_url(self) -> str:
        return self.cases_url or f"sqlite:///{(self.out_dir / 'cases.sqlite').resolve()}"

    @property
    def neo4j_auth(self) -> dict:
        """The Neo4j credentials as :class:`evidence_graph.neo4j_store.Neo4jGraphStore` takes them,
        for a connection made in this process: ``{}`` (no auth), else ``user`` and ``password``."""
        if self.neo4j_password is None:
            return {"user": self.neo4j_user, "password": None} if self.neo4j_user else {}
        return {"user": self.neo4j_user or DEFAULT_NEO4J_USER, "password": self.neo4j_password.get_secret_value()}

    @property
    def neo4j_auth_reference(self) -> dict:
        """The same credentials by reference, for code shipped elsewhere (the stream job): ``user``
        and ``password_file`` (an absolute path), never the password. ``ConfigError`` when the
        password was given only as ``AUDITFLOW_NEO4J_PASSWORD``."""
        if self.neo4j_password_file is not None:
            return {
                "user": self.neo4j_user or DEFAULT_NEO4J_USER,
                "password_file": str(self.neo4j_password_file.resolve()),
            }
        if self.neo4j_password is not None:
            raise ConfigError(
                "AUDITFLOW_NEO4J_PASSWORD is set, but the stream job takes the Neo4j password only as a "
                "file (a password would be pickled into the Flink job graph): write it to a file the "
                "TaskManagers can read (mode 0600) and set AUDITFLOW_NEO4J_PASSWORD_FILE instead"
            )
        return self.neo4j_auth

    @property
    def graph_options(self) -> dict:
        """Backend options for :func:`evidence_graph.open_store` in this process (Neo4j auth,
        the password included, and namespace)."""
        if graph_backend(self.effective_graph_url) != "neo4j":
            return {}
        return self._with_namespace(self.neo4j_auth)

    @property
    def graph_job_options(self) -> dict:
        """:attr:`graph_options` for the stream job: the password by reference
        (:attr:`neo4j_auth_reference`), so it is neither pickled nor passed as an argument."""
        if graph_backend(self.effective_graph_url) != "neo4j":
            return {}
        return self._with_namespace(self.neo4j_auth_reference)

    def _with_namespace(self, opts: dict) -> dict:
        return {**opts, "namespace": self.graph_namespace} if self.graph_namespace else dict(opts)

    @property
    def report_schedules(self) -> dict[str, str]:
        """The compliance summaries ``schedule run`` produces: name -> cron (empty ones are off)."""
        return {name: cron for name, cron in (("daily", self.schedule_daily), ("weekly", self.schedule_weekly)) if cron}

    def analyst_tokens(self) -> tuple[SecretStr, ...]:
        """The analyst API's accepted tokens, read from ``analyst_tokens_file`` (comma-separated
        on one line); ``ConfigError`` without a file (the API never runs unauthenticated)."""
        if self.analyst_tokens_file is None:
            raise ConfigError(
                "the analyst API needs tokens: write them (comma-separated, one line, mode 0600) "
                "to a file and set AUDITFLOW_ANALYST_TOKENS_FILE"
            )
        tokens = [t.strip() for t in read_secret_file(self.analyst_tokens_file).split(",") if t.strip()]
        return tuple(SecretStr(t) for t in tokens)

    @property
    def trace_horizon(self) -> timedelta:
        """How long after the alerted transfer an evidence trace follows the money."""
        return self.trace_horizon_minutes * _MINUTE

    @property
    def typology_window(self) -> timedelta:
        """How far either side of the alerted transfer typology detection looks."""
        return self.typology_window_minutes * _MINUTE
