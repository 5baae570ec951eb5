"""The seeded synthetic AMLworld-like generator: determinism, format, typologies, exact money."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from auditflow.money import Money, format_amount
from auditflow.records import TransactionEvent
from ingest.amlworld import (
    TYPOLOGIES,
    event_id_for,
    format_row,
    read_patterns,
    read_transactions,
    row_key,
)
from ingest.synthetic import Dataset, convert, generate, write_dataset
from pipelines.features import USD_RATES, usd_cents


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _attempt_events(ds: Dataset) -> list[tuple[str, str, list[TransactionEvent]]]:
    """(typology, qualifier, events in file order) for each attempt, matched by row key."""
    by_key = {row_key(format_row(ev)): ev for ev in ds.events if ev.is_laundering}
    return [(a.typology, a.qualifier, [by_key[row_key(r)] for r in a.rows]) for a in ds.attempts]


def _strictly_increasing(events: list[TransactionEvent]) -> bool:
    return all(a.timestamp < b.timestamp for a, b in zip(events, events[1:]))


# ------------------------------------------------------------------ determinism and format


def test_same_seed_same_bytes_different_seed_different(tmp_path):
    kwargs = {"accounts": 300, "days": 2}
    a = write_dataset(generate(seed=3, **kwargs), tmp_path / "a")
    b = write_dataset(generate(seed=3, **kwargs), tmp_path / "b")
    c = write_dataset(generate(seed=4, **kwargs), tmp_path / "c")
    assert [_digest(p) for p in a] == [_digest(p) for p in b]
    assert _digest(a[0]) != _digest(c[0]) and _digest(a[1]) != _digest(c[1])
    assert [p.name for p in a] == ["synthetic_Trans.csv", "synthetic_Patterns.txt"]


def test_same_bytes_whatever_the_string_hash_seed(tmp_path):
    """No dependence on hash() of str or on set order: other interpreters write the same bytes."""
    code = (
        "import sys; from ingest.synthetic import generate, write_dataset; "
        "write_dataset(generate(accounts=150, days=1, seed=9), sys.argv[1])"
    )
    root = Path(__file__).resolve().parents[2]
    digests = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(root)}
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, env=env, cwd=root)
        digests.append([_digest(out / n) for n in ("synthetic_Trans.csv", "synthetic_Patterns.txt")])
    here = write_dataset(generate(accounts=150, days=1, seed=9), tmp_path / "here")
    assert digests[0] == digests[1] == [_digest(p) for p in here]


def test_csv_round_trip_gives_identical_events(default_files, default_read_back, default_dataset):
    assert default_files[0].name == "demo_Trans.csv"
    assert default_read_back == default_dataset.events


def test_events_in_file_order_with_line_offsets(default_dataset):
    events = default_dataset.events
    assert [ev.source_offset for ev in events] == list(range(2, len(events) + 2))
    assert all(a.timestamp <= b.timestamp for a, b in zip(events, events[1:]))
    assert all(ev.event_id == event_id_for(format_row(ev), ev.source_offset) for ev in events[:500])
    assert len({ev.event_id for ev in events}) == len(events)


def test_window_and_start(small_dataset):
    start = datetime(2023, 1, 15, 6, 30)
    ds = generate(accounts=200, days=2, seed=5, start=start)
    assert ds.events[0].timestamp >= start
    assert ds.events[-1].timestamp < start + timedelta(days=2)
    assert all(ev.timestamp < datetime(2022, 9, 2) for ev in small_dataset.events)


def test_default_size(default_dataset):
    """2000 accounts x 3 days x 4.5 transfers per account and day: about 27,000 background rows,
    plus the laundering (0.1 %, at least one attempt of each typology). The generator's speed is
    measured by ``bench/generator.py``, never asserted here."""
    events = default_dataset.events
    background = sum(not ev.is_laundering for ev in events)
    assert 26_000 <= background <= 28_000
    assert 0 < len(events) - background < 0.005 * len(events)


def test_density_is_a_parameter():
    sparse = generate(accounts=300, days=2, seed=1, tx_per_account_day=1.0)
    dense = generate(accounts=300, days=2, seed=1, tx_per_account_day=5.0)
    assert 500 <= len(sparse.events) <= 700
    assert 2900 <= len(dense.events) <= 3100


@pytest.mark.parametrize(
    "kwargs",
    [{"accounts": 5}, {"days": 0}, {"laundering_rate": -0.1}, {"laundering_rate": 0.7}, {"tx_per_account_day": 0}],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        generate(**kwargs)


# ------------------------------------------------------------------ realistic background


def test_bank_ids_are_leading_zero_strings_of_varying_width(default_dataset):
    banks = {a.ref.bank for a in default_dataset.accounts}
    assert all(b.startswith("0") and b.isdigit() for b in banks)
    assert len({len(b) for b in banks}) >= 3
    # two banks equal as integers but distinct as ids
    as_int = Counter(int(b) for b in banks)
    assert any(n > 1 for n in as_int.values())


def test_account_identity_is_bank_and_number(default_dataset):
    refs = [a.ref for a in default_dataset.accounts]
    assert len(set(refs)) == len(refs)
    numbers = Counter(r.account for r in refs)
    assert any(n > 1 for n in numbers.values()), "some account number should exist at two banks"
    assert all(len(r.account) == 9 and r.account[0] == "8" for r in refs)
    int(refs[0].account, 16)


def test_currencies_formats_and_self_transfers(default_dataset):
    events = default_dataset.events
    n = len(events)
    currencies = Counter(ev.amount_paid.currency for ev in events)
    assert currencies.most_common(1)[0][0] == "US Dollar"
    assert len(currencies) == 15
    formats = Counter(ev.payment_format for ev in events)
    assert set(formats) == {"Reinvestment", "Cheque", "ACH", "Credit Card", "Wire", "Cash", "Bitcoin"}
    for fmt, lo, hi in [("Cheque", 0.15, 0.45), ("Credit Card", 0.08, 0.35), ("Reinvestment", 0.04, 0.15)]:
        assert lo < formats[fmt] / n < hi, fmt
    assert all(ev.is_self_transfer for ev in events if ev.payment_format == "Reinvestment")
    assert all(
        ev.amount_paid.currency == ev.amount_received.currency == "Bitcoin"
        for ev in events
        if ev.payment_format == "Bitcoin"
    )
    cross = sum(ev.amount_paid.currency != ev.amount_received.currency for ev in events)
    assert 0.01 < cross / n < 0.15


def test_daily_rhythm(default_dataset):
    hours = Counter(ev.timestamp.hour for ev in default_dataset.events if not ev.is_laundering)
    assert hours[10] > 2 * hours[3]


def test_hubs_outdo_laundering_degrees(default_dataset, rich_dataset):
    for ds in (default_dataset, rich_dataset):
        in_cp, out_cp = defaultdict(set), defaultdict(set)
        for ev in ds.events:
            out_cp[ev.sender].add(ev.receiver)
            in_cp[ev.receiver].add(ev.sender)
        hubs = ds.hubs()
        assert hubs
        assert max(len(in_cp[h]) for h in hubs) > 100
        assert max(len(out_cp[h]) for h in hubs) > 16
        # a laundering fan is not the most connected account: degree alone does not find it
        fan_hubs = {evs[0].sender for t, _, evs in _attempt_events(ds) if t == "FAN-OUT"}
        top = sorted(out_cp, key=lambda a: -len(out_cp[a]))[:10]
        assert not fan_hubs & set(top)


def test_recurring_payments_repeat_exact_amounts(default_dataset):
    pairs = Counter(
        (ev.sender, ev.receiver, ev.amount_paid) for ev in default_dataset.events if not ev.is_self_transfer
    )
    assert sum(1 for n in pairs.values() if n >= 2) > 200


# ------------------------------------------------------------------ laundering


def test_laundering_rate_near_target_on_defaults(default_dataset):
    rate = default_dataset.laundering_rate
    assert 0.0005 <= rate <= 0.0015, rate


def test_laundering_rate_near_target_when_budget_allows(rich_dataset):
    assert 0.008 <= rich_dataset.laundering_rate <= 0.012


def test_rate_without_typology_floor():
    ds = generate(accounts=500, days=2, laundering_rate=0.01, seed=3, min_each_typology=False)
    assert 0.009 <= ds.laundering_rate <= 0.011
    ds = generate(accounts=500, days=2, laundering_rate=0.001, seed=3, min_each_typology=False)
    assert ds.laundering_count == round(0.001 * 4500 / 0.999)


def test_no_laundering_when_rate_zero_and_no_floor():
    ds = generate(accounts=200, days=1, laundering_rate=0.0, seed=2, min_each_typology=False)
    assert ds.laundering_count == 0 and ds.attempts == []


@pytest.mark.parametrize("name", ["small_dataset", "default_dataset", "rich_dataset"])
def test_every_typology_present(request, name):
    ds = request.getfixturevalue(name)
    assert set(Counter(a.typology for a in ds.attempts)) == set(TYPOLOGIES)


@pytest.mark.parametrize("name", ["small_dataset", "default_dataset", "rich_dataset"])
def test_laundering_rows_are_attempt_rows_plus_lone_transfers(request, name):
    ds = request.getfixturevalue(name)
    in_attempts = {row_key(r) for a in ds.attempts for r in a.rows}
    laundering = [ev for ev in ds.events if ev.is_laundering]
    lone = [ev for ev in laundering if row_key(format_row(ev)) not in in_attempts]
    assert len(lone) == ds.lone_laundering >= 2
    assert len(laundering) == len(in_attempts) + len(lone)


def test_patterns_file_reads_back_and_matches_laundering_rows(tmp_path, rich_dataset):
    trans, patterns = write_dataset(rich_dataset, tmp_path)
    attempts = list(read_patterns(patterns))
    assert attempts == rich_dataset.attempts
    labels = {row_key(format_row(ev)): ev.is_laundering for ev in read_transactions(trans)}
    for a in attempts:
        assert a.typology in TYPOLOGIES
        for r in a.rows:
            assert r[10] == "1"
            assert labels[row_key(r)] is True


def test_qualifiers(rich_dataset):
    for typology, qualifier, evs in _attempt_events(rich_dataset):
        if typology == "FAN-OUT":
            assert qualifier == f"Max {len({e.receiver for e in evs})}-degree Fan-Out"
        elif typology == "FAN-IN":
            assert qualifier == f"Max {len({e.sender for e in evs})}-degree Fan-In"
        elif typology in ("CYCLE", "RANDOM"):
            assert qualifier == f"Max {len(evs)} hops"
        else:
            assert qualifier == ""


def _shapes(ds: Dataset, typology: str) -> list[list[TransactionEvent]]:
    found = [evs for t, _, evs in _attempt_events(ds) if t == typology]
    assert found
    return found


@pytest.fixture(params=["small_dataset", "rich_dataset"])
def ds(request) -> Dataset:
    return request.getfixturevalue(request.param)


def test_all_attempts_strictly_ordered_in_time_and_no_self_loops(ds):
    for _, _, evs in _attempt_events(ds):
        assert _strictly_increasing(evs)
        assert not any(ev.is_self_transfer for ev in evs)


def test_fan_out_shape(ds):
    for evs in _shapes(ds, "FAN-OUT"):
        assert len({e.sender for e in evs}) == 1
        assert 4 <= len({e.receiver for e in evs}) == len(evs) <= 16


def test_fan_in_shape(ds):
    for evs in _shapes(ds, "FAN-IN"):
        assert len({e.receiver for e in evs}) == 1
        assert 4 <= len({e.sender for e in evs}) == len(evs) <= 16


def test_cycle_shape(ds):
    for evs in _shapes(ds, "CYCLE"):
        assert 3 <= len(evs) <= 8
        for a, b in zip(evs, evs[1:] + evs[:1]):
            assert a.receiver == b.sender
        assert len({e.sender for e in evs}) == len(evs)
        usd = [usd_cents(e.amount_paid) for e in evs]
        assert all(x > y for x, y in zip(usd, usd[1:])), "amounts shrink along the cycle"
        assert usd[-1] > 0.7 * usd[0]


def test_random_walk_shape(ds):
    for evs in _shapes(ds, "RANDOM"):
        assert 3 <= len(evs) <= 8
        for a, b in zip(evs, evs[1:]):
            assert a.receiver == b.sender
            assert b.receiver != a.sender
        # never back to an account it left: a walk that came back would carry a cycle
        accounts = [evs[0].sender] + [e.receiver for e in evs]
        assert len(set(accounts)) == len(accounts)
        usd = [usd_cents(e.amount_paid) for e in evs]
        assert all(x > y for x, y in zip(usd, usd[1:]))


def test_scatter_gather_shape(ds):
    for evs in _shapes(ds, "SCATTER-GATHER"):
        sources = {e.sender for e in evs} - {e.receiver for e in evs}
        sinks = {e.receiver for e in evs} - {e.sender for e in evs}
        assert len(sources) == len(sinks) == 1
        (src,), (sink,) = sources, sinks
        scatter = [e for e in evs if e.sender == src]
        gather = [e for e in evs if e.receiver == sink]
        middle = {e.receiver for e in scatter}
        assert len(evs) == 2 * len(middle) and len(middle) >= 2
        assert middle == {e.sender for e in gather}
        assert max(e.timestamp for e in scatter) < min(e.timestamp for e in gather)
        for m in middle:
            (inn,) = [e for e in scatter if e.receiver == m]
            (out,) = [e for e in gather if e.sender == m]
            assert usd_cents(out.amount_paid) < usd_cents(inn.amount_paid)


def test_gather_scatter_shape(ds):
    for evs in _shapes(ds, "GATHER-SCATTER"):
        hubs = {e.receiver for e in evs} & {e.sender for e in evs}
        assert len(hubs) == 1
        (hub,) = hubs
        gather = [e for e in evs if e.receiver == hub]
        scatter = [e for e in evs if e.sender == hub]
        assert len(gather) + len(scatter) == len(evs)
        assert len({e.sender for e in gather}) == len(gather) >= 2
        assert len({e.receiver for e in scatter}) == len(scatter) >= 2
        assert max(e.timestamp for e in gather) < min(e.timestamp for e in scatter)


def test_bipartite_shape(ds):
    for evs in _shapes(ds, "BIPARTITE"):
        a, b = {e.sender for e in evs}, {e.receiver for e in evs}
        assert not a & b
        assert 2 <= len(a) <= 5 and 2 <= len(b) <= 5
        assert len(evs) > max(len(a), len(b))
        # complete, as AMLSim/AMLworld plant it: every payer pays every payee, once
        assert {(e.sender, e.receiver) for e in evs} == {(x, y) for x in a for y in b}
        assert len(evs) == len(a) * len(b)


def test_stack_shape(ds):
    for evs in _shapes(ds, "STACK"):
        senders, receivers = {e.sender for e in evs}, {e.receiver for e in evs}
        middle = senders & receivers
        first, last = senders - middle, receivers - middle
        assert len(first) >= 2 and len(middle) >= 2 and len(last) >= 2
        layer1 = [e for e in evs if e.sender in first]
        layer2 = [e for e in evs if e.sender in middle]
        assert len(layer1) + len(layer2) == len(evs)
        assert {e.receiver for e in layer1} == middle and {e.receiver for e in layer2} == last
        assert {(e.sender, e.receiver) for e in layer1} == {(x, y) for x in first for y in middle}
        assert {(e.sender, e.receiver) for e in layer2} == {(x, y) for x in middle for y in last}
        assert max(e.timestamp for e in layer1) < min(e.timestamp for e in layer2)


def test_typology_sizes_span_their_ranges(rich_dataset):
    sizes = defaultdict(list)
    for t, _, evs in _attempt_events(rich_dataset):
        sizes[t].append(len(evs))
    assert max(sizes["FAN-OUT"] + sizes["FAN-IN"]) >= 8


def test_laundering_accounts_mostly_have_background_activity(rich_dataset):
    background = set()
    for ev in rich_dataset.events:
        if not ev.is_laundering:
            background.add(ev.sender)
            background.add(ev.receiver)
    launderers = {a for ev in rich_dataset.events if ev.is_laundering for a in (ev.sender, ev.receiver)}
    share = len(launderers & background) / len(launderers)
    assert 0.7 < share < 1.0


def test_attempts_spread_over_hours(rich_dataset):
    spans = [evs[-1].timestamp - evs[0].timestamp for _, _, evs in _attempt_events(rich_dataset)]
    assert sorted(spans)[len(spans) // 2] > timedelta(hours=2)


# ------------------------------------------------------------------ exact money


def test_bitcoin_amounts_have_six_or_more_decimals_and_round_trip(default_dataset, default_read_back):
    btc = [ev for ev in default_dataset.events if ev.amount_paid.currency == "Bitcoin"]
    assert len(btc) > 50
    texts = [format_amount(ev.amount_paid) for ev in btc]
    assert all(len(t.split(".")[1]) >= 6 for t in texts)
    assert any(len(t.split(".")[1]) == 8 for t in texts)
    back = {ev.event_id: ev for ev in default_read_back}
    assert all(back[ev.event_id].amount_paid == ev.amount_paid for ev in btc)
    assert all(format_amount(back[ev.event_id].amount_paid) == t for ev, t in zip(btc, texts))


def test_cross_currency_amounts_are_exact_conversions(default_dataset):
    cross = [ev for ev in default_dataset.events if ev.amount_paid.currency != ev.amount_received.currency]
    assert len(cross) > 100
    for ev in cross:
        assert ev.amount_received == convert(ev.amount_paid, ev.amount_received.currency)
        # within half a unit of the exact value
        exact = ev.amount_paid.to_decimal() * USD_RATES[ev.amount_paid.currency] / USD_RATES[ev.amount_received.currency]
        unit = Money(ev.amount_received.currency, 1).to_decimal()
        assert abs(ev.amount_received.to_decimal() - exact) <= unit / 2


def test_convert_rounds_half_even_at_the_receiving_scale():
    assert convert(Money("US Dollar", 100), "US Dollar") == Money("US Dollar", 100)
    assert convert(Money("Euro", 100), "US Dollar") == Money("US Dollar", 117)
    # 1.00 USD = 100 / 1.29 GBP = 0.7751937... -> 0.78
    assert convert(Money("US Dollar", 100), "UK Pound") == Money("UK Pound", 78)
    assert convert(Money("Bitcoin", 100_000_000), "US Dollar") == Money("US Dollar", 1_150_000)


# ------------------------------------------------------------------ one world, consecutive phases


@pytest.fixture(scope="module")
def phases():
    from ingest.synthetic import generate_phases

    return generate_phases(600, [(4, 0.02), (2, 0.002)], seed=13)


def test_phases_continue_one_world(phases, tmp_path):
    """The live phase goes on where the history stops: later dates, the same accounts (nine in ten
    of the live senders already paid in the history), the same recurring payments, each file its
    own lines from 2 that read back as written, each phase's laundering inside it."""
    history, live = phases
    assert max(e.timestamp for e in history.events) < datetime(2022, 9, 5) <= min(e.timestamp for e in live.events)
    assert max(e.timestamp for e in live.events) < datetime(2022, 9, 7)
    assert [e.source_offset for e in live.events[:3]] == [2, 3, 4]
    senders = {e.sender for e in history.events}
    live_senders = {e.sender for e in live.events}
    assert len(live_senders & senders) >= 0.9 * len(live_senders)
    h_pairs = {(e.sender, e.receiver, e.amount_paid) for e in history.events}
    repeats = sum((e.sender, e.receiver, e.amount_paid) in h_pairs for e in live.events)
    assert repeats >= 0.03 * len(live.events)  # salaries, rent, subscriptions: same payer, payee and amount
    for ds, (lo, hi) in ((history, (datetime(2022, 9, 1), datetime(2022, 9, 5))),
                         (live, (datetime(2022, 9, 5), datetime(2022, 9, 7)))):
        trans, _ = write_dataset(ds, tmp_path, name=f"p{lo.day}")
        assert [e for e in read_transactions(trans)] == ds.events
        for _, _, evs in _attempt_events(ds):
            assert all(lo <= e.timestamp < hi for e in evs)


def test_each_phase_has_its_own_laundering_rate(phases):
    history, live = phases
    assert 0.015 < history.laundering_rate < 0.03
    # the live budget is small: every typology at least once (31 rows) sets its floor
    assert live.laundering_count <= max(31 + 10, 1.5 * 0.002 * len(live.events))
    assert {a.typology for a in live.attempts} == set(TYPOLOGIES)


def test_a_shift_multiplies_every_amount_from_its_time_and_changes_nothing_else():
    from ingest.synthetic import Shift, generate_phases

    since = datetime(2022, 9, 5, 9)
    plain = generate_phases(300, [(4, 0.02), (2, 0.002)], seed=17)
    moved = generate_phases(300, [(4, 0.02), (2, 0.002)], seed=17, shift=Shift(since, 3))
    assert moved[0].events == plain[0].events  # the history is before the shift
    a, b = plain[1].events, moved[1].events
    assert len(a) == len(b)
    after = 0
    for x, y in zip(a, b, strict=True):
        assert (x.timestamp, x.sender, x.receiver, x.payment_format, x.is_laundering) == (
            y.timestamp, y.sender, y.receiver, y.payment_format, y.is_laundering)
        k = 3 if x.timestamp >= since else 1
        after += k == 3
        assert y.amount_paid == Money(x.amount_paid.currency, 3 * x.amount_paid.units if k == 3 else x.amount_paid.units)
        assert y.amount_received.units == k * x.amount_received.units
    assert after > len(a) // 3
    assert moved[1].params["shift"] == {"from": since.isoformat(), "factor": 3}
    with pytest.raises(ValueError, match="positive integer"):
        Shift(since, 0)


def test_a_relabel_shift_moves_one_payment_format_to_another_from_its_time():
    from ingest.synthetic import Shift, generate_phases

    since = datetime(2022, 9, 5, 9)
    plain = generate_phases(300, [(4, 0.02), (2, 0.002)], seed=17)[1].events
    moved = generate_phases(300, [(4, 0.02), (2, 0.002)], seed=17, shift=Shift(since, relabel=("Cheque", "ACH")))[1].events
    changed = 0
    for x, y in zip(plain, moved, strict=True):
        assert (x.timestamp, x.sender, x.receiver, x.amount_paid, x.amount_received) == (
            y.timestamp, y.sender, y.receiver, y.amount_paid, y.amount_received)
        want = "ACH" if x.payment_format == "Cheque" and x.timestamp >= since else x.payment_format
        assert y.payment_format == want
        changed += want != x.payment_format
    assert changed > 100 and not any(e.payment_format == "Cheque" and e.timestamp >= since for e in moved)
