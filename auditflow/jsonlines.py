"""The one reader of the JSON-lines files a run writes (alerts, drift records, drift alerts)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path


def iter_json_lines(path: str | Path) -> Iterator[dict]:
    """Each record of a JSON-lines file, in file order (blank lines skipped). A line that is not
    JSON raises ``ValueError`` naming the file and the line."""
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError as e:
                    raise ValueError(f"{path}:{n}: not a JSON record ({e})") from None


def read_json_lines(path: str | Path, *, missing_ok: bool = False) -> list[dict]:
    """:func:`iter_json_lines` as a list; ``missing_ok``: a file that does not exist is empty."""
    if missing_ok and not Path(path).exists():
        return []
    return list(iter_json_lines(path))
