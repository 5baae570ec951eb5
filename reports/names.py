"""Report file names: a safe, collision-free function of the alert (or period) id.

An id that is already a plain, short name (``[A-Za-z0-9._-]``, starting with a letter or digit,
at most :data:`MAX_FILE_STEM` characters) is used as is; any other id (a ``/``, a control
character, a name longer than a file system allows...) gets its safe characters, cut short, then
``~`` and a 64-bit hash of the whole id, so two ids never share a name. A later *version* of a
report (same alert, different content) is ``<stem>@<n>`` (n >= 2): ``@`` is in no stem.

>>> report_file_stem("alert-tx-4b1d0c9e7f2a3b65")
'alert-tx-4b1d0c9e7f2a3b65'
>>> report_file_stem("alert-01/0X")
'alert-01_0X~55d1233b25c6c73c'
>>> versioned_stem("alert-42", 1), versioned_stem("alert-42", 3), base_stem("alert-42@3")
('alert-42', 'alert-42@3', ('alert-42', 3))
"""

from __future__ import annotations

import hashlib
import re

#: The longest file stem; with the longest suffix (``.manifest.json.tmp``) far below the 255
#: bytes a file name may have.
MAX_FILE_STEM = 120
_PLAIN_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_STEM_HASH = 16  # hex digits: 64 bits


def report_file_stem(alert_id: str) -> str:
    """The file name stem of an alert's report files (``<stem>.pdf``, ``.trace.json``,
    ``.manifest.json``): the id itself when it is a plain short name, else its safe characters
    (others as ``_``, cut short) + ``~`` + a hash of the whole id. A plain stem never holds ``~``,
    so it cannot meet a hashed one; two hashed stems meet only if 64 bits of SHA-256 do."""
    if len(alert_id) <= MAX_FILE_STEM and _PLAIN_STEM.fullmatch(alert_id):
        return alert_id
    digest = hashlib.sha256(alert_id.encode("utf-8", "surrogatepass")).hexdigest()[:_STEM_HASH]
    kept = _UNSAFE.sub("_", alert_id).lstrip("._-")[: MAX_FILE_STEM - 1 - _STEM_HASH]
    return f"{kept}~{digest}"


_VERSION = re.compile(r"(.+)@([2-9]|[1-9][0-9]+)")


def versioned_stem(stem: str, version: int) -> str:
    """The stem of a report's ``version`` (1: the stem itself)."""
    return stem if version == 1 else f"{stem}@{version}"


def base_stem(stem: str) -> tuple[str, int]:
    """(stem without the version, version) of a versioned stem."""
    m = _VERSION.fullmatch(stem)
    return (m[1], int(m[2])) if m else (stem, 1)


def period_file_stem(period_id: str) -> str:
    """The stem of a period report: ``period-`` + the period id (``daily-2022-09-01``)."""
    return report_file_stem(f"period-{period_id}")
