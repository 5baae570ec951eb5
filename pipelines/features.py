"""Per-account multi-scale stream features (v2): the pure core the stream job and the trainer share.

This module is the plain-Python reference of the v2 feature specification; a JVM operator
computes the same values and both must agree bit for bit. Hence the rules: integers are exact
(sums are integer US cents, :func:`auditflow.money.usd_cents`), and every feature is either
``float(an integer)``, ``float(a) / float(b)`` of two integers (never ``a / b`` on ints, which
rounds differently above 2**53), or a constant (-1.0, 0.0, 1.0): no log, no sqrt, no float
accumulation.

Legs and order
    Every event has two legs: the OUT leg at the sender (counterparty: the receiver's node_id,
    cents: ``usd_cents(amount_paid)``) and the IN leg at the receiver (counterparty: the sender's
    node_id, cents: ``usd_cents(amount_received)``); a self-transfer has both at one account.
    Each account applies its legs in the order of (minute, source_offset, event_id, OUT before
    IN): :func:`iter_features` sorts the events by (minute, source_offset, event_id) and applies
    each event's OUT leg, then its IN leg. Applying a leg returns the account's features "as of"
    it, the leg included unless said otherwise.

Windows (:data:`auditflow.limits.FEATURE_WINDOWS`: 1h = 60, 24h = 1440, 7d = 10080 minutes)
    An applied leg p is in window w at a leg of minute ``now`` iff ``p.minute > now - w``
    (strictly: a leg exactly 60 minutes old has left the hour). The account keeps at most
    ``MAX_WINDOW_LEGS`` legs: when adding a leg makes it ``MAX_WINDOW_LEGS + 1``, the oldest kept
    leg is dropped from every window it is still in, as if it had expired.

State expiry
    If the account has a previous leg and ``now - last_minute >= LONG_WINDOW_MINUTES``, its
    whole state is reset before the leg is applied (as if never seen: windows, last legs,
    recent amounts, first minute, leg count).

Per account (:data:`ACCOUNT_FEATURES`, prefixed ``snd_`` / ``rcv_`` in the vector), in order:
    for each window suffix s in 1h, 24h, 7d:
    ``out_n_s``, ``in_n_s`` (legs per direction), ``out_usd_s``, ``in_usd_s``
    (``float(cents) / 100.0`` of the sums), ``out_cp_s``, ``in_cp_s`` (distinct counterparties
    per direction), ``pass_s = float(min(in_c, out_c)) / float(max(in_c, out_c))`` (0.0 if the
    max is 0), ``net_s = float(out_c - in_c) / float(out_c + in_c)`` (0.0 if the sum is 0);
    then ``burst = float((n_1h) * 168) / float(n_7d)`` (n: legs both ways; 168 =
    LONG // SHORT, the 7d length over the 1h length, integer division); ``gap_min``: minutes since
    the previous leg clamped to [0, LONG] (LONG if none); ``cp_legs_24h``, ``cp_legs_7d``: legs
    in that window in this leg's direction with this counterparty, this leg included;
    ``cp_new``: 1.0 if no leg in either direction with this counterparty is in the 7d window
    *before* this leg is added; ``new_frac_24h``, ``new_frac_7d``: legs in the window whose
    ``cp_new`` was 1 when applied over legs in the window (this leg in both);
    ``since_opp_min``: ``max(0, now - m)`` for the latest previous leg the other way if it is in
    the 7d window, else LONG; ``opp_ratio``: for that leg, ``float(cents) / float(its cents)``
    if its cents > 0, else 1.0 if cents > 0 else 0.0, and -1.0 if there is no such leg;
    ``amt_vs_med``: against the lower median ``med = sorted[(k - 1) // 2]`` of the amounts of
    the previous ``RECENT_LEGS`` legs (the last k <= 32 applied since the last reset, this one
    excluded), ``float(cents) / float(med)`` if med > 0, else 1.0 if cents > 0 else 0.0, and
    -1.0 if there is no previous leg; ``same_amt``: how many of those amounts equal this one;
    ``age_min = float(min(now - first_minute, LONG))`` (first_minute: the minute of the first leg
    since the last reset); ``n_life``: legs applied since the last reset, this one included.

Event-level (:data:`EVENT_FEATURES`, first in the vector): ``amount_usd =
float(usd_cents(amount_paid)) / 100.0``; ``cross_currency``, ``self_transfer`` (sender ==
receiver node_id), ``format`` (index in ``PAYMENT_FORMATS``), ``hour``, ``round_amount``
(``amount_paid.units % (100 * 10**scale) == 0``), each a float.

Readings where the specification leaves room (the JVM operator must make the same choices):

1. "Before this leg is added" (``cp_new``) is the state after expiring the windows to this
   leg's minute and before appending it, so also before the cap drops anything for it: a leg the
   cap drops to make room for this one still counts for this leg's ``cp_new``. Every other
   feature reads the windows after the leg is appended and the cap has been applied.
2. "In the 7d window" for the other-way leg of ``since_opp_min`` / ``opp_ratio`` means still
   kept: neither expired nor dropped by the cap (as of this leg, after the cap).
3. The cap counts the legs kept for the longest window (the 7d window, which holds all the
   others); the dropped leg is the earliest applied of those.
4. "The previous leg" and ``last_minute`` are the latest minute applied since the last reset;
   "the latest previous leg the other way" is the other-way leg with the greatest minute, the
   later applied on a tie (for time-ordered legs: simply the last one applied).
5. The recent amounts are those of the previous legs in application order, whichever the
   direction (the IN leg of a self-transfer sees its own OUT leg); they are not bound by the cap.
6. Late legs (a minute below the latest applied, which the job never produces): gap is 0,
   nothing expires backwards (the windows hold what the latest leg left, plus the late leg),
   ``since_opp_min`` and ``age_min`` are clamped to [0, LONG], no reset is triggered; only
   guaranteed not to crash and to stay consistent.

Cost: each leg enters every window once and leaves it once (a head index per shorter window on
one shared buffer of the longest window's legs), so :meth:`AccountWindow.apply` is O(1)
amortised, plus O(log K) and a K-element shift on the sorted recent amounts (K = RECENT_LEGS).

>>> w = AccountWindow()
>>> f = w.apply(0, True, "B", 10_000)     # pays B 100.00 USD
>>> f["out_n_1h"], f["out_usd_24h"], f["cp_new"], f["gap_min"], f["amt_vs_med"]
(1.0, 100.0, 1.0, 10080.0, -1.0)
>>> f = w.apply(30, False, "C", 5_000)    # 30 minutes later receives 50.00 from C
>>> f["pass_1h"], f["net_1h"], f["since_opp_min"], f["opp_ratio"], f["amt_vs_med"]
(0.5, 0.3333333333333333, 30.0, 0.5, 0.5)
>>> f = w.apply(90, True, "B", 10_000)    # legs 90 and 60 minutes old have left the hour
>>> f["out_n_1h"], f["out_n_24h"], f["cp_legs_7d"], f["cp_new"], f["new_frac_7d"], f["burst"]
(1.0, 2.0, 2.0, 0.0, 0.6666666666666666, 56.0)
>>> f = w.apply(90 + 10080, False, "B", 1)  # 7 days idle: the state starts over
>>> f["n_life"], f["age_min"], f["out_n_7d"], f["cp_new"], f["same_amt"]
(1.0, 0.0, 0.0, 1.0, 0.0)
>>> from auditflow.records import AccountRef, TransactionEvent
>>> from auditflow.money import Money
>>> from datetime import datetime
>>> a, b = AccountRef("1", "A"), AccountRef("2", "B")
>>> ev = TransactionEvent("tx", datetime(2022, 9, 1), a, b, Money("US Dollar", 12345),
...                       Money("US Dollar", 12345), "ACH", False, 2)
>>> vec = compute_features([ev])[0][1]
>>> len(vec), vec["amount_usd"], vec["snd_out_n_24h"], vec["rcv_in_cp_7d"], vec["rcv_net_7d"]
(80, 123.45, 1.0, 1.0, -1.0)
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from auditflow.features import (
    ACCOUNT_FEATURES,
    COUNTERPARTY_WINDOWS,
    EVENT_FEATURES,
    FEATURE_DESCRIPTIONS,
    FEATURE_NAMES,
)
from auditflow.limits import (
    FEATURE_WINDOWS,
    LONG_WINDOW_MINUTES,
    MAX_WINDOW_LEGS,
    RECENT_LEGS,
    SHORT_WINDOW_MINUTES,
)
from auditflow.money import USD_RATES, usd_cents
from auditflow.records import PAYMENT_FORMATS, TransactionEvent, epoch_millis

__all__ = [
    "ACCOUNT_FEATURES",
    "EVENT_FEATURES",
    "FEATURE_DESCRIPTIONS",
    "FEATURE_NAMES",
    "FEATURE_WINDOWS",
    "USD_RATES",
    "AccountWindow",
    "assemble",
    "compute_features",
    "event_features",
    "in_leg",
    "iter_features",
    "out_leg",
    "usd_cents",
]

WINDOW_MINUTES: tuple[int, ...] = tuple(m for _, m in FEATURE_WINDOWS)
assert list(WINDOW_MINUTES) == sorted(set(WINDOW_MINUTES)), "FEATURE_WINDOWS: shortest first, distinct"
assert WINDOW_MINUTES[0] == SHORT_WINDOW_MINUTES and WINDOW_MINUTES[-1] == LONG_WINDOW_MINUTES
#: ``burst`` scale: how many of the shortest window fit in the longest (168 hours in 7 days).
BURST_SCALE = WINDOW_MINUTES[-1] // WINDOW_MINUTES[0]
_NW = len(WINDOW_MINUTES)
_LAST = _NW - 1
_CP_WINDOWS = tuple(next(i for i, (s, _) in enumerate(FEATURE_WINDOWS) if s == c) for c in COUNTERPARTY_WINDOWS)
_COMPACT_MIN = 64  # dead legs at the front of the buffer before it is compacted (and at least half)

# A window's aggregates: a list [out_n, in_n, out_cents, in_cents, new_n]; direction d is 0 (out)
# or 1 (in), so legs of direction d are at [d] and their cents at [2 + d].
_NEW = 4


def _blank_windows() -> tuple[list, list]:
    return [[0, 0, 0, 0, 0] for _ in range(_NW)], [({}, {}) for _ in range(_NW)]


class AccountWindow:
    """One account's state and the v2 per-account features of each leg applied to it.

    ``legs`` holds the longest window's legs as ``(minute, is_out, counterparty, cents, was_new)``
    in application order, the live ones from ``heads[-1]`` on; window i covers
    ``legs[heads[i]:]`` (so the shorter windows are suffixes of the longer ones) and keeps, in
    ``aggs[i]`` and ``cps[i]``, its counts, integer cent sums, new-counterparty count and
    counterparty -> leg count dicts per direction. Expiry advances each head past the legs that
    left its window; the cap and the longest window's expiry advance ``heads[-1]``; the dead
    prefix is cut off once it is at least half the list. ``seq0`` is the number of legs cut
    off, so ``legs[j]`` is the account's leg number ``seq0 + j`` since the last reset.

    Legs are expected in time order per account (the stream job sorts them); see the module
    docstring for what a late leg does.
    """

    __slots__ = ("legs", "heads", "seq0", "aggs", "cps", "last_minute", "first_minute", "n_life",
                 "last_out", "last_in", "recent", "recent_sorted")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.legs: list[tuple[int, bool, str, int, int]] = []
        self.heads: list[int] = [0] * _NW
        self.seq0 = 0
        self.aggs, self.cps = _blank_windows()
        self.last_minute: int | None = None  # latest minute applied since the last reset
        self.first_minute = 0
        self.n_life = 0
        self.last_out: tuple[int, int, int] | None = None  # (minute, cents, leg number) of the latest out leg
        self.last_in: tuple[int, int, int] | None = None
        self.recent: list[int] = []  # cents of the last RECENT_LEGS legs, a ring (slot (n_life - 1) % K)
        self.recent_sorted: list[int] = []  # the same, sorted

    # ------------------------------------------------------------------ pickling, equality

    def _state(self) -> tuple:
        """The state with the dead prefix cut off: what pickles, and what equality compares."""
        live = self.heads[-1]
        return (
            self.legs[live:], [h - live for h in self.heads], self.seq0 + live, self.aggs, self.cps,
            self.last_minute, self.first_minute, self.n_life, self.last_out, self.last_in,
            self.recent, self.recent_sorted,
        )

    def __reduce__(self):
        # Positional state (the stream job pickles the window into keyed state after each batch).
        return _restore, self._state()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AccountWindow):
            return NotImplemented
        return self._state() == other._state()

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        live = len(self.legs) - self.heads[-1]
        return f"AccountWindow(legs={live}, n_life={self.n_life}, last_minute={self.last_minute})"

    # ------------------------------------------------------------------ the leg

    def _drop(self, i: int, leg: tuple) -> None:
        """Take ``leg`` (window i's first) out of window i's aggregates."""
        _, is_out, cp, cents, was_new = leg
        d = 0 if is_out else 1
        agg = self.aggs[i]
        agg[d] -= 1
        agg[2 + d] -= cents
        agg[_NEW] -= was_new
        counts = self.cps[i][d]
        left = counts[cp] - 1
        if left:
            counts[cp] = left
        else:
            del counts[cp]

    def apply(self, minute: int, is_out: bool, counterparty: str, cents: int) -> dict[str, float]:
        """Add one leg and return the account's features as of it, in ``ACCOUNT_FEATURES`` order."""
        long_w = LONG_WINDOW_MINUTES
        last = self.last_minute
        if last is not None and minute - last >= long_w:
            self._reset()  # 7 days idle: as if never seen
            last = None
        if last is None:
            gap = long_w
            self.first_minute = self.last_minute = minute
        else:
            gap = minute - last
            if gap < 0:  # a late leg
                gap = 0
            else:
                self.last_minute = minute
        self.n_life = n_life = self.n_life + 1
        d = 0 if is_out else 1

        # expire every window to this minute, shortest first (a head never passes a shorter one's)
        legs, heads, aggs, cps = self.legs, self.heads, self.aggs, self.cps
        end = len(legs)
        for i in range(_NW):
            h = heads[i]
            horizon = minute - WINDOW_MINUTES[i]
            while h < end and legs[h][0] <= horizon:
                self._drop(i, legs[h])
                h += 1
            heads[i] = h

        # cp_new: against the 7d window before this leg is added (and before the cap makes room)
        longest = cps[_LAST]
        was_new = 0 if counterparty in longest[0] or counterparty in longest[1] else 1

        # the other way's latest leg (read now, checked against the 7d window below)
        opp = self.last_in if is_out else self.last_out

        # this amount against the previous RECENT_LEGS amounts, then into the ring
        srt = self.recent_sorted
        if srt:
            med = srt[(len(srt) - 1) // 2]  # lower median: an integer
            amt_vs_med = float(cents) / float(med) if med > 0 else (1.0 if cents > 0 else 0.0)
            lo = bisect_left(srt, cents)
            same_amt = bisect_right(srt, cents, lo) - lo
        else:
            amt_vs_med, same_amt = -1.0, 0
        recent = self.recent
        if len(recent) < RECENT_LEGS:
            recent.append(cents)
        else:  # overwrite the oldest: slot (n_life - 1) mod K, counting this leg
            slot = (n_life - 1) % len(recent)
            del srt[bisect_left(srt, recent[slot])]
            recent[slot] = cents
        insort(srt, cents)

        # append to every window
        seq = self.seq0 + end
        legs.append((minute, is_out, counterparty, cents, was_new))
        for i in range(_NW):
            agg = aggs[i]
            agg[d] += 1
            agg[2 + d] += cents
            agg[_NEW] += was_new
            counts = cps[i][d]
            counts[counterparty] = counts.get(counterparty, 0) + 1

        # the cap: drop the oldest kept leg from every window it is still in
        live = heads[_LAST]
        if end + 1 - live > MAX_WINDOW_LEGS:
            leg = legs[live]
            for i in range(_NW):
                if heads[i] == live:
                    self._drop(i, leg)
                    heads[i] = live + 1
            live += 1
        if live >= _COMPACT_MIN and 2 * live >= len(legs):
            del legs[:live]
            self.seq0 += live
            for i in range(_NW):
                heads[i] -= live
            live = 0

        # the last leg each way
        mine = (minute, cents, seq)
        if is_out:
            if self.last_out is None or minute >= self.last_out[0]:
                self.last_out = mine
        elif self.last_in is None or minute >= self.last_in[0]:
            self.last_in = mine
        if opp is not None and opp[2] >= self.seq0 + live:  # still in the 7d window
            since_opp = minute - opp[0]
            since_opp = 0 if since_opp < 0 else (long_w if since_opp > long_w else since_opp)
            opp_ratio = float(cents) / float(opp[1]) if opp[1] > 0 else (1.0 if cents > 0 else 0.0)
        else:
            since_opp, opp_ratio = long_w, -1.0

        values: list[float] = []
        for i in range(_NW):
            out_n, in_n, out_c, in_c, _ = aggs[i]
            out_cp, in_cp = cps[i]
            hi, lo = (out_c, in_c) if out_c >= in_c else (in_c, out_c)
            moved = out_c + in_c
            values += (
                float(out_n),
                float(in_n),
                float(out_c) / 100.0,
                float(in_c) / 100.0,
                float(len(out_cp)),
                float(len(in_cp)),
                float(lo) / float(hi) if hi != 0 else 0.0,
                float(out_c - in_c) / float(moved) if moved != 0 else 0.0,
            )
        short, long_ = aggs[0], aggs[_LAST]
        values.append(float((short[0] + short[1]) * BURST_SCALE) / float(long_[0] + long_[1]))
        values.append(float(gap if gap < long_w else long_w))
        for i in _CP_WINDOWS:
            values.append(float(cps[i][d][counterparty]))
        values.append(float(was_new))
        for i in _CP_WINDOWS:
            agg = aggs[i]
            values.append(float(agg[_NEW]) / float(agg[0] + agg[1]))
        age = minute - self.first_minute
        values += (
            float(since_opp),
            opp_ratio,
            amt_vs_med,
            float(same_amt),
            float(0 if age < 0 else (long_w if age > long_w else age)),
            float(n_life),
        )
        return dict(zip(ACCOUNT_FEATURES, values))


def _restore(legs, heads, seq0, aggs, cps, last_minute, first_minute, n_life, last_out, last_in,
             recent, recent_sorted) -> AccountWindow:
    w = AccountWindow.__new__(AccountWindow)
    w.legs, w.heads, w.seq0, w.aggs, w.cps = legs, heads, seq0, aggs, cps
    w.last_minute, w.first_minute, w.n_life = last_minute, first_minute, n_life
    w.last_out, w.last_in, w.recent, w.recent_sorted = last_out, last_in, recent, recent_sorted
    return w


def event_features(ev: TransactionEvent) -> dict[str, float]:
    """The event's own features (:data:`EVENT_FEATURES`)."""
    paid = ev.amount_paid
    return {
        "amount_usd": float(usd_cents(paid)) / 100.0,
        "cross_currency": 1.0 if paid.currency != ev.amount_received.currency else 0.0,
        "self_transfer": 1.0 if ev.sender.node_id == ev.receiver.node_id else 0.0,
        "format": float(PAYMENT_FORMATS.index(ev.payment_format)),
        "hour": float(ev.timestamp.hour),
        "round_amount": 1.0 if paid.units % (100 * 10**paid.scale) == 0 else 0.0,
    }


def out_leg(ev: TransactionEvent) -> tuple[str, int, bool, str, int]:
    """(account key, minute, is_out, counterparty, USD cents) of the sender's leg."""
    return ev.sender.node_id, ev.minute, True, ev.receiver.node_id, usd_cents(ev.amount_paid)


def in_leg(ev: TransactionEvent) -> tuple[str, int, bool, str, int]:
    """(account key, minute, is_out, counterparty, USD cents) of the receiver's leg."""
    return ev.receiver.node_id, ev.minute, False, ev.sender.node_id, usd_cents(ev.amount_received)


def side_features(prefix: str, feats: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}_{k}": v for k, v in feats.items()}


def assemble(ev: TransactionEvent, snd: dict[str, float], rcv: dict[str, float]) -> dict[str, float]:
    """Join both legs' features with the event's own into one ordered feature vector."""
    vec = {**event_features(ev), **side_features("snd", snd), **side_features("rcv", rcv)}
    return {name: vec[name] for name in FEATURE_NAMES}


def event_order(ev: TransactionEvent) -> tuple[int, int, str]:
    """The order events are applied in: (event time in ms, source offset, event id). For the
    minute-resolution AMLworld timestamps this is (minute, source offset, event id)."""
    return epoch_millis(ev.timestamp), ev.source_offset, ev.event_id


@dataclass
class Admission:
    """How the stream job sorts records by event time (see :func:`admit`)."""

    processed: list[TransactionEvent]
    late: list[TransactionEvent]
    duplicates: list[TransactionEvent]


def admit(events: Iterable[TransactionEvent], out_of_orderness_ms: int, allowed_lateness_ms: int) -> Admission:
    """The reference of the job's event-time rules, over records in arrival order.

    The watermark after a record is the largest event time seen so far minus the
    out-of-orderness bound (none before the first record). A record whose time plus the allowed
    lateness is at or behind the watermark *before* it is late; otherwise, a record whose event id
    was already admitted is a duplicate; otherwise it is processed. Every record, late and
    duplicate ones included, moves the watermark.

    >>> from datetime import datetime
    >>> from auditflow.money import Money
    >>> from auditflow.records import AccountRef
    >>> def ev(i, minute):
    ...     return TransactionEvent(f"t{i}", datetime(2022, 9, 1, 0, minute), AccountRef("1", "A"),
    ...         AccountRef("1", "B"), Money("Euro", 1), Money("Euro", 1), "ACH", False, i)
    >>> a = admit([ev(1, 10), ev(2, 0), ev(3, 9), ev(1, 10)], out_of_orderness_ms=120_000, allowed_lateness_ms=0)
    >>> [e.event_id for e in a.processed], [e.event_id for e in a.late], [e.event_id for e in a.duplicates]
    (['t1', 't3'], ['t2'], ['t1'])
    """
    out = Admission([], [], [])
    seen: set[str] = set()
    watermark: int | None = None
    for ev in events:
        ts = epoch_millis(ev.timestamp)
        if watermark is not None and ts + allowed_lateness_ms <= watermark:
            out.late.append(ev)
        elif ev.event_id in seen:
            out.duplicates.append(ev)
        else:
            seen.add(ev.event_id)
            out.processed.append(ev)
        mark = ts - out_of_orderness_ms
        watermark = mark if watermark is None or mark > watermark else watermark
    return out


def iter_features(events: Iterable[TransactionEvent]) -> Iterator[tuple[TransactionEvent, dict[str, float]]]:
    """The plain-Python reference: yield each event with its features, in application order.

    Events are sorted by :func:`event_order` and each one's OUT leg is applied
    before its IN leg: per account, the order (minute, source offset, event id, OUT before IN)
    in which the stream job applies legs once the watermark passes them, so both compute the
    same values whatever the order of the input (a file slightly out of time order, Kafka
    partitions)."""
    windows: dict[str, AccountWindow] = {}

    def window(key: str) -> AccountWindow:
        w = windows.get(key)
        if w is None:
            w = windows[key] = AccountWindow()
        return w

    for ev in sorted(events, key=event_order):
        key, minute, is_out, cp, cents = out_leg(ev)
        snd = window(key).apply(minute, is_out, cp, cents)
        key, minute, is_out, cp, cents = in_leg(ev)
        rcv = window(key).apply(minute, is_out, cp, cents)
        yield ev, assemble(ev, snd, rcv)


def compute_features(events: Iterable[TransactionEvent]) -> list[tuple[TransactionEvent, dict[str, float]]]:
    """:func:`iter_features` as a list."""
    return list(iter_features(events))
