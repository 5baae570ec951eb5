"""Money ordering: within one currency it is the order of the integer units; across currencies it
is refused, naming both (never an alphabetical comparison of currency names). US cents: the exact
value at the reference rate, rounded half to even, checked against Decimal and Fraction."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditflow.money import (
    CURRENCIES,
    USD_CENT_FACTORS,
    USD_RATES,
    CurrencyMismatchError,
    Money,
    round_half_even,
    usd_cents,
)

ORDERINGS = [operator.lt, operator.le, operator.gt, operator.ge]
currencies = st.sampled_from(sorted(CURRENCIES))
units = st.integers(min_value=-(10**20), max_value=10**20)


@given(currencies, units, units)
def test_same_currency_orders_by_units(currency, a, b):
    x, y = Money(currency, a), Money(currency, b)
    for op in ORDERINGS:
        assert op(x, y) is op(a, b)
    assert (x == y) is (a == b)


@given(st.lists(units, max_size=20), currencies)
def test_sorting_one_currency_sorts_the_units(values, currency):
    assert [m.units for m in sorted(Money(currency, v) for v in values)] == sorted(values)
    if values:
        assert max(Money(currency, v) for v in values).units == max(values)


@pytest.mark.parametrize("op", ORDERINGS, ids=lambda op: op.__name__)
def test_different_currencies_refuse_to_compare_naming_both(op):
    # "Euro" < "US Dollar" as strings: the old dataclass order said 1 EUR < 0 USD
    with pytest.raises(CurrencyMismatchError, match="Euro and US Dollar") as err:
        op(Money("Euro", 1), Money("US Dollar", 0))
    assert isinstance(err.value, TypeError)  # like any unorderable pair
    assert (err.value.left.currency, err.value.right.currency) == ("Euro", "US Dollar")
    with pytest.raises(CurrencyMismatchError, match="Bitcoin and Yen"):
        op(Money("Bitcoin", 5), Money("Yen", 5))


def test_sorting_mixed_currencies_is_refused():
    with pytest.raises(CurrencyMismatchError):
        sorted([Money("US Dollar", 5), Money("Euro", 1)])
    with pytest.raises(CurrencyMismatchError):
        max([Money("Euro", 1), Money("Euro", 3), Money("Yuan", 2)])


def test_equality_stays_structural():
    assert Money("Euro", 100) == Money("Euro", 100)
    assert Money("Euro", 100) != Money("US Dollar", 100)  # unequal, not an error
    assert hash(Money("Euro", 100)) == hash(Money("Euro", 100))
    assert len({Money("Euro", 1), Money("Euro", 1), Money("Yen", 1)}) == 2
    assert Money("Euro", 100) != 100


def test_ordering_against_other_types_is_a_plain_type_error():
    with pytest.raises(TypeError) as err:
        Money("Euro", 1) < 2  # noqa: B015
    assert not isinstance(err.value, CurrencyMismatchError)


def test_addition_follows_the_same_rule():
    assert Money("Yen", 150) + Money("Yen", 250) == Money("Yen", 400)
    with pytest.raises(CurrencyMismatchError, match="add Yen and Euro"):
        Money("Yen", 1) + Money("Euro", 1)
    with pytest.raises(ValueError):  # as before the rule was shared: still a ValueError
        Money("Yen", 1) + Money("Euro", 1)


# ------------------------------------------------------------------ US cents at the reference rates


def _decimal_cents(currency: str, units: int) -> int:
    """The US-cent value as Decimal computes it (in a context wide enough to be exact), rounded
    half to even: independent of the integer arithmetic of ``usd_cents``."""
    from decimal import ROUND_HALF_EVEN, Decimal, localcontext

    with localcontext(prec=80):
        usd = Decimal(units).scaleb(-CURRENCIES[currency][1]) * USD_RATES[currency]
        return int((usd * 100).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


@st.composite
def amounts(draw):
    c = draw(currencies)
    digits = draw(st.integers(1, 24))  # up to the cap and well beyond it: exact everywhere
    return c, draw(st.integers(-(10**digits) + 1, 10**digits - 1))


@given(amounts())
@settings(max_examples=3000, deadline=None)
def test_usd_cents_are_the_exact_decimal_value_rounded_half_to_even(amount):
    currency, u = amount
    assert usd_cents(Money(currency, u)) == _decimal_cents(currency, u)


def test_usd_cents_round_exact_halves_to_even():
    # 0.50 EUR = 58.5 US cents -> 58; 1.50 EUR = 175.5 -> 176; 0.00001 XBT = 11.5 -> 12; 0.005 USD cannot occur
    assert [usd_cents(Money("Euro", u)) for u in (50, 150)] == [58, 176]
    assert usd_cents(Money("Bitcoin", 1000)) == 12
    for c in CURRENCIES:
        for u in range(-2000, 20_000, 7):
            assert usd_cents(Money(c, u)) == _decimal_cents(c, u), (c, u)


@given(st.integers(-(10**30), 10**30), st.integers(1, 10**12))
def test_round_half_even_is_pythons_rounding_of_the_exact_fraction(n, d):
    from fractions import Fraction

    assert round_half_even(n, d) == round(Fraction(n, d))  # round() of a Fraction: ties to even


def test_cent_factors_are_the_rates_times_100_over_the_scale():
    from fractions import Fraction

    for c, (num, den) in USD_CENT_FACTORS.items():
        assert Fraction(num, den) == Fraction(USD_RATES[c]) * 100 / 10 ** CURRENCIES[c][1], c
