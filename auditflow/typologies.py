"""The laundering typologies, named once: the evidence graph detects them, the answer key of the
public AMLworld data labels attempts with them, the reports print them.

Names are lower-case (``fan-out``); the AMLworld ``_Patterns.txt`` files spell the same typology
in capitals (``FAN-OUT``), in this order.

>>> TYPOLOGIES[:3]
('fan-out', 'fan-in', 'gather-scatter')
>>> amlworld_label("scatter-gather"), from_amlworld_label("SCATTER-GATHER")
('SCATTER-GATHER', 'scatter-gather')
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import timedelta

from auditflow.errors import FieldError

TYPOLOGIES: tuple[str, ...] = (
    "fan-out",
    "fan-in",
    "gather-scatter",
    "scatter-gather",
    "cycle",
    "random",
    "bipartite",
    "stack",
)

#: Pass-through, the step of every layering shape: what an account passes on is at least
#: ``1 - MAX_FEE`` (a generous mule commission) and at most ``1 + AMOUNT_TOLERANCE`` (rounding,
#: exchange) of what arrived. Typology detectors and graph features use this one notion.
MAX_FEE_PERCENT = 10
AMOUNT_TOLERANCE_PERCENT = 1
MAX_FEE = MAX_FEE_PERCENT / 100
AMOUNT_TOLERANCE = AMOUNT_TOLERANCE_PERCENT / 100
#: The same band read from what was passed on: what arrived exceeds it by at most this share,
#: ``MAX_FEE / (1 - MAX_FEE)`` (about 11%; the other way, by :data:`AMOUNT_TOLERANCE`). Searches
#: that bound a running total by the amount next to it in either direction (the typologies'
#: shared path search, the layers of a stack) use this, the wider of the two.
PASSED_ON_TOLERANCE = MAX_FEE / (1 - MAX_FEE)
#: Along a shape, the next transfer follows the money within this long. (Evidence traces look
#: wider: :data:`auditflow.limits.TRACE_HOP_HORIZON`.)
HOP_HORIZON = timedelta(hours=24)
#: The typology searches look at every one of these spacings, hours to weeks: the next transfer
#: of a shape follows the money within one of them (the chance test judges each shape over its own
#: span, so a slow shape by quiet accounts is as much evidence as a fast one by busy accounts).
#: :data:`HOP_HORIZON` (a day) stays the graph features' pass-through window.
TYPOLOGY_HORIZONS: tuple[timedelta, ...] = (
    timedelta(hours=12),
    timedelta(days=1),
    timedelta(days=3),
    timedelta(days=7),
    timedelta(days=21),
)
#: The longest of them: the hop horizon of the path searches (cycles, chains, scatter-gather) and
#: the span over which an account's rate of counterparties makes it a hub.
MAX_HOP_HORIZON = TYPOLOGY_HORIZONS[-1]
#: Parts of one split sum lie within this factor of each other.
SPLIT_RATIO = 3.0
#: Distinct counterparties per :data:`TYPOLOGY_HUB_SPAN` above which an account is a hub, in no
#: shape (merchants, payroll processors, exchanges): a rate, counted over the detection window (or
#: the account's own span of transfers without a bounded one) and scaled to that span. A lifetime
#: count would make every account of a long history a hub (AMLSim: every account has 100 or more
#: counterparties over two years). (The temporal search's hub bound counts transfers
#: in one hop's window instead: :data:`auditflow.limits.DEFAULT_HUB_DEGREE`.)
TYPOLOGY_HUB_DEGREE = 100
#: The span a hub's rate of counterparties is stated per: a week of everyday life.
TYPOLOGY_HUB_SPAN = timedelta(days=7)


def passes_on(arrived: int, leaves: int) -> bool:
    """Whether ``leaves`` (US cents) passes on ``arrived`` (US cents) as layering does.

    Exact: integers only, so the bounds themselves pass.

    >>> passes_on(100_000, 96_000), passes_on(100_000, 89_999), passes_on(100_000, 101_001)
    (True, False, False)
    >>> passes_on(100_000, 90_000), passes_on(100_000, 101_000)
    (True, True)
    """
    return arrived * (100 - MAX_FEE_PERCENT) <= 100 * leaves <= arrived * (100 + AMOUNT_TOLERANCE_PERCENT)


def comparable(amounts: Iterable[int]) -> bool:
    """Whether amounts (US cents, at least one) could be parts of one split sum: all positive and
    within :data:`SPLIT_RATIO` of each other.

    >>> comparable([100, 300]), comparable([100, 301]), comparable([0, 1]), comparable([])
    (True, False, False, False)
    """
    a = list(amounts)
    return bool(a) and min(a) > 0 and max(a) <= SPLIT_RATIO * min(a)


def conservation(arrived: int, leaves: int) -> float:
    """How far ``leaves`` (US cents) is from passing on ``arrived`` exactly: ``|ln(leaves /
    arrived)|``, at least ``ln(1 / (1 - MAX_FEE))`` (a fee is no departure), infinite for a
    non-positive amount. A graded signal, not a gate: mixed funds pass on 40% or 130% of what
    arrived; the typology chance tests ask how often the account makes a transfer this close to
    what arrived anyway (the closer, the rarer, the stronger the evidence).

    >>> round(conservation(100_000, 96_000), 4), round(conservation(100_000, 50_000), 4)
    (0.1054, 0.6931)
    >>> conservation(100_000, 0)
    inf
    """
    if arrived <= 0 or leaves <= 0:
        return math.inf
    return max(abs(math.log(leaves / arrived)), -math.log(1 - MAX_FEE))


#: The same typologies as the AMLworld answer key spells them, in the same order.
AMLWORLD_LABELS: tuple[str, ...] = tuple(t.upper() for t in TYPOLOGIES)


def amlworld_label(typology: str) -> str:
    if typology not in TYPOLOGIES:
        raise FieldError("typology", typology, f"unknown typology (expected one of {', '.join(TYPOLOGIES)})")
    return typology.upper()


def from_amlworld_label(label: str) -> str:
    if label not in AMLWORLD_LABELS:
        raise FieldError("typology", label, f"unknown AMLworld typology (expected one of {', '.join(AMLWORLD_LABELS)})")
    return label.lower()
