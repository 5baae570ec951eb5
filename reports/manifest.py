"""Signing and verifying report manifests (HMAC-SHA256 over the canonical JSON body).

The canonical form is RFC 8785 (:func:`auditflow.canonical.canonical_json`), so anyone holding
the key can recompute the signature with any JCS implementation.

>>> from auditflow.records import ReportManifest
>>> m = ReportManifest("report-1", "alert-tx-1", (("alert-tx-1.pdf", "ab" * 32),), "cd" * 32,
...                    "model-1", "trace-1", "v1", 7)
>>> signed = sign_manifest(m, b"k")
>>> manifest_signature(signed, b"k") == signed.signature, len(signed.signature)
(True, 64)
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from auditflow.canonical import canonical_json
from auditflow.errors import FieldError
from auditflow.records import ReportManifest

SIGNATURE_ALGORITHM = "HMAC-SHA256"




def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_key(signing_key: bytes) -> None:
    if not isinstance(signing_key, (bytes, bytearray)) or not signing_key:
        raise ValueError("signing_key must be non-empty bytes")


def manifest_signature(manifest: ReportManifest, signing_key: bytes) -> str:
    """Hex HMAC-SHA256 of the canonical JSON of ``manifest.body()``."""
    _check_key(signing_key)
    return hmac.new(bytes(signing_key), canonical_json(manifest.body()), hashlib.sha256).hexdigest()


def sign_manifest(manifest: ReportManifest, signing_key: bytes) -> ReportManifest:
    return replace(manifest, signature=manifest_signature(manifest, signing_key))


def _safe_file_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


def write_manifest(manifest: ReportManifest, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(manifest.to_json() + "\n", encoding="ascii")
    tmp.replace(path)


def verify_manifest(manifest_path: str | Path, signing_key: bytes) -> list[str]:
    """Problems with a manifest and the files it lists (empty list = valid).

    Checks, in order: the manifest parses and is in its canonical field form; the signature
    matches the body under ``signing_key``; every listed file exists next to the manifest and
    hashes to the recorded SHA-256.
    """
    _check_key(signing_key)
    path = Path(manifest_path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [f"{path.name}: manifest not found"]
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return [f"{path.name}: manifest is not readable JSON ({e})"]
    if not isinstance(raw, dict):
        return [f"{path.name}: manifest is not a JSON object"]
    try:
        manifest = ReportManifest.from_dict(raw)
    except (FieldError, KeyError, TypeError, ValueError) as e:
        return [f"{path.name}: manifest fields invalid ({e!r})"]

    problems: list[str] = []
    if manifest.to_dict() != raw:
        unknown = sorted(set(raw) - set(manifest.to_dict()))
        detail = f"unknown fields {unknown}" if unknown else "field values not in canonical form"
        problems.append(f"{path.name}: {detail}")
    expected = manifest_signature(manifest, signing_key)
    if not hmac.compare_digest(expected, str(manifest.signature)):
        problems.append(f"{path.name}: signature does not match the manifest body")
    for name, digest in manifest.files:
        if not _safe_file_name(name):
            problems.append(f"{path.name}: file name {name!r} is not a plain name in the same folder")
            continue
        target = path.parent / name
        try:
            actual = sha256_hex(target.read_bytes())
        except FileNotFoundError:
            problems.append(f"{name}: listed in the manifest but missing")
            continue
        except OSError as e:
            problems.append(f"{name}: cannot be read ({e})")
            continue
        if actual != digest:
            problems.append(f"{name}: sha256 {actual} does not match the manifest's {digest}")
    return problems
