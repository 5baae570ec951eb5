"""Canonical JSON (RFC 8785, the JSON Canonicalization Scheme): the one form the product hashes
and signs.

Every digest, content address and signature over JSON (report manifests, audit log leaves,
tree heads, report and trace ids, the model cascade digest) is computed over
:func:`canonical_json`, which is the ``rfc8785`` library: keys sorted by their UTF-16 code
units, no whitespace, strings in UTF-8 with the minimal escapes, numbers in the ECMAScript
shortest form (``1.0`` is ``1``). Any JCS implementation in any language gives the same bytes.
Values JCS cannot carry exactly are refused (:class:`CanonicalJSONError`, a ``ValueError``):
NaN and infinities, integers beyond +-(2**53 - 1) (money is carried as decimal strings), and
types JSON has no form for.

>>> canonical_json({"b": [1.0, "\\u00e9"], "a": None})
b'{"a":null,"b":[1,"\\xc3\\xa9"]}'
>>> canonical_sha256({"a": 1}) == hashlib.sha256(b'{"a":1}').hexdigest()
True

Records written as lines (JSONL files, Kafka messages) use :func:`compact_json`: the standard
``json`` encoder without whitespace, keys sorted. It is a text form only, **not** the canonical
one: non-ASCII escaped as ``\\uXXXX``, Python's float form (``1.0`` stays ``1.0``), NaN written
as ``NaN``, integers of any size. Never hash or sign it.

>>> compact_json({"b": [1.0, "\\u00e9"], "a": None})
'{"a":null,"b":[1.0,"\\\\u00e9"]}'
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785

__all__ = ["CanonicalJSONError", "canonical_json", "canonical_sha256", "compact_json"]


class CanonicalJSONError(ValueError):
    """The value has no RFC 8785 form (NaN, an integer beyond 2**53, a non-JSON type)."""


#: JSON's exact integer range: JCS refuses integers beyond it.
_EXACT_INT = 2**53 - 1


def _plain(obj: Any) -> bool:
    """Whether the standard encoder's bytes of ``obj`` (keys sorted, no whitespace, UTF-8) are
    already its RFC 8785 bytes: no floats (their forms differ), integers within the exact range,
    keys in ASCII (sorted alike by code point and by UTF-16 unit); strings are escaped alike."""
    t = type(obj)
    if t is str or t is bool or obj is None:
        return True
    if t is int:
        return -_EXACT_INT <= obj <= _EXACT_INT
    if t is list or t is tuple:
        return all(map(_plain, obj))
    if t is dict:
        return all(type(k) is str and k.isascii() and _plain(v) for k, v in obj.items())
    return False


def canonical_json(obj: Any) -> bytes:
    """The RFC 8785 bytes of ``obj`` (dicts with string keys, lists or tuples, str, int, float,
    bool, None). Values without floats (ids, strings, small integers: trace ids over thousands
    of event ids) are encoded by ``json``, whose bytes are then the same and come several times
    faster; everything else by the ``rfc8785`` library."""
    if _plain(obj):
        try:
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
        except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form: the library says so below
            pass
    try:
        return rfc8785.dumps(obj)
    except rfc8785.CanonicalizationError as e:
        raise CanonicalJSONError(f"no canonical JSON form: {e}") from None


def canonical_sha256(obj: Any) -> str:
    """Hex SHA-256 of :func:`canonical_json` of ``obj``."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()


def compact_json(obj: Any) -> str:
    """The compact JSON text of a record: ``json.dumps`` with keys sorted and no whitespace. Not
    :func:`canonical_json` (see the module docstring): for writing records, never for hashing."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)
