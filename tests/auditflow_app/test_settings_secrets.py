"""The Neo4j password in the settings: read from its file into a SecretStr, never shown (repr,
JSON, the CLI's settings errors), handed to in-process stores as the password and to the stream
job only as the file's path."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import typer
from pydantic import ValidationError

from auditflow_app import cli
from auditflow.errors import ConfigError
from auditflow_app.settings import Settings


@pytest.fixture
def password() -> str:
    return "pw-" + secrets.token_urlsafe(24)


@pytest.fixture
def password_file(tmp_path: Path, password: str) -> Path:
    f = tmp_path / "neo4j-password"
    f.write_text(password + "\n")  # a trailing newline is not part of the password
    f.chmod(0o600)
    return f


def test_the_password_file_is_read_into_a_secret(monkeypatch, password, password_file):
    monkeypatch.setenv("AUDITFLOW_NEO4J_PASSWORD_FILE", str(password_file))
    s = Settings()
    assert s.neo4j_password is not None and s.neo4j_password.get_secret_value() == password
    for shown in (repr(s), str(s), s.model_dump_json(), repr(s.model_dump())):
        assert password not in shown
    assert str(password_file) in repr(s)  # the file's path is no secret


def test_in_process_stores_get_the_password_the_job_only_the_file(monkeypatch, password, password_file):
    monkeypatch.setenv("AUDITFLOW_NEO4J_PASSWORD_FILE", str(password_file))
    monkeypatch.setenv("AUDITFLOW_GRAPH_URL", "bolt://db.internal:7687")
    monkeypatch.setenv("AUDITFLOW_GRAPH_NAMESPACE", "ns1")
    s = Settings()
    # no user set: Neo4j's initial admin
    assert s.graph_options == {"user": "neo4j", "password": password, "namespace": "ns1"}
    assert s.graph_job_options == {"user": "neo4j", "password_file": str(password_file), "namespace": "ns1"}
    monkeypatch.setenv("AUDITFLOW_NEO4J_USER", "auditor")
    assert Settings().graph_job_options["user"] == "auditor"
    monkeypatch.setenv("AUDITFLOW_GRAPH_URL", "memory:")
    assert Settings().graph_options == Settings().graph_job_options == {}


def test_a_relative_password_file_reaches_the_job_as_an_absolute_path(monkeypatch, tmp_path, password_file):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AUDITFLOW_NEO4J_PASSWORD_FILE", password_file.name)
    s = Settings(graph_url="bolt://db:7687")
    assert s.graph_job_options["password_file"] == str(password_file)  # the TaskManager's cwd is not ours


def test_a_plain_password_never_goes_to_the_job(monkeypatch, password):
    monkeypatch.setenv("AUDITFLOW_NEO4J_PASSWORD", password)
    s = Settings(graph_url="bolt://db:7687")
    assert s.graph_options["password"] == password  # in this process: fine
    with pytest.raises(ConfigError, match="AUDITFLOW_NEO4J_PASSWORD_FILE") as err:
        s.graph_job_options
    assert password not in str(err.value)


def test_the_command_says_so_in_one_line_not_a_traceback(tmp_path, password):
    """``auditflow job submit`` with the password only in AUDITFLOW_NEO4J_PASSWORD: exit 2, the
    message naming the variable to set, no traceback and no password (before any server is asked)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDITFLOW_")}
    (tmp_path / "connector.jar").write_bytes(b"")  # only looked for: the settings check comes first
    env.update(AUDITFLOW_NEO4J_PASSWORD=password, AUDITFLOW_GRAPH_URL="bolt://127.0.0.1:1", AUDITFLOW_OUT_DIR=str(tmp_path),
               AUDITFLOW_FLINK_KAFKA_JAR=str(tmp_path / "connector.jar"))
    (tmp_path / "model").mkdir()
    proc = subprocess.run([sys.executable, "-m", "auditflow_app.cli", "job", "submit", "--detached", "--model-dir",
                           str(tmp_path / "model")], env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "AUDITFLOW_NEO4J_PASSWORD_FILE" in out and "Traceback" not in out and "ConfigError" not in out
    assert password not in out


def test_a_missing_password_file_is_an_error_naming_the_variable_and_the_path(monkeypatch, tmp_path):
    missing = tmp_path / "no-such-file"
    monkeypatch.setenv("AUDITFLOW_NEO4J_PASSWORD_FILE", str(missing))
    with pytest.raises(ValidationError) as err:
        Settings()
    (problem,) = err.value.errors()
    assert problem["loc"] == ("neo4j_password_file",)
    assert str(missing) in problem["msg"] and "No such file" in problem["msg"]


def test_an_empty_password_file_is_an_error(monkeypatch, tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("\n")
    monkeypatch.setenv("AUDITFLOW_NEO4J_PASSWORD_FILE", str(empty))
    with pytest.raises(ValidationError, match="is empty"):
        Settings()


def test_password_and_password_file_together_are_refused_without_showing_either(
        monkeypatch, capsys, password, password_file):
    other = "other-" + secrets.token_urlsafe(16)
    monkeypatch.setenv("AUDITFLOW_NEO4J_PASSWORD", other)
    monkeypatch.setenv("AUDITFLOW_NEO4J_PASSWORD_FILE", str(password_file))
    with pytest.raises(ValidationError, match="set one of the two"):
        Settings()
    with pytest.raises(typer.Exit):  # the CLI prints each failed field with its input
        cli._settings()
    out = capsys.readouterr()
    printed = out.out + out.err
    assert "AUDITFLOW_NEO4J_PASSWORD_FILE" in printed and "set one of the two" in printed
    assert other not in printed and password not in printed
