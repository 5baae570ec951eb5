"""FinCEN SAR suspicious-activity categories (form items 29-38; the batch XML's
``SuspiciousActivityTypeID`` and ``SuspiciousActivitySubtypeID``, schema ``EFL_SARXBatchSchema``
v1.2), and the categories an alert's evidence points to.

The codes and their wording are FinCEN's; which category a laundering typology suggests is this
product's reading of them, for the investigator to confirm (a SAR's categories are the filer's
judgement, not the model's):

* a **fan-in** or **gather-scatter** gathers many payers' money in one account: *Funnel account*;
* a **fan-out**, **scatter-gather**, **bipartite** or **stack** spreads money over several
  accounts or layers: *Suspicious use of multiple accounts*;
* a **cycle** sends money round back to where it started: *Transaction with no apparent economic,
  business, or lawful purpose*;
* no typology: the model found the transfer out of pattern: *Transaction out of pattern for
  customer(s)*;
* a wire: *Suspicious EFT/wire transfers*; paid and received in different currencies:
  *Suspicious exchange of currencies*.

>>> [c.text for c in activity_categories(["fan-in"], "Wire", cross_currency=False)]
['Money laundering: Funnel account', 'Money laundering: Suspicious EFT/wire transfers']
>>> activity_categories([], "ACH", cross_currency=True)[0].code
'8/812'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: FinCEN SAR activity types (``SuspiciousActivityTypeID``) this module uses.
ACTIVITY_TYPES = {8: "Money laundering", 9: "Other suspicious activities"}


@dataclass(frozen=True, slots=True, order=True)
class ActivityCategory:
    """One FinCEN SAR category: type and subtype id, and FinCEN's wording."""

    type_id: int
    subtype_id: int
    subtype: str

    @property
    def text(self) -> str:
        return f"{ACTIVITY_TYPES[self.type_id]}: {self.subtype}"

    @property
    def code(self) -> str:
        return f"{self.type_id}/{self.subtype_id}"


FUNNEL = ActivityCategory(8, 824, "Funnel account")
MULTIPLE_ACCOUNTS = ActivityCategory(8, 807, "Suspicious use of multiple accounts")
WIRES = ActivityCategory(8, 805, "Suspicious EFT/wire transfers")
OUT_OF_PATTERN = ActivityCategory(8, 812, "Transaction out of pattern for customer(s)")
CURRENCY_EXCHANGE = ActivityCategory(8, 822, "Suspicious exchange of currencies")
NO_PURPOSE = ActivityCategory(9, 925, "Transaction with no apparent economic, business, or lawful purpose")

#: The category each typology (``auditflow.typologies.TYPOLOGIES``) suggests.
TYPOLOGY_CATEGORIES = {
    "fan-in": FUNNEL,
    "gather-scatter": FUNNEL,
    "fan-out": MULTIPLE_ACCOUNTS,
    "scatter-gather": MULTIPLE_ACCOUNTS,
    "bipartite": MULTIPLE_ACCOUNTS,
    "stack": MULTIPLE_ACCOUNTS,
    "cycle": NO_PURPOSE,
}


def activity_categories(
    typologies: Iterable[str], payment_format: str, *, cross_currency: bool
) -> list[ActivityCategory]:
    """The categories the evidence suggests: each typology's (or *out of pattern* without one),
    then the instrument's; each once, in that order."""
    found = [TYPOLOGY_CATEGORIES[t] for t in typologies if t in TYPOLOGY_CATEGORIES] or [OUT_OF_PATTERN]
    if payment_format == "Wire":
        found.append(WIRES)
    if cross_currency:
        found.append(CURRENCY_EXCHANGE)
    return list(dict.fromkeys(found))


#: The categories this product suggests and accepts in a SAR proposal.
CATEGORIES = (FUNNEL, MULTIPLE_ACCOUNTS, WIRES, OUT_OF_PATTERN, CURRENCY_EXCHANGE, NO_PURPOSE)


def category(type_id: int, subtype_id: int) -> ActivityCategory:
    """The category of FinCEN code ``type_id/subtype_id`` (``ValueError`` naming the code and the
    known ones otherwise).

    >>> category(8, 824).text
    'Money laundering: Funnel account'
    """
    for c in CATEGORIES:
        if (c.type_id, c.subtype_id) == (type_id, subtype_id):
            return c
    known = ", ".join(f"{c.code} ({c.subtype})" for c in CATEGORIES)
    raise ValueError(f"activity category {type_id}/{subtype_id} is not one this product files; known: {known}")
