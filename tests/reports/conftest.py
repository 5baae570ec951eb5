"""Report tests read Settings() as a user's defaults: no AUDITFLOW_* variable from the shell or
left behind by earlier tests (PyFlink's loopback Python workers, which run inside the test process,
put the environment of the job they ran back into os.environ)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def clean_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AUDITFLOW_"):
            monkeypatch.delenv(name)
