"""The one reader and the one writer of the JSON-lines files a run or an import writes (alerts,
rejects, drift records, drift alerts).

A line is the record's JSON with sorted keys, no spaces (``","`` and ``":"``) and non-ASCII
characters escaped (``ensure_ascii``), then ``"\n"`` (on every platform); a record given as a
string is taken as its JSON already (a ``to_json()`` of :mod:`auditflow.records`, which spells
records the same way) and written as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any


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


def json_line(record: Any) -> str:
    """One record as a line (see the module docstring): a ``str`` as it is, anything else as JSON."""
    return (record if isinstance(record, str) else json.dumps(record, sort_keys=True, separators=(",", ":"))) + "\n"


def open_json_lines(path: str | Path, *, append: bool = False) -> IO[str]:
    """``path`` opened to write JSON lines into (UTF-8, ``"\n"`` as written), for a writer that
    streams records one at a time (:func:`json_line`) alongside other work."""
    return open(path, "a" if append else "w", encoding="utf-8", newline="\n")


def write_json_lines(path: str | Path, records: Iterable[Any], *, append: bool = False) -> int:
    """Write one :func:`json_line` per record (streams ``records``; after what the file holds
    where ``append``); returns how many."""
    n = 0
    with open_json_lines(path, append=append) as fh:
        for r in records:
            fh.write(json_line(r))
            n += 1
    return n
