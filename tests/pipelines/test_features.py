"""Stream features against an independent brute-force recomputation.

The incremental :class:`pipelines.features.AccountWindow` keeps running sums, counters, an LRU
counterparty memory and a ring of recent amounts; :func:`reference` below recomputes every
feature of a leg from scratch out of the account's full leg history, straight from the feature
definitions. Random leg sequences (hypothesis) cover self-transfers, window eviction, the 7-day
memory's expiry and cap, the leg cap (``MAX_LEGS``), repeated and zero amounts.
"""

from __future__ import annotations

import math
import pickle
import random
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipelines.features as F
from auditflow.money import Money
from auditflow.records import PAYMENT_FORMATS, AccountRef, TransactionEvent

ME = "me"


# ------------------------------------------------------------------------------ the reference


def memory(legs: list[tuple[int, bool, str, int]], out: bool, now: int) -> list[str]:
    """The 7-day counterparty memory after ``legs``: counterparties of direction ``out`` last
    seen after ``now - LONG_WINDOW_MINUTES``, the ``MAX_LONG_COUNTERPARTIES`` most recently seen."""
    seen: list[str] = []
    for m, o, c, _ in reversed(legs):
        if o == out and m > now - F.LONG_WINDOW_MINUTES and c not in seen:
            seen.append(c)
    return seen[: F.MAX_LONG_COUNTERPARTIES]


def is_new(history: list[tuple[int, bool, str, int]]) -> bool:
    """Whether the last leg's counterparty was in neither memory before it."""
    now, _, cp, _ = history[-1]
    before = history[:-1]
    return cp not in memory(before, True, now) and cp not in memory(before, False, now)


def reference(history: list[tuple[int, bool, str, int]], new: list[bool], window: int) -> dict[str, float]:
    """Features of the last leg of ``history`` (all of the account's legs so far, in order, time
    non-decreasing), recomputed from scratch with the module's current constants. ``new[i]`` is
    :func:`is_new` of ``history[: i + 1]`` (kept so the check stays quadratic, not cubic)."""
    long_w, cap_legs, k = F.LONG_WINDOW_MINUTES, F.MAX_LEGS, F.RECENT_LEGS
    now, is_out, cp, cents = history[-1]
    j = len(history) - 1

    in_window = [i for i, leg in enumerate(history) if leg[0] > now - window]
    kept = in_window[-cap_legs:]  # the window, less the oldest legs beyond the cap
    out_legs = [history[i] for i in kept if history[i][1]]
    in_legs = [history[i] for i in kept if not history[i][1]]
    out_c, in_c = sum(leg[3] for leg in out_legs), sum(leg[3] for leg in in_legs)
    moved = out_c + in_c

    prev = history[:j]
    gap = window if not prev else min(now - prev[-1][0], window)
    opp = [leg for leg in prev if leg[1] != is_out]
    if opp and opp[-1][0] > now - window:
        since_opp = min(now - opp[-1][0], window)
        opp_ratio = cents / opp[-1][3] if opp[-1][3] > 0 else float(cents > 0)
    else:
        since_opp, opp_ratio = window, -1.0
    recent = sorted(leg[3] for leg in prev[-k:])
    if recent:
        med = recent[(len(recent) - 1) // 2]
        amt_vs_med = cents / med if med > 0 else float(cents > 0)
    else:
        amt_vs_med = -1.0
    new_flags = {i: new[i] for i in kept}
    return {
        "out_n": float(len(out_legs)),
        "out_usd": math.log1p(out_c / 100),
        "out_cp": float(len({leg[2] for leg in out_legs})),
        "in_n": float(len(in_legs)),
        "in_usd": math.log1p(in_c / 100),
        "in_cp": float(len({leg[2] for leg in in_legs})),
        "n_1h": float(sum(1 for i in kept if history[i][0] > now - F.SHORT_WINDOW_MINUTES)),
        "gap_min": float(gap),
        "cp_legs": float(sum(1 for i in kept if history[i][1] == is_out and history[i][2] == cp)),
        "cp_new": float(new_flags[j]),
        "new_cp_frac": sum(new_flags.values()) / len(kept),
        "new_out_n": float(sum(1 for i in kept if history[i][1] and new_flags[i])),
        "new_in_n": float(sum(1 for i in kept if not history[i][1] and new_flags[i])),
        "out_cp_7d": float(len(memory(history, True, now))),
        "in_cp_7d": float(len(memory(history, False, now))),
        "pass_ratio": min(out_c, in_c) / max(out_c, in_c) if moved else 0.0,
        "net_out": (out_c - in_c) / moved if moved else 0.0,
        "since_opp_min": float(since_opp),
        "opp_ratio": opp_ratio,
        "amt_vs_med": amt_vs_med,
        "same_amt": float(sum(1 for c in recent if c == cents)),
        "age_min": float(min(now - history[0][0], long_w)),
        "n_life": float(len(history)),
    }


def check_sequence(legs: list[tuple[int, bool, str, int]], window: int) -> F.AccountWindow:
    w = F.AccountWindow(window)
    history: list[tuple[int, bool, str, int]] = []
    new: list[bool] = []
    for i, leg in enumerate(legs):
        got = w.apply(*leg)
        history.append(leg)
        new.append(is_new(history))
        want = reference(history, new, window)
        assert list(got) == list(F.ACCOUNT_FEATURES)
        assert got == want, (i, leg, {k: (got[k], want[k]) for k in want if got[k] != want[k]})
    return w


# ------------------------------------------------------------------------------ random sequences


@st.composite
def leg_sequences(draw):
    """Time-ordered legs of one account: bursts in the same minute, gaps beyond the window,
    a few counterparties (repeats), self-transfers (an out leg to itself then the in leg),
    repeated and zero amounts."""
    n = draw(st.integers(1, 60))
    minute = draw(st.integers(0, 10_000))
    legs = []
    for _ in range(n):
        minute += draw(st.sampled_from([0, 0, 1, 5, 20, 59, 60, 61, 200, 700]))
        cents = draw(st.sampled_from([0, 1, 100, 100, 250, 9_999, 10_000, 123_456]))
        if draw(st.integers(0, 9)) == 0:  # a self-transfer: both legs at this account
            legs += [(minute, True, ME, cents), (minute, False, ME, cents)]
        else:
            legs.append((minute, draw(st.booleans()), draw(st.sampled_from("abcdefg")), cents))
    return legs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(legs=leg_sequences(), window=st.sampled_from([30, 60, 240, 1440]))
def test_matches_brute_force(legs, window, monkeypatch):
    monkeypatch.setattr(F, "LONG_WINDOW_MINUTES", 900)  # short enough for expiry to happen here
    check_sequence(legs, window)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(legs=leg_sequences(), window=st.sampled_from([60, 1440]))
def test_matches_brute_force_with_tight_caps(legs, window, monkeypatch):
    """Leg cap, counterparty-memory cap and a short ring of recent amounts all bind."""
    monkeypatch.setattr(F, "MAX_LEGS", 4)
    monkeypatch.setattr(F, "MAX_LONG_COUNTERPARTIES", 2)
    monkeypatch.setattr(F, "RECENT_LEGS", 3)
    monkeypatch.setattr(F, "LONG_WINDOW_MINUTES", 300)
    check_sequence(legs, window)


def test_default_constants_on_a_long_random_sequence():
    rng = random.Random(5)
    minute, legs = 0, []
    for _ in range(400):
        minute += rng.choice([0, 1, 3, 30, 90, 400])
        cents = rng.choice([500, 12_000, rng.randrange(1, 10**6)])
        legs.append((minute, rng.random() < 0.5, rng.choice("abcdefghijklmnop"), cents))
    w = check_sequence(legs, F.DEFAULT_WINDOW_MINUTES)
    assert w.n_life == 400 and len(w.recent) == F.RECENT_LEGS


def test_window_eviction_and_leg_cap_by_hand(monkeypatch):
    monkeypatch.setattr(F, "MAX_LEGS", 3)
    w = F.AccountWindow(60)
    for m, cp in ((0, "a"), (10, "b"), (20, "a"), (30, "c")):
        f = w.apply(m, True, cp, 100)
    assert (f["out_n"], f["out_cp"], f["n_1h"], f["cp_legs"]) == (3.0, 3.0, 3.0, 1.0)  # cap drops (0, a)
    assert f["out_cp_7d"] == 3.0  # the 7-day memory is not bound by the leg cap
    f = w.apply(85, False, "a", 50)  # legs at 0..20 are out of the 60-minute window
    assert (f["out_n"], f["in_n"], f["out_usd"], f["in_usd"]) == (1.0, 1.0, math.log1p(1.0), math.log1p(0.5))
    assert (f["since_opp_min"], f["opp_ratio"], f["cp_new"]) == (55.0, 0.5, 0.0)
    assert (f["pass_ratio"], f["net_out"]) == (0.5, (100 - 50) / 150)


def test_self_transfer_legs():
    w = F.AccountWindow()
    snd = w.apply(100, True, ME, 5_000)
    rcv = w.apply(100, False, ME, 5_000)
    assert (snd["cp_new"], rcv["cp_new"]) == (1.0, 0.0)  # the out leg just made it known
    assert (rcv["out_n"], rcv["in_n"], rcv["pass_ratio"], rcv["net_out"]) == (1.0, 1.0, 1.0, 0.0)
    assert (rcv["since_opp_min"], rcv["opp_ratio"], rcv["same_amt"], rcv["amt_vs_med"]) == (0.0, 1.0, 1.0, 1.0)


def test_state_stays_bounded_on_a_hub(monkeypatch):
    monkeypatch.setattr(F, "MAX_LEGS", 50)
    w = F.AccountWindow()
    for i in range(3000):
        w.apply(i // 3, i % 2 == 0, f"cp{i}", 100 + i)
    assert len(w.legs) == w.out_n + w.in_n == 50
    assert len(w.out_cp) + len(w.in_cp) <= 50
    assert len(w.out_cp_long) == len(w.in_cp_long) == F.MAX_LONG_COUNTERPARTIES
    assert len(w.recent) == len(w.recent_sorted) == F.RECENT_LEGS
    assert w.appended - w.hour_first <= 50


def test_late_legs_are_tolerated():
    """The stream job applies a leg behind the watermark at once: never crash, stay consistent."""
    rng = random.Random(1)
    w = F.AccountWindow(120)
    for _ in range(500):
        f = w.apply(rng.randrange(0, 2000), rng.random() < 0.5, rng.choice("abc"), rng.randrange(0, 1000))
        assert all(math.isfinite(v) for v in f.values())
        assert w.out_n == sum(1 for leg in w.legs if leg[1]) and w.in_n == len(w.legs) - w.out_n
        assert w.out_cents + w.in_cents == sum(leg[3] for leg in w.legs) >= 0
        assert 1 <= f["n_1h"] <= len(w.legs) and f["cp_legs"] >= 1


def test_pickled_state_continues_exactly():
    """The stream job keeps the window pickled in keyed state between legs."""
    rng = random.Random(2)
    legs = sorted((rng.randrange(0, 5000), rng.random() < 0.5, rng.choice("abcdef"), rng.randrange(0, 10**5))
                  for _ in range(300))
    plain, pickled = F.AccountWindow(300), F.AccountWindow(300)
    for leg in legs:
        a = plain.apply(*leg)
        pickled = pickle.loads(pickle.dumps(pickled))
        assert pickled.apply(*leg) == a
    assert pickled == plain


# ------------------------------------------------------------------------------ events


def _events(n: int, seed: int) -> list[TransactionEvent]:
    rng = random.Random(seed)
    accounts = [AccountRef(f"0{i % 3}", f"80{i:03d}") for i in range(8)]
    t, out = datetime(2022, 9, 1), []
    for i in range(n):
        t += timedelta(minutes=rng.choice([0, 1, 7, 45, 300]))
        s = rng.choice(accounts)
        r = s if rng.random() < 0.1 else rng.choice(accounts)
        paid = Money(rng.choice(["US Dollar", "Euro", "Yen"]), rng.choice([1, 10_000, rng.randrange(1, 10**7)]))
        out.append(TransactionEvent(f"e{i}", t, s, r, paid, paid, rng.choice(PAYMENT_FORMATS), False, i + 2))
    return out


@pytest.mark.parametrize("window", [90, F.DEFAULT_WINDOW_MINUTES])
def test_event_vectors_join_both_legs(window):
    events = _events(300, seed=window)
    histories: dict[str, list] = {}
    news: dict[str, list] = {}
    for ev, vec in F.iter_features(events, window):
        assert tuple(vec) == F.FEATURE_NAMES
        sides = {}
        for side, (key, minute, is_out, cp, cents) in (("snd", F.out_leg(ev)), ("rcv", F.in_leg(ev))):
            history = histories.setdefault(key, [])
            history.append((minute, is_out, cp, cents))
            news.setdefault(key, []).append(is_new(history))
            sides[side] = reference(history, news[key], window)
        want = {**F.event_features(ev), **{f"{s}_{k}": v for s, feats in sides.items() for k, v in feats.items()}}
        assert vec == {name: want[name] for name in F.FEATURE_NAMES}
        if ev.is_self_transfer:
            assert vec["rcv_cp_new"] == 0.0 and vec["self_transfer"] == 1.0


def test_names_and_descriptions():
    assert len(set(F.FEATURE_NAMES)) == len(F.FEATURE_NAMES)
    assert set(F.FEATURE_DESCRIPTIONS) == set(F.FEATURE_NAMES)
    assert list(F.AccountWindow().apply(0, True, "x", 1)) == list(F.ACCOUNT_FEATURES)
