"""The Flink client side of the Kafka job: what it restores from, the ``flink run -py`` command line
that submits it to a session cluster, and the submitted job's id and counters read back.

Everything here takes plain arguments (paths, URLs, flags, the client's environment); the app
layer reads them from its settings (:mod:`auditflow_app.flow`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from pipelines import kafka_job
from pipelines.kafka_job import KafkaJobConfig, latest_checkpoint
from pipelines.stream_job import StreamSpec

#: Left behind in the environment by a local PyFlink job run earlier in this process (loopback
#: mode, for its Python workers); a ``flink run`` client must not inherit them.
LOOPBACK_ENV = ("PYFLINK_GATEWAY_DISABLED", "PYTHON_LOOPBACK_SERVER_ADDRESS", "_PYFLINK_CONN_INFO_PATH")
DEFAULT_REST_PORT = 8081


def restore_path(checkpoint_dir: str | Path, from_savepoint: str | Path | None = None,
                 resume: bool = False) -> Path | None:
    """What a Kafka job restores from: ``from_savepoint`` (a savepoint or retained checkpoint
    directory), else with ``resume`` the newest retained checkpoint under ``checkpoint_dir``
    (``FileNotFoundError`` if there is none), else nothing (start at the group's offsets)."""
    if from_savepoint is not None:
        path = Path(from_savepoint)
        if not (path / "_metadata").is_file():
            raise FileNotFoundError(f"--from-savepoint {path}: no _metadata there (not a savepoint or checkpoint)")
        return path
    if resume:
        found = latest_checkpoint(checkpoint_dir)
        if found is None:
            raise FileNotFoundError(f"--resume: no retained checkpoint under {checkpoint_dir}")
        return found
    return None


def default_flink_home() -> str:
    """The Flink distribution inside the installed ``pyflink`` package."""
    import pyflink

    return str(Path(pyflink.__file__).resolve().parent)


def flink_run_command(cfg: KafkaJobConfig, model_dir: str | Path, spec: StreamSpec, *, flink_home: str,
                      rest_url: str, drift_reference: str | Path | None = None,
                      drift_rules_file: str | Path | None = None, detached: bool = False,
                      python: str = sys.executable) -> list[str]:
    """``bin/flink run -py pipelines/kafka_job.py ARGS`` of the job (:func:`kafka_job.job_arguments`)
    against the cluster whose REST API is at ``rest_url``; ``python``: the interpreter the job runs with."""
    from urllib.parse import urlparse

    rest = urlparse(rest_url)
    return [os.path.join(flink_home, "bin", "flink"), "run", *(["--detached"] if detached else []),
            "-D", f"rest.address={rest.hostname}", "-D", f"rest.port={rest.port or DEFAULT_REST_PORT}",
            "-pyexec", python, "-py", str(Path(kafka_job.__file__).resolve()),
            *kafka_job.job_arguments(cfg, model_dir, spec, drift_reference=drift_reference,
                                     drift_rules_file=drift_rules_file),
            *(["--detached"] if detached else [])]


def client_environment(base: Mapping[str, str], flink_home: str, flink_conf_dir: str | Path | None = None) -> dict[str, str]:
    """The ``flink`` client's environment: ``base`` (the job's settings are its arguments) less
    :data:`LOOPBACK_ENV`, with ``FLINK_HOME`` and, where given, ``FLINK_CONF_DIR``."""
    env = {k: v for k, v in base.items() if k not in LOOPBACK_ENV}
    env["FLINK_HOME"] = flink_home
    if flink_conf_dir:
        env["FLINK_CONF_DIR"] = str(flink_conf_dir)
    return env


def submit(cfg: KafkaJobConfig, model_dir: str | Path, spec: StreamSpec, *, rest_url: str, base_env: Mapping[str, str],
           flink_home: str | Path | None = None, flink_conf_dir: str | Path | None = None,
           drift_reference: str | Path | None = None, drift_rules_file: str | Path | None = None,
           timeout_s: float = 1800, detached: bool = False) -> subprocess.CompletedProcess:
    """Submit the job to the session cluster with ``flink run -py`` and wait for it (with
    ``detached``, only until the cluster accepted it: the output names its JobID).

    ``flink_home``: the Flink distribution whose ``bin/flink`` submits (default
    :func:`default_flink_home`); ``flink_conf_dir``: the cluster's configuration. Raises
    ``RuntimeError`` with the client's output."""
    home = str(flink_home or default_flink_home())
    cmd = flink_run_command(cfg, model_dir, spec, flink_home=home, rest_url=rest_url, drift_reference=drift_reference,
                            drift_rules_file=drift_rules_file, detached=detached)
    proc = subprocess.run(cmd, env=client_environment(base_env, home, flink_conf_dir), capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"flink run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def cluster_job_id(client_output: str) -> str:
    """The id of the job the ``flink run`` client submitted, from its output."""
    ids = re.findall(r"JobID ([0-9a-f]{32})", client_output)
    if not ids:
        raise RuntimeError(f"no JobID in the flink client's output:\n{client_output[-2000:]}")
    return ids[-1]


def cluster_job_counts(rest_url: str, client_output: str) -> dict[str, int]:
    """The job's own counters (accumulators) from the cluster's REST API at ``rest_url``, for the
    job whose id the ``flink run`` client printed."""
    url = f"{rest_url.rstrip('/')}/jobs/{cluster_job_id(client_output)}/accumulators"
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = json.loads(resp.read())
    acc = {a["name"]: a["value"] for a in body.get("user-task-accumulators", [])}
    return {"processed": int(acc.get("auditflow.processed", 0)), "duplicate": int(acc.get("auditflow.duplicate", 0))}
