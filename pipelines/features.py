"""Per-account windowed stream features: the pure core the stream job and the trainer share.

Every event has two legs: the *out* leg at the sender and the *in* leg at the receiver. Each
account keeps an :class:`AccountWindow` of its legs over the last ``window_minutes`` (state in the
stream job, a dict in the plain-Python loop); applying a leg returns the account's features as of
that event, the event included. The event's feature vector joins both legs with event-level
features. Sums are exact integer US-dollar cents; only the model inputs are floats.

Per account (:data:`ACCOUNT_FEATURES`), besides the window's counts, sums and fan-in/fan-out:
whether this leg's counterparty is new (not dealt with in 7 days) and how many of the window's
legs were with new counterparties; distinct payees and payers over 7 days; the flow balance of
the window (pass-through ratio ``min(in, out) / max(in, out)``, net outflow), the time since
and the amount ratio to the last transfer the other way (money in, then straight out); this
amount against the median of the account's last ``RECENT_LEGS`` amounts and how many of those
were exactly this amount; and the account's age and transfer count since first seen. Every
update is O(1) amortised per leg over bounded state, with no floating-point accumulation (the
features are computed from exact integers at the end), so values are the same on every run.

>>> from auditflow.records import AccountRef, TransactionEvent
>>> from auditflow.money import Money
>>> from datetime import datetime
>>> a, b = AccountRef("1", "A"), AccountRef("2", "B")
>>> ev = TransactionEvent("tx", datetime(2022, 9, 1), a, b, Money("Euro", 10000),
...                       Money("Euro", 10000), "ACH", False, 2)
>>> vec = compute_features([ev])[0][1]
>>> vec["snd_out_n"], vec["rcv_in_cp"], vec["amount_usd"] > 4.6
(1.0, 1.0, True)
>>> vec["snd_cp_new"], vec["snd_pass_ratio"], vec["rcv_net_out"], vec["snd_amt_vs_med"]
(1.0, 0.0, -1.0, -1.0)
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from operator import attrgetter

from auditflow.features import ACCOUNT_FEATURES, EVENT_FEATURES, FEATURE_DESCRIPTIONS, FEATURE_NAMES
from auditflow.limits import (
    DEFAULT_WINDOW_MINUTES,
    LONG_WINDOW_MINUTES,
    MAX_LONG_COUNTERPARTIES,
    MAX_WINDOW_LEGS,
    RECENT_LEGS,
    SHORT_WINDOW_MINUTES,
)
from auditflow.money import USD_RATES, usd_cents
from auditflow.records import PAYMENT_FORMATS, TransactionEvent

MAX_LEGS = MAX_WINDOW_LEGS

@dataclass(slots=True)
class AccountWindow:
    """One account's state: its legs over the sliding window with incremental aggregates, plus
    bounded longer memory (7-day counterparties, the last ``RECENT_LEGS`` amounts, lifetime).

    Each leg costs O(1) amortised, plus O(log K) and a K-element shift on the sorted list of
    recent amounts (K = ``RECENT_LEGS``). State is bounded: at most ``MAX_LEGS`` legs in the
    window (and in the hour), ``MAX_LONG_COUNTERPARTIES`` counterparties per direction in the
    7-day memory (least recently seen dropped first) and K amounts. Sums are exact integer
    cents. Legs are expected in time order per account (the stream job sorts them); a late leg
    counts as of its own minute.
    """

    window_minutes: int = DEFAULT_WINDOW_MINUTES
    legs: deque = field(default_factory=deque)  # (minute, is_out, counterparty, cents, was_new)
    out_n: int = 0
    in_n: int = 0
    out_cents: int = 0
    in_cents: int = 0
    out_cp: dict = field(default_factory=dict)  # counterparty -> live leg count
    in_cp: dict = field(default_factory=dict)
    last_minute: int | None = None
    appended: int = 0  # legs ever appended to ``legs``
    evicted: int = 0  # legs ever evicted from ``legs``
    hour_first: int = 0  # sequence number (appended order) of the first leg in the last hour
    new_out_n: int = 0  # window legs out whose counterparty was new (``cp_new``) when they came
    new_in_n: int = 0
    out_cp_long: dict = field(default_factory=dict)  # payee -> last minute, least recent first
    in_cp_long: dict = field(default_factory=dict)  # payer -> last minute, least recent first
    long_floor: int = 0  # no 7-day memory entry is older than this: skip expiry until it is due
    last_out: tuple[int, int] | None = None  # (minute, cents) of the latest outgoing leg
    last_in: tuple[int, int] | None = None
    recent: list = field(default_factory=list)  # cents of the last RECENT_LEGS legs (a ring)
    recent_sorted: list = field(default_factory=list)  # the same, sorted
    first_minute: int = 0
    n_life: int = 0

    def __reduce__(self):
        # Positional fields: pickles (the stream job's keyed state, per leg) about twice as fast as
        # the dataclass default, which builds a list of fields() and sets each one on load.
        return AccountWindow, _window_fields(self)

    def _evict(self, now: int) -> None:
        horizon = now - self.window_minutes
        legs = self.legs
        while legs and (legs[0][0] <= horizon or len(legs) > MAX_LEGS):
            _, is_out, cp, cents, was_new = legs.popleft()
            self.evicted += 1
            counts = self.out_cp if is_out else self.in_cp
            left = counts[cp] - 1
            if left:
                counts[cp] = left
            else:
                del counts[cp]
            if is_out:
                self.out_n -= 1
                self.out_cents -= cents
                self.new_out_n -= was_new
            else:
                self.in_n -= 1
                self.in_cents -= cents
                self.new_in_n -= was_new

    def _expire_long(self, horizon: int) -> None:
        """Forget counterparties last seen at or before ``horizon``; reset ``long_floor``."""
        floor = None
        for memory in (self.out_cp_long, self.in_cp_long):
            stale = []
            for cp, last in memory.items():  # least recently seen first
                if last > horizon:
                    floor = last if floor is None or last < floor else floor
                    break
                stale.append(cp)
            for cp in stale:
                del memory[cp]
        self.long_floor = horizon + 1 if floor is None else floor

    def apply(self, minute: int, is_out: bool, counterparty: str, cents: int) -> dict[str, float]:
        """Add one leg and return the account's features as of it (the leg included)."""
        window = self.window_minutes
        last_minute = self.last_minute
        if last_minute is None:
            gap = window
            self.first_minute = self.last_minute = self.long_floor = minute
        else:
            gap = minute - last_minute
            if gap < 0:  # a late leg
                gap = 0
            else:
                self.last_minute = minute
        self.n_life += 1

        # the last leg the other way, within the window
        if is_out:
            opp = self.last_in
            if self.last_out is None or minute >= self.last_out[0]:
                self.last_out = (minute, cents)
        else:
            opp = self.last_out
            if self.last_in is None or minute >= self.last_in[0]:
                self.last_in = (minute, cents)
        if opp is not None and opp[0] > minute - window:
            since_opp = max(0, minute - opp[0])
            opp_ratio = cents / opp[1] if opp[1] > 0 else float(cents > 0)
        else:
            since_opp, opp_ratio = window, -1.0

        # this amount against the previous RECENT_LEGS amounts
        srt = self.recent_sorted
        if srt:
            med = srt[(len(srt) - 1) // 2]  # lower median: an integer
            amt_vs_med = cents / med if med > 0 else float(cents > 0)
            lo = bisect_left(srt, cents)
            same_amt = bisect_right(srt, cents, lo) - lo
        else:
            amt_vs_med, same_amt = -1.0, 0
        recent = self.recent
        if len(recent) < RECENT_LEGS:
            recent.append(cents)
        else:  # overwrite the oldest: slot n_life - 1 modulo K, counting this leg
            slot = (self.n_life - 1) % RECENT_LEGS
            del srt[bisect_left(srt, recent[slot])]
            recent[slot] = cents
        insort(srt, cents)

        # 7-day counterparty memory (either direction decides whether the counterparty is new)
        long_horizon = minute - LONG_WINDOW_MINUTES
        if long_horizon >= self.long_floor:
            self._expire_long(long_horizon)
        out_long, in_long = self.out_cp_long, self.in_cp_long
        was_new = counterparty not in out_long and counterparty not in in_long
        memory = out_long if is_out else in_long
        seen = memory.pop(counterparty, None)
        memory[counterparty] = minute if seen is None or minute > seen else seen  # now most recent
        if seen is None and len(memory) > MAX_LONG_COUNTERPARTIES:
            del memory[next(iter(memory))]
        if minute < self.long_floor:  # a late leg
            self.long_floor = minute

        # the window
        legs = self.legs
        legs.append((minute, is_out, counterparty, cents, was_new))
        self.appended += 1
        if is_out:
            counts = self.out_cp
            self.out_n += 1
            self.out_cents += cents
            self.new_out_n += was_new
        else:
            counts = self.in_cp
            self.in_n += 1
            self.in_cents += cents
            self.new_in_n += was_new
        counts[counterparty] = counts.get(counterparty, 0) + 1
        if legs[0][0] <= minute - window or len(legs) > MAX_LEGS:
            self._evict(minute)
        # the last hour is a suffix of the window: advance its first leg past older ones
        evicted = self.evicted
        first = self.hour_first if self.hour_first > evicted else evicted
        hour_horizon = minute - SHORT_WINDOW_MINUTES
        while legs[first - evicted][0] <= hour_horizon:  # stops at this leg at the latest
            first += 1
        self.hour_first = first

        out_n, in_n, out_c, in_c = self.out_n, self.in_n, self.out_cents, self.in_cents
        moved = out_c + in_c
        age = minute - self.first_minute
        return {
            "out_n": float(out_n),
            "out_usd": math.log1p(out_c / 100),
            "out_cp": float(len(self.out_cp)),
            "in_n": float(in_n),
            "in_usd": math.log1p(in_c / 100),
            "in_cp": float(len(self.in_cp)),
            "n_1h": float(self.appended - first),
            "gap_min": float(gap if gap < window else window),
            "cp_legs": float(counts[counterparty]),
            "cp_new": float(was_new),
            "new_cp_frac": (self.new_out_n + self.new_in_n) / (out_n + in_n),
            "new_out_n": float(self.new_out_n),
            "new_in_n": float(self.new_in_n),
            "out_cp_7d": float(len(out_long)),
            "in_cp_7d": float(len(in_long)),
            "pass_ratio": (min(out_c, in_c) / max(out_c, in_c)) if moved else 0.0,
            "net_out": (out_c - in_c) / moved if moved else 0.0,
            "since_opp_min": float(since_opp if since_opp < window else window),
            "opp_ratio": opp_ratio,
            "amt_vs_med": amt_vs_med,
            "same_amt": float(same_amt),
            "age_min": float(min(max(0, age), LONG_WINDOW_MINUTES)),
            "n_life": float(self.n_life),
        }


_window_fields = attrgetter(*(f.name for f in fields(AccountWindow)))


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
    """The plain-Python reference: yield each event with its features, in event-time order.

    Events are processed sorted by (minute, source offset), the order in which the stream job
    applies each account's legs once the watermark passes them, so both compute the same values
    whatever the order of the input (a file slightly out of time order, Kafka partitions)."""
    windows: dict[str, AccountWindow] = {}
    events = sorted(events, key=lambda e: (e.minute, e.source_offset))

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
