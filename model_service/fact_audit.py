"""An independent check of a narrative against its alert's evidence: a second judge beside the one
that steers decoding (:func:`model_service.narrator_facts.check_sentence`), by another method.

The decoder's checker extracts fact-shaped words (ids, amounts, dates: anything with a digit) and
looks each up; words without digits pass unseen, so "a shell company registered in Panama", "a
known sanctioned entity", "three thousand six hundred US dollars" or "money sent back to the
sender" all passed it. This one works the other way round, **closed-world**: every word of a
sentence must be accounted for, or it is a finding.

* **Known facts** are built here from the raw inputs (the alert, its trace, reason codes and
  typologies; :func:`known_of`), not from the decoder's ``Evidence``: a mistake there cannot
  blind both judges.
* **Words**: each word is either in the closed vocabulary of transaction narratives
  (:data:`VOCABULARY`: function words and the words an investigator's summary of transfers needs),
  or a word of this alert's own evidence (its reason codes' descriptions, typology names and
  explanations, payment format, currency names), or a finding: a place, a company, an
  institution, a legal claim or an accusation is never in the evidence ("name" when capitalised
  inside a sentence, "word" otherwise).
* **Numbers**, in digits or in words ("three thousand six hundred", "a dozen"), are judged by what
  they count, read from the words after them: an amount (a currency word or sign next to it) must
  be one of the evidence's amounts in that currency, to the precision it is stated in ("3,700 US
  dollars" for 3,697.34; not "3,600"); a count of accounts, transfers, counterparties or hops one
  the trace or a reason code gives; a duration a reason code's window or the time between two
  of the evidence's transfers; any other number one of the evidence's values. "about", "over",
  "less than" and their kin widen the test as they say.
* **Ids, dates, times**: every account, bank, event id, date and time stated must be the
  evidence's.
* **Relations**: a clause that names accounts with a verb of paying or receiving states
  transfers (who paid whom, from the prepositions and the verb: "A sent ... to B", "B received
  ... from A", "B was paid by A"); each must be a transfer of the evidence between them in that
  direction, with the amount, date and time the sentence binds to it. "then", "later",
  "afterwards" between two stated transfers (in one sentence or from one to the next) must follow
  their times; money said to come "back" to an account needs a transfer of the evidence into it
  after the alerted one.

:func:`audit` gives the findings of a whole narrative (sentence order matters for "then").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from auditflow.money import CURRENCIES, Money
from auditflow.records import PAYMENT_FORMATS, Alert, EvidenceTrace, ReasonCode

__all__ = ["Finding", "Known", "VOCABULARY", "audit", "audit_sentence", "known_of", "parse_number_words"]

#: The closed vocabulary: what a summary of transfers says besides the evidence's own words.
VOCABULARY: frozenset[str] = frozenset("""
a an the this that these those it its they them their there here which who whom whose what when where
while as of in on at to into onto toward towards from by with within without for and or but nor so
than then thus also only just both each every all any some no not none other another same such own
is are was were be been being has have had do does did done will would can could may might must
shall should one
account accounts bank banks transfer transfers transferred transferring transaction transactions
payment payments paid pay pays paying payer payers payee payees sent send sends sending received
receive receives receiving got get gets collected collect gathered gather moved move moves moving
wired wire forwarded forward passed pass passes passing made make makes routed route split
money funds fund amount amounts sum sums total totals value values balance
sender senders receiver receivers recipient recipients originator counterparty counterparties
beneficiary beneficiaries party parties intermediary intermediaries
alert alerts alerted flagged flag flags raised scored score scores scoring threshold model
evidence trace traced traces tracing followed follow follows following reached reach reaches
pattern patterns typology typologies matched match matches matching shape shapes consistent
indicative suggestive resembles resembling typical
reason reasons factor factors strongest strong main key largest highest lowest most least more less
feature features measure measures measured
hop hops step steps layer layers chain chains path paths network
suspicious unusual possible potential potentially apparent apparently laundering activity
date time times day days hour hours minute minutes week weeks period window windows moment
first second third last next one-off previous prior earlier later before after afterwards subsequently
soon shortly quickly rapidly immediately same-day overall together
distinct different new several multiple many few number count counts single once twice
outgoing incoming inbound outbound onward onwards further back up down out through across via along
about approximately around roughly nearly almost some over under above below least most exactly
up to at least at most more less
currency currencies format formats method
direct directly indirect indirectly respectively including included include includes
show shows showed shown indicates indicated appear appears appeared seems
because since due given against per among between during until upon whereas however therefore
furthermore additionally moreover meanwhile instead
went go goes gone came come comes left leave leaves arrived arrive arrives landed ended end ends
continued continue continues began begin begins started start starts occurred occur took take
held hold holds kept remained remain
worth combined totalling totaling altogether amounting amounted
entire whole part portion share rest remainder
own holder holders held using used use via
flow flows flowed
place took cover covers covered covering already away found find finds besides concern concerns concerning
regarding case involve involves involved involving link links linked span spans spanned ran run runs
downstream upstream like unlike
""".split())

#: Count nouns -> the kind of count they are judged as.
COUNT_NOUNS = {
    "account": "accounts", "accounts": "accounts", "bank": "banks", "banks": "banks",
    # counterparties are accounts: "paid 3 accounts" and "paid 3 payees" say the same
    "counterparty": "accounts", "counterparties": "accounts", "payee": "accounts", "payees": "accounts",
    "payer": "accounts", "payers": "accounts", "recipient": "accounts", "recipients": "accounts",
    "beneficiary": "accounts", "beneficiaries": "accounts", "parties": "accounts", "party": "accounts",
    "intermediaries": "accounts", "intermediary": "accounts",
    "transfer": "transfers", "transfers": "transfers", "transaction": "transfers", "transactions": "transfers",
    "payment": "transfers", "payments": "transfers", "time": "times", "times": "times",
    "hop": "hops", "hops": "hops", "step": "hops", "steps": "hops", "layer": "hops", "layers": "hops",
}
UNITS = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440, "week": 10080, "weeks": 10080}
_SMALL = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i >= 2}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORDS = set(_SMALL) | set(_TENS) | set(_SCALES) | {"dozen", "dozens"}
#: Currency words and signs -> the currency (names, ISO codes, common words).
CURRENCY_WORDS: dict[str, str] = {}
for _name, (_code, _) in CURRENCIES.items():
    CURRENCY_WORDS[_name.lower()] = _name
    CURRENCY_WORDS[_code.lower()] = _name
CURRENCY_WORDS |= {"usd": "US Dollar", "us dollars": "US Dollar", "dollar": "US Dollar", "dollars": "US Dollar",
                   "euro": "Euro", "euros": "Euro", "btc": "Bitcoin", "bitcoins": "Bitcoin",
                   "pound": "UK Pound", "pounds": "UK Pound", "uk pounds": "UK Pound", "yen": "Yen",
                   "$": "US Dollar", "€": "Euro", "£": "UK Pound", "¥": "Yen"}
_CODES = {code.lower() for code, _ in CURRENCIES.values()} | {"btc"}  # ISO codes, and BTC beside XBT
_APPROX = {"about", "approximately", "around", "roughly", "nearly", "almost", "some"}
_ABOVE = {"over", "above", "exceeding"}  # and "more than", "at least"
_BELOW = {"under", "below", "within"}  # and "less than", "at most", "up to"
_SEND = {"sent", "send", "sends", "sending", "paid", "pay", "pays", "paying", "transferred", "transfer", "transfers",
         "moved", "move", "moves", "wired", "wire", "forwarded", "forward", "passed", "routed", "made"}
_RECEIVE = {"received", "receive", "receives", "receiving", "got", "collected", "gathered"}
_MOVE = _SEND | {"came", "come", "comes", "went", "go", "goes", "flowed", "returned"}
#: Words that say the money moved, over one transfer or several ("went from A to B").
_PATH = {"went", "moved", "passed", "flowed", "travelled", "traveled", "through", "via", "hops", "reached", "routed"}
_LATER = {"then", "later", "afterwards", "subsequently", "next"}
_ROLES = {"sender": "sender", "originator": "sender", "receiver": "receiver", "beneficiary": "receiver"}
_MONTHS = {m.lower(): i for i, m in enumerate("January February March April May June July August September "
                                              "October November December".split(), 1)}

_TOKEN = re.compile(r"""
    (?P<node>[A-Za-z0-9]+/[A-Za-z0-9]+)
  | (?P<dt>\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2})?)?)
  | (?P<time>\d{1,2}:\d{2}(?::\d{2})?)
  | (?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![A-Za-z0-9])|\d+(?:\.\d+)?(?![A-Za-z0-9]))(?P<pct>\s?%)?
  | (?P<id>(?=[A-Za-z0-9-]*\d)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*)
  | (?P<word>[A-Za-z]+(?:['’][a-z]+)?(?:-[A-Za-z]+)*)
  | (?P<sign>[$€£¥])
  | (?P<punct>[,;:.!?()])
""", re.VERBOSE)


@dataclass(frozen=True)
class Finding:
    """Something a sentence states that the evidence does not hold."""

    #: word, name, number, amount, count, duration, account, id, date, time, transfer, direction, order, return
    kind: str
    text: str  # the words as written
    reason: str


@dataclass(frozen=True)
class Transfer:
    event_id: str
    src: str
    dst: str
    amounts: tuple[tuple[Decimal, str], ...]  # (value, currency): paid, and received when it differs
    when: datetime


@dataclass(frozen=True)
class Known:
    """What the evidence of one alert holds, built from the raw inputs (:func:`known_of`)."""

    accounts: frozenset[str]
    banks: frozenset[str]
    account_numbers: frozenset[str]
    ids: frozenset[str]
    transfers: tuple[Transfer, ...]
    totals: frozenset[tuple[Decimal, str]]  # sums of several transfers: per pair, into and out of an account
    alert: Transfer
    counts: dict[str, frozenset[int]]
    minutes: frozenset[int]  # durations: reason codes' windows, times between transfers, the trace window
    windows: frozenset[int]  # the reason codes' windows: "in the last N hours" must be one
    bound: dict[tuple[str, str, str], frozenset[int]]  # (account, "out"/"in", kind): counts of its dealings
    values: frozenset[Decimal]  # every other number: reason-code values, score, threshold, counts
    dates: frozenset[str]
    times: frozenset[str]
    words: frozenset[str]  # the vocabulary and this evidence's own words, lower case


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]+(?:-[A-Za-z]+)*", text)}


def known_of(alert: Alert, trace: EvidenceTrace, reason_codes: Sequence[ReasonCode] = (),
             typologies: Sequence[tuple[str, str]] | Sequence[str] = ()) -> Known:
    """The evidence of ``alert``: its transfer and its trace's, the trace's counts, the reason
    codes' values and windows, the typologies' names and explanations."""
    e = alert.event

    def amount(m: Money) -> tuple[Decimal, str]:
        return m.to_decimal(), m.currency

    root = Transfer(e.event_id, e.sender.node_id, e.receiver.node_id,
                    tuple(dict.fromkeys((amount(e.amount_paid), amount(e.amount_received)))), e.timestamp)
    transfers = [root] + [Transfer(x.event_id, x.src, x.dst, (amount(x.amount_paid),), x.timestamp)
                          for x in trace.edges if x.event_id != e.event_id]
    accounts = {n.node_id for n in trace.nodes} | {t.src for t in transfers} | {t.dst for t in transfers}
    depths = {n.hop_depth for n in trace.nodes} | {x.hop for x in trace.edges}
    counts: dict[str, set[int]] = {
        "accounts": {len(accounts), len(accounts) - 1, len(trace.nodes), max(0, len(trace.nodes) - 1)},
        "banks": {len({a.partition("/")[0] for a in accounts})},
        "transfers": {len(transfers), len(trace.edges)},
        "hops": {trace.max_hops, *depths},
        "times": set(),
    }
    # (account, "out"/"in", kind) -> counts of what it did that way
    bound: dict[tuple[str, str, str], set[int]] = {}
    per_pair = Counter((t.src, t.dst) for t in transfers)
    outs: dict[str, Counter[str]] = {a: Counter() for a in accounts}  # payee -> transfers, per payer
    ins: dict[str, Counter[str]] = {a: Counter() for a in accounts}
    for (s, d), n in per_pair.items():
        outs[s][d] += n
        ins[d][s] += n
    for a in accounts:  # what each account did in the evidence
        for way, parties in (("out", outs[a]), ("in", ins[a])):
            bound[(a, way, "accounts")] = {len(parties)}
            bound[(a, way, "transfers")] = {sum(parties.values()), *parties.values()}
            counts["accounts"].add(len(parties))
            counts["transfers"].add(sum(parties.values()))
    counts["times"] |= set(per_pair.values())
    for hop, n in Counter(x.hop for x in trace.edges).items():  # per hop: its transfers, the accounts it reached
        counts["transfers"].add(n)
        counts["accounts"].add(sum(1 for node in trace.nodes if node.hop_depth == hop))
    # totals: between two accounts, into and out of each, per currency ("3,709.39 US Dollar in all")
    sums: dict[tuple[str | None, str | None, str], list[Decimal]] = {}
    for t in transfers:
        value, currency = t.amounts[0]
        for key in ((t.src, t.dst, currency), (t.src, None, currency), (None, t.dst, currency)):
            sums.setdefault(key, []).append(value)
    totals = {(sum(v, Decimal(0)), key[2]) for key, v in sums.items() if len(v) > 1}
    values = {Decimal(repr(alert.score)), Decimal(repr(alert.threshold))}
    minutes: set[int] = set()
    windows: set[int] = set()  # the reason codes' windows ("in the last 24 hours")
    words = set(VOCABULARY) | {w.lower() for w in PAYMENT_FORMATS} | _words(" ".join(PAYMENT_FORMATS))
    words |= {w for c in CURRENCIES for w in _words(c)} | {w for w in CURRENCY_WORDS if w.isalpha()}
    for rc in reason_codes:
        v = Decimal(repr(float(rc.value)))
        values.add(v)
        text = rc.description
        words |= _words(text)
        if v == v.to_integral_value() and v >= 0:
            for noun, kind in COUNT_NOUNS.items():
                if re.search(rf"\b{noun}\b", text):
                    counts[kind].add(int(v))
            if re.search(r"\bminutes?\b", text):
                minutes.add(int(v))
        for m in re.finditer(r"\b(\d+)\s+(minutes?|hours?|days?|weeks?)\b", text):
            windows.add(int(m.group(1)) * UNITS[m.group(2)])
        for m in re.finditer(r"\b(?:last|per|an?)\s+(minute|hour|day|week)\b", text):
            windows.add(UNITS[m.group(1)])
        # a count the reason code gives of the alert's sender or receiver, one way
        who = {"sender": e.sender.node_id, "receiver": e.receiver.node_id}.get(text.partition(":")[0].strip())
        if who is not None and v == v.to_integral_value() and v >= 0:
            way = "out" if re.search(r"\b(payees|outgoing|sent|paid)\b", text) else (
                "in" if re.search(r"\b(payers|incoming|received)\b", text) else None)
            for noun, kind in COUNT_NOUNS.items():
                if way and re.search(rf"\b{noun}\b", text):
                    bound.setdefault((who, way, kind), set()).add(int(v))
    for t in typologies:
        name, explanation = (t, "") if isinstance(t, str) else t
        words |= _words(name) | {name.lower()} | _words(explanation)
        for m in re.finditer(r"\b\d+\b", explanation):
            values.add(Decimal(m.group()))
        for m in re.finditer(r"\b(\d+)\s+([a-z-]+)(?:\s+([a-z]+))?", explanation):  # "a chain of 7 transfers"
            noun = next((w for w in m.groups()[1:] if w in COUNT_NOUNS or w in UNITS), None)
            if noun in COUNT_NOUNS:
                counts[COUNT_NOUNS[noun]].add(int(m.group(1)))
            elif noun in UNITS:
                minutes.add(int(m.group(1)) * UNITS[noun])
    stamps = sorted({t.when for t in transfers})
    if len(stamps) <= 400:  # every time between two transfers
        pairs = [(a, b) for i, a in enumerate(stamps) for b in stamps[i + 1:]]
    else:  # a large trace: from the alerted transfer, and between neighbours in time
        pairs = [(root.when, b) for b in stamps if b > root.when] + list(zip(stamps, stamps[1:], strict=False))
    minutes |= {int((b - a) / timedelta(minutes=1)) for a, b in pairs}
    if trace.window_start is not None and trace.window_end is not None:
        minutes.add(int((trace.window_end - trace.window_start) / timedelta(minutes=1)))
    for kind in counts:
        values |= {Decimal(n) for n in counts[kind]}
    values |= {Decimal(t.when.year) for t in transfers}
    dates = {t.when.strftime("%Y-%m-%d") for t in transfers}
    dates |= {d.strftime("%Y-%m-%d") for d in (trace.window_start, trace.window_end) if d is not None}
    return Known(
        accounts=frozenset(accounts),
        banks=frozenset(a.partition("/")[0] for a in accounts),
        account_numbers=frozenset(a.partition("/")[2] for a in accounts),
        ids=frozenset({t.event_id for t in transfers} | {alert.alert_id, trace.trace_id}),
        transfers=tuple(transfers),
        totals=frozenset(totals),
        alert=root,
        counts={k: frozenset(v) for k, v in counts.items()},
        minutes=frozenset(minutes | windows),
        windows=frozenset(windows),
        bound={k: frozenset(v) for k, v in bound.items()},
        values=frozenset(values),
        dates=frozenset(dates),
        times=frozenset(t.when.strftime("%H:%M") for t in transfers),
        words=frozenset(words),
    )


# ----------------------------------------------------------------------------- numbers


def parse_number_words(words: Sequence[str]) -> tuple[Decimal, int] | None:
    """The number a run of number words at the start of ``words`` says, and how many words it took
    ("three thousand six hundred" -> 3600, "a dozen" -> 12, "twenty-five" -> 25, "three and a half"
    -> 3.5, "an" before a unit of time -> 1); None if none.

    >>> parse_number_words(["three", "thousand", "six", "hundred", "US", "dollars"])
    (Decimal('3600'), 4)
    >>> parse_number_words(["a", "dozen", "hops"]), parse_number_words(["three", "and", "a", "half", "hours"])
    ((Decimal('12'), 2), (Decimal('3.5'), 4))
    """
    total, current, used, seen = 0, 0, 0, False
    i = 0
    while i < len(words):
        w = words[i].lower()
        parts = w.split("-")
        nxt = words[i + 1].lower() if i + 1 < len(words) else ""
        if w == "and" and seen and nxt in ("a", "one") and i + 2 < len(words) and words[i + 2].lower() == "half":
            return Decimal(total + current) + Decimal("0.5"), i + 3
        if w in ("a", "an") and not seen and (nxt in (*_SCALES, "dozen") or nxt in UNITS):
            current, seen = 1, True
        elif all(p in _SMALL or p in _TENS for p in parts) and len(parts) <= 2:
            current += sum(_SMALL.get(p, _TENS.get(p, 0)) for p in parts)
            seen = True
        elif w in ("dozen", "dozens") and seen or w == "dozen":
            current = (current or 1) * 12
            seen = True
        elif w in _SCALES and seen:
            if _SCALES[w] == 100:
                current *= 100
            else:
                total += current * _SCALES[w]
                current = 0
        elif w == "and" and seen and i + 1 < len(words) and words[i + 1].lower() in _NUMBER_WORDS:
            pass
        else:
            break
        i += 1
        used = i
    return (Decimal(total + current), used) if seen else None


def _precision(text: str) -> Decimal:
    """Half the unit of the last digit stated ("3,697.34": 0.005; "3,700": 50; "7": 0.5)."""
    digits = text.replace(",", "")
    if "." in digits:
        return Decimal(1).scaleb(-len(digits.split(".")[1])) / 2
    zeros = len(digits) - len(digits.rstrip("0")) if digits.strip("0") else 0
    return Decimal(10) ** zeros / 2


def _close(stated: Decimal, known: Decimal, tolerance: Decimal, mode: str) -> bool:
    if mode == "above":
        return known >= stated
    if mode == "below":
        return known <= stated
    if mode == "approx":
        return abs(known - stated) <= max(tolerance, abs(stated) / 10)
    return abs(known - stated) <= tolerance


# ----------------------------------------------------------------------------- sentences


@dataclass
class _Tok:
    kind: str
    text: str
    start: int
    value: Decimal | None = None
    precision: Decimal = Decimal(0)


def _tokens(text: str) -> list[_Tok]:
    out = []
    for m in _TOKEN.finditer(text):
        if m.group("num") is not None:
            out.append(_Tok("pct" if m.group("pct") else "num", m.group("num"), m.start(),
                            Decimal(m.group("num").replace(",", "")), _precision(m.group("num"))))
        else:
            out.append(_Tok(m.lastgroup, m.group(), m.start()))
    # number words -> one number token
    merged: list[_Tok] = []
    i = 0
    while i < len(out):
        t = out[i]
        if t.kind == "word":
            run = []
            j = i
            while j < len(out) and out[j].kind == "word" and len(run) < 12:
                run.append(out[j].text)
                j += 1
            got = parse_number_words(run)
            if got is not None and not (got[1] == 1 and run[0].lower() == "one" and _pronoun_one(run)):
                value, used = got
                merged.append(_Tok("num", " ".join(run[:used]), t.start, value, Decimal("0.5")))
                i += used
                continue
        merged.append(t)
        i += 1
    return merged


def _pronoun_one(run: Sequence[str]) -> bool:
    """"one" that counts nothing ("one of", "this one"): read as a word, not a number."""
    return len(run) > 1 and run[1].lower() in ("of", "another")


def _lemmas(w: str) -> list[str]:
    w = w.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    out = [w]
    for suffix, repl in (("ies", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"), ("d", ""), ("ing", ""),
                         ("ing", "e"), ("ly", "")):
        if w.endswith(suffix) and len(w) > len(suffix) + 2:
            out.append(w[: -len(suffix)] + repl)
    return out


def _currency_at(toks: list[_Tok], i: int) -> str | None:
    """A currency named by the words at ``i`` (one or two words, or a sign)."""
    if i < len(toks) and toks[i].kind == "sign":
        return CURRENCY_WORDS[toks[i].text]
    if i + 1 < len(toks) and toks[i].kind == "word" and toks[i + 1].kind == "word":
        two = f"{toks[i].text} {toks[i + 1].text}".lower()
        if two in CURRENCY_WORDS:
            return CURRENCY_WORDS[two]
    if i < len(toks) and toks[i].kind == "word" and toks[i].text.lower() in CURRENCY_WORDS:
        return CURRENCY_WORDS[toks[i].text.lower()]
    return None


def _mode_before(toks: list[_Tok], i: int) -> str:
    before = [t.text.lower() for t in toks[max(0, i - 2):i] if t.kind == "word"]
    last = before[-1] if before else ""
    pair = " ".join(before[-2:])
    if last in _APPROX:
        return "approx"
    if last in _ABOVE or pair in ("more than", "at least", "greater than"):
        return "above"
    if last in _BELOW or pair in ("less than", "at most", "up to", "fewer than"):
        return "below"
    return "exact"


@dataclass
class _Clause:
    subjects: list[str] = field(default_factory=list)  # accounts named before the verb
    senders: list[str] = field(default_factory=list)
    receivers: list[str] = field(default_factory=list)
    amounts: list[tuple[Decimal, str, Decimal, str]] = field(default_factory=list)  # value, currency, tol, mode
    dates: list[str] = field(default_factory=list)
    times: list[str] = field(default_factory=list)
    verb: str | None = None  # "send" or "receive"
    passive: bool = False
    later: bool = False  # "then", "later", ...
    moved: bool = False  # a verb of money moving
    path: bool = False  # money said to move ("went", "passed through", "via"): over several hops too
    direct: bool = False  # "directly": one transfer
    relative: bool = False  # opens with "which", "who": about the account named just before
    chain: list[tuple[str, str]] = field(default_factory=list)  # "... to B and on to C": B -> C
    back: bool = False  # money said to come back

    def accounts(self) -> bool:
        return bool(self.subjects or self.senders or self.receivers)

    def resolve(self) -> None:
        """The subject's role from the verb: the payer of "sent", the payee of "received" or of a
        passive ("was paid by")."""
        payee = self.verb == "receive" or (self.verb == "send" and self.passive)
        (self.receivers if payee else self.senders).extend(self.subjects)
        self.subjects = []


def audit_sentence(text: str, known: Known, previous: Transfer | None = None) -> list[Finding]:
    """What ``text`` (one sentence) states that ``known`` does not hold; ``previous``: the transfer
    the sentence before stated last (for "then")."""
    findings, _ = _audit(text, known, previous)
    return findings


def audit(text: str, known: Known) -> list[Finding]:
    """The findings of every sentence of ``text`` in order (sentences end at ``.``, ``!``, ``?``
    before whitespace, or at a line break)."""
    out: list[Finding] = []
    previous = None
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text.strip()):
        if sentence.strip():
            got, previous = _audit(sentence, known, previous)
            out += got
    return out


_WORD_DATE = re.compile(
    rf"\b(?:({'|'.join(m.capitalize() for m in _MONTHS)})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})"
    rf"|(\d{{1,2}})(?:st|nd|rd|th)?\s+({'|'.join(m.capitalize() for m in _MONTHS)}),?\s+(\d{{4}}))\b")


def _iso_dates(text: str) -> str:
    """Dates in words as ISO dates ("September 1, 2022", "1st September 2022" -> 2022-09-01)."""
    def iso(m: re.Match) -> str:
        month, day, year = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(5), m.group(4), m.group(6))
        return f"{int(year):04d}-{_MONTHS[month.lower()]:02d}-{int(day):02d}"
    return _WORD_DATE.sub(iso, text)


#: Words that may stand between "to"/"from"/"by" and the account they introduce.
_BEFORE_ACCOUNT = {"account", "accounts", "the", "a", "an", "another", "bank", "its", "his", "her", "their", "same"}
_ADJECTIVES = {"distinct", "new", "different", "separate", "other", "further", "more", "unique", "outgoing",
               "incoming", "suspicious", "one-off", "consecutive", "individual", "related", "additional"}


def _audit(text: str, known: Known, previous: Transfer | None) -> tuple[list[Finding], Transfer | None]:
    toks = _tokens(_iso_dates(text))
    out: list[Finding] = []
    clauses: list[_Clause] = [_Clause()]
    pending: str | None = None  # "to", "from" or "by", until the account it introduces
    chained = False  # "on to": from the account named last, not from the payer

    def place(account: str) -> None:
        nonlocal pending, chained
        cur = clauses[-1]
        if pending == "to" and chained and cur.receivers:  # "from A to B and on to C": B -> C
            cur.chain.append((cur.receivers[-1], account))
        elif pending == "to":
            cur.receivers.append(account)
        elif pending in ("from", "by"):
            cur.senders.append(account)
        elif cur.verb is None:
            cur.subjects.append(account)
        else:  # the object of the verb: "A paid B"
            (cur.receivers if cur.verb == "send" else cur.senders).append(account)
        pending, chained = None, False

    for i, t in enumerate(toks):
        cur = clauses[-1]
        low = t.text.lower()
        if t.kind == "punct":
            if t.text in ";,":
                clauses.append(_Clause())
                pending = None
            continue
        if t.kind == "word":
            if low in _LATER:
                if cur.accounts():  # "A sent X to B and then ...": a new clause
                    clauses.append(_Clause())
                    cur = clauses[-1]
                cur.later = True
            elif low in ("to", "into", "toward", "towards"):
                pending = "to"
                chained = i > 0 and toks[i - 1].text.lower() in ("on", "onward", "onwards", "then")
            elif low in ("from", "by"):
                pending = low
            elif low not in _BEFORE_ACCOUNT:
                pending = None
            if low in _SEND and cur.verb is None:
                cur.verb = "send"
            elif low in _RECEIVE and cur.verb is None:
                cur.verb = "receive"
            if low in ("was", "were", "been", "being"):
                cur.passive = True
            if low in ("returned", "round-trip", "roundtrip") or (low == "back" and cur.moved):
                cur.back = True
            if low in _MOVE:
                cur.moved = True
            if low in _PATH:
                cur.path = True
            if low in ("directly", "direct"):
                cur.direct = True
            if low in ("which", "who", "whom") and not (cur.accounts() or cur.verb):
                cur.relative = True
            if not any(w in known.words for w in _lemmas(t.text)):
                capital = t.text[:1].isupper() and i > 0
                out.append(Finding("name" if capital else "word", t.text,
                                   f"{t.text!r} is neither in the evidence nor in the narrative vocabulary"))
            # "the sender", "the receiver('s)": the alerted transfer's accounts
            role = _ROLES.get(_lemmas(t.text)[-1] if low.endswith(("'s", "’s")) else low)
            if role and i > 0 and toks[i - 1].text.lower() == "the":
                place(known.alert.src if role == "sender" else known.alert.dst)
            continue
        if t.kind == "node":
            if t.text not in known.accounts:
                out.append(Finding("account", t.text, f"no account {t.text} in the evidence"))
                pending = None
            else:
                place(t.text)
            continue
        pending = None
        if t.kind == "dt":
            day = t.text[:10]
            if day in known.dates:
                cur.dates.append(day)
            else:
                out.append(Finding("date", t.text, f"no transfer of the evidence on {day}"))
            if "T" in t.text:
                _time(t.text[11:16], known, cur, out)
        elif t.kind == "time":
            hour, minute = t.text.split(":")[:2]
            _time(f"{int(hour):02d}:{minute}", known, cur, out)
        elif t.kind == "id":
            if t.text not in known.ids | known.account_numbers | known.banks:
                out.append(Finding("id", t.text, f"{t.text} is no id, account or bank of the evidence"))
        elif t.kind in ("num", "pct"):
            out += _judge_number(toks, i, known, cur)
    # a clause without accounts (the date, the time, the amount) speaks of the next one that names them
    carry = _Clause()
    actor: list[str] = []  # the account the clause before was about
    named: list[str] = []  # the account the clause before named last
    for c in clauses:
        if c.relative and named:  # ", which received ...": the account just named
            actor = named[-1:]
        if actor and not c.subjects and c.verb and (c.senders or c.receivers):
            # "A paid B, then sent ... to C" (A again); "A paid B, then received ... from C"
            if c.verb == "send" and not c.senders and not c.passive:
                c.senders = list(actor)
            elif (c.verb == "receive" or c.passive) and not c.receivers:
                c.receivers = list(actor)
        if not c.accounts():
            carry.dates += c.dates
            carry.times += c.times
            carry.later |= c.later
            continue
        c.dates += carry.dates
        c.times += carry.times
        c.later |= carry.later
        carry = _Clause()
        actor = list(c.subjects) or actor
        named = [*c.subjects, *c.senders, *c.receivers][-1:] if not c.receivers else c.receivers[-1:]
        c.resolve()
    last = previous
    moves = any(c.path for c in clauses)  # "the money passed through 5 hops, from A to B"
    for c in clauses:
        for s in c.senders:
            for r in c.receivers:
                match = _transfer_matching(known, s, r, c)
                if match is None and moves and not c.direct:  # "the money went from A to B" over hops
                    match = _path(known, s, r)
                if match is None:
                    back = _transfer_matching(known, r, s, c)
                    if back is not None:
                        out.append(Finding("direction", f"{s} -> {r}", f"the evidence has {r} -> {s}, not {s} -> {r}"))
                    else:
                        said = "".join([*(f", {v} {cu}" for v, cu, _, _ in c.amounts), *(f", {d}" for d in c.dates),
                                        *(f", {h}" for h in c.times)])
                        out.append(Finding("transfer", f"{s} -> {r}",
                                           f"no transfer of the evidence matches {s} -> {r}{said}"))
                    continue
                if c.later and last is not None and match.when < last.when:
                    out.append(Finding("order", f"{s} -> {r}",
                                       f"said to come after {last.src} -> {last.dst}, but earlier in the evidence"))
                last = match
        for a, b in c.chain:
            if not any((x.src, x.dst) == (a, b) for x in known.transfers):
                out.append(Finding("transfer", f"{a} -> {b}", f"no transfer of the evidence from {a} to {b}"))
        if c.back:
            target = (c.receivers or [known.alert.src])[-1]
            if not any(x.dst == target and x.when > known.alert.when for x in known.transfers):
                out.append(Finding("return", target,
                                   f"no transfer of the evidence brings money back to {target} after the alerted one"))
    return list(dict.fromkeys(out)), last


def _time(hm: str, known: Known, cur: _Clause, out: list[Finding]) -> None:
    if hm in known.times:
        cur.times.append(hm)
    else:
        out.append(Finding("time", hm, f"no transfer of the evidence at {hm}"))


def _transfer_matching(known: Known, s: str, r: str, c: _Clause) -> Transfer | None:
    """The evidence's transfer from ``s`` to ``r`` with what the clause binds to it (its dates,
    times and amounts), or the last of several between them whose amounts add up to it ("3,709.39
    US Dollar in all")."""
    pair = [t for t in known.transfers if (t.src, t.dst) == (s, r)
            and (not c.dates or t.when.strftime("%Y-%m-%d") in c.dates)
            and (not c.times or t.when.strftime("%H:%M") in c.times)]
    for t in pair:
        if all(any(cur == tc and _close(v, tv, tol, mode) for tv, tc in t.amounts) for v, cur, tol, mode in c.amounts):
            return t
    if len(c.amounts) > 1 or len(c.times) > 1:  # "received X at T1 and Y at T2 from A": several transfers
        pair = [t for t in known.transfers if (t.src, t.dst) == (s, r)
                and (not c.dates or t.when.strftime("%Y-%m-%d") in c.dates)]
        amounts_ok = all(any(cur == tc and _close(v, tv, tol, mode) for t in pair for tv, tc in t.amounts)
                         for v, cur, tol, mode in c.amounts)
        times_ok = all(any(t.when.strftime("%H:%M") == h for t in pair) for h in c.times)
        if pair and amounts_ok and times_ok:
            return max(pair, key=lambda t: t.when)
    if c.amounts and len(pair) > 1:
        total = {cur: sum((t.amounts[0][0] for t in pair if t.amounts[0][1] == cur), Decimal(0))
                 for _, cur, _, _ in c.amounts}
        if all(_close(v, total[cur], tol, mode) for v, cur, tol, mode in c.amounts):
            return max(pair, key=lambda t: t.when)
    return None


def _path(known: Known, s: str, r: str) -> Transfer | None:
    """The last transfer of a time-ordered path of the evidence's transfers from ``s`` to ``r``
    (each after the one before), or None."""
    best: dict[str, datetime] = {s: datetime.min}
    frontier = [s]
    arrival: Transfer | None = None
    while frontier:
        nxt = []
        for a in frontier:
            for t in known.transfers:
                if t.src == a and t.when >= best[a] and (t.dst not in best or t.when < best[t.dst]):
                    best[t.dst] = t.when
                    nxt.append(t.dst)
                    if t.dst == r and (arrival is None or t.when < arrival.when):
                        arrival = t
        frontier = nxt
    return arrival


def _judge_number(toks: list[_Tok], i: int, known: Known, clause: _Clause) -> list[Finding]:
    t = toks[i]
    assert t.value is not None
    if t.text in known.banks or t.text in known.account_numbers:  # "bank 00220"
        return []
    mode = _mode_before(toks, i)
    if t.kind == "pct":
        ok = any(_close(t.value, v * 100, t.precision, mode) or _close(t.value, v, t.precision, mode)
                 for v in known.values)
        return [] if ok else [Finding("number", t.text + "%", f"{t.text}% is none of the evidence's values")]
    # a currency before it ($ 3,697.34, USD 3,697.34) or after it (3,697.34 US Dollar)
    # only codes and signs come before an amount: "Bitcoin 3" is none
    before = toks[i - 1] if i > 0 else None
    after = i + 1
    if before is not None and (before.kind == "sign" or (before.kind == "word" and before.text.lower() in _CODES)):
        currency = CURRENCY_WORDS[before.text.lower()]
    else:
        currency = _currency_at(toks, after)
    if currency is not None:
        ok = any(cur == currency and _close(t.value, v, t.precision, mode)
                 for v, cur in [*(a for tr in known.transfers for a in tr.amounts), *known.totals])
        if ok:
            clause.amounts.append((t.value, currency, t.precision, mode))
            return []
        return [Finding("amount", f"{t.text} {currency}", f"no amount of {t.text} {currency} in the evidence")]
    # what it counts: the next word or two (adjectives between allowed)
    nxt = [x.text.lower() for x in toks[after:after + 3] if x.kind == "word"]
    for w in nxt[:3]:
        if w in COUNT_NOUNS:
            kind = COUNT_NOUNS[w]
            # "A paid 3 accounts", "B received 2 transfers": what that account did, when one is named
            subject = clause.subjects[-1] if len(clause.subjects) == 1 else None
            way = {"send": "out", "receive": "in"}.get(clause.verb or "")
            if way and clause.passive:
                way = "in"
            # the noun says which way too: payees are paid, payers pay; outgoing, incoming
            said = set(nxt)
            if said & {"payee", "payees", "recipient", "recipients", "beneficiaries", "outgoing"}:
                way = "out"
            elif said & {"payer", "payers", "incoming"}:
                way = "in"
            allowed = (known.bound.get((subject, way, kind))
                       if subject and way and kind in ("accounts", "transfers") else None)
            allowed = known.counts.get(kind, frozenset()) if allowed is None else allowed
            ok = t.value == t.value.to_integral_value() and any(
                _close(t.value, Decimal(n), Decimal(0), mode) for n in allowed)
            return [] if ok else [Finding("count", f"{t.text} {w}", f"the evidence counts no {t.text} {kind}")]
        if w in UNITS:
            minutes = t.value * UNITS[w]
            # "in the last 48 hours" states a factor's window; other durations may be any the evidence spans
            window = any(x.kind == "word" and x.text.lower() in ("last", "past", "previous")
                         for x in toks[max(0, i - 2):i])
            ok = any(_close(minutes, Decimal(m), Decimal(UNITS[w]) / 2, mode)
                     for m in (known.windows if window else known.minutes))
            return [] if ok else [Finding("duration", f"{t.text} {w}", f"no duration of {t.text} {w} in the evidence")]
        if w not in _ADJECTIVES:
            break
    ok = any(_close(t.value, v, t.precision, mode) for v in known.values)
    ok = ok or any(_close(t.value, v, t.precision, mode) for tr in known.transfers for v, _ in tr.amounts)
    return [] if ok else [Finding("number", t.text, f"{t.text} is none of the evidence's numbers")]


