"""Laundering typologies around one account: the AMLworld shapes, found on any GraphStore.

:func:`detect_typologies` looks at the transfers inside ``window`` around ``node_id`` and reports
every typology *instance* the account takes part in, in any role, one finding per instance (the
same instance found from another member is the same finding: same accounts, same transfers).
Nothing here reads the ``is_laundering`` label: the shapes are found from structure, time and
amounts alone.

What every detector shares
    * **Time order.** Money moves forward: a transfer out of an account that is part of a shape
      comes after the money reached it, within the longest of
      :data:`~auditflow.typologies.TYPOLOGY_HORIZONS` (hours to three weeks).
    * **Amounts are graded evidence, not a gate.** Funds mix with other money on the way: a hop
      that passes on all but a fee is strong evidence, half of it or 130 % weaker, ten times as
      much none (:func:`~auditflow.typologies.conservation` widens the band of amounts a hop is
      judged in, :func:`_sums_match_by_chance` for gather-scatter's sums). Amounts are compared
      in US cents.
    * **One-off transfers.** A pair of accounts with more than one transfer in the window and
      the lookback before it is a relationship (rent, salary, a supplier, a regular payee), not a
      layering step: such transfers are no evidence of a shape (a cycle may close over one:
      the ring's evidence is its chain's; a fan's split may include payments to or from regular
      counterparties at the same moment, at most as many as its one-off ones, judged by the
      one-off part alone: :func:`_alongside`). A ring may also pass over one relationship on
      its way (a second search with a tenth of the chance budget, each such hop judged by the
      pair's own habit and the ring by its least telling hop: :func:`_search`): laundering
      moves over existing accounts' ordinary channels too.
    * **Hubs and size bounds.** Accounts with more than ``hub_degree`` (default
      :data:`~auditflow.typologies.TYPOLOGY_HUB_DEGREE`) distinct counterparties per week (a rate
      over the window, or over the account's own span of transfers without one) (merchants,
      payroll processors, exchanges) take part in no shape; a fan larger than :data:`MAX_FAN` is
      a hub's business, not a typology, and so on for every shape.
    * **Not what the accounts do anyway: a stated model.** Each member's habit is its one-off
      transfers of comparable amounts over everything it did in the lookback and the window
      *outside the shape judged and the time it took* (leave-one-out; add-one prior, smoothed
      over neighbouring amounts: :meth:`_View.habit`). The chance of a burst by habit is the
      Gamma-Poisson (negative binomial) predictive of that many such transfers within the
      burst's span (:func:`_habit_tail`: the rate is estimated, not known); for fans,
      gather-scatter's two bursts (both must be unlike the hub's habit) and each payer of a
      bipartite or stack layer; for chains and cycles, each intermediate making such a transfer
      anyway in the time it took to pass the money on, times the transfers a search could have
      followed there (on or back, the more of the two). A path's hops are combined by Fisher's
      exact product test (cycles) or by their largest chance (chains: every hop must be a
      pass-on; so too rings over a relationship); a ring with a step that is no evidence at all
      (chance 1) is no ring, its chain is the finding. Every place and band a query searched
      multiplies the chance (Bonferroni), and a shape more likely than :data:`CHANCE` (one in a
      thousand) is not reported. Each finding's ``confidence`` is one minus that chance. An account that pays six
      new people every day makes no fan-out by doing it once more; a person who never did does.

========================  ==============================================================
fan-out / fan-in          one account pays (is paid by) 3 to 32 distinct accounts with
                          one-off transfers (one amount band or any amounts; regular
                          counterparties paid in the same moment join, a minority), one after the
                          other at most one spacing of :data:`FAN_GAPS` apart (12 h to 7 d)
cycle                     a time-ordered path of 3 to 12 hops back to the account, each hop
                          a pass-on (2-hop back-and-forth is repayment), over one-off
                          transfers and at most one relationship (and one closing it)
scatter-gather            a source pays 2 to 16 intermediates that each pass the money on to
                          one sink, after receiving it (holding it up to six weeks)
gather-scatter            payments from 2 to 16 accounts gathered in a burst, then payments to
                          2 to 16 others in a burst (:data:`SIDE_GAPS`, up to three weeks), both
                          unlike the hub's habit, the sums' likeness graded
bipartite                 2 to 10 payers and 2 to 10 payees (disjoint), at least 5 accounts,
                          one-off transfers of comparable amounts in a burst, each account
                          dealing with 2 or more of the other side
stack                     a bipartite (here a 2x2 layer will do) whose payees pass the money on
                          to a further layer of 2 or more accounts (or whose payers got it
                          from one), after it arrived: 3 layers
random                    a time-ordered chain of 3 or more pass-through hops through distinct
                          accounts that no other shape explains (mostly); a chain whose ends
                          pay each other in time order is the cycle it is part of
========================  ==============================================================

A fan-out or fan-in whose transfers all belong to a more specific shape (a scatter-gather's
scatter, a stack's layer) is that shape, and is not reported again; a bipartite that is part of
a stack is reported as the stack. Findings carry their ``hops``: the event ids of each step in
order (a fan: one step; a scatter-gather: scatter, gather; a cycle or chain: one per transfer; a
bipartite or stack: one per layer).

Findings come in :data:`TYPOLOGIES` order, accounts sorted except for ``cycle`` and ``random``
where they follow the path (and event ids follow the path too).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

from scipy.special import betainc

from auditflow.typologies import (
    MAX_HOP_HORIZON,
    PASSED_ON_TOLERANCE,
    SPLIT_RATIO,
    TYPOLOGIES,
    TYPOLOGY_HORIZONS,
    TYPOLOGY_HUB_DEGREE,
    TYPOLOGY_HUB_SPAN,
    conservation,
)
from evidence_graph.store import MICROS_PER_MINUTE, GraphEdge, GraphStore, check_window, to_micros

#: A pair of accounts with an earlier transfer this far before the window is a relationship.
RELATIONSHIP_LOOKBACK = timedelta(days=35)
#: Transfers read per account and direction (more than this: a hub).
TYPOLOGY_NEIGHBOR_CAP = 400
#: Fans: at least this many distinct counterparties (whether three payees in a few days are
#: every-day behaviour or not is the chance test's question: a quiet account's three identical
#: payments to new payees in an hour are not; two are a pair of payments), at most MAX_FAN.
MIN_FAN = 3
MAX_FAN = 32
#: The spacings at which bursts (fans, layers) are looked for: hours to a week
#: (:data:`~auditflow.typologies.TYPOLOGY_HORIZONS` but the longest): a fan spread over a week by
#: a quiet account is as unlike its habits as one in an afternoon, and the chance test judges
#: each over its own span (each spacing one more place looked at). Not three weeks: a run of
#: payments at most three weeks apart takes in the whole of a slow account's one-off payments,
#: and judged against what it does outside the run (nothing left) any account's life is a "fan".
FAN_GAPS = TYPOLOGY_HORIZONS[:-1]
#: Gather-scatter's two bursts, each judged by chance and the two together: up to three weeks
#: apart (a gathering over a month, then its scattering).
SIDE_GAPS = TYPOLOGY_HORIZONS
#: Chance: a shape is reported only where its members' own habits (their such transfers outside
#: the shape, :meth:`_View.habit`) make it at most this likely by chance -- one coincidence in a thousand
#: accounts examined is what an analyst's queue can take (see _by_chance, _pass_on_chance).
CHANCE = 1e-3
#: The prior of a rate (no such transfer seen: one over the whole history) is spread evenly over
#: this log-range of amounts (four decades, a dollar to ten thousand): a band of exact pass-ons is
#: a small share of it, any amount at all the whole (amounts as a graded signal).
PRIOR_AMOUNT_RANGE = math.log(1e4)
#: Rates are judged over at least this long: transfers of one hour are one moment for a rate.
RATE_RESOLUTION = timedelta(hours=1)
MIN_CYCLE_HOPS, MAX_CYCLE_HOPS = 3, 12
MIN_CHAIN_HOPS = 3
MAX_MIDS = 16
#: How long a scatter-gather's intermediate may hold the money before paying the sink: six weeks,
#: twice the path searches' hop horizon. Several intermediates paid by one source that each pay
#: the same sink are a joint coincidence whatever each waited (each wait is judged by the
#: intermediate's own habit over it, so a long hold by a busy account is little evidence), where
#: a chain's hop is judged alone; AMLSim's slow configuration holds for up to five weeks.
SG_HOLD_HORIZON = 2 * MAX_HOP_HORIZON
MAX_SIDE = 10
#: A many-to-many layer has at least five accounts (one side of three or more): two accounts
#: paying the same two (a square) is the one dense shape that chance builds every day among
#: accounts with popular payees; three payers of the same two payees (or the reverse) already
#: needs six one-off transfers to line up.
MIN_LAYER_ACCOUNTS = 5
#: The cycle and chain searches (:func:`_paths`): transfers followed per account and hop, paths
#: kept per account reached, paths per search; the ways in and out of an account joined into
#: chains, the least likely of each.
PATH_FANOUT = 25
PATH_LABELS = 4
PATH_BUDGET = 3000
CHAIN_SIDES = 40
#: The share of CHANCE spent on rings that pass over a relationship (:func:`_search`, a weighted
#: Bonferroni over the two searches): laundering rings mostly move over new channels, the one-off
#: search keeps nine tenths of the budget; a ring that passes over an existing relationship must
#: be ten times as unlikely as the test's chance alone.
OVER_RELATIONSHIP_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class TypologyMatch:
    """One laundering shape an account takes part in."""

    typology: str  # one of TYPOLOGIES
    accounts: tuple[str, ...]
    event_ids: tuple[str, ...]
    explanation: str
    hops: tuple[tuple[str, ...], ...] = field(default=())  # event ids of each step, in order
    #: 1 - the chance that the members' own habits make such a shape (times the places the
    #: search looked: see the module docstring); None on a match not made by the detectors
    confidence: float | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "typology": self.typology,
            "accounts": list(self.accounts),
            "event_ids": list(self.event_ids),
            "explanation": self.explanation,
            "hops": [list(h) for h in self.hops],
            "confidence": self.confidence,
        }

    def has_member(self, event_id: str) -> bool:
        """Whether the transfer ``event_id`` is one of the instance's own."""
        return event_id in self.event_ids


def _confidence(chance: float) -> float:
    return max(0.0, 1.0 - chance)


_MICROS = attrgetter("micros")


def _between(edges: Sequence[GraphEdge], lo: int, hi: int) -> Sequence[GraphEdge]:
    """The transfers of time-ordered ``edges`` from ``lo`` to ``hi`` microseconds, both included."""
    return edges[bisect_left(edges, lo, key=_MICROS):bisect_right(edges, hi, key=_MICROS)]


def _cents(e: GraphEdge) -> int:
    """The paid amount in US cents: the edge's own, computed once when it was made."""
    return e.paid_cents


class _View:
    """The window's one-off transfers between non-hub accounts, read through ``expand``, cached.
    A pair is one-off when it has a single transfer (that way) in the window and the
    :data:`RELATIONSHIP_LOOKBACK` before it.

    An account's transfers that way are read once; what the searches derive from them (the
    counts per counterparty, the history before the window, the one-off transfers, whether it
    is a hub) is derived once, when first asked: a query reads hundreds of accounts and asks
    most of them only whether they are hubs."""

    def __init__(self, store: GraphStore, start: datetime | None, end: datetime | None, hub_degree: int) -> None:
        self.store, self.start, self.end, self.hub_degree = store, start, end, hub_degree
        self._start_micros = None if start is None else to_micros(start)
        # per (account, direction): its transfers over the lookback and the window, in time order
        # (no self-loops), and where the window starts among them
        self._edges: dict[tuple[str, str], tuple[list[GraphEdge], int]] = {}
        self._pairs: dict[tuple[str, str], dict[str, int]] = {}
        self._habits: dict[tuple[str, str, str | None], list[GraphEdge]] = {}
        self._busy: set[str] = set()  # more transfers than TYPOLOGY_NEIGHBOR_CAP one way
        self._by_id: dict[str, GraphEdge] = {}
        self._unindexed: list[list[GraphEdge]] = []  # read, not yet in _by_id
        self._hub: dict[str, bool] = {}
        self._one_off: dict[tuple[str, str], tuple[GraphEdge, ...]] = {}
        self._regular: dict[tuple[str, str], tuple[GraphEdge, ...]] = {}
        self._relationships: dict[tuple[str, str], list[GraphEdge]] = {}
        self._related: dict[str, bool] = {}
        self.pass_ons: dict[tuple[str, str], float] = {}  # _hop_chance's pass-on chances
        self._hours: dict[str, float] = {}
        self._habit_cents: dict[tuple[str, str, str | None], tuple[list[int], dict[str, int]]] = {}
        self._branches: dict[tuple[str, bool], int] = {}
        self._arrivals: dict[tuple[str, bool], int] = {}
        self.cores: dict[tuple[str, str, int, timedelta], Any] = {}  # _core's answers

    def edge(self, event_id: str) -> GraphEdge:
        for edges in self._unindexed:
            self._by_id.update((e.event_id, e) for e in edges)
        self._unindexed.clear()
        return self._by_id[event_id]

    def _load(self, nodes: Iterable[str], direction: str) -> None:
        missing = sorted({n for n in nodes if (n, direction) not in self._edges})
        if missing:
            back = None if self.start is None else self.start - RELATIONSHIP_LOOKBACK
            got = self.store.expand([(n, back, self.end) for n in missing], direction,
                                    TYPOLOGY_NEIGHBOR_CAP + 1)
            for n in missing:
                edges = got.get(n, ())
                if len(edges) > TYPOLOGY_NEIGHBOR_CAP:
                    self._busy.add(n)
                edges = [e for e in edges if e.src != e.dst]
                # in cap order (time, then event id) and at most self.end: the window is the
                # transfers from the first at or after its start on
                at = 0 if self._start_micros is None else bisect_left(edges, self._start_micros, key=_MICROS)
                self._edges[(n, direction)] = (edges, at)
                self._unindexed.append(edges)

    def _raw(self, node: str, direction: str) -> list[GraphEdge]:
        """The account's transfers that way in the window (loaded)."""
        edges, at = self._edges[(node, direction)]
        return edges[at:]

    def _counts(self, node: str, direction: str) -> dict[str, int]:
        """Per counterparty, the account's transfers with it that way over lookback and window."""
        count = self._pairs.get((node, direction))
        if count is None:
            self._load([node], direction)
            count = {}
            for e in self._edges[(node, direction)][0]:
                other = e.dst if direction == "out" else e.src
                count[other] = count.get(other, 0) + 1
            self._pairs[(node, direction)] = count
        return count

    def _habit(self, node: str, direction: str, party: str | None = None) -> list[GraphEdge]:
        """The account's one-off transfers that way (a pair with one transfer over lookback and
        window) over the lookback and the window, in time order: the transfers a shape's steps
        are like, whatever the account does outside the shape being judged. With ``party``: its
        transfers with that counterparty instead (a relationship's own habit)."""
        habit = self._habits.get((node, direction, party))
        if habit is None:
            count = self._counts(node, direction)
            far = attrgetter("dst" if direction == "out" else "src")
            habit = self._habits[(node, direction, party)] = [
                e for e in self._edges[(node, direction)][0]
                if (count[far(e)] == 1 if party is None else far(e) == party)]
        return habit

    def relationships(self, node: str, direction: str) -> list[GraphEdge]:
        """The account's transfers that way in the window with counterparties it has more than
        one transfer with (over lookback and window), hubs among them too, in time order."""
        key = (node, direction)
        got = self._relationships.get(key)
        if got is None:
            count = self._counts(node, direction)
            far = attrgetter("dst" if direction == "out" else "src")
            got = self._relationships[key] = [e for e in self._raw(node, direction) if count[far(e)] > 1]
        return got

    def is_relationship(self, e: GraphEdge) -> bool:
        """Whether ``e``'s payer has more than one transfer to its payee over lookback and window."""
        related = self._related.get(e.event_id)
        if related is None:
            related = self._related[e.event_id] = self._counts(e.src, "out").get(e.dst, 0) > 1
        return related

    def is_hub(self, node: str) -> bool:
        hub = self._hub.get(node)
        if hub is None:
            self._load([node], "out")
            self._load([node], "in")
            outs, ins = self._raw(node, "out"), self._raw(node, "in")
            parties = len({e.dst for e in outs} | {e.src for e in ins})
            # a rate: counterparties per TYPOLOGY_HUB_SPAN over the window (or the account's own
            # span of transfers without a bounded one), not a lifetime count
            first = self.start or min((e.timestamp for e in (*outs[:1], *ins[:1])), default=None)
            last = self.end or max((e.timestamp for e in (*outs[-1:], *ins[-1:])), default=None)
            span = TYPOLOGY_HUB_SPAN if first is None or last is None else max(last - first, timedelta(days=1))
            hub = node in self._busy or parties * (TYPOLOGY_HUB_SPAN / span) > self.hub_degree
            self._hub[node] = hub
        return hub

    def branches(self, arrived: GraphEdge, over: bool = False) -> int:
        """How many ways a search following the money on from the payee of ``arrived`` had
        within :data:`~auditflow.typologies.MAX_HOP_HORIZON` after it arrived (at least 1): its
        one-off transfers out, and with ``over`` (a search that may pass over a relationship)
        the counterparties it has a relationship with that it paid then (:func:`_paths` takes
        one transfer to each)."""
        key = (arrived.event_id, over)
        n = self._branches.get(key)
        if n is None:
            lo, hi = arrived.micros, to_micros(arrived.timestamp + MAX_HOP_HORIZON)
            n = self._branches[key] = self._choices(arrived.dst, "out", lo, hi, over)
        return n

    def arrivals(self, sent: GraphEdge, over: bool = False) -> int:
        """How many ways a search following the money back from ``sent`` had at its payer within
        :data:`~auditflow.typologies.MAX_HOP_HORIZON` before it (at least 1): the one-off
        transfers it received, and with ``over`` the counterparties it has a relationship with
        that paid it then."""
        key = (sent.event_id, over)
        n = self._arrivals.get(key)
        if n is None:
            lo, hi = to_micros(sent.timestamp - MAX_HOP_HORIZON), sent.micros
            n = self._arrivals[key] = self._choices(sent.src, "in", lo, hi, over)
        return n

    def _choices(self, node: str, direction: str, lo: int, hi: int, over: bool) -> int:
        n = len(_between(self.one_off([node], direction)[node], lo, hi))
        if over:
            far = attrgetter("dst" if direction == "out" else "src")
            n += len({far(e) for e in _between(self.relationships(node, direction), lo, hi)})
        return max(1, n)

    def habit(self, node: str, direction: str, low: int, high: int,
              shape: frozenset[str] = frozenset(), during: tuple[int, int] | None = None,
              party: str | None = None) -> tuple[float, float]:
        """The account's own habit of one-off transfers that way of ``low`` to ``high`` US cents,
        outside the ``shape`` being judged (its event ids): ``(count + prior, hours)`` over
        everything the account did in the lookback and the window -- the Gamma posterior of its
        rate (shape, rate per hour) from the add-one prior (a finite history never proves a rate
        of zero), which :func:`_habit_tail` turns into the chance of a burst.

        Leave-one-out: an account that pays a new payee every week makes no fan-out by paying
        four in a month, whether its habit began before the window or in it; the shape's own
        transfers are what is judged, so they never count as its habit. ``during`` (the shape's
        first and last time, microseconds): the time it took is left out too -- its other
        transfers then and those hours -- so the rate is the one outside it, over the hours
        outside it (a shape spread over a third of the history is judged against the other two
        thirds, not against the whole with its own transfers taken out, which made any long run
        of an account's payments look unusual). Only one-off transfers count (paying the landlord
        again is no such step); with ``party``, only its transfers with that counterparty (how
        often it pays the landlord: a relationship's habit).

        The count is at least what the neighbouring amounts say (a box kernel in log-amount): the
        transfers within a factor SPLIT_RATIO either side of the range, in proportion to the
        range's share of that width. A few dozen payments are a sample: an account paying all
        sizes of amounts that happened to pay none in one band pays such amounts all the same."""
        hours = self._hours.get(node)
        if hours is None:
            self._load([node], "out")
            self._load([node], "in")
            seen = [e.timestamp for d in ("out", "in") for e in self._edges[(node, d)][0]]
            first = min(seen) if seen else None
            if self.start is not None:
                first = self.start - RELATIONSHIP_LOOKBACK if first is None else first
            last = self.end if self.end is not None else (max(seen) if seen else None)
            hours = self._hours[node] = (max((last - first) / timedelta(hours=1), 1.0)
                                         if first is not None and last is not None else 1.0)
        sorted_cents = self._habit_cents.get((node, direction, party))
        if sorted_cents is None:
            habit = self._habit(node, direction, party)
            sorted_cents = self._habit_cents[(node, direction, party)] = (
                sorted(_cents(e) for e in habit), {e.event_id: _cents(e) for e in habit})
        cents, of_id = sorted_cents
        mine = [of_id[i] for i in shape if i in of_id]  # the shape's own transfers: not its habit
        if during is not None:
            # the time the shape took is not its habit's either: the rate is the one outside it
            # (what the account does when it is not making the shape), over the hours outside it
            habit = self._habit(node, direction, party)
            mine += [_cents(e) for e in _between(habit, *during) if e.event_id not in shape]
            hours = max(hours - (during[1] - during[0]) / (60 * MICROS_PER_MINUTE), 1.0)

        def between(lo: float, hi: float) -> int:
            return (bisect_right(cents, hi) - bisect_left(cents, lo)) - sum(1 for c in mine if lo <= c <= hi)

        count: float = between(low, high)
        width = math.log(max(high, 1) / max(low, 1))
        if width > 0:
            near = between(low / SPLIT_RATIO, high * SPLIT_RATIO)
            count = max(count, near * width / (width + 2 * math.log(SPLIT_RATIO)))
        # the add-one prior spread over amounts: a band holds its share of PRIOR_AMOUNT_RANGE
        width = math.log(max(high, 1) / max(low, 1)) + 2 * math.log(1 + PASSED_ON_TOLERANCE)
        return count + min(1.0, width / PRIOR_AMOUNT_RANGE), hours

    def one_off(self, nodes: Sequence[str], direction: str) -> dict[str, tuple[GraphEdge, ...]]:
        """Per node, its transfers in ``direction`` to non-hub accounts that it has exactly one
        transfer with (that way) in the window, in time order. Computed once per node and
        direction: the searches ask again for the same accounts many times (a layer's every band)."""
        return self._dealings(nodes, direction, repeated=False)

    def regular(self, node: str, direction: str) -> tuple[GraphEdge, ...]:
        """:meth:`relationships` with non-hub counterparties; once per node too."""
        return self._dealings([node], direction, repeated=True)[node]

    def _dealings(self, nodes: Sequence[str], direction: str, repeated: bool) -> dict[str, tuple[GraphEdge, ...]]:
        """:meth:`one_off` (``repeated=False``) or :meth:`regular`: the counterparties asked
        about are read in one batch before each is judged a hub or not."""
        cache = self._regular if repeated else self._one_off
        missing = [n for n in dict.fromkeys(nodes) if (n, direction) not in cache]
        if missing:
            self._load(missing, direction)
            others = [o for n in missing for o, c in self._counts(n, direction).items() if (c > 1) == repeated]
            self._load(others, "out")
            self._load(others, "in")
            far = attrgetter("dst" if direction == "out" else "src")
            for n in missing:
                count = self._counts(n, direction)
                deals = (self.relationships(n, direction) if repeated
                         else [e for e in self._raw(n, direction) if count[far(e)] == 1])
                cache[(n, direction)] = tuple(e for e in deals if not self.is_hub(far(e)))
        return {n: cache[(n, direction)] for n in nodes}


def _habit_tail(n: int, habit: tuple[float, float], hours: float) -> float:
    """P(N >= n): the chance that an account with ``habit`` (``(a, t)``: ``a`` such transfers seen
    over ``t`` hours, prior included) makes ``n`` or more in ``hours``. Not a Poisson at the
    estimated rate ``a / t``: the rate is itself uncertain (a Gamma(a, t) posterior), and the
    count over ``hours`` is its Gamma-Poisson (negative binomial) predictive -- an account seen
    for a week is not known to the decimal, and bursts of ordinary business are likelier than a
    Poisson at the point estimate says. Over a long quiet history it tends to the Poisson.

    The tail is the regularised incomplete beta ``I_q(n, a)``, ``q = hours / (t + hours)``
    (scipy's, exact down to the smallest chances, which a sum of the terms below ``n`` loses).
    """
    a, t = habit
    if n <= 0:
        return 1.0
    return float(betainc(n, a, hours / (t + hours)))


def _by_chance(view: _View, center: str, direction: str, edges: Sequence[GraphEdge]) -> float:
    """How likely the account's own habits make a burst like ``edges`` (its transfers that way):
    :func:`_layers_by_chance` of one layer with ``center`` as its only member."""
    return _layers_by_chance(view, [edges], lambda e: center, direction)


def _layers_by_chance(view: _View, layers: Sequence[Sequence[GraphEdge]], member, direction: str = "out"
                      ) -> float:
    """How likely the members' own habits make bursts like ``layers``: for each layer and each of
    its members (``member(edge)``: the account whose transfer that way the edge is), P(at least
    its number of the layer's transfers, of the layer's amount range, within the layer's span),
    :func:`_habit_tail` of the account's habit outside the shape (:meth:`_View.habit`) over the
    span (at least :data:`RATE_RESOLUTION`); the product over members and layers (independent
    accounts), times the number of spans like the whole one in the window (the shape is looked
    for anywhere in it)."""
    p = 1.0
    shape = frozenset(e.event_id for edges in layers for e in edges)
    for edges in layers:
        low, high = min(_cents(e) for e in edges), max(_cents(e) for e in edges)
        stamps = sorted(e.timestamp for e in edges)
        hours = max(stamps[-1] - stamps[0], RATE_RESOLUTION) / timedelta(hours=1)
        count: dict[str, int] = {}
        for e in edges:
            count[member(e)] = count.get(member(e), 0) + 1
        during = (min(e.micros for e in edges), max(e.micros for e in edges))
        for x, k in sorted(count.items()):
            p *= _habit_tail(k, view.habit(x, direction, low, high, shape, during), hours)
    stamps = sorted(e.timestamp for edges in layers for e in edges)
    span = max(stamps[-1] - stamps[0], RATE_RESOLUTION)
    tries = 1.0
    if view.start is not None and view.end is not None:
        tries = max(1.0, (view.end - view.start) / span)
    return min(1.0, tries * p)


def _hop_chance(view: _View, a: GraphEdge, b: GraphEdge, over: bool = False) -> float:
    """The evidence of one hop of a searched path, ``a`` then ``b``: :func:`_pass_on_chance`
    times the transfers a search could have taken there instead: Bonferroni over the candidates
    it chose among, the more of the intermediate's one-off transfers out within
    :data:`~auditflow.typologies.MAX_HOP_HORIZON` after ``a`` arrived (a search following the
    money on) and in within it before ``b`` left (one following it back). Either search may have
    found the hop, so it is judged by the larger: the same path has the same chance whichever
    member's query finds it. A hop the intermediate would make anyway
    among its other payments scores above 1: it weakens a path instead of lengthening it, so
    the least likely path stops where the evidence does. ``over``: the search may pass over a
    relationship, and had those ways to choose among too (:meth:`_View.branches`)."""
    key = (a.event_id, b.event_id)
    chance = view.pass_ons.get(key)
    if chance is None:  # the same in both searches
        chance = view.pass_ons[key] = _pass_on_chance(view, a, b)
    return chance * max(view.branches(a, over), view.arrivals(b, over))


def _pass_on_chance(view: _View, a: GraphEdge, b: GraphEdge) -> float:
    """The chance that ``b``'s payer (``a``'s payee) makes a one-off transfer at least as close
    to what reached it as ``b`` (:func:`~auditflow.typologies.conservation`: a graded band, exact
    pass-on narrowest, mixed funds wider) anyway, in the time between them
    (:func:`_habit_tail` of its habit outside ``b``, at least :data:`RATE_RESOLUTION`). Where ``b``
    is a relationship's transfer: the chance that it pays that counterparty so anyway (the pair's
    own habit)."""
    arrived, d = _cents(a), conservation(_cents(a), _cents(b))
    spread = math.exp(min(d, 50.0))
    habit = view.habit(a.dst, "out", math.floor(arrived / spread), math.ceil(arrived * spread),
                       frozenset((b.event_id,)), party=b.dst if view.is_relationship(b) else None)
    wait = max(b.timestamp - a.timestamp, RATE_RESOLUTION) / timedelta(hours=1)
    return _habit_tail(1, habit, wait)


def _sums_match_by_chance(gathered: int, scattered: int) -> float:
    """How likely what an account scatters comes this close to what it gathered by chance: the
    share of :data:`PRIOR_AMOUNT_RANGE` (amounts spread evenly over four decades in log) within
    :func:`~auditflow.typologies.conservation` of it either way. Graded: passing on all but a
    fee is a 2% chance, mixed funds (half of it, or 130%) one of 7 or 10, ten times as much
    no evidence at all.

    >>> round(_sums_match_by_chance(100_000, 96_000), 3), round(_sums_match_by_chance(100_000, 50_000), 3)
    (0.023, 0.151)
    """
    return min(1.0, 2 * conservation(gathered, scattered) / PRIOR_AMOUNT_RANGE)


def _burst(edges: Iterable[GraphEdge], gap: timedelta) -> bool:
    """The transfers follow one another, in time order, at most ``gap`` apart."""
    stamps = sorted(e.timestamp for e in edges)
    return all(b - a <= gap for a, b in zip(stamps, stamps[1:], strict=False))


def _ids(edges: Iterable[GraphEdge]) -> tuple[str, ...]:
    return tuple(sorted({e.event_id for e in edges}))


def _bands(edges: Sequence[GraphEdge]) -> int:
    """How many distinct amount bands a search for comparable transfers among ``edges`` looks
    at: the bands of width :data:`SPLIT_RATIO` that their amounts span (1 + log base SPLIT_RATIO
    of largest / smallest, rounded down). A busy account's payments of every size hold a
    burst of comparable ones in some band more often than in one band fixed in advance (the
    chance test's question), so its chance counts each band (Bonferroni)."""
    amounts = [_cents(e) for e in edges]
    if not amounts:
        return 1
    low, high = max(1, min(amounts)), max(1, max(amounts))
    n = 1
    while low * SPLIT_RATIO ** n <= high:
        n += 1
    return n


# ------------------------------------------------------------------ fans


def _fans(view: _View, center: str, direction: str, tests: int) -> list[TypologyMatch]:
    """The fans around ``center`` that way: among its runs of comparable one-off transfers (each
    amount band's runs at each spacing of FAN_GAPS, :func:`_runs`) of MIN_FAN to MAX_FAN
    transfers, and no part of a larger run, every one whose chance times the places searched
    (the amount bands, or the runs not inside another if more) and the ``tests`` (fans) the
    query looks at -- each a chance for a coincidence -- is at most CHANCE, the least likely
    first, each sharing no transfer with one taken before. An account may run two fans in one
    window, and the largest run is not always the least likely one: a habit in one band can hide
    a fan in another. Any size of part counts: a fan splits (or gathers) one sum, so its parts
    may be smaller than what the account usually moves; whether they are unlike its habits is
    the chance test's question (:func:`_by_chance`, over the run's own amounts and span)."""
    if view.is_hub(center):
        return []
    edges = view.one_off([center], direction)[center]
    cands: dict[tuple[str, ...], list[GraphEdge]] = {}
    for gap in FAN_GAPS:
        # per spacing, every band's runs and the runs of any amounts (the chance test weighs a
        # wide range of amounts as weaker evidence); a run of more than MAX_FAN, and any run at
        # that spacing sharing a transfer with one, is part of a bigger operation (a hub's business)
        at_gap = [r for r in [*_runs(edges, gap), *_runs_in_time(edges, gap)] if len(r) >= 2]
        bigger = {e.event_id for r in at_gap if len(r) > MAX_FAN for e in r}
        for r in at_gap:
            if not bigger.intersection(e.event_id for e in r):
                cands.setdefault(tuple(e.event_id for e in r), r)
    if not cands:
        return []
    regular = view.regular(center, direction)
    runs: dict[tuple[str, ...], tuple[list[GraphEdge], list[GraphEdge]]] = {}  # a run, its regular payees
    for key, r in cands.items():
        extra = _alongside(r, regular, direction)
        # a burst mostly to regular payees is the account's regular business (a payroll, the
        # month's bills) with a newcomer or two, not a split
        if len(r) + len(extra) >= MIN_FAN and len(extra) <= len(r):
            runs[key] = (r, extra)
    if not runs:
        return []
    # every band and spacing, and every run not inside another, looked at: each a chance for a
    # coincidence
    sets = [frozenset(k) for k in runs]
    searched = max(_bands(edges) * len(FAN_GAPS), sum(1 for a in sets if not any(a < b for b in sets)))
    ranked = []
    for fan, extra in runs.values():
        chance = _by_chance(view, center, direction, fan)
        if chance * searched * tests > CHANCE:  # what this account does anyway
            continue
        during = [e for e in edges if fan[0].timestamp <= e.timestamp <= fan[-1].timestamp]
        if len(during) > MAX_FAN:  # part of a bigger operation: a hub's business
            continue
        ranked.append((chance * searched * tests, -len(fan), _ids(fan), fan, extra))
    name, verb = ("fan-out", "paid") if direction == "out" else ("fan-in", "was paid by")
    found: list[TypologyMatch] = []
    taken: set[str] = set()
    for chance, _, _, fan, extra in sorted(ranked, key=lambda r: r[:3]):
        ids = _ids([*fan, *extra])
        if taken.intersection(ids):
            continue
        taken.update(ids)
        parties = {e.dst if direction == "out" else e.src for e in (*fan, *extra)}
        regulars = "payees" if direction == "out" else "payers"
        what = "one-off transfers" if not extra else f"transfers ({len(extra)} with regular {regulars})"
        found.append(TypologyMatch(name, tuple(sorted({center, *parties})), ids,
                                   f"{center} {verb} {len(parties)} accounts in a burst of {what}",
                                   (ids,), _confidence(chance)))
    return found


def _alongside(run: Sequence[GraphEdge], regular: Sequence[GraphEdge], direction: str) -> list[GraphEdge]:
    """The payments to (from) regular counterparties that belong to a burst of one-off ones:
    within :data:`RATE_RESOLUTION` of it (the same moment), of an amount comparable to every one
    of its own (within SPLIT_RATIO), one per counterparty not already in it, in time order. A
    fan is money split over several accounts, and a launderer's split goes to whoever is at hand,
    accounts the payer already deals with among them; such a payment adds no evidence (it is
    what the pair does), so the burst is judged by its one-off part alone, and one that is
    mostly such payments is no fan (:func:`_fans`)."""
    low, high = min(_cents(e) for e in run), max(_cents(e) for e in run)
    first, last = run[0].timestamp - RATE_RESOLUTION, run[-1].timestamp + RATE_RESOLUTION
    parties = {e.dst if direction == "out" else e.src for e in run}
    out = []
    for e in regular:
        party = e.dst if direction == "out" else e.src
        if (first <= e.timestamp <= last and party not in parties
                and high <= SPLIT_RATIO * _cents(e) and _cents(e) <= SPLIT_RATIO * low):
            parties.add(party)
            out.append(e)
    return out


# ------------------------------------------------------------------ scatter-gather


def _scatter_gather(view: _View, end_: str, direction: str) -> TypologyMatch | None:
    """A scatter-gather with ``end_`` as its source (``direction="out"``) or its sink (``"in"``):
    2 to MAX_MIDS intermediates, each paid by the source and paying the sink after it was paid,
    within :data:`SG_HOLD_HORIZON` (one-off transfers). Judged by chance:
    every intermediate but one passing the money on to the same account anyway (each
    :func:`_pass_on_chance`, graded by how close what it passed on is to what it got), times the
    other ends examined; the least likely such shape, if at most CHANCE."""
    if view.is_hub(end_):
        return None
    down = direction == "out"
    first_hop = view.one_off([end_], direction)[end_]
    mids = [e.dst if down else e.src for e in first_hop]
    second = view.one_off(mids, direction)
    per_other: dict[str, dict[str, tuple[GraphEdge, GraphEdge, float]]] = {}
    for e1 in first_hop:
        m = e1.dst if down else e1.src
        for e2 in second[m]:
            other = e2.dst if down else e2.src
            # in time order: scatter (s -> m) before gather (m -> t)
            s_m, m_t = (e1, e2) if down else (e2, e1)
            if other in (end_, m) or not s_m.timestamp <= m_t.timestamp <= s_m.timestamp + SG_HOLD_HORIZON:
                continue
            p = _pass_on_chance(view, s_m, m_t)
            best_m = per_other.setdefault(other, {}).get(m)
            if best_m is None or p < best_m[2]:
                per_other[other][m] = (s_m, m_t, p)
    tries = max(1, sum(1 for by_mid in per_other.values() if len(by_mid) >= 2))
    best: tuple[float, int, str, dict[str, tuple[GraphEdge, GraphEdge, float]]] | None = None
    for other, by_mid in sorted(per_other.items()):
        if not 2 <= len(by_mid) <= MAX_MIDS:
            continue
        ps = sorted(p for _, _, p in by_mid.values())
        chance = min(1.0, tries * math.prod(ps[:-1]))  # one mid may pay the sink anyway: it chose it
        if chance > CHANCE:
            continue
        key = (chance, -len(by_mid), other, by_mid)
        if best is None or key[:3] < best[:3]:
            best = key
    if best is None:
        return None
    chance, _, other, by_mid = best
    source, sink = (end_, other) if down else (other, end_)
    scatter = [p[0] for p in by_mid.values()]
    gather = [p[1] for p in by_mid.values()]
    return TypologyMatch("scatter-gather", tuple(sorted({source, sink, *by_mid})), _ids(scatter + gather),
                         f"{source} scatters to {len(by_mid)} accounts that each pass the money on to {sink}",
                         (_ids(scatter), _ids(gather)), _confidence(chance))


# ------------------------------------------------------------------ gather-scatter


def _runs(edges: Sequence[GraphEdge], gap: timedelta) -> list[list[GraphEdge]]:
    """Every maximal burst of comparable amounts among ``edges`` (time order): for each amount
    band [low, SPLIT_RATIO * low], its runs of transfers at most ``gap`` apart; each distinct."""
    out: dict[tuple[str, ...], list[GraphEdge]] = {}
    for low in sorted({_cents(e) for e in edges}):
        run: list[GraphEdge] = []
        for e in [e for e in edges if low <= _cents(e) <= SPLIT_RATIO * max(1, low)] + [None]:
            if e is None or (run and e.timestamp - run[-1].timestamp > gap):
                if run:
                    out.setdefault(tuple(x.event_id for x in run), run)
                run = []
            if e is not None:
                run.append(e)
    return list(out.values())


def _gather_scatter(view: _View, hub: str) -> TypologyMatch | None:
    """Payments from 2 to MAX_MIDS accounts gathered in a burst (one-off transfers at most one
    spacing of SIDE_GAPS apart, one amount band or any amounts), then payments to 2 to MAX_MIDS
    other accounts in a burst, starting after the gathering did and within
    :data:`~auditflow.typologies.MAX_HOP_HORIZON` after it ended. Amounts are no gate (mixed
    funds): each burst is judged by the hub's own habits (:func:`_by_chance` over the burst's own
    amount range and span: a narrow range is rarer, stronger evidence), the shape by the chance
    of both, times the pairs of bursts examined -- each was a chance for a coincidence -- at most
    CHANCE. The least likely such shape (then the most transfers)."""
    if view.is_hub(hub):
        return None
    ins_all, outs_all = view.one_off([hub], "in")[hub], view.one_off([hub], "out")[hub]

    def bursts(edges: Sequence[GraphEdge], party) -> list[list[GraphEdge]]:
        out: dict[tuple[str, ...], list[GraphEdge]] = {}
        for gap in SIDE_GAPS:
            for r in [*_runs(edges, gap), *_runs_in_time(edges, gap)]:
                if len({party(e) for e in r}) >= 2 and len(r) <= MAX_MIDS:
                    out.setdefault(tuple(e.event_id for e in r), r)
        return list(out.values())

    gathers = bursts(ins_all, lambda e: e.src)
    scatters = bursts(outs_all, lambda e: e.dst)
    chance_of: dict[tuple[str, tuple[str, ...]], float] = {}

    def chance(direction: str, edges: list[GraphEdge]) -> float:
        key = (direction, tuple(e.event_id for e in edges))
        if key not in chance_of:
            chance_of[key] = _by_chance(view, hub, direction, edges)
        return chance_of[key]

    pairs = []
    for g in gathers:
        sources = {e.src for e in g}
        for sc in scatters:
            # the scatter starts after the gather did and within the horizon after it ended
            if not g[0].timestamp <= sc[0].timestamp <= g[-1].timestamp + MAX_HOP_HORIZON:
                continue
            outs = [e for e in sc if e.dst not in sources]
            ins = [e for e in g if e.timestamp <= outs[-1].timestamp] if outs else []
            if len({e.dst for e in outs}) < 2 or len({e.src for e in ins}) < 2:
                continue
            pairs.append((ins, outs))
    best: tuple[float, int, tuple[str, ...], list[GraphEdge], list[GraphEdge]] | None = None
    tries = max(1, len(gathers) * len(scatters))  # every pair of bursts examined
    for ins, outs in pairs:
        # both bursts unlike the hub's habits (the larger chance of the two: a shape whose one
        # side is every-day business is not this shape), the sums' likeness graded on top
        c = min(1.0, tries * _combined([max(chance("in", ins), chance("out", outs)),
                                        _sums_match_by_chance(sum(map(_cents, ins)), sum(map(_cents, outs)))]))
        key = (c, -(len(ins) + len(outs)), _ids(ins + outs), ins, outs)
        if c <= CHANCE and (best is None or key[:3] < best[:3]):
            best = key
    if best is None:
        return None
    c, _, _, ins, outs = best
    return TypologyMatch("gather-scatter", tuple(sorted({hub, *(e.src for e in ins), *(e.dst for e in outs)})),
                         _ids(ins + outs),
                         f"{hub} gathers {len(ins)} payments and scatters them to {len(outs)} accounts",
                         (_ids(ins), _ids(outs)), _confidence(c))


# ------------------------------------------------------------------ bipartite and stack


def _core(view: _View, v: str, side: str, min_accounts: int = MIN_LAYER_ACCOUNTS, gap: timedelta = FAN_GAPS[1]
          ) -> tuple[list[str], list[str], list[GraphEdge]] | None:
    """:func:`_find_core`, once per view and arguments (a query asks again from every center)."""
    key = (v, side, min_accounts, gap)
    if key not in view.cores:
        view.cores[key] = _find_core(view, v, side, min_accounts, gap)
    return view.cores[key]


def _find_core(view: _View, v: str, side: str, min_accounts: int, gap: timedelta
               ) -> tuple[list[str], list[str], list[GraphEdge]] | None:
    """A many-to-many layer A -> B with ``v`` in A (``side="left"``) or B: one-off transfers of
    comparable amounts (one band [low, SPLIT_RATIO * low]) in one burst (at most ``gap``
    apart), every account of each side dealing with at least two of the other (the 2-core),
    2 to MAX_SIDE accounts a side, MIN_LAYER_ACCOUNTS in all. Of the bands of ``v``'s own
    transfers, the layer with the most transfers (ties: the lower band)."""
    fwd, back = ("out", "in") if side == "left" else ("in", "out")

    def far_of(e: GraphEdge, d: str) -> str:
        return e.dst if d == "out" else e.src

    def near_of(e: GraphEdge) -> str:
        return e.src if fwd == "out" else e.dst

    mine = view.one_off([v], fwd)[v]
    if len(mine) < 2:
        return None
    # candidate bands: any that holds one of v's transfers, from the amounts around
    around = [e for b in view.one_off(sorted({far_of(e, fwd) for e in mine}), back).values() for e in b]
    pool = sorted({e.event_id: e for e in (*mine, *around)}.values(), key=lambda e: (_cents(e), e.event_id))
    cents = [_cents(e) for e in pool]
    lows = sorted({c for c in cents if min(map(_cents, mine)) <= SPLIT_RATIO * c and c <= max(map(_cents, mine))})
    best: tuple[list[str], list[str], list[GraphEdge]] | None = None
    tried: set[frozenset[str]] = set()
    bands: set[frozenset[str]] = set()
    for low in lows:
        # the band's transfers: a run of the pool by amount (every transfer the layer can hold is
        # v's own or one into (out of) v's counterparties, all in the pool)
        lo, hi = bisect_left(cents, low), bisect_right(cents, SPLIT_RATIO * max(1, low))
        in_band = frozenset(e.event_id for e in pool[lo:hi])
        if in_band in bands:
            continue
        bands.add(in_band)

        def band(e: GraphEdge, in_band: frozenset[str] = in_band) -> bool:
            return e.event_id in in_band
        far = {far_of(e, fwd) for e in mine if band(e)}
        if len(far) < 2:
            continue
        back_of = view.one_off(sorted(far), back)
        count: dict[str, int] = {}
        for b in far:
            for e in back_of[b]:
                if band(e):
                    count[far_of(e, back)] = count.get(far_of(e, back), 0) + 1
        near = {v} | {u for u, c in count.items() if c >= 2 and u not in far}
        fwd_of = view.one_off(sorted(near), fwd)
        edges = [e for a in near for e in fwd_of[a] if far_of(e, fwd) in far and band(e)]
        key = frozenset(e.event_id for e in edges)
        if key in tried:  # another band's candidates exactly: the same layer
            continue
        tried.add(key)
        for _ in range(4 * MAX_SIDE):  # prune to the core, in the burst that holds v's transfers
            runs = _runs_in_time(edges, gap)
            edges = max(runs, key=lambda r: (sum(1 for e in r if near_of(e) == v), len(r))) if runs else []
            deg_near: dict[str, int] = {}
            deg_far: dict[str, int] = {}
            for e in edges:
                deg_near[near_of(e)] = deg_near.get(near_of(e), 0) + 1
                deg_far[far_of(e, fwd)] = deg_far.get(far_of(e, fwd), 0) + 1
            keep = [e for e in edges if deg_near[near_of(e)] >= 2 and deg_far[far_of(e, fwd)] >= 2]
            if len(keep) == len(edges):
                break
            edges = keep
        near = {near_of(e) for e in edges}
        far = {far_of(e, fwd) for e in edges}
        if (v not in near or not 2 <= len(near) <= MAX_SIDE or not 2 <= len(far) <= MAX_SIDE or near & far
                or len(near) + len(far) < min_accounts or not _burst(edges, gap)):
            continue
        if best is None or len(edges) > len(best[2]):
            left, right = (near, far) if side == "left" else (far, near)
            best = sorted(left), sorted(right), sorted(edges, key=lambda e: e.cap_key)
    return best


def _runs_in_time(edges: Sequence[GraphEdge], gap: timedelta) -> list[list[GraphEdge]]:
    """``edges`` cut into bursts: in time order, a new one wherever two are more than ``gap`` apart."""
    runs: list[list[GraphEdge]] = []
    for e in sorted(edges, key=lambda e: e.cap_key):
        if runs and e.timestamp - runs[-1][-1].timestamp <= gap:
            runs[-1].append(e)
        else:
            runs.append([e])
    return runs


def _next_layer(view: _View, layer: Sequence[str], inflow: Sequence[GraphEdge], used: set[str],
                forward: bool, gap: timedelta) -> tuple[list[str], list[GraphEdge]] | None:
    """A further layer of 2+ accounts each dealing with 2+ of ``layer``: after it (``forward``:
    the layer passes on what ``inflow`` brought, no more, after it arrived) or before it (the
    layer got from them, before it paid ``inflow`` on)."""
    d = "out" if forward else "in"
    got: dict[str, tuple[int, datetime]] = {}
    for e in inflow:
        x = e.dst if forward else e.src
        c, t = got.get(x, (0, e.timestamp))
        got[x] = (c + _cents(e), min(t, e.timestamp) if forward else max(t, e.timestamp))
    edges: list[GraphEdge] = []
    for x, es in view.one_off(sorted(layer), d).items():
        if x not in got:
            continue
        amount, when = got[x]  # money leaves after the first arrived (arrived before the last left)
        cand = [e for e in es if (e.dst if forward else e.src) not in used
                and (e.timestamp >= when if forward else e.timestamp <= when)]
        total = 0  # what the layer passed on (got from the layer before), no more
        for e in cand if forward else reversed(cand):
            if total + _cents(e) <= amount * (1 + PASSED_ON_TOLERANCE):
                edges.append(e)
                total += _cents(e)
    count: dict[str, int] = {}
    for e in edges:
        y = e.dst if forward else e.src
        count[y] = count.get(y, 0) + 1
    nxt = sorted(y for y, c in count.items() if c >= 2)
    edges = [e for e in edges if (e.dst if forward else e.src) in nxt]
    if not 2 <= len(nxt) <= MAX_SIDE or not _burst([*inflow, *edges], gap):
        return None
    return nxt, sorted(edges, key=lambda e: e.cap_key)


def _bipartite_and_stack(view: _View, v: str) -> list[TypologyMatch]:
    """The layers around ``v`` at each spacing of FAN_GAPS (each a place looked at): per side,
    the least likely one, if at most CHANCE."""
    if view.is_hub(v):
        return []
    found: dict[tuple[str, ...], TypologyMatch] = {}
    for side in ("left", "right"):
        best: tuple[float, TypologyMatch] | None = None
        for gap in FAN_GAPS:
            got = _layered(view, v, side, gap)
            if got is not None and (best is None or got[0] < best[0]):
                best = got
        if best is not None:
            found.setdefault(best[1].event_ids, best[1])
    return list(found.values())


def _layered(view: _View, v: str, side: str, gap: timedelta) -> tuple[float, TypologyMatch] | None:
    core = _core(view, v, side, 4, gap)  # a square only as a layer of a stack (below)
    if core is None:
        return None
    # the same layer from every member: as its first payer finds it, where that holds v
    again = _core(view, core[0][0], "left", 4, gap)
    if again is not None and v in (*again[0], *again[1]):
        core = again
    a, b, edges = core
    used = set(a) | set(b)
    after = _next_layer(view, b, edges, used, True, gap)
    before = _next_layer(view, a, edges, used | set(after[0] if after else ()), False, gap)
    steps = [x for x in (before and before[1], edges, after and after[1]) if x]
    chance = _layers_by_chance(view, steps, lambda e: e.src)
    chance = min(1.0, chance * len(FAN_GAPS))
    if chance > CHANCE:  # what these accounts do anyway
        return None
    if after is None and before is None:
        if len(used) < MIN_LAYER_ACCOUNTS:  # a lone square: what chance builds
            return None
        return chance, TypologyMatch("bipartite", tuple(sorted(used)), _ids(edges),
                                     f"{len(a)} accounts each pay several of the same {len(b)} accounts",
                                     (_ids(edges),), _confidence(chance))
    layers = [x for x in (before and before[0], a, b, after and after[0]) if x]
    return chance, TypologyMatch("stack", tuple(sorted({y for lay in layers for y in lay})),
                                 _ids(e for st in steps for e in st),
                                 f"money moves through {len(layers)} layers of "
                                 f"{', '.join(str(len(lay)) for lay in layers)} accounts",
                                 tuple(_ids(st) for st in steps), _confidence(chance))


# ------------------------------------------------------------------ cycle and chains (the shared search)


def _paths(view: _View, v: str, forward: bool, over: bool = False) -> list[tuple[GraphEdge, ...]]:
    """Time-respecting paths of one-off transfers from ``v``: ``forward``, the money it paid on
    (each transfer after the one before, within MAX_HOP_HORIZON), else back to where its money
    came from (each before the one after it), through distinct non-hub accounts, up to
    MAX_CYCLE_HOPS transfers; a path back is listed from ``v`` outwards. ``over``: a path may pass over one
    relationship (:func:`_first_to_each`: the first transfer to each regular counterparty after
    the money arrived), not on its first step (``v``'s own relationships are its every-day
    business): laundering also moves over existing accounts' ordinary channels, and such a hop is
    judged by the pair's own habit (:func:`_pass_on_chance`). At most PATH_LABELS paths
    reach an account (the fewest hops first) and PATH_FANOUT leave one (what passes on the
    amount most closely first, then the soonest), PATH_BUDGET paths in all. A path that comes back
    to ``v`` ends there (a cycle; forward only)."""
    d = "out" if forward else "in"

    def far(e: GraphEdge) -> str:
        return e.dst if forward else e.src

    out: list[tuple[GraphEdge, ...]] = []
    frontier: list[tuple[GraphEdge, ...]] = [()]
    reached: dict[str, int] = {}
    crossed: set[tuple[GraphEdge, ...]] = set()  # paths that passed over a relationship
    for _ in range(MAX_CYCLE_HOPS):
        nxt: list[tuple[GraphEdge, ...]] = []
        ends = {v if not p else far(p[-1]) for p in frontier}
        edges_of = view.one_off(sorted(ends), d)
        for path in frontier:
            end = v if not path else far(path[-1])
            seen = {v, *(far(e) for e in path)}
            cands = []
            ways = edges_of[end]
            if over and path and path not in crossed:
                ways = (*ways, *_first_to_each(view.relationships(end, d), path[-1], forward))
            for e in ways:
                if path:
                    last = path[-1]
                    ok = (last.timestamp <= e.timestamp <= last.timestamp + MAX_HOP_HORIZON if forward
                          else last.timestamp - MAX_HOP_HORIZON <= e.timestamp <= last.timestamp)
                    if not ok:
                        continue
                if far(e) == v:
                    if forward and len(path) + 1 >= MIN_CYCLE_HOPS:
                        out.append((*path, e))
                    continue
                if far(e) in seen:
                    continue
                if path:
                    a, b = (path[-1], e) if forward else (e, path[-1])
                    rank = (conservation(_cents(a), _cents(b)), abs(e.micros - path[-1].micros))
                else:
                    rank = (0.0, 0)
                cands.append((rank, e.event_id, e))
            for _, _, e in sorted(cands, key=lambda c: c[:2])[:PATH_FANOUT]:
                if reached.get(far(e), 0) >= PATH_LABELS or view.is_hub(far(e)):
                    continue
                reached[far(e)] = reached.get(far(e), 0) + 1
                longer = (*path, e)
                if path in crossed or (over and view.is_relationship(e)):
                    crossed.add(longer)
                nxt.append(longer)
                out.append(longer)
                if len(out) >= PATH_BUDGET:
                    return out
        frontier = nxt
        if not frontier:
            break
    return out


def _first_to_each(regular: Sequence[GraphEdge], last: GraphEdge, forward: bool) -> list[GraphEdge]:
    """Of an account's ``regular`` transfers (time order), the first to each counterparty within
    :data:`~auditflow.typologies.MAX_HOP_HORIZON` after ``last`` arrived (``forward``), else the
    last from each within it before ``last`` left: the one way on (or back) over each of its
    relationships a search takes."""
    if forward:
        near = _between(regular, last.micros, to_micros(last.timestamp + MAX_HOP_HORIZON))
    else:
        near = _between(regular, to_micros(last.timestamp - MAX_HOP_HORIZON), last.micros)[::-1]
    chosen: dict[str, GraphEdge] = {}
    for e in near:
        chosen.setdefault(e.dst if forward else e.src, e)
    return list(chosen.values())


def _accounts(path: Sequence[GraphEdge]) -> list[str]:
    return [path[0].src, *(e.dst for e in path)]


def _chance_of_path(view: _View, path: Sequence[GraphEdge], cache: dict[tuple[str, str], float],
                    every_hop: bool = False, over: bool = False, ring: bool = False) -> float:
    """How likely a path like this one is by chance: its hops' :func:`_hop_chance` (each at most
    1, computed once per search) combined by :func:`_combined`; ``every_hop``: by the largest of
    them instead, ``max ** hops`` (the exact chance that ``hops`` independent uniform chances are
    all that small) -- a chain is a chain of pass-ons only if every hop is one, and one very
    unlikely hop among ordinary payments makes no chain. ``ring``: a path with a hop that is no
    evidence at all (chance 1: its intermediate makes such a payment anyway, among as many ways
    on as the search had) is as likely as can be (1) -- money that returns only through
    everyday payments does not return: a strong chain closed by them is the chain.

    >>> f"{_combined([1e-6, 0.5, 0.5]):.2e}", 0.5 ** 3
    ('3.29e-05', 0.125)
    """
    ps = []
    for a, b in zip(path, path[1:], strict=False):
        key = (a.event_id, b.event_id)
        if key not in cache:
            cache[key] = min(1.0, _hop_chance(view, a, b, over))
        ps.append(cache[key])
    if every_hop:
        return max(ps, default=1.0) ** len(ps)
    if ring and max(ps, default=1.0) >= 1.0:
        return 1.0
    return _combined(ps)


def _combined(chances: Sequence[float]) -> float:
    """The chance that independent tests, each as likely as its own chance under no laundering
    (uniform), give a product at most that of ``chances``: ``x * sum((-ln x)^k / k!)`` for ``k``
    below their number, ``x`` the product (Fisher's method, exact). Multiplying chances alone
    would make any long enough path of ordinary hops look improbable: ten hops each as likely
    as not multiply to 0.001, which ten uniform chances do five times in six.

    >>> round(_combined([0.5] * 10), 3), _combined([0.001]), round(_combined([1e-3, 1e-3]), 7)
    (0.837, 0.001, 1.48e-05)
    """
    x = math.prod(chances)
    if x <= 0.0:
        return 0.0
    term = total = 1.0
    for k in range(1, len(chances)):
        term *= -math.log(x) / k
        total += term
    return min(1.0, x * total)


def _cycle_and_chain(view: _View, v: str) -> tuple[TypologyMatch | None, TypologyMatch | None]:
    """The least likely cycle through ``v`` and the least likely chain through it (each judged
    by its hops' :func:`_hop_chance`, :func:`_chance_of_path`, times the searches' starts, at most
    CHANCE). Two searches (:func:`_search`): over one-off transfers only, and one that may pass
    over a relationship (rings only), sharing CHANCE between them (:data:`OVER_RELATIONSHIP_SHARE`)."""
    if view.is_hub(v):
        return None, None
    # where the searches start: each of v's one-off transfers (the hops beyond are counted by
    # _hop_chance)
    starts = max(1, len(view.one_off([v], "out")[v]) + len(view.one_off([v], "in")[v]))
    cycle, chain = _search(view, v, starts, over=False)
    ring, _ = _search(view, v, starts, over=True)
    if ring is not None and (cycle is None or (ring.confidence or 0.0) > (cycle.confidence or 0.0)):
        cycle = ring
    return cycle, chain


def _search(view: _View, v: str, starts: int, over: bool
            ) -> tuple[TypologyMatch | None, TypologyMatch | None]:
    """The least likely cycle and chain through ``v`` of one search (:func:`_paths`): over one-off
    transfers (``over`` false: cycles judged by Fisher's product of their hops, chains by their
    least telling hop), or passing over one relationship (``over``: rings that do, each judged by
    its least telling hop -- its pair pays anyway, and everyday payments closing round a strong
    chain are that chain -- and no chains: a relationship's hop is evidence where the money
    comes back round it, not for a line of payments). Each search's chances are divided by its
    share of CHANCE (a weighted Bonferroni over the two)."""
    down, up = _paths(view, v, True, over), _paths(view, v, False, over)
    tries = starts / (OVER_RELATIONSHIP_SHARE if over else 1.0 - OVER_RELATIONSHIP_SHARE)
    cache: dict[tuple[str, str], float] = {}

    def crosses(path: Sequence[GraphEdge]) -> bool:
        return any(map(view.is_relationship, path))

    cycles: list[tuple[GraphEdge, ...]] = [p for p in down if p[-1].dst == v]
    by_start: dict[str, list[tuple[GraphEdge, ...]]] = {}
    for p in up:  # listed from v outwards: the money's way, reversed
        by_start.setdefault(p[-1].src, []).append(tuple(reversed(p)))
    for p in down:
        if p[-1].dst == v:
            continue
        for back in by_start.get(p[-1].dst, ()):  # v -> ... -> s, then s -> ... -> v before it
            if not back[-1].timestamp <= p[0].timestamp <= back[-1].timestamp + MAX_HOP_HORIZON:
                continue  # v passes on what reached it, after it did
            path = (*back, *p)
            accounts = _accounts(path)
            if (MIN_CYCLE_HOPS <= len(path) <= MAX_CYCLE_HOPS and accounts[0] == accounts[-1]
                    and len(set(accounts[:-1])) == len(path)):
                cycles.append(path)
    if over:
        cycles = [c for c in cycles if crosses(c)]
    cycle = None
    if cycles:
        chance, _, best = min((_chance_of_path(view, c, cache, every_hop=over, over=over, ring=True) * tries,
                               [e.event_id for e in c], c) for c in cycles)
        if chance <= CHANCE:
            cycle = _ring(best, chance)
    # chains: a way in, v, a way out (either may be empty), through distinct accounts
    outs = [p for p in down if p[-1].dst != v]
    ins = [tuple(reversed(p)) for p in up]
    top_out = sorted(outs, key=lambda p: (_chance_of_path(view, p, cache, over=over), -len(p)))[:CHAIN_SIDES]
    top_in = sorted(ins, key=lambda p: (_chance_of_path(view, p, cache, over=over), -len(p)))[:CHAIN_SIDES]
    chains: list[tuple[GraphEdge, ...]] = [p for p in (*outs, *ins) if len(p) >= MIN_CHAIN_HOPS]
    for before in top_in:
        for after in top_out:
            path = (*before, *after)
            if (before[-1].timestamp <= after[0].timestamp <= before[-1].timestamp + MAX_HOP_HORIZON
                    and len(path) >= MIN_CHAIN_HOPS and len(set(_accounts(path))) == len(path) + 1):
                chains.append(path)
    if over:
        chains = [c for c in chains if crosses(c)]
    chain = None
    if chains:
        chance, _, best = min((_chance_of_path(view, c, cache, every_hop=True, over=over) * tries,
                               [e.event_id for e in c], c) for c in chains)
        ring = _closing(view, best) if chance <= CHANCE else None
        if ring is not None:
            # the closing transfer is a step of the ring too: some evidence of a pass-on
            a, b = (ring[-2], ring[-1]) if ring[0] is best[0] else (ring[0], ring[1])
            if _hop_chance(view, a, b, over) >= 1.0:
                ring = None
        if ring is not None and (cycle is None or _confidence(chance) > (cycle.confidence or 0.0)):
            # the chain's ends pay each other in time order: a cycle the search from v could not
            # close within its reach -- reported as the cycle
            return _ring(ring, chance), None
        if chance <= CHANCE and not over:
            chain = TypologyMatch("random", tuple(_accounts(best)), tuple(e.event_id for e in best),
                                  f"{v} lies on a time-ordered chain of {len(best)} transfers over "
                                  f"{_span(best)}, each passing the money on",
                                  tuple((e.event_id,) for e in best), _confidence(chance))
    return cycle, chain


def _ring(path: Sequence[GraphEdge], chance: float) -> TypologyMatch:
    accounts = tuple(_accounts(path)[:-1])
    return TypologyMatch("cycle", accounts, tuple(e.event_id for e in path),
                         f"money from {accounts[0]} returns to it in {len(path)} hops over "
                         f"{_span(path)}, passed on at every hop",
                         tuple((e.event_id,) for e in path), _confidence(chance))


def _closing(view: _View, path: Sequence[GraphEdge]) -> tuple[GraphEdge, ...] | None:
    """``path`` closed into a ring by a transfer from its last payee to its first payer: after the
    last hop (the ring then starts where the path does) or before the first (it starts at the
    last payee, whose money the path carried round), within
    :data:`~auditflow.typologies.MAX_HOP_HORIZON` of it; None if there is none or the ring would
    have more than MAX_CYCLE_HOPS transfers. The closing transfer may be one of a relationship
    (the ring's evidence is the chain's, already judged; that its end pays its start at all is
    the shape): laundering rings close over existing accounts' ordinary channels too."""
    if len(path) + 1 > MAX_CYCLE_HOPS:
        return None
    first, last = path[0], path[-1]
    view.one_off([last.dst], "out")  # loaded
    for e in view._raw(last.dst, "out"):
        if e.dst != first.src:
            continue
        if last.timestamp <= e.timestamp <= last.timestamp + MAX_HOP_HORIZON:
            return (*path, e)
        if first.timestamp - MAX_HOP_HORIZON <= e.timestamp <= first.timestamp:
            return (e, *path)
    return None


def _span(path: Sequence[GraphEdge]) -> str:
    hours = (path[-1].timestamp - path[0].timestamp) / timedelta(hours=1)
    return f"{hours:.0f} hours" if hours < 48 else f"{hours / 24:.0f} days"


# ------------------------------------------------------------------ all together


#: How specific each shape is: a fan inside a scatter-gather is its scatter, a bipartite or a
#: gather-scatter inside a stack is one of its layers.
_SPECIFICITY = {"random": 0, "fan-out": 1, "fan-in": 1, "cycle": 2, "scatter-gather": 2,
                "gather-scatter": 2, "bipartite": 2, "stack": 3}


def findings_of_transfer(matches: Iterable[TypologyMatch], event_id: str) -> list[TypologyMatch]:
    """The findings the transfer ``event_id`` is a member of: what an alert on that transfer is
    shown (a shape around its account that its own transfer takes no part in is not its evidence).

    >>> m = TypologyMatch("cycle", ("A", "B", "C"), ("e1", "e2", "e3"), "")
    >>> [x.typology for x in findings_of_transfer([m], "e2")], findings_of_transfer([m], "e9")
    (['cycle'], [])
    """
    return [m for m in matches if event_id in m.event_ids]


def _edge(view: _View, event_id: str) -> GraphEdge:
    return view.edge(event_id)



def detect_typologies(
    store: GraphStore,
    node_id: str,
    window: tuple[datetime | None, datetime | None] | None = None,
    *,
    hub_degree: int = TYPOLOGY_HUB_DEGREE,
) -> list[TypologyMatch]:
    """Every typology instance ``node_id`` takes part in (see the module docstring), in
    TYPOLOGIES order."""
    if isinstance(hub_degree, bool) or not isinstance(hub_degree, int) or hub_degree < 1:
        raise ValueError(f"hub_degree={hub_degree!r}: expected a positive int")
    start, end = window if window is not None else (None, None)
    check_window(start, end)
    view = _View(store, start, end, hub_degree)
    if view.is_hub(node_id):
        return []
    payers = [e.src for e in view.one_off([node_id], "in")[node_id]]
    payees = [e.dst for e in view.one_off([node_id], "out")[node_id]]
    found: dict[tuple[str, tuple[str, ...]], TypologyMatch] = {}

    def add(m: TypologyMatch | None) -> None:
        if m is None:  # shapes around the account it takes no part in still explain its neighbours'
            return
        found.setdefault((m.typology, m.event_ids), m)

    layered: list[str] = []  # centers of shapes around the account, which may be a stack's layer
    fans = [*((c, "out") for c in dict.fromkeys([node_id, *payers])),  # every fan the query tests
            *((c, "in") for c in dict.fromkeys([node_id, *payees]))]
    for center, direction in fans:
        for m in _fans(view, center, direction, len(fans)):
            add(m)
            if center != node_id:
                layered.append(center)
    for center in dict.fromkeys([node_id, *payers, *payees]):
        m = _gather_scatter(view, center)
        add(m)
        if m is not None and center != node_id:
            layered.append(center)
    for center in dict.fromkeys(layered):  # a fan or gather-scatter may be a layer of a stack around it
        for m in _bipartite_and_stack(view, center):
            add(m)
    for source in dict.fromkeys([node_id, *payers]):  # the account as source or intermediate
        add(_scatter_gather(view, source, "out"))
    add(_scatter_gather(view, node_id, "in"))  # as sink
    for m in _bipartite_and_stack(view, node_id):
        add(m)
    for m in _cycle_and_chain(view, node_id):
        add(m)  # a chain is kept only where no more specific shape explains it

    # one finding per instance: a shape mostly inside a more specific one is that shape, and one
    # inside a larger one of its own kind is that one (seen from two sides a shape may be cut
    # differently: a stack's first layer counted back from what its second passed on)
    ranked = [(m.typology, _SPECIFICITY[m.typology], set(m.event_ids)) for m in found.values()]
    matches = []
    for m in found.values():
        ids, rank = set(m.event_ids), _SPECIFICITY[m.typology]
        if node_id in m.accounts and not any((r > rank and len(ids & other) * 2 > len(ids))
                                             or (t == m.typology and ids < other) for t, r, other in ranked):
            matches.append(m)
    order = {name: i for i, name in enumerate(TYPOLOGIES)}
    return sorted(matches, key=lambda m: (order[m.typology], m.accounts, m.event_ids))
