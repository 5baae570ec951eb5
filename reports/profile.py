"""Compliance profiles of the alert report, as data: ``reports/profiles/<name>.json``.

A profile is a title, the rule it follows (``basis``), the case fields it requires, and sections
(a heading and a text template with ``{field}`` placeholders), plus a closing note; optionally
``subject_only`` (a notice addressed to the data subject: the report shows only the subject's own
data, no other account's id or activity). Adding a
profile is adding a file; nothing in the code branches on its name. A profile file that is
malformed, or whose templates use a field it does not require, is refused when loaded; a
report whose case lacks a required field is refused when rendered, naming the field
(:class:`ProfileError`).

>>> p = load_profile("sar")
>>> p.name, p.required[:3]
('sar', ('subject', 'counterparty', 'amount'))
>>> render_sections(p, {f: "x" for f in p.required})[3]
('Who is conducting the suspicious activity', 'The paying account x sent the transfer; the receiving account is x.')
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

_KEYS = {"name", "title", "basis", "required", "sections", "note"}
_OPTIONAL = {"subject_only"}


class ProfileError(ValueError):
    """An unknown or malformed profile, or a case without a field the profile requires."""


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    title: str
    basis: str
    required: tuple[str, ...]
    sections: tuple[tuple[str, str], ...]
    note: str
    subject_only: bool = False


def profile_names() -> list[str]:
    """The profiles shipped in ``reports/profiles``."""
    return sorted(p.name[:-5] for p in resources.files("reports").joinpath("profiles").iterdir()
                  if p.name.endswith(".json"))


def parse_profile(d: object, source: str) -> Profile:
    if not isinstance(d, dict) or not _KEYS <= set(d) <= _KEYS | _OPTIONAL:
        got = sorted(d) if isinstance(d, dict) else type(d).__name__
        raise ProfileError(f"profile {source}: expected keys {sorted(_KEYS)} (and optionally "
                           f"{sorted(_OPTIONAL)}), got {got}")
    if not isinstance(d.get("subject_only", False), bool):
        raise ProfileError(f"profile {source}: subject_only must be true or false")
    if not all(isinstance(d[k], str) and d[k] for k in ("name", "title", "basis", "note")):
        raise ProfileError(f"profile {source}: name, title, basis and note must be non-empty strings")
    req = d["required"]
    if not isinstance(req, list) or not all(isinstance(f, str) and f for f in req) or len(set(req)) != len(req):
        raise ProfileError(f"profile {source}: required must be a list of distinct field names")
    sections = []
    for i, s in enumerate(d["sections"] if isinstance(d["sections"], list) else [None]):
        if not isinstance(s, dict) or set(s) != {"heading", "text"} or not all(isinstance(v, str) for v in s.values()):
            raise ProfileError(f"profile {source}: section {i + 1} must be {{heading, text}} strings")
        try:
            used = {f for _, f, _, _ in string.Formatter().parse(s["text"]) if f is not None}
        except ValueError as e:
            raise ProfileError(f"profile {source}: section {i + 1} template: {e}") from None
        undeclared = sorted(used - set(req))
        if undeclared:
            raise ProfileError(f"profile {source}: section {i + 1} uses {undeclared}, not in its required fields")
        sections.append((s["heading"], s["text"]))
    if not sections:
        raise ProfileError(f"profile {source}: no sections")
    return Profile(d["name"], d["title"], d["basis"], tuple(req), tuple(sections), d["note"],
                   d.get("subject_only", False))


def load_profile(name_or_path: str | Path) -> Profile:
    """A shipped profile by name (``sar``, ``gdpr-art22``, ``ccpa``) or a profile file."""
    path = Path(name_or_path)
    if path.suffix == ".json":
        source, text = str(path), None
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ProfileError(f"profile {path}: cannot be read ({e.strerror or e})") from None
    else:
        name = str(name_or_path)
        if name not in profile_names():
            raise ProfileError(f"unknown report profile {name!r}: expected one of {profile_names()}")
        source = f"{name}.json"
        text = resources.files("reports").joinpath("profiles", source).read_text(encoding="utf-8")
    try:
        d = json.loads(text)
    except ValueError as e:
        raise ProfileError(f"profile {source}: not JSON ({e})") from None
    profile = parse_profile(d, source)
    if path.suffix != ".json" and profile.name != str(name_or_path):
        raise ProfileError(f"profile {source}: its name is {profile.name!r}")
    return profile


def render_sections(profile: Profile, fields: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """The profile's sections with the case's fields filled in; :class:`ProfileError` naming every
    required field the case lacks (absent or empty)."""
    missing = [f for f in profile.required if not fields.get(f)]
    if missing:
        raise ProfileError(f"profile {profile.name!r} requires {missing}, which this report does not have")
    values = {f: str(fields[f]) for f in profile.required}
    return [(heading, text.format_map(values)) for heading, text in profile.sections]
