"""Each test starts from a clean environment (no ``AUDITFLOW_*`` or Flink variables leak in from
the shell or ``deploy/services env``) in its own working directory, so defaults are the
settings' own and nothing lands in the repository's ``out/``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from ingest.synthetic import Dataset, generate, write_dataset


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in list(os.environ):
        if name.startswith("AUDITFLOW_") or name in ("FLINK_HOME", "FLINK_CONF_DIR"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def history(tmp_path_factory) -> tuple[Dataset, Path]:
    """A small labelled set to train on (3 % laundering)."""
    ds = generate(accounts=200, days=3, laundering_rate=0.03, seed=3)
    csv, _ = write_dataset(ds, tmp_path_factory.mktemp("history"), name="history")
    return ds, csv


@dataclass(frozen=True)
class Trained:
    csv: Path
    model_dir: Path
    output: str  # what ``auditflow train`` printed


@pytest.fixture(scope="session")
def trained(tmp_path_factory, history) -> Trained:
    """``auditflow train`` run once on ``history`` (a few seconds), with AUDITFLOW_SEED=3 and no
    --seed; tests/auditflow share the model."""
    from rich.console import Console
    from typer.testing import CliRunner

    from auditflow_app import cli

    model_dir = tmp_path_factory.mktemp("trained") / "model"
    saved, cli.console = cli.console, Console(width=200)
    try:
        result = CliRunner().invoke(cli.app, ["train", str(history[1]), "--model-dir", str(model_dir)],
                                    env={"AUDITFLOW_SEED": "3"})
    finally:
        cli.console = saved
    assert result.exit_code == 0, result.output + repr(result.exception)
    return Trained(history[1], model_dir, result.output)


@pytest.fixture(scope="session")
def model_dir(trained) -> Path:
    return trained.model_dir
