"""Money ordering: within one currency it is the order of the integer units; across currencies it
is refused, naming both (never an alphabetical comparison of currency names)."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from auditflow.money import CURRENCIES, CurrencyMismatchError, Money

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
