"""Multi-scale stream features (v2) against an independent brute-force recomputation.

The incremental :class:`pipelines.features.AccountWindow` keeps one shared leg buffer with a head
per window, running counts, sums and counterparty dicts and a ring of recent amounts;
:func:`oracle` below recomputes every feature of a leg from scratch out of the list of all legs
applied to the account so far, straight from the v2 feature specification (as restated, with
its readings, in the module docstring of :mod:`pipelines.features`), sharing no code with it: the
windows, names and order are written out here again. Values are compared with ``==``, never
approximately: the JVM operator must match them bit for bit.

Random leg sequences (hypothesis) cover hubs (many counterparties), repeated counterparties,
legs in the same minute, window boundaries (a leg exactly 1 h, 24 h, 7 d old), gaps of 7 days
and more (the state reset), self-transfers, zero, repeated and huge (> 2**53) amounts, and the
leg cap and a short ring of recent amounts (monkeypatched small).
"""

from __future__ import annotations

import math
import pickle
import random
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipelines.features as F
from auditflow import limits
from auditflow.money import Money, usd_cents
from auditflow.records import PAYMENT_FORMATS, AccountRef, TransactionEvent

ME = "me"

# ------------------------------------------------------------------------------ the spec, again

SPEC_WINDOWS = (("1h", 60), ("24h", 1440), ("7d", 10080))
LONG = 10080
HOUR = 60
SPEC_ACCOUNT_FEATURES = [
    *(f"{f}_{s}" for s, _ in SPEC_WINDOWS
      for f in ("out_n", "in_n", "out_usd", "in_usd", "out_cp", "in_cp", "pass", "net")),
    "burst", "gap_min", "cp_legs_24h", "cp_legs_7d", "cp_new", "new_frac_24h", "new_frac_7d",
    "since_opp_min", "opp_ratio", "amt_vs_med", "same_amt", "age_min", "n_life",
]
SPEC_EVENT_FEATURES = ["amount_usd", "cross_currency", "self_transfer", "format", "hour", "round_amount"]

Leg = tuple[int, bool, str, int]  # (minute, is_out, counterparty, cents)


def segment_start(history: list[Leg], j: int) -> int:
    """Index of the first leg since the account's last reset (7 days idle), as of leg j."""
    start = 0
    for k in range(1, j + 1):
        if history[k][0] - history[k - 1][0] >= LONG:
            start = k
    return start


def kept(history: list[Leg], j: int, w: int, cap: int, start: int) -> list[int]:
    """Indices of the legs in window ``w`` as of leg j (leg j included): since the last reset,
    younger than ``w`` minutes (strictly) and among the last ``cap`` legs."""
    now = history[j][0]
    return [k for k in range(start, j + 1) if history[k][0] > now - w and k > j - cap]


def cp_was_new(history: list[Leg], j: int, cap: int) -> bool:
    """``cp_new`` of leg j: no leg with its counterparty, either way, in the 7d window before leg
    j is added (the legs kept after leg j - 1 that are younger than 7 days at leg j's minute)."""
    now, _, cp, _ = history[j]
    start = segment_start(history, j)
    before = [k for k in range(start, j) if history[k][0] > now - LONG and k > (j - 1) - cap]
    return all(history[k][2] != cp for k in before)


def ratio(a: int, b: int) -> float:
    return float(a) / float(b)


def oracle(history: list[Leg], new: list[bool], cap: int, k_recent: int) -> dict[str, float]:
    """Features of the last leg of ``history`` (the account's legs so far, time non-decreasing),
    from scratch. ``new[i]`` is :func:`cp_was_new` of leg i (kept so the check stays quadratic)."""
    j = len(history) - 1
    now, is_out, cp, cents = history[j]
    start = segment_start(history, j)
    f: dict[str, float] = {}
    win: dict[str, list[int]] = {}
    for suffix, w in SPEC_WINDOWS:
        idx = win[suffix] = kept(history, j, w, cap, start)
        outs = [history[k] for k in idx if history[k][1]]
        ins = [history[k] for k in idx if not history[k][1]]
        out_c, in_c = sum(g[3] for g in outs), sum(g[3] for g in ins)
        f[f"out_n_{suffix}"] = float(len(outs))
        f[f"in_n_{suffix}"] = float(len(ins))
        f[f"out_usd_{suffix}"] = float(out_c) / 100.0
        f[f"in_usd_{suffix}"] = float(in_c) / 100.0
        f[f"out_cp_{suffix}"] = float(len({g[2] for g in outs}))
        f[f"in_cp_{suffix}"] = float(len({g[2] for g in ins}))
        f[f"pass_{suffix}"] = ratio(min(in_c, out_c), max(in_c, out_c)) if max(in_c, out_c) != 0 else 0.0
        f[f"net_{suffix}"] = ratio(out_c - in_c, out_c + in_c) if out_c + in_c != 0 else 0.0
    f["burst"] = ratio(len(win["1h"]) * (LONG // HOUR), len(win["7d"]))
    f["gap_min"] = float(LONG if j == start else max(0, min(now - history[j - 1][0], LONG)))
    for suffix in ("24h", "7d"):
        f[f"cp_legs_{suffix}"] = float(sum(1 for k in win[suffix] if history[k][1] == is_out and history[k][2] == cp))
    f["cp_new"] = 1.0 if new[j] else 0.0
    for suffix in ("24h", "7d"):
        f[f"new_frac_{suffix}"] = ratio(sum(1 for k in win[suffix] if new[k]), len(win[suffix]))
    other_way = [k for k in range(start, j) if history[k][1] != is_out]
    if other_way and other_way[-1] in win["7d"]:
        opp_minute, opp_cents = history[other_way[-1]][0], history[other_way[-1]][3]
        f["since_opp_min"] = float(max(0, now - opp_minute))
        f["opp_ratio"] = ratio(cents, opp_cents) if opp_cents > 0 else (1.0 if cents > 0 else 0.0)
    else:
        f["since_opp_min"], f["opp_ratio"] = float(LONG), -1.0
    recent = sorted(history[k][3] for k in range(max(start, j - k_recent), j))
    if recent:
        med = recent[(len(recent) - 1) // 2]
        f["amt_vs_med"] = ratio(cents, med) if med > 0 else (1.0 if cents > 0 else 0.0)
    else:
        f["amt_vs_med"] = -1.0
    f["same_amt"] = float(sum(1 for c in recent if c == cents))
    f["age_min"] = float(min(now - history[start][0], LONG))
    f["n_life"] = float(j - start + 1)
    assert list(f) == SPEC_ACCOUNT_FEATURES
    return f


def check_sequence(legs: list[Leg]) -> F.AccountWindow:
    """Apply ``legs`` to a fresh window and compare every leg's features with the oracle's,
    reading the cap and the ring size from the module (so monkeypatching them works)."""
    cap, k_recent = F.MAX_WINDOW_LEGS, F.RECENT_LEGS
    w = F.AccountWindow()
    history: list[Leg] = []
    new: list[bool] = []
    for i, leg in enumerate(legs):
        got = w.apply(*leg)
        history.append(leg)
        new.append(cp_was_new(history, i, cap))
        want = oracle(history, new, cap, k_recent)
        assert list(got) == SPEC_ACCOUNT_FEATURES
        assert got == want, (i, leg, {k: (got[k], want[k]) for k in want if got[k] != want[k]})
        assert all(type(v) is float for v in got.values())
    return w


# ------------------------------------------------------------------------------ random sequences

GAPS = [0, 0, 0, 1, 2, 30, 59, 60, 61, 600, 1439, 1440, 1441, 5000, 10079, 10080, 10081]
AMOUNTS = [0, 0, 1, 100, 2_500, 2_500, 10_000, 999_999, 2**53 + 1, 2**53 + 3]


@st.composite
def leg_sequences(draw, max_legs: int = 60):
    """Time-ordered legs of one account: same-minute bursts, gaps on every window boundary and
    beyond 7 days, a few repeated counterparties or a hub's many, self-transfers (the out leg to
    itself, then the in leg), repeated, zero and huge amounts."""
    n = draw(st.integers(1, max_legs))
    hub = draw(st.booleans())
    pool = [f"h{i:02d}" for i in range(40)] if hub else ["a", "b", "c", "d"]
    p_out = draw(st.sampled_from([0.1, 0.5, 0.9]))
    minute = draw(st.integers(0, 30_000))
    legs: list[Leg] = []
    for _ in range(n):
        minute += draw(st.sampled_from(GAPS))
        cents = draw(st.sampled_from(AMOUNTS))
        if draw(st.integers(0, 9)) == 0:
            legs += [(minute, True, ME, cents), (minute, False, ME, cents)]
        else:
            is_out = draw(st.integers(0, 9)) < p_out * 10
            legs.append((minute, is_out, draw(st.sampled_from(pool)), cents))
    return legs


@settings(max_examples=200, deadline=None)
@given(legs=leg_sequences())
def test_matches_brute_force(legs):
    check_sequence(legs)


@settings(max_examples=200, deadline=None)
@given(legs=leg_sequences(), cap=st.sampled_from([1, 2, 3, 5]), k=st.sampled_from([1, 2, 3]))
def test_matches_brute_force_with_tight_caps(legs, cap, k):
    """The leg cap and a short ring of recent amounts both bind."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(F, "MAX_WINDOW_LEGS", cap)
        mp.setattr(F, "RECENT_LEGS", k)
        check_sequence(legs)


def test_default_constants_on_a_long_random_sequence():
    """Long enough for the buffer's dead prefix to be cut off several times."""
    rng = random.Random(5)
    minute, legs = 0, []
    for _ in range(600):
        minute += rng.choice([0, 1, 3, 30, 90, 400])
        cents = rng.choice([500, 12_000, rng.randrange(1, 10**6)])
        legs.append((minute, rng.random() < 0.5, rng.choice("abcdefghijklmnop"), cents))
    w = check_sequence(legs)
    assert len(w.recent) == F.RECENT_LEGS and w.seq0 > 0


def test_cap_on_a_long_hub_sequence(monkeypatch):
    monkeypatch.setattr(F, "MAX_WINDOW_LEGS", 40)
    rng = random.Random(9)
    legs = [(i // 7, rng.random() < 0.3, f"cp{rng.randrange(60)}", rng.randrange(0, 5000)) for i in range(500)]
    check_sequence(legs)


# ------------------------------------------------------------------------------ by hand


def test_three_legs_by_hand():
    """pays B 100.00 at 0, receives 25.00 from C at 30, pays B 75.00 at 100."""
    w = F.AccountWindow()
    w.apply(0, True, "B", 10_000)
    f = w.apply(30, False, "C", 2_500)
    assert (f["pass_1h"], f["net_1h"], f["since_opp_min"], f["opp_ratio"], f["amt_vs_med"]) == (0.25, 0.6, 30.0, 0.25, 0.25)
    f = w.apply(100, True, "B", 7_500)
    assert f == {
        # 1 h: only this leg (30 is not > 100 - 60)
        "out_n_1h": 1.0, "in_n_1h": 0.0, "out_usd_1h": 75.0, "in_usd_1h": 0.0,
        "out_cp_1h": 1.0, "in_cp_1h": 0.0, "pass_1h": 0.0, "net_1h": 1.0,
        # 24 h and 7 d: all three; pass = 2500 / 17500 = 1/7, net = 15000 / 20000
        "out_n_24h": 2.0, "in_n_24h": 1.0, "out_usd_24h": 175.0, "in_usd_24h": 25.0,
        "out_cp_24h": 1.0, "in_cp_24h": 1.0, "pass_24h": 1 / 7, "net_24h": 0.75,
        "out_n_7d": 2.0, "in_n_7d": 1.0, "out_usd_7d": 175.0, "in_usd_7d": 25.0,
        "out_cp_7d": 1.0, "in_cp_7d": 1.0, "pass_7d": 1 / 7, "net_7d": 0.75,
        "burst": 56.0,  # 1 leg in the hour * 168 / 3 legs in 7 days
        "gap_min": 70.0, "cp_legs_24h": 2.0, "cp_legs_7d": 2.0, "cp_new": 0.0,
        "new_frac_24h": 2 / 3, "new_frac_7d": 2 / 3,  # B and C were new, B again is not
        "since_opp_min": 70.0, "opp_ratio": 3.0,  # 7500 / 2500
        "amt_vs_med": 3.0,  # lower median of (2500, 10000) is 2500
        "same_amt": 0.0, "age_min": 100.0, "n_life": 3.0,
    }
    assert list(f) == SPEC_ACCOUNT_FEATURES


def test_window_boundaries_are_strict():
    w = F.AccountWindow()
    w.apply(0, True, "B", 100)
    f = w.apply(60, True, "B", 100)  # the first leg is exactly an hour old: out of the hour
    assert (f["out_n_1h"], f["out_n_24h"], f["burst"]) == (1.0, 2.0, 84.0)
    f = w.apply(1440, False, "B", 100)  # exactly 24 h after the first: it has left the day
    assert (f["out_n_24h"], f["in_n_24h"], f["out_n_7d"], f["since_opp_min"]) == (1.0, 1.0, 2.0, 1380.0)
    assert (f["cp_legs_24h"], f["cp_legs_7d"], f["cp_new"]) == (1.0, 1.0, 0.0)  # B is known the other way


def test_seven_days_idle_resets_the_state():
    w = F.AccountWindow()
    w.apply(0, True, "B", 100)
    f = w.apply(10_079, True, "B", 100)  # a minute short of 7 days: still known, still in 7 d
    assert (f["n_life"], f["cp_new"], f["out_n_7d"], f["gap_min"], f["age_min"], f["same_amt"]) == (
        2.0, 0.0, 2.0, 10_079.0, 10_079.0, 1.0)
    f = w.apply(10_079 + 10_080, False, "B", 100)  # exactly 7 days idle: as if never seen
    assert (f["n_life"], f["cp_new"], f["in_n_7d"], f["out_n_7d"], f["gap_min"], f["age_min"]) == (
        1.0, 1.0, 1.0, 0.0, 10_080.0, 0.0)
    assert (f["amt_vs_med"], f["same_amt"], f["since_opp_min"], f["opp_ratio"]) == (-1.0, 0.0, 10_080.0, -1.0)


def test_self_transfer_legs():
    w = F.AccountWindow()
    snd = w.apply(100, True, ME, 5_000)
    rcv = w.apply(100, False, ME, 5_000)
    assert (snd["cp_new"], rcv["cp_new"]) == (1.0, 0.0)  # the out leg just made it known
    assert (rcv["out_n_1h"], rcv["in_n_1h"], rcv["pass_1h"], rcv["net_1h"], rcv["new_frac_24h"]) == (1.0, 1.0, 1.0, 0.0, 0.5)
    assert (rcv["since_opp_min"], rcv["opp_ratio"], rcv["same_amt"], rcv["amt_vs_med"]) == (0.0, 1.0, 1.0, 1.0)


def test_zero_amounts():
    w = F.AccountWindow()
    f = w.apply(0, False, "B", 0)
    assert (f["pass_1h"], f["net_1h"], f["in_usd_1h"]) == (0.0, 0.0, 0.0)
    f = w.apply(1, True, "C", 0)
    assert (f["opp_ratio"], f["amt_vs_med"], f["same_amt"]) == (0.0, 0.0, 1.0)
    f = w.apply(2, False, "B", 7)
    assert (f["opp_ratio"], f["amt_vs_med"]) == (1.0, 1.0)  # the last one the other way was 0


def test_huge_amounts_divide_as_floats():
    """float(a) / float(b), not a / b: they differ above 2**53."""
    a, b = 2**53 + 1, 3
    assert float(a) / float(b) != a / b  # the case the rule is about
    w = F.AccountWindow()
    w.apply(0, False, "B", b)
    f = w.apply(0, True, "C", a)
    assert f["opp_ratio"] == f["amt_vs_med"] == float(a) / float(b)
    assert f["net_1h"] == float(a - b) / float(a + b)


def test_cap_is_honoured(monkeypatch):
    monkeypatch.setattr(F, "MAX_WINDOW_LEGS", 3)
    w = F.AccountWindow()
    for m, cp in ((0, "a"), (1, "b"), (2, "c"), (3, "d")):
        f = w.apply(m, True, cp, 100)
    # (0, a) was dropped from every window to make room for (3, d)
    assert (f["out_n_1h"], f["out_n_24h"], f["out_n_7d"], f["out_cp_7d"], f["out_usd_7d"]) == (3.0, 3.0, 3.0, 3.0, 3.0)
    assert f["new_frac_7d"] == 1.0 and f["n_life"] == 4.0 and f["age_min"] == 3.0
    f = w.apply(4, False, "a", 100)  # a is no longer in the 7d window: new again
    assert (f["cp_new"], f["out_n_7d"], f["in_n_7d"]) == (1.0, 2.0, 1.0)
    # the leg the cap drops to make room still counts for this leg's cp_new: (2, c) goes now
    f = w.apply(5, False, "c", 100)
    assert (f["cp_new"], f["out_cp_7d"], f["in_cp_7d"]) == (0.0, 1.0, 2.0)
    # the other way's leg dropped by the cap is no longer "in the 7d window"
    monkeypatch.setattr(F, "MAX_WINDOW_LEGS", 2)
    w = F.AccountWindow()
    w.apply(0, False, "a", 100)
    w.apply(1, True, "b", 100)
    f = w.apply(2, True, "c", 300)
    assert (f["since_opp_min"], f["opp_ratio"], f["in_n_7d"]) == (10_080.0, -1.0, 0.0)


def test_state_stays_bounded_on_a_hub(monkeypatch):
    monkeypatch.setattr(F, "MAX_WINDOW_LEGS", 50)
    w = F.AccountWindow()
    for i in range(3000):
        w.apply(i // 3, i % 2 == 0, f"cp{i}", 100 + i)
    live = len(w.legs) - w.heads[-1]
    assert live == 50 and len(w.legs) <= 2 * 50 + 64
    assert all(len(out) + len(in_) <= 50 for out, in_ in w.cps)
    assert all(agg[0] + agg[1] <= 50 for agg in w.aggs)
    assert len(w.recent) == len(w.recent_sorted) == F.RECENT_LEGS


def _recount(w: F.AccountWindow) -> None:
    """Each window's aggregates equal a recount of its legs."""
    for i, head in enumerate(w.heads):
        legs = w.legs[head:]
        outs, ins = [g for g in legs if g[1]], [g for g in legs if not g[1]]
        assert w.aggs[i] == [len(outs), len(ins), sum(g[3] for g in outs), sum(g[3] for g in ins),
                             sum(g[4] for g in legs)]
        for counts, side in zip(w.cps[i], (outs, ins)):
            assert counts == {cp: sum(1 for g in side if g[2] == cp) for cp in {g[2] for g in side}}
    assert list(w.heads) == sorted(w.heads, reverse=True)


def test_late_legs_are_tolerated():
    """The job never applies a leg behind an account's latest; still: never crash, stay consistent."""
    rng = random.Random(1)
    w = F.AccountWindow()
    for i in range(500):
        f = w.apply(rng.randrange(0, 30_000), rng.random() < 0.5, rng.choice("abc"), rng.randrange(0, 1000))
        assert all(math.isfinite(v) for v in f.values())
        assert 0 <= f["gap_min"] <= LONG and 0 <= f["since_opp_min"] <= LONG and 0 <= f["age_min"] <= LONG
        assert f["cp_legs_24h"] >= 1 and f["out_n_1h"] + f["in_n_1h"] >= 1
        if i % 25 == 0:
            _recount(w)
    _recount(w)


def test_pickled_state_continues_exactly():
    """The stream job keeps the window pickled in keyed state between legs."""
    rng = random.Random(2)
    legs = sorted((rng.randrange(0, 40_000), rng.random() < 0.5, rng.choice("abcdef"), rng.randrange(0, 10**5))
                  for _ in range(400))
    plain, pickled = F.AccountWindow(), F.AccountWindow()
    for leg in legs:
        a = plain.apply(*leg)
        pickled = pickle.loads(pickle.dumps(pickled))
        assert pickled.apply(*leg) == a
        assert pickled == plain
    assert plain.seq0 > 0  # the dead prefix was cut off on the way


# ------------------------------------------------------------------------------ events


def _events(n: int, seed: int) -> list[TransactionEvent]:
    rng = random.Random(seed)
    accounts = [AccountRef(f"0{i % 3}", f"80{i:03d}") for i in range(8)]
    t, out = datetime(2022, 9, 1), []
    for i in range(n):
        t += timedelta(minutes=rng.choice([0, 0, 1, 7, 45, 300, 1440, 10_080]))
        s = rng.choice(accounts)
        r = s if rng.random() < 0.1 else rng.choice(accounts)
        paid = Money(rng.choice(["US Dollar", "Euro", "Yen", "Bitcoin"]),
                     rng.choice([0, 1, 10_000, 100_000_000, rng.randrange(1, 10**7)]))
        received = paid if rng.random() < 0.8 else Money("US Dollar", rng.randrange(0, 10**6))
        offset = rng.choice([i + 2, 7])  # some events share their (minute, source offset): event id decides
        out.append(TransactionEvent(f"e{rng.randrange(10**6):06d}-{i}", t, s, r, received, paid,
                                    rng.choice(PAYMENT_FORMATS), False, offset))
    return out


def spec_event_features(ev: TransactionEvent) -> dict[str, float]:
    paid = ev.amount_paid
    return {
        "amount_usd": float(usd_cents(paid)) / 100.0,
        "cross_currency": float(paid.currency != ev.amount_received.currency),
        "self_transfer": float(ev.sender.node_id == ev.receiver.node_id),
        "format": float(PAYMENT_FORMATS.index(ev.payment_format)),
        "hour": float(ev.timestamp.hour),
        "round_amount": float(paid.units % (100 * 10**paid.scale) == 0),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_event_vectors_join_both_legs(seed):
    events = _events(300, seed)
    got = F.compute_features(reversed(events))  # the input order does not matter
    order = sorted(events, key=lambda e: (e.minute, e.source_offset, e.event_id))
    assert [ev.event_id for ev, _ in got] == [ev.event_id for ev in order]
    histories: dict[str, list[Leg]] = {}
    news: dict[str, list[bool]] = {}
    cap, k_recent = F.MAX_WINDOW_LEGS, F.RECENT_LEGS
    for (ev, vec), want_ev in zip(got, order):
        assert ev is want_ev
        sides = {}
        for side, key, is_out, cp, cents in (
            ("snd", ev.sender.node_id, True, ev.receiver.node_id, usd_cents(ev.amount_paid)),
            ("rcv", ev.receiver.node_id, False, ev.sender.node_id, usd_cents(ev.amount_received)),
        ):
            history = histories.setdefault(key, [])
            history.append((ev.minute, is_out, cp, cents))
            news.setdefault(key, []).append(cp_was_new(history, len(history) - 1, cap))
            sides[side] = oracle(history, news[key], cap, k_recent)
        want = spec_event_features(ev) | {f"{s}_{k}": v for s, feats in sides.items() for k, v in feats.items()}
        assert list(vec) == SPEC_EVENT_FEATURES + [f"{s}_{f}" for s in ("snd", "rcv") for f in SPEC_ACCOUNT_FEATURES]
        assert vec == want
        if ev.is_self_transfer:
            assert vec["rcv_cp_new"] == 0.0 and vec["self_transfer"] == 1.0


def test_event_features_are_plain_dollars():
    ev = TransactionEvent("x", datetime(2022, 9, 1, 13, 5), AccountRef("1", "A"), AccountRef("2", "B"),
                          Money("Euro", 1), Money("US Dollar", 12_340_000), "Wire", False, 2)
    f = F.event_features(ev)
    assert f == {"amount_usd": 123_400.0, "cross_currency": 1.0, "self_transfer": 0.0,
                 "format": float(PAYMENT_FORMATS.index("Wire")), "hour": 13.0, "round_amount": 1.0}
    assert list(f) == SPEC_EVENT_FEATURES


# ------------------------------------------------------------------------------ vocabulary


def test_names_and_descriptions():
    assert limits.FEATURE_WINDOWS == SPEC_WINDOWS and limits.LONG_WINDOW_MINUTES == LONG
    assert list(F.ACCOUNT_FEATURES) == SPEC_ACCOUNT_FEATURES and len(F.ACCOUNT_FEATURES) == 37
    assert list(F.EVENT_FEATURES) == SPEC_EVENT_FEATURES
    assert list(F.FEATURE_NAMES) == (
        SPEC_EVENT_FEATURES + [f"snd_{f}" for f in SPEC_ACCOUNT_FEATURES] + [f"rcv_{f}" for f in SPEC_ACCOUNT_FEATURES]
    )
    assert len(F.FEATURE_NAMES) == len(set(F.FEATURE_NAMES)) == 80
    assert list(F.FEATURE_DESCRIPTIONS) == list(F.FEATURE_NAMES)
    assert len(set(F.FEATURE_DESCRIPTIONS.values())) == 80  # every reason reads differently
    for name, text in F.FEATURE_DESCRIPTIONS.items():
        who = {"snd": "sender: ", "rcv": "receiver: "}.get(name[:3])
        assert text and (who is None or text.startswith(who)), name
        assert "log" not in text
    d = F.FEATURE_DESCRIPTIONS
    assert d["snd_out_n_24h"] == "sender: outgoing transfers in the last 24 hours"
    assert d["rcv_in_usd_7d"] == "receiver: USD received in the last 7 days"
    assert d["snd_new_frac_24h"] == "sender: share of its transfers in the last 24 hours that were with counterparties new to it"
    assert "last hour" in d["rcv_out_cp_1h"]
    assert list(F.AccountWindow().apply(0, True, "x", 1)) == list(F.ACCOUNT_FEATURES)
