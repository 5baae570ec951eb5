"""The field's graph features: IBM's Graph Feature Preprocessor (``snapml.GraphFeaturePreprocessor``,
"GFP", the implementation behind the public AMLworld results) as a feature family beside ours
(:mod:`evidence_graph.graph_features`), fed in event-time order with no look-ahead.

:func:`gfp_feature_rows` gives one dict per event (:func:`gfp_feature_matrix` the same as one
array), named ``gfp_<family>_<bin or stat>_<window>``, in a stable order: window by window (of
``windows``, default :data:`GFP_WINDOWS`), within one window GFP's own order (fan-in, fan-out,
degree-in, degree-out, scatter-gather, temporal cycles, length-constrained cycles, vertex
statistics), only the families ``patterns`` names for that window (default :data:`GFP_PATTERNS`).
One GFP runs per window, every family of it with that window.

**What each column counts.** For the transfer ``u -> v`` at ``t`` (times in seconds, minute
resolution), in the graph of every transfer given to GFP before it (see "No look-ahead") plus itself:

* ``gfp_fan_in_<bin>_<w>``: 1 in the bin of the number of distinct payers of ``v`` (``u`` included,
  ``v`` itself not) over transfers in ``(t - W, t]``, when that number is at least 2; all 0 else.
  ``gfp_fan_out_*``: the same for the distinct payees of ``u``. A self-transfer (``u == v``) is
  in no pattern (all its pattern columns are 0); it still counts in the vertex statistics.
* ``gfp_deg_in_*`` / ``gfp_deg_out_*``: the same with transfers instead of distinct accounts.
* ``gfp_sg_<bin>_<w>``: the scatter-gather patterns this transfer is a leg of, by width: a source
  ``s`` and a destination ``d != s`` with at least 2 distinct intermediates ``m`` (``s -> m`` and
  ``m -> d``, both in ``[t - W, t]``, in any time order); the transfer is a scatter leg
  (``s = u``, ``m = v``) or a gather leg (``m = u``, ``d = v``); one pattern per ``(s, d)``,
  its width the number of intermediates. GFP's handling of self-transfers, as measured: an
  account's self-transfer makes it one of its own intermediates (``s -> s -> d`` or
  ``s -> d -> d``), except for the endpoint the new transfer starts the pattern from (the source
  of a scatter leg, the destination of a gather leg).
* ``gfp_tcycle_<len>_<w>``: the temporal cycles this transfer closes, by length in hops (this one
  included): simple cycles ``v -> ... -> u -> v`` whose hops have strictly increasing times, the
  first at or after ``t - W``; transfers between the same two accounts count once (a cycle is a
  sequence of accounts). A same-minute transfer is never in one (its time is not earlier).
* ``gfp_lcycle_<len>_<w>``: the length-constrained cycles through this transfer, by length: simple
  cycles of at most ``lc_cycle_len`` hops in the graph of the account pairs with a transfer in
  ``[t - W, t)``, in any time order. Same-minute transfers: GFP sometimes uses them and sometimes
  not (in our probes it turned on which accounts had appeared in the input before them; we found
  no simple rule); the brute-force tests keep a cycle's transfers in different minutes.
* ``gfp_<snd|rcv>_<out|in>_<stat>_<w>``: statistics of the sender's or receiver's outgoing or
  incoming transfers in ``[t - W, t]`` (this one and self-transfers included): ``fan`` (distinct
  counterparties), ``deg`` (transfers), ``ratio`` (deg / fan, 0 without any), and of their amounts
  paid in US cents (:func:`auditflow.money.usd_cents`): ``avg``, ``sum``, ``var`` (population
  variance), ``skew`` and ``kurt`` (``m3 / m2**1.5`` and ``m4 / m2**2``, not excess). GFP reads a
  variance under ``1e-5 * avg**2`` as 0 (and skew and kurtosis with it), and once transfers have
  left the window its running variance can drift from the exact value (seen up to ~1 % on tiny
  ones); the columns are GFP's, as it gives them.

Bins (:data:`GFP_BINS`): a bin ``b[i]`` counts sizes ``b[i] <= S < b[i+1]``, the last one every
size from ``b[-1]`` on; named by the sizes they hold: ``2``, ``3to4``, ``20plus``.

**No look-ahead.** GFP's ``transform`` inserts the transfers it is given into its in-memory graph
and returns their rows then and there, computed on the graph as it stands: a later call cannot
change a returned row. So the events go in, in their (time) order, one per call by default
(``batch_size=1``): a row depends only on the transfer, the transfers before it in the input, and
nothing later. Where it differs from our graph features (which never see their own minute):
GFP cannot leave a transfer's own edge out of its row (``transform`` always inserts it; a
``partial_fit`` of the same edge first inserts it twice) nor remove an edge, so a row also sees
the same-minute transfers **before it in the input** (fan, degree, scatter-gather, vertex
statistics; lc-cycles sometimes, above; temporal cycles never). With ``batch_size > 1`` up to that
many same-minute events go in one call (never two minutes), and a row then also counts the
patterns that **later** events of its call close (GFP credits a pattern to every edge of the call
in it): within-minute look-ahead, for speed only. A call costs little (vertex statistics alone ran
at ~90k events/s one event per call, ~130k in calls of 1,000), so the default is 1.

GFP prunes its graph and windows its vertex statistics from its clock, the latest time it was
given *before* the call: so before each new minute a clock transfer at that minute between two
reserved accounts (vertex ids 0 and 1, no real account) goes in with ``partial_fit``, and every
window is exact. Times are seconds from the first event's minute plus 60: GFP treats time 0
specially (in our probes a transfer at 0 hid the temporal cycles passing through its payer).
Accounts (``BANK/ACCOUNT``) get dense vertex ids from 2 in order of first appearance.

**Cost** (this 2-core machine, defaults): ``generate(accounts=2000, days=3, seed=7)``, 27k
events, in 16 s (1.7k events/s; :func:`~evidence_graph.graph_features.graph_feature_rows`:
64 s, 420 events/s); ``days=11``, 99k events, in 66 s (1.5k events/s; ``graph_feature_rows``:
648 s, 150 events/s). The rows as dicts are the memory: 171 floats a row (use
:func:`gfp_feature_matrix` for large sets). :data:`GFP_PATTERNS`
has the rates per family and window, and why the defaults stop where they do. GFP's own
threads parallelise within a call: with one event per call a second thread bought nothing, and
with another process busy on the second core it made a run ~17 times slower (its threads
wait spinning), so the default is ``threads=1``.

>>> from evidence_graph.testing import tx
>>> rows = gfp_feature_rows([tx("a", "A", "B", 0), tx("b", "B", "C", 1), tx("c", "C", "A", 2)],
...                         windows=(("1h", 3600),), patterns=("temp-cycle",))
>>> [r["gfp_tcycle_3_1h"] for r in rows]
[0.0, 0.0, 1.0]
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from auditflow.money import usd_cents
from auditflow.records import TransactionEvent

__all__ = [
    "GFP_BINS",
    "GFP_PATTERNS",
    "GFP_WINDOWS",
    "LC_CYCLE_LEN",
    "PATTERNS",
    "VERTEX_STATS",
    "gfp_feature_descriptions",
    "gfp_feature_matrix",
    "gfp_feature_names",
    "gfp_feature_rows",
]

_DAY = 86_400
#: The families, in GFP's output order (``vertex-stats`` last).
PATTERNS: tuple[str, ...] = ("fan", "degree", "scatter-gather", "temp-cycle", "lc-cycle", "vertex-stats")
#: The windows, (label, seconds): the issue's measurement says long horizons carry the signal.
GFP_WINDOWS: tuple[tuple[str, int], ...] = (("1d", _DAY), ("7d", 7 * _DAY), ("30d", 30 * _DAY))
_CHEAP = ("fan", "degree", "vertex-stats")
#: The families per window. Measured on this 2-core machine, one event per call, 1 thread, on
#: ``generate(accounts=2000, days=10, seed=7)`` (90k events, ~4.5 transfers per account a day),
#: events/s by family for a 1-day / 7-day / 30-day window (other jobs shared the machine: the
#: rates moved up to 3-fold between runs):
#:
#: * vertex statistics 93k / 77k / 36k-90k; fan 31k / 14k / 3k-15k; degree 61k / 26k / 5k-26k;
#: * scatter-gather 7.6k / 1.1k / 0.6k;
#: * temporal cycles 23k / ~200 / ~200 (the week and the month stopped after 120 s, at 25k events);
#: * lc-cycles over a day: 3.1k at length 6, 1.5k at 8 (GFP's default 10: 370 on 27k events).
#:
#: So the day window has every family (lc-cycles of at most :data:`LC_CYCLE_LEN` hops) and the
#: week and the month the families that stay cheap there: temporal cycles over a week would take
#: over 7 minutes on 90k events, scatter-gather over a week or a month 1.5 to 2.5 minutes (ask
#: for them through ``patterns`` where that is affordable).
GFP_PATTERNS: Mapping[str, tuple[str, ...]] = {
    "1d": PATTERNS,
    "7d": _CHEAP,
    "30d": _CHEAP,
}
#: Histogram bins per pattern family (GFP's ``<pattern>_bins``; sizes 0 and 1 never occur).
GFP_BINS: Mapping[str, tuple[int, ...]] = {
    "fan": (2, 3, 5, 10, 20),
    "degree": (2, 3, 5, 10, 20),
    "scatter-gather": (2, 3, 5, 10),
    "temp-cycle": (2, 3, 4, 5, 6, 8),
    "lc-cycle": (2, 3, 4, 5, 6),
}
#: Longest length-constrained cycle searched (GFP's ``lc-cycle_len``; its default 10 ran at 370
#: events/s over a day's window here).
LC_CYCLE_LEN = 6
#: Vertex statistics (name, GFP's feature index): GFP's default selection.
VERTEX_STATS: tuple[tuple[str, int], ...] = (
    ("fan", 0), ("deg", 1), ("ratio", 2), ("avg", 3), ("sum", 4), ("var", 8), ("skew", 9), ("kurt", 10),
)
_STAT_TEXT = {
    "fan": "distinct counterparties",
    "deg": "transfers",
    "ratio": "transfers per distinct counterparty",
    "avg": "mean amount (US cents)",
    "sum": "total amount (US cents)",
    "var": "population variance of the amounts (US cents squared)",
    "skew": "skewness of the amounts",
    "kurt": "kurtosis of the amounts (not excess)",
}
# pattern family -> (column stem, GFP parameter name), one stem per histogram GFP writes
_HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "fan": ("fan_in", "fan_out"),
    "degree": ("deg_in", "deg_out"),
    "scatter-gather": ("sg",),
    "temp-cycle": ("tcycle",),
    "lc-cycle": ("lcycle",),
}
_HIST_TEXT = {
    "fan_in": "receiver's distinct payers (this transfer's sender included) in the window is",
    "fan_out": "sender's distinct payees (this transfer's receiver included) in the window is",
    "deg_in": "receiver's incoming transfers (this one included) in the window is",
    "deg_out": "sender's outgoing transfers (this one included) in the window is",
    "sg": "scatter-gather patterns this transfer is a leg of, with a width (intermediates) of",
    "tcycle": "temporal cycles (strictly increasing times) this transfer closes, with hops",
    "lcycle": "length-constrained simple cycles through this transfer, with hops",
}
_LABEL = re.compile(r"[0-9a-z]{1,16}")
_MAX_SECONDS = 2**31 - 1  # GFP's windows are C ints
_CLOCK_SRC, _CLOCK_DST = 0, 1  # the reserved clock accounts
_FIRST_VERTEX = 2
_T0 = 60  # the first minute's time: GFP treats 0 specially


def _bin_labels(bins: Sequence[int]) -> list[str]:
    out = []
    for i, lo in enumerate(bins):
        if i == len(bins) - 1:
            out.append(f"{lo}plus")
        else:
            hi = bins[i + 1] - 1
            out.append(str(lo) if hi == lo else f"{lo}to{hi}")
    return out


def _plan(
    windows: Sequence[tuple[str, int]],
    patterns: Mapping[str, Sequence[str]] | Sequence[str] | None,
    bins: Mapping[str, Sequence[int]] | None,
    lc_cycle_len: int,
) -> tuple[list[tuple[str, int, tuple[str, ...]]], dict[str, tuple[int, ...]]]:
    """The validated (label, seconds, families) per window with families, and the bins."""
    labels = [w[0] for w in windows]
    if len(set(labels)) != len(labels):
        raise ValueError(f"windows={windows!r}: labels must be distinct")
    for label, seconds in windows:
        if not isinstance(label, str) or _LABEL.fullmatch(label) is None:
            raise ValueError(f"window label {label!r}: expected 1 to 16 of 0-9 a-z")
        if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 < seconds <= _MAX_SECONDS:
            raise ValueError(f"window {label!r}: {seconds!r} seconds, expected an int in 1..{_MAX_SECONDS}")
    if patterns is None:
        patterns = GFP_PATTERNS if tuple(windows) == GFP_WINDOWS else PATTERNS
    if isinstance(patterns, Mapping):
        unknown = set(patterns) - set(labels)
        if unknown:
            raise ValueError(f"patterns for unknown windows {sorted(unknown)}: windows are {labels}")
        per_window = {label: tuple(patterns.get(label, ())) for label in labels}
    else:
        if isinstance(patterns, str):
            raise ValueError(f"patterns={patterns!r}: expected a sequence of names, not one string")
        per_window = {label: tuple(patterns) for label in labels}
    for label, fams in per_window.items():
        bad = [f for f in fams if f not in PATTERNS]
        if bad or len(set(fams)) != len(fams):
            raise ValueError(f"patterns of window {label!r}: {fams!r}; expected distinct names of {PATTERNS}")
    if isinstance(lc_cycle_len, bool) or not isinstance(lc_cycle_len, int) or lc_cycle_len < 2:
        raise ValueError(f"lc_cycle_len={lc_cycle_len!r}: expected an int >= 2")
    all_bins = {**GFP_BINS, **(bins or {})}
    for fam, b in all_bins.items():
        if fam not in _HISTOGRAMS:
            raise ValueError(f"bins for {fam!r}: expected one of {tuple(_HISTOGRAMS)}")
        if not b or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in b) or list(b) != sorted(set(b)):
            raise ValueError(f"bins of {fam!r}: {b!r}, expected strictly increasing ints >= 1")
    plan = [(label, seconds, tuple(f for f in PATTERNS if f in per_window[label]))
            for label, seconds in windows if per_window[label]]
    return plan, {fam: tuple(b) for fam, b in all_bins.items()}


def _window_names(label: str, families: Sequence[str], bins: Mapping[str, Sequence[int]]) -> list[str]:
    names = []
    for fam in families:
        if fam == "vertex-stats":
            names += [f"gfp_{side}_{d}_{stat}_{label}" for side in ("snd", "rcv") for d in ("out", "in")
                      for stat, _ in VERTEX_STATS]
        else:
            names += [f"gfp_{stem}_{b}_{label}" for stem in _HISTOGRAMS[fam] for b in _bin_labels(bins[fam])]
    return names


def gfp_feature_names(
    windows: Sequence[tuple[str, int]] = GFP_WINDOWS,
    patterns: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
    *,
    bins: Mapping[str, Sequence[int]] | None = None,
    lc_cycle_len: int = LC_CYCLE_LEN,
) -> tuple[str, ...]:
    """The column names :func:`gfp_feature_rows` gives with these arguments, in order.

    >>> names = gfp_feature_names()
    >>> len(names), names[:3], names[-1]
    (171, ('gfp_fan_in_2_1d', 'gfp_fan_in_3to4_1d', 'gfp_fan_in_5to9_1d'), 'gfp_rcv_in_kurt_30d')
    """
    plan, b = _plan(windows, patterns, bins, lc_cycle_len)
    return tuple(n for label, _, fams in plan for n in _window_names(label, fams, b))


def gfp_feature_descriptions(
    windows: Sequence[tuple[str, int]] = GFP_WINDOWS,
    patterns: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
    *,
    bins: Mapping[str, Sequence[int]] | None = None,
    lc_cycle_len: int = LC_CYCLE_LEN,
) -> dict[str, str]:
    """Human-readable text of every column of :func:`gfp_feature_names`, in the same order.

    >>> gfp_feature_descriptions()["gfp_fan_in_3to4_1d"]
    "GFP 1d: 1 if the receiver's distinct payers (this transfer's sender included) in the window is 3 to 4"
    >>> gfp_feature_descriptions()["gfp_snd_out_sum_7d"]
    "GFP 7d: sender's outgoing transfers' total amount (US cents)"
    """
    plan, b = _plan(windows, patterns, bins, lc_cycle_len)
    out: dict[str, str] = {}
    side_text = {"snd": "sender", "rcv": "receiver"}
    dir_text = {"out": "outgoing", "in": "incoming"}
    for label, _, fams in plan:
        for fam in fams:
            if fam == "vertex-stats":
                for side in ("snd", "rcv"):
                    for d in ("out", "in"):
                        for stat, _ in VERTEX_STATS:
                            out[f"gfp_{side}_{d}_{stat}_{label}"] = (
                                f"GFP {label}: {side_text[side]}'s {dir_text[d]} transfers' {_STAT_TEXT[stat]}")
                continue
            for stem in _HISTOGRAMS[fam]:
                for lab, lo, nxt in zip(_bin_labels(b[fam]), b[fam], (*b[fam][1:], None), strict=True):
                    size = f"{lo} or more" if nxt is None else (str(lo) if nxt == lo + 1 else f"{lo} to {nxt - 1}")
                    lead = "1 if the" if fam in ("fan", "degree") else "number of"
                    out[f"gfp_{stem}_{lab}_{label}"] = f"GFP {label}: {lead} {_HIST_TEXT[stem]} {size}"
    return out


def _edges(events: Sequence[TransactionEvent]) -> np.ndarray:
    """GFP's edge list: [edge id, payer vertex, payee vertex, time in seconds, amount paid in US cents]."""
    x = np.empty((len(events), 5), dtype=np.float64)
    ids: dict[str, int] = {}
    first = events[0].minute
    prev = first
    for i, ev in enumerate(events):
        minute = ev.minute
        if minute < prev:
            raise ValueError(f"events must be in time order: event {i} ({ev.event_id}) is earlier than event {i - 1}")
        prev = minute
        src = ids.setdefault(ev.sender.node_id, len(ids) + _FIRST_VERTEX)
        dst = ids.setdefault(ev.receiver.node_id, len(ids) + _FIRST_VERTEX)
        x[i] = (2 * i, src, dst, 60 * (minute - first) + _T0, usd_cents(ev.amount_paid))
    return x


def _gfp_params(seconds: int, families: Sequence[str], bins: Mapping[str, Sequence[int]], threads: int,
                lc_cycle_len: int) -> dict[str, Any]:
    params: dict[str, Any] = {
        "num_threads": threads,
        "time_window": seconds,
        "max_no_edges": -1,
        "vertex_stats": "vertex-stats" in families,
        "vertex_stats_tw": seconds,
        "vertex_stats_cols": [4],
        "vertex_stats_feats": [i for _, i in VERTEX_STATS],
        "lc-cycle_len": lc_cycle_len,
    }
    for fam in _HISTOGRAMS:
        params[fam] = fam in families
        params[f"{fam}_tw"] = seconds
        params[f"{fam}_bins"] = list(bins[fam])
    return params


def _graph_feature_preprocessor() -> Any:
    """snapml's class, imported with the process's floating-point state kept: loading snapml's
    library sets flush-to-zero (it is built with fast-math), which would turn every subnormal
    result in this process -- SHAP values, drift metrics -- into 0. The state (x87 and SSE control
    words: rounding, exception masks, FTZ/DAZ) is saved before the import and put back after it
    (C's ``fegetenv`` / ``fesetenv``)."""
    import ctypes
    import ctypes.util

    libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    env = ctypes.create_string_buffer(256)  # fenv_t is 32 bytes on x86-64, less elsewhere
    saved = libm.fegetenv(env) == 0
    try:
        with warnings.catch_warnings():  # snapml 1.17.2 reads numpy.core, deprecated in numpy 2
            warnings.simplefilter("ignore", DeprecationWarning)
            from snapml import GraphFeaturePreprocessor
    finally:
        if saved:
            libm.fesetenv(env)
    return GraphFeaturePreprocessor


def _run_window(x: np.ndarray, params: Mapping[str, Any], width: int, batch_size: int) -> np.ndarray:
    """Every edge's row from one GFP, fed in order: per minute a clock edge, then the minute's
    edges in calls of at most ``batch_size``."""
    GraphFeaturePreprocessor = _graph_feature_preprocessor()
    gfp = GraphFeaturePreprocessor()
    gfp.set_params(dict(params))
    n = len(x)
    out = np.empty((n, width), dtype=np.float64)
    starts = [0, *(np.flatnonzero(np.diff(x[:, 3])) + 1).tolist(), n]
    clock = np.zeros((1, x.shape[1]), dtype=np.float64)
    clock[0, 1:3] = (_CLOCK_SRC, _CLOCK_DST)
    for a, b in zip(starts, starts[1:], strict=False):
        clock[0, 0] = x[a, 0] + 1  # odd ids: never a real edge's
        clock[0, 3] = x[a, 3]
        gfp.partial_fit(clock)
        for i in range(a, b, batch_size):
            j = min(i + batch_size, b)
            res = gfp.transform(x[i:j])
            if res.shape[1] != x.shape[1] + width:
                raise RuntimeError(f"GFP gave {res.shape[1] - x.shape[1]} columns, expected {width}")
            out[i:j] = res[:, x.shape[1]:]
    return out


def gfp_feature_matrix(
    events: Sequence[TransactionEvent],
    *,
    windows: Sequence[tuple[str, int]] = GFP_WINDOWS,
    patterns: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
    threads: int = 1,
    batch_size: int = 1,
    lc_cycle_len: int = LC_CYCLE_LEN,
    bins: Mapping[str, Sequence[int]] | None = None,
) -> tuple[tuple[str, ...], np.ndarray]:
    """:func:`gfp_feature_rows` as (names, one float64 row per event): the compact form."""
    plan, b = _plan(windows, patterns, bins, lc_cycle_len)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads={threads!r}: expected an int >= 1")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}: expected an int >= 1")
    per_window = [(label, seconds, fams, _window_names(label, fams, b)) for label, seconds, fams in plan]
    names = tuple(n for *_, ns in per_window for n in ns)
    if not events:
        return names, np.zeros((0, len(names)), dtype=np.float64)
    x = _edges(events)
    parts = [_run_window(x, _gfp_params(seconds, fams, b, threads, lc_cycle_len), len(ns), batch_size)
             for _, seconds, fams, ns in per_window]
    matrix = np.concatenate(parts, axis=1) if parts else np.zeros((len(events), 0), dtype=np.float64)
    return names, matrix


def gfp_feature_rows(
    events: Sequence[TransactionEvent],
    *,
    windows: Sequence[tuple[str, int]] = GFP_WINDOWS,
    patterns: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
    threads: int = 1,
    batch_size: int = 1,
    lc_cycle_len: int = LC_CYCLE_LEN,
    bins: Mapping[str, Sequence[int]] | None = None,
) -> list[dict[str, float]]:
    """GFP's features of every event (time-ordered; ``ValueError`` otherwise), one dict per event
    named by :func:`gfp_feature_names` (the module docstring says what each counts).

    ``windows``: (label, seconds) pairs; ``patterns``: the families (of :data:`PATTERNS`) for every
    window, or per window label (default :data:`GFP_PATTERNS` on the default windows, else every
    family); ``threads``: GFP's ``num_threads``; ``batch_size``: same-minute events per GFP call
    (above 1 a row also sees its call's later events); ``lc_cycle_len``: the longest lc-cycle;
    ``bins``: histogram bins per family (default :data:`GFP_BINS`)."""
    names, matrix = gfp_feature_matrix(events, windows=windows, patterns=patterns, threads=threads,
                                       batch_size=batch_size, lc_cycle_len=lc_cycle_len, bins=bins)
    return [dict(zip(names, row, strict=True)) for row in matrix.tolist()]
