"""The ``auditflow`` command line: the edge where settings, files and terminal output live."""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from auditflow import flow
from auditflow.settings import Settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Streaming AML audit pipeline.")
console = Console()


def _settings(out: Path | None = None, seed: int | None = None) -> Settings:
    s = Settings()
    updates = {}
    if out is not None:
        updates["out_dir"] = out
    if seed is not None:
        updates["seed"] = seed
    return s.model_copy(update=updates) if updates else s


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), console=console, transient=False)


@app.command()
def generate(
    out: Annotated[Path, typer.Option(help="output folder")] = Path("out/data"),
    accounts: Annotated[int, typer.Option(min=10)] = 2000,
    days: Annotated[int, typer.Option(min=1)] = 3,
    laundering_rate: Annotated[float, typer.Option(min=0.0, max=0.5)] = 0.001,
    seed: int = 7,
    name: str = "synthetic",
) -> None:
    """Write a seeded synthetic AMLworld-format set: NAME_Trans.csv and NAME_Patterns.txt."""
    from ingest.synthetic import generate as gen, write_dataset

    ds = gen(accounts=accounts, days=days, laundering_rate=laundering_rate, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    trans, patterns = write_dataset(ds, out, name=name)
    console.print(f"wrote {len(ds.events)} transactions ({ds.laundering_count} laundering, "
                  f"{len(ds.attempts)} attempts) to {trans} and {patterns}")


@app.command("import")
def import_(
    transactions: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="AMLworld *_Trans.csv")],
    out: Annotated[Path, typer.Option(help="output folder")] = Path("out/import"),
    patterns: Annotated[Optional[Path], typer.Option(exists=True, dir_okay=False)] = None,
    limit: Optional[int] = None,
) -> None:
    """Stream a real AMLworld file: canonical copy, rejects.jsonl and a summary (read = accepted + rejected)."""
    from ingest.importer import import_amlworld

    summary = import_amlworld(transactions, out, patterns=patterns, limit=limit)
    console.print(summary)


@app.command()
def train(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="labelled transactions CSV")],
    model_dir: Annotated[Path, typer.Option(help="where the cascade is saved")] = Path("out/model"),
    seed: int = 7,
) -> None:
    """Train the two-stage cascade (temporal 60/20/20 split) and print its test metrics."""
    summary = flow.train(data, model_dir, _settings(seed=seed))
    console.print_json(json.dumps(summary, default=str))


@app.command()
def run(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="transactions CSV")],
    model_dir: Annotated[Path, typer.Option()] = Path("out/model"),
    out: Annotated[Path, typer.Option()] = Path("out"),
    max_reports: Optional[int] = None,
) -> None:
    """Stream a file through the job, then the deep path: alerts, traces, SHAP and PDF reports."""
    settings = _settings(out=out)
    _stream_and_report(data, model_dir, settings, max_reports=max_reports)


@app.command()
def produce(
    from_: Annotated[Path, typer.Option("--from", exists=True, dir_okay=False, help="transactions CSV")],
    topic: Annotated[Optional[str], typer.Option(help="default: AUDITFLOW_TOPIC_TRANSACTIONS")] = None,
) -> None:
    """Stream a CSV into Kafka (keyed by sender, acks=all, idempotent); bad rows go to the DLQ."""
    from ingest.kafka_io import produce_command

    produce_command(from_, topic, Settings())


job_app = typer.Typer(no_args_is_help=True, help="The stream job on Kafka.")
app.add_typer(job_app, name="job")


@job_app.command("run")
def job_run(
    model_dir: Annotated[Path, typer.Option(exists=True, file_okay=False)] = Path("out/model"),
    bounded: Annotated[bool, typer.Option(help="stop at the offsets present at start")] = False,
) -> None:
    """Run the Kafka job on a local MiniCluster (Ctrl-C stops an unbounded run)."""
    from pipelines.kafka_job import run_kafka_job

    s = Settings()
    res = run_kafka_job(s, str(model_dir), bounded=bounded, graph_options=s.graph_options)
    console.print(f"job finished in {res.seconds:.1f}s")


@job_app.command("submit")
def job_submit(
    model_dir: Annotated[Path, typer.Option(exists=True, file_okay=False)] = Path("out/model"),
    bounded: Annotated[bool, typer.Option(help="stop at the offsets present at start")] = False,
) -> None:
    """Submit the Kafka job to the Flink session cluster (`flink run -py`), as on any Flink cluster."""
    from pipelines.kafka_job import submit_kafka_job

    proc = submit_kafka_job(Settings(), str(model_dir), bounded=bounded)
    console.print(proc.stdout[-2000:])


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="output folder (recreated)")] = Path("out"),
    accounts: int = 2000,
    days: int = 3,
    seed: int = 7,
    max_reports: Annotated[Optional[int], typer.Option(help="cap on PDFs written")] = None,
    kafka: Annotated[bool, typer.Option(help="stream through the Kafka broker (deploy/services up)")] = False,
    neo4j: Annotated[bool, typer.Option(help="write and query the graph on the Neo4j server")] = False,
    cluster: Annotated[bool, typer.Option(help="with --kafka: submit the job to the Flink session cluster")] = False,
) -> None:
    """The whole flow: generate -> train -> stream job -> graph -> reports (embedded by default)."""
    from ingest.synthetic import generate as gen, write_dataset

    t0 = time.perf_counter()
    if out.exists():
        shutil.rmtree(out)
    settings = _settings(out=out, seed=seed)
    if neo4j:
        settings = settings.model_copy(update={"graph_url": settings.graph_url or settings.neo4j_uri,
                                               "graph_namespace": settings.graph_namespace or "demo"})
        with settings.open_graph() as store:
            store.drop()  # the demo starts from an empty graph in its namespace
    if kafka:  # demo topics of its own, recreated on each run
        settings = settings.model_copy(update={f"topic_{t}": f"auditflow-demo.{t}"
                                               for t in ("transactions", "alerts", "dlq")})
    data_dir = out / "data"
    data_dir.mkdir(parents=True)
    with console.status("generating history (training) and live (streamed) data"):
        history = gen(accounts=accounts, days=2 * days, laundering_rate=0.01, seed=seed)
        hist_csv, _ = write_dataset(history, data_dir, name="history")
        live = gen(accounts=accounts, days=days, laundering_rate=0.001, seed=seed + 1)
        live_csv, _ = write_dataset(live, data_dir, name="live")
    console.print(f"history: {len(history.events)} transactions, {history.laundering_count} laundering "
                  f"(training set); live: {len(live.events)} transactions, {live.laundering_count} laundering")
    with console.status("training the cascade on history (temporal split)"):
        report = flow.train(hist_csv, out / flow.MODEL_DIRNAME, settings)
    test = report.get("cascade_test", {})
    console.print(f"model trained: test precision={test.get('precision', 0):.3f} "
                  f"recall={test.get('recall', 0):.3f} f1={test.get('f1', 0):.3f}")
    _stream_and_report(live_csv, out / flow.MODEL_DIRNAME, settings, max_reports=max_reports,
                       laundering_ids={e.event_id for e in live.events if e.is_laundering}, started=t0,
                       kafka=kafka, cluster=cluster)


def _stream_and_report(data: Path, model_dir: Path, settings: Settings, *, max_reports: int | None,
                       laundering_ids: set[str] | None = None, started: float | None = None,
                       kafka: bool = False, cluster: bool = False) -> None:
    from reports import render_run_summary

    t0 = started or time.perf_counter()
    settings.out_dir.mkdir(parents=True, exist_ok=True)
    if kafka:
        where = "Flink session cluster" if cluster else "PyFlink MiniCluster"
        with console.status(f"Kafka: produce, stream job on the {where}, read alerts and dead letters back"):
            res = flow.run_stream_kafka(data, model_dir, settings, cluster=cluster, fresh_topics=True)
    else:
        with console.status("stream job (PyFlink MiniCluster): parse, features, fast score, graph writes"):
            res = flow.run_stream(data, model_dir, settings)
    flow.write_jsonl(settings.out_dir / "rejects.jsonl", (r.to_json() for r in res.rejects))
    flow.write_jsonl(settings.out_dir / "fast_alerts.jsonl",
                     ({"event": ev.to_dict(), "features": feats} for ev, feats in res.candidates))
    if res.records_in != res.processed + len(res.rejects):
        raise typer.Exit(code=_fail(f"count check failed: in={res.records_in} processed={res.processed} "
                                    f"rejected={len(res.rejects)}"))
    console.print(f"stream job: {res.records_in} in = {res.processed} processed + {len(res.rejects)} rejected; "
                  f"{len(res.candidates)} fast-path alerts in {res.seconds:.1f}s")
    if laundering_ids is None:
        laundering_ids = {ev.event_id for ev in flow.read_events(data)[0] if ev.is_laundering}
    with _progress() as progress:
        task = progress.add_task("deep path: SHAP, traces, PDF reports", total=None)
        cases = flow.run_deep_path(
            res.candidates, model_dir, settings, input_sha256=flow.sha256_file(data),
            reports_dir=settings.out_dir / flow.REPORTS_DIRNAME, max_reports=max_reports,
            progress=lambda i, n: progress.update(task, completed=i, total=n),
        )
    flow.write_jsonl(settings.out_dir / "alerts.jsonl", (
        {**c.alert.to_dict(), "reason_codes": [r.to_dict() for r in c.reason_codes], "trace_id": c.trace_id,
         "typologies": c.typologies, "report": str(c.report_pdf) if c.report_pdf else None} for c in cases))
    alerted = [c.alert.event.event_id for c in cases]
    fast_ids = [ev.event_id for ev, _ in res.candidates]
    summary = {
        "events_in": res.records_in,
        "processed": res.processed,
        "rejected": len(res.rejects),
        "alerts": len(cases),
        "reports_written": sum(1 for c in cases if c.report_pdf),
        "laundering_planted": len(laundering_ids),
        "laundering_alerted": len(laundering_ids & set(alerted)),
        "elapsed_s": time.perf_counter() - t0,
        "fast_path_alerts": len(fast_ids),
        "fast_path_recall": round(flow.recall(laundering_ids, fast_ids), 4),
    }
    (settings.out_dir / "run_summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    console.print(render_run_summary(summary))
    console.print(f"reports: {settings.out_dir / flow.REPORTS_DIRNAME}")
    console.print(f"recall of planted laundering transactions among alerts: "
                  f"{flow.recall(laundering_ids, alerted):.3f} ({summary['laundering_alerted']}/{len(laundering_ids)})")


def _fail(message: str) -> int:
    console.print(f"[red]error:[/red] {message}")
    return 1


@app.command()
def trace(
    account: Annotated[str, typer.Argument(help="BANK/ACCOUNT, e.g. 010/8000EBD30")],
    hops: Annotated[int, typer.Option(min=1, max=5)] = 5,
    direction: str = "out",
    fanout_cap: int = 50,
    start: Optional[str] = None,
    end: Optional[str] = None,
    out: Path = Path("out"),
) -> None:
    """Analyst query: a multi-hop evidence trace from an account, as JSON."""
    from evidence_graph import trace_evidence

    settings = _settings(out=out)
    window = None
    if start or end:
        parse = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M") if s else None  # noqa: E731
        window = (parse(start), parse(end))
    with settings.open_graph() as store:
        t = trace_evidence(store, account, max_hops=hops, direction=direction, fanout_cap=fanout_cap, window=window)
    console.print_json(t.to_json())


@app.command()
def verify(
    reports_dir: Annotated[Path, typer.Argument(exists=True, file_okay=False)] = Path("out/reports"),
) -> None:
    """Check every report manifest (file hashes, HMAC) and the audit log's hash chain."""
    from reports import verify_audit_log, verify_manifest

    key = Settings().signing_key_bytes
    table = Table("item", "problems")
    bad = 0
    for m in sorted(reports_dir.glob("*.manifest.json")):
        problems = verify_manifest(m, key)
        bad += bool(problems)
        table.add_row(m.name, "; ".join(problems) or "ok")
    log = reports_dir / "audit_log.jsonl"
    if log.exists():
        problems = verify_audit_log(log)
        bad += bool(problems)
        table.add_row(log.name, "; ".join(problems) or "ok")
    console.print(table)
    if bad:
        raise typer.Exit(code=1)


if __name__ == "__main__":
    app()
