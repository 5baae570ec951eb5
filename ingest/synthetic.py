"""A seeded synthetic AMLworld-like data set: background payments plus eight laundering typologies.

:func:`generate` returns a :class:`Dataset` (events in file order and the answer key) and
:func:`write_dataset` writes ``<name>_Trans.csv`` and ``<name>_Patterns.txt`` through the codec in
:mod:`ingest.amlworld`, so the files read exactly like the public IBM AML ("AMLworld") files and
reading the CSV back gives the very same :class:`~auditflow.records.TransactionEvent` objects
(``source_offset`` is the CSV line, the header being line 1; ``event_id`` is
:func:`ingest.amlworld.event_id_for` of the written row and its line).

Determinism: every draw comes from one ``random.Random(seed)`` in a fixed order; nothing depends
on ``hash()`` of strings or on set iteration order, so the same arguments give byte-identical
files on every run.

The world
---------
* **Banks** have string ids with significant leading zeros and varying width (``010``,
  ``00220``, ``021174``) and Zipf-like sizes. On purpose one bank id equals another as an integer
  (``010`` and ``0010``), and a few account numbers exist at two banks: an account is
  (bank, account), never either part alone.
* **Accounts** have hex-like numbers (``8000EBD30``) and a home currency: mostly US Dollar, then
  Euro and the other AMLworld currencies, and a few Bitcoin accounts whose amounts carry six to
  eight decimals and which pay each other with the ``Bitcoin`` payment format.
* **Kinds**: persons (most), businesses (more active), and a few legitimate hubs: merchants
  (high fan-in from card purchases, fan-out to suppliers every day) and payroll processors
  (a burst of salary payments to many employees every day), so that degree alone is not a
  perfect laundering signal.
* **Look-alikes** of the typologies, legitimate: small payrolls (a business pays 4-12 employees
  the same salary every week in one burst: a fan-out), shops with 6-20 regular customers (a
  fan-in), rent between two accounts with a share paid back (a two-account cycle) and, one per
  thousand accounts, exchanges (busy hubs gathering from and paying out to 15-40 accounts a day
  each way: a gather-scatter at hub scale).
* **Background payments** (about ``tx_per_account_day`` per account and day): salaries on a
  weekly cycle, recurring payments with a fixed amount on a fixed period (rent, loans,
  subscriptions), merchants paying suppliers, and free payments: to the sender's few regular
  payees, to merchants, to random accounts, and ``Reinvestment`` self-transfers. Amounts are
  lognormal in US dollars, converted to the payer's home currency. Hours follow a daily rhythm
  (quiet nights, busy office hours). Nine in ten counterparties share the payer's currency.
  Payment format shares come out near Cheque 30%, Credit Card 19%, ACH 16%, Cash 16%,
  Reinvestment 9%, Wire 9%, Bitcoin 1%.
* **Cross-currency** (about 5% of rows): when payer and payee have different home currencies,
  a third of their transfers (and every salary) are received in the payee's currency. The
  received amount is the paid amount converted exactly with the ratio of
  :data:`auditflow.money.USD_RATES` and rounded half-even to the receiving currency's scale
  (:func:`convert`).

Laundering
----------
The number of laundering rows is ``laundering_rate`` of all rows (``L = rate * N / (1 - rate)``
for ``N`` background rows). About 15% of that budget (at least two rows) are lone laundering
transfers that belong to no attempt; the rest are attempts shaped as in AMLworld, each row
``Is Laundering = 1``:

=================  ============================================================================
FAN-OUT            one source pays 4-16 accounts (qualifier ``Max d-degree Fan-Out``)
FAN-IN             4-16 accounts pay one sink (``Max d-degree Fan-In``)
SCATTER-GATHER     source -> k intermediates (2-8) -> sink, every gather after the scatter
GATHER-SCATTER     k sources -> hub -> k' sinks (2-8 each), the scatter after the gather
CYCLE              a directed cycle of 3-8 hops in time order (``Max h hops``)
RANDOM             a random walk of 3-8 hops that never comes back to an account it left
                   (``Max h hops``): a walk that did would carry a cycle
BIPARTITE          a set A (2-5) pays a set B (2-5): every payer pays every payee once
STACK              two bipartite layers chained, A -> B then B -> C, each complete
=================  ============================================================================

Rows of an attempt are strictly increasing in time, spaced minutes to a day apart; amounts
shrink by 0.5-4% per hop along chains (fees), fans split or gather a lognormal sum. Attempts
mostly use ordinary accounts that also have background activity (one in ten accounts is a fresh
mule with no other activity) and mostly pay by ACH. With ``min_each_typology`` (the default)
every typology appears at least once even when the budget is smaller than the eight smallest
shapes (31 rows): tiny data sets then carry more laundering than ``laundering_rate``.

>>> ds = generate(accounts=300, days=1, seed=1)
>>> sorted({a.typology for a in ds.attempts}) == sorted(TYPOLOGIES)
True
>>> [ev.source_offset for ev in ds.events[:3]]
[2, 3, 4]
>>> generate(accounts=300, days=1, seed=1).events == ds.events
True
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal
from itertools import accumulate
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from auditflow.limits import MINUTES_PER_DAY
from auditflow.money import CURRENCIES, USD_RATES, Money, format_amount
from auditflow.records import AccountRef, TransactionEvent
from ingest.amlworld import (
    TYPOLOGIES,
    LaunderingAttempt,
    event_id_for,
    write_patterns,
    write_transactions,
)

__all__ = ["PROFILES", "Account", "Dataset", "LaunderingProfile", "Planted", "convert", "generate", "write_dataset"]

BITCOIN = "Bitcoin"

#: Home currency shares of fiat accounts (Bitcoin accounts are drawn separately).
CURRENCY_SHARES: tuple[tuple[str, float], ...] = (
    ("US Dollar", 44),
    ("Euro", 19),
    ("Yuan", 5),
    ("Yen", 4),
    ("Rupee", 4),
    ("UK Pound", 4),
    ("Canadian Dollar", 3),
    ("Australian Dollar", 3),
    ("Swiss Franc", 3),
    ("Mexican Peso", 3),
    ("Brazil Real", 2),
    ("Ruble", 2),
    ("Shekel", 2),
    ("Saudi Riyal", 2),
)
BITCOIN_SHARE = 0.015

#: Relative activity by hour of day: quiet nights, busy office hours.
HOUR_WEIGHTS = (3, 2, 1, 1, 1, 2, 4, 7, 10, 12, 12, 11, 10, 10, 11, 11, 10, 9, 8, 7, 6, 5, 4, 3)

P2P_FORMATS = (("Cheque", 40), ("ACH", 22), ("Cash", 20), ("Wire", 12), ("Credit Card", 6))
PURCHASE_FORMATS = (("Credit Card", 60), ("Cash", 20), ("Cheque", 20))
SALARY_FORMATS = (("ACH", 70), ("Wire", 15), ("Cheque", 15))
RECURRING_FORMATS = (("ACH", 50), ("Cheque", 35), ("Wire", 15))
LAUNDERING_FORMATS = (("ACH", 55), ("Wire", 15), ("Cheque", 12), ("Credit Card", 10), ("Cash", 8))

#: Relative frequency of each typology among the attempts beyond the first of each.
TYPOLOGY_WEIGHTS = {
    "FAN-OUT": 3,
    "FAN-IN": 3,
    "GATHER-SCATTER": 2,
    "SCATTER-GATHER": 2,
    "CYCLE": 2,
    "RANDOM": 2,
    "BIPARTITE": 2,
    "STACK": 1,
}
#: Rows of each typology's smallest shape.
MIN_ROWS = {
    "FAN-OUT": 4,
    "FAN-IN": 4,
    "GATHER-SCATTER": 4,
    "SCATTER-GATHER": 4,
    "CYCLE": 3,
    "RANDOM": 3,
    "BIPARTITE": 4,
    "STACK": 8,
}
LONE_SHARE = 0.15  # of the laundering budget, as transfers in no attempt
MIN_LONE = 2
SAME_CURRENCY_SHARE = 0.9  # of counterparties chosen in the payer's own currency
CROSS_CURRENCY_SHARE = 0.3  # of transfers between currencies received in the payee's
MULE_SHARE = 0.10  # of laundering participants that are fresh accounts with no background

_CTX = Context(prec=60)


@dataclass(frozen=True, slots=True)
class LaunderingProfile:
    """How attempts are planted: shape sizes (inclusive ranges), the median gap between an
    attempt's transfers (minutes: the default spreads an attempt over hours to a day or two,
    ``slow`` over days to weeks) and the median amount moved (USD). Models are tested on more than
    one profile, so that nothing they learn depends on one way of planting."""

    fan_degree: tuple[int, int] = (4, 16)
    hops: tuple[int, int] = (3, 8)
    width: tuple[int, int] = (2, 8)
    gap_minutes: float = 90.0
    amount_usd: float = 9000.0
    lone_usd: float = 6000.0


#: Named profiles: ``default`` (the historical draws, byte for byte) and ``slow``: smaller fans,
#: longer chains, patterns spread over days to weeks, larger amounts.
PROFILES: dict[str, LaunderingProfile] = {
    "default": LaunderingProfile(),
    "slow": LaunderingProfile(fan_degree=(3, 9), hops=(4, 10), width=(2, 5), gap_minutes=1440.0,
                              amount_usd=40_000.0, lone_usd=25_000.0),
}


def convert(money: Money, currency: str) -> Money:
    """``money`` in ``currency`` at the USD_RATES ratio, rounded half-even to its scale.

    >>> convert(Money("Euro", 100000), "US Dollar")
    Money(currency='US Dollar', units=117000)
    >>> format_amount(convert(Money("US Dollar", 100), "Bitcoin"))
    '0.00008696'
    """
    if money.currency == currency:
        return money
    value = _CTX.divide(_CTX.multiply(money.to_decimal(), USD_RATES[money.currency]), USD_RATES[currency])
    units = _CTX.scaleb(value, CURRENCIES[currency][1]).quantize(Decimal(1), ROUND_HALF_EVEN, _CTX)
    return Money(currency, int(units))


@dataclass(frozen=True, slots=True)
class Account:
    """A synthetic account: where it is, its home currency and what kind of holder it has."""

    ref: AccountRef
    currency: str
    kind: str  # "person", "business", "merchant", "payroll", "exchange" or "mule"


@dataclass(slots=True)
class Dataset:
    """Events in file order, the answer key, and what made them."""

    events: list[TransactionEvent]
    attempts: list[LaunderingAttempt]
    accounts: list[Account] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    lone_laundering: int = 0  # laundering rows in no attempt
    lookalike_accounts: list[AccountRef] = field(default_factory=list)  # legitimate, shaped like typologies

    @property
    def laundering_count(self) -> int:
        return sum(1 for ev in self.events if ev.is_laundering)

    @property
    def laundering_rate(self) -> float:
        return self.laundering_count / len(self.events) if self.events else 0.0

    def lookalikes(self) -> list[AccountRef]:
        """The legitimate accounts whose activity looks like a typology: small payrolls, shops,
        both sides of every rent, exchanges, merchants and payroll processors (sorted)."""
        return sorted({*self.lookalike_accounts, *self.hubs()}, key=lambda r: r.node_id)

    def hubs(self) -> list[AccountRef]:
        """The legitimate high-degree accounts (merchants, payroll processors, exchanges)."""
        return [a.ref for a in self.accounts if a.kind in ("merchant", "payroll", "exchange")]

    def planted(self, start: datetime) -> Planted:
        """The answer key's attempts that begin at or after ``start``, as typology scoring takes
        them: (typology name, event ids, member accounts sorted). Its ``unscored`` lists the
        attempts that began before ``start`` and go on after it, the same way: a detector looking
        from ``start`` on sees only part of them (what it finds there is neither right nor wrong;
        :func:`evidence_graph.evaluation.score_typologies` leaves it out)."""
        from auditflow.typologies import from_amlworld_label
        from ingest.amlworld import format_row, row_key

        by_key = {row_key(format_row(e)): e for e in self.events if e.is_laundering}
        out, before = Planted(), []
        for a in self.attempts:
            evs = [by_key[row_key(r)] for r in a.rows]
            members = tuple(sorted({x for e in evs for x in (e.sender.node_id, e.receiver.node_id)}))
            inst = (from_amlworld_label(a.typology), frozenset(e.event_id for e in evs), members)
            if evs[0].timestamp >= start:
                out.append(inst)
            elif evs[-1].timestamp >= start:
                before.append(inst)
        out.unscored = before
        return out


class Planted(list):
    """Answer-key instances to score (a list), with ``unscored``: those only partly in view."""

    unscored: list[tuple[str, frozenset[str], tuple[str, ...]]]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.unscored = []


def _weighted(pairs: tuple[tuple[str, float], ...]) -> tuple[tuple[str, ...], list[float]]:
    return tuple(p[0] for p in pairs), list(accumulate(p[1] for p in pairs))


class _Builder:
    """Holds the generator's state; the public entry point is :func:`generate`."""

    def __init__(self, accounts: int, days: int, seed: int, density: float,
                 profile: LaunderingProfile = LaunderingProfile()) -> None:
        self.profile = profile
        self.rng = random.Random(seed)
        self.n_accounts = accounts
        self.days = days
        self.window = days * MINUTES_PER_DAY
        self.lo, self.hi = 0, self.window  # where laundering goes: [lo, hi) minutes (one phase)
        self.density = density
        self.accounts: list[Account] = []
        self.favorites: list[list[int]] = []
        # transfers: [minute, sender, receiver, paid, received, format, attempt (-1: none, -2: lone)]
        self.txs: list[tuple[int, int, int, Money, Money, str, int]] = []
        self.attempt_meta: list[tuple[str, str]] = []  # (typology, qualifier)
        self.lookalike_idx: list[int] = []
        self._hour_cum = list(accumulate(HOUR_WEIGHTS))
        self._cur_names, self._cur_cum = _weighted(CURRENCY_SHARES)
        self._fmt = {
            name: _weighted(pairs)
            for name, pairs in (
                ("p2p", P2P_FORMATS),
                ("purchase", PURCHASE_FORMATS),
                ("salary", SALARY_FORMATS),
                ("recurring", RECURRING_FORMATS),
                ("laundering", LAUNDERING_FORMATS),
            )
        }
        self._acct_seen: set[tuple[str, str]] = set()  # membership only, never iterated
        self._numbers: list[str] = []

    # ------------------------------------------------------------------ small draws

    def pick(self, names: tuple[str, ...], cum: list[float]) -> str:
        return names[bisect.bisect_right(cum, self.rng.random() * cum[-1])]

    def fmt(self, kind: str) -> str:
        return self.pick(*self._fmt[kind])

    def minute_of_day(self) -> int:
        cum = self._hour_cum
        hour = bisect.bisect_right(cum, self.rng.random() * cum[-1])
        return hour * 60 + self.rng.randrange(60)

    def usd_money(self, usd: float, currency: str) -> Money:
        """A lognormal US-dollar draw as exact money in ``currency`` (Bitcoin: 6 or 8 decimals)."""
        value = usd / float(USD_RATES[currency])
        if currency == BITCOIN:
            decimals = 6 if self.rng.random() < 0.7 else 8
            return Money(currency, max(1, round(value * 10**decimals)) * 10 ** (8 - decimals))
        return Money(currency, max(1, round(value * 100)))

    def lognormal(self, median: float, sigma: float) -> float:
        return min(5e7, max(0.5, self.rng.lognormvariate(math.log(median), sigma)))

    def amounts(self, sender: int, receiver: int, usd: float, always_convert: bool = False) -> tuple[Money, Money]:
        """(paid, received): paid in the sender's currency, received maybe in the receiver's."""
        paid_cur = self.accounts[sender].currency
        recv_cur = self.accounts[receiver].currency
        paid = self.usd_money(usd, paid_cur)
        if recv_cur != paid_cur and (always_convert or self.rng.random() < CROSS_CURRENCY_SHARE):
            return paid, convert(paid, recv_cur)
        return paid, paid

    # ------------------------------------------------------------------ accounts

    def bank_ids(self, n: int) -> list[str]:
        rng, out, seen = self.rng, [], set()
        while len(out) < n:
            width = rng.choices((2, 3, 4, 5), weights=(2, 4, 6, 6))[0]
            core = str(rng.randrange(10 ** (width - 1), 10**width))
            bank = ("00" if rng.random() < 0.25 else "0") + core
            if bank not in seen:
                seen.add(bank)
                out.append(bank)
        if n >= 4:  # the integer trap: '010' and '0010' are different banks
            twin = "0" + out[0]
            if twin not in seen:
                out[-1] = twin
        return out

    def account_number(self) -> str:
        rng = self.rng
        last = "0" if rng.random() < 0.85 else f"{rng.getrandbits(4):X}"
        return f"8{rng.getrandbits(28):07X}{last}"

    def new_account(self, bank: str, currency: str, kind: str) -> int:
        rng = self.rng
        while True:
            if self._numbers and rng.random() < 0.005:  # same number at another bank
                number = self._numbers[rng.randrange(len(self._numbers))]
            else:
                number = self.account_number()
            if (bank, number) not in self._acct_seen:
                break
        self._acct_seen.add((bank, number))
        self._numbers.append(number)
        self.accounts.append(Account(AccountRef(bank, number), currency, kind))
        self.favorites.append([])
        return len(self.accounts) - 1

    def make_accounts(self) -> None:
        rng, n = self.rng, self.n_accounts
        n_banks = max(4, round(n / 20))
        self.banks = self.bank_ids(n_banks)
        self._bank_cum = list(accumulate(1 / (i + 1) ** 0.8 for i in range(n_banks)))
        n_merchants = max(2, n // 400)
        n_payroll = max(1, n // 500)
        n_bitcoin = max(2, round(n * BITCOIN_SHARE)) if n >= 40 else 0
        n_business = max(2, round(n * 0.04))
        n_exchange = n // 1000
        kinds = ["merchant"] * n_merchants + ["payroll"] * n_payroll + ["business"] * n_business
        kinds += ["exchange"] * n_exchange
        kinds += ["bitcoin"] * n_bitcoin
        kinds += ["person"] * max(0, n - len(kinds))
        for kind in kinds:
            bank = self.random_bank()
            if kind == "bitcoin":
                self.new_account(bank, BITCOIN, "person")
            else:
                self.new_account(bank, self.pick(self._cur_names, self._cur_cum), kind)
        self.idx_by_kind: dict[str, list[int]] = {
            k: [] for k in ("person", "business", "merchant", "payroll", "exchange")}
        self.bitcoin: list[int] = []
        for i, a in enumerate(self.accounts):
            (self.bitcoin if a.currency == BITCOIN else self.idx_by_kind[a.kind]).append(i)
        self.ordinary = self.idx_by_kind["person"] + self.idx_by_kind["business"]  # fiat, not hubs
        self.ordinary.sort()
        if not self.ordinary:
            raise ValueError("too few accounts for a synthetic data set")
        # people mostly pay people in their own currency; businesses alike
        self.by_currency: dict[str, list[int]] = {}
        for i in self.ordinary:
            self.by_currency.setdefault(self.accounts[i].currency, []).append(i)
        # regular payees: a few accounts each, half of them at the same bank when possible
        by_bank: dict[tuple[str, str], list[int]] = {}
        for i in self.ordinary:
            by_bank.setdefault((self.accounts[i].ref.bank, self.accounts[i].currency), []).append(i)
        for i in self.ordinary:
            same = by_bank[(self.accounts[i].ref.bank, self.accounts[i].currency)]
            for _ in range(rng.randint(2, 6)):
                pool = same if rng.random() < 0.5 and len(same) > 1 else self.counterparty_pool(i)
                j = pool[rng.randrange(len(pool))]
                if j != i and j not in self.favorites[i]:
                    self.favorites[i].append(j)
        for i in self.bitcoin:
            for _ in range(rng.randint(1, 3)):
                j = self.bitcoin[rng.randrange(len(self.bitcoin))]
                if j != i and j not in self.favorites[i]:
                    self.favorites[i].append(j)

    def counterparty_pool(self, i: int) -> list[int]:
        """Ordinary accounts to pay: mostly those sharing ``i``'s currency."""
        same = self.by_currency.get(self.accounts[i].currency, [])
        return same if len(same) > 1 and self.rng.random() < SAME_CURRENCY_SHARE else self.ordinary

    def random_bank(self) -> str:
        cum = self._bank_cum
        return self.banks[bisect.bisect_right(cum, self.rng.random() * cum[-1])]

    # ------------------------------------------------------------------ background

    def add(self, minute: int, s: int, r: int, paid: Money, received: Money, fmt: str, attempt: int = -1) -> None:
        self.txs.append((min(max(minute, 0), self.window - 1), s, r, paid, received, fmt, attempt))

    def structured(self) -> list[tuple[int, int, int, Money, Money, str]]:
        """Salaries, recurring payments and supplier payments: fixed amounts on fixed cycles."""
        rng, out = self.rng, []
        persons, businesses = self.idx_by_kind["person"], self.idx_by_kind["business"]
        merchants, payrolls = self.idx_by_kind["merchant"], self.idx_by_kind["payroll"]
        employers = payrolls + businesses
        pay_minute = {e: rng.randrange(0, 6 * 60) for e in employers}  # payroll runs at night
        for i in persons:
            if rng.random() >= 0.55 or not employers:
                continue
            cur = self.accounts[i].currency
            pool = payrolls if payrolls and rng.random() < 0.75 else businesses or payrolls
            local = [e for e in pool if self.accounts[e].currency == cur]
            if local and rng.random() < SAME_CURRENCY_SHARE:
                pool = local
            employer = pool[rng.randrange(len(pool))]
            paid, received = self.amounts(employer, i, self.lognormal(1300, 0.45), always_convert=True)
            fmt, phase = self.fmt("salary"), rng.randrange(7)
            for day in range(self.days):
                if (day + phase) % 7 == 0:
                    minute = day * MINUTES_PER_DAY + pay_minute[employer] + rng.randrange(90)
                    out.append((minute, employer, i, paid, received, fmt))
        for p in payrolls:  # client businesses fund the payroll processor
            for _ in range(rng.randint(3, 10)) if businesses else ():
                j = businesses[rng.randrange(len(businesses))]
                paid, received = self.amounts(j, p, self.lognormal(20000, 0.8))
                fmt, period, at = rng.choice(("ACH", "Wire")), rng.choice((1, 2, 3)), rng.randrange(6 * 60, 20 * 60)
                phase = rng.randrange(period)
                for day in range(self.days):
                    if (day + phase) % period == 0:
                        out.append((day * MINUTES_PER_DAY + at + rng.randrange(30), j, p, paid, received, fmt))
        payees = businesses + merchants
        for i in self.ordinary:
            if rng.random() >= 0.5:
                continue
            for _ in range(rng.randint(1, 2)):
                r = rng.random()
                pool = payees if r < 0.5 and payees else self.counterparty_pool(i)
                j = pool[rng.randrange(len(pool))]
                if j == i:
                    continue
                paid, received = self.amounts(i, j, self.lognormal(200, 1.0))
                fmt = self.fmt("recurring")
                period = rng.choice((1, 2, 3, 7, 7, 14, 30))
                phase, at = rng.randrange(period), self.minute_of_day()
                for day in range(self.days):
                    if (day + phase) % period == 0:
                        out.append((day * MINUTES_PER_DAY + at + rng.randrange(10), i, j, paid, received, fmt))
        out += self.lookalikes()
        for m in merchants:
            for _ in range(rng.randint(8, 24)):
                j = self.ordinary[rng.randrange(len(self.ordinary))]
                paid, received = self.amounts(m, j, self.lognormal(2500, 0.8))
                fmt, period = self.fmt("recurring"), rng.choice((1, 1, 2, 3))
                phase, at = rng.randrange(period), rng.randrange(8 * 60, 18 * 60)
                for day in range(self.days):
                    if (day + phase) % period == 0:
                        out.append((day * MINUTES_PER_DAY + at + rng.randrange(30), m, j, paid, received, fmt))
        return out

    def lookalikes(self) -> list[tuple[int, int, int, Money, Money, str]]:
        """Legitimate activity shaped like the typologies: small payrolls (a business pays 4-12
        employees the same salary every week in one burst: a fan-out), shops (6-20 regular
        customers buying several times a week: a fan-in), rent between two accounts (a tenant pays
        the rent, the landlord pays a share back: a two-account cycle) and exchanges (busy hubs
        gathering from and paying out to many accounts every day)."""
        rng, out = self.rng, []
        persons, businesses = self.idx_by_kind["person"], self.idx_by_kind["business"]
        if not persons:
            return out
        week = 7
        self.lookalike_idx.extend(businesses)
        for k, b in enumerate(businesses):
            if k % 2 == 0:  # a small payroll
                at, phase = rng.randrange(0, 5 * 60), rng.randrange(week)
                staff = [persons[rng.randrange(len(persons))] for _ in range(rng.randint(4, 12))]
                pay = {i: self.amounts(b, i, self.lognormal(1100, 0.3), always_convert=True) for i in staff if i != b}
                fmt = self.fmt("salary")
                for day in range(self.days):
                    if (day + phase) % week == 0:
                        for i, (paid, received) in sorted(pay.items()):
                            out.append((day * MINUTES_PER_DAY + at + rng.randrange(60), b, i, paid, received, fmt))
            else:  # a shop and its regular customers
                for _ in range(rng.randint(6, 20)):
                    c = persons[rng.randrange(len(persons))]
                    if c == b:
                        continue
                    per_week = rng.randint(1, 3)
                    for day in range(self.days):
                        if rng.random() < per_week / week:
                            paid, received = self.amounts(c, b, self.lognormal(45, 0.5))
                            out.append((day * MINUTES_PER_DAY + self.minute_of_day(), c, b, paid, received,
                                        self.fmt("purchase")))
        for _ in range(max(1, len(persons) // 40)):  # rent, and a share of the bills paid back
            tenant, landlord = persons[rng.randrange(len(persons))], persons[rng.randrange(len(persons))]
            if tenant == landlord:
                continue
            self.lookalike_idx += [tenant, landlord]
            rent = self.amounts(tenant, landlord, self.lognormal(900, 0.4))
            back = self.amounts(landlord, tenant, self.lognormal(120, 0.5))
            phase, at = rng.randrange(week), self.minute_of_day()
            for day in range(self.days):
                if (day + phase) % week == 0:
                    out.append((day * MINUTES_PER_DAY + at, tenant, landlord, *rent, "ACH"))
                if (day + phase) % week == 2:
                    out.append((day * MINUTES_PER_DAY + at, landlord, tenant, *back, "ACH"))
        for x in self.idx_by_kind["exchange"]:  # a busy hub: many in, many out, every day
            for day in range(self.days):
                for _ in range(rng.randint(15, 40)):
                    c = self.ordinary[rng.randrange(len(self.ordinary))]
                    paid, received = self.amounts(c, x, self.lognormal(700, 1.0))
                    out.append((day * MINUTES_PER_DAY + self.minute_of_day(), c, x, paid, received, "Wire"))
                for _ in range(rng.randint(15, 40)):
                    c = self.ordinary[rng.randrange(len(self.ordinary))]
                    paid, received = self.amounts(x, c, self.lognormal(700, 1.0))
                    out.append((day * MINUTES_PER_DAY + self.minute_of_day(), x, c, paid, received, "Wire"))
        return out

    def background(self, target: int) -> None:
        rng = self.rng
        fixed = self.structured()
        if len(fixed) > 0.5 * target:  # thin the cycles when the density asked for is low
            keep = 0.5 * target / len(fixed)
            fixed = [t for t in fixed if rng.random() < keep]
        for t in fixed:
            self.add(*t)
        senders = self.ordinary + self.bitcoin + self.idx_by_kind["merchant"]
        weights = []
        for i in senders:
            kind = self.accounts[i].kind
            w = rng.lognormvariate(0.0, 0.7)
            weights.append(w * (4.0 if kind == "business" else 0.5 if kind == "merchant" else 1.0))
        sender_cum = list(accumulate(weights))
        merchants = self.idx_by_kind["merchant"]
        merchant_cum = list(accumulate(1 / (k + 1) for k in range(len(merchants))))
        bitcoin = self.bitcoin
        local_merchants: dict[str, list[int]] = {}
        for m in merchants:
            local_merchants.setdefault(self.accounts[m].currency, []).append(m)
        remaining = target - len(fixed)
        while remaining > 0:
            s = senders[bisect.bisect_right(sender_cum, rng.random() * sender_cum[-1])]
            minute = rng.randrange(self.days) * MINUTES_PER_DAY + self.minute_of_day()
            r = rng.random()
            if r < 0.09:  # reinvestment: a self-transfer
                paid = self.usd_money(self.lognormal(1500, 1.4), self.accounts[s].currency)
                self.add(minute, s, s, paid, paid, "Reinvestment")
                remaining -= 1
                continue
            if self.accounts[s].currency == BITCOIN:
                fav = self.favorites[s]
                j = fav[rng.randrange(len(fav))] if fav and r < 0.6 else bitcoin[rng.randrange(len(bitcoin))]
                if j == s:
                    continue
                paid = self.usd_money(self.lognormal(500, 1.5), BITCOIN)
                self.add(minute, s, j, paid, paid, "Bitcoin")
                remaining -= 1
                continue
            fav = self.favorites[s]
            if r < 0.40 and fav:
                j, usd, kind = fav[rng.randrange(len(fav))], self.lognormal(300, 1.2), "p2p"
            elif r < 0.70 and merchants and self.accounts[s].kind != "merchant":
                local = local_merchants.get(self.accounts[s].currency)
                if local and rng.random() < SAME_CURRENCY_SHARE:
                    j = local[rng.randrange(len(local))]
                else:
                    j = merchants[bisect.bisect_right(merchant_cum, rng.random() * merchant_cum[-1])]
                usd, kind = self.lognormal(60, 1.0), "purchase"
            else:
                pool = self.counterparty_pool(s)
                j, usd, kind = pool[rng.randrange(len(pool))], self.lognormal(400, 1.4), "p2p"
            if j == s:
                continue
            paid, received = self.amounts(s, j, usd)
            fmt = "Wire" if paid.currency != received.currency and rng.random() < 0.3 else self.fmt(kind)
            self.add(minute, s, j, paid, received, fmt)
            remaining -= 1

    # ------------------------------------------------------------------ laundering

    def shape(self, typology: str, cap: int) -> dict[str, int]:
        """Draw a shape's size, shrunk towards the smallest shape to stay within ``cap`` rows."""
        rng, pf = self.rng, self.profile
        if typology in ("FAN-OUT", "FAN-IN"):
            return {"d": max(4, min(rng.randint(*pf.fan_degree), cap))}
        if typology in ("CYCLE", "RANDOM"):
            return {"h": max(3, min(rng.randint(*pf.hops), cap))}
        if typology == "SCATTER-GATHER":
            return {"k": max(2, min(rng.randint(*pf.width), cap // 2))}
        if typology == "GATHER-SCATTER":
            k_in, k_out = rng.randint(*pf.width), rng.randint(*pf.width)
            while k_in + k_out > cap and (k_in > 2 or k_out > 2):
                if k_in >= k_out:
                    k_in -= 1
                else:
                    k_out -= 1
            return {"k_in": k_in, "k_out": k_out}
        if typology == "BIPARTITE":  # complete, as AMLSim/AMLworld plant it: a * b rows
            a, b = rng.randint(2, 5), rng.randint(2, 5)
            while a * b > cap and (a > 2 or b > 2):
                a, b = (a - 1, b) if a >= b else (a, b - 1)
            return {"a": a, "b": b, "e": a * b}
        if typology == "STACK":  # two complete layers: a * b + b * c rows
            a, b, c = rng.randint(2, 4), rng.randint(2, 4), rng.randint(2, 4)
            while a * b + b * c > cap and (a > 2 or b > 2 or c > 2):
                if b > 2 and b >= a and b >= c:
                    b -= 1
                elif a >= c and a > 2:
                    a -= 1
                else:
                    c -= 1
            return {"a": a, "b": b, "c": c, "e1": a * b, "e2": b * c}
        raise ValueError(f"unknown typology {typology!r}")

    @staticmethod
    def shape_rows(typology: str, p: dict[str, int]) -> int:
        if typology in ("FAN-OUT", "FAN-IN"):
            return p["d"]
        if typology in ("CYCLE", "RANDOM"):
            return p["h"]
        if typology == "SCATTER-GATHER":
            return 2 * p["k"]
        if typology == "GATHER-SCATTER":
            return p["k_in"] + p["k_out"]
        if typology == "BIPARTITE":
            return p["e"]
        return p["e1"] + p["e2"]

    def participants(self, n: int) -> list[int]:
        """``n`` distinct fiat accounts: mostly ordinary ones, a few fresh mules."""
        rng, out = self.rng, []
        while len(out) < n:
            if rng.random() < MULE_SHARE:
                out.append(self.new_account(self.random_bank(), self.pick(self._cur_names, self._cur_cum), "mule"))
                continue
            i = self.ordinary[rng.randrange(len(self.ordinary))]
            if i not in out:
                out.append(i)
        return out

    def bipartite_edges(self, a: int, b: int, e: int) -> list[tuple[int, int]]:
        """``e`` distinct edges from range(a) to range(b) touching every node on both sides."""
        edges = [(i % a, i % b) for i in range(max(a, b))]
        rest = [(x, y) for x in range(a) for y in range(b) if (x, y) not in edges]
        self.rng.shuffle(rest)
        return edges + rest[: e - len(edges)]

    def fee(self) -> float:
        return 1.0 - self.rng.uniform(0.005, 0.04)

    def split(self, total: float, n: int) -> list[float]:
        w = [self.rng.uniform(0.6, 1.4) for _ in range(n)]
        s = sum(w)
        return [total * x / s for x in w]

    def attempt_edges(self, typology: str, p: dict[str, int]) -> tuple[list[tuple[int, int, float]], list[int]]:
        """Edges (local sender, local receiver, USD) in time order, and how many accounts."""
        rng = self.rng
        base = self.lognormal(self.profile.amount_usd, 0.9)
        edges: list[tuple[int, int, float]] = []
        if typology == "FAN-OUT":
            d = p["d"]
            edges = [(0, 1 + i, x) for i, x in enumerate(self.split(base * self.fee(), d))]
            return edges, [d + 1]
        if typology == "FAN-IN":
            d = p["d"]
            edges = [(i, d, x) for i, x in enumerate(self.split(base, d))]
            return edges, [d + 1]
        if typology == "CYCLE":
            h, amount = p["h"], base
            for i in range(h):
                edges.append((i, (i + 1) % h, amount))
                amount *= self.fee()
            return edges, [h]
        if typology == "RANDOM":  # a walk over h + 1 accounts, none visited twice
            h, amount = p["h"], base
            for i in range(h):
                edges.append((i, i + 1, amount))
                amount *= self.fee()
            return edges, [h + 1]
        if typology == "SCATTER-GATHER":
            k = p["k"]  # 0 = source, 1..k intermediates, k + 1 = sink
            parts = self.split(base, k)
            edges = [(0, 1 + i, x) for i, x in enumerate(parts)]
            order = list(range(k))
            rng.shuffle(order)
            edges += [(1 + i, k + 1, parts[i] * self.fee()) for i in order]
            return edges, [k + 2]
        if typology == "GATHER-SCATTER":
            k_in, k_out = p["k_in"], p["k_out"]  # sources, hub = k_in, sinks after it
            ins = self.split(base, k_in)
            edges = [(i, k_in, x) for i, x in enumerate(ins)]
            edges += [(k_in, k_in + 1 + j, x) for j, x in enumerate(self.split(sum(ins) * self.fee(), k_out))]
            return edges, [k_in + 1 + k_out]
        if typology == "BIPARTITE":
            a, b = p["a"], p["b"]
            pairs = self.bipartite_edges(a, b, p["e"])
            rng.shuffle(pairs)
            per_source = {x: base / a for x in range(a)}
            counts = [sum(1 for x, _ in pairs if x == s) for s in range(a)]
            edges = [(x, a + y, per_source[x] / counts[x] * rng.uniform(0.8, 1.2)) for x, y in pairs]
            return edges, [a + b]
        if typology == "STACK":
            a, b, c = p["a"], p["b"], p["c"]
            layer1 = self.bipartite_edges(a, b, p["e1"])
            layer2 = self.bipartite_edges(b, c, p["e2"])
            rng.shuffle(layer1)
            rng.shuffle(layer2)
            out1 = [sum(1 for x, _ in layer1 if x == s) for s in range(a)]
            got = [0.0] * b
            for x, y in layer1:
                usd = base / a / out1[x] * rng.uniform(0.8, 1.2)
                edges.append((x, a + y, usd))
                got[y] += usd
            out2 = [sum(1 for x, _ in layer2 if x == s) for s in range(b)]
            for x, y in layer2:
                edges.append((a + x, a + b + y, got[x] * self.fee() / out2[x]))
            return edges, [a + b + c]
        raise ValueError(f"unknown typology {typology!r}")

    def schedule(self, n: int) -> list[int]:
        """``n`` strictly increasing minutes inside the window, spaced minutes to a day apart."""
        rng = self.rng
        gaps = [max(1, round(rng.lognormvariate(math.log(self.profile.gap_minutes), 1.1))) for _ in range(n - 1)]
        width = self.hi - self.lo
        span, room = sum(gaps), max(n, int(width * 0.9))
        if span > room - 1:
            gaps = [max(1, g * (room - n) // span) for g in gaps]
            span = sum(gaps)
        t = self.lo + rng.randrange(max(1, width - span))
        times = [t]
        for g in gaps:
            t += g
            times.append(t)
        return times

    def add_attempt(self, typology: str, p: dict[str, int]) -> None:
        rng = self.rng
        edges, (n_accounts,) = self.attempt_edges(typology, p)
        who = self.participants(n_accounts)
        dominant = self.fmt("laundering")
        attempt = len(self.attempt_meta)
        for (x, y, usd), minute in zip(edges, self.schedule(len(edges)), strict=True):
            s, r = who[x], who[y]
            paid, received = self.amounts(s, r, usd)
            fmt = dominant if rng.random() < 0.8 else self.fmt("laundering")
            self.add(minute, s, r, paid, received, fmt, attempt)
        if typology in ("FAN-OUT", "FAN-IN"):
            qualifier = f"Max {p['d']}-degree {'Fan-Out' if typology == 'FAN-OUT' else 'Fan-In'}"
        elif typology in ("CYCLE", "RANDOM"):
            qualifier = f"Max {p['h']} hops"
        else:
            qualifier = ""
        self.attempt_meta.append((typology, qualifier))

    def laundering(self, budget: int, min_each: bool) -> int:
        """Attempts and lone transfers for ``budget`` rows; returns the number of lone rows."""
        rng = self.rng
        lone_target = max(MIN_LONE, round(budget * LONE_SHARE))
        if not min_each:
            lone_target = min(budget, lone_target)
        attempt_budget = max(0, budget - lone_target)
        used = 0
        if min_each:
            per = attempt_budget // len(TYPOLOGIES)
            for t in TYPOLOGIES:
                p = self.shape(t, per)
                self.add_attempt(t, p)
                used += self.shape_rows(t, p)
        while True:
            cap = attempt_budget - used
            fits = [t for t in TYPOLOGIES if MIN_ROWS[t] <= cap]
            if not fits:
                break
            t = rng.choices(fits, weights=[TYPOLOGY_WEIGHTS[x] for x in fits])[0]
            p = self.shape(t, cap)
            self.add_attempt(t, p)
            used += self.shape_rows(t, p)
        lone = max(lone_target, budget - used)
        for _ in range(lone):
            s, r = self.participants(2)
            paid, received = self.amounts(s, r, self.lognormal(self.profile.lone_usd, 1.0))
            self.add(self.lo + rng.randrange(self.hi - self.lo), s, r, paid, received, self.fmt("laundering"), -2)
        return lone

    # ------------------------------------------------------------------ assembly

    def assemble(self, start: datetime, cuts: Sequence[int] = ()) -> list[tuple[list[TransactionEvent],
                                                                              list[LaunderingAttempt]]]:
        """Events in file order and the answer key, one file per phase: ``cuts`` are the minutes
        where a phase ends and the next begins (each file's lines start at 2)."""
        rng = self.rng
        keyed = sorted((tx[0], rng.random(), seq) for seq, tx in enumerate(self.txs))
        bounds = [0, *cuts, self.window]
        return [self._file(start, [k for k in keyed if lo <= k[0] < hi]) for lo, hi in zip(bounds, bounds[1:])]

    def _file(self, start: datetime, keyed: list[tuple[int, float, int]]):
        ts_cache: dict[int, tuple[datetime, str]] = {}
        events: list[TransactionEvent] = []
        rows: list[list[tuple[str, ...]]] = [[] for _ in self.attempt_meta]
        first_line = [0] * len(self.attempt_meta)
        for line, (minute, _, seq) in enumerate(keyed, start=2):
            _, s, r, paid, received, fmt, attempt = self.txs[seq]
            if minute not in ts_cache:
                ts = start + timedelta(minutes=minute)
                ts_cache[minute] = (ts, ts.strftime("%Y/%m/%d %H:%M"))
            ts, ts_text = ts_cache[minute]
            snd, rcv = self.accounts[s].ref, self.accounts[r].ref
            label = attempt != -1
            fields = [
                ts_text,
                snd.bank,
                snd.account,
                rcv.bank,
                rcv.account,
                format_amount(received),
                received.currency,
                format_amount(paid),
                paid.currency,
                fmt,
                "1" if label else "0",
            ]
            events.append(
                TransactionEvent(
                    event_id=event_id_for(fields, line),
                    timestamp=ts,
                    sender=snd,
                    receiver=rcv,
                    amount_received=received,
                    amount_paid=paid,
                    payment_format=fmt,
                    is_laundering=label,
                    source_offset=line,
                )
            )
            if attempt >= 0:
                if not rows[attempt]:
                    first_line[attempt] = line
                rows[attempt].append(tuple(fields))
        # the answer key lists attempts in the order they start in the file (those in it)
        order = sorted((i for i in range(len(rows)) if rows[i]), key=first_line.__getitem__)
        return events, [LaunderingAttempt(*self.attempt_meta[i], tuple(rows[i])) for i in order]


#: Where a generated set's time begins unless told otherwise.
DEFAULT_START = datetime(2022, 9, 1)


@dataclass(frozen=True)
class Shift:
    """A drift, stated, from ``since`` on: every amount (paid and received, exact units)
    multiplied by ``factor`` (of the transfers paid in ``payment_format`` only, if one is named),
    and the transfers paid in ``relabel[0]`` recorded as paid in ``relabel[1]`` (a channel
    migration).

    >>> Shift(datetime(2022, 9, 2, 9), relabel=("Cheque", "ACH")).describe()
    'from 2022-09-02 09:00 every Cheque payment arrives as ACH'
    """

    since: datetime
    factor: int = 1
    payment_format: str | None = None
    relabel: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.factor < 1:
            raise ValueError(f"shift factor must be a positive integer, got {self.factor}")

    def apply(self, tx: tuple) -> tuple:
        m, s, r, paid, received, fmt, attempt = tx
        if self.factor != 1 and self.payment_format in (None, fmt):
            paid = Money(paid.currency, paid.units * self.factor)
            received = Money(received.currency, received.units * self.factor)
        if self.relabel is not None and fmt == self.relabel[0]:
            fmt = self.relabel[1]
        return (m, s, r, paid, received, fmt, attempt)

    def describe(self) -> str:
        parts = []
        if self.factor != 1:
            parts.append(f"every {self.payment_format + ' ' if self.payment_format else ''}amount x{self.factor}")
        if self.relabel is not None:
            parts.append(f"every {self.relabel[0]} payment arrives as {self.relabel[1]}")
        return f"from {self.since:%Y-%m-%d %H:%M} " + (" and ".join(parts) or "nothing changes")

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.since.isoformat(), "factor": self.factor,
                **({"payment_format": self.payment_format} if self.payment_format else {}),
                **({"relabel": list(self.relabel)} if self.relabel else {})}


def generate(
    accounts: int = 2000,
    days: int = 3,
    laundering_rate: float = 0.001,
    seed: int = 7,
    start: datetime = DEFAULT_START,
    *,
    tx_per_account_day: float = 4.5,
    min_each_typology: bool = True,
    profile: LaunderingProfile | str = "default",
) -> Dataset:
    """Generate a synthetic AMLworld-like data set (see the module docstring for the model).

    ``tx_per_account_day`` sets the background density: the defaults give about 27,000
    background rows. ``laundering_rate`` is the share of laundering rows among all rows.
    """
    return generate_phases(accounts, [(days, laundering_rate)], seed, start, tx_per_account_day=tx_per_account_day,
                           min_each_typology=min_each_typology, profile=profile)[0]


def generate_phases(
    accounts: int,
    phases: Sequence[tuple[int, float]],
    seed: int = 7,
    start: datetime = DEFAULT_START,
    *,
    tx_per_account_day: float = 4.5,
    min_each_typology: bool = True,
    profile: LaunderingProfile | str = "default",
    shift: Shift | None = None,
) -> list[Dataset]:
    """One world over consecutive phases, a data set each: ``phases`` are (days, laundering rate).
    The accounts, banks, regular payees and recurring payments are the same throughout and go on
    from one phase into the next; each phase has its own laundering budget (its rate of its own
    background rows), its attempts inside it, and a file of its own (lines from 2). So a history
    to train on and a live stream that continues it: the same accounts, later dates.

    ``shift``: a drift, stated (:class:`Shift`): the transfers from its time on changed as it says;
    all else, every draw included, the same.

    >>> h, lv = generate_phases(300, [(2, 0.01), (1, 0.001)], seed=1)
    >>> max(e.timestamp for e in h.events) < min(e.timestamp for e in lv.events)
    True
    >>> {e.sender for e in lv.events} <= {a.ref for a in lv.accounts} == {a.ref for a in h.accounts}
    True
    """
    if accounts < 20:
        raise ValueError(f"accounts must be at least 20, got {accounts}")
    if not phases:
        raise ValueError("generate_phases needs at least one phase")
    for days, laundering_rate in phases:
        if days < 1:
            raise ValueError(f"days must be at least 1, got {days}")
        if not 0 <= laundering_rate < 0.5:
            raise ValueError(f"laundering_rate must be in [0, 0.5), got {laundering_rate}")
    if tx_per_account_day <= 0:
        raise ValueError(f"tx_per_account_day must be positive, got {tx_per_account_day}")
    start = start.replace(second=0, microsecond=0)
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise ValueError(f"unknown laundering profile {profile!r}: expected one of {sorted(PROFILES)}")
        profile = PROFILES[profile]
    total = sum(d for d, _ in phases)
    b = _Builder(accounts, total, seed, tx_per_account_day, profile)
    b.make_accounts()
    b.background(round(accounts * total * tx_per_account_day))
    bounds = [0]
    for days, _ in phases:
        bounds.append(bounds[-1] + days * MINUTES_PER_DAY)
    lone, lookalikes = [], [b.accounts[i].ref for i in sorted(set(b.lookalike_idx))]
    for (lo, hi), (_, laundering_rate) in zip(zip(bounds, bounds[1:]), phases):
        n_background = sum(1 for tx in b.txs if lo <= tx[0] < hi and tx[6] == -1)
        budget = round(laundering_rate * n_background / (1 - laundering_rate))
        b.lo, b.hi = lo, hi
        lone.append(b.laundering(budget, min_each_typology))
    if shift is not None:
        at = int((shift.since - start).total_seconds()) // 60
        b.txs = [shift.apply(tx) if tx[0] >= at else tx for tx in b.txs]
    files = b.assemble(start, bounds[1:-1])
    out = []
    for i, ((events, attempts), (days, laundering_rate)) in enumerate(zip(files, phases)):
        params = {
            "accounts": accounts,
            "days": days,
            "laundering_rate": laundering_rate,
            "seed": seed,
            "start": (start + timedelta(minutes=bounds[i])).isoformat(),
            "tx_per_account_day": tx_per_account_day,
            "min_each_typology": min_each_typology,
            **({} if profile == PROFILES["default"] else {"profile": profile}),
            **({} if len(phases) == 1 else {"phase": i + 1, "of": [list(p) for p in phases]}),
            **({} if shift is None else {"shift": shift.to_dict()}),
        }
        out.append(Dataset(events, attempts, list(b.accounts), params, lone[i], lookalikes))
    return out


def write_dataset(dataset: Dataset, out_dir: str | Path, name: str = "synthetic") -> tuple[Path, Path]:
    """Write ``<name>_Trans.csv`` and ``<name>_Patterns.txt``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trans, patterns = out / f"{name}_Trans.csv", out / f"{name}_Patterns.txt"
    write_transactions(trans, dataset.events)
    write_patterns(patterns, dataset.attempts)
    return trans, patterns
