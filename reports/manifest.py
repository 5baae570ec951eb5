"""Signing and verifying report manifests: Ed25519 over the RFC 8785 canonical body.

The signed bytes are :func:`auditflow.canonical.canonical_json` of
:meth:`~auditflow.records.ReportManifest.body` (every field but ``signature``, the key id
included), so anyone holding the published public key can check a manifest with any JCS and
Ed25519 implementation. Verifying takes a :class:`~reports.signing.Keyring` of trusted public
keys: a manifest signed by any other key (the development key included) is reported.

>>> from auditflow.records import ReportManifest
>>> from reports.signing import Keyring, Signer
>>> signer = Signer.from_seed(bytes(32))
>>> m = ReportManifest("report-1", "alert-tx-1", (("alert-tx-1.pdf", "ab" * 32),), "cd" * 32,
...                    "model-1", "trace-1", "v1", 7)
>>> signed = sign_manifest(m, signer)
>>> signed.key_id, manifest_problem(signed, Keyring([signer.public_key])) is None
('ed25519:139e3940e64b5491', True)
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

from auditflow.canonical import CanonicalJSONError, canonical_json
from auditflow.errors import FieldError
from auditflow.records import ReportManifest
from reports.signing import ALGORITHM, Keyring, Signer

SIGNATURE_ALGORITHM = ALGORITHM


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def signed_bytes(manifest: ReportManifest) -> bytes:
    """What the signature covers: the canonical JSON of the body (key id included)."""
    return canonical_json(manifest.body())


def sign_manifest(manifest: ReportManifest, signer: Signer) -> ReportManifest:
    """``manifest`` with ``key_id`` set to the signer's and its Ed25519 signature."""
    if not isinstance(signer, Signer):
        raise ValueError(f"signer must be a reports.signing.Signer, got {type(signer).__name__}")
    keyed = replace(manifest, key_id=signer.key_id, signature="")
    return replace(keyed, signature=signer.sign(signed_bytes(keyed)))


def manifest_problem(manifest: ReportManifest, keyring: Keyring) -> str | None:
    """Why the manifest's signature is not trusted, or None."""
    try:
        data = signed_bytes(manifest)
    except CanonicalJSONError as e:
        return f"manifest body cannot be canonicalized ({e})"
    return keyring.check(manifest.key_id, data, manifest.signature)


def manifest_bytes(manifest: ReportManifest) -> bytes:
    """The manifest file's bytes (indented, sorted JSON; what is signed is the canonical body)."""
    return (manifest.to_json() + "\n").encode("utf-8")


def write_durable(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` durably: a temp file beside it, fsync, rename over it."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


def write_manifest(manifest: ReportManifest, path: Path) -> bytes:
    """Write the manifest durably (:func:`write_durable`) and return its bytes."""
    data = manifest_bytes(manifest)
    write_durable(path, data)
    return data


def _safe_file_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


def read_manifest(path: Path) -> tuple[ReportManifest | None, list[str]]:
    """The manifest in ``path`` and the problems of its form (not found, not JSON, fields)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, [f"{path.name}: manifest not found"]
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, [f"{path.name}: manifest is not readable JSON ({e})"]
    if not isinstance(raw, dict):
        return None, [f"{path.name}: manifest is not a JSON object"]
    try:
        manifest = ReportManifest.from_dict(raw)
    except (FieldError, KeyError, TypeError, ValueError) as e:
        return None, [f"{path.name}: manifest fields invalid ({e!r})"]
    problems = []
    if manifest.to_dict() != raw:
        unknown = sorted(set(raw) - set(manifest.to_dict()))
        detail = f"unknown fields {unknown}" if unknown else "field values not in canonical form"
        problems.append(f"{path.name}: {detail}")
    return manifest, problems


def verify_manifest(manifest_path: str | Path, keyring: Keyring) -> list[str]:
    """Problems with a manifest and the files it lists (empty list = valid).

    Checks, in order: the manifest parses and is in its canonical field form; its signature
    verifies under a key of ``keyring``; every listed file exists next to the manifest and
    hashes to the recorded SHA-256.
    """
    if not isinstance(keyring, Keyring):
        raise ValueError(f"keyring must be a reports.signing.Keyring, got {type(keyring).__name__}")
    path = Path(manifest_path)
    manifest, problems = read_manifest(path)
    if manifest is None:
        return problems
    why = manifest_problem(manifest, keyring)
    if why is not None:
        problems.append(f"{path.name}: {why}")
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
