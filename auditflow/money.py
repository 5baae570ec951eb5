"""Exact money: integer units at each currency's scale, never float.

>>> m = parse_amount("0.025852", "Bitcoin", field="Amount Paid")
>>> m.units, m.currency, m.scale
(2585200, 'Bitcoin', 8)
>>> str(m.to_decimal())
'0.02585200'
>>> format_amount(parse_amount("3697.34", "US Dollar", field="Amount Paid"))
'3697.34'
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
    except KeyError:
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
    >>> Money("Euro", 1) < Money("US Dollar", 0)
    Traceback (most recent call last):
    auditflow.money.CurrencyMismatchError: cannot compare Euro and US Dollar amounts (Money(currency='Euro', units=1), Money(currency='US Dollar', units=0)): currencies differ, convert one first
    """

    currency: str
    units: int

    def __post_init__(self) -> None:
        if self.currency not in CURRENCIES:
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
            return NotImplemented  # type: ignore[return-value]
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
    """Parse a decimal string exactly; reject precision beyond the currency's scale."""
    scale = currency_scale(currency, field=field.replace("Amount", "Currency"))
    raw = text.strip()
    if not raw:
        raise FieldError(field, text, "missing amount")
    whole, dot, frac = raw.partition(".")
    if whole.isdigit() and whole.isascii() and (not dot or (frac.isdigit() and frac.isascii())):
        digits = frac.rstrip("0")
        if len(digits) > scale:
            raise FieldError(field, text, f"more than {scale} decimals for {currency}")
        return Money(currency, int(whole) * 10**scale + (int(digits.ljust(scale, "0")) if digits else 0))
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
