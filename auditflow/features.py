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

from auditflow.limits import CYCLE_MAX_PATH_HOPS, FEATURE_WINDOWS, LONG_WINDOW_MINUTES, RECENT_LEGS

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
for _side, _who, _cp, _with, _other in (("snd", "sender", "payee", "to", "received"),
                                        ("rcv", "receiver", "payer", "from", "sent")):
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
            f"net_{_s}": (
                f"{_who}: net outflow {_in}: (USD sent - USD received) / (USD sent + USD received)"
            ),
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
        _d[f"cp_legs_{_s}"] = (
            f"{_who}: transfers {_with} this {_cp} in the last {_SPAN[_s]}, this one included"
        )
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

# ---------------------------------------------------------------- graph features

GRAPH_FEATURE_NAMES: tuple[str, ...] = (
    "g_snd_out_degree",
    "g_rcv_in_degree",
    "g_snd_in_degree",
    "g_rcv_out_degree",
    "g_cycle_len",
    "g_sg_width",
    "g_gs_width",
    "g_two_hop_out",
)

GRAPH_FEATURE_DESCRIPTIONS: dict[str, str] = {
    "g_snd_out_degree": "sender: distinct payees in the window",
    "g_rcv_in_degree": "receiver: distinct payers in the window",
    "g_snd_in_degree": "sender: distinct payers in the window",
    "g_rcv_out_degree": "receiver: distinct payees in the window",
    "g_cycle_len": (
        "hops in the shortest directed cycle through this transfer: 1 for a self-transfer, else "
        f"1 + shortest time-ordered path receiver -> sender (money moving forward in time) of at most "
        f"{CYCLE_MAX_PATH_HOPS} hops; 0 if none"
    ),
    "g_sg_width": (
        "scatter-gather into the receiver: the most distinct intermediates m through which one "
        "source s (s, m, receiver all different) pays s -> m -> receiver"
    ),
    "g_gs_width": (
        "gather-scatter through either account: max over sender and receiver of "
        "min(distinct payers, distinct payees) where both are at least 2, else 0"
    ),
    "g_two_hop_out": "distinct accounts the sender reaches in 1 or 2 hops (itself excluded)",
}
