"""Exact money: integer units at each currency's scale, never float.

>>> m = parse_amount("0.025852", "Bitcoin", field="Amount Paid")
>>> m.units, m.currency, m.scale
(2585200, 'Bitcoin', 8)
>>> str(m.to_decimal())
'0.02585200'
>>> format_amount(parse_amount("3697.34", "US Dollar", field="Amount Paid"))
'3697.34'

Amounts are capped per currency (:data:`MAX_AMOUNT_DIGITS` digits before the point), so that
integer units and the US-cent value always fit a signed 64-bit integer and ``usd_cents`` is exact:

>>> MAX_AMOUNT_DIGITS["US Dollar"], MAX_AMOUNT_DIGITS["Euro"], MAX_AMOUNT_DIGITS["Bitcoin"]
(16, 15, 10)
>>> parse_amount("1" * 17, "US Dollar", field="Amount Paid")  # doctest: +ELLIPSIS
Traceback (most recent call last):
auditflow.errors.FieldError: Amount Paid='11111111111111111': more than 16 digits ... must fit a 64-bit integer)
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

from auditflow.errors import FieldError

#: AMLworld currency names -> (ISO-like code, decimal places kept exactly).
#: Fiat amounts in the public data carry two decimals (Yen included); Bitcoin carries six
#: or more, so it is kept at satoshi scale (8).
CURRENCIES: dict[str, tuple[str, int]] = {
    "US Dollar": ("USD", 2),
    "Euro": ("EUR", 2),
    "Yuan": ("CNY", 2),
    "Yen": ("JPY", 2),
    "Rupee": ("INR", 2),
    "UK Pound": ("GBP", 2),
    "Canadian Dollar": ("CAD", 2),
    "Australian Dollar": ("AUD", 2),
    "Swiss Franc": ("CHF", 2),
    "Mexican Peso": ("MXN", 2),
    "Brazil Real": ("BRL", 2),
    "Ruble": ("RUB", 2),
    "Shekel": ("ILS", 2),
    "Saudi Riyal": ("SAR", 2),
    "Bitcoin": ("XBT", 8),
}


def currency_scale(currency: str, *, field: str = "currency") -> int:
    try:
        return CURRENCIES[currency][1]
    except (KeyError, TypeError):  # TypeError: not even hashable (decoded JSON)
        raise FieldError(field, currency, "unknown currency") from None


class CurrencyMismatchError(TypeError, ValueError):
    """Two amounts in different currencies were added or ordered: convert one first.

    A ``TypeError`` like any unorderable pair, and a ``ValueError`` as before for addition."""

    def __init__(self, op: str, left: Money, right: Money) -> None:
        super().__init__(
            f"cannot {op} {left.currency} and {right.currency} amounts "
            f"({left!r}, {right!r}): currencies differ, convert one first"
        )
        self.left, self.right = left, right


@dataclass(frozen=True, slots=True)
class Money:
    """An exact amount: ``units`` of 10**-scale of ``currency``.

    Equality is structural (amounts in different currencies are simply unequal); ordering
    (``<``, ``<=``, ``>``, ``>=``) and addition only exist within one currency and raise
    :class:`CurrencyMismatchError` naming both currencies otherwise.

    >>> Money("Euro", 100) < Money("Euro", 250), Money("Euro", 1) == Money("US Dollar", 1)
    (True, False)
    >>> Money("Euro", 1) < Money("US Dollar", 0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    auditflow.money.CurrencyMismatchError: cannot compare Euro and US Dollar amounts (...): currencies differ, ...
    """

    currency: str
    units: int

    def __post_init__(self) -> None:
        if not isinstance(self.currency, str) or self.currency not in CURRENCIES:
            raise FieldError("currency", self.currency, "unknown currency")
        if not isinstance(self.units, int) or isinstance(self.units, bool):
            raise FieldError("units", self.units, "money units must be an int")

    @property
    def scale(self) -> int:
        return CURRENCIES[self.currency][1]

    def to_decimal(self) -> Decimal:
        return Decimal(self.units).scaleb(-self.scale)

    def _same_currency_units(self, other: object, op: str) -> int:
        if not isinstance(other, Money):
            return NotImplemented
        if other.currency != self.currency:
            raise CurrencyMismatchError(op, self, other)
        return other.units

    def __lt__(self, other: object) -> bool:
        units = self._same_currency_units(other, "compare")
        return NotImplemented if units is NotImplemented else self.units < units

    def __le__(self, other: object) -> bool:
        units = self._same_currency_units(other, "compare")
        return NotImplemented if units is NotImplemented else self.units <= units

    def __gt__(self, other: object) -> bool:
        units = self._same_currency_units(other, "compare")
        return NotImplemented if units is NotImplemented else self.units > units

    def __ge__(self, other: object) -> bool:
        units = self._same_currency_units(other, "compare")
        return NotImplemented if units is NotImplemented else self.units >= units

    def __add__(self, other: Money) -> Money:
        units = self._same_currency_units(other, "add")
        if units is NotImplemented:
            return NotImplemented
        return Money(self.currency, self.units + units)


def parse_amount(text: str, currency: str, *, field: str) -> Money:
    """Parse a decimal string exactly; reject precision beyond the currency's scale and more
    digits before the point than :data:`MAX_AMOUNT_DIGITS` allows for it."""
    scale = currency_scale(currency, field=field.replace("Amount", "Currency"))
    if not isinstance(text, str):
        raise FieldError(field, text, "expected the amount as a decimal string")
    raw = text.strip()
    if not raw:
        raise FieldError(field, text, "missing amount")
    whole, dot, frac = raw.partition(".")
    if whole.isdigit() and whole.isascii() and (not dot or (frac.isdigit() and frac.isascii())):
        digits = frac.rstrip("0")
        if len(digits) > scale:
            raise FieldError(field, text, f"more than {scale} decimals for {currency}")
        whole = whole.lstrip("0")
        if len(whole) > MAX_AMOUNT_DIGITS[currency]:
            raise FieldError(
                field,
                text,
                f"more than {MAX_AMOUNT_DIGITS[currency]} digits before the decimal point "
                f"for {currency} (its units and US-cent value must fit a 64-bit integer)",
            )
        return Money(currency, int(whole or "0") * 10**scale + (int(digits.ljust(scale, "0")) if digits else 0))
    if raw.startswith("-"):
        raise FieldError(field, text, "negative amount")
    raise FieldError(field, text, "not a plain decimal number (digits, optional point and decimals)")


def format_amount(money: Money) -> str:
    """Canonical text: fiat with its two decimals; Bitcoin trimmed to at least six decimals."""
    text = f"{money.to_decimal():f}"
    if money.scale > 6 and "." in text:
        whole, frac = text.split(".")
        frac = frac.rstrip("0").ljust(6, "0")
        text = f"{whole}.{frac}"
    return text


#: Significant digits of an amount written for people (the exact one stays in appendices and files).
SIGNIFICANT = 4


def round_significant(x: Decimal, digits: int = SIGNIFICANT) -> Decimal:
    """``x`` rounded to ``digits`` significant digits, ties to the even digit.

    >>> [round_significant(Decimal(x)) for x in ("94999.79", "3697.34", "0.0258520")]
    [Decimal('9.500E+4'), Decimal('3697'), Decimal('0.02585')]
    """
    if x == 0:
        return x
    exp = x.adjusted() - digits + 1
    return x.scaleb(-exp).quantize(Decimal(1), rounding=ROUND_HALF_EVEN).scaleb(exp)


def figure_text(x: Decimal) -> str:
    """A rounded amount for people: 4 significant digits, thousands separators, millions and
    billions in words.

    >>> figure_text(Decimal("94999.79")), figure_text(Decimal("3697.34")), figure_text(Decimal("1250000"))
    ('95,000', '3,697', '1.25 million')
    """
    x = round_significant(x)
    for word, size in (("billion", Decimal(10) ** 9), ("million", Decimal(10) ** 6)):
        if abs(x) >= size:
            return f"{round_significant(x / size).normalize():f} {word}"
    if abs(x) >= 1000:
        return f"{int(x):,}"
    return f"{x.normalize():f}"


def money_plain(m: Money) -> str:
    """An amount in its own currency, rounded for people: ``XBT 0.02585``, ``EUR 1.25 million``.

    >>> money_plain(parse_amount("0.025852", "Bitcoin", field="x")), money_plain(Money("Euro", 125_000_000))
    ('XBT 0.02585', 'EUR 1.25 million')
    """
    return f"{CURRENCIES[m.currency][0]} {figure_text(m.to_decimal())}"


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


def round_half_even(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded to an integer, ties to the even one (banker's rounding,
    as ``Decimal.quantize`` with ``ROUND_HALF_EVEN``), exactly (``denominator >= 1``).

    >>> [round_half_even(n, 10) for n in (5, 15, 16, -5, -15, -14)]
    [0, 2, 2, 0, -2, -1]
    """
    q, r = divmod(numerator, denominator)  # floor division: 0 <= r < denominator, for either sign
    twice = r + r
    if twice > denominator or (twice == denominator and q & 1):
        q += 1
    return q


def _usd_cent_factors() -> dict[str, tuple[int, int]]:
    """Per currency, ``(numerator, denominator)`` with US cents = units * numerator / denominator
    exactly: the reference rate (:data:`USD_RATES`) times 100 over the currency's scale."""
    out = {}
    for currency, (_, scale) in CURRENCIES.items():
        sign, digits, exp = (USD_RATES[currency] * 100).as_tuple()
        num = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        den = 10**scale
        if isinstance(exp, int) and exp >= 0:
            num *= 10**exp
        else:
            den *= 10 ** (-int(exp))
        out[currency] = (num, den)
    return out


#: Per currency: ``(numerator, denominator)`` of its exact US-cent value per unit
#: (:func:`_usd_cent_factors`), the one form of :data:`USD_RATES` the conversions compute with.
USD_CENT_FACTORS: dict[str, tuple[int, int]] = _usd_cent_factors()


def usd_cents(m: Money) -> int:
    """Exact conversion to integer US cents at the reference rate (banker's rounding), in integer
    arithmetic: ``round_half_even(units * numerator, denominator)`` with the currency's
    :data:`USD_CENT_FACTORS`; no decimal context involved, exact for any amount.

    >>> usd_cents(Money("Euro", 50)), usd_cents(Money("Euro", 150)), usd_cents(Money("Bitcoin", 1000))
    (58, 176, 12)
    """
    num, den = USD_CENT_FACTORS[m.currency]
    return round_half_even(m.units * num, den)


#: Integer units and US-cent values have at most this many digits: they fit a signed 64-bit
#: integer (2**63 - 1 has 19 digits) and the wire form's integers (auditflow.records).
MAX_INTEGER_DIGITS = 18


def _max_unit_digits(currency: str) -> int:
    """The most digits of units every value of which has a US-cent value of at most
    :data:`MAX_INTEGER_DIGITS` digits (computed exactly)."""
    d = MAX_INTEGER_DIGITS
    while d > 0 and usd_cents(Money(currency, 10**d - 1)) >= 10**MAX_INTEGER_DIGITS:
        d -= 1
    return d


#: Per currency: the most digits its integer units may have (see :func:`_max_unit_digits`).
MAX_UNIT_DIGITS: dict[str, int] = {c: _max_unit_digits(c) for c in CURRENCIES}
#: Per currency: the most digits an amount may have before the decimal point (the cap
#: :func:`parse_amount` enforces): ``MAX_UNIT_DIGITS`` less the currency's decimals.
MAX_AMOUNT_DIGITS: dict[str, int] = {c: MAX_UNIT_DIGITS[c] - CURRENCIES[c][1] for c in CURRENCIES}
