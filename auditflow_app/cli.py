"""The ``auditflow`` command line: the edge where settings, files and terminal output live.

Commands parse their options, build :class:`~auditflow_app.settings.Settings` (options left out fall
back to the settings, i.e. to ``AUDITFLOW_*`` variables, then to the defaults), call
:mod:`auditflow_app.flow` or a stage, and render the typed result they get back.
"""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from auditflow.errors import ConfigError, InputError
from auditflow.limits import MAX_TRACE_HOPS
from auditflow_app import case_flow, flow, views
from auditflow_app.settings import Settings

if TYPE_CHECKING:
    from ingest.kafka_io import ProducerOptions, ProduceSummary

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Streaming AML audit pipeline.")
console = Console()


def _print_version(asked: bool) -> None:
    """``auditflow --version``: the installed distribution's version and, when it says more, the
    code version reports record (``git describe`` of a checkout); then exit."""
    if not asked:
        return
    from auditflow.version import code_version, distribution_version

    version, code = distribution_version(), code_version()
    typer.echo(f"auditflow {version}" + (f" (code {code})" if code != version else ""))
    raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    # no docstring: the app's help stays "Streaming AML audit pipeline."
    pass


IMPORT_DIRNAME = "import"


def _fail(message: str, code: int = 1) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=code)


def _env_name(loc: tuple) -> str:
    name = str(loc[0]).upper() if loc else "?"
    return name if name.startswith(("AUDITFLOW_", "FLINK_")) else f"AUDITFLOW_{name}"


def _settings(**overrides: Any) -> Settings:
    """Settings from the environment, with the options the user gave (``None``: not given)."""
    try:
        s = Settings()
    except ValidationError as e:
        problems = "; ".join(f"{_env_name(err['loc'])}={err.get('input')!r}: {err['msg']}" for err in e.errors())
        raise _fail(f"invalid settings: {problems}", code=2) from None
    updates = {k: v for k, v in overrides.items() if v is not None}
    return s.model_copy(update=updates) if updates else s


def _existing_dir(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise _fail(f"{what} {path} is not a folder", code=2)
    return path


class _StageProgress:
    """Renders flow's ``progress(stage, done, total)`` calls: one line per stage."""

    def __init__(self, descriptions: dict[str, str]) -> None:
        self.descriptions = descriptions
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, TaskID] = {}
        self.current: str | None = None

    def __enter__(self) -> _StageProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._finish_current()
        self.progress.__exit__(*exc)

    def _finish_current(self) -> None:
        if self.current is not None:
            task = self.tasks[self.current]
            total = self.progress.tasks[task].total
            self.progress.update(task, total=total or 1, completed=total or 1)

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if stage not in self.tasks:
            self._finish_current()
            self.tasks[stage] = self.progress.add_task(self.descriptions.get(stage, stage), total=None)
            self.current = stage
        self.progress.update(self.tasks[stage], completed=done, total=total)


def _stream_description(kafka: bool, cluster: bool) -> str:
    if kafka:
        where = "Flink session cluster" if cluster else "PyFlink MiniCluster"
        return f"Kafka: produce, stream job on the {where}, read alerts and dead letters back"
    return "stream job (PyFlink MiniCluster): parse, features, fast score, graph writes"


def _run_with_progress(call, *, kafka: bool = False, cluster: bool = False):
    descriptions = {
        "generate": "generating history (training) and live (streamed) data",
        "train": "training the cascade on history (temporal split)",
        "stream": _stream_description(kafka, cluster),
        "deep": "deep path: SHAP, traces, PDF reports",
    }
    try:
        with _StageProgress(descriptions) as progress:
            return call(progress)
    except flow.CountMismatch as e:
        raise _fail(str(e)) from None
    except ValueError as e:  # a signing key refused or unusable, a report profile it cannot fill
        from reports.profile import ProfileError
        from reports.signing import SigningKeyError

        if isinstance(e, (SigningKeyError, ProfileError)):
            raise _fail(str(e), code=2) from None
        raise
    except RuntimeError as e:
        from reports.signing import DevelopmentKeyRefused

        if isinstance(e, DevelopmentKeyRefused):
            raise _fail(str(e), code=2) from None
        raise


def _print_run(result: flow.RunResult) -> None:
    from reports import render_run_summary

    s = result.stream
    console.print(
        f"stream job: {result.events_in} in = {result.processed} processed + {result.rejected} rejected; "
        f"{len(s.candidates)} fast-path alerts in {s.seconds:.1f}s"
    )
    if s.warmup:
        console.print(
            f"warm-up: {s.warmup:,} earlier transfers (the 7 days before the first event) went into the accounts' "
            "windows first; none of them is scored, alerted or counted above",
            soft_wrap=True,
            highlight=False,
        )
    console.print(render_run_summary(result.summary()))
    if result.late:
        console.print(
            f"late: {result.late:,} event(s) behind the watermark went to {result.paths.rejects} (stage late, with "
            f"their line) and through the late path: scored out of band, {result.late_candidates:,} to the deep path, "
            f'{result.late_alerts:,} alert(s) ("late": true in alerts.jsonl)',
            soft_wrap=True,
            highlight=False,
        )
    if s.drift_records:
        windows = len({r["window_start"] for r in s.drift_records})
        drifting = sum(r["status"] == "drift" and r["significant"] for r in s.drift_records)
        console.print(
            f"drift: {len(s.drift_records):,} scores over {windows} windows ({drifting:,} drifting after "
            f"Benjamini-Hochberg), {len(s.drift_alerts)} drift alerts -> {result.paths.drift_scores} "
            "(auditflow drift show)",
            soft_wrap=True,
            highlight=False,
        )
    console.print(f"reports: {result.paths.reports_dir}", soft_wrap=True)
    if result.intake is not None:
        console.print(
            f"cases: {result.intake.opened} opened, {result.intake.joined} alert(s) joined their subject's open case "
            "(auditflow case list)",
            soft_wrap=True,
            highlight=False,
        )
    console.print(
        f"recall of planted laundering transactions among alerts: "
        f"{result.recall:.3f} ({result.laundering_alerted}/{len(result.laundering_ids)})"
    )


def _counts_table(title: str, counts: dict[str, int], key: str, rows: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(key)
    table.add_column(rows, justify="right")
    for k, v in counts.items():
        table.add_row(k, f"{v:,}")
    return table


def _import_tables(summary) -> list[Table]:
    """An :class:`ingest.importer.ImportSummary` as rich tables."""
    span = "-"
    if summary.first_timestamp and summary.last_timestamp:
        span = f"{summary.first_timestamp:%Y-%m-%d %H:%M} .. {summary.last_timestamp:%Y-%m-%d %H:%M}"
    main = Table(title=f"import {summary.source}", title_justify="left")
    main.add_column("Measure")
    main.add_column("Value", justify="right")
    for label, value in (
        ("Rows read", summary.rows_read),
        ("Accepted", summary.accepted),
        ("Rejected", summary.rejected),
        ("Laundering (accepted)", summary.laundering),
    ):
        main.add_row(label, f"{value:,}")
    main.add_row("Limit reached", "yes" if summary.limit_reached else "no")
    main.add_row("Time range", span)
    main.add_row("Canonical copy", summary.normalized_csv)
    main.add_row("Rejects", summary.rejects_path)
    tables = [main]
    if summary.rejects_by_field:
        tables.append(_counts_table("rejects by field", summary.rejects_by_field, "Field", "Rejected rows"))
    tables.append(_counts_table("currencies", summary.currencies, "Currency", "Accepted rows"))
    tables.append(_counts_table("payment formats", summary.payment_formats, "Payment format", "Accepted rows"))
    if summary.patterns is not None:
        key = Table(title=f"answer key {summary.patterns}", title_justify="left")
        key.add_column("Measure")
        key.add_column("Value", justify="right")
        for typology, n in summary.attempts_by_typology.items():
            key.add_row(f"Attempts: {typology}", f"{n:,}")
        key.add_row("Attempts", f"{summary.attempts:,}")
        key.add_row(
            "Answer-key rows matching accepted rows", f"{summary.pattern_rows_matched:,} / {summary.pattern_rows:,}"
        )
        key.add_row("Laundering rows in no attempt", f"{summary.laundering_in_no_attempt:,}")
        tables.append(key)
    return tables


def _metrics_row(table: Table, name: str, m: dict[str, Any]) -> None:
    table.add_row(
        name,
        f"{m['precision']:.3f}",
        f"{m['recall']:.3f}",
        f"{m['f1']:.3f}",
        f"{m['flagged']:,}",
        f"{m['true_positives']:,}",
        f"{m['positives']:,}",
    )


def _training_tables(report: dict[str, Any], model_dir: Path) -> list[Table]:
    """The training report of :func:`auditflow_app.flow.train` as rich tables."""
    metrics = Table(title=f"test metrics (cascade saved in {model_dir})", title_justify="left")
    for col in ("Model", "Precision", "Recall", "F1", "Flagged", "TP", "Positives"):
        metrics.add_column(col, justify="left" if col == "Model" else "right")
    _metrics_row(metrics, "cascade", report["cascade_test"])
    _metrics_row(metrics, "stage 2 (candidates)", report["stage2_test"])
    _metrics_row(metrics, "fast path alone", report["fast_only_test"])
    if report.get("stage_choice"):
        metrics.caption = report["stage_choice"]
    splits = Table(title="temporal split", title_justify="left")
    for col in ("Split", "Events", "Laundering", "Candidates", "Recall", "Starts"):
        splits.add_column(col, justify="left" if col in ("Split", "Starts") else "right")
    stage1 = {s["split"]: s for s in report.get("stage1", [])}
    for sp in report["splits"]:
        st = stage1.get(sp["name"], {})
        splits.add_row(
            sp["name"],
            f"{sp['n_events']:,}",
            f"{sp['n_positive']:,}",
            f"{st['candidates']:,}" if st else "-",
            f"{st['recall']:.3f}" if st else "-",
            sp["start"].replace("T", " "),
        )
    model = Table(title="model", title_justify="left")
    model.add_column("Measure")
    model.add_column("Value", justify="right")
    for label, key, fmt in (
        ("Seed", "seed", "{}"),
        ("Candidate threshold", "candidate_threshold", "{:.4f}"),
        ("Alert threshold", "alert_threshold", "{:.4f}"),
        ("Validation cascade F1", "validation_cascade_f1", "{:.3f}"),
        ("Rejected input rows", "rejected", "{:,}"),
        ("Cascade digest", "cascade_digest", "{:.16}"),
        ("Training time", "total_seconds", "{:.1f} s"),
    ):
        if key in report:
            model.add_row(label, fmt.format(report[key]))
    tables = [metrics, splits, model]
    if "evaluation" in report:
        tables.insert(1, _evaluation_table(report["evaluation"]))
    return tables


def _evaluation_table(ev: dict[str, Any]) -> Table:
    """The models of :func:`auditflow_app.flow.evaluate` side by side (test split)."""
    budget = ev["budget_per_10k"]
    t = Table(
        title=f"feature families side by side (test split; lift = F1 graph / F1 baseline = {ev['lift']:.2f})"
        if ev.get("lift") is not None
        else "feature families side by side",
        title_justify="left",
    )
    for col in ("Model", "Features", "F1", "Precision", "Recall", "PR-AUC", f"Precision @ {budget:g}/10k", "Threshold"):
        t.add_column(col, justify="left" if col == "Model" else "right")
    labels = {
        "baseline": "no graph (transfer's own fields)",
        "stream": "stream features only",
        "graph": "stream + graph features",
        "gfp": "GFP reference (own fields + GFP)",
        "gfp_stream": "stream + GFP",
        "gfp_one_hop": "stream + one-hop graph + GFP",
        "gfp_graph": "stream + graph + GFP",
    }
    for name, m in ev["models"].items():
        t.add_row(
            labels.get(name, name),
            str(m["n_features"]),
            f"{m['test']['f1']:.3f}",
            f"{m['test']['precision']:.3f}",
            f"{m['test']['recall']:.3f}",
            f"{m['pr_auc']:.3f}",
            f"{m['precision_at_budget']:.3f} ({m['budget_alerts']})",
            f"{m['threshold']:.4f}",
        )
    return t


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise _fail(f"--seeds={text!r}: expected whole numbers separated by commas, e.g. 3,5,7", code=2) from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise _fail(f"--seeds={text!r}: expected distinct whole numbers separated by commas, e.g. 3,5,7", code=2)
    return seeds


def _multi_evaluation_table(summary: dict[str, Any]) -> Table:
    """Each model's figures per data set and pooled, as mean +- sd over the seeds (pooled: over
    the sets' means)."""
    t = Table(
        title=f"models per data set, mean +- sd over seeds {', '.join(map(str, summary['seeds']))} (test split)",
        title_justify="left",
    )
    for col in ("Data set", "Model", "F1", "PR-AUC", "Precision @ budget", "Alerts / 10k"):
        t.add_column(col, justify="left" if col in ("Data set", "Model") else "right")
    rows = [*summary["per_set"].items(), ("pooled", summary["pooled"])]
    for name, models in rows:
        for model, figs in models.items():
            t.add_row(
                name,
                model,
                *(f"{figs[f]['mean']:.3f} +- {figs[f]['sd']:.3f}" for f in ("f1", "pr_auc", "precision_at_budget")),
                f"{figs['alerts_per_10k']['mean']:.1f} +- {figs['alerts_per_10k']['sd']:.1f}",
            )
    return t


# ---------------------------------------------------------------------------- commands


@app.command()
def generate(
    out: Annotated[Optional[Path], typer.Option(help="output folder [default: OUT_DIR/data]")] = None,
    accounts: Annotated[int, typer.Option(min=20)] = 2000,
    days: Annotated[int, typer.Option(min=1)] = 3,
    laundering_rate: Annotated[float, typer.Option(min=0.0, max=0.5)] = 0.001,
    seed: Annotated[Optional[int], typer.Option(help="[default: AUDITFLOW_SEED, else 7]")] = None,
    name: str = "synthetic",
) -> None:
    """Write a seeded synthetic AMLworld-format set: NAME_Trans.csv and NAME_Patterns.txt."""
    settings = _settings(seed=seed)
    data = flow.generate(
        out or settings.out_dir / flow.DATA_DIRNAME,
        name=name,
        accounts=accounts,
        days=days,
        laundering_rate=laundering_rate,
        seed=settings.seed,
    )
    console.print(
        f"wrote {data.events} transactions ({data.laundering} laundering, {data.attempts} attempts) "
        f"to {data.transactions} and {data.patterns}",
        soft_wrap=True,
    )


@app.command("import")
def import_(
    transactions: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="AMLworld *_Trans.csv")],
    out: Annotated[Optional[Path], typer.Option(help="output folder [default: OUT_DIR/import]")] = None,
    patterns: Annotated[Optional[Path], typer.Option(exists=True, dir_okay=False)] = None,
    limit: Annotated[Optional[int], typer.Option(min=0, help="stop after this many data rows")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Stream a real AMLworld file: canonical copy, rejects.jsonl and a summary (read = accepted + rejected)."""
    from auditflow.errors import FieldError
    from ingest.importer import import_amlworld

    settings = _settings()
    try:
        summary = import_amlworld(
            transactions,
            out or settings.out_dir / IMPORT_DIRNAME,
            patterns=patterns,
            limit=limit,
            time_window=settings.event_time_window,
        )
    except (FieldError, ValueError) as e:
        raise _fail(str(e)) from None
    if as_json:
        typer.echo(summary.to_json())
        return
    for table in _import_tables(summary):
        console.print(table)


@app.command()
def train(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="labelled transactions CSV")],
    model_dir: Annotated[
        Optional[Path], typer.Option(help="where the cascade is saved [default: OUT_DIR/model]")
    ] = None,
    seed: Annotated[Optional[int], typer.Option(help="[default: AUDITFLOW_SEED, else 7]")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the training report as JSON")] = False,
) -> None:
    """Train the two-stage cascade (temporal 60/20/20 split) and print its test metrics."""
    settings = _settings(seed=seed)
    model_dir = model_dir or settings.out_dir / flow.MODEL_DIRNAME
    report = flow.train(data, model_dir, settings)
    if as_json:
        typer.echo(json.dumps(report, indent=2, sort_keys=True, default=str))
        return
    for table in _training_tables(report, model_dir):
        console.print(table)


@app.command()
def evaluate(
    data: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="labelled transactions CSV(s)")],
    out: Annotated[
        Optional[Path], typer.Option(help="where evaluation.json and pr_curve.png go [default: OUT_DIR/evaluation]")
    ] = None,
    seed: Annotated[Optional[int], typer.Option(help="[default: AUDITFLOW_SEED, else 7]")] = None,
    seeds: Annotated[
        Optional[str], typer.Option(help="several training seeds, e.g. 3,5,7: figures as mean and sd over them")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the evaluation as JSON")] = False,
) -> None:
    """No-graph baseline, stream-features-only and graph-features models on the file's temporal
    60/20/20 split: minority-class F1, PR-AUC, precision at the alert budget; a PR curve PNG.
    Several files or --seeds: each file and seed evaluated, then the figures per file (mean and
    sd over the seeds) and pooled over the files."""
    settings = _settings(seed=seed)
    target = out or settings.out_dir / "evaluation"
    if len(data) > 1 or seeds is not None:
        seed_list = _seed_list(seeds) if seeds is not None else [settings.seed]
        try:
            multi = flow.evaluate_sets(data, target, settings, seeds=seed_list)
        except ConfigError as e:
            raise _fail(str(e), code=2) from None
        if as_json:
            typer.echo(json.dumps(multi.summary(), indent=2, sort_keys=True, default=str))
            return
        console.print(_multi_evaluation_table(multi.summary()))
        console.print(f"written: {multi.json_path}", soft_wrap=True)
        return
    result = flow.evaluate(data[0], target, settings)
    if as_json:
        typer.echo(json.dumps(result.summary(), indent=2, sort_keys=True, default=str))
        return
    console.print(_evaluation_table(result.report.to_dict()))
    console.print(f"written: {result.json_path}, {result.png_path}", soft_wrap=True)


@app.command()
def run(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="transactions CSV")],
    model_dir: Annotated[Optional[Path], typer.Option(help="[default: OUT_DIR/model]")] = None,
    out: Annotated[Optional[Path], typer.Option(help="[default: AUDITFLOW_OUT_DIR, else out]")] = None,
    max_reports: Optional[int] = None,
    append: Annotated[
        bool, typer.Option("--append", help="add to the run folder's run of the same source (a grown file)")
    ] = False,
    warm_up: Annotated[
        Optional[Path],
        typer.Option(
            "--warm-up",
            exists=True,
            dir_okay=False,
            help="an earlier transactions CSV: its last 7 days warm the accounts' windows first (not scored)",
        ),
    ] = None,
) -> None:
    """Stream a file through the job, then the deep path: alerts, traces, SHAP and PDF reports. A
    run folder holds one data set: a second run into it is refused unless --append with its source."""
    settings = _settings(out_dir=out)
    model_dir = _existing_dir(model_dir or settings.out_dir / flow.MODEL_DIRNAME, "model folder")
    result = _run_with_progress(
        lambda progress: flow.stream_and_report(
            data, model_dir, settings, max_reports=max_reports, progress=progress, append=append, warmup=warm_up
        )
    )
    _print_run(result)


@app.command()
def produce(
    from_: Annotated[Path, typer.Option("--from", exists=True, dir_okay=False, help="transactions CSV")],
    topic: Annotated[Optional[str], typer.Option(help="default: AUDITFLOW_TOPIC_TRANSACTIONS")] = None,
    restart: Annotated[
        bool, typer.Option("--restart", help="send from the first line, whatever an earlier run of this file committed")
    ] = False,
) -> None:
    """Stream a CSV into Kafka (keyed by sender, acks=all, in transactions); bad rows go to the DLQ.
    Run again after a crash, it goes on after the last committed line: nothing is sent twice."""
    _produce_with_progress(from_, flow.producer_options(_settings(), topic), restart=restart)


def _produce_with_progress(file: Path, options: ProducerOptions, *, restart: bool = False) -> ProduceSummary:
    """Produce (resumable) with a progress bar (rows read of the file's data lines, rate, dead
    letters), then print the counts on one line."""
    from rich.markup import escape
    from rich.progress import MofNCompleteColumn, TimeRemainingColumn

    from ingest.kafka_io import count_data_lines, produce_file

    total = count_data_lines(file)
    with Progress(
        TextColumn("[bold]produce[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TextColumn("dlq {task.fields[dlq]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as bar:
        task = bar.add_task(escape(f"{Path(file).name} -> {options.topic}"), total=total or None, rate="", dlq=0)
        t0 = time.perf_counter()

        def on_progress(read: int, sent: int, dead: int) -> None:
            dt = time.perf_counter() - t0
            bar.update(task, completed=read, dlq=dead, rate=f"{read / dt:,.0f} rows/s" if dt > 0 else "")

        summary = produce_file(file, options, progress=on_progress, restart=restart)
        bar.update(task, total=summary.read, completed=summary.read)
    if summary.skipped:
        console.print(f"resumed: the first {summary.skipped} rows were committed by an earlier run and not sent again")
    console.print(
        f"[green]produced[/] {summary.produced} events to [bold]{escape(summary.topic)}[/] "
        f"(partitions {', '.join(f'{p}: {n}' for p, n in summary.partitions.items()) or '-'}), "
        f"{summary.dead_lettered} dead-lettered to [bold]{escape(summary.dlq_topic)}[/]; "
        f"{summary.read} rows read in {summary.elapsed_s:.2f} s ({summary.events_per_s:,.0f} events/s)",
        soft_wrap=True,
    )
    return summary


job_app = typer.Typer(no_args_is_help=True, help="The stream job on Kafka.")
app.add_typer(job_app, name="job")


FromSavepoint = Annotated[
    Optional[Path], typer.Option("--from-savepoint", help="resume from this savepoint or retained checkpoint directory")
]
Resume = Annotated[bool, typer.Option(help="resume from the newest retained checkpoint under OUT_DIR/checkpoints")]


def _restore(s, from_savepoint: Optional[Path], resume: bool) -> Optional[Path]:
    try:
        return flow.resume_path(s, from_savepoint, resume)
    except FileNotFoundError as e:
        raise typer.BadParameter(str(e)) from None


@job_app.command("run")
def job_run(
    model_dir: Annotated[Optional[Path], typer.Option(help="[default: OUT_DIR/model]")] = None,
    bounded: Annotated[bool, typer.Option(help="stop at the offsets present at start")] = False,
    from_savepoint: FromSavepoint = None,
    resume: Resume = False,
) -> None:
    """Run the Kafka job on a local MiniCluster (Ctrl-C stops an unbounded run).

    A fresh job starts at its consumer group's committed offsets; with --resume or
    --from-savepoint it restores its state (windows, de-duplication, offsets) as well."""
    s = _settings()
    model_dir = _existing_dir(model_dir or s.out_dir / flow.MODEL_DIRNAME, "model folder")
    res = flow.run_kafka_job(s, str(model_dir), bounded=bounded, restore_path=_restore(s, from_savepoint, resume))
    console.print(f"job finished in {res.seconds:.1f}s: {res.processed:,} processed, {res.duplicate:,} duplicates")


@job_app.command("submit")
def job_submit(
    model_dir: Annotated[Optional[Path], typer.Option(help="[default: OUT_DIR/model]")] = None,
    bounded: Annotated[bool, typer.Option(help="stop at the offsets present at start")] = False,
    from_savepoint: FromSavepoint = None,
    resume: Resume = False,
    detached: Annotated[bool, typer.Option(help="return once the cluster accepted the job")] = False,
) -> None:
    """Submit the Kafka job to the Flink session cluster (`flink run -py`), as on any Flink cluster."""
    s = _settings()
    model_dir = _existing_dir(model_dir or s.out_dir / flow.MODEL_DIRNAME, "model folder")
    proc = flow.submit_kafka_job(
        s, str(model_dir), bounded=bounded, detached=detached, restore_path=_restore(s, from_savepoint, resume)
    )
    console.print(proc.stdout[-2000:])


@app.command()
def demo(
    out: Annotated[
        Optional[Path], typer.Option(help="output folder, recreated [default: AUDITFLOW_OUT_DIR, else out]")
    ] = None,
    accounts: Annotated[int, typer.Option(min=20)] = 2000,
    days: Annotated[int, typer.Option(min=1, help="days of live data (after a history of three weeks)")] = 3,
    seed: Annotated[Optional[int], typer.Option(help="[default: AUDITFLOW_SEED, else 7]")] = None,
    max_reports: Annotated[Optional[int], typer.Option(help="cap on PDFs written")] = None,
    kafka: Annotated[bool, typer.Option(help="stream through the Kafka broker (deploy/services up)")] = False,
    neo4j: Annotated[bool, typer.Option(help="write and query the graph on the Neo4j server")] = False,
    cluster: Annotated[bool, typer.Option(help="with --kafka: submit the job to the Flink session cluster")] = False,
    drift: Annotated[
        bool,
        typer.Option(
            "--drift",
            help="inject a stated drift: from 09:00 of the second live day, every Cheque payment arrives as ACH",
        ),
    ] = False,
) -> None:
    """The whole flow: generate -> train -> stream job -> graph -> reports (embedded by default).
    The live set continues the history (same accounts, the days after) and starts warm from its
    last week; drift is scored against the history's last days."""
    settings = _settings(out_dir=out, seed=seed)
    result = _run_with_progress(
        lambda progress: flow.demo(
            settings,
            accounts=accounts,
            days=days,
            max_reports=max_reports,
            kafka=kafka,
            neo4j=neo4j,
            cluster=cluster,
            drift=drift,
            progress=progress,
        ),
        kafka=kafka,
        cluster=cluster,
    )
    h, lv = result.history, result.live
    console.print(
        f"history: {h.events} transactions over {h.days} days from {h.start:%Y-%m-%d}, {h.laundering} laundering "
        f"(training set); live: {lv.events} transactions over {lv.days} days from {lv.start:%Y-%m-%d} (the same "
        f"accounts), {lv.laundering} laundering",
        soft_wrap=True,
        highlight=False,
    )
    if kafka and result.settings.drift_reference is None:
        console.print(
            "drift: not scored (--kafka: the Kafka job starts cold here, and a cold job's windows drift from any "
            "warm reference by construction; a deployed job warms from its own checkpoints, --resume)",
            soft_wrap=True,
            highlight=False,
        )
    if result.drift_injected:
        console.print(f"drift injected (--drift): {result.drift_injected.describe()}", soft_wrap=True, highlight=False)
    test = result.training.get("cascade_test", {})
    console.print(
        f"model trained: test precision={test.get('precision', 0):.3f} "
        f"recall={test.get('recall', 0):.3f} f1={test.get('f1', 0):.3f}"
    )
    _print_run(result.run)
    if result.settings.signing_key_file is None:
        console.print(
            "[bold red]warning:[/bold red] reports signed with the public DEVELOPMENT key: they prove "
            "nothing. Set AUDITFLOW_SIGNING_KEY_FILE (`auditflow keys new PATH`) for real reports; "
            "`auditflow verify --allow-dev-key` checks these.",
            highlight=False,
        )


@app.command()
def trace(
    account: Annotated[str, typer.Argument(help="BANK/ACCOUNT, e.g. 010/8000EBD30")],
    hops: Annotated[
        Optional[int], typer.Option(min=1, max=MAX_TRACE_HOPS, help="[default: AUDITFLOW_TRACE_HOPS, else 5]")
    ] = None,
    direction: Annotated[str, typer.Option(help="out (where the money went) or in (where it came from)")] = "out",
    fanout_cap: Annotated[
        Optional[int], typer.Option(min=1, help="[default: AUDITFLOW_TRACE_FANOUT_CAP, else 50]")
    ] = None,
    start: Annotated[Optional[str], typer.Option(help="YYYY-MM-DDTHH:MM")] = None,
    end: Annotated[Optional[str], typer.Option(help="YYYY-MM-DDTHH:MM")] = None,
    out: Annotated[
        Optional[Path], typer.Option(help="run folder holding graph.jsonl [default: AUDITFLOW_OUT_DIR]")
    ] = None,
) -> None:
    """Analyst query: a multi-hop evidence trace from an account, as JSON."""
    from evidence_graph import trace_evidence
    from evidence_graph.queries import require_account

    settings = _settings(out_dir=out, trace_hops=hops, trace_fanout_cap=fanout_cap)
    window = _window(start, end)
    try:
        with flow.open_graph(settings) as store:
            t = trace_evidence(
                store,
                require_account(store, account, settings.effective_graph_url),
                max_hops=settings.trace_hops,
                direction=direction,
                fanout_cap=settings.trace_fanout_cap,
                window=window,
            )
    except ValueError as e:
        raise _fail(str(e), code=2) from None
    console.print_json(t.to_json())


graph_app = typer.Typer(no_args_is_help=True, help="Analyst queries on the transaction graph (read-only).")
app.add_typer(graph_app, name="graph")

_Start = Annotated[Optional[str], typer.Option(help="window start, YYYY-MM-DDTHH:MM")]
_End = Annotated[Optional[str], typer.Option(help="window end, YYYY-MM-DDTHH:MM")]
_Json = Annotated[bool, typer.Option("--json", help="print JSON instead of tables")]
_Out = Annotated[Optional[Path], typer.Option(help="run folder holding graph.jsonl [default: AUDITFLOW_OUT_DIR]")]


def _window(start: str | None, end: str | None):
    if not (start or end):
        return None
    return (_when(start, "--start") if start else None, _when(end, "--end") if end else None)


def _graph_query(call):
    try:
        return call()
    except ValueError as e:
        raise _fail(str(e), code=2) from None


def _usd(cents: int) -> str:
    return f"{cents / 100:,.2f}"


@graph_app.command("trace")
def graph_trace(
    account: Annotated[str, typer.Argument(help="BANK/ACCOUNT")],
    hops: Annotated[
        Optional[int], typer.Option(min=1, max=MAX_TRACE_HOPS, help="[default: AUDITFLOW_TRACE_HOPS, else 5]")
    ] = None,
    direction: Annotated[str, typer.Option(help="out (where the money went) or in (where it came from)")] = "out",
    start: _Start = None,
    end: _End = None,
    out: _Out = None,
    json_: _Json = False,
) -> None:
    """Follow the money from (or into) an account, hop by hop, in time order."""
    settings = _settings(out_dir=out)
    t = _graph_query(
        lambda: flow.graph_trace(settings, account, hops=hops, direction=direction, window=_window(start, end))
    )
    if json_:
        console.print_json(t.to_json())
        return
    edges_into: dict[str, list] = {}
    for e in t.edges:
        edges_into.setdefault(e.dst if t.direction == "out" else e.src, []).append(e)
    table = Table(title=f"trace {t.trace_id} from {t.root} ({t.direction}, {t.max_hops} hops)")
    for col in ("hop", "account", "via", "path (event ids)"):
        table.add_column(col)
    for n in t.nodes:
        table.add_row(
            str(n.hop_depth),
            n.node_id + (" (hub)" if n.node_id in t.hubs else ""),
            ", ".join(n.upstream_ids),
            " > ".join(n.path),
        )
    console.print(table)
    if t.cuts:
        cuts = Table(title="cut")
        for col in ("hop", "account", "reason", "dropped"):
            cuts.add_column(col)
        for c in t.cuts:
            cuts.add_row(str(c.hop), c.node_id or "(all)", c.reason, str(c.dropped))
        console.print(cuts)
    console.print(f"{len(t.nodes)} accounts, {len(t.edges)} transfers on {t.backend}")


@graph_app.command("paths")
def graph_paths(
    source: Annotated[str, typer.Argument(help="BANK/ACCOUNT the money left")],
    target: Annotated[str, typer.Argument(help="BANK/ACCOUNT it reached")],
    max_hops: Annotated[
        Optional[int], typer.Option(min=1, max=MAX_TRACE_HOPS, help="[default: AUDITFLOW_TRACE_HOPS, else 5]")
    ] = None,
    start: _Start = None,
    end: _End = None,
    out: _Out = None,
    json_: _Json = False,
) -> None:
    """Time-ordered money paths from one account to another, fewest hops first."""
    settings = _settings(out_dir=out)
    paths = _graph_query(
        lambda: flow.graph_paths(settings, source, target, max_hops=max_hops, window=_window(start, end))
    )
    if json_:
        console.print_json(json.dumps(views.paths_view(paths)))
        return
    table = Table(title=f"money paths {source} -> {target}")
    for col in ("#", "hops", "accounts", "first", "last"):
        table.add_column(col)
    for i, p in enumerate(paths, 1):
        table.add_row(
            str(i),
            str(len(p)),
            " > ".join([p[0].src, *(e.dst for e in p)]),
            f"{p[0].timestamp:%Y-%m-%d %H:%M}",
            f"{p[-1].timestamp:%Y-%m-%d %H:%M}",
        )
    console.print(table)
    console.print(f"{len(paths)} paths")


@graph_app.command("neighborhood")
def graph_neighborhood(
    account: Annotated[str, typer.Argument(help="BANK/ACCOUNT")],
    start: _Start = None,
    end: _End = None,
    out: _Out = None,
    json_: _Json = False,
) -> None:
    """An account's counterparties: transfers and US dollars each way."""
    settings = _settings(out_dir=out)
    nb = _graph_query(lambda: flow.graph_neighborhood(settings, account, window=_window(start, end)))
    if json_:
        console.print_json(json.dumps(views.neighborhood_view(nb)))
        return
    table = Table(title=f"counterparties of {nb.account}" + (" (cut)" if nb.truncated else ""))
    for col in ("counterparty", "sent", "USD sent", "received", "USD received", "first", "last"):
        table.add_column(col, justify="right" if col.startswith(("sent", "USD", "received")) else "left")
    for r in nb.rows:
        table.add_row(
            r.counterparty,
            str(r.sent),
            _usd(r.sent_usd_cents),
            str(r.received),
            _usd(r.received_usd_cents),
            f"{r.first:%Y-%m-%d %H:%M}",
            f"{r.last:%Y-%m-%d %H:%M}",
        )
    console.print(table)


@graph_app.command("typology")
def graph_typology(
    account: Annotated[str, typer.Argument(help="BANK/ACCOUNT")],
    start: _Start = None,
    end: _End = None,
    out: _Out = None,
    json_: _Json = False,
) -> None:
    """The laundering typology instances an account takes part in."""
    settings = _settings(out_dir=out)
    found = _graph_query(lambda: flow.graph_typology(settings, account, window=_window(start, end)))
    if json_:
        console.print_json(json.dumps([m.to_dict() for m in found]))
        return
    table = Table(title=f"typologies around {account}")
    for col in ("typology", "accounts", "transfers", "hops", "why"):
        table.add_column(col)
    for m in found:
        table.add_row(m.typology, str(len(m.accounts)), str(len(m.event_ids)), str(len(m.hops)), m.explanation)
    console.print(table)
    console.print(f"{len(found)} findings")


serve_app = typer.Typer(no_args_is_help=True, help="Long-running services.")
app.add_typer(serve_app, name="serve")


@serve_app.command("analyst")
def serve_analyst(out: _Out = None) -> None:
    """The analyst HTTP API (OpenAPI at /docs) on AUDITFLOW_ANALYST_LISTEN: the read-only graph,
    alerts and reports (tokens from AUDITFLOW_ANALYST_TOKENS_FILE or AUDITFLOW_USERS_FILE) and, with
    AUDITFLOW_USERS_FILE, the cases routes and pages (/view/cases.html)."""
    import uvicorn

    from auditflow_app.analyst_api import create_app

    settings = _settings(out_dir=out)
    try:
        api = create_app(settings)
    except ValueError as e:
        raise _fail(str(e), code=2) from None
    host, _, port = settings.analyst_listen.rpartition(":")
    uvicorn.run(api, host=host, port=int(port), log_level="info")


@serve_app.command("model")
def serve_model(
    out: _Out = None,
    model_dir: Annotated[
        Optional[Path], typer.Option(help="the cascade [default: AUDITFLOW_MODEL_DIR, else OUT_DIR/model]")
    ] = None,
) -> None:
    """Batch scoring over HTTP on AUDITFLOW_MODEL_LISTEN: scores, reason codes, tiers (critical /
    normal / background queue), /health, /ready, /metrics (Prometheus)."""
    import uvicorn

    from auditflow_app.model_server import model_app

    settings = _settings(out_dir=out, model_dir=model_dir)
    try:
        api = model_app(settings)
    except (OSError, ValueError) as e:
        raise _fail(f"cannot load the model: {e}", code=2) from None
    host, _, port = settings.model_listen.rpartition(":")
    uvicorn.run(api, host=host, port=int(port), log_level="info")


keys_app = typer.Typer(no_args_is_help=True, help="Ed25519 signing keys and the published public keys.")
app.add_typer(keys_app, name="keys")


@keys_app.command("new")
def keys_new(path: Annotated[Path, typer.Argument(help="where to write the private key (PEM, mode 0600)")]) -> None:
    """Make a new Ed25519 signing key (never overwrites a file); set AUDITFLOW_SIGNING_KEY_FILE to it."""
    from reports.signing import generate_key_file

    try:
        signer = generate_key_file(path)
    except FileExistsError:
        raise _fail(f"{path} exists: not overwriting a key", code=2) from None
    console.print(f"wrote {path} (key id {signer.key_id})", soft_wrap=True)


@keys_app.command("publish")
def keys_publish(
    keyring: Annotated[Path, typer.Argument(help="keyring JSON to create or extend (old keys are kept)")],
) -> None:
    """Add the configured signing key's public key to a keyring (what verifiers trust, kept
    outside the reports folder). Rotation: publish the new key into the same keyring."""
    from reports.signing import Keyring, SigningKeyError

    settings = _settings()
    try:
        signer = flow.report_signer(settings)
        ring = Keyring.load(keyring) if keyring.exists() else Keyring()
    except (SigningKeyError, RuntimeError) as e:
        raise _fail(str(e), code=2) from None
    ring.add(signer.public_key)
    ring.save(keyring)
    console.print(f"{keyring}: {len(ring)} key(s), added {signer.key_id}", soft_wrap=True)


@app.command()
def report(
    target: Annotated[str, typer.Argument(help="an alert id of the run in OUT_DIR, or `period`")],
    profile: Annotated[
        Optional[str],
        typer.Option(help="compliance profile: sar, gdpr-art22, ccpa [default: AUDITFLOW_REPORT_PROFILE, else sar]"),
    ] = None,
    from_: Annotated[Optional[str], typer.Option("--from", help="period start, YYYY-MM-DD (with `period`)")] = None,
    to: Annotated[Optional[str], typer.Option(help="period end, YYYY-MM-DD, exclusive (with `period`)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="run folder [default: AUDITFLOW_OUT_DIR, else out]")] = None,
) -> None:
    """Write one alert's report (again) with a compliance profile, or with `period --from --to`
    a compliance summary of the alerts in that period. Write-once: the same inputs leave the
    report as it is, others give a new version."""
    from reports.profile import ProfileError
    from reports.signing import DevelopmentKeyRefused, SigningKeyError

    settings = _settings(out_dir=out)
    try:
        if target == "period":
            if not from_ or not to:
                raise _fail("report period needs --from and --to (YYYY-MM-DD)", code=2)
            res: flow.PeriodReportResult | flow.AlertReportResult = flow.report_period(
                settings, _when(from_, "--from"), _when(to, "--to")
            )
        else:
            if from_ or to:
                raise _fail("--from/--to go with `report period`", code=2)
            res = flow.report_alert(settings, target, profile=profile)
    except ProfileError as e:
        raise _fail(f"{e}: set AUDITFLOW_REPORT_INSTITUTION and AUDITFLOW_REPORT_CONTACT", code=2) from None
    except (LookupError, SigningKeyError, DevelopmentKeyRefused, InputError) as e:
        raise _fail(str(e).strip("'\""), code=2) from None
    except ValueError as e:
        raise _fail(str(e)) from None
    console.print(f"{res.status}: {res.pdf} (audit log of {res.tree_size} entries)", soft_wrap=True, highlight=False)


schedule_app = typer.Typer(no_args_is_help=True, help="Scheduled compliance summaries (cron in settings).")
app.add_typer(schedule_app, name="schedule")


@schedule_app.command("run")
def schedule_run(
    now: Annotated[Optional[str], typer.Option(help="YYYY-MM-DDTHH:MM, UTC [default: the clock]")] = None,
    out: Annotated[Optional[Path], typer.Option(help="run folder [default: AUDITFLOW_OUT_DIR, else out]")] = None,
    catch_up: Annotated[
        bool, typer.Option("--catch-up", help="write more than AUDITFLOW_SCHEDULE_MAX_CATCHUP periods at once")
    ] = False,
) -> None:
    """Write the daily and weekly summaries (AUDITFLOW_SCHEDULE_DAILY / _WEEKLY) of every period
    that has ended, that the processed data covers, and that has none yet, oldest first: catches up
    after downtime, idempotent per period; each states the transfers it saw, first, last and gaps."""
    from reports.signing import DevelopmentKeyRefused, SigningKeyError

    settings = _settings(out_dir=out)
    when = _when(now, "--now") if now is not None else None
    try:
        res = flow.run_schedule(settings, when, catch_up=catch_up)
    except (SigningKeyError, DevelopmentKeyRefused, InputError) as e:
        raise _fail(str(e), code=2) from None
    cov = res.coverage
    span = f"the processed data runs from {cov.first:%Y-%m-%d %H:%M} to {cov.last:%Y-%m-%d %H:%M}"
    if res.uncovered:
        console.print(
            f"{res.uncovered} ended period(s) the data does not cover were not written ({span})",
            soft_wrap=True,
            highlight=False,
        )
    if not res.reports:
        console.print(f"up to date: every period {span} covers has its summary", soft_wrap=True, highlight=False)
        return
    table = Table(
        "period", "alerts", "status", "file", title=f"schedule run up to {res.now:%Y-%m-%d %H:%M}", title_justify="left"
    )
    for r in res.reports:
        table.add_row(r.period_id, f"{r.alerts:,}", r.status, r.pdf.name)
    console.print(table)
    console.print(f"{res.written} written; audit log of {res.tree_size} entries", highlight=False)


def _when(text: str, option: str) -> datetime:
    from auditflow.records import parse_when

    try:
        return parse_when(text)
    except ValueError:
        raise _fail(f"{option} {text!r}: expected YYYY-MM-DD or YYYY-MM-DDTHH:MM", code=2) from None


@app.command()
def verify(
    reports_dir: Annotated[Optional[Path], typer.Argument(help="[default: OUT_DIR/reports]")] = None,
    tree_head: Annotated[
        Optional[Path],
        typer.Option(
            "--tree-head", exists=True, dir_okay=False, help="a signed tree head kept elsewhere: the log must extend it"
        ),
    ] = None,
    allow_dev_key: Annotated[
        bool,
        typer.Option("--allow-dev-key", help="also trust the public development key (demo reports; proves nothing)"),
    ] = False,
) -> None:
    """Check every report against its manifest, each signature, each report's inclusion in the
    Merkle audit log, that every logged file exists, and the log against its signed tree head
    (and --tree-head), and the cases log. The root cause first (a rewritten log entry), then each
    kind of failure once with its count and every item it names; exits 1 on any."""
    from reports.signing import SigningKeyError

    settings = _settings()
    reports_dir = _existing_dir(reports_dir or settings.out_dir / flow.REPORTS_DIRNAME, "reports folder")
    if not allow_dev_key and not len(flow.trusted_keys(settings)):
        raise _fail(
            "no trusted public key to check signatures with: set AUDITFLOW_TRUSTED_KEYS_FILE (a published keyring) "
            "or AUDITFLOW_SIGNING_KEY_FILE; the demo's reports: --allow-dev-key",
            code=2,
        )
    try:
        result = flow.verify_reports(settings, reports_dir, tree_head_file=tree_head, allow_dev_key=allow_dev_key)
    except (SigningKeyError, ValueError) as e:
        raise _fail(str(e), code=2) from None
    if allow_dev_key:
        console.print(
            "[bold red]warning:[/bold red] trusting the public development key: signatures by it prove nothing",
            highlight=False,
        )
    summary = f"{result.reports} reports, {result.files} files, audit log of {result.log_size} entries" + (
        f", consistent with {tree_head}" if tree_head and result.ok else ""
    )
    groups = result.grouped()
    if case_flow.cases_store_exists(settings):  # the case histories: the cases log (auditflow case verify)
        cases = case_flow.verify_cases(settings, allow_dev_key=allow_dev_key)
        summary += f", cases log of {cases.entries} entries ({cases.cases} cases)"
        groups += [("cases log", p, 1) for p in cases.problems]
    if not groups:
        console.print(f"verified: {summary}", soft_wrap=True, highlight=False)
        return
    problems = sum(n for _, _, n in groups)
    for cause in result.causes:
        console.print(f"[red]root cause[/red]: {cause}", soft_wrap=True, highlight=False)
    if result.causes:
        console.print("what follows from it:", highlight=False)
    for items, problem, n in groups:
        console.print(f"  {items}: {problem}" + (f" ({n}x)" if n > 1 else ""), soft_wrap=True, highlight=False)
    console.print(f"[red]FAILED[/red]: {summary}; {problems} problem(s)", soft_wrap=True, highlight=False)
    raise typer.Exit(code=1)


@app.command("tree-head")
def tree_head_(
    reports_dir: Annotated[Optional[Path], typer.Argument(help="[default: OUT_DIR/reports]")] = None,
    out: Annotated[Optional[Path], typer.Option(help="write it here (keep it outside the reports folder)")] = None,
) -> None:
    """Export the audit log's signed tree head, to keep elsewhere and check later with verify --tree-head."""
    settings = _settings()
    reports_dir = _existing_dir(reports_dir or settings.out_dir / flow.REPORTS_DIRNAME, "reports folder")
    try:
        head = flow.export_tree_head(reports_dir, out)
    except (FileNotFoundError, ValueError) as e:
        raise _fail(str(e), code=2) from None
    if out is None:
        typer.echo(head.to_bytes().decode("ascii"), nl=False)
    else:
        console.print(
            f"wrote {out}: tree size {head.tree_size}, root {head.root_hash}, key {head.key_id}",
            soft_wrap=True,
            highlight=False,
        )


reference_app = typer.Typer(
    no_args_is_help=True, help="Drift references: frozen profiles of the scoring inputs and score."
)
app.add_typer(reference_app, name="reference")


@reference_app.command("build")
def reference_build(
    data: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="transactions CSV")],
    from_: Annotated[Optional[str], typer.Option("--from", help="first event time, YYYY-MM-DD[THH:MM] (UTC)")] = None,
    to: Annotated[Optional[str], typer.Option(help="end, exclusive, YYYY-MM-DD[THH:MM] (UTC)")] = None,
    from_alert: Annotated[
        Optional[str],
        typer.Option(
            "--from-alert",
            help="re-sample: the windows of this drift alert (OUT_DIR/drift_alerts.jsonl) instead of --from/--to",
        ),
    ] = None,
    model_dir: Annotated[Optional[Path], typer.Option(help="[default: OUT_DIR/model]")] = None,
    out: Annotated[Optional[Path], typer.Option(help="[default: OUT_DIR/drift]")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Freeze the drift reference of the events between --from and --to (or, re-sampling after a
    drift alert, of the windows it fired on): bins from their quantiles, segments, counts; named by
    its content hash (the reference id every drift record carries)."""
    from pipelines.drift_views import drift_alert_range

    settings = _settings()
    model_dir = _existing_dir(model_dir or settings.out_dir / flow.MODEL_DIRNAME, "model folder")
    if (from_alert is None) == (from_ is None or to is None) or (from_alert and (from_ or to)):
        raise _fail("give --from and --to, or --from-alert", code=2)
    try:
        if from_alert:
            start, end = drift_alert_range(flow.RunPaths.under(settings.out_dir).drift_alerts, from_alert)
        else:
            assert from_ is not None and to is not None  # checked above
            start, end = _when(from_, "--from"), _when(to, "--to")
        res = flow.build_reference(data, model_dir, settings, start, end, out_dir=out)
    except ValueError as e:
        raise _fail(str(e), code=2) from None
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "path": str(res.path),
                    "reference_id": res.reference_id,
                    "model_version": res.model_version,
                    "events": res.events,
                    "features": list(res.features),
                    "segments": res.segments,
                },
                indent=2,
                sort_keys=True,
            )
        )
        return
    console.print(
        f"reference [bold]{res.reference_id}[/] ({res.events:,} events, {len(res.features)} inputs incl. "
        f"the score, model {res.model_version[:12]}) -> {res.path}",
        soft_wrap=True,
        highlight=False,
    )
    table = Table("segment dimension", "kept values", title="segments (the rest: __other__)", title_justify="left")
    for dim, values in res.segments.items():
        table.add_row(dim, ", ".join(values))
    console.print(table)


drift_app = typer.Typer(no_args_is_help=True, help="Drift scores of the scoring inputs and the score.")
app.add_typer(drift_app, name="drift")

_STATUS_STYLE = {"drift": "bold red", "warn": "yellow", "ok": "green"}


@drift_app.command("show")
def drift_show(
    records: Annotated[
        Optional[Path], typer.Option(help="drift records, JSON lines [default: OUT_DIR/drift_scores.jsonl]")
    ] = None,
    alerts: Annotated[Optional[Path], typer.Option(help="drift alerts [default: OUT_DIR/drift_alerts.jsonl]")] = None,
    metric: Annotated[str, typer.Option(help="psi, js or kl")] = "psi",
    at: Annotated[
        Optional[str], typer.Option(help="the window holding this time, YYYY-MM-DD[THH:MM] [default: the latest]")
    ] = None,
    feature: Annotated[Optional[str], typer.Option(help="chart this feature's drift over time")] = None,
    segment: Annotated[str, typer.Option(help="the segment of the chart")] = "__all__",
    chart: Annotated[Optional[Path], typer.Option(help="PNG to write [default: OUT_DIR/drift/FEATURE.png]")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the table as JSON")] = False,
) -> None:
    """The latest drift window per segment (worst status of its features, counts, the farthest
    feature), the drift alerts on it, and with --feature a PNG chart of that feature over time."""
    from pipelines.drift_views import drift_chart, drift_series, drift_view, read_drift_records

    settings = _settings()
    records = records or settings.out_dir / "drift_scores.jsonl"
    alerts = alerts or settings.out_dir / "drift_alerts.jsonl"
    if not records.is_file():
        raise _fail(f"no drift records at {records} (run the stream job with AUDITFLOW_DRIFT_REFERENCE set)", code=2)
    try:
        recs = read_drift_records(records)
        view = drift_view(
            recs,
            read_drift_records(alerts) if alerts.is_file() else [],
            metric=metric,
            at=_when(at, "--at") if at else None,
        )
        path = None
        if feature:
            series = drift_series(recs, feature, segment, metric)
            path = drift_chart(
                series,
                chart or settings.out_dir / "drift" / f"{feature}.png",
                title=f"{metric} of {feature} in {segment} (reference {series[0]['reference_id']})",
            )
    except ValueError as e:
        raise _fail(str(e), code=2) from None
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "metric": view.metric,
                    "window_start": view.window_start and view.window_start.isoformat(),
                    "window_end": view.window_end and view.window_end.isoformat(),
                    "reference_id": view.reference_id,
                    "windows": view.windows,
                    "segments": [dataclasses.asdict(r) for r in view.rows],
                    "alerts": view.alerts,
                    "chart": str(path) if path else None,
                },
                indent=2,
                sort_keys=True,
            )
        )
        return
    if view.window_start is None:
        console.print(f"no {metric} records in {records}")
        return
    table = Table(
        "segment",
        "status",
        "drift",
        "warn",
        "judged",
        "farthest feature",
        metric,
        "drift threshold",
        "events",
        title=f"{metric}, window {view.window_start:%Y-%m-%d %H:%M} .. {view.window_end:%H:%M} "
        f"({view.windows} windows, reference {view.reference_id})",
        title_justify="left",
    )
    for r in view.rows:
        style = _STATUS_STYLE.get(r.status, "dim")
        table.add_row(
            r.segment,
            f"[{style}]{r.status}[/]",
            str(r.drift),
            str(r.warn),
            str(r.judged),
            r.top_feature,
            f"{r.top_value:.4f}",
            f"{r.top_threshold:.4f}",
            f"{r.n_cur:,}",
        )
    console.print(table)
    for a in view.alerts:
        console.print(
            f"[bold red]alert[/] {a['rule']} ({a['action']}): {a['metric']} {a['kind']} on "
            f"{', '.join(f'{k}={v}' for k, v in a['group'].items()) or 'all'} for {a['consecutive']} window(s), "
            f"value {a['value']:.4f}",
            soft_wrap=True,
            highlight=False,
        )
    if path:
        console.print(f"chart: {path}", soft_wrap=True, highlight=False)


from auditflow_app.case_cli import case_app  # noqa: E402 -- registered with the others, defined apart

app.add_typer(case_app, name="case")


def main() -> None:
    """The ``auditflow`` command: the app, a configuration error as one line and exit 2, not a traceback."""
    try:
        app()
    except (ConfigError, InputError) as e:  # a setting, a file, an account the user gave: one line
        console.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
