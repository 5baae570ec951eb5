"""The cases store: one append-only log of case entries in SQLite or PostgreSQL (SQLAlchemy, one
code path), with the audit log's proofs.

The log
    Each entry is a row of ``case_log`` whose ``line`` is exactly an audit log line
    (:func:`reports.audit_log.entry_line`: the RFC 8785 canonical JSON of ``{index, kind,
    payload}``, kind ``case.<kind>``, payload :meth:`cases.workflow.CaseEntry.to_dict`), so the
    lines in ``idx`` order are the leaves of an RFC 6962 Merkle tree like the run's audit log.
    After every entry the store signs the tree head of the new size (``case_tree_heads``): each
    action's receipt. Rows are only inserted, never updated or deleted; a case is the fold of its
    entries (:func:`cases.workflow.fold`), re-checked against the rules on every read.

Appends
    One at a time across every process and machine: an append first increments the single row of
    ``case_log_size`` (PostgreSQL holds its row lock, SQLite its write lock, until the commit), then
    folds the case, decides the action, inserts the entry and its signed tree head, in one
    transaction. Two analysts acting on the same version of a case: the second finds the case moved
    on (``expected_version``) and gets :class:`~cases.workflow.Conflict` (HTTP 409); nothing of the
    first is lost. The store keeps the tree's hashes in memory and reads only the entries other
    processes appended since.

Case ids are ``case-`` and the log index of the case's first entry: the same actions in the same
order give the same ids and the same log bytes.

Migrations are Alembic revisions under ``cases/migrations/versions``, applied when a store opens.
"""

from __future__ import annotations

import fcntl
import hashlib
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from cases.workflow import (
    SYSTEM,
    Actor,
    Case,
    CaseEntry,
    CaseError,
    Conflict,
    NotFound,
    Queue,
    apply,
    decide,
    fold,
)
from reports.audit_log import TreeHead, entry_line, parse_line
from reports.merkle import MerkleTree, leaf_hash
from reports.signing import Keyring, Signer

MIGRATIONS = Path(__file__).parent / "migrations"
KIND_PREFIX = "case."

_meta = sa.MetaData()
case_log = sa.Table(
    "case_log",
    _meta,
    sa.Column("idx", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("case_id", sa.String(64), nullable=False),
    sa.Column("case_seq", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(40), nullable=False),
    sa.Column("subject", sa.String(200)),
    sa.Column("alert_id", sa.String(200)),
    sa.Column("line", sa.LargeBinary, nullable=False),
)
case_tree_heads = sa.Table(
    "case_tree_heads",
    _meta,
    sa.Column("tree_size", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("root_hash", sa.String(64), nullable=False),
    sa.Column("key_id", sa.String(200), nullable=False),
    sa.Column("signature", sa.String(200), nullable=False),
)
case_log_size = sa.Table(
    "case_log_size",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False),
)
case_attachments = sa.Table(
    "case_attachments",
    _meta,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("data", sa.LargeBinary, nullable=False),
)


def utc_text(at: datetime) -> str:
    """``at`` as the log writes times: ISO 8601 UTC to the millisecond, ``Z``."""
    if at.tzinfo is None:
        raise ValueError(f"a case entry's time must carry its time zone, got {at.isoformat()}")
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def subject_key(subject: Mapping[str, str]) -> str:
    return f"{subject.get('bank', '')}/{subject['account']}"


def create_engine(url: str, *, pool_size: int = 10) -> Engine:
    """An engine for ``url`` (``sqlite:///PATH`` or ``postgresql+psycopg://...``). SQLite waits up
    to 30 s for another writer and runs in WAL mode (readers never wait for the writer)."""
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cur = dbapi_connection.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.close()

        return engine
    return sa.create_engine(url, pool_size=pool_size, max_overflow=2 * pool_size, pool_pre_ping=True)


_MIGRATING = threading.Lock()  # Alembic's context is module-global: one upgrade at a time per process


def migrate(engine: Engine) -> None:
    """Bring the database to the newest revision (Alembic, in one transaction); a database already
    there is only read."""
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    with engine.connect() as conn:
        if MigrationContext.configure(conn).get_current_revision() == head:
            return
    with _MIGRATING, _file_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # two processes opening a new database at once
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(7310291)"))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")  # reads the revision again, under the lock: a second opener finds head


@contextmanager
def _file_lock(engine: Engine) -> Iterator[None]:
    """SQLite's counterpart of PostgreSQL's advisory lock: an exclusive lock on ``<db>.migrate.lock``
    while a new database is migrated, so two processes opening it at once migrate it once."""
    db = engine.url.database
    if engine.dialect.name != "sqlite" or not db or db == ":memory:":
        yield
        return
    with open(f"{db}.migrate.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass(frozen=True, slots=True)
class Receipt:
    """What an action wrote: the entry, its log index, the case after it and the signed tree head
    of the log with it."""

    entry: CaseEntry
    index: int
    case: Case
    tree_head: TreeHead


class CaseStore:
    """Cases in the database at ``url``; ``signer`` signs each new tree head (None: read only)."""

    def __init__(self, url: str, signer: Signer | None = None, *, pool_size: int = 10) -> None:
        self.url = url
        self.engine = create_engine(url, pool_size=pool_size)
        self.signer = signer
        migrate(self.engine)
        self._lock = threading.Lock()
        self._tree: MerkleTree | None = None
        self._read_lock = threading.Lock()
        self._folded: dict[str, Case] = {}  # every case as of the first _folded_upto entries
        self._folded_upto = 0

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> CaseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading

    @staticmethod
    def _parsed(rows: Iterable[tuple[int, Any]]) -> Iterator[CaseEntry]:
        for idx, line in rows:
            entry, why = parse_line(bytes(line), idx)
            if entry is None:
                raise CaseError(f"cases log entry {idx} is damaged ({why}): run auditflow verify")
            yield CaseEntry.from_log(entry.kind, entry.payload)

    def _case(self, conn: Connection, case_id: str) -> Case:
        """One case, read in its own order (the (case id, seq) index, never a scan of the log)."""
        q = (
            sa.select(case_log.c.idx, case_log.c.line)
            .where(case_log.c.case_id == case_id)
            .order_by(case_log.c.case_seq)
        )
        entries = list(self._parsed(conn.execute(q)))
        if not entries:
            raise NotFound(f"no such case: {case_id}")
        return fold(entries)

    def case(self, case_id: str) -> Case:
        with self.engine.connect() as conn:
            return self._case(conn, case_id)

    def _caught_up(self) -> dict[str, Case]:
        """Every case, folded. The log only grows, so the folds are kept and only the entries
        appended since (by any process) are read and applied; appends commit in index order (they
        hold the append lock to their commit), so what is read is a gap-free prefix."""
        with self._read_lock:
            with self.engine.connect() as conn:
                q = sa.select(case_log.c.idx, case_log.c.line).where(case_log.c.idx >= self._folded_upto)
                rows = conn.execute(q.order_by(case_log.c.idx)).all()
            for (idx, _), entry in zip(rows, self._parsed(rows), strict=True):
                if idx != self._folded_upto:
                    raise CaseError(f"cases log entry {self._folded_upto} is missing: run auditflow verify")
                self._folded[entry.case_id] = apply(self._folded.get(entry.case_id), entry)
                self._folded_upto += 1
            return dict(self._folded)

    def cases(self, queue: Queue | None = None, *, now: datetime | None = None) -> list[Case]:
        """Every case (in the order they were opened), or those ``queue`` admits (age counted to
        ``now``)."""
        out = list(self._caught_up().values())
        if queue is None:
            return out
        if now is None:
            raise ValueError("a queue with an age filter needs now")
        return [c for c in out if queue.admits(c, age_days(c, now))]

    def size(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(case_log_size.c.size)).scalar_one())

    def log_lines(self) -> list[tuple[int, bytes]]:
        """Every row's index and line, in index order (what :func:`verify_cases_log` reads)."""
        with self.engine.connect() as conn:
            q = sa.select(case_log.c.idx, case_log.c.line).order_by(case_log.c.idx)
            return [(i, bytes(line)) for i, line in conn.execute(q)]

    def tree_heads(self) -> list[TreeHead]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(case_tree_heads).order_by(case_tree_heads.c.tree_size))
            return [TreeHead(r.tree_size, r.root_hash, r.key_id, r.signature) for r in rows]

    def tree_head(self) -> TreeHead | None:
        """The newest signed tree head (None for an empty log)."""
        with self.engine.connect() as conn:
            r = conn.execute(sa.select(case_tree_heads).order_by(case_tree_heads.c.tree_size.desc()).limit(1)).first()
        return None if r is None else TreeHead(r.tree_size, r.root_hash, r.key_id, r.signature)

    def attachment(self, sha256: str) -> bytes:
        with self.engine.connect() as conn:
            data = conn.execute(sa.select(case_attachments.c.data).where(case_attachments.c.sha256 == sha256)).scalar()
        if data is None:
            raise NotFound(f"no such attachment: {sha256}")
        return bytes(data)

    # ------------------------------------------------------------------ writing

    @contextmanager
    def _appending(self) -> Iterator[tuple[Connection, int]]:
        """A transaction holding the append lock, and the index the next entry takes."""
        if self.signer is None:
            raise CaseError(
                "no signing key: every case action is a signed entry of the cases log (configure a signing key)"
            )
        with self._lock:
            size = 0
            try:
                with self.engine.begin() as conn:
                    size = conn.execute(
                        sa.update(case_log_size)
                        .where(case_log_size.c.id == 1)
                        .values(size=case_log_size.c.size + 1)
                        .returning(case_log_size.c.size)
                    ).scalar_one()
                    yield conn, int(size) - 1
            except BaseException:
                if self._tree is not None and self._tree.size > size - 1:
                    self._tree = None  # it holds a leaf that was not committed
                raise

    def _sync_tree(self, conn: Connection, upto: int) -> MerkleTree:
        tree = self._tree if self._tree is not None else MerkleTree()
        if tree.size < upto:
            q = sa.select(case_log.c.idx, case_log.c.line).where(case_log.c.idx >= tree.size, case_log.c.idx < upto)
            for idx, line in conn.execute(q.order_by(case_log.c.idx)):
                if idx != tree.size:
                    raise CaseError(f"cases log entry {tree.size} is missing: run auditflow verify")
                tree.append(leaf_hash(bytes(line)))
        self._tree = tree
        return tree

    def _write(self, conn: Connection, index: int, entry: CaseEntry, case: Case | None) -> Receipt:
        after = apply(case, entry)  # the rules once more, on the entry exactly as stored
        line = entry_line(index, KIND_PREFIX + entry.kind, entry.to_dict())
        alert = entry.payload.get("alert") if entry.kind in ("opened", "alert_joined") else None
        conn.execute(
            case_log.insert().values(
                idx=index,
                case_id=entry.case_id,
                case_seq=entry.seq,
                kind=entry.kind,
                subject=subject_key(entry.payload["subject"]) if entry.kind == "opened" else None,
                alert_id=alert["alert_id"] if alert else None,
                line=line,
            )
        )
        tree = self._sync_tree(conn, index)
        tree.append(leaf_hash(line))
        assert self.signer is not None
        head = TreeHead(tree.size, tree.root().hex()).signed(self.signer)
        conn.execute(
            case_tree_heads.insert().values(
                tree_size=head.tree_size, root_hash=head.root_hash, key_id=head.key_id, signature=head.signature
            )
        )
        return Receipt(entry, index, after, head)

    def act(
        self,
        case_id: str,
        actor: Actor,
        action: str,
        payload: Mapping[str, Any],
        at: datetime,
        *,
        expected_version: int | None = None,
    ) -> Receipt:
        """``actor`` takes ``action`` on the case (:class:`~cases.workflow.CaseError` when the
        rules refuse it; :class:`~cases.workflow.Conflict` when ``expected_version`` is given and
        the case has moved on from it)."""
        with self._appending() as (conn, index):
            case = self._case(conn, case_id)
            if expected_version is not None and case.version != expected_version:
                last = case.entries[-1]
                raise Conflict(
                    f"case {case_id} changed since version {expected_version}: it is at version {case.version} "
                    f"({last.kind} by {last.actor} at {last.at}); reload it and try again"
                )
            entry = decide(case, actor, action, payload)
            entry = CaseEntry(case_id, entry.seq, entry.kind, entry.actor, entry.role, utc_text(at), entry.payload)
            return self._write(conn, index, entry, case)

    def put_attachment(self, data: bytes) -> str:
        """Keep ``data`` (by its SHA-256, once); the ``attach`` action then names it."""
        sha = hashlib.sha256(data).hexdigest()
        with self.engine.begin() as conn:
            if conn.execute(sa.select(case_attachments.c.sha256).where(case_attachments.c.sha256 == sha)).first():
                return sha
            conn.execute(case_attachments.insert().values(sha256=sha, data=data))
        return sha

    def take_alert(
        self, alert: Mapping[str, Any], subject: Mapping[str, str], at: datetime, due: str
    ) -> Receipt | None:
        """The alert joins its subject's open case, or opens a case (due ``due``, YYYY-MM-DD);
        None when the alert already is in a case (taking the same alerts again adds nothing)."""
        system = Actor(SYSTEM, SYSTEM)
        with self._appending() as (conn, index):
            seen = conn.execute(sa.select(case_log.c.case_id).where(case_log.c.alert_id == alert["alert_id"])).first()
            if seen is not None:
                raise _AlreadyTaken
            ids = conn.execute(
                sa.select(case_log.c.case_id).where(case_log.c.subject == subject_key(subject)).order_by(case_log.c.idx)
            ).scalars()
            for case_id in ids:
                case = self._case(conn, case_id)
                if case.is_open:
                    entry = decide(case, system, "join", {"alert": alert})
                    entry = CaseEntry(case_id, entry.seq, entry.kind, SYSTEM, SYSTEM, utc_text(at), entry.payload)
                    return self._write(conn, index, entry, case)
            entry = decide(None, system, "open", {"subject": subject, "alert": alert, "due": due})
            entry = CaseEntry(f"case-{index:06d}", 0, entry.kind, SYSTEM, SYSTEM, utc_text(at), entry.payload)
            return self._write(conn, index, entry, None)

    def take_alerts(
        self, alerts: Iterable[tuple[Mapping[str, Any], Mapping[str, str]]], at: datetime, due: str
    ) -> list[Receipt]:
        """:meth:`take_alert` for each (alert, subject), in order; the receipts of those taken."""
        out = []
        for alert, subject in alerts:
            try:
                out.append(self.take_alert(alert, subject, at, due))
            except _AlreadyTaken:
                continue
        return out


class _AlreadyTaken(Exception):
    """The alert is in a case already (rolls the append back)."""


def age_days(case: Case, now: datetime) -> int:
    opened = datetime.fromisoformat(case.opened_at.replace("Z", "+00:00"))
    return max(0, (now - opened).days)


# ---------------------------------------------------------------------------- verify


def verify_cases_log(
    lines: Sequence[tuple[int, bytes]],
    heads: Sequence[TreeHead],
    keyring: Keyring,
    *,
    trusted_head: TreeHead | None = None,
) -> list[str]:
    """Problems of a cases log (its rows' index and line, its stored tree heads), the first cause
    first; [] when intact. Checked: the indexes run 0, 1, 2, ...; every line is canonical and
    carries its index; every stored tree head is signed by a trusted key and is the root of the
    log's first ``tree_size`` lines; the last head covers the whole log; every case folds under
    the rules; and, with ``trusted_head`` (one kept elsewhere), that the log extends it."""
    from reports.audit_log import check_tree_head

    problems: list[str] = []
    tree = MerkleTree()
    entries: dict[str, list[CaseEntry]] = {}
    for pos, (idx, raw) in enumerate(lines):
        if idx != pos:
            problems.append(
                f"cases log entry {pos} is missing (the next row has index {idx}): an entry was removed"
                if idx > pos
                else f"cases log row {pos} has index {idx}: rows were reordered"
            )
            break
        entry, why = parse_line(raw, idx)
        if entry is None:
            problems.append(f"cases log entry {idx} was rewritten: {why}")
        else:
            try:
                e = CaseEntry.from_log(entry.kind, entry.payload)
            except (KeyError, TypeError, AttributeError):
                problems.append(f"cases log entry {idx} is not a case entry (kind {entry.kind!r})")
            else:
                entries.setdefault(e.case_id, []).append(e)
        tree.append(leaf_hash(raw))
    roots = {}
    scratch = MerkleTree()
    sizes = {h.tree_size for h in heads}
    for i in range(tree.size):
        scratch.append(tree.leaf(i))
        if i + 1 in sizes:
            roots[i + 1] = scratch.root().hex()
    first_bad = None
    for h in heads:
        why = h.problem(keyring)
        if why is not None:
            problems.append(f"cases log tree head at size {h.tree_size}: {why}")
        if h.tree_size > tree.size:
            problems.append(
                f"cases log tree head at size {h.tree_size} signs more entries than the log has ({tree.size}): "
                "entries were removed"
            )
        elif roots.get(h.tree_size) != h.root_hash and first_bad is None:
            first_bad = h.tree_size
    if first_bad is not None:
        problems.insert(
            0,
            f"cases log entry {first_bad - 1} was changed after it was signed "
            f"(the signed tree head at size {first_bad} does not match the log's first {first_bad} entries)",
        )
    if tree.size and (not heads or max(h.tree_size for h in heads) < tree.size):
        signed = max((h.tree_size for h in heads), default=0)
        problems.append(
            f"cases log entries {signed} to {tree.size - 1} have no signed tree head (added outside auditflow)"
        )
    for case_id, es in entries.items():
        try:
            fold(sorted(es, key=lambda e: e.seq))
        except CaseError as e:
            problems.append(f"case {case_id}: {e}")
    if trusted_head is not None:
        problems += check_tree_head(tree, trusted_head, keyring, what="cases log against the kept tree head")
    return problems
