"""The vocabulary of features, defined once: names, order and the human-readable text of every
model input. The stream job (:mod:`pipelines.features`) and the graph side
(:mod:`evidence_graph.graph_features`) compute them; the model service trains on them and turns
them into reason codes; the reports print their descriptions.

The stream features are the multi-scale v2 set: per account, counts, USD sums, fan-out/fan-in,
pass-through and net outflow in each of :data:`auditflow.limits.FEATURE_WINDOWS` (1 h, 24 h,
7 days), then velocity, counterparty novelty, the other-way flow, amount history and lifetime
(exact semantics: :mod:`pipelines.features`).

>>> FEATURE_NAMES[:2], len(FEATURE_NAMES) == len(set(FEATURE_NAMES))
(('amount_usd', 'cross_currency'), True)
>>> set(FEATURE_DESCRIPTIONS) == set(FEATURE_NAMES), set(GRAPH_FEATURE_DESCRIPTIONS) == set(GRAPH_FEATURE_NAMES)
(True, True)
>>> len(ACCOUNT_FEATURES), len(FEATURE_NAMES), ACCOUNT_FEATURES[:3]
(37, 80, ('out_n_1h', 'in_n_1h', 'out_usd_1h'))
>>> FEATURE_DESCRIPTIONS["snd_out_n_24h"]
'sender: outgoing transfers in the last 24 hours'
"""

from __future__ import annotations

from collections.abc import Mapping

from auditflow.limits import FEATURE_WINDOWS, LONG_WINDOW_MINUTES, MINUTES_PER_DAY, RECENT_LEGS
from auditflow.records import PAYMENT_FORMATS
from auditflow.typologies import AMOUNT_TOLERANCE, HOP_HORIZON, MAX_FEE, SPLIT_RATIO

#: The per-window aggregates, repeated for each window suffix of ``FEATURE_WINDOWS`` in order.
WINDOW_FEATURES = ("out_n", "in_n", "out_usd", "in_usd", "out_cp", "in_cp", "pass", "net")
#: The windows (suffixes of ``FEATURE_WINDOWS``) of ``cp_legs_*`` and ``new_frac_*``.
COUNTERPARTY_WINDOWS = ("24h", "7d")

#: Per-account features, one value each as of the leg (the leg included unless said otherwise).
ACCOUNT_FEATURES: tuple[str, ...] = (
    *(f"{f}_{s}" for s, _ in FEATURE_WINDOWS for f in WINDOW_FEATURES),
    "burst",
    "gap_min",
    *(f"cp_legs_{s}" for s in COUNTERPARTY_WINDOWS),
    "cp_new",
    *(f"new_frac_{s}" for s in COUNTERPARTY_WINDOWS),
    "since_opp_min",
    "opp_ratio",
    "amt_vs_med",
    "same_amt",
    "age_min",
    "n_life",
)
EVENT_FEATURES = ("amount_usd", "cross_currency", "self_transfer", "format", "hour", "round_amount")
FEATURE_NAMES: tuple[str, ...] = (
    *EVENT_FEATURES,
    *(f"snd_{f}" for f in ACCOUNT_FEATURES),
    *(f"rcv_{f}" for f in ACCOUNT_FEATURES),
)


def span_text(minutes: int) -> str:
    """A window length as an investigator reads it.

    >>> [span_text(m) for m in (60, 90, 1440, 10080, 180, 2880)]
    ['hour', '90 minutes', '24 hours', '7 days', '3 hours', '2 days']
    """
    if minutes == 60:
        return "hour"
    if minutes % 1440 == 0 and minutes > 1440:
        return f"{minutes // 1440} days"
    if minutes % 60 == 0:
        return f"{minutes // 60} hours"
    return f"{minutes} minutes"


_SPAN = {s: span_text(m) for s, m in FEATURE_WINDOWS}
_LONG = span_text(LONG_WINDOW_MINUTES)

FEATURE_DESCRIPTIONS: dict[str, str] = {
    "amount_usd": "amount paid, in USD",
    "cross_currency": "paid and received currencies differ",
    "self_transfer": "sender and receiver are the same account",
    "format": "payment format code",
    "hour": "hour of day",
    "round_amount": "amount paid is a multiple of 100",
}
for _side, _who, _cp, _with, _other in (
    ("snd", "sender", "payee", "to", "received"),
    ("rcv", "receiver", "payer", "from", "sent"),
):
    _d: dict[str, str] = {}
    for _s, _ in FEATURE_WINDOWS:
        _in = f"in the last {_SPAN[_s]}"
        _d |= {
            f"out_n_{_s}": f"{_who}: outgoing transfers {_in}",
            f"in_n_{_s}": f"{_who}: incoming transfers {_in}",
            f"out_usd_{_s}": f"{_who}: USD sent {_in}",
            f"in_usd_{_s}": f"{_who}: USD received {_in}",
            f"out_cp_{_s}": f"{_who}: distinct payees {_in} (fan-out)",
            f"in_cp_{_s}": f"{_who}: distinct payers {_in} (fan-in)",
            f"pass_{_s}": (
                f"{_who}: pass-through {_in}: the smaller of USD received and USD sent over the larger "
                "(1: as much out as in; 0: one way only)"
            ),
            f"net_{_s}": (f"{_who}: net outflow {_in}: (USD sent - USD received) / (USD sent + USD received)"),
        }
    _first, _last = FEATURE_WINDOWS[0][0], FEATURE_WINDOWS[-1][0]
    _d |= {
        "burst": (
            f"{_who}: transfers in the last {_SPAN[_first]} against its average per {_SPAN[_first]} "
            f"over the last {_SPAN[_last]} (1: steady, higher: a burst)"
        ),
        "gap_min": f"{_who}: minutes since its previous transfer (at most {_LONG})",
    }
    for _s in COUNTERPARTY_WINDOWS:
        _d[f"cp_legs_{_s}"] = f"{_who}: transfers {_with} this {_cp} in the last {_SPAN[_s]}, this one included"
    _d["cp_new"] = f"{_who}: first dealing with this {_cp} in {_LONG} (either direction)"
    for _s in COUNTERPARTY_WINDOWS:
        _d[f"new_frac_{_s}"] = (
            f"{_who}: share of its transfers in the last {_SPAN[_s]} that were with counterparties new to it"
        )
    _d |= {
        "since_opp_min": f"{_who}: minutes since it last {_other} money ({_LONG} if not in the last {_LONG})",
        "opp_ratio": f"{_who}: this amount / the last amount it {_other} in the last {_LONG} (-1: none)",
        "amt_vs_med": f"{_who}: this amount / median of its previous {RECENT_LEGS} transfers (-1: none)",
        "same_amt": f"{_who}: of its previous {RECENT_LEGS} transfers, how many had this exact amount",
        "age_min": f"{_who}: minutes since first seen (at most {_LONG}; {_LONG} idle starts it over)",
        "n_life": f"{_who}: transfers since first seen ({_LONG} idle starts it over)",
    }
    assert tuple(_d) == ACCOUNT_FEATURES, "descriptions out of step with ACCOUNT_FEATURES"
    FEATURE_DESCRIPTIONS |= {f"{_side}_{k}": v for k, v in _d.items()}

#: How far back each stream input looks, in minutes: 0 for the transfer's own fields, the window
#: of a windowed aggregate, :data:`LONG_WINDOW_MINUTES` for what an account's state keeps (gaps,
#: novelty, amount history, age: seven idle days start it over), None for a count that grows as long
#: as the account keeps dealing (``n_life``). Drift is judged only on inputs whose memory the
#: reference spans several times (:func:`auditflow.drift.monitored_features`).
_ACCOUNT_MEMORY: dict[str, int | None] = {
    **{f"{f}_{s}": m for s, m in FEATURE_WINDOWS for f in WINDOW_FEATURES},
    "burst": LONG_WINDOW_MINUTES,
    "gap_min": LONG_WINDOW_MINUTES,
    **{f"cp_legs_{s}": m for s, m in FEATURE_WINDOWS if s in COUNTERPARTY_WINDOWS},
    "cp_new": LONG_WINDOW_MINUTES,
    **{f"new_frac_{s}": m for s, m in FEATURE_WINDOWS if s in COUNTERPARTY_WINDOWS},
    "since_opp_min": LONG_WINDOW_MINUTES,
    "opp_ratio": LONG_WINDOW_MINUTES,
    "amt_vs_med": LONG_WINDOW_MINUTES,
    "same_amt": LONG_WINDOW_MINUTES,
    "age_min": LONG_WINDOW_MINUTES,
    "n_life": None,
}
assert tuple(_ACCOUNT_MEMORY) == ACCOUNT_FEATURES, "memories out of step with ACCOUNT_FEATURES"
FEATURE_MEMORY_MINUTES: dict[str, int | None] = {
    **{f: 0 for f in EVENT_FEATURES},
    **{f"{side}_{k}": v for side in ("snd", "rcv") for k, v in _ACCOUNT_MEMORY.items()},
}

# ---------------------------------------------------------------- graph features

#: Windows of the graph features' degrees: (name suffix, minutes). Days to weeks: laundering
#: shapes are spread over that long.
GRAPH_WINDOWS: tuple[tuple[str, int], ...] = (
    ("24h", MINUTES_PER_DAY),
    ("7d", 7 * MINUTES_PER_DAY),
    ("28d", 28 * MINUTES_PER_DAY),
)
#: The window of the shape features (cycles, scatter-gather, gather-scatter, two-hop reach,
#: amounts): seven days.
GRAPH_SHAPE_MINUTES = 7 * MINUTES_PER_DAY
#: Longest temporal cycle through a transfer the cycle feature looks for, this transfer included.
GRAPH_CYCLE_MAX_HOPS = 5
_G_DEGREES = (("snd", "out"), ("snd", "in"), ("rcv", "in"), ("rcv", "out"))

GRAPH_FEATURE_NAMES: tuple[str, ...] = (
    *(f"g_{side}_{d}_cp_{s}" for s, _ in GRAPH_WINDOWS for side, d in _G_DEGREES),
    "g_rcv_new_payers_7d",
    "g_snd_new_payees_7d",
    "g_cycle_len",
    "g_sg_width",
    "g_gs_width",
    "g_two_hop_out",
    "g_snd_in_usd_7d",
    "g_fwd_share_7d",
    "g_rcv_in_usd_7d",
    "g_rcv_in_amt_cv_7d",
    "g_snd_funding_in",
    "g_up_chain_hops",
    "g_sg_pass_width",
    "g_rcv_similar_payers_24h",
    "g_snd_similar_payees_24h",
    "g_rcv_new_similar_payers_24h",
    "g_snd_new_similar_payees_24h",
    *(f"g_{side}_{d}_cp_spike" for side, d in _G_DEGREES),
)
#: The graph features that search beyond the transfer's two accounts (cycles, scatter-gather through
#: intermediates, two-hop reach, chains of pass-through): a graph search per transfer.
MULTI_HOP_GRAPH_FEATURES: tuple[str, ...] = (
    "g_cycle_len",
    "g_sg_width",
    "g_sg_pass_width",
    "g_two_hop_out",
    "g_up_chain_hops",
)
#: The rest: each reads only the two accounts' own transfers (kept as the stream goes by
#: :class:`evidence_graph.account_features.AccountFeatures`).
ONE_HOP_GRAPH_FEATURES: tuple[str, ...] = tuple(n for n in GRAPH_FEATURE_NAMES if n not in MULTI_HOP_GRAPH_FEATURES)

_WHO = {"snd": "sender", "rcv": "receiver"}
#: The pass-through notion (:func:`auditflow.typologies.passes_on`) as descriptions and reasons word it.
PASS_SPAN = span_text(int(HOP_HORIZON.total_seconds()) // 60)
PASS_RANGE = f"{100 * (1 - MAX_FEE):g}-{100 * (1 + AMOUNT_TOLERANCE):g}%"
_BEFORE = "before this transfer (earlier minutes only)"
GRAPH_FEATURE_DESCRIPTIONS: dict[str, str] = {}
for _s, _m in GRAPH_WINDOWS:
    for _side, _way in _G_DEGREES:
        GRAPH_FEATURE_DESCRIPTIONS[f"g_{_side}_{_way}_cp_{_s}"] = (
            f"{_WHO[_side]}: distinct {'payees' if _way == 'out' else 'payers'} in the {span_text(_m)} {_BEFORE}"
        )
GRAPH_FEATURE_DESCRIPTIONS |= {
    "g_rcv_new_payers_7d": "receiver: payers of the last 7 days that had not paid it in the 21 days before",
    "g_snd_new_payees_7d": "sender: payees of the last 7 days it had not paid in the 21 days before",
    "g_cycle_len": (
        f"hops of the shortest temporal cycle this transfer closes (at most {GRAPH_CYCLE_MAX_HOPS}): money "
        "left the receiver and reached the sender through time-ordered transfers in the 7 days before; "
        "1 for a self-transfer, 0 if none"
    ),
    "g_sg_width": (
        "scatter-gather closed at the receiver: the most distinct intermediates (the sender included) "
        "through which one source paid the receiver in the 7 days before, each paid before it paid on"
    ),
    "g_gs_width": (
        "gather-scatter through the sender: min(distinct payers, distinct payees since its first "
        "receipt, this payee included) in the 7 days before, where both are at least 2, else 0"
    ),
    "g_two_hop_out": (
        "distinct accounts the sender paid in the 7 days before or pays now, and their payees in the 7 days "
        "before (itself excluded)"
    ),
    "g_snd_in_usd_7d": "sender: USD received in the 7 days before",
    "g_fwd_share_7d": "this amount over the USD the sender received in the 7 days before (-1: it received none)",
    "g_rcv_in_usd_7d": "receiver: USD received in the 7 days before",
    "g_rcv_in_amt_cv_7d": (
        "receiver: coefficient of variation of the amounts it received in the 7 days before and this one "
        "(low: similar amounts; 0 with fewer than 2)"
    ),
    "g_snd_funding_in": (
        f"sender: transfers it received in the {PASS_SPAN} before that this one passes on (it pays on "
        f"{PASS_RANGE} of what arrived)"
    ),
    "g_up_chain_hops": (
        f"hops upstream the money of this transfer can be followed through pass-through transfers (each "
        f"passing on {PASS_RANGE} of the one before, within {PASS_SPAN}), at most {GRAPH_CYCLE_MAX_HOPS - 1}"
    ),
    "g_sg_pass_width": (
        "scatter-gather closed at the receiver with the money passed on: the most distinct intermediates "
        f"(the sender included) that each passed on to the receiver, within {PASS_SPAN}, {PASS_RANGE} of "
        "what one source paid them in the 7 days before"
    ),
    "g_rcv_similar_payers_24h": (
        f"receiver: distinct payers in the 24 hours before that paid it an amount within a factor "
        f"{SPLIT_RATIO:g} of this one"
    ),
    "g_snd_similar_payees_24h": (
        f"sender: distinct payees in the 24 hours before that it paid an amount within a factor "
        f"{SPLIT_RATIO:g} of this one"
    ),
    "g_rcv_new_similar_payers_24h": (
        f"receiver: distinct payers in the 24 hours before that paid it an amount within a factor "
        f"{SPLIT_RATIO:g} of this one and had not paid it in the 27 days before that"
    ),
    "g_snd_new_similar_payees_24h": (
        f"sender: distinct payees in the 24 hours before that it paid an amount within a factor "
        f"{SPLIT_RATIO:g} of this one and had not paid in the 27 days before that"
    ),
}
for _side, _way in _G_DEGREES:
    GRAPH_FEATURE_DESCRIPTIONS[f"g_{_side}_{_way}_cp_spike"] = (
        f"{_WHO[_side]}: distinct {'payees' if _way == 'out' else 'payers'} in the 24 hours before over those "
        "of the 28 days before per day of activity (the days since its first transfer there, at least one; "
        "the rate taken as at least 1): counterparties arriving faster than the account gathers them over weeks"
    )
assert tuple(GRAPH_FEATURE_DESCRIPTIONS) == GRAPH_FEATURE_NAMES

# ---------------------------------------------------------------- model inputs

#: Stream features the models never use: ``hour`` (when a generator plants its patterns says
#: nothing about a bank's data) and ``format`` (a code number, not a quantity); the payment format
#: enters by name instead (:data:`FORMAT_FEATURES`).
EXCLUDED_FROM_MODELS = ("hour", "format")


def format_feature(payment_format: str) -> str:
    """The one-hot feature of a payment format, by name.

    >>> format_feature("Credit Card")
    'fmt_credit_card'
    """
    return "fmt_" + payment_format.lower().replace(" ", "_")


FORMAT_FEATURES: tuple[str, ...] = tuple(format_feature(f) for f in PAYMENT_FORMATS)
#: The models' stream inputs: the stream vector less the excluded fields, plus the format by name.
MODEL_STREAM_FEATURES: tuple[str, ...] = (
    *(n for n in FEATURE_NAMES if n not in EXCLUDED_FROM_MODELS),
    *FORMAT_FEATURES,
)
#: The no-graph baseline's inputs: the transfer's own fields only (as in the public benchmark).
BASELINE_FEATURES: tuple[str, ...] = ("amount_usd", "cross_currency", "self_transfer", "round_amount", *FORMAT_FEATURES)
MODEL_FEATURE_DESCRIPTIONS: dict[str, str] = {
    **{n: d for n, d in FEATURE_DESCRIPTIONS.items() if n not in EXCLUDED_FROM_MODELS},
    **{format_feature(f): f"paid by {f}" for f in PAYMENT_FORMATS},
}


def model_inputs(stream: Mapping[str, float]) -> dict[str, float]:
    """The :data:`MODEL_STREAM_FEATURES` of a stream feature vector (``format`` is the index in
    :data:`~auditflow.records.PAYMENT_FORMATS`).

    >>> f = model_inputs({**dict.fromkeys(FEATURE_NAMES, 0.0), "format": 2.0})
    >>> f["fmt_ach"], f["fmt_cheque"], "hour" in f
    (1.0, 0.0, False)
    """
    out = {n: float(stream[n]) for n in FEATURE_NAMES if n not in EXCLUDED_FROM_MODELS}
    code = int(stream["format"])
    for i, name in enumerate(FORMAT_FEATURES):
        out[name] = 1.0 if i == code else 0.0
    return out
