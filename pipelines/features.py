"""Per-account windowed stream features: the pure core the stream job and the trainer share.

Every event has two legs: the *out* leg at the sender and the *in* leg at the receiver. Each
account keeps an :class:`AccountWindow` of its legs over the last ``window_minutes`` (state in the
stream job, a dict in the plain-Python loop); applying a leg returns the account's features as of
that event, the event included. The event's feature vector joins both legs with event-level
features. Sums are exact integer US-dollar cents; only the model inputs are floats.

>>> from auditflow.records import AccountRef, TransactionEvent
>>> from auditflow.money import Money
>>> from datetime import datetime
>>> a, b = AccountRef("1", "A"), AccountRef("2", "B")
>>> ev = TransactionEvent("tx", datetime(2022, 9, 1), a, b, Money("Euro", 10000),
...                       Money("Euro", 10000), "ACH", False, 2)
>>> vec = compute_features([ev])[0][1]
>>> vec["snd_out_n"], vec["rcv_in_cp"], vec["amount_usd"] > 4.6
(1.0, 1.0, True)
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal

from auditflow.money import Money
from auditflow.records import PAYMENT_FORMATS, TransactionEvent

DEFAULT_WINDOW_MINUTES = 24 * 60
SHORT_WINDOW_MINUTES = 60
MAX_LEGS = 20_000  # per-account cap on retained legs: bounds memory on hub accounts

#: Reference rates to US dollars (AMLworld-era averages), exact decimals.
USD_RATES: dict[str, Decimal] = {
    "US Dollar": Decimal("1"),
    "Euro": Decimal("1.17"),
    "Yuan": Decimal("0.149"),
    "Yen": Decimal("0.0092"),
    "Rupee": Decimal("0.0137"),
    "UK Pound": Decimal("1.29"),
    "Canadian Dollar": Decimal("0.79"),
    "Australian Dollar": Decimal("0.76"),
    "Swiss Franc": Decimal("1.09"),
    "Mexican Peso": Decimal("0.049"),
    "Brazil Real": Decimal("0.19"),
    "Ruble": Decimal("0.0133"),
    "Shekel": Decimal("0.31"),
    "Saudi Riyal": Decimal("0.267"),
    "Bitcoin": Decimal("11500"),
}


def usd_cents(m: Money) -> int:
    """Exact conversion to integer US cents (banker's rounding)."""
    usd = m.to_decimal() * USD_RATES[m.currency]
    return int((usd * 100).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


ACCOUNT_FEATURES = ("out_n", "out_usd", "out_cp", "in_n", "in_usd", "in_cp", "n_1h", "gap_min")
EVENT_FEATURES = ("amount_usd", "cross_currency", "self_transfer", "format", "hour", "round_amount")
FEATURE_NAMES: tuple[str, ...] = (
    *EVENT_FEATURES,
    *(f"snd_{f}" for f in ACCOUNT_FEATURES),
    *(f"rcv_{f}" for f in ACCOUNT_FEATURES),
)

FEATURE_DESCRIPTIONS: dict[str, str] = {
    "amount_usd": "log(1 + amount paid in USD)",
    "cross_currency": "paid and received currencies differ",
    "self_transfer": "sender and receiver are the same account",
    "format": "payment format code",
    "hour": "hour of day",
    "round_amount": "amount paid is a multiple of 100",
}
for _side, _who in (("snd", "sender"), ("rcv", "receiver")):
    FEATURE_DESCRIPTIONS.update(
        {
            f"{_side}_out_n": f"{_who}: outgoing transfers in 24h",
            f"{_side}_out_usd": f"{_who}: log(1 + USD sent in 24h)",
            f"{_side}_out_cp": f"{_who}: distinct payees in 24h (fan-out)",
            f"{_side}_in_n": f"{_who}: incoming transfers in 24h",
            f"{_side}_in_usd": f"{_who}: log(1 + USD received in 24h)",
            f"{_side}_in_cp": f"{_who}: distinct payers in 24h (fan-in)",
            f"{_side}_n_1h": f"{_who}: transfers in the last hour (velocity)",
            f"{_side}_gap_min": f"{_who}: minutes since previous transfer",
        }
    )


@dataclass(slots=True)
class AccountWindow:
    """One account's legs over the sliding window, with incremental aggregates."""

    window_minutes: int = DEFAULT_WINDOW_MINUTES
    legs: deque = field(default_factory=deque)  # (minute, is_out, counterparty, cents)
    out_n: int = 0
    in_n: int = 0
    out_cents: int = 0
    in_cents: int = 0
    out_cp: dict = field(default_factory=dict)  # counterparty -> live leg count
    in_cp: dict = field(default_factory=dict)
    last_minute: int | None = None

    def _evict(self, now: int) -> None:
        horizon = now - self.window_minutes
        legs = self.legs
        while legs and (legs[0][0] <= horizon or len(legs) > MAX_LEGS):
            _, is_out, cp, cents = legs.popleft()
            counts = self.out_cp if is_out else self.in_cp
            counts[cp] -= 1
            if not counts[cp]:
                del counts[cp]
            if is_out:
                self.out_n -= 1
                self.out_cents -= cents
            else:
                self.in_n -= 1
                self.in_cents -= cents

    def apply(self, minute: int, is_out: bool, counterparty: str, cents: int) -> dict[str, float]:
        """Add one leg and return the account's features as of it (the leg included)."""
        gap = self.window_minutes if self.last_minute is None else max(0, minute - self.last_minute)
        self.last_minute = minute if self.last_minute is None else max(self.last_minute, minute)
        self.legs.append((minute, is_out, counterparty, cents))
        counts = self.out_cp if is_out else self.in_cp
        counts[counterparty] = counts.get(counterparty, 0) + 1
        if is_out:
            self.out_n += 1
            self.out_cents += cents
        else:
            self.in_n += 1
            self.in_cents += cents
        self._evict(minute)
        short_horizon = minute - SHORT_WINDOW_MINUTES
        n_1h = 0
        for leg in reversed(self.legs):
            if leg[0] <= short_horizon:
                break
            n_1h += 1
        return {
            "out_n": float(self.out_n),
            "out_usd": math.log1p(self.out_cents / 100),
            "out_cp": float(len(self.out_cp)),
            "in_n": float(self.in_n),
            "in_usd": math.log1p(self.in_cents / 100),
            "in_cp": float(len(self.in_cp)),
            "n_1h": float(n_1h),
            "gap_min": float(min(gap, self.window_minutes)),
        }


def event_features(ev: TransactionEvent) -> dict[str, float]:
    cents = usd_cents(ev.amount_paid)
    return {
        "amount_usd": math.log1p(cents / 100),
        "cross_currency": float(ev.amount_paid.currency != ev.amount_received.currency),
        "self_transfer": float(ev.is_self_transfer),
        "format": float(PAYMENT_FORMATS.index(ev.payment_format)),
        "hour": float(ev.timestamp.hour),
        "round_amount": float(ev.amount_paid.units % (100 * 10**ev.amount_paid.scale) == 0),
    }


def out_leg(ev: TransactionEvent) -> tuple[str, int, bool, str, int]:
    """(account key, minute, is_out, counterparty, USD cents) of the sender's leg."""
    return ev.sender.node_id, ev.minute, True, ev.receiver.node_id, usd_cents(ev.amount_paid)


def in_leg(ev: TransactionEvent) -> tuple[str, int, bool, str, int]:
    return ev.receiver.node_id, ev.minute, False, ev.sender.node_id, usd_cents(ev.amount_received)


def side_features(prefix: str, feats: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}_{k}": v for k, v in feats.items()}


def assemble(ev: TransactionEvent, snd: dict[str, float], rcv: dict[str, float]) -> dict[str, float]:
    """Join both legs' features with the event's own into one ordered feature vector."""
    vec = {**event_features(ev), **side_features("snd", snd), **side_features("rcv", rcv)}
    return {name: vec[name] for name in FEATURE_NAMES}


def iter_features(
    events: Iterable[TransactionEvent], window_minutes: int = DEFAULT_WINDOW_MINUTES
) -> Iterator[tuple[TransactionEvent, dict[str, float]]]:
    """The plain-Python reference: process events in order, yield each with its features."""
    windows: dict[str, AccountWindow] = {}

    def window(key: str) -> AccountWindow:
        w = windows.get(key)
        if w is None:
            w = windows[key] = AccountWindow(window_minutes)
        return w

    for ev in events:
        key, minute, is_out, cp, cents = out_leg(ev)
        snd = window(key).apply(minute, is_out, cp, cents)
        key, minute, is_out, cp, cents = in_leg(ev)
        rcv = window(key).apply(minute, is_out, cp, cents)
        yield ev, assemble(ev, snd, rcv)


def compute_features(
    events: Iterable[TransactionEvent], window_minutes: int = DEFAULT_WINDOW_MINUTES
) -> list[tuple[TransactionEvent, dict[str, float]]]:
    return list(iter_features(events, window_minutes))
