# mypy: disable-error-code="misc"
# (mypy cannot infer the templates that bind a loop variable through a lambda default, e.g.
# `lambda v, last=last: ...`; they are Templates: one float in, the sentence out.)
"""Reason codes an investigator reads: the versioned mapping from a model feature and its value to
a sentence in the domain's units.

Every model input (:data:`auditflow.features.MODEL_STREAM_FEATURES` and
:data:`auditflow.features.GRAPH_FEATURE_NAMES`) has exactly one entry; the text is filled with the
transfer's actual value: counts as whole numbers, money as ``USD 12,345.67`` (the features sum
exact US cents), durations in minutes, hours or days, shares as percentages, and categories by
name (``paid by ACH``, never a code). The same feature and value always give the same text.

Changing a sentence's meaning or a feature's unit bumps :data:`REASONS_VERSION`, which alerts and
the registry record next to the model.

>>> reason_text("rcv_in_cp_7d", 14.0)
'receiver was paid by 14 distinct accounts in the last 7 days'
>>> reason_text("amount_usd", 9876.5)
'amount paid: USD 9,876.50'
>>> reason_text("fmt_ach", 1.0), reason_text("snd_gap_min", 190.0)
('paid by ACH', "sender's previous transfer was 3 h 10 min earlier")
>>> print(reason_text("g_cycle_len", 4.0))  # doctest: +NORMALIZE_WHITESPACE
this transfer closes a cycle of 4 hops: money that left the receiver reached the sender
through time-ordered transfers in the 7 days before
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from auditflow.features import (
    COUNTERPARTY_WINDOWS,
    FORMAT_FEATURES,
    GRAPH_CYCLE_MAX_HOPS,
    GRAPH_FEATURE_NAMES,
    GRAPH_WINDOWS,
    MODEL_STREAM_FEATURES,
    PASS_RANGE,
    PASS_SPAN,
    WINDOW_FEATURES,
    span_text,
)
from auditflow.limits import FEATURE_WINDOWS, LONG_WINDOW_MINUTES, RECENT_LEGS
from auditflow.records import PAYMENT_FORMATS
from auditflow.typologies import SPLIT_RATIO

#: Version of the mapping below (feature -> sentence and unit).
REASONS_VERSION = "auditflow.reasons/3"


def usd(value: float) -> str:
    """Money in US dollars with its currency: ``USD 1,234.50`` (values are exact cents / 100).

    >>> usd(1234.5), usd(-3.0)
    ('USD 1,234.50', 'USD -3.00')
    """
    cents = round(value * 100)
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"USD {sign}{whole:,}.{frac:02d}"


def duration(minutes: float) -> str:
    """A duration as an investigator reads it.

    >>> [duration(m) for m in (0, 1, 45, 60, 190, 1440, 3000, 10080)]
    ['0 minutes', '1 minute', '45 minutes', '1 h', '3 h 10 min', '1 day', '2 days 2 h', '7 days']
    """
    m = max(0, round(minutes))
    if m < 60:
        return f"{m} minute{'s' if m != 1 else ''}"
    days, rest = divmod(m, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        text = f"{days} day{'s' if days != 1 else ''}"
        return text + (f" {hours} h" if hours else "")
    return f"{hours} h" + (f" {mins} min" if mins else "")


def count(value: float) -> str:
    return f"{round(value):,}"


def pct(value: float) -> str:
    """A share as a percentage: ``pct(0.456) == '46%'``."""
    return f"{round(100 * value):d}%"


def times(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") + "x"


Template = Callable[[float], str]


@dataclass(frozen=True, slots=True)
class _Flag:
    """A yes/no feature's template: ``yes`` when set (value at least 0.5), else ``no``."""

    yes: str
    no: str

    def __call__(self, value: float) -> str:
        return self.yes if value >= 0.5 else self.no


def _flag(yes: str, no: str) -> Template:
    return _Flag(yes, no)


_LONG = span_text(LONG_WINDOW_MINUTES)


def _side_templates(side: str) -> dict[str, Template]:
    who = {"snd": "sender", "rcv": "receiver"}[side]
    cp, with_, other = (("payee", "to", "received"), ("payer", "from", "sent"))[side == "rcv"]
    t: dict[str, Template] = {}
    for s, minutes in FEATURE_WINDOWS:
        last = f"in the last {span_text(minutes)}"
        t |= {
            f"out_n_{s}": lambda v, last=last: f"{who} made {count(v)} outgoing transfers {last}",
            f"in_n_{s}": lambda v, last=last: f"{who} received {count(v)} transfers {last}",
            f"out_usd_{s}": lambda v, last=last: f"{who} sent {usd(v)} {last}",
            f"in_usd_{s}": lambda v, last=last: f"{who} received {usd(v)} {last}",
            f"out_cp_{s}": lambda v, last=last: f"{who} paid {count(v)} distinct accounts {last}",
            f"in_cp_{s}": lambda v, last=last: f"{who} was paid by {count(v)} distinct accounts {last}",
            f"pass_{s}": lambda v, last=last: (
                f"{who} passed money through {last}: the smaller of what came in and went out is {pct(v)} of the larger"
            ),
            f"net_{s}": lambda v, last=last: f"{who}'s net outflow {last} is {pct(v)} of all the money it moved",
        }
    assert set(t) == {f"{f}_{s}" for s, _ in FEATURE_WINDOWS for f in WINDOW_FEATURES}
    t["burst"] = lambda v: f"{who} transacted {times(v)} its hourly average of the last {_LONG} in the last hour"
    t["gap_min"] = lambda v: (
        f"{who} had no earlier transfer in the last {_LONG}"
        if v >= LONG_WINDOW_MINUTES
        else f"{who}'s previous transfer was {duration(v)} earlier"
    )
    for s in COUNTERPARTY_WINDOWS:
        span = span_text(dict(FEATURE_WINDOWS)[s])
        t[f"cp_legs_{s}"] = lambda v, span=span: (
            f"{count(v)} transfers {with_} this {cp} in the last {span}, this one included"
        )
        t[f"new_frac_{s}"] = lambda v, span=span: (
            f"{pct(v)} of the {who}'s transfers in the last {span} were with counterparties new to it"
        )
    t["cp_new"] = _flag(
        f"{who} had not dealt with this {cp} in the {_LONG} before",
        f"{who} had dealt with this {cp} in the {_LONG} before",
    )
    t["since_opp_min"] = lambda v: (
        f"{who} had not {other} money in the last {_LONG}"
        if v >= LONG_WINDOW_MINUTES
        else f"{who} last {other} money {duration(v)} before"
    )
    t["opp_ratio"] = lambda v: (
        f"{who} had not {other} money in the last {_LONG}"
        if v < 0
        else f"this amount is {times(v)} the last amount the {who} {other}"
    )
    t["amt_vs_med"] = lambda v: (
        f"{who} had no earlier transfer to compare the amount with"
        if v < 0
        else f"this amount is {times(v)} the median of the {who}'s previous transfers"
    )
    t["same_amt"] = lambda v: f"{count(v)} of the {who}'s previous {RECENT_LEGS} transfers had this exact amount"
    t["age_min"] = lambda v: f"{who} was first seen {duration(v)} before (idle {_LONG} starts it over)"
    t["n_life"] = lambda v: f"{who} has made {count(v)} transfers since first seen"
    return {f"{side}_{k}": v for k, v in t.items()}


def _graph_templates() -> dict[str, Template]:
    t: dict[str, Template] = {}
    for s, minutes in GRAPH_WINDOWS:
        span = span_text(minutes)
        t |= {
            f"g_snd_out_cp_{s}": lambda v, span=span: f"sender paid {count(v)} distinct accounts in the {span} before",
            f"g_snd_in_cp_{s}": lambda v, span=span: (
                f"sender was paid by {count(v)} distinct accounts in the {span} before"
            ),
            f"g_rcv_in_cp_{s}": lambda v, span=span: (
                f"receiver was paid by {count(v)} distinct accounts in the {span} before"
            ),
            f"g_rcv_out_cp_{s}": lambda v, span=span: (
                f"receiver paid {count(v)} distinct accounts in the {span} before"
            ),
        }
    t |= {
        "g_rcv_new_payers_7d": lambda v: (
            f"{count(v)} of the receiver's payers in the 7 days before had not paid it in the 21 days before that"
        ),
        "g_snd_new_payees_7d": lambda v: (
            f"{count(v)} of the sender's payees in the 7 days before had not been paid by it in the 21 days before that"
        ),
        "g_cycle_len": lambda v: (
            "a self-transfer"
            if round(v) == 1
            else f"this transfer closes no cycle of up to {GRAPH_CYCLE_MAX_HOPS} hops"
            if v < 1
            else f"this transfer closes a cycle of {count(v)} hops: money that left the receiver reached the "
            "sender through time-ordered transfers in the 7 days before"
        ),
        "g_sg_width": lambda v: (
            f"scatter-gather: one source paid {count(v)} distinct accounts (the sender among them) that "
            "then paid the receiver, in the 7 days before"
        ),
        "g_gs_width": lambda v: (
            f"gather-scatter: the sender gathered from and paid out to at least {count(v)} distinct accounts "
            "each in the 7 days before"
            if v >= 2
            else "the sender shows no gather-scatter in the 7 days before"
        ),
        "g_two_hop_out": lambda v: (
            f"the sender's money reached {count(v)} distinct accounts within two hops in the 7 days before"
        ),
        "g_snd_in_usd_7d": lambda v: f"sender received {usd(v)} in the 7 days before",
        "g_fwd_share_7d": lambda v: (
            "sender received no money in the 7 days before"
            if v < 0
            else f"this transfer passes on {pct(v)} of what the sender received in the 7 days before"
        ),
        "g_rcv_in_usd_7d": lambda v: f"receiver received {usd(v)} in the 7 days before",
        "g_rcv_in_amt_cv_7d": lambda v: (
            f"the amounts the receiver was paid in the 7 days before vary by {pct(v)} (coefficient of variation)"
        ),
        "g_snd_funding_in": lambda v: (
            f"the sender received {count(v)} transfer{'s' if round(v) != 1 else ''} in the {PASS_SPAN} before "
            f"that this one passes on nearly whole ({PASS_RANGE} of the amount)"
            if v >= 1
            else f"the sender received nothing in the {PASS_SPAN} before that this transfer passes on"
        ),
        "g_up_chain_hops": lambda v: (
            f"the money can be followed {count(v)} hop{'s' if round(v) != 1 else ''} upstream through accounts "
            f"that each passed on {PASS_RANGE} of what they received within {PASS_SPAN}"
            if v >= 1
            else "the money cannot be followed upstream through a pass-through transfer"
        ),
        "g_sg_pass_width": lambda v: (
            f"scatter-gather with the money passed on: one source paid {count(v)} distinct accounts (the sender "
            f"among them) that each passed it on to the receiver within {PASS_SPAN}, in the 7 days before"
        ),
        "g_rcv_similar_payers_24h": lambda v: (
            f"receiver was paid similar amounts (within a factor {SPLIT_RATIO:g}) by {count(v)} distinct "
            "accounts in the 24 hours before"
        ),
        "g_snd_similar_payees_24h": lambda v: (
            f"sender paid similar amounts (within a factor {SPLIT_RATIO:g}) to {count(v)} distinct "
            "accounts in the 24 hours before"
        ),
        "g_rcv_new_similar_payers_24h": lambda v: (
            f"receiver was paid similar amounts (within a factor {SPLIT_RATIO:g}) by {count(v)} distinct "
            "accounts in the 24 hours before that had not paid it in the 27 days before that"
        ),
        "g_snd_new_similar_payees_24h": lambda v: (
            f"sender paid similar amounts (within a factor {SPLIT_RATIO:g}) to {count(v)} distinct "
            "accounts in the 24 hours before that it had not paid in the 27 days before that"
        ),
    }
    for side, who in (("snd", "sender"), ("rcv", "receiver")):
        for d, what in (("out", "paid"), ("in", "was paid by")):
            t[f"g_{side}_{d}_cp_spike"] = lambda v, who=who, what=what: (
                f"{who} {what} {times(v)} as many distinct accounts in the 24 hours before as its count "
                "of distinct accounts in the 28 days before per day of activity"
            )
    return t


TEMPLATES: dict[str, Template] = {
    "amount_usd": lambda v: f"amount paid: {usd(v)}",
    "cross_currency": _flag("paid and received in different currencies", "paid and received in the same currency"),
    "self_transfer": _flag("sender and receiver are the same account", "sender and receiver are different accounts"),
    "round_amount": _flag("a round amount (a multiple of 100)", "not a round amount"),
    **{
        name: _flag(f"paid by {fmt}", f"not paid by {fmt}")
        for name, fmt in zip(FORMAT_FEATURES, PAYMENT_FORMATS, strict=True)
    },
    **_side_templates("snd"),
    **_side_templates("rcv"),
    **_graph_templates(),
}
assert set(TEMPLATES) == set(MODEL_STREAM_FEATURES) | set(GRAPH_FEATURE_NAMES), "reason mapping incomplete"


def is_absence(feature: str, value: float) -> bool:
    """A yes/no feature that is off ("not paid by Cheque", "sender had dealt with this payee
    before"): true of most transfers, so never shown to a person as a reason for suspicion,
    whatever its share of the score (the exact table keeps it).

    >>> is_absence("fmt_cheque", 0.0), is_absence("fmt_cheque", 1.0), is_absence("amount_usd", 0.0)
    (True, False, False)
    """
    template = TEMPLATES.get(feature)
    return isinstance(template, _Flag) and value < 0.5


def is_flag(feature: str) -> bool:
    """A yes/no feature: its reason is a statement ("receiver had not dealt with this payer in the
    7 days before"), never "... was 1".

    >>> is_flag("fmt_cheque"), is_flag("amount_usd"), is_flag("no-such-feature")
    (True, False, False)
    """
    return isinstance(TEMPLATES.get(feature), _Flag)


def about_others(feature: str) -> bool:
    """A feature about the receiver's activity (``rcv_*``, ``g_rcv_*``): another person's data,
    left out of a notice addressed to the sender.

    >>> about_others("rcv_in_cp_7d"), about_others("g_rcv_in_usd_7d"), about_others("snd_out_n_1h")
    (True, True, False)
    """
    return feature.startswith(("rcv_", "g_rcv_"))


def reason_text(feature: str, value: float) -> str:
    """The investigator's sentence for ``feature`` at ``value``; ``KeyError`` for an unknown feature."""
    return TEMPLATES[feature](float(value))
