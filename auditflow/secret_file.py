"""Secrets kept in files, passed around by path: one reading rule for every reader.

A secret file holds the secret on its first line (surrounding whitespace, such as the trailing
newline an editor or ``echo`` adds, is not part of it: the same rule ``deploy/neo4j/Neo4jServer.java``
applies). Code that must ship a secret to another process -- a Flink job graph, a command line --
ships the file's path and reads the file where the secret is used, so the secret itself is never
pickled, logged or shown in a process list.

>>> import tempfile, os
>>> with tempfile.NamedTemporaryFile("w", delete=False) as fh:
...     _ = fh.write("s3cret\\n")
>>> read_secret_file(fh.name)
's3cret'
>>> os.unlink(fh.name)
>>> read_secret_file(fh.name)  # doctest: +ELLIPSIS
Traceback (most recent call last):
auditflow.secret_file.SecretFileError: cannot read secret file ...: No such file or directory
"""

from __future__ import annotations

import os
from pathlib import Path


class SecretFileError(ValueError):
    """A secret file is missing, unreadable or empty; the message names the file, never its content."""


def read_secret_file(path: str | os.PathLike[str]) -> str:
    """The secret in ``path`` (stripped); :class:`SecretFileError` naming the path otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SecretFileError(f"cannot read secret file {str(path)!r}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SecretFileError(f"secret file {str(path)!r} is not UTF-8 text") from None
    secret = text.strip()
    if not secret:
        raise SecretFileError(f"secret file {str(path)!r} is empty")
    if "\n" in secret:
        raise SecretFileError(f"secret file {str(path)!r} has more than one line")
    return secret
