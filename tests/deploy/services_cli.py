"""``deploy/services`` as the deploy tests call it: a subcommand, and the client settings ``env``
prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

SERVICES = Path(__file__).resolve().parents[2] / "deploy" / "services"


def services(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(SERVICES), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "AUDITFLOW_PYTHON": sys.executable})


def client_settings() -> dict[str, str]:
    """The client settings exactly as `deploy/services env` prints them."""
    res = services("env", timeout=900)
    assert res.returncode == 0, res.stderr
    found = dict(re.findall(r"^export (\w+)=(.*)$", res.stdout, re.M))
    return {k: v.strip("'") for k, v in found.items()}
