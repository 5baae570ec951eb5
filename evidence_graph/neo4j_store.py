"""The Neo4j backend: the same graph in a Neo4j 5 server, over Bolt with the official driver.

Schema (created at start, idempotently)::

    (:Account {id})-[:TX {event_id, ts, paid_units, paid_currency, recv_units, recv_currency,
                          payment_format, is_laundering}]->(:Account {id})

* ``Account.id`` is the account's ``node_id``; a property uniqueness constraint backs it.
* ``TX.event_id`` has a relationship property uniqueness constraint (Neo4j 5.7+, Community
  Edition included); where the server refuses it, a relationship property index instead.
* Money is exact: integer units at the currency's scale plus the currency name, never a float.
  ``ts`` is integer minutes since 1970-01-01 (the records' minute resolution), so windows are
  integer comparisons.
* Writes are batched ``UNWIND $rows AS r MERGE ...``: accounts MERGEd on their id, a transaction
  created only where no ``TX`` carries its event id (an index seek). Replaying any batch changes
  no counts; two writers racing on one event are settled by the constraint (the loser replays).
* Reads answer a whole BFS frontier per query (``UNWIND $frontier``: each account with its own
  time window, the per-account limit applied in the query), one hop at a time, so the shared
  :func:`~evidence_graph.follow.follow_money` runs unchanged; variable-length patterns
  (``[*1..5]``), which enumerate paths and explode on hubs, are never used. Every read runs with
  a transaction timeout (``tx_timeout``, or what is left of the caller's time budget): the
  server aborts it, and the store raises :class:`~evidence_graph.store.GraphQueryTimeout`.

A ``namespace`` suffixes the label and relationship type (``Account_ns``, ``TX_ns``) so several
independent graphs (tests, experiments) can share one server; :meth:`Neo4jGraphStore.drop`
removes one. The URI is the caller's (the app passes ``Settings.neo4j_uri`` / ``graph_url``;
this module reads no environment), else ``bolt://127.0.0.1:7687``.

Authentication: a ``password`` or a ``password_file`` (read when the store opens, e.g. in a Flink
UDF's ``open()`` on the TaskManager, so code that ships a store's options ships a path, never the
secret); ``user`` defaults to ``neo4j`` when either is given; with neither and ``user=None`` the
store connects without credentials. A refusal is a :class:`GraphAuthError` naming the server,
the user, where the password came from and the settings that give it -- never the password.
A pickled store (it reconnects when unpickled) carries what it was given: the file's path, or
the password itself when it was given one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from operator import attrgetter
from typing import Any

import neo4j
from neo4j.exceptions import ClientError, ConstraintError

from auditflow.errors import FieldError
from auditflow.money import Money
from auditflow.secret_file import read_secret_file
from auditflow.records import EPOCH, TransactionEvent, epoch_minutes
from evidence_graph.store import (
    MICROS_PER_MINUTE,
    Direction,
    Expansion,
    GraphEdge,
    GraphQueryTimeout,
    GraphStore,
    MicrosExpansion,
    to_micros,
    unique_events,
)

DEFAULT_URI = "bolt://127.0.0.1:7687"
DEFAULT_USER = "neo4j"
#: Where the app's settings take the credentials from (named in errors; this module reads none).
PASSWORD_SETTINGS = "AUDITFLOW_NEO4J_PASSWORD_FILE (the file `deploy/services env` names) or AUDITFLOW_NEO4J_PASSWORD"
WRITE_BATCH = 1_000
FRONTIER_BATCH = 500
#: Seconds a read transaction may run before the server aborts it (per frontier query).
DEFAULT_TX_TIMEOUT = 10.0
_INT64 = 2**63 - 1
_NAMESPACE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,47}")
_EPOCH = EPOCH
_MINUTE = timedelta(minutes=1)
_CAP_KEY = attrgetter("micros", "event_id")  # cap order: (timestamp, event_id)

#: An edge as one list, per direction: a frontier account's own end is its id (no node read on
#: the server for it); with "both" the two ends are read.
_EDGE_LISTS = {
    direction: (f"[t.event_id, {src}, {dst}, t.ts, t.paid_units, t.paid_currency, "
                "t.recv_units, t.recv_currency, t.payment_format, t.is_laundering]")
    for direction, src, dst in (("out", "fid", "endNode(t).id"), ("in", "startNode(t).id", "fid"),
                                ("both", "startNode(t).id", "endNode(t).id"))
}


def _units(m: Money, field: str) -> int:
    if abs(m.units) > _INT64:
        raise FieldError(field, m, "amount does not fit a Neo4j integer")
    return m.units


def _row(ev: TransactionEvent) -> dict[str, Any]:
    return {
        "event_id": ev.event_id,
        "src": ev.sender.node_id,
        "dst": ev.receiver.node_id,
        "ts": epoch_minutes(ev.timestamp),
        "paid_units": _units(ev.amount_paid, "amount_paid"),
        "paid_currency": ev.amount_paid.currency,
        "recv_units": _units(ev.amount_received, "amount_received"),
        "recv_currency": ev.amount_received.currency,
        "payment_format": ev.payment_format,
        "is_laundering": ev.is_laundering,
    }


class GraphAuthError(PermissionError):
    """The Neo4j server refused the connection's credentials (or their absence)."""


class Neo4jGraphStore(GraphStore):
    """Graph store on a Neo4j 5 server (see the module docstring for the schema)."""

    backend = "neo4j"

    def __init__(
        self,
        uri: str | None = None,
        user: str | None = None,
        password: str | None = None,
        database: str | None = None,
        *,
        password_file: str | None = None,
        namespace: str = "",
        write_batch: int = WRITE_BATCH,
        tx_timeout: float = DEFAULT_TX_TIMEOUT,
    ) -> None:
        if not tx_timeout > 0:
            raise ValueError(f"tx_timeout={tx_timeout!r}: expected a positive number of seconds")
        self.tx_timeout = float(tx_timeout)
        if namespace and not _NAMESPACE.fullmatch(namespace):
            raise ValueError(f"namespace={namespace!r}: expected letters, digits and _ (max 48)")
        if write_batch < 1:
            raise ValueError(f"write_batch={write_batch!r}: expected a positive int")
        if password is not None and password_file is not None:
            raise ValueError("Neo4jGraphStore: give password or password_file, not both")
        self.uri = uri or DEFAULT_URI
        self._password = password  # kept for pickling only when given directly
        self._password_file = None if password_file is None else str(password_file)
        if self._password_file is not None:
            password = read_secret_file(self._password_file)  # SecretFileError naming the file
        if password is not None and user is None:
            user = DEFAULT_USER
        self.user = user
        self.database = database
        self.namespace = namespace
        self.write_batch = write_batch
        suffix = f"_{namespace}" if namespace else ""
        self.label = f"Account{suffix}"
        self.rel_type = f"TX{suffix}"
        self._names = (f"account_id{suffix}".lower(), f"tx_event_id{suffix}".lower())
        auth = (user, password or "") if user is not None else None
        self._driver = neo4j.GraphDatabase.driver(self.uri, auth=auth)
        self._closed = False
        try:
            try:
                self._driver.verify_connectivity()
            except neo4j.exceptions.AuthError as e:
                raise self._auth_error(e, given=bool(password)) from e
            self._ensure_schema()
        except BaseException:
            self._driver.close()
            raise
        self._read_queries: dict[tuple[str, bool], str] = {}
        # Accounts are MERGEd; a transaction is created only when no TX has its event id (an
        # index seek on the uniqueness constraint: MERGE on the relationship pattern would scan
        # every edge between the two accounts, quadratic on hubs). Two writers racing on the
        # same event: the constraint rejects the second, whose batch is replayed and skips it.
        self._merge = (
            "UNWIND $rows AS r "
            f"MERGE (a:{self.label} {{id: r.src}}) "
            f"MERGE (b:{self.label} {{id: r.dst}}) "
            "WITH a, b, r "
            f"WHERE NOT EXISTS {{ MATCH ()-[x:{self.rel_type} {{event_id: r.event_id}}]->() }} "
            f"CREATE (a)-[:{self.rel_type} {{event_id: r.event_id, ts: r.ts, "
            "paid_units: r.paid_units, paid_currency: r.paid_currency, "
            "recv_units: r.recv_units, recv_currency: r.recv_currency, "
            "payment_format: r.payment_format, is_laundering: r.is_laundering}]->(b)"
        )

    # -- plumbing ------------------------------------------------------------------------------

    def _auth_error(self, e: neo4j.exceptions.AuthError, *, given: bool) -> GraphAuthError:
        said = f" (server: {e.message})" if getattr(e, "message", None) else ""
        if not given:
            return GraphAuthError(
                f"Neo4j at {self.uri} requires authentication and no password was given: "
                f"set {PASSWORD_SETTINGS}{said}")
        source = (f"from the file {self._password_file}" if self._password_file is not None
                  else "given directly (AUDITFLOW_NEO4J_PASSWORD)")
        return GraphAuthError(
            f"Neo4j at {self.uri} refused user {self.user!r} with the password {source}: wrong user "
            f"or password (settings: AUDITFLOW_NEO4J_USER, {PASSWORD_SETTINGS}){said}")

    def _run(self, query: str | neo4j.Query, read: bool = False, **params: Any) -> Any:
        if self._closed:
            raise ValueError("store is closed")
        return self._driver.execute_query(
            query,
            params,
            routing_=neo4j.RoutingControl.READ if read else neo4j.RoutingControl.WRITE,
            database_=self.database,
        )

    def _ensure_schema(self) -> None:
        node_c, rel_c = self._names
        self._driver.execute_query(
            f"CREATE CONSTRAINT {node_c} IF NOT EXISTS FOR (a:{self.label}) REQUIRE a.id IS UNIQUE",
            database_=self.database,
        )
        try:
            self._driver.execute_query(
                f"CREATE CONSTRAINT {rel_c} IF NOT EXISTS "
                f"FOR ()-[t:{self.rel_type}]-() REQUIRE t.event_id IS UNIQUE",
                database_=self.database,
            )
        except ClientError:  # servers before 5.7: an index keeps MERGE on event_id fast
            self._driver.execute_query(
                f"CREATE INDEX {rel_c} IF NOT EXISTS FOR ()-[t:{self.rel_type}]-() ON (t.event_id)",
                database_=self.database,
            )
        # Wait for this namespace's own indexes only (a constraint's index shares its name): on a
        # shared server another namespace's index being built or dropped must not fail this one.
        for name in (node_c, rel_c):
            self._driver.execute_query("CALL db.awaitIndex($name, 300)", {"name": name}, database_=self.database)

    # -- GraphStore ----------------------------------------------------------------------------

    def add_transactions(self, events: Iterable[TransactionEvent]) -> int:
        rows = [_row(ev) for ev in unique_events(events)]
        created = 0
        for i in range(0, len(rows), self.write_batch):
            chunk = rows[i : i + self.write_batch]
            try:
                summary = self._run(self._merge, rows=chunk).summary
            except ConstraintError:
                # a concurrent writer created some of the same rows first: replay, MERGE matches
                summary = self._run(self._merge, rows=chunk).summary
            created += summary.counters.relationships_created
        return created

    def node_count(self) -> int:
        return int(self._run(f"MATCH (a:{self.label}) RETURN count(a) AS n", read=True).records[0]["n"])

    def edge_count(self) -> int:
        q = f"MATCH ()-[t:{self.rel_type}]->() RETURN count(t) AS n"
        return int(self._run(q, read=True).records[0]["n"])

    def has_node(self, node_id: str) -> bool:
        q = f"OPTIONAL MATCH (a:{self.label} {{id: $id}}) RETURN a IS NOT NULL AS found"
        return bool(self._run(q, read=True, id=node_id).records[0]["found"])

    def _read_query(self, direction: str, has_limit: bool) -> str:
        key = (direction, has_limit)
        q = self._read_queries.get(key)
        if q is None:
            arrow = {"out": "-[t:{r}]->", "in": "<-[t:{r}]-", "both": "-[t:{r}]-"}[direction]
            # one row per frontier account ([id, lo, hi]: lists pack faster than maps) with its
            # own window; the per-account limit is applied on the server, so a hub never ships
            # more than `limit` edges
            # each account is found by a seek on its id: left to itself the planner may scan the
            # whole id index once per frontier row and filter (seen: 1.5 million index entries
            # read for a frontier of 300 on a 5,000-account graph, 5x slower; on a freshly
            # written graph even with the id in a variable; a plain USING INDEX hint is met by
            # such a scan too), so the id is a variable and USING INDEX SEEK forces the seek.
            # The whole frontier comes back as one record, a list of [account, its edges] for the
            # accounts that have any: the driver handles each record on its own (~10 us), which
            # cost more than the server's work on frontiers of a few hundred small accounts.
            q = (
                "UNWIND $frontier AS f WITH f[0] AS fid, f[1] AS lo, f[2] AS hi "
                f"MATCH (a:{self.label} {{id: fid}}){arrow.format(r=self.rel_type)}() "
                f"USING INDEX SEEK a:{self.label}(id) "
                "WHERE t.ts >= lo AND t.ts <= hi "
                "WITH DISTINCT fid, t ORDER BY t.ts, t.event_id "
                + (
                    "WITH fid, collect(t)[..$limit] AS ts "
                    if has_limit
                    else "WITH fid, collect(t) AS ts "
                )
                + f"RETURN collect([fid, [t IN ts | {_EDGE_LISTS[direction]}]]) AS found"
            )
            self._read_queries[key] = q
        return q

    def _expand(
        self,
        requests: Sequence[Expansion],
        direction: Direction,
        limit: int | None,
        timeout: float | None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        return self._expand_micros(
            [(n, None if lo is None else to_micros(lo), None if hi is None else to_micros(hi))
             for n, lo, hi in requests],
            direction, limit, timeout,
        )

    def _expand_micros(
        self,
        requests: Sequence[MicrosExpansion],
        direction: str,
        limit: int | None,
        timeout: float | None,
    ) -> Mapping[str, tuple[GraphEdge, ...]]:
        # edge times are whole minutes: ts >= lo exactly when ts >= ceil(lo), ts <= hi when
        # ts <= floor(hi) (in minutes)
        rows = [
            [node,
             -_INT64 - 1 if lo is None else -(-lo // MICROS_PER_MINUTE),
             _INT64 if hi is None else hi // MICROS_PER_MINUTE]
            for node, lo, hi in requests
        ]
        found: dict[str, list[GraphEdge]] = {r[0]: [] for r in rows}
        text = self._read_query(direction, limit is not None)
        params: dict[str, Any] = {} if limit is None else {"limit": limit}
        deadline = None if timeout is None else time.monotonic() + timeout
        left = self.tx_timeout
        if self._closed:
            raise ValueError("store is closed")
        # one read session per hop, auto-commit queries: a third less latency per hop than a
        # managed transaction per query (measured: ~1.9 ms against ~2.9 ms a frontier query)
        with self._driver.session(database=self.database, default_access_mode=neo4j.READ_ACCESS) as session:
            for i in range(0, len(rows), FRONTIER_BATCH):
                if deadline is not None:
                    left = min(self.tx_timeout, deadline - time.monotonic())
                    if left <= 0:
                        raise GraphQueryTimeout(f"Neo4j frontier query: no time left of {timeout} s")
                query = neo4j.Query(text, timeout=left)  # the server aborts the transaction after it
                try:
                    record = session.run(query, frontier=rows[i : i + FRONTIER_BATCH], **params).single(strict=True)
                except ClientError as e:
                    if "TransactionTimedOut" in (e.code or ""):
                        raise GraphQueryTimeout(f"Neo4j frontier query ran past {left:.3f} s ({e.code})") from e
                    raise
                for fid, es in record[0]:  # each edge a list in _EDGE_LISTS order
                    found[fid].extend(
                        GraphEdge(eid, src, dst, Money(pc, pu), Money(rc, ru), _EPOCH + ts * _MINUTE, fmt, bool(ml))
                        for eid, src, dst, ts, pu, pc, ru, rc, fmt, ml in es
                    )
        # the server sorted by (ts, event_id); re-sorting here makes the order independent of how
        # the server collates strings (the cut at `limit` already agrees for ASCII event ids)
        return {n: tuple(sorted(es, key=_CAP_KEY)) for n, es in found.items()}

    def drop(self) -> None:
        """Delete this namespace's accounts and transactions, and its constraints."""
        while True:
            q = f"MATCH (a:{self.label}) WITH a LIMIT 5000 DETACH DELETE a RETURN count(*) AS n"
            if not self._run(q).records[0]["n"]:
                break
        for name in self._names:
            self._run(f"DROP CONSTRAINT {name} IF EXISTS")
            self._run(f"DROP INDEX {name} IF EXISTS")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._driver.close()

    # -- pickle: reconnect --------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "user": self.user,
            "password": self._password,
            "password_file": self._password_file,
            "database": self.database,
            "namespace": self.namespace,
            "write_batch": self.write_batch,
            "tx_timeout": self.tx_timeout,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["uri"],
            state["user"],
            state["password"],
            state["database"],
            password_file=state.get("password_file"),
            namespace=state["namespace"],
            write_batch=state["write_batch"],
            tx_timeout=state.get("tx_timeout", DEFAULT_TX_TIMEOUT),
        )

    def __repr__(self) -> str:
        ns = f", namespace={self.namespace!r}" if self.namespace else ""
        return f"Neo4jGraphStore({self.uri!r}{ns})"
