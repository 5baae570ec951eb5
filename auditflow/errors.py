"""Errors that name what was wrong: the field, the offending value and the reason."""

from __future__ import annotations

#: The message shows at most this many characters of the value's repr (``.value`` keeps it all).
MESSAGE_VALUE_CHARS = 200


class FieldError(ValueError):
    """A value failed validation. ``str()`` names field, value and reason.

    >>> e = FieldError("Amount Paid", "1" * 300, "too long")
    >>> len(e.value), len(str(e)), str(e)[-20:]
    (300, 222, '1111111...: too long')
    """

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        shown = repr(value)
        if len(shown) > MESSAGE_VALUE_CHARS:
            shown = shown[: MESSAGE_VALUE_CHARS - 3] + "..."
        super().__init__(f"{field}={shown}: {reason}")


class ConfigError(ValueError):
    """The settings do not allow what was asked: names the setting and what to set instead."""
