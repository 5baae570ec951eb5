"""Users and their roles: a JSON file of names, roles and the SHA-256 of each user's token.

``{"schema": "auditflow.users/1", "users": [{"name": "ana", "role": "analyst",
"token_sha256": "<hex>"}, ...]}``. A token is 32 random bytes (URL-safe base64) made by
:func:`add_user`, shown once and never stored: the file holds its SHA-256 only. A plain hash,
not a password hash (scrypt, argon2): a 256-bit random token cannot be guessed from its hash, and
a request's check must stay cheap (the cases API checks one per request). :meth:`Users.
authenticate` compares the presented token's hash with every user's in constant time.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "users.json"
>>> token = add_user(path, "ana", "analyst")
>>> Users.load(path).authenticate(token)
User(name='ana', role='analyst')
>>> Users.load(path).authenticate("wrong") is None
True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from cases.workflow import ROLES, SYSTEM

USERS_SCHEMA = "auditflow.users/1"
_NAME = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")


class UsersError(ValueError):
    """The users file is unreadable or wrong; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: str


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class Users:
    """The users of one users file."""

    def __init__(self, entries: list[tuple[User, str]]) -> None:
        self._entries = entries
        self._by_name = {u.name: u for u, _ in entries}

    def __iter__(self):
        return iter(u for u, _ in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> User | None:
        return self._by_name.get(name)

    def authenticate(self, token: str | None) -> User | None:
        """The user whose token this is (None: no such token). Every user's hash is compared, in
        constant time, whatever matches first."""
        if not token:
            return None
        presented = token_hash(token).encode("ascii")
        found = None
        for user, digest in self._entries:
            if hmac.compare_digest(presented, digest.encode("ascii")):
                found = user
        return found

    @classmethod
    def load(cls, path: str | Path) -> Users:
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UsersError(f"users file {path} does not exist: add a user with `auditflow case user-add`") from None
        except (OSError, ValueError) as e:
            raise UsersError(f"users file {path}: cannot be read as JSON ({e})") from None
        if not isinstance(d, dict) or d.get("schema") != USERS_SCHEMA or not isinstance(d.get("users"), list):
            raise UsersError(f"users file {path}: expected {{schema: {USERS_SCHEMA}, users: [...]}}")
        entries, seen = [], set()
        for i, u in enumerate(d["users"]):
            if not isinstance(u, dict):
                raise UsersError(f"users file {path}: users[{i}] is not an object")
            name, role, digest = u.get("name"), u.get("role"), u.get("token_sha256")
            if not isinstance(name, str) or not _NAME.match(name) or name == SYSTEM:
                raise UsersError(
                    f"users file {path}: users[{i}].name={name!r}: expected lower-case letters, digits, '.', '_' "
                    f"or '-', starting with a letter (and not {SYSTEM!r})"
                )
            if name in seen:
                raise UsersError(f"users file {path}: users[{i}].name={name!r} appears twice")
            if role not in ROLES:
                raise UsersError(f"users file {path}: users[{i}].role={role!r}: expected one of {', '.join(ROLES)}")
            if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise UsersError(f"users file {path}: users[{i}].token_sha256: expected 64 lower-case hex digits")
            seen.add(name)
            entries.append((User(name, role), digest))
        return cls(entries)

    def to_dict(self) -> dict:
        return {
            "schema": USERS_SCHEMA,
            "users": [{"name": u.name, "role": u.role, "token_sha256": h} for u, h in self._entries],
        }


def add_user(path: str | Path, name: str, role: str) -> str:
    """Add ``name`` with ``role`` to the users file (made when missing, mode 0600) and return the
    user's new token (shown once; the file keeps its hash). A user already there gets a new token
    and the given role (the old token stops working)."""
    path = Path(path)
    users = Users.load(path) if path.exists() else Users([])
    token = secrets.token_urlsafe(32)
    entries = [(u, h) for u, h in users._entries if u.name != name] + [(User(name, role), token_hash(token))]
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(Users(entries).to_dict(), indent=2) + "\n")
    try:
        Users.load(tmp)  # what is written passes the checks a reader applies
    except UsersError as e:
        tmp.unlink()
        raise UsersError(str(e).replace(str(tmp), str(path))) from None
    tmp.replace(path)
    return token
