"""``auditflow case ...``: cases from the command line (rendering only; the work is in
:mod:`auditflow_app.case_flow`). The acting user is the one whose token ``AUDITFLOW_TOKEN`` holds;
every refusal is one line and exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from auditflow.errors import ConfigError
from auditflow_app import case_flow
from auditflow_app.case_views import case_document, case_row, entry_text
from auditflow_app.settings import Settings

case_app = typer.Typer(no_args_is_help=True, help="Cases: from alert to filed SAR (AUDITFLOW_TOKEN says who acts).")
console = Console(soft_wrap=True)
T = TypeVar("T")

Expect = Annotated[
    Optional[int],
    typer.Option("--expect-version", help="refuse (409) unless the case is still at this version (as you last saw it)"),
]


def _settings() -> Settings:
    from auditflow_app.cli import _settings as settings

    return settings()


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=code)


@contextmanager
def _refusals() -> Iterator[None]:
    """Every refusal, bad setting or unreadable file as one line, exit 2."""
    try:
        yield
    except case_flow.CaseError as e:
        raise _fail(f"{e} ({type(e).__name__.lower()})") from None
    except (ConfigError, ValueError, OSError) as e:  # users file, signing key, SAR input and schema: ValueErrors
        raise _fail(str(e)) from None


def _user(settings: Settings):
    token = settings.token.get_secret_value() if settings.token is not None else None
    return case_flow.authenticate(settings, token)


def _with_store(fn: Callable[[Any, Any, Settings], T], *, development_key: bool = False) -> T:
    settings = _settings()
    with _refusals():
        user = _user(settings)
        if user.role == "admin":
            raise case_flow.Forbidden("admins manage users, they work no case (and read none)")
        with case_flow.open_case_store(settings, development_key=development_key) as store:
            return fn(store, user, settings)


def _done(receipt) -> None:
    e, c = receipt.entry, receipt.case
    console.print(
        f"{c.case_id}: {e.kind} by {e.actor}; now {c.state} (version {c.version}); "
        f"log entry {receipt.index}, signed tree head {receipt.tree_head.tree_size} "
        f"{receipt.tree_head.root_hash[:16]}...",
        highlight=False,
    )


def _action(action: str, case_id: str, payload: dict, expect: int | None, dev_key: bool = False) -> None:
    _done(
        _with_store(
            lambda store, user, s: case_flow.act(
                store, user, case_id, action, payload, settings=s, expected_version=expect
            ),
            development_key=dev_key,
        )
    )


DevKey = Annotated[
    bool, typer.Option("--allow-dev-key", help="sign with the public development key (the demo's cases only)")
]


@case_app.command("open")
def open_(
    alerts: Annotated[
        Optional[Path], typer.Argument(help="a run's alerts.jsonl [default: OUT_DIR/alerts.jsonl]")
    ] = None,
    allow_dev_key: DevKey = False,
) -> None:
    """Open a case for each alert of a run, or add it to its subject's open case (the pipeline's
    own step: no user acts)."""
    settings = _settings()
    path = alerts or settings.out_dir / "alerts.jsonl"
    if not path.is_file():
        raise _fail(f"alerts file {path} does not exist (run `auditflow run` or `auditflow demo` first)")
    with _refusals():
        got = case_flow.open_cases(settings, path, development_key=allow_dev_key)
    console.print(
        f"{got.alerts} alerts: {got.opened} opened a case, {got.joined} joined their subject's open case, "
        f"{got.already} were in a case already",
        highlight=False,
    )


@case_app.command("list")
def list_(
    state: Annotated[Optional[list[str]], typer.Option(help="only these states (repeat)")] = None,
    priority: Annotated[
        Optional[list[str]], typer.Option(help="only these tiers: critical, normal, background")
    ] = None,
    assignee: Annotated[Optional[str], typer.Option(help="only this user's cases")] = None,
    min_age_days: Annotated[Optional[int], typer.Option(help="only cases open at least this many days")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines, one case each")] = False,
) -> None:
    """The case queue."""
    from cases.store import age_days
    from cases.workflow import STATES, TIERS, Queue

    for s in state or ():
        if s not in STATES:
            raise _fail(f"--state {s!r}: expected one of {', '.join(STATES)}")
    for p in priority or ():
        if p not in TIERS:
            raise _fail(f"--priority {p!r}: expected one of {', '.join(TIERS)}")
    queue = Queue(frozenset(state or ()), frozenset(priority or ()), assignee, min_age_days)
    now = case_flow.now_utc()
    found = _with_store(lambda store, user, s: store.cases(queue, now=now))
    if as_json:
        for c in found:
            typer.echo(json.dumps(case_row(c, age_days(c, now)), sort_keys=True))
        return
    table = Table("case", "state", "priority", "subject", "alerts", "assignee", "age (days)", "SAR due",
                  title=f"{len(found)} case(s)", title_justify="left")  # fmt: skip
    for c in found:
        r = case_row(c, age_days(c, now))
        table.add_row(r["case_id"], r["state"], r["priority"], r["subject"], str(r["alerts"]), r["assignee"] or "",
                      str(r["age_days"]), r["due"])  # fmt: skip
    console.print(table)


@case_app.command("show")
def show(case_id: str, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """A case: its subject, alerts, proposal, and its timeline (every entry, who, when)."""
    from cases.workflow import Actor

    def get(store, user, s):
        return store.case(case_id), user

    case, user = _with_store(get)
    if as_json:
        typer.echo(json.dumps(case_document(case, Actor(user.name, user.role)), indent=2, sort_keys=True))
        return
    console.print(
        f"[bold]{case.case_id}[/bold]  {case.state}  priority {case.priority}  subject "
        f"{case.subject.get('bank', '')}/{case.subject['account']}  assignee {case.assignee or '-'}  "
        f"SAR due {case.due}  version {case.version}",
        highlight=False,
    )
    alerts = Table(
        "alert", "time", "amount (USD)", "tier", "typologies", "report", title="alerts", title_justify="left"
    )
    for a in case.alerts:
        usd = f"{Decimal(int(a.get('usd_cents', 0))).scaleb(-2):,.2f}"
        typologies = ", ".join(a.get("typologies") or ()) or "-"
        alerts.add_row(a["alert_id"], a.get("time", ""), usd, a.get("tier", ""), typologies, a.get("report") or "-")
    console.print(alerts)
    timeline = Table("#", "at", "who", "what", title="timeline", title_justify="left")
    for e in case.entries:
        timeline.add_row(str(e.seq), e.at, f"{e.actor} ({e.role})", entry_text(e))
    console.print(timeline)
    console.print(
        f"you ({user.name}, {user.role}) may: {', '.join(case.allowed(Actor(user.name, user.role))) or 'nothing'}"
    )


@case_app.command("assign")
def assign(
    case_id: str,
    to: Annotated[Optional[str], typer.Option("--to", help="the assignee [default: you]")] = None,
    expect: Expect = None,
) -> None:
    """Assign a case (an analyst takes it; an approver gives it to anyone who works cases)."""
    _action("assign", case_id, {"assignee": to} if to else {}, expect)


@case_app.command("start")
def start(case_id: str, expect: Expect = None) -> None:
    """Start investigating an assigned case (its assignee)."""
    _action("start", case_id, {}, expect)


@case_app.command("note")
def note(case_id: str, text: str, expect: Expect = None) -> None:
    """Add a note to a case."""
    _action("note", case_id, {"text": text}, expect)


@case_app.command("attach")
def attach_(case_id: str, file: Annotated[Path, typer.Argument(exists=True, dir_okay=False)]) -> None:
    """Keep a file with a case (stored by content; the log names it and its SHA-256)."""
    data = file.read_bytes()
    _done(_with_store(lambda store, user, s: case_flow.attach(store, user, case_id, file.name, data, settings=s)))


@case_app.command("escalate")
def escalate(case_id: str, reason: Annotated[str, typer.Option(help="why")], expect: Expect = None) -> None:
    """Escalate a case under investigation (its assignee)."""
    _action("escalate", case_id, {"reason": reason}, expect)


@case_app.command("close")
def close(
    case_id: str, reason: Annotated[str, typer.Option(help="why no SAR is filed")], expect: Expect = None
) -> None:
    """Close a case with no action (its assignee), saying why."""
    _action("close", case_id, {"reason": reason}, expect)


@case_app.command("propose")
def propose(
    case_id: str,
    narrative: Annotated[Optional[str], typer.Option(help="the SAR's narrative")] = None,
    narrative_file: Annotated[Optional[Path], typer.Option(exists=True, dir_okay=False, help="... from a file")] = None,
    category: Annotated[
        Optional[list[str]],
        typer.Option(help="FinCEN activity category TYPE/SUBTYPE, e.g. 8/824 (repeat) [default: the evidence's]"),
    ] = None,
    alert: Annotated[
        Optional[list[str]], typer.Option(help="the alerts the SAR covers (repeat) [default: all]")
    ] = None,
    expect: Expect = None,
) -> None:
    """Propose a SAR (the case's assignee); another approver approves it."""
    if (narrative is None) == (narrative_file is None):
        raise _fail("give the narrative with --narrative TEXT or --narrative-file FILE (one of them)")
    text = narrative if narrative is not None else narrative_file.read_text(encoding="utf-8")  # type: ignore[union-attr]
    cats = []
    for c in category or ():
        t, _, s = c.partition("/")
        if not (t.isdigit() and s.isdigit()):
            raise _fail(f"--category {c!r}: expected TYPE/SUBTYPE, e.g. 8/824")
        cats.append([int(t), int(s)])
    payload: dict[str, Any] = {"narrative": text, "categories": cats}
    if alert:
        payload["alert_ids"] = alert
    _action("propose", case_id, payload, expect)


@case_app.command("approve")
def approve(case_id: str, expect: Expect = None) -> None:
    """Approve a proposed SAR (an approver who did not propose it)."""
    _action("approve", case_id, {}, expect)


@case_app.command("reject")
def reject(
    case_id: str, reason: Annotated[str, typer.Option(help="what the proposal lacks")], expect: Expect = None
) -> None:
    """Send a proposed SAR back to investigation (an approver who did not propose it)."""
    _action("reject", case_id, {"reason": reason}, expect)


@case_app.command("reopen")
def reopen(case_id: str, reason: Annotated[str, typer.Option(help="why")], expect: Expect = None) -> None:
    """Reopen a closed or filed case (an approver)."""
    _action("reopen", case_id, {"reason": reason}, expect)


@case_app.command("export-sar")
def export_sar(
    case_id: str,
    out: Annotated[Optional[Path], typer.Option(help="where to write it [default: CASE.sar.xml here]")] = None,
) -> None:
    """Write the case's FinCEN SAR batch XML (validated against FinCEN's schema); exporting an
    approved SAR files it."""
    got = _with_store(lambda store, user, s: case_flow.export_sar(store, user, case_id, settings=s))
    path = out or Path(f"{case_id}.sar.xml")
    path.write_bytes(got.xml)
    what = "filed" if got.receipt else "exported again"
    console.print(f"{case_id}: SAR {what}: wrote {path} ({len(got.xml):,} bytes, sha256 {got.sha256})", highlight=False)
    if got.receipt:
        _done(got.receipt)


@case_app.command("user-add")
def user_add(
    name: str,
    role: Annotated[str, typer.Option(help="analyst, approver, auditor or admin")],
) -> None:
    """Add a user (an admin; the first user of a new file must be an admin) and print their token
    once: the users file keeps only its hash."""
    from cases.workflow import ROLES

    if role not in ROLES:
        raise _fail(f"--role {role!r}: expected one of {', '.join(ROLES)}")
    settings = _settings()
    with _refusals():
        token = settings.token.get_secret_value() if settings.token is not None else None
        acting = (
            case_flow.users(settings).authenticate(token)
            if settings.users_file and settings.users_file.exists()
            else None
        )
        new = case_flow.user_add(settings, acting, name, role)
    console.print(f"added {name} ({role}); their token (shown once, keep it secret):", highlight=False)
    typer.echo(new)


@case_app.command("verify")
def verify(
    tree_head: Annotated[
        Optional[Path],
        typer.Option("--tree-head", exists=True, dir_okay=False, help="a kept tree head: the log must extend it"),
    ] = None,
    allow_dev_key: Annotated[bool, typer.Option("--allow-dev-key", help="also trust the development key")] = False,
) -> None:
    """Check the cases log: every entry unchanged since it was signed, none removed or reordered,
    every case's history allowed by the rules (and consistent with --tree-head). Exit 1 on any
    problem, the first cause first."""
    settings = _settings()
    with _refusals():
        got = case_flow.verify_cases(settings, tree_head_file=tree_head, allow_dev_key=allow_dev_key)
    if got.ok:
        console.print(f"verified: cases log of {got.entries} entries, {got.cases} cases", highlight=False)
        return
    for p in got.problems:
        console.print(f"[red]FAILED[/red] {p}", highlight=False)
    raise typer.Exit(code=1)


@case_app.command("tree-head")
def tree_head(out: Annotated[Optional[Path], typer.Option(help="write it here (keep it elsewhere)")] = None) -> None:
    """The cases log's newest signed tree head, to keep and check later with verify --tree-head."""
    from cases.store import CaseStore

    settings = _settings()
    with _refusals():
        store = CaseStore(settings.effective_cases_url)
        try:
            head = store.tree_head()
        finally:
            store.close()
    if head is None:
        raise _fail("the cases log is empty")
    if out is None:
        typer.echo(head.to_bytes().decode("ascii"), nl=False)
    else:
        head.write(out)
        console.print(f"wrote {out}: tree size {head.tree_size}, root {head.root_hash}", highlight=False)
