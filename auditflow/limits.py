"""Windows and limits the whole pipeline shares, each defined here once.

Stream features, graph features, evidence traces and typology detection all read these defaults;
:class:`auditflow_app.settings.Settings` exposes the ones an operator may change.

>>> DEFAULT_WINDOW_MINUTES, MAX_TRACE_HOPS, DEFAULT_FANOUT_CAP
(1440, 5, 50)
>>> FEATURE_WINDOWS
(('1h', 60), ('24h', 1440), ('7d', 10080))
"""

from __future__ import annotations

from datetime import datetime, timedelta

MINUTES_PER_HOUR = 60
MINUTES_PER_DAY = 24 * MINUTES_PER_HOUR

# ---------------------------------------------------------------- windows

#: The main feature window, in minutes: 24 hours (the stream features' middle window; the window
#: in which the graph features count counterparties of similar amounts).
DEFAULT_WINDOW_MINUTES = MINUTES_PER_DAY
#: The short (velocity) window of the stream features: one hour.
SHORT_WINDOW_MINUTES = MINUTES_PER_HOUR
#: The long window of the stream features (and their state expiry, account age), and the window
#: in which the graph features count new counterparties: seven days.
LONG_WINDOW_MINUTES = 7 * MINUTES_PER_DAY
#: The stream features' windows, shortest first: (name suffix, length in minutes). The last is the
#: longest (``LONG_WINDOW_MINUTES``); each account keeps one buffer of legs for it.
FEATURE_WINDOWS: tuple[tuple[str, int], ...] = (
    ("1h", SHORT_WINDOW_MINUTES),
    ("24h", DEFAULT_WINDOW_MINUTES),
    ("7d", LONG_WINDOW_MINUTES),
)
#: Evidence traces follow the money forward from the alerted transfer for this long.
DEFAULT_TRACE_HORIZON = timedelta(days=3)
#: Typology detection looks this far either side of the alerted transfer: the longest horizon the
#: detectors follow (``auditflow.typologies.MAX_HOP_HORIZON``, three weeks), so a shape spread over
#: weeks that the alerted transfer belongs to is in view.
DEFAULT_TYPOLOGY_WINDOW = timedelta(days=21)

# ---------------------------------------------------------------- limits

#: Evidence traces go at most this many hops from the alerted account.
MAX_TRACE_HOPS = 5
#: Edges an evidence trace keeps per account and hop (the most relevant: largest amounts, soonest
#: after the money arrived) unless configured.
DEFAULT_FANOUT_CAP = 50
#: An account with more transfers than this in one hop's time window is a hub: the temporal search
#: (traces, the cycle graph feature) reports it and does not expand it (payment processors,
#: merchants, exchanges). Typology detection bounds something else, distinct counterparties over
#: its whole window (:data:`auditflow.typologies.TYPOLOGY_HUB_DEGREE`).
DEFAULT_HUB_DEGREE = 200
#: Along a traced path, each transfer follows the one that brought the money within this long.
#: Wider than the typologies' step (:data:`auditflow.typologies.HOP_HORIZON`, 24 hours): a trace
#: shows where the money may have gone, a typology asserts the steps of one layering operation.
TRACE_HOP_HORIZON = timedelta(days=2)
#: Global budgets of one trace: accounts, transfers, wall time (seconds). A trace that reaches
#: one stops there and records where and why.
DEFAULT_TRACE_MAX_NODES = 500
DEFAULT_TRACE_MAX_EDGES = 2_000
DEFAULT_TRACE_MAX_SECONDS = 2.0
#: A money trail (:mod:`evidence_graph.trail`) follows only the transfers that carry at least this
#: share of the alerted amount (a decimal string: shares are exact fractions); smaller ones are
#: counted and totalled.
DEFAULT_TRAIL_MIN_SHARE = "0.01"
#: Accounts a report shows first from a money trail; the rest are summarised.
DEFAULT_TRAIL_HEADLINE = 30
#: Per-account cap on legs kept in the stream feature windows (all of them together, oldest
#: dropped first): bounds memory on hub accounts.
MAX_WINDOW_LEGS = 20_000
#: Amounts kept per account for its median and repeated-amount count.
RECENT_LEGS = 32
#: Edges each account contributes to one graph-feature query (earliest first). Generous: degrees
#: over 28 days; on busier accounts the counts saturate, deterministically.
GRAPH_FEATURE_NEIGHBOR_CAP = 2_000

# ---------------------------------------------------------------- event time in the stream job

#: Watermarks trail the largest event time seen by this much (bounded out-of-orderness).
DEFAULT_OUT_OF_ORDERNESS_MS = 60 * 60 * 1000
#: A record whose event time plus this is at or behind the watermark is late: split off and
#: counted, never applied out of order. Legs wait this long past the watermark before they apply.
DEFAULT_ALLOWED_LATENESS_MS = 0

# ---------------------------------------------------------------- plausible event times

#: Event times ingestion accepts: from (inclusive) .. to (exclusive). A timestamp outside is a
#: reject naming the field: a year-9999 record would otherwise push the stream job's watermark
#: so far ahead that every later record is late. Wide enough for the public AMLworld data
#: (2022-2023) and any realistic bank data; narrow it per deployment (settings).
DEFAULT_EVENT_TIME_WINDOW: tuple[datetime, datetime] = (datetime(1970, 1, 1), datetime(2100, 1, 1))
