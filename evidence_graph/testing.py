"""Helpers for tests and examples: terse transactions and planted laundering shapes.

Account names are short letters; :func:`acct` turns them into node ids in bank ``"001"``.
Every builder returns events with distinct event ids and increasing timestamps (one minute
apart from ``t0``), so cap order equals creation order.

>>> [e.event_id for e in chain(["A", "B", "C"], prefix="c")]
['c0', 'c1']
>>> acct("A")
'001/A'
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from auditflow.money import Money
from auditflow.records import AccountRef, TransactionEvent

T0 = datetime(2022, 9, 1, 0, 0)
BANK = "001"


def acct(name: str) -> str:
    """Node id of test account ``name``."""
    return name if "/" in name else f"{BANK}/{name}"


def _ref(name: str) -> AccountRef:
    return AccountRef.from_node_id(acct(name))


def tx(
    event_id: str,
    src: str,
    dst: str,
    minute: int = 0,
    *,
    amount: Money | None = None,
    laundering: bool = False,
    fmt: str = "Wire",
    t0: datetime = T0,
) -> TransactionEvent:
    """A transfer ``src -> dst`` at ``t0 + minute``."""
    amount = amount if amount is not None else Money("US Dollar", 10_000)
    return TransactionEvent(
        event_id=event_id,
        timestamp=t0 + timedelta(minutes=minute),
        sender=_ref(src),
        receiver=_ref(dst),
        amount_received=amount,
        amount_paid=amount,
        payment_format=fmt,
        is_laundering=laundering,
        source_offset=0,
    )


def _from_pairs(
    pairs: Sequence[tuple[str, str]], prefix: str, start: int, laundering: bool
) -> list[TransactionEvent]:
    return [tx(f"{prefix}{i}", a, b, start + i, laundering=laundering) for i, (a, b) in enumerate(pairs)]


def chain(names: Sequence[str], *, prefix: str = "ch", start: int = 0, laundering: bool = False):
    """``names[0] -> names[1] -> ...``"""
    return _from_pairs(list(zip(names, names[1:])), prefix, start, laundering)


def cycle(names: Sequence[str], *, prefix: str = "cy", start: int = 0, laundering: bool = False):
    """``names[0] -> ... -> names[-1] -> names[0]``"""
    return _from_pairs(list(zip(names, [*names[1:], names[0]])), prefix, start, laundering)


def fan_out(
    hub: str, leaves: Sequence[str], *, prefix: str = "fo", start: int = 0, laundering: bool = False
):
    return _from_pairs([(hub, x) for x in leaves], prefix, start, laundering)


def scatter_gather(
    source: str,
    mids: Sequence[str],
    sink: str,
    *,
    prefix: str = "sg",
    start: int = 0,
    laundering: bool = False,
):
    """``source -> each mid``, then ``each mid -> sink``."""
    pairs = [(source, m) for m in mids] + [(m, sink) for m in mids]
    return _from_pairs(pairs, prefix, start, laundering)


def gather_scatter(
    sources: Sequence[str],
    hub: str,
    sinks: Sequence[str],
    *,
    prefix: str = "gs",
    start: int = 0,
    laundering: bool = False,
):
    """``each source -> hub``, then ``hub -> each sink``."""
    pairs = [(s, hub) for s in sources] + [(hub, t) for t in sinks]
    return _from_pairs(pairs, prefix, start, laundering)


def bipartite(
    left: Sequence[str],
    right: Sequence[str],
    *,
    prefix: str = "bp",
    start: int = 0,
    laundering: bool = False,
):
    """Every member of ``left`` pays every member of ``right``."""
    return _from_pairs([(a, b) for a in left for b in right], prefix, start, laundering)


def stack(
    layers: Sequence[Sequence[str]], *, prefix: str = "st", start: int = 0, laundering: bool = False
):
    """Complete bipartite transfers between each pair of consecutive layers."""
    pairs = [(a, b) for la, lb in zip(layers, layers[1:]) for a in la for b in lb]
    return _from_pairs(pairs, prefix, start, laundering)
