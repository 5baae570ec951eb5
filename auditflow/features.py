"""The vocabulary of features, defined once: names, order and the human-readable text of every
model input. The stream job (:mod:`pipelines.features`) and the graph side
(:mod:`evidence_graph.graph_features`) compute them; the model service trains on them and turns
them into reason codes; the reports print their descriptions.

>>> FEATURE_NAMES[:2], len(FEATURE_NAMES) == len(set(FEATURE_NAMES))
(('amount_usd', 'cross_currency'), True)
>>> set(FEATURE_DESCRIPTIONS) == set(FEATURE_NAMES), set(GRAPH_FEATURE_DESCRIPTIONS) == set(GRAPH_FEATURE_NAMES)
(True, True)
"""

from __future__ import annotations

from auditflow.limits import CYCLE_MAX_PATH_HOPS, MAX_LONG_COUNTERPARTIES, RECENT_LEGS

#: Per-account features, one value each as of the leg (the leg included unless said otherwise).
ACCOUNT_FEATURES = (
    # 24h window (``window_minutes``) aggregates
    "out_n",
    "out_usd",
    "out_cp",
    "in_n",
    "in_usd",
    "in_cp",
    "n_1h",
    "gap_min",
    # this leg's counterparty
    "cp_legs",
    "cp_new",
    "new_cp_frac",
    "new_out_n",
    "new_in_n",
    # 7-day counterparty memory
    "out_cp_7d",
    "in_cp_7d",
    # flow balance: money in vs money out
    "pass_ratio",
    "net_out",
    "since_opp_min",
    "opp_ratio",
    # this amount against the account's own history
    "amt_vs_med",
    "same_amt",
    # account lifetime in the stream
    "age_min",
    "n_life",
)
EVENT_FEATURES = ("amount_usd", "cross_currency", "self_transfer", "format", "hour", "round_amount")
FEATURE_NAMES: tuple[str, ...] = (
    *EVENT_FEATURES,
    *(f"snd_{f}" for f in ACCOUNT_FEATURES),
    *(f"rcv_{f}" for f in ACCOUNT_FEATURES),
)

FEATURE_DESCRIPTIONS: dict[str, str] = {
    "amount_usd": "log(1 + amount paid in USD)",
    "cross_currency": "paid and received currencies differ",
    "self_transfer": "sender and receiver are the same account",
    "format": "payment format code",
    "hour": "hour of day",
    "round_amount": "amount paid is a multiple of 100",
}
for _side, _who, _this, _cp in (("snd", "sender", "this payment out", "payee"),
                                ("rcv", "receiver", "this payment in", "payer")):
    FEATURE_DESCRIPTIONS.update(
        {
            f"{_side}_out_n": f"{_who}: outgoing transfers in 24h",
            f"{_side}_out_usd": f"{_who}: log(1 + USD sent in 24h)",
            f"{_side}_out_cp": f"{_who}: distinct payees in 24h (fan-out)",
            f"{_side}_in_n": f"{_who}: incoming transfers in 24h",
            f"{_side}_in_usd": f"{_who}: log(1 + USD received in 24h)",
            f"{_side}_in_cp": f"{_who}: distinct payers in 24h (fan-in)",
            f"{_side}_n_1h": f"{_who}: transfers in the last hour (velocity)",
            f"{_side}_gap_min": f"{_who}: minutes since previous transfer",
            f"{_side}_cp_legs": f"{_who}: transfers with this {_cp} in 24h, {_this} included",
            f"{_side}_cp_new": f"{_who}: first dealing with this {_cp} in 7 days (either direction)",
            f"{_side}_new_cp_frac": f"{_who}: share of its transfers in 24h that were with new counterparties",
            f"{_side}_new_out_n": f"{_who}: transfers to new payees in 24h",
            f"{_side}_new_in_n": f"{_who}: transfers from new payers in 24h",
            f"{_side}_out_cp_7d": f"{_who}: distinct payees in 7 days (capped at {MAX_LONG_COUNTERPARTIES})",
            f"{_side}_in_cp_7d": f"{_who}: distinct payers in 7 days (capped at {MAX_LONG_COUNTERPARTIES})",
            f"{_side}_pass_ratio": f"{_who}: min(in, out) / max(in, out) of USD moved in 24h (pass-through)",
            f"{_side}_net_out": f"{_who}: (out - in) / (out + in) of USD moved in 24h",
            f"{_side}_since_opp_min": f"{_who}: minutes since its last transfer the other way",
            f"{_side}_opp_ratio": f"{_who}: this amount / its last transfer the other way in 24h (-1: none)",
            f"{_side}_amt_vs_med": (
                f"{_who}: this amount / median of its previous {RECENT_LEGS} transfers (-1: none)"
            ),
            f"{_side}_same_amt": f"{_who}: of its previous {RECENT_LEGS} transfers, how many had this exact amount",
            f"{_side}_age_min": f"{_who}: minutes since first seen (capped at 7 days)",
            f"{_side}_n_life": f"{_who}: transfers since first seen",
        }
    )

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
        f"1 + shortest path receiver -> sender of at most {CYCLE_MAX_PATH_HOPS} hops; 0 if none"
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
