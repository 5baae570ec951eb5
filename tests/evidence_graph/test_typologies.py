"""Typology detection: hand-built instances with everyday activity around them, the look-alikes
that must not match (time reversed, amounts that do not pass on, two-account back-and-forth,
recurring payments, hubs), one finding per instance, no label read; and recall and precision on
generated data with planted typologies and legitimate look-alikes."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from auditflow.money import Money
from evidence_graph import TYPOLOGIES, NetworkxGraphStore, TypologyMatch, detect_typologies
from evidence_graph.evaluation import TypologyScore, score_typologies
from evidence_graph.testing import T0, acct, tx

DAY = 24 * 60


def usd(dollars: float) -> Money:
    return Money("US Dollar", round(dollars * 100))


def everyday(names, start: int = -20 * DAY) -> list:
    """Each account's ordinary life before the window: a few small payments to its grocer."""
    out = []
    for i, n in enumerate(names):
        for k in range(4):
            out.append(tx(f"day-{n}-{k}", n, f"GROCER{i % 3}", start + k * DAY + i, amount=usd(60 + 7 * k)))
    return out


def move(eid: str, a: str, b: str, minute: int, dollars: float, **kw):
    return tx(eid, a, b, minute, amount=usd(dollars), **kw)


def detect(events, name: str, **kw) -> list[TypologyMatch]:
    store = NetworkxGraphStore()
    store.add_transactions(events)
    return detect_typologies(store, acct(name), (T0, T0 + timedelta(days=6)), **kw)


def names(matches) -> list[str]:
    return [m.typology for m in matches]


def short(accounts) -> tuple[str, ...]:
    return tuple(a.split("/")[1] for a in accounts)


# ------------------------------------------------------------------ instances


def fan_out_events(n: int = 6, gap: int = 60):
    return [move(f"fo{i}", "H", f"L{i}", 600 + gap * i, 1500 + 37 * i) for i in range(n)]


def test_fan_out_is_found_from_the_payer_and_from_a_payee() -> None:
    events = [*everyday(["H", *(f"L{i}" for i in range(6))]), *fan_out_events()]
    (m,) = detect(events, "H")
    assert m.typology == "fan-out" and short(m.accounts) == ("H", "L0", "L1", "L2", "L3", "L4", "L5")
    assert m.event_ids == tuple(f"fo{i}" for i in range(6)) and m.hops == (m.event_ids,)
    assert detect(events, "L3") == [m]  # the same instance, not a finding per side


def test_fan_size_bounds_and_spacing() -> None:
    # three new payees within two hours are unlike H (who only pays its grocer); two are no fan
    assert names(detect([*everyday(["H"]), *fan_out_events(3)], "H")) == ["fan-out"]
    assert detect([*everyday(["H"]), *fan_out_events(2)], "H") == []
    # three are what an account paying new people every few hours does anyway
    busy = [move(f"b{k}", "H", f"B{k}", -20 * DAY + 180 * k, 1500 + 20 * (k % 7)) for k in range(20 * DAY // 180)]
    assert detect([*everyday(["H"]), *busy, *fan_out_events(3)], "H") == []
    assert names(detect([*everyday(["H"]), *fan_out_events(4)], "H")) == ["fan-out"]  # four, unlike H
    assert detect([*everyday(["H"]), *fan_out_events(40)], "H") == []  # a hub's business
    # horizons from hours to weeks: five payments to new payees 20 or 25 hours apart, over four
    # days, are a fan from an account that never pays new people, and no fan from one that pays
    # a new person about $1,500 every day (its habit: the same payments, no burst)
    for gap in (20 * 60, 25 * 60):
        (m,) = detect([*everyday(["H"]), *fan_out_events(5, gap=gap)], "H")
        assert m.typology == "fan-out" and m.event_ids == tuple(f"fo{i}" for i in range(5))
    daily = [move(f"new{d}", "H", f"N{d}", -20 * DAY + d * DAY + 7, 1500 + 10 * (d % 5)) for d in range(20)]
    assert detect([*everyday(["H"]), *daily, *fan_out_events(5, gap=25 * 60)], "H") == []


def test_a_fan_of_parts_smaller_than_what_the_account_usually_pays_is_a_fan() -> None:
    # H pays its three suppliers $4,000-$4,800 (its usual transfer); in the window it splits
    # about $3,000 into six payments of $500-$685 to new payees within five hours: the parts of
    # one sum are small, and H never paid anyone such amounts
    suppliers = [move(f"sup{k}", "H", f"S{k % 3}", -20 * DAY + 2 * k * DAY + 5, 4000 + 100 * k) for k in range(9)]
    split = [move(f"fo{i}", "H", f"L{i}", 600 + 60 * i, 500 + 37 * i) for i in range(6)]
    (m,) = detect([*everyday(["H"]), *suppliers, *split], "H")
    assert m.typology == "fan-out" and m.event_ids == tuple(f"fo{i}" for i in range(6))


def test_two_fans_of_one_account_in_the_window_are_two_findings() -> None:
    first = [move(f"fa{i}", "H", f"A{i}", 600 + 60 * i, 1500 + 37 * i) for i in range(6)]
    second = [move(f"fb{i}", "H", f"B{i}", 3 * DAY + 45 * i, 40_000 + 900 * i) for i in range(5)]
    found = detect([*everyday(["H"]), *first, *second], "H")
    assert [(m.typology, m.event_ids) for m in found] == [
        ("fan-out", tuple(f"fa{i}" for i in range(6))), ("fan-out", tuple(f"fb{i}" for i in range(5)))]


def test_a_burst_that_is_the_account_s_habit_does_not_hide_a_fan_in_another_band() -> None:
    # H pays eight new people about $100 within hours most days (its habit: no fan); the largest
    # burst of the window is such a day, but the five $1,500 payments of the day after are a fan
    habit = [move(f"hab{d}-{i}", "H", f"N{d}-{i}", -20 * DAY + d * DAY + 50 * i, 100 + 3 * i)
             for d in range(0, 20, 2) for i in range(8)]
    today = [move(f"day{i}", "H", f"M{i}", 300 + 50 * i, 100 + 3 * i) for i in range(8)]
    (m,) = detect([*everyday(["H"]), *habit, *today, *fan_out_events(5)], "H")
    assert m.typology == "fan-out" and m.event_ids == tuple(f"fo{i}" for i in range(5))


def test_recurring_payments_are_no_fan() -> None:
    # a small payroll: the same six employees, the same salary, every week
    week = [move(f"pay{w}-{i}", "H", f"L{i}", 600 + i + w * 7 * DAY - 14 * DAY, 1500)
            for w in range(3) for i in range(6)]
    assert detect([*everyday(["H"]), *week], "H") == []
    # and the week two new employees join: two new payees among six regular ones are the payroll
    hires = [move(f"new{i}", "H", f"J{i}", 600 + 6 + i, 1500) for i in range(2)]
    assert detect([*everyday(["H"]), *week, *hires], "H") == []


def test_a_split_that_includes_a_regular_payee_is_a_fan() -> None:
    # H pays R $1,800 every week; in the window it splits $5,400 three ways within ten minutes:
    # to two accounts it never paid and to R. The payment to R is what the pair does (no
    # evidence), the two new payees at that moment are; together they are a fan-out of three
    weekly = [move(f"w{k}", "H", "R", -21 * DAY + 7 * DAY * k, 1800) for k in range(3)]
    split = [move("s0", "H", "N1", 2 * DAY, 1800), move("s1", "H", "R", 2 * DAY + 4, 1800),
             move("s2", "H", "N2", 2 * DAY + 9, 1800)]
    (m,) = detect([*everyday(["H", "R", "N1", "N2"]), *weekly, *split], "H")
    assert m.typology == "fan-out" and short(m.accounts) == ("H", "N1", "N2", "R")
    assert m.event_ids == ("s0", "s1", "s2")
    # two new payees alone are a pair of payments; the regular one a day apart is not part of it
    assert detect([*everyday(["H", "N1", "N2"]), *weekly, split[0], split[2]], "H") == []
    late = move("s1", "H", "R", 3 * DAY, 1800)
    assert detect([*everyday(["H", "R", "N1", "N2"]), *weekly, split[0], late, split[2]], "H") == []


def test_a_burst_that_is_the_account_s_habit_is_no_fan() -> None:
    # H has paid six new people $1,500-1,700 within a few hours every day for three weeks
    habit = [move(f"hab{d}-{i}", "H", f"N{d}-{i}", -21 * DAY + d * DAY + 60 * i, 1500 + 40 * i)
             for d in range(21) for i in range(6)]
    burst = fan_out_events()
    assert detect([*everyday(["H"]), *burst], "H") != []  # unlike what H does: a fan-out
    assert detect([*everyday(["H"]), *habit, *burst], "H") == []  # what H does every day


def habit_and_burst(spacing: int) -> list:
    """H paid a dozen new people about $1,550 over the three weeks before the window; in it, five
    comparable payments to new payees, ``spacing`` minutes apart."""
    habit = [move(f"hab{i}", "H", f"N{i}", -20 * DAY + i * (20 * DAY // 12) + 7, 1550 + 10 * (i % 5))
             for i in range(12)]
    burst = [move(f"fo{i}", "H", f"L{i}", 600 + spacing * i, 1500 + 37 * i) for i in range(5)]
    return [*everyday(["H"]), *habit, *burst]


def test_a_burst_found_only_by_searching_many_amount_bands_is_no_fan() -> None:
    # the burst within about 7 hours is about a 1e-5 chance by H's habit (a dozen such payments
    # in the 26 days seen, a negative binomial); the query about H looks at four spacings of one
    # band in seven places (H both ways, each of its five payees as a sink): 3e-4 in all, a
    # fan-out. When H also pays one-off sums of $9,000 to $243,000 in the window, the search for a
    # burst looked at five bands of amounts (factors of 3) from eleven places: no evidence
    events = habit_and_burst(spacing=100)
    spread = [move(f"sp{i}", "H", f"Q{i}", 3 * DAY + 97 * i, a) for i, a in enumerate((9000, 27000, 81000, 243000))]
    (m,) = detect(events, "H")
    assert m.typology == "fan-out" and m.event_ids == tuple(f"fo{i}" for i in range(5))
    # (the four large payments to new payees within five hours are a fan of their own: any amounts)
    assert [m.event_ids for m in detect([*events, *spread], "H")] == [("sp0", "sp1", "sp2", "sp3")]


def test_a_fan_is_held_to_the_chance_over_every_place_the_query_looked() -> None:
    # the same burst over 14 hours: about a 5e-4 chance by H's habit, within CHANCE for one fan,
    # but the query about H looked at seven places (3.4e-3), and one about a payee at three: H
    # itself, H as its payer, and the payee as a sink
    events = habit_and_burst(spacing=210)
    assert detect(events, "H") == []
    assert detect(events, "L2") == []
    assert names(detect(habit_and_burst(spacing=150), "L2")) == ["fan-out"]


def spread_habit_and_burst(largest: float) -> list:
    """H paid 109 new people over three weeks, amounts from $60 to ``largest`` spread evenly on a
    log scale except for none from $1,000 to $2,800; then five payments of $1,000 to $2,750 to new
    payees within 10 hours."""
    amounts = [a for i in range(140) if not 1000 <= (a := 60 * (largest / 60) ** (i / 139)) <= 2800]
    habit = [move(f"hab{i}", "H", f"N{i}", -20 * DAY + i * (20 * DAY // len(amounts)) + 7, a)
             for i, a in enumerate(amounts)]
    burst = [move(f"fo{i}", "H", f"L{i}", 600 + 150 * i, a) for i, a in enumerate((1000, 1300, 1700, 2200, 2750))]
    return [*everyday(["H"]), *habit, *burst]


def test_a_burst_in_a_band_a_busy_payer_happened_to_miss_is_no_fan() -> None:
    # H pays every size of amount, just none in the burst's band so far: its neighbouring sizes
    # put about 18 of its 109 payments there (an 8e-4 chance of the burst, not the 5e-10
    # that the empty band alone would say). A payer of small sums only has no such neighbours
    assert detect(spread_habit_and_burst(largest=6000), "H") == []
    assert names(detect(spread_habit_and_burst(largest=300), "H")) == ["fan-out"]


def test_a_shop_s_customers_and_a_busy_merchant_are_no_fan_in() -> None:
    # a shop: the same seven customers, each buying two or three times a week
    buys = [move(f"buy{c}-{k}", f"C{c}", "SHOP", -14 * DAY + k * 2 * DAY + 30 * c, 40 + c)
            for c in range(7) for k in range(10)]
    assert detect([*everyday([f"C{c}" for c in range(7)]), *buys], "SHOP") == []
    # a merchant: 150 card payers in the window, and then seven comparable ones in a burst
    cards = [move(f"card{i}", f"X{i}", "MALL", 3000 + 20 * i, 30 + i % 50) for i in range(150)]
    burst = [move(f"fi{i}", f"P{i}", "MALL", 300 + 45 * i, 900 + 11 * i) for i in range(7)]
    assert detect([*cards, *burst], "MALL") == []
    assert detect([*cards, *burst], "P3") == []  # the merchant is a hub from every side


def test_fan_in() -> None:
    events = [*everyday(["S", *(f"P{i}" for i in range(7))]),
              *(move(f"fi{i}", f"P{i}", "S", 300 + 45 * i, 900 + 11 * i) for i in range(7))]
    (m,) = detect(events, "P2")
    assert m.typology == "fan-in" and short(m.accounts) == ("P0", "P1", "P2", "P3", "P4", "P5", "P6", "S")
    assert m.event_ids == tuple(f"fi{i}" for i in range(7)) and m.hops == (m.event_ids,)
    assert detect(events, "S") == [m]  # the same instance from the payee


def cycle_events(names_, amount: float = 9000, gap: int = 90, fee: float = 0.02):
    out = []
    for i, (a, b) in enumerate(zip(names_, [*names_[1:], names_[0]], strict=True)):
        out.append(move(f"cy{i}", a, b, 100 + gap * i, amount))
        amount *= 1 - fee
    return out


def test_cycle_follows_the_money_from_any_member() -> None:
    # six hops: every member is within five (the search's limit) of where the money first moved
    events = [*everyday("ABCDEF"), *cycle_events("ABCDEF")]
    for member in "ADF":
        (m,) = detect(events, member)  # in time order: from A, where the money first moved
        assert m.typology == "cycle" and short(m.accounts) == tuple("ABCDEF")
        assert m.event_ids == tuple(f"cy{i}" for i in range(6)) and len(m.hops) == 6


def test_no_cycle_when_time_or_amounts_do_not_follow_the_money() -> None:
    base = everyday("ABCD")
    assert names(detect([*base, *cycle_events("ABCD")], "A")) == ["cycle"]
    backwards = [dataclasses.replace(e, timestamp=T0 + timedelta(minutes=1000 - 90 * i))
                 for i, e in enumerate(cycle_events("ABCD"))]
    assert detect([*base, *backwards], "A") == []
    # amounts are a graded signal, not a gate (funds mix with other money on the way): 30% lost
    # at each hop, or 20% more at each, is still a cycle, but weaker evidence than passing on all
    # but a 2% fee
    chance = {}
    for fee in (0.02, 0.3, -0.2):
        (m,) = detect([*base, *cycle_events("ABCD", fee=fee)], "A")
        assert m.typology == "cycle"
        chance[fee] = 1 - m.confidence
    assert chance[0.02] < chance[-0.2] < chance[0.3]
    # rent paid and a share paid back: a two-account back-and-forth is no laundering cycle
    assert detect([*base, move("rent", "A", "B", 100, 9000), move("back", "B", "A", 200, 8900)], "A") == []


def test_a_long_cycle_is_a_cycle_from_members_next_to_where_the_money_first_moved() -> None:
    # eight hops: from B (one hop after A, where the money first moved) the way back to A is
    # seven hops, beyond the search; the chain B finds runs to A, and from A the cycle closes
    events = [*everyday("ABCDEFGH"), *cycle_events("ABCDEFGH")]
    for member in "BH":
        (m,) = detect(events, member)
        assert m.typology == "cycle" and short(m.accounts) == tuple("ABCDEFGH"), m
        assert m.event_ids == tuple(f"cy{i}" for i in range(8))


def test_a_chain_that_is_what_its_accounts_do_anyway_is_no_layering() -> None:
    # each of B, C, D passes on about what it got, but after most of a day, and each of them
    # pays such amounts several times a day anyway: no evidence the money was passed on
    chain = [move(f"ch{i}", a, b, 100 + 20 * 60 * i, 7000 * 0.98**i)
             for i, (a, b) in enumerate(zip("ABCD", "BCDE", strict=True))]
    habit = [move(f"hab{x}{d}-{i}", x, f"N{x}{d}-{i}", -21 * DAY + d * DAY + 90 * i, 6200 + 150 * i)
             for x in "BCD" for d in range(21) for i in range(5)]
    assert names(detect([*everyday("ABCDE"), *chain], "C")) == ["random"]
    assert detect([*everyday("ABCDE"), *habit, *chain], "C") == []


def test_a_hop_judged_by_what_a_search_back_could_have_taken_there() -> None:
    # X pays someone new about $9,900 every five days; two hours after $10,000 reached it from P
    # it pays Y $9,900, and Y passes it on to Z. On its own that is a chain P -> X -> Y -> Z. But
    # in the twelve hours before, twenty others paid X about $10,000 too: a search back from Y
    # had twenty-one payments into X to choose from, and one of them is always followed by X's
    # next payment -- no evidence that P's money went on (the crowd itself is a fan-in to X)
    chain = [move(f"ch{i}", a, b, 100 + 120 * i, 10_000 * 0.99**i)
             for i, (a, b) in enumerate(zip("PXY", "XYZ", strict=True))]
    habit = [move(f"hx{k}", "X", f"N{k}", -20 * DAY + 5 * DAY * k, 9_880 + 7 * k) for k in range(4)]
    crowd = [move(f"in{k}", f"Q{k}", "X", 100 - 30 * (k + 1), 10_000 + 13 * k) for k in range(20)]
    base = [*everyday("PXYZ"), *habit, *chain]
    for member in ("P", "X", "Z"):
        (m,) = detect(base, member)
        assert m.typology == "random" and short(m.accounts) == tuple("PXYZ"), member
        assert "random" not in names(detect([*base, *crowd], member)), member


def test_a_steady_payer_makes_no_fan_by_paying_steadily_for_weeks() -> None:
    # H pays someone new about $1,500 every day, for a week before the window and three weeks in
    # it: judged against its habit outside a run and over the hours outside it, no run of them is
    # a burst (judged over its whole history with only the run's own payments taken out, the
    # three weeks' 21 payments looked unlike the week's 7 before them)
    steady = [move(f"d{k}", "H", f"D{k}", -7 * DAY + DAY * k + 37 * (k % 5), 1400 + 23 * (k % 9))
              for k in range(28)]
    store = NetworkxGraphStore()
    store.add_transactions([*everyday(["H"]), *steady])
    window = (T0, T0 + timedelta(days=21))
    assert [m.typology for m in detect_typologies(store, acct("H"), window)] == []
    # the same account paying eight new people in one afternoon in the window is a fan-out
    burst = [move(f"b{k}", "H", f"B{k}", 10 * DAY + 30 * k, 3000 + 41 * k) for k in range(8)]
    store.add_transactions(burst)
    (m,) = detect_typologies(store, acct("H"), window)
    assert m.typology == "fan-out" and m.event_ids == tuple(sorted(e.event_id for e in burst))


def test_scatter_gather_from_every_role() -> None:
    mids = ["M1", "M2", "M3"]
    events = [*everyday(["S", "T", *mids])]
    events += [move(f"sc{i}", "S", m, 100 + 10 * i, 3000 + 100 * i) for i, m in enumerate(mids)]
    events += [move(f"ga{i}", m, "T", 400 + 10 * i, (3000 + 100 * i) * 0.97) for i, m in enumerate(mids)]
    found = {n: detect(events, n) for n in ("S", "M2", "T")}
    (m,) = found["S"]
    assert m.typology == "scatter-gather" and short(m.accounts) == ("M1", "M2", "M3", "S", "T")
    assert m.hops == (("sc0", "sc1", "sc2"), ("ga0", "ga1", "ga2"))
    assert found["M2"] == found["T"] == [m]
    # the gather before the scatter: money cannot pass on before it arrived
    early = [dataclasses.replace(e, timestamp=e.timestamp - timedelta(minutes=600)) if e.event_id.startswith("ga")
             else e for e in events]
    assert "scatter-gather" not in names(detect(early, "S"))


def test_gather_scatter_scatters_what_was_gathered() -> None:
    events = [*everyday(["H", "P1", "P2", "P3", "Q1", "Q2"])]
    events += [move(f"in{i}", f"P{i}", "H", 100 + 30 * i, 2000 + 150 * i) for i in (1, 2, 3)]
    outs = [move("out1", "H", "Q1", 400, 3100), move("out2", "H", "Q2", 460, 3200)]
    (m,) = detect([*events, *outs], "H")
    assert m.typology == "gather-scatter" and m.hops == (("in1", "in2", "in3"), ("out1", "out2"))
    # scattering before anything was gathered is not this shape
    before = [dataclasses.replace(e, timestamp=T0 + timedelta(minutes=50)) for e in outs]
    assert "gather-scatter" not in names(detect([*events, *before], "H"))
    # paying out more than was gathered (H adds money of its own: mixed funds) is still the shape,
    # all three payments out, none skipped: amounts are graded evidence, not a gate
    spent = [outs[0], move("big", "H", "Q3", 430, 5000), outs[1]]
    (m,) = detect([*events, *everyday(["Q3"]), *spent], "H")
    assert m.typology == "gather-scatter" and m.hops == (("in1", "in2", "in3"), ("big", "out1", "out2"))


def layer(left, right, prefix: str, start: int, dollars: float):
    return [move(f"{prefix}{i}", a, b, start + 7 * i, dollars * (1 + 0.03 * i))
            for i, (a, b) in enumerate((a, b) for a in left for b in right)]


def test_two_accounts_paying_the_same_two_are_no_bipartite() -> None:
    a, b = ["A1", "A2"], ["B1", "B2"]
    assert detect([*everyday([*a, *b]), *layer(a, b, "sq", 100, 1500)], "A1") == []


def test_bipartite_and_stack() -> None:
    a, b, c = ["A1", "A2", "A3"], ["B1", "B2"], ["C1", "C2"]
    events = [*everyday([*a, *b, *c]), *layer(a, b, "bp", 100, 1500)]
    (m,) = detect(events, "A2")
    assert m.typology == "bipartite" and short(m.accounts) == ("A1", "A2", "A3", "B1", "B2")
    assert detect(events, "B1") == [m]
    # B passes on what it got to a third layer: a stack, reported once as the stack
    events += layer(b, c, "st", 200, 2150)
    (m,) = detect(events, "C1")
    assert m.typology == "stack" and len(m.hops) == 2 and len(m.event_ids) == 10
    assert detect(events, "A1") == [m]


def test_a_layer_of_parts_smaller_than_what_its_payers_usually_pay_is_a_bipartite() -> None:
    # each payer pays its supplier $6,000-$7,600 every other day (its usual transfer); the layer
    # moves $300 parts to payees none of them ever paid such sums
    a, b = ["A1", "A2", "A3"], ["B1", "B2"]
    suppliers = [move(f"sup{x}{k}", x, f"S{x}", -20 * DAY + 2 * k * DAY + 11, 6000 + 200 * k)
                 for x in a for k in range(9)]
    (m,) = detect([*everyday([*a, *b]), *suppliers, *layer(a, b, "bp", 100, 300)], "A2")
    assert m.typology == "bipartite" and short(m.accounts) == ("A1", "A2", "A3", "B1", "B2")


def test_a_layer_that_is_what_its_payers_do_anyway_is_no_bipartite() -> None:
    a, b = ["A1", "A2", "A3"], ["B1", "B2"]
    events = [*everyday([*a, *b]), *layer(a, b, "bp", 100, 1500)]
    assert names(detect(events, "A2")) == ["bipartite"]
    # each payer has paid eight new people $1,500-1,780 every day for three weeks (and its
    # grocer ten times a day: its usual payment is still a small one)
    habit = [move(f"hab{x}{d}-{i}", x, f"N{x}{d}-{i}", -21 * DAY + d * DAY + 90 * i, 1500 + 40 * i)
             for x in a for d in range(21) for i in range(8)]
    habit += [move(f"gro{x}{d}-{i}", x, "GROCER0", -21 * DAY + d * DAY + 60 * i + 30, 40 + i)
              for x in a for d in range(21) for i in range(10)]
    # no bipartite: the layer is what its payers do anyway. B1 and B2, who never were paid by
    # anyone new, each paid by three new payers within hours, are fans-in by their own habits
    got = detect([*events, *habit], "A2")
    assert "bipartite" not in names(got) and "stack" not in names(got)
    assert sorted(m.event_ids for m in got) == [("bp0", "bp2", "bp4"), ("bp1", "bp3", "bp5")]
    assert names(got) == ["fan-in", "fan-in"]


def test_a_fan_that_is_a_stack_s_layer_is_the_stack() -> None:
    # B1 passes most of what A paid it on to the C layer (too little for a gather-scatter), and
    # pays X a comparable amount in the same burst: five payees, a fan-out as X sees it -- but
    # four of the five are the stack's
    a, b, c = ["A1", "A2", "A3"], ["B1", "B2"], ["C1", "C2", "C3", "C4"]
    events = [*everyday([*a, *b, *c, "X"]), *layer(a, b, "bp", 100, 1500), *layer(b, c, "st", 200, 950),
              move("x", "B1", "X", 260, 1000)]
    assert "gather-scatter" not in names(detect(events, "B1"))
    (m,) = detect(events, "C1")
    assert m.typology == "stack" and "x" not in m.event_ids
    assert detect(events, "X") == []


def test_random_chain_matches_no_other_shape() -> None:
    chain = [move(f"ch{i}", a, b, 100 + 120 * i, 7000 * 0.98**i)
             for i, (a, b) in enumerate(zip("ABCDE", "BCDEF", strict=True))]
    events = [*everyday("ABCDEF"), *chain]
    (m,) = detect(events, "C")
    assert m.typology == "random" and short(m.accounts) == tuple("ABCDEF")
    assert m.event_ids == tuple(f"ch{i}" for i in range(5))
    # ordinary-sized payments passing along are no layering where they are what these accounts
    # do: each pays someone new $60-70 every four hours, so a $64 payment out within two hours of
    # one coming in is no evidence; the same accounts passing $7,000 along are a chain still
    habit = [move(f"h{n}{k}", n, f"N{n}{k}", -20 * DAY + 240 * k + 11 * i, 60 + (k % 11))
             for i, n in enumerate("ABCDEF") for k in range(20 * DAY // 240)]
    small = [move(f"sm{i}", a, b, 100 + 120 * i, 64 * 0.98**i)
             for i, (a, b) in enumerate(zip("ABCDE", "BCDEF", strict=True))]
    assert detect([*everyday("ABCDEF"), *habit, *small], "C") == []
    assert names(detect([*everyday("ABCDEF"), *habit, *chain], "C")) == ["random"]


def test_labels_are_never_read_and_hubs_take_part_in_nothing() -> None:
    events = [*everyday("ABCDEFG"), *cycle_events("ABCDEFG")]
    flipped = [dataclasses.replace(e, is_laundering=not e.is_laundering) for e in events]
    assert detect(events, "C") == detect(flipped, "C") != []
    # C is a busy hub: 150 distinct counterparties in the window
    busy = [move(f"h{i}", f"X{i}", "C", 2000 + i, 40) for i in range(150)]
    assert detect([*events, *busy], "C") == []
    assert "cycle" not in names(detect([*events, *busy], "A"))


def test_results_are_deterministic_and_ordered() -> None:
    events = [*everyday(["H", *(f"L{i}" for i in range(6)), *"ABCD"]), *fan_out_events(),
              *cycle_events(["H", "A", "B", "C"])]
    found = detect(events, "H")
    assert names(found) == ["fan-out", "cycle"]  # the AMLworld order
    assert detect(list(reversed(events)), "H") == found
    assert found[0].to_dict()["hops"] == [list(found[0].event_ids)]
    with pytest.raises(ValueError, match="hub_degree"):
        detect([], "A", hub_degree=0)


# ------------------------------------------------------------------ generated data


SEEDS = (5, 7, 11)


@pytest.fixture(scope="module")
def generated():
    """Three generated sets (seeds 5, 7 and 11, bench/trace.py --quick's seed among them): 12 days
    of 800 accounts with planted typologies (1.5% of rows) and look-alikes (small payrolls, shops,
    rents, exchanges, merchants, payroll processors), each scored over its last five days (a
    week of history behind them: weekly payments are recognisably recurring, and every account
    has habits to be judged by), the scores pooled (one set plants 1 to 5 of each typology)."""
    from ingest.synthetic import generate

    instances, pooled = [], {t: [0, 0, 0, 0] for t in TYPOLOGIES}
    for seed in SEEDS:
        ds = generate(accounts=800, days=12, laundering_rate=0.015, seed=seed)
        store = NetworkxGraphStore()
        store.add_transactions(ds.events)
        start = ds.events[0].timestamp.replace(hour=0, minute=0) + timedelta(days=7)
        planted = ds.planted(start)
        scores = score_typologies(store, planted, [r.node_id for r in ds.lookalikes()],
                                  (start, ds.events[-1].timestamp))
        assert all(scores[t].planted == sum(1 for i in planted if i[0] == t) for t in TYPOLOGIES)
        instances += planted
        for t, sc in scores.items():
            for k, x in enumerate((sc.planted, sc.recalled, sc.findings, sc.correct)):
                pooled[t][k] += x
    return instances, {t: TypologyScore(t, *v) for t, v in pooled.items()}


#: Floors on the pooled scores (7 to 9 planted instances of each typology but the stack, 3; the
#: answer key is the generator's, the detectors never see it). Issue 10 asks 0.9 recall and 0.8
#: precision of every typology; where the detectors reach that here the floor is the target,
#: elsewhere it is what they reach rounded down to a tenth (a regression floor, not the target).
#: Since the detectors generalised to third-party data (issue 33: horizons to weeks, fans of three,
#: amounts as a graded signal, habits judged over everything an account did outside the shape and
#: the time it took, a negative binomial tail, each hop of a path judged against the candidates a
#: search on or back could have taken there) they find every planted fan, scatter-gather, cycle,
#: chain and stack here; fans still include the scatters and gathers of shapes a member's query
#: does not see whole and bursts of new payers to accounts that never had any (fan-out precision
#: 0.47, fan-in 0.47, random 0.75 over seeds 5, 7, 11); gather-scatters spread over days lose to
#: the fans of their two sides (recall 0.50: a fresh hub's habit is judged over the hours outside
#: its bursts, few for an account first seen in the window); bipartites lose squares
#: (MIN_LAYER_ACCOUNTS).
RECALL_FLOORS = {"fan-out": 0.9, "fan-in": 0.9, "gather-scatter": 0.5, "scatter-gather": 0.9, "cycle": 0.9,
                 "random": 0.9, "bipartite": 0.7, "stack": 0.9}
PRECISION_FLOORS = {"fan-out": 0.4, "fan-in": 0.4, "gather-scatter": 0.8, "scatter-gather": 0.7, "cycle": 0.9,
                    "random": 0.7, "bipartite": 0.8, "stack": 0.8}


def test_every_typology_is_planted_in_the_scored_window(generated) -> None:
    instances, scores = generated
    assert {t for t, _, _ in instances} == set(TYPOLOGIES)
    assert all(scores[t].planted == sum(1 for i in instances if i[0] == t) for t in TYPOLOGIES)


@pytest.mark.parametrize("typology", TYPOLOGIES)
def test_recall_and_precision_above_their_floors(generated, typology) -> None:
    _, scores = generated
    s = scores[typology]
    assert s.recall >= RECALL_FLOORS[typology], s
    assert s.precision >= PRECISION_FLOORS[typology], s


def test_findings_inside_an_instance_only_partly_in_view_are_not_scored() -> None:
    # the answer key knows this cycle as an attempt that began before the window: what a detector
    # finds of it is neither a hit nor a false positive
    events = [*everyday("ABCD"), *cycle_events("ABCD")]
    store = NetworkxGraphStore()
    store.add_transactions(events)
    window = (T0, T0 + timedelta(days=6))
    ids = frozenset(f"cy{i}" for i in range(4))
    members = tuple(acct(x) for x in "ABCD")
    seen = score_typologies(store, [], members, window)
    assert (seen["cycle"].findings, seen["cycle"].precision) == (1, 0.0)
    hidden = score_typologies(store, [], members, window, unscored=[("stack", ids, members)])
    assert hidden["cycle"].findings == 0
    scored = score_typologies(store, [("cycle", ids, members)], [], window)
    assert (scored["cycle"].recall, scored["cycle"].precision) == (1.0, 1.0)


def test_a_hub_is_judged_by_its_rate_of_counterparties_not_its_lifetime_count() -> None:
    # C has paid 150 different people over 300 days (one every two days: no hub); without a
    # window its whole history is looked at, and its cycle is still found. 150 more in the
    # window's six days make it a hub there (a rate over the whole history would not: the rate
    # is an average over the span examined)
    events = [*everyday("ABCD"), *cycle_events("ABCD")]
    slow = [move(f"s{i}", "C", f"X{i}", -300 * DAY + 2 * DAY * i, 40) for i in range(150)]
    store = NetworkxGraphStore()
    store.add_transactions([*events, *slow])
    found = detect_typologies(store, acct("C"))
    assert [m.event_ids for m in found if m.typology == "cycle"] == [tuple(f"cy{i}" for i in range(4))]
    busy = [move(f"b{i}", "C", f"Y{i}", 3000 + i, 40) for i in range(150)]
    store.add_transactions(busy)
    assert detect_typologies(store, acct("C"), (T0, T0 + timedelta(days=6))) == []


def test_an_alert_is_shown_the_findings_its_own_transfer_is_a_member_of() -> None:
    from evidence_graph.typologies import findings_of_transfer

    events = [*everyday(["H", "A", "B", "C", *(f"L{i}" for i in range(6))]), *fan_out_events(),
              *cycle_events(["H", "A", "B", "C"])]
    found = detect(events, "H")
    assert names(found) == ["fan-out", "cycle"]
    assert names(findings_of_transfer(found, "cy2")) == ["cycle"]  # the cycle's own transfer B -> C
    assert names(findings_of_transfer(found, "fo3")) == ["fan-out"]
    assert findings_of_transfer(found, "day-H-0") == []  # H's grocery: in no shape


# ------------------------------------------------------------------ long horizons, long cycles, mixed funds


def detect_weeks(events, name: str) -> list[TypologyMatch]:
    """Detection over a four-week window (history before it: ``everyday``'s weeks)."""
    store = NetworkxGraphStore()
    store.add_transactions(events)
    return detect_typologies(store, acct(name), (T0, T0 + timedelta(days=28)))


def test_a_ten_account_cycle_over_two_weeks_is_a_cycle() -> None:
    ring = [f"R{i}" for i in range(10)]
    events = [*everyday(ring), *cycle_events(ring, gap=36 * 60)]  # a hop every day and a half
    ids = tuple(f"cy{i}" for i in range(10))
    for member in ("R0", "R5", "R9"):
        assert [m.event_ids for m in detect_weeks(events, member) if m.typology == "cycle"] == [ids]


def test_a_cycle_of_mixed_funds_is_a_cycle() -> None:
    # each hop passes on 40% to 130% of what arrived (money mixed with the mule's own)
    share = (0.45, 1.3, 0.8, 1.1, 0.6)
    amount, events = 9000.0, [*everyday("ABCDE")]
    for i, (a, b) in enumerate(zip("ABCDE", "BCDEA", strict=True)):
        events.append(move(f"mx{i}", a, b, 100 + 240 * i, amount))
        amount *= share[i]
    found = [m for m in detect(events, "C") if m.typology == "cycle"]
    assert [m.event_ids for m in found] == [tuple(f"mx{i}" for i in range(5))]


def test_a_cycle_that_passes_over_an_existing_relationship_is_a_cycle() -> None:
    # a ring of eight quiet accounts, a hop every day and a half, but R3 has paid R4 once a month
    # for months (a relationship): that hop is judged by how often R3 pays R4, not left out
    # (searched from the ring's other members: a search takes no relationship as its first step)
    ring = [f"R{i}" for i in range(8)]
    rent = [move(f"rel{k}", "R3", "R4", -150 * DAY + 30 * DAY * k, 700) for k in range(5)]
    events = [*everyday(ring), *rent, *cycle_events(ring, gap=36 * 60)]
    ids = tuple(f"cy{i}" for i in range(8))
    for member in ("R0", "R2", "R5", "R7"):
        assert [m.event_ids for m in detect_weeks(events, member) if m.typology == "cycle"] == [ids], member
    # the same line of payments without the way back is no chain: a relationship's hop is evidence
    # only where the money comes round
    line = [e for e in events if e.event_id != "cy7"]
    assert [m for m in detect_weeks(line, "R2") if m.typology == "random" and "cy3" in m.event_ids] == []


def test_a_chain_closed_only_by_everyday_payments_is_the_chain() -> None:
    # A -> B -> C -> D -> E passes on $9,000 within hours; two days later E, who pays a few dozen
    # dollars to someone new several times a day, pays A $40: the money does not come back, the
    # chain is the finding
    chain = [move(f"ch{i}", a, b, 100 + 90 * i, 9000 * 0.98**i)
             for i, (a, b) in enumerate(zip("ABCD", "BCDE", strict=True))]
    habit = [move(f"he{d}-{k}", "E", f"NE{d}-{k}", -20 * DAY + d * DAY + 200 * k, 30 + 3 * k + d % 5)
             for d in range(26) for k in range(4)]
    back = move("back", "E", "A", 100 + 2 * DAY, 40)
    events = [*everyday("ABCDE"), *habit, *chain, back]
    for member in "ACE":
        found = detect_weeks(events, member)
        assert "cycle" not in names(found), member
        assert [m.event_ids for m in found if m.typology == "random"] == [tuple(f"ch{i}" for i in range(4))], member


def test_a_ring_of_regular_payments_is_no_cycle() -> None:
    # a savings club: every week each of four members pays the next one the same sum, the week's
    # payments a day apart -- a time-ordered ring, every hop a relationship: no laundering cycle
    club = "ABCD"
    weekly = [move(f"club{w}-{i}", a, b, -35 * DAY + 7 * DAY * w + DAY * i + 5 * w, 500)
              for w in range(9) for i, (a, b) in enumerate(zip(club, "BCDA", strict=True))]
    events = [*everyday(club), *weekly]
    for member in club:
        assert detect_weeks(events, member) == [], member


def test_a_scatter_gather_over_a_week_is_found() -> None:
    mids = ["M1", "M2", "M3", "M4"]
    events = [*everyday(["S", "T", *mids])]
    events += [move(f"sc{i}", "S", m, 100 + DAY * i, 4000 + 150 * i) for i, m in enumerate(mids)]
    events += [move(f"ga{i}", m, "T", 100 + DAY * i + 3 * DAY, (4000 + 150 * i) * 0.95) for i, m in enumerate(mids)]
    found = [m for m in detect_weeks(events, "S") if m.typology == "scatter-gather"]
    assert [set(m.event_ids) for m in found] == [{*(f"sc{i}" for i in range(4)), *(f"ga{i}" for i in range(4))}]


def test_a_scatter_gather_whose_intermediates_hold_the_money_for_weeks_is_found() -> None:
    # four quiet accounts paid by S in one week each pay T four to five weeks later, about half
    # of what they got (the rest mixed with other money): one coincidence per account, together
    # a scatter-gather
    mids = ["M1", "M2", "M3", "M4"]
    events = [*everyday(["S", "T", *mids])]
    events += [move(f"sc{i}", "S", m, 100 + DAY * i, 4000 + 150 * i) for i, m in enumerate(mids)]
    events += [move(f"ga{i}", m, "T", 100 + DAY * i + (29 + 2 * i) * DAY, 2100 + 90 * i) for i, m in enumerate(mids)]
    store = NetworkxGraphStore()
    store.add_transactions(events)
    window = (T0, T0 + timedelta(days=42))
    for member in ("S", "M2", "T"):
        found = [m for m in detect_typologies(store, acct(member), window) if m.typology == "scatter-gather"]
        assert [set(m.event_ids) for m in found] == [{*(f"sc{i}" for i in range(4)), *(f"ga{i}" for i in range(4))}]


def test_payroll_rent_and_households_are_no_typology() -> None:
    staff = [f"E{i}" for i in range(30)]
    payroll = [move(f"sal{m}-{i}", "EMPLOYER", e, m * 30 * DAY - 25 * DAY + i, 2100 + 13 * i)
               for m in range(2) for i, e in enumerate(staff)]
    rent = [move(f"rent{m}", "TENANT", "LANDLORD", m * 30 * DAY - 25 * DAY + 600, 1200) for m in range(2)]
    # four households paying the same utility, school and insurer every month
    homes = [f"HOME{i}" for i in range(4)]
    bills = [move(f"bill{m}-{h}-{p}", h, p, m * 30 * DAY - 20 * DAY + 60 * k + 7 * j, 80 + 40 * j)
             for m in range(2) for k, h in enumerate(homes) for j, p in enumerate(("UTILITY", "SCHOOL", "INSURER"))]
    events = [*everyday([*staff, "EMPLOYER", "TENANT", "LANDLORD", *homes]), *payroll, *rent, *bills]
    for who in ("EMPLOYER", "E7", "TENANT", "LANDLORD", "HOME1", "SCHOOL"):
        assert detect_weeks(events, who) == [], who


def test_a_merchant_s_customers_are_no_fan_in() -> None:
    # sixty customers each buy once from a shop over four weeks: many one-off payers, a merchant
    buys = [move(f"buy{c}", f"C{c}", "SHOPX", 300 + c * 11 * 60, 25 + c % 40) for c in range(60)]
    events = [*everyday([f"C{c}" for c in range(60)]), *buys]
    assert detect_weeks(events, "SHOPX") == []
