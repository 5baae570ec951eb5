"""Windows and limits the whole pipeline shares, each defined here once.

Stream features, graph features, evidence traces and typology detection all read these defaults;
:class:`auditflow.settings.Settings` exposes the ones an operator may change.

>>> DEFAULT_WINDOW_MINUTES, MAX_TRACE_HOPS, DEFAULT_FANOUT_CAP
(1440, 5, 50)
"""

from __future__ import annotations

from datetime import timedelta

MINUTES_PER_HOUR = 60
MINUTES_PER_DAY = 24 * MINUTES_PER_HOUR

# ---------------------------------------------------------------- windows

#: The main feature window (stream and graph features), in minutes: 24 hours.
DEFAULT_WINDOW_MINUTES = MINUTES_PER_DAY
#: The short (velocity) window of the stream features: one hour.
SHORT_WINDOW_MINUTES = MINUTES_PER_HOUR
#: The long window of the stream features (counterparty memory, account age): seven days.
LONG_WINDOW_MINUTES = 7 * MINUTES_PER_DAY
#: Evidence traces follow the money forward from the alerted transfer for this long.
DEFAULT_TRACE_HORIZON = timedelta(days=3)
#: Typology detection looks this far either side of the alerted transfer.
DEFAULT_TYPOLOGY_WINDOW = timedelta(days=3)

# ---------------------------------------------------------------- limits

#: Evidence traces go at most this many hops from the alerted account.
MAX_TRACE_HOPS = 5
#: Edges an evidence trace keeps per account and hop (earliest first) unless configured.
DEFAULT_FANOUT_CAP = 50
#: Per-account cap on legs kept in the stream feature window: bounds memory on hub accounts.
MAX_WINDOW_LEGS = 20_000
#: Per account and direction: counterparties kept in the long-window memory.
MAX_LONG_COUNTERPARTIES = 512
#: Amounts kept per account for its median and repeated-amount count.
RECENT_LEGS = 32
#: Edges each account contributes to its graph features (earliest first).
GRAPH_FEATURE_NEIGHBOR_CAP = 200
#: Longest receiver -> sender path searched for the cycle graph feature.
CYCLE_MAX_PATH_HOPS = 5
