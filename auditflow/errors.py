"""Errors that name what was wrong: the field, the offending value and the reason."""

from __future__ import annotations


class FieldError(ValueError):
    """A value failed validation. ``str()`` names field, value and reason."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={value!r}: {reason}")
