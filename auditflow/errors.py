"""Errors that name what was wrong: the field, the offending value and the reason."""

from __future__ import annotations

#: The message shows at most this many characters of the value's repr (``.value`` keeps it all).
MESSAGE_VALUE_CHARS = 200


class InputError(ValueError):
    """What a user gave (a file, an account, an option) cannot be used; the message names it, its
    value and what was expected or what to do. The command line prints it as one line and exits 2,
    the HTTP API answers 422 (404 for :class:`NoSuchAccount`)."""


class FieldError(InputError):
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


class NoSuchAccount(InputError):
    """An account the graph does not hold.

    >>> str(NoSuchAccount("001/8000A", "embedded:out/graph.jsonl"))
    "no such account: '001/8000A' (not in the graph embedded:out/graph.jsonl)"
    """

    def __init__(self, account: str, graph: str = "") -> None:
        self.account = account
        where = f" (not in the graph {graph})" if graph else " (not in the graph)"
        super().__init__(f"no such account: {account[:MESSAGE_VALUE_CHARS]!r}{where}")
