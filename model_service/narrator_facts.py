"""The narrator's facts: what an alert's evidence supports, the narrative plan, and the checker.

Pure and deterministic (no model): :func:`evidence_for` turns an alert, its evidence trace,
reason codes and typologies into :class:`Evidence` (every value a narrative may state: accounts,
banks, amounts with their currency, dates and times, hop counts, counts, durations, typology
names, factor values, and the transfers as edges); :func:`narrative_plan` orders the key facts
as SAR-style sentences (who/what/when/where first, then why, the money's path in time order,
how); :func:`extract_facts` finds the facts a sentence states; :func:`check_sentence` says which
of them the evidence does not support, relational statements ("A sent X to B on D") included.

>>> from reports.testing import make_alert, make_trace, make_reason_codes
>>> ev = evidence_for(make_alert(), make_trace(), make_reason_codes(), [("fan-out", "")])
>>> [(f.kind, f.value) for f in extract_facts("On 2022-09-01 at 00:40 account 00220/8001C8C51 "
...     "sent 3697.34 US Dollar to account 0119/80F2A3B11.", ev)]
[('date', '2022-09-01'), ('time', '00:40'), ('account', '00220/8001C8C51'), ('amount', '3697.34 US Dollar'), ('account', '0119/80F2A3B11')]
>>> check_sentence("On 2022-09-01 at 00:40 account 00220/8001C8C51 sent 3697.34 US Dollar to "
...     "account 0119/80F2A3B11.", ev)
[]
>>> [v.reason for v in check_sentence("Account 00220/8001C8C51 sent 12.05 US Dollar to 0011/8011D2E40.", ev)]
['no transfer in the evidence matches: 00220/8001C8C51 -> 0011/8011D2E40, 12.05 US Dollar']

An amount rounded for people is supported to the precision it is stated in:

>>> [[v.reason for v in check_sentence(f"Account 00220/8001C8C51 sent {x} to account 0119/80F2A3B11.", ev)]
...  for x in ("USD 3,697", "USD 3,700", "USD 3.7 thousand", "USD 3,000")]
[[], [], [], ['unsupported amount 3000 US Dollar']]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from auditflow.money import CURRENCIES, SIGNIFICANT, Money, figure_text, format_amount, money_plain
from auditflow.reasons import is_absence, is_flag
from auditflow.records import Alert, EvidenceTrace, ReasonCode
from auditflow.typologies import TYPOLOGIES

# ----------------------------------------------------------------------------- vocabulary

#: Currency names (as the data spells them) and codes -> the name.
_CURRENCY_WORDS: dict[str, str] = {}
for _name, (_code, _) in CURRENCIES.items():
    _CURRENCY_WORDS[_name] = _name
    _CURRENCY_WORDS[_code] = _name
_CURRENCY_WORDS |= {"USD": "US Dollar", "dollars": "US Dollar", "euros": "Euro", "EUR": "Euro", "BTC": "Bitcoin",
                    "$": "US Dollar", "€": "Euro", "£": "UK Pound", "¥": "Yen"}
_CURRENCY_RE = "|".join(re.escape(w) for w in sorted(_CURRENCY_WORDS, key=len, reverse=True))
_AFTER_CURRENCY = re.compile(rf"\s*(?:({_CURRENCY_RE})(?![A-Za-z]))")
_BEFORE_CURRENCY = re.compile(rf"(?:(?<![A-Za-z])({_CURRENCY_RE}))\s*$")

#: Count nouns -> the category a count of them is checked against.
COUNT_NOUNS = {
    "account": "accounts", "accounts": "accounts",
    "counterparty": "counterparties", "counterparties": "counterparties", "payee": "counterparties",
    "payees": "counterparties", "payer": "counterparties", "payers": "counterparties",
    "recipient": "counterparties", "recipients": "counterparties", "beneficiaries": "counterparties",
    "parties": "counterparties",
    "transfer": "transfers", "transfers": "transfers", "transaction": "transfers", "transactions": "transfers",
    "payment": "transfers", "payments": "transfers",
    "hop": "hops", "hops": "hops", "step": "hops", "steps": "hops", "layer": "hops", "layers": "hops",
}
DURATION_UNITS = {"minute": "minutes", "minutes": "minutes", "hour": "hours", "hours": "hours", "day": "days",
                  "days": "days", "week": "weeks", "weeks": "weeks"}
NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
MONTHS = {m: i for i, m in enumerate("January February March April May June July August September October "
                                     "November December".split(), 1)}

#: What a fact-bearing word is made of (ids, amounts, dates, times); one with a digit is a fact.
RUN_CHARS = re.compile(r"[A-Za-z0-9./:_-]")
_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9./:_-]*")
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"\d{1,2}:\d{2}")
_DATETIME = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_NODE = re.compile(r"[A-Za-z0-9_.:-]+/[A-Za-z0-9_.:-]+")
_MONTH_DATE = re.compile(rf"\b({'|'.join(MONTHS)})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"
                         rf"|\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({'|'.join(MONTHS)}),?\s+(\d{{4}})\b")
_TYPOLOGY = re.compile(r"(?<![A-Za-z-])(" + "|".join(re.escape(t) for t in sorted(TYPOLOGIES, key=len, reverse=True))
                       + r")(?![A-Za-z-])", re.IGNORECASE)
_NUMBER_WORD = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)
_TRAILING = ".:-_/"
#: A scale word after an amount's number ("1.25 million"): its power of ten.
_SCALES = {"thousand": 3, "million": 6, "billion": 9}
_SCALE_AFTER = re.compile(r"\s+(thousand|million|billion)(?![A-Za-z])")


def _dec(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def value_text(x: float) -> str:
    """A factor value as a narrative states it: an integer without ``.0``, else ``repr``.

    >>> value_text(7.0), value_text(297.3)
    ('7', '297.3')
    """
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


# ----------------------------------------------------------------------------- evidence


@dataclass(frozen=True, slots=True)
class EdgeFact:
    """A transfer the evidence holds: sender, receiver, its amounts (paid, received), when."""

    event_id: str
    src: str
    dst: str
    amounts: tuple[tuple[Decimal, str], ...]
    date: str
    time: str
    hop: int


@dataclass(frozen=True)
class Evidence:
    """Every fact a narrative of this alert may state (see the module docstring)."""

    alert_id: str
    trace_id: str
    accounts: frozenset[str]
    banks: frozenset[str]
    edges: tuple[EdgeFact, ...]
    amounts: frozenset[tuple[Decimal, str]]
    dates: frozenset[str]
    times: frozenset[str]
    counts: dict[str, frozenset[int]]
    durations: frozenset[tuple[int, str]]
    typologies: frozenset[str]
    values: frozenset[Decimal]
    #: each factor value -> the words that say what it measures (one must come shortly before it)
    value_words: dict[Decimal, frozenset[str]] = field(default_factory=dict)
    surfaces: frozenset[str] = field(default=frozenset())  # every fact-bearing word, as written

    def nodes_of_account(self, account: str) -> list[str]:
        return sorted(n for n in self.accounts if n.partition("/")[2] == account)


def _durations_in(text: str) -> set[tuple[int, str]]:
    out = set()
    for m in re.finditer(r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")\s+(" + "|".join(DURATION_UNITS) + r")\b", text):
        n = int(m.group(1)) if m.group(1).isdigit() else NUMBER_WORDS[m.group(1)]
        out.add((n, DURATION_UNITS[m.group(2)]))
    for m in re.finditer(r"\b(?:last|per|an?)\s+(" + "|".join(DURATION_UNITS) + r")\b", text):
        out.add((1, DURATION_UNITS[m.group(1)]))
    return out


def factor_text(rc: ReasonCode) -> str:
    """A reason code's description as a narrative phrase: its parenthetical notes left out,
    ``sender: distinct payees ...`` -> ``the sender's distinct payees ...``.

    >>> factor_text(ReasonCode("x", 7.0, 1.0, "sender: distinct payees in the last 24 hours (fan-out)"))
    "the sender's distinct payees in the last 24 hours"
    """
    d = re.sub(r"\s*\([^)]*\)", "", rc.description).strip()
    who, sep, rest = d.partition(": ")
    if sep and who in ("sender", "receiver") and ":" not in rest:
        return f"the {who}'s {rest}"
    return d.split(":")[0].strip()


def evidence_for(alert: Alert, trace: EvidenceTrace, reason_codes: Sequence[ReasonCode] = (),
                 typologies: Sequence[tuple[str, str]] | Sequence[str] = ()) -> Evidence:
    """The :class:`Evidence` of an alert: its transfer, its trace, its reason codes and the
    typologies matched around it (names, or (name, explanation) pairs)."""
    ev = alert.event
    edges = [EdgeFact(ev.event_id, ev.sender.node_id, ev.receiver.node_id,
                      tuple(dict.fromkeys((_money_key(ev.amount_paid), _money_key(ev.amount_received)))),
                      ev.timestamp.strftime("%Y-%m-%d"), ev.timestamp.strftime("%H:%M"), 1)]
    for e in trace.edges:
        if e.event_id == ev.event_id:
            continue
        edges.append(EdgeFact(e.event_id, e.src, e.dst, (_money_key(e.amount_paid),),
                              e.timestamp.strftime("%Y-%m-%d"), e.timestamp.strftime("%H:%M"), e.hop))
    accounts = {n.node_id for n in trace.nodes} | {ev.sender.node_id, ev.receiver.node_id}
    accounts |= {e.src for e in edges} | {e.dst for e in edges}
    depths = {n.hop_depth for n in trace.nodes if n.hop_depth > 0} | {e.hop for e in edges}
    counts = {
        "accounts": {len(trace.nodes), max(0, len(trace.nodes) - 1)},
        "counterparties": {max(0, len(trace.nodes) - 1)},
        "transfers": {len(trace.edges)},
        "hops": {trace.max_hops, max(depths, default=0)},
    }
    values: set[Decimal] = {Decimal(repr(alert.score)), Decimal(repr(alert.threshold))}
    value_words: dict[Decimal, set[str]] = {Decimal(repr(alert.score)): {"score", "scored", "scoring"},
                                            Decimal(repr(alert.threshold)): {"threshold"}}
    durations: set[tuple[int, str]] = set()
    for rc in reason_codes:
        v = Decimal(value_text(rc.value))
        values.add(v)
        value_words.setdefault(v, set()).update(_content_words(factor_text(rc)))
        text = rc.description.lower()
        durations |= _durations_in(factor_text(rc))
        if v == v.to_integral_value() and v >= 0:
            for noun, cat in COUNT_NOUNS.items():
                if re.search(rf"\b{noun}\b", text):
                    counts[cat].add(int(v))
    names = {t if isinstance(t, str) else t[0] for t in typologies}
    evidence = Evidence(
        alert_id=alert.alert_id,
        trace_id=trace.trace_id,
        accounts=frozenset(accounts),
        banks=frozenset(a.partition("/")[0] for a in accounts),
        edges=tuple(edges),
        amounts=frozenset(a for e in edges for a in e.amounts),
        dates=frozenset(e.date for e in edges),
        times=frozenset(e.time for e in edges),
        counts={k: frozenset(v) for k, v in counts.items()},
        durations=frozenset(durations),
        typologies=frozenset(names),
        values=frozenset(values),
        value_words={k: frozenset(v) for k, v in value_words.items()},
    )
    surfaces = set()
    for a in evidence.accounts:
        surfaces |= {a, *a.split("/")}
    for e in edges:
        surfaces |= {e.date, e.time, f"{e.date}T{e.time}", *(_amount_surface(d, c) for d, c in e.amounts),
                     *(figure_text(d) for d, _ in e.amounts)}
    surfaces |= {str(n) for v in evidence.counts.values() for n in v}
    surfaces |= {str(n) for n, _ in evidence.durations}
    surfaces |= {_plain(v) for v in evidence.values}
    object.__setattr__(evidence, "surfaces", frozenset(s for s in surfaces if any(c.isdigit() for c in s)))
    return evidence


def _money_key(m: Money) -> tuple[Decimal, str]:
    return Decimal(format_amount(m)), m.currency


def _amount_surface(d: Decimal, currency: str) -> str:
    scale = CURRENCIES[currency][1]
    return format_amount(Money(currency, int(d.scaleb(scale))))


def _plain(d: Decimal) -> str:
    return format(d, "f")


def stated_precision(number: str) -> Decimal:
    """Half the unit of the last significant digit of an amount as stated: a figure rounded for
    people stands for every amount it rounds from ("3697": 0.5, "95000": 500, "3697.34": 0.005).

    >>> stated_precision("3697"), stated_precision("95000"), stated_precision("3697.34"), stated_precision("0")
    (Decimal('0.5'), Decimal('500'), Decimal('0.005'), Decimal('0.5'))
    """
    if "." in number:
        return Decimal(1).scaleb(-len(number.split(".")[1])) / 2
    digits = number.lstrip("-")
    zeros = len(digits) - len(digits.rstrip("0")) if digits.strip("0") else 0
    return Decimal(10) ** zeros / 2


def _amount_matches(stated: str, known: tuple[Decimal, str]) -> bool:
    """Whether a stated amount (``"3697 US Dollar"``) is ``known`` to the precision it is stated in."""
    num, _, cur = stated.partition(" ")
    d = _dec(num)
    return d is not None and cur == known[1] and abs(known[0] - d) <= stated_precision(num)


# ----------------------------------------------------------------------------- extraction


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact a text states: ``kind`` (``account``, ``bank``, ``amount``, ``date``, ``time``,
    ``hop``, ``count``, ``duration``, ``typology``, ``value``, ``number``: a number of no known
    kind), its canonical ``value``, where it is (``start``, ``end``), and for accounts the
    ``role`` the sentence gives it (``sender``, ``receiver`` or ``""``)."""

    kind: str
    value: str
    start: int
    end: int
    role: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.value


def _words_before(text: str, pos: int, n: int = 3) -> list[str]:
    return re.findall(r"[A-Za-z']+", text[max(0, pos - 40):pos])[-n:]


def _next_words(text: str, pos: int, n: int = 3) -> list[str]:
    return re.findall(r"[A-Za-z$€£¥]+", text[pos:pos + 40])[:n]


def extract_facts(text: str, evidence: Evidence | None = None) -> list[Fact]:
    """The facts ``text`` states, in order (deterministic: regular expressions and the evidence's
    own ids to tell an account number from a bank number). Every word with a digit in it becomes
    a fact; one that is no date, time, amount, count, id or factor value is a ``number`` (which
    no evidence supports)."""
    facts: list[Fact] = []
    taken: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= s or a >= e for s, e in taken)

    for m in _MONTH_DATE.finditer(text):
        if m.group(1):
            month, day, year = MONTHS[m.group(1)], int(m.group(2)), int(m.group(3))
        else:
            day, month, year = int(m.group(4)), MONTHS[m.group(5)], int(m.group(6))
        facts.append(Fact("date", f"{year:04d}-{month:02d}-{day:02d}", m.start(), m.end()))
        taken.append(m.span())
    for m in _TYPOLOGY.finditer(text):
        facts.append(Fact("typology", m.group(1).lower(), m.start(), m.end()))
        taken.append(m.span())
    for m in _GROUPED.finditer(text):
        if free(*m.span()):
            _number_fact(text, m.group(0).replace(",", ""), m.start(), m.end(), facts, taken, evidence)
    for m in _RUN.finditer(text):
        word = m.group(0).rstrip(_TRAILING)
        a, b = m.start(), m.start() + len(word)
        if not word or not any(c.isdigit() for c in word) or not free(a, b):
            continue
        if _DATETIME.fullmatch(word):
            d, t = _DATETIME.fullmatch(word).groups()
            facts += [Fact("date", d, a, a + 10), Fact("time", t, a + 11, b)]
        elif _DATE.fullmatch(word):
            facts.append(Fact("date", word, a, b))
        elif _TIME.fullmatch(word):
            h, mi = word.split(":")
            facts.append(Fact("time", f"{int(h):02d}:{mi}", a, b))
        elif _NODE.fullmatch(word):
            facts.append(Fact("account", word, a, b))
        elif _NUMBER.fullmatch(word):
            _number_fact(text, word, a, b, facts, taken, evidence)
            continue
        else:  # an id-like word: an account number
            facts.append(Fact("account", _resolve_account(word, evidence), a, b))
        taken.append((a, b))
    for m in _NUMBER_WORD.finditer(text):
        if not free(*m.span()):
            continue
        nxt = _next_words(text, m.end(), 3)
        n = NUMBER_WORDS[m.group(1).lower()]
        kind = _count_kind(nxt)
        if kind:
            facts.append(Fact(kind[0], f"{kind[1]}:{n}" if kind[0] != "hop" else str(n), m.start(), m.end()))
            taken.append(m.span())
    facts.sort(key=lambda f: (f.start, f.end))
    _combine_bank_accounts(text, facts, evidence)
    _assign_roles(text, facts)
    return facts


def _count_kind(nxt: list[str]) -> tuple[str, str] | None:
    for i, w in enumerate(nxt[:3]):
        lw = w.lower()
        if lw in COUNT_NOUNS:
            cat = COUNT_NOUNS[lw]
            return ("count", cat)
        if lw in DURATION_UNITS:
            return ("duration", DURATION_UNITS[lw])
        if i == 0 and lw in ("more", "distinct", "different", "other", "separate", "outgoing", "incoming", "new",
                             "unique", "linked", "related", "connected", "further", "additional"):
            continue
        if i == 1 and nxt[0].lower() in ("more", "distinct", "different", "other", "separate", "outgoing",
                                         "incoming", "new", "unique", "linked", "related", "connected", "further",
                                         "additional"):
            continue
        return None
    return None


def _resolve_account(word: str, evidence: Evidence | None) -> str:
    if evidence is not None:
        nodes = evidence.nodes_of_account(word)
        if len(nodes) == 1:
            return nodes[0]
    return f"?/{word}"


def _number_fact(text: str, word: str, a: int, b: int, facts: list[Fact], taken: list, evidence: Evidence | None):
    before = text[max(0, a - 12):a]
    after = text[b:b + 24]
    cur = _AFTER_CURRENCY.match(after) or None
    pre = _BEFORE_CURRENCY.search(before)
    words_before = [w.lower() for w in _words_before(text, a, 2)]
    nxt = _next_words(text, b, 3)
    scale = _SCALE_AFTER.match(after)
    if scale and not pre:
        cur = _AFTER_CURRENCY.match(after[scale.end():]) or None
    if cur or pre:
        currency = _CURRENCY_WORDS[(cur or pre).group(1)]
        d = _dec(word)
        if d is not None and scale:  # "EUR 1.25 million": the stated digits, scaled (1.25E+6)
            d = d.scaleb(_SCALES[scale.group(1)])
            b += scale.end()
        facts.append(Fact("amount", f"{_plain(d) if d is not None else word} {currency}", a, b))
    elif words_before[-1:] in (["hop"], ["step"], ["layer"]):
        facts.append(Fact("hop", str(int(word)) if word.isdigit() else word, a, b))
    elif words_before[-1:] == ["bank"]:
        facts.append(Fact("bank", word, a, b))
    elif words_before[-1:] == ["account"]:
        facts.append(Fact("account", _resolve_account(word, evidence), a, b))
    elif (kind := _count_kind(nxt)) is not None and word.isdigit():
        if kind[0] == "count" and kind[1] == "hops":
            facts.append(Fact("count", f"hops:{int(word)}", a, b))
        else:
            facts.append(Fact(kind[0], f"{kind[1]}:{int(word)}", a, b))
    elif words_before[-1:] == ["bank"] or (evidence is not None and word in evidence.banks
                                            and not word.lstrip("0") == word):
        facts.append(Fact("bank", word, a, b))
    elif words_before[-1:] == ["account"] or (evidence is not None and evidence.nodes_of_account(word)):
        facts.append(Fact("account", _resolve_account(word, evidence), a, b))
    elif evidence is not None and word in evidence.banks:
        facts.append(Fact("bank", word, a, b))
    else:
        d = _dec(word)
        kind = "value" if evidence is not None and d is not None and d in evidence.values else "number"
        facts.append(Fact(kind, _plain(d) if d is not None else word, a, b))
    taken.append((a, b))


def _combine_bank_accounts(text: str, facts: list[Fact], evidence: Evidence | None) -> None:
    """``account X at bank B`` / ``bank B account X``: one account fact ``B/X``."""
    i = 0
    while i + 1 < len(facts):
        f, g = facts[i], facts[i + 1]
        between = text[f.end:g.start]
        pair = None
        if (f.kind == "account" and g.kind == "bank"
                and re.fullmatch(r"\s*,?\s*(at|of|in|with|held at|from)?\s*(the\s+)?bank\s*", between)):
            pair = (g.value, f.value.partition("/")[2])
        if f.kind == "bank" and g.kind == "account" and re.fullmatch(r"(['’]s)?\s*,?\s*(account)?\s*", between):
            pair = (f.value, g.value.partition("/")[2])
        if pair:
            facts[i:i + 2] = [Fact("account", f"{pair[0]}/{pair[1]}", min(f.start, g.start), max(f.end, g.end))]
        i += 1


_TO = {"to", "into", "towards", "toward", "for"}
_FROM = {"from", "by"}
_RECEIVE_VERBS = re.compile(r"\b(received|receives|receiving|got|collected|gathered)\b", re.IGNORECASE)


def _assign_roles(text: str, facts: list[Fact]) -> None:
    prev_end = 0
    receive = _RECEIVE_VERBS.search(text)
    for i, f in enumerate(facts):
        if f.kind != "account":
            prev_end = f.end
            continue
        words = [w.lower() for w in re.findall(r"[A-Za-z]+", text[prev_end:f.start])][-3:]
        role = ""
        for w in reversed(words):
            if w in _TO:
                role = "receiver"
                break
            if w in _FROM:
                role = "sender"
                break
        if not role:
            role = "receiver" if receive and receive.start() > f.end else "sender"
        facts[i] = Fact(f.kind, f.value, f.start, f.end, role)
        prev_end = f.end


# ----------------------------------------------------------------------------- checking


@dataclass(frozen=True, slots=True)
class Violation:
    """A fact (or statement) of a sentence the evidence does not support, and where it starts."""

    start: int
    reason: str
    fact: Fact | None = None


def fact_supported(f: Fact, ev: Evidence) -> bool:
    """Whether the evidence holds this single fact (relations aside)."""
    k, v = f.kind, f.value
    if k == "account":
        return v in ev.accounts
    if k == "bank":
        return v in ev.banks
    if k == "amount":
        return any(_amount_matches(v, a) for a in ev.amounts)
    if k == "date":
        return v in ev.dates
    if k == "time":
        return v in ev.times
    if k == "hop":
        return v.isdigit() and int(v) in {e.hop for e in ev.edges}
    if k == "count":
        cat, _, n = v.partition(":")
        return n.isdigit() and int(n) in ev.counts.get(cat, ())
    if k == "duration":
        unit, _, n = v.partition(":")
        return n.isdigit() and (int(n), unit) in ev.durations
    if k == "typology":
        return v in ev.typologies
    if k == "value":
        return True  # bound to what it measures by check_sentence
    return False


def matching_edges(facts: Sequence[Fact], ev: Evidence) -> list[EdgeFact] | None:
    """The evidence's transfers a sentence's facts describe, or None when the sentence states no
    transfer (no amount, date, time or hop next to an account, and fewer than two accounts).
    An empty list: it states one the evidence does not hold."""
    accounts = [f for f in facts if f.kind == "account"]
    attrs = [f for f in facts if f.kind in ("amount", "date", "time", "hop")]
    if not accounts or (not attrs and len(accounts) < 2):
        return None
    senders = {f.value for f in accounts if f.role == "sender"}
    receivers = {f.value for f in accounts if f.role == "receiver"}
    if senders and receivers and senders & receivers and len(accounts) == 2:
        return []
    cands = [e for e in ev.edges
             if (not senders or e.src in senders) and (not receivers or e.dst in receivers)]
    if len(senders) > 1 or len(receivers) > 1:  # "B and C both paid E": every pair must exist
        for s in senders or {None}:
            for r in receivers or {None}:
                if not any((s is None or e.src == s) and (r is None or e.dst == r) for e in cands):
                    return []

    def fits(e: EdgeFact, f: Fact) -> bool:
        if f.kind == "amount":
            return any(_amount_matches(f.value, a) for a in e.amounts)
        if f.kind == "date":
            return e.date == f.value
        if f.kind == "time":
            return e.time == f.value
        return str(e.hop) == f.value

    kinds = [f.kind for f in attrs]
    if all(kinds.count(k) <= 1 for k in kinds):  # one transfer: one edge fits every attribute
        return [e for e in cands if all(fits(e, f) for f in attrs)]
    if all(any(fits(e, f) for e in cands) for f in attrs):
        return [e for e in cands if any(fits(e, f) for f in attrs)]
    return []


_STOP = frozenset("the a an of in on at to for and or its it this that with from by was were is are last "
                  "since sender's receiver's sender receiver hour hours day days minute minutes week weeks".split())


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2 and w not in _STOP}


def check_sentence(text: str, ev: Evidence, facts: list[Fact] | None = None) -> list[Violation]:
    """What in ``text`` the evidence does not support: single facts, a factor value without
    what it measures (one of its factor's words among the eight words before it), a duration
    that is not a factor's window ("the last 24 hours"), then the
    transfer it states (its sender, receiver, amount, date, time and hop must be one transfer's)."""
    facts = extract_facts(text, ev) if facts is None else facts
    out = [Violation(f.start, f"unsupported {f.kind} {f.value}", f) for f in facts if not fact_supported(f, ev)]
    for f in facts:
        if f.kind == "duration":  # a factor's window: "in the last 24 hours", not "24 hours later"
            before = re.findall(r"[a-z]+", text[:f.start].lower())[-2:]
            after = re.findall(r"[a-z]+", text[f.end:].lower())[1:2]
            window = set(before) & {"last", "past", "previous", "within", "prior"} or after == ["before"]
            if not window or after in (["later"], ["ago"]):  # "in the 7 days before": a window too
                out.append(Violation(f.start, f"duration {f.value} not stated as a factor's window", f))
        if f.kind == "value":
            before = set(re.findall(r"[a-z]+", text[:f.start].lower())[-8:])
            if not before & ev.value_words.get(_dec(f.value), frozenset()):
                out.append(Violation(f.start, f"value {f.value} not stated with what it measures", f))
    if out:
        return sorted(out, key=lambda v: v.start)
    edges = matching_edges(facts, ev)
    if edges == []:
        parties = [f for f in facts if f.kind == "account"]
        s = " -> ".join(f.value for f in parties)
        attrs = ", ".join(f.value for f in facts if f.kind in ("amount", "date", "time", "hop"))
        return [Violation(parties[-1].start if parties else 0,
                          f"no transfer in the evidence matches: {s}" + (f", {attrs}" if attrs else ""))]
    return []


def split_sentences(text: str) -> list[tuple[int, str]]:
    """``text`` cut at sentence ends (``.``, ``!``, ``?`` before whitespace, or a line break),
    each with its offset."""
    out, start = [], 0
    for m in re.finditer(r"[.!?](?=\s)|\n", text):
        seg = text[start:m.end()]
        if seg.strip():
            out.append((start + len(seg) - len(seg.lstrip()), seg.strip()))
        start = m.end()
    if text[start:].strip():
        seg = text[start:]
        out.append((start + len(seg) - len(seg.lstrip()), seg.strip()))
    return out


def unsupported_facts(text: str, ev: Evidence) -> list[Violation]:
    """Every unsupported fact or transfer statement of a whole narrative (sentence by sentence)."""
    out = []
    for off, s in split_sentences(text):
        out += [Violation(v.start + off, v.reason, v.fact) for v in check_sentence(s, ev)]
    return out


# ----------------------------------------------------------------------------- the plan


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One sentence of the narrative plan: its template text (what the report prints when the
    model's attempts are all rejected), the key facts it must state and the evidence it links."""

    text: str
    facts: tuple[tuple[str, str], ...]
    evidence: tuple[str, ...]
    surfaces: frozenset[str]


def _item(text: str, evidence_ids: Sequence[str], ev: Evidence, key_kinds=("account", "amount", "date", "time",
                                                                              "count", "typology", "hop", "value",
                                                                              "duration")) -> PlanItem:
    facts = extract_facts(text, ev)
    bad = check_sentence(text, ev, facts)
    if bad:  # a template states only the evidence: anything else is a bug here
        raise AssertionError(f"template sentence {text!r} unsupported: {bad}")
    keys = tuple(dict.fromkeys(f.key for f in facts if f.kind in key_kinds))
    surfaces = {text[f.start:f.end] for f in facts} | {p for f in facts if f.kind == "account"
                                                       for p in f.value.split("/")}
    times = [f.value for f in facts if f.kind == "time"]
    surfaces |= {f"{f.value}T{t}" for f in facts if f.kind == "date" for t in times}
    return PlanItem(text, keys, tuple(dict.fromkeys(evidence_ids)),
                    frozenset(s for s in surfaces if any(c.isdigit() for c in s)))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _significant_digits(number: str) -> int:
    """``"297.3"``: 4, ``"0.00125"``: 3, ``"12000"``: 2, ``"1e-05"``: 99 (not a plain number)."""
    if not re.fullmatch(r"-?\d+(?:\.\d+)?", number):
        return 99
    digits = number.lstrip("-").replace(".", "").lstrip("0")
    return len(digits if "." in number else digits.rstrip("0"))


def _amount_words(m: Money) -> str:
    """An amount as the narrative states it: rounded for people (``USD 3,697``); the exact one is
    in the report's appendix and the trace file."""
    return money_plain(m)


def narrative_plan(alert: Alert, trace: EvidenceTrace, reason_codes: Sequence[ReasonCode] = (),
                   typologies: Sequence[tuple[str, str]] | Sequence[str] = (), *, evidence: Evidence | None = None,
                   max_path_edges: int = 2) -> list[PlanItem]:
    """The narrative's sentences in SAR order: the alerted transfer (who, what, when, where, how
    it was paid), why it alerted (typologies, the strongest factor), where the money went next
    (up to ``max_path_edges`` later transfers of the trace, in time order), and how far the
    trace followed it."""
    ev = evidence or evidence_for(alert, trace, reason_codes, typologies)
    e = alert.event
    items = [_item(f"On {e.timestamp:%Y-%m-%d} at {e.timestamp:%H:%M}, account {e.sender.node_id} sent "
                   f"{_amount_words(e.amount_paid)} to account {e.receiver.node_id} by {e.payment_format}.",
                   [e.event_id], ev)]
    names = list(dict.fromkeys(t if isinstance(t, str) else t[0] for t in typologies))
    # what raised the score, as the report's reasons: no yes/no factor that is off ("not paid by
    # Cheque"); one that is on is a statement, not "... was 1"
    up = [rc for rc in reason_codes if rc.contribution > 0 and not is_absence(rc.feature, rc.value)]
    short = [rc for rc in up if _significant_digits(value_text(rc.value)) <= SIGNIFICANT]
    typology = [f"the evidence matches the {' and '.join(names[:2])} pattern"] if names else []
    # the strongest factor in words the checker can hold to the evidence: a yes/no factor as its
    # statement, a short value with what it measures, or its name; a description it cannot check
    # (a value written into it: "first seen 1 day 16 h before") is left out
    factor: list[tuple[str, ReasonCode]] = []
    if up and is_flag(up[0].feature):
        phrase = factor_text(up[0])
        factor.append((f"the {phrase}" if phrase.startswith(("sender ", "receiver ")) else phrase, up[0]))
    if short:
        factor.append((f"{factor_text(short[0])} was {value_text(short[0].value)}", short[0]))
    if up:
        factor.append((f"the strongest factor was {factor_text(up[0])}", up[0]))
    why = next(((phrase, rc) for phrase, rc in factor
                if not check_sentence(f"It was flagged because {', and '.join([*typology, phrase])}.", ev)), None)
    if typology or why:
        items.append(_item(f"It was flagged because {', and '.join([*typology, *([why[0]] if why else [])])}.",
                           [f"typology:{n}" for n in names[:2]] + ([f"reason:{why[1].feature}"] if why else []), ev))
    later = sorted((x for x in trace.edges if x.event_id != e.event_id), key=lambda x: (x.timestamp, x.event_id))
    for x in later[:max_path_edges]:
        items.append(_item(f"On {x.timestamp:%Y-%m-%d} at {x.timestamp:%H:%M}, account {x.src} sent "
                           f"{_amount_words(x.amount_paid)} to account {x.dst}.", [x.event_id], ev))
    items.append(_item(f"The trace followed the money for up to {_count(trace.max_hops, 'hop')} and reached "
                       f"{_count(len(trace.nodes), 'account')} through {_count(len(trace.edges), 'transfer')}.",
                       [trace.trace_id], ev))
    return items


def fact_sheet(items: Sequence[PlanItem]) -> str:
    """The plan as the prompt lists it: one line per sentence, in order."""
    return "\n".join(f"- {it.text}" for it in items)


def recall(text: str, items: Sequence[PlanItem], ev: Evidence) -> tuple[int, int]:
    """(key facts of the plan the text states, key facts of the plan)."""
    stated = {f.key for f in extract_facts(text, ev)}
    keys = {k for it in items for k in it.facts}
    return len(keys & stated), len(keys)
