"""The CLI through typer's runner: what each command writes and prints, checked against counts
computed here from the files themselves; options left out fall back to AUDITFLOW_* settings."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from auditflow_app import cli
from auditflow.records import EvidenceTrace, TransactionEvent
from evidence_graph import NetworkxGraphStore
from evidence_graph.testing import acct, chain, tx
from ingest.amlworld import read_patterns, read_transactions, row_key
from ingest.synthetic import generate

runner = CliRunner()


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Tables wide enough that no cell wraps (the runner's terminal is 80 columns)."""
    monkeypatch.setattr(cli, "console", Console(width=200))


def invoke(*args: str) -> str:
    result = runner.invoke(cli.app, [str(a) for a in args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def table_rows(output: str) -> dict[str, str]:
    """``│ label │ value │`` rows of the printed tables -> {label: value}."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == 2 and line.lstrip().startswith("│"):
            rows[cells[0]] = cells[1]
    return rows


def data_rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))[1:]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------ version


def test_version_prints_the_project_version_and_the_code_version(monkeypatch):
    """``auditflow --version`` (no command needed): ``pyproject.toml``'s version, and the code version
    reports record when it says more (a git checkout)."""
    import tomllib

    from auditflow import version as V

    shipped = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["version"]
    monkeypatch.setattr(V, "code_version", lambda: "0123456789ab-dirty")
    assert invoke("--version") == f"auditflow {shipped} (code 0123456789ab-dirty)\n"
    monkeypatch.setattr(V, "code_version", lambda: shipped)  # an installed wheel: nothing more to say
    assert invoke("--version") == f"auditflow {shipped}\n"
    assert "Usage" in runner.invoke(cli.app, []).output  # no arguments: still the help


# ------------------------------------------------------------------ generate


def test_generate_writes_the_rows_and_answer_key_it_reports(tmp_path):
    out = invoke("generate", "--out", tmp_path / "d", "--accounts", 60, "--days", 1, "--seed", 3, "--name", "t")
    trans, patterns = tmp_path / "d" / "t_Trans.csv", tmp_path / "d" / "t_Patterns.txt"
    rows = data_rows(trans)
    laundering = [r for r in rows if r[-1] == "1"]
    attempts = list(read_patterns(patterns))
    assert f"wrote {len(rows)} transactions ({len(laundering)} laundering, {len(attempts)} attempts)" in out
    assert len(attempts) == sum(1 for line in patterns.read_text().splitlines() if line.startswith("BEGIN"))
    # every answer-key row is a laundering row of the CSV (the rest are lone laundering transfers)
    laundering_keys = {row_key(r) for r in laundering}
    key_rows = set().union(*(a.row_keys() for a in attempts))
    assert key_rows and key_rows <= laundering_keys
    # the same as the generator called directly with these arguments
    ds = generate(accounts=60, days=1, seed=3)
    assert (len(ds.events), ds.laundering_count, len(ds.attempts)) == (len(rows), len(laundering), len(attempts))


def test_generate_takes_seed_and_out_dir_from_the_settings(tmp_path, monkeypatch):
    invoke("generate", "--out", tmp_path / "s3", "--accounts", 40, "--days", 1, "--seed", 3)
    invoke("generate", "--out", tmp_path / "s4", "--accounts", 40, "--days", 1, "--seed", 4)
    monkeypatch.setenv("AUDITFLOW_SEED", "3")
    monkeypatch.setenv("AUDITFLOW_OUT_DIR", str(tmp_path / "envout"))
    invoke("generate", "--accounts", 40, "--days", 1)  # no --seed, no --out
    from_env = tmp_path / "envout" / "data" / "synthetic_Trans.csv"
    assert sha(from_env) == sha(tmp_path / "s3" / "synthetic_Trans.csv")
    assert sha(from_env) != sha(tmp_path / "s4" / "synthetic_Trans.csv")


# ------------------------------------------------------------------ import

BAD_LINES = [  # each is one rejected row
    "2022/09/01 00:10,010,800A1,011,800B2,12.3.4,US Dollar,1.00,US Dollar,Wire,0",  # amount
    "2022/09/01 00:11,010,800A1,011,800B2,1.00,Doubloon,1.00,US Dollar,Wire,0",  # currency
    "not,a,row",  # column count
]


@pytest.fixture
def messy_file(tmp_path) -> tuple[Path, Path]:
    """A generated file plus three bad rows, and its answer key."""
    gen = tmp_path / "gen"
    invoke("generate", "--out", gen, "--accounts", 60, "--days", 1, "--seed", 5, "--name", "m")
    src = tmp_path / "messy_Trans.csv"
    src.write_text((gen / "m_Trans.csv").read_text() + "\n".join(BAD_LINES) + "\n")
    return src, gen / "m_Patterns.txt"


def expected_counts(src: Path) -> dict:
    """Computed from the file with the csv module: good rows have 11 fields and a known currency."""
    from auditflow.money import CURRENCIES

    rows = data_rows(src)
    good = [r for r in rows if len(r) == 11 and r[6] in CURRENCIES and r[8] in CURRENCIES and r[5].count(".") <= 1]
    currencies: Counter[str] = Counter()
    for r in good:
        currencies[r[8]] += 1
        if r[6] != r[8]:
            currencies[r[6]] += 1
    return {"rows_read": len(rows), "accepted": len(good), "rejected": len(rows) - len(good),
            "laundering": sum(r[10] == "1" for r in good), "currencies": dict(currencies),
            "payment_formats": dict(Counter(r[9] for r in good))}


def test_import_prints_tables_with_the_counts_of_the_file(messy_file, tmp_path):
    src, patterns = messy_file
    want = expected_counts(src)
    assert want["rejected"] == len(BAD_LINES)
    out = invoke("import", src, "--out", tmp_path / "imp", "--patterns", patterns)
    rows = table_rows(out)
    assert rows["Rows read"] == f"{want['rows_read']:,}"
    assert rows["Accepted"] == f"{want['accepted']:,}"
    assert rows["Rejected"] == str(len(BAD_LINES))
    assert rows["Laundering (accepted)"] == f"{want['laundering']:,}"
    for currency, n in want["currencies"].items():
        assert rows[currency] == f"{n:,}"
    for fmt, n in want["payment_formats"].items():
        assert rows[fmt] == f"{n:,}"
    attempts = list(read_patterns(patterns))
    assert rows["Attempts"] == str(len(attempts))
    assert "ImportSummary(" not in out and '"rows_read"' not in out  # a table, not a repr or JSON
    rejects = (tmp_path / "imp" / "rejects.jsonl").read_text().splitlines()
    assert len(rejects) == len(BAD_LINES)


def test_import_json_parses_and_matches_the_file(messy_file, tmp_path):
    src, _ = messy_file
    want = expected_counts(src)
    out = invoke("import", src, "--out", tmp_path / "imp", "--json")
    got = json.loads(out)
    assert {k: got[k] for k in want} == want
    assert got == json.loads((tmp_path / "imp" / "import_summary.json").read_text())


def test_import_defaults_to_the_configured_out_dir(messy_file, tmp_path, monkeypatch):
    monkeypatch.setenv("AUDITFLOW_OUT_DIR", str(tmp_path / "cfg"))
    invoke("import", messy_file[0], "--json")
    assert (tmp_path / "cfg" / "import" / "messy_Trans.csv").is_file()


# ------------------------------------------------------------------ train


def test_train_prints_tables_with_the_files_counts(trained):
    report = json.loads((trained.model_dir / "training_report.json").read_text())
    assert report["seed"] == 3  # from AUDITFLOW_SEED: no --seed given
    rows = data_rows(trained.csv)
    assert sum(s["n_events"] for s in report["splits"]) == len(rows)
    assert sum(s["n_positive"] for s in report["splits"]) == sum(r[-1] == "1" for r in rows)
    tables = trained.output
    for split in report["splits"]:
        assert re.search(rf"│ {split['name']}\s+│\s+{split['n_events']:,}\s+│\s+{split['n_positive']:,}\s+│", tables)
    c = report["cascade_test"]
    assert re.search(rf"│ cascade\s+│\s+{c['precision']:.3f}\s+│\s+{c['recall']:.3f}\s+│\s+{c['f1']:.3f}\s+│", tables)
    assert table_rows(tables)["Seed"] == "3"
    assert "{" not in tables  # tables, not a JSON dump


def test_train_json_prints_the_report_and_defaults_follow_the_settings(tmp_path, monkeypatch, history):
    calls = []

    def fake_train(data, model_dir, settings):
        calls.append((Path(data), Path(model_dir), settings.seed))
        return {"seed": settings.seed, "cascade_test": {"f1": 0.5}, "total_seconds": 1.25}

    monkeypatch.setattr(cli.flow, "train", fake_train)
    monkeypatch.setenv("AUDITFLOW_SEED", "5")
    monkeypatch.setenv("AUDITFLOW_OUT_DIR", str(tmp_path / "cfg"))
    out = invoke("train", history[1], "--json")
    assert json.loads(out) == {"seed": 5, "cascade_test": {"f1": 0.5}, "total_seconds": 1.25}
    assert calls == [(history[1], tmp_path / "cfg" / "model", 5)]
    invoke("train", history[1], "--json", "--seed", "6", "--model-dir", tmp_path / "m")
    assert calls[-1] == (history[1], tmp_path / "m", 6)


# ------------------------------------------------------------------ trace


@pytest.fixture
def graph_dir(tmp_path) -> Path:
    """A hand-built graph: A -> B -> C -> D -> E -> F -> G (minutes 0..5) and A -> X1, X2, X3
    at minutes 1..3, so A's two earliest payments go to B and X1."""
    run = tmp_path / "run"
    run.mkdir()
    store = NetworkxGraphStore(run / "graph.jsonl")
    store.add_transactions([*chain("ABCDEFG"), *(tx(f"x{i}", "A", f"X{i}", i) for i in (1, 2, 3))])
    store.close()
    return run


def trace_depths(*args: str) -> dict[str, int]:
    t = EvidenceTrace.from_dict(json.loads(invoke("trace", acct("A"), *args)))
    return {node.removeprefix("001/"): d for node, d in t.depths().items()}


CHAIN = {"A": 0, "B": 1, "C": 2, "D": 3, "E": 4, "F": 5, "G": 6}
XS = {"X1": 1, "X2": 1, "X3": 1}


def upto(hops: int) -> dict[str, int]:
    return {n: d for n, d in CHAIN.items() if d <= hops}


def test_trace_returns_the_hand_built_paths(graph_dir):
    assert trace_depths("--out", graph_dir) == {**upto(5), **XS}  # default: 5 hops, cap 50
    assert trace_depths("--out", graph_dir, "--hops", 2) == {**upto(2), **XS}


def test_trace_honours_the_configured_hops_and_fanout_cap(graph_dir, monkeypatch):
    monkeypatch.setenv("AUDITFLOW_OUT_DIR", str(graph_dir))  # the graph is found through the settings
    monkeypatch.setenv("AUDITFLOW_TRACE_HOPS", "2")
    assert trace_depths() == {**upto(2), **XS}
    assert trace_depths("--hops", 3) == {**upto(3), **XS}  # an option beats the environment
    monkeypatch.setenv("AUDITFLOW_TRACE_FANOUT_CAP", "2")
    assert trace_depths() == {**upto(2), "X1": 1}  # A keeps its 2 earliest payments: B and X1
    assert trace_depths("--fanout-cap", 3) == {**upto(2), "X1": 1, "X2": 1}


def test_trace_refuses_invalid_settings_naming_variable_and_value(graph_dir, monkeypatch):
    monkeypatch.setenv("AUDITFLOW_TRACE_HOPS", "9")
    result = runner.invoke(cli.app, ["trace", acct("A"), "--out", str(graph_dir)])
    assert result.exit_code == 2
    assert "AUDITFLOW_TRACE_HOPS='9'" in " ".join(result.output.split())


# ------------------------------------------------------------------ verify


@pytest.fixture
def reports_dir(tmp_path, monkeypatch) -> Path:
    """Two signed reports (hand-built alerts, no pipeline) under the configured signing key."""
    from reports.signing import generate_key_file
    from reports.testing import make_reports_folder

    signer = generate_key_file(tmp_path / "signing.pem")
    monkeypatch.setenv("AUDITFLOW_SIGNING_KEY_FILE", str(tmp_path / "signing.pem"))
    monkeypatch.setenv("AUDITFLOW_OUT_DIR", str(tmp_path / "out"))  # no cases store of another run
    out = tmp_path / "reports"
    make_reports_folder(out, 2, signer=signer)
    return out


def test_verify_passes_then_fails_on_a_tampered_manifest_naming_it(reports_dir):
    out = invoke("verify", reports_dir)
    assert "verified: 2 reports, 4 files, audit log of 2 entries" in " ".join(out.split())
    manifest = sorted(reports_dir.glob("*.manifest.json"))[0]
    d = json.loads(manifest.read_text())
    d["seed"] = 8
    manifest.write_text(json.dumps(d))
    result = runner.invoke(cli.app, ["verify", str(reports_dir)])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert manifest.name in text and "signature does not verify" in text and "FAILED" in text


def test_verify_uses_the_configured_key(reports_dir, monkeypatch):
    from reports.signing import generate_key_file

    generate_key_file(reports_dir.parent / "another.pem")
    monkeypatch.setenv("AUDITFLOW_SIGNING_KEY_FILE", str(reports_dir.parent / "another.pem"))
    result = runner.invoke(cli.app, ["verify", str(reports_dir)])
    assert result.exit_code == 1 and "not among the trusted keys" in " ".join(result.output.split())
    # a published keyring holding the old key keeps its reports verifiable (rotation)
    invoke("keys", "publish", reports_dir.parent / "keyring.json")  # the new key
    monkeypatch.setenv("AUDITFLOW_SIGNING_KEY_FILE", str(reports_dir.parent / "signing.pem"))
    invoke("keys", "publish", reports_dir.parent / "keyring.json")  # and the old one
    monkeypatch.setenv("AUDITFLOW_SIGNING_KEY_FILE", str(reports_dir.parent / "another.pem"))
    monkeypatch.setenv("AUDITFLOW_TRUSTED_KEYS_FILE", str(reports_dir.parent / "keyring.json"))
    invoke("verify", reports_dir)


def test_verify_with_a_kept_tree_head_catches_a_cut_log(reports_dir, tmp_path):
    invoke("tree-head", reports_dir, "--out", tmp_path / "kept.json")
    log = reports_dir / "audit_log.jsonl"
    log.write_bytes(log.read_bytes().splitlines(keepends=True)[0])
    result = runner.invoke(cli.app, ["verify", str(reports_dir), "--tree-head", str(tmp_path / "kept.json")])
    assert result.exit_code == 1
    assert "records 2 log entries, the log has 1" in " ".join(result.output.split())


def test_verify_of_an_empty_folder_fails(tmp_path):
    (tmp_path / "empty").mkdir()
    from reports.signing import generate_key_file

    generate_key_file(tmp_path / "k.pem")
    result = runner.invoke(cli.app, ["verify", str(tmp_path / "empty")],
                           env={"AUDITFLOW_SIGNING_KEY_FILE": str(tmp_path / "k.pem")})
    assert result.exit_code == 1 and "nothing to verify" in " ".join(result.output.split())


def test_keys_new_never_overwrites(tmp_path):
    out = invoke("keys", "new", tmp_path / "k.pem")
    assert "key id ed25519:" in out
    result = runner.invoke(cli.app, ["keys", "new", str(tmp_path / "k.pem")])
    assert result.exit_code == 2 and "not overwriting" in result.output


# ------------------------------------------------------------------ run (one Flink job)


@pytest.mark.flink
def test_run_counts_balance_on_a_memory_graph(model_dir, tmp_path, monkeypatch):
    """"Processed" is the job's own count: with a ``memory:`` graph (nothing the CLI could count
    edges in) the run still balances and writes its summary."""
    invoke("generate", "--out", tmp_path, "--accounts", 80, "--days", 1, "--seed", 9, "--name", "live")
    csv_path = tmp_path / "live_Trans.csv"
    with open(csv_path, "a") as fh:
        fh.write(BAD_LINES[0] + "\n")
    monkeypatch.setenv("AUDITFLOW_GRAPH_URL", "memory:")
    refused = runner.invoke(cli.app, ["run", str(csv_path), "--model-dir", str(model_dir), "--out", str(tmp_path / "run")])
    assert refused.exit_code == 2 and "development key" in refused.output  # no key: refused before the job
    from reports.signing import generate_key_file

    generate_key_file(tmp_path / "signing.pem")
    monkeypatch.setenv("AUDITFLOW_SIGNING_KEY_FILE", str(tmp_path / "signing.pem"))
    out = invoke("run", csv_path, "--model-dir", model_dir, "--out", tmp_path / "run", "--max-reports", 1)
    summary = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    rows = data_rows(csv_path)
    good = sum(1 for e in read_transactions(csv_path) if isinstance(e, TransactionEvent))
    assert (summary["events_in"], summary["processed"], summary["rejected"]) == (len(rows), good, 1)
    assert "count check failed" not in out
    assert f"{summary['events_in']} in = {summary['processed']} processed + 1 rejected" in out
    # the deep path's time is recorded for the alert that went through it (--max-reports 1), not the rest
    alerts = [json.loads(x) for x in (tmp_path / "run" / "alerts.jsonl").read_text().splitlines()]
    timed = [a for a in alerts if a["deep_ms"] is not None]
    assert len(timed) == 1 and timed[0]["report"] and timed[0]["deep_ms"] > 0


def test_verify_names_the_root_cause_first_and_folds_the_rest(tmp_path, monkeypatch):
    from reports.signing import generate_key_file
    from reports.testing import make_reports_folder

    signer = generate_key_file(tmp_path / "signing.pem")
    monkeypatch.setenv("AUDITFLOW_SIGNING_KEY_FILE", str(tmp_path / "signing.pem"))
    monkeypatch.setenv("AUDITFLOW_OUT_DIR", str(tmp_path / "out"))
    out = tmp_path / "reports"
    make_reports_folder(out, 12, signer=signer)
    log = out / "audit_log.jsonl"
    lines = log.read_bytes().split(b"\n")
    i = lines[5].index(b"tx-") + 5
    lines[5] = lines[5][:i] + (b"9" if lines[5][i:i + 1] != b"9" else b"8") + lines[5][i + 1:]
    log.write_bytes(b"\n".join(lines))
    result = runner.invoke(cli.app, ["verify", str(out)])
    assert result.exit_code == 1
    shown = result.output.splitlines()
    assert shown[0].startswith("root cause: log entry 5: was rewritten: it is not the entry the signed manifest "
                               "alert-tx-0000000000000005.manifest.json records there"), shown[:3]
    assert shown[1] == "what follows from it:"
    assert "  log entries 0-11: inclusion proof does not verify against the signed tree head (12x)" in shown
    assert len(shown) < 12  # 16 problems, folded: each kind of failure once, nothing cut (no line wraps)


def test_verify_without_any_trusted_key_is_one_line(reports_dir, monkeypatch):
    monkeypatch.delenv("AUDITFLOW_SIGNING_KEY_FILE")
    monkeypatch.delenv("AUDITFLOW_TRUSTED_KEYS_FILE", raising=False)
    result = runner.invoke(cli.app, ["verify", str(reports_dir)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: no trusted public key to check signatures with: set AUDITFLOW_TRUSTED_KEYS_FILE (a published "
        "keyring) or AUDITFLOW_SIGNING_KEY_FILE; the demo's reports: --allow-dev-key"
    ]
