"""Ed25519 signatures with key ids, and the keyring of published public keys verifiers trust.

A :class:`Signer` holds one private key (a PKCS#8 PEM file, made by :func:`generate_key_file`);
its **key id** is ``ed25519:`` + the first 16 hex digits of the SHA-256 of the raw 32-byte public
key, so anyone holding the public key recomputes it. A signature is over bytes (manifests and
tree heads sign their RFC 8785 canonical body) and travels with its key id.

A :class:`Keyring` is the set of public keys a verifier trusts, as published JSON (``auditflow
keys publish`` writes or extends one). Rotation: sign with the new key, add its public key to
the keyring and keep the old ones, so every older report still verifies; a key is never dropped
from a keyring while reports it signed are kept.

The **development key** (:func:`development_signer`) is derived from a constant in this file:
everyone has it, so a signature by it proves nothing. Only the demo and tests may sign with it;
the app layer refuses it elsewhere (:class:`DevelopmentKeyRefused`) and a verifier trusts it only
when asked to.

>>> signer = Signer.from_seed(bytes(32))
>>> signer.key_id
'ed25519:139e3940e64b5491'
>>> ring = Keyring([signer.public_key])
>>> sig = signer.sign(b"report")
>>> ring.check(signer.key_id, b"report", sig) is None, ring.check(signer.key_id, b"other", sig)
(True, 'signature does not verify under key ed25519:139e3940e64b5491')
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALGORITHM = "Ed25519"
KEYRING_SCHEMA = "auditflow.keyring/1"
_DEV_SEED = hashlib.sha256(b"auditflow development signing key -- public, proves nothing").digest()


class SigningKeyError(ValueError):
    """A key file that cannot be used (missing, not PEM, not Ed25519, a keyring malformed)."""


class DevelopmentKeyRefused(RuntimeError):
    """No signing key is configured and the development key is not allowed here."""


def key_id_for(public_raw: bytes) -> str:
    """``ed25519:`` + 16 hex digits of SHA-256 of the raw public key."""
    return "ed25519:" + hashlib.sha256(public_raw).hexdigest()[:16]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, AttributeError) as e:
        raise SigningKeyError(f"{what} is not base64 ({e})") from None


@dataclass(frozen=True, slots=True)
class PublicKey:
    """One published public key: its id and the raw 32 bytes."""

    key_id: str
    raw: bytes

    def to_dict(self) -> dict[str, str]:
        return {"key_id": self.key_id, "algorithm": ALGORITHM, "public_key": _b64(self.raw)}

    @classmethod
    def from_dict(cls, d: object) -> PublicKey:
        if not isinstance(d, dict) or d.get("algorithm") != ALGORITHM:
            raise SigningKeyError(f"expected an {ALGORITHM} key entry, got {d!r:.120}")
        raw = _unb64(d.get("public_key"), "public_key")
        if len(raw) != 32:
            raise SigningKeyError(f"public_key has {len(raw)} bytes, an Ed25519 key has 32")
        if d.get("key_id") != key_id_for(raw):
            raise SigningKeyError(f"key_id {d.get('key_id')!r} is not the id of its public key "
                                  f"({key_id_for(raw)})")
        return cls(d["key_id"], raw)

    def verify(self, data: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, data)
        except InvalidSignature:
            return False
        return True


class Signer:
    """An Ed25519 private key and its key id."""

    def __init__(self, private: Ed25519PrivateKey, *, development: bool = False) -> None:
        self._private = private
        raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.public_key = PublicKey(key_id_for(raw), raw)
        self.development = development

    @classmethod
    def from_seed(cls, seed: bytes, *, development: bool = False) -> Signer:
        return cls(Ed25519PrivateKey.from_private_bytes(seed), development=development)

    @property
    def key_id(self) -> str:
        return self.public_key.key_id

    def sign(self, data: bytes) -> str:
        """The base64 Ed25519 signature of ``data`` (deterministic: same key and data, same bytes)."""
        return _b64(self._private.sign(data))

    def __repr__(self) -> str:  # never the key material
        return f"Signer({self.key_id}{', development' if self.development else ''})"


def development_signer() -> Signer:
    """The development key: public by construction; for the demo and tests only."""
    return Signer.from_seed(_DEV_SEED, development=True)


def load_signer(path: str | Path) -> Signer:
    """The Ed25519 private key in a PKCS#8 PEM file (unencrypted); :class:`SigningKeyError`
    naming the file (never its content) otherwise."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SigningKeyError(f"signing key file {path}: cannot be read ({e.strerror or e})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise SigningKeyError(f"signing key file {path}: not an unencrypted PEM private key ({e})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"signing key file {path}: a {type(key).__name__}, expected an Ed25519 key")
    signer = Signer(key)
    if signer.key_id == development_signer().key_id:
        raise SigningKeyError(f"signing key file {path} holds the public development key")
    return signer


def generate_key_file(path: str | Path) -> Signer:
    """A new random Ed25519 key written to ``path`` (PKCS#8 PEM, mode 0600); an existing file is
    never overwritten (``FileExistsError``)."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    return Signer(key)


class Keyring:
    """The public keys a verifier trusts, by key id."""

    def __init__(self, keys: Iterable[PublicKey] = ()) -> None:
        self._keys: dict[str, PublicKey] = {}
        for k in keys:
            self.add(k)

    def add(self, key: PublicKey) -> None:
        self._keys[key.key_id] = key

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def key_ids(self) -> list[str]:
        return sorted(self._keys)

    def check(self, key_id: str, data: bytes, signature: str) -> str | None:
        """Why ``signature`` (base64) by ``key_id`` over ``data`` is not trusted; None when it is."""
        key = self._keys.get(key_id)
        if key is None:
            if key_id == development_signer().key_id:
                return f"signed with the development key {key_id}, which proves nothing (not trusted)"
            return f"signed by key {key_id!r}, which is not among the trusted keys {self.key_ids}"
        try:
            sig = _unb64(signature, "signature")
        except SigningKeyError as e:
            return str(e)
        if len(sig) != 64 or not key.verify(data, sig):
            return f"signature does not verify under key {key_id}"
        return None

    def to_dict(self) -> dict:
        return {"schema": KEYRING_SCHEMA, "keys": [self._keys[k].to_dict() for k in self.key_ids]}

    def save(self, path: str | Path) -> None:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> Keyring:
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SigningKeyError(f"keyring {path}: cannot be read as JSON ({e})") from None
        if not isinstance(d, dict) or d.get("schema") != KEYRING_SCHEMA or not isinstance(d.get("keys"), list):
            raise SigningKeyError(f"keyring {path}: expected {{schema: {KEYRING_SCHEMA}, keys: [...]}}")
        try:
            return cls(PublicKey.from_dict(k) for k in d["keys"])
        except SigningKeyError as e:
            raise SigningKeyError(f"keyring {path}: {e}") from None
