"""Which code produced a report: the ``code_version`` every report manifest records.

In a git checkout (the editable install ``make`` sets up, a CI workspace) it is
``git describe --always --dirty --tags --abbrev=12`` of the source tree, looked up at run time so
it names the commit actually running (``v1.2-3-g0123456789ab``, or ``0123456789ab-dirty`` with
uncommitted changes to tracked files), not the one installed last. Elsewhere (a wheel in a
container image) it is the installed distribution's version. The same code gives the same string;
the lookup runs once per process.
"""

from __future__ import annotations

import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "auditflow"
SOURCE_ROOT = Path(__file__).resolve().parent.parent


@cache
def distribution_version() -> str:
    """The installed distribution's version (``pyproject.toml``), or ``0+unknown``."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def git_describe(root: Path = SOURCE_ROOT) -> str | None:
    """``git describe`` of ``root`` when it is the top of a git checkout, else ``None``."""
    if not (root / ".git").exists():  # a directory, or a file in a worktree / submodule
        return None
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--tags", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):  # no git on the machine, or it hung
        return None
    described = proc.stdout.strip()
    return described if proc.returncode == 0 and described else None


@cache
def code_version() -> str:
    """``git describe`` of the source checkout, else the distribution version (cached)."""
    return git_describe() or distribution_version()
