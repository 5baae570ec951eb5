"""Drift scores of the scoring inputs and the score: the frozen reference profile, the bins, and
the windowed scores, in plain Python and numpy (the reference the stream job's counting is held
to; the metric definitions are :mod:`auditflow.drift`'s).

* :func:`build_profile` freezes a reference from scored rows (each: event time, segment values,
  the feature values and the score): per numeric input, the reference's quantiles as bin edges
  (ties merged) plus an underflow and an overflow bin; the segments to keep per dimension (the
  most frequent, at most ``segment_cap``; the rest are ``__other__``); and the reference's counts
  per feature and segment. Its ``reference_id`` is the SHA-256 of its canonical JSON (RFC 8785),
  so the same reference rows give the same id, and every drift record names it.
* :func:`window_counts` counts rows per tumbling event-time pane, segment and feature bin. Panes
  are minutes-aligned windows of ``window_minutes``; counts of panes add up, so a day's counts are
  the sum of its hours' (:func:`merge_counts`).
* :func:`score_windows` turns the counts into :class:`DriftRecord`\\ s: per pane, feature,
  segment and metric, the value, calibrated thresholds and status; the p-values of one pane's
  features x segments are adjusted together (Benjamini-Hochberg) into ``significant``.

Non-finite inputs go to the overflow bin (the job never emits one; a reference that had one would
say so through its out-of-reference mass).
"""

from __future__ import annotations

import bisect
import math
from functools import cached_property
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from auditflow import drift as D
from auditflow.canonical import canonical_sha256

PROFILE_SCHEMA = "auditflow.drift_reference/1"
RECORD_SCHEMA = "auditflow.drift/1"
SCORE = "score"


@dataclass(frozen=True, slots=True)
class Row:
    """One scored event as drift sees it."""

    ts_ms: int
    segments: Mapping[str, str]  # dimension -> value (payment_format, currency, bank)
    values: Mapping[str, float]  # feature -> value, and "score"


def bin_count(edges: Sequence[float]) -> int:
    """Bins over ``edges``: underflow, max(1, len - 1) interior ones, overflow."""
    return max(1, len(edges) - 1) + 2


def bin_index(edges: Sequence[float], v: float) -> int:
    """0: below the first edge; the last: above the last edge or not finite; between: the interior
    bin [e_j-1, e_j), the last interior bin closed on the right."""
    interior = max(1, len(edges) - 1)
    if not math.isfinite(v) or v > edges[-1]:
        return interior + 1
    if v < edges[0]:
        return 0
    return min(bisect.bisect_right(edges, v), interior)


def quantile_edges(values: Sequence[float], bins: int = D.DEFAULT_BINS) -> list[float]:
    """The reference's quantiles 0, 1/bins, ..., 1 (numpy's linear ones), ties merged."""
    arr = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    if arr.size == 0:
        return [0.0]
    qs = np.quantile(arr, np.linspace(0.0, 1.0, bins + 1))
    return sorted({float(q) for q in qs})


@dataclass(frozen=True)
class Profile:
    """A frozen reference. ``counts[feature][segment]``: the reference's bin counts."""

    features: tuple[str, ...]
    edges: dict[str, list[float]]
    segments: dict[str, list[str]]  # dimension -> kept values (most frequent first)
    counts: dict[str, dict[str, list[int]]]
    n: int
    alpha: float = D.DEFAULT_SMOOTHING
    bins: int = D.DEFAULT_BINS
    min_count: int = D.DEFAULT_MIN_COUNT
    model_version: str = ""
    source: dict = field(default_factory=dict)  # what the reference was built from (file, time range)

    def body(self) -> dict:
        d = asdict(self)
        d["features"] = list(self.features)
        return {"schema": PROFILE_SCHEMA, **d}

    @cached_property
    def reference_id(self) -> str:
        return "ref-" + canonical_sha256(self.body())[:16]

    def segment_of(self, dimension: str, value: str) -> str:
        kept = self.segments.get(dimension, ())
        return f"{dimension}={value if value in kept else D.OTHER_SEGMENT}"

    def row_segments(self, row: Row) -> list[str]:
        return [D.ALL_SEGMENT, *(self.segment_of(d, row.segments[d]) for d in D.SEGMENT_DIMENSIONS if d in row.segments)]

    @classmethod
    def from_body(cls, d: dict) -> Profile:
        if d.get("schema") != PROFILE_SCHEMA:
            raise ValueError(f"not a {PROFILE_SCHEMA} document (schema {d.get('schema')!r})")
        kw = {k: v for k, v in d.items() if k != "schema"}
        kw["features"] = tuple(kw["features"])
        return cls(**kw)


def build_profile(rows: Iterable[Row], features: Sequence[str], *, bins: int = D.DEFAULT_BINS,
                  segment_cap: int = D.DEFAULT_SEGMENT_CAP, alpha: float = D.DEFAULT_SMOOTHING,
                  min_count: int = D.DEFAULT_MIN_COUNT, model_version: str = "", source: dict | None = None) -> Profile:
    """Freeze a reference from scored rows (see the module docstring)."""
    rows = list(rows)
    if not rows:
        raise ValueError("a drift reference needs at least one row")
    features = tuple(features)
    edges = {f: quantile_edges([r.values[f] for r in rows], bins) for f in features}
    freq: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        for d in D.SEGMENT_DIMENSIONS:
            if d in r.segments:
                freq[d][r.segments[d]] += 1
    segments = {d: [v for v, _ in sorted(freq[d].items(), key=lambda kv: (-kv[1], kv[0]))[:segment_cap]]
                for d in D.SEGMENT_DIMENSIONS if d in freq}
    draft = Profile(features, edges, segments, {}, len(rows), alpha, bins, min_count, model_version, dict(source or {}))
    counts: dict[str, dict[str, list[int]]] = {f: {} for f in features}
    for r in rows:
        for seg in draft.row_segments(r):
            for f in features:
                c = counts[f].setdefault(seg, [0] * bin_count(edges[f]))
                c[bin_index(edges[f], r.values[f])] += 1
    return Profile(features, edges, segments, counts, len(rows), alpha, bins, min_count, model_version, dict(source or {}))


Counts = dict[tuple[int, str, str], list[int]]  # (pane start ms, feature, segment) -> bin counts


def pane_start(ts_ms: int, window_minutes: int) -> int:
    w = window_minutes * 60_000
    return ts_ms - ts_ms % w


def window_counts(profile: Profile, rows: Iterable[Row], window_minutes: int = D.DEFAULT_DRIFT_WINDOW_MINUTES) -> Counts:
    """Bin counts per (pane, feature, segment) of ``rows``."""
    out: Counts = {}
    for r in rows:
        p = pane_start(r.ts_ms, window_minutes)
        for seg in profile.row_segments(r):
            for f in profile.features:
                key = (p, f, seg)
                c = out.get(key)
                if c is None:
                    c = out[key] = [0] * bin_count(profile.edges[f])
                c[bin_index(profile.edges[f], r.values[f])] += 1
    return out


def merge_counts(counts: Counts, window_minutes: int, into_minutes: int) -> Counts:
    """Counts of ``window_minutes`` panes summed into panes of ``into_minutes`` (a multiple)."""
    if into_minutes % window_minutes:
        raise ValueError(f"{into_minutes} min panes are not made of {window_minutes} min ones")
    out: Counts = {}
    for (p, f, seg), c in counts.items():
        key = (pane_start(p, into_minutes), f, seg)
        acc = out.setdefault(key, [0] * len(c))
        for i, x in enumerate(c):
            acc[i] += x
    return out


@dataclass(frozen=True, slots=True)
class DriftRecord:
    """One drift score: keyed by (model_version, reference_id, feature, segment, window_start,
    window_end, metric)."""

    model_version: str
    reference_id: str
    feature: str
    segment: str
    window_start: int  # epoch ms, inclusive
    window_end: int  # epoch ms, exclusive
    metric: str
    value: float
    warn_threshold: float
    drift_threshold: float
    status: str
    p_value: float
    significant: bool  # after Benjamini-Hochberg over the pane's features x segments (per metric)
    n_ref: int
    n_cur: int
    out_of_reference: float  # the window's share in the underflow and overflow bins
    alpha: float

    def to_dict(self) -> dict:
        return {"schema": RECORD_SCHEMA, **asdict(self)}


def _draw_cache():
    cache: dict[tuple, np.ndarray] = {}

    def draws(ref: tuple[int, ...], n: int, metric: str, alpha: float) -> np.ndarray:
        key = (ref, n, metric, alpha)
        if key not in cache:
            cache[key] = D.reference_draws(list(ref), n, metric, alpha=alpha)
        return cache[key]

    return draws


def score_windows(profile: Profile, counts: Counts, window_minutes: int = D.DEFAULT_DRIFT_WINDOW_MINUTES,
                  *, panes: Iterable[int] | None = None, q: float = 0.05) -> list[DriftRecord]:
    """Drift records of every pane in ``panes`` (default: every pane from the first to the last
    one with counts), for every feature and every segment the reference holds (a segment without
    events in a pane is an ``empty_window``), sorted by their key. Thresholds and p-values are
    those of windows the size of the pane's; a pane too small to be judged
    (``insufficient_data``, ``empty_window``) gets thresholds 0 and p-value 1."""
    w = window_minutes * 60_000
    if panes is None:
        starts = sorted({p for p, _, _ in counts})
        panes = range(starts[0], starts[-1] + w, w) if starts else ()
    draws = _draw_cache()
    rid = profile.reference_id
    out: list[DriftRecord] = []
    for p in panes:
        pane: list[DriftRecord] = []
        for f in profile.features:
            nb = bin_count(profile.edges[f])
            for seg, ref in sorted(profile.counts[f].items()):
                cur = counts.get((p, f, seg), [0] * nb)
                n_cur, n_ref = sum(cur), sum(ref)
                nonzero = [i for i, c in enumerate(ref) if c]
                constant = len(nonzero) == 1 and cur[nonzero[0]] == n_cur
                oor = (cur[0] + cur[-1]) / n_cur if n_cur else 0.0
                for m in D.METRICS:
                    value = D.metric(m, ref, cur, profile.alpha)
                    if n_cur >= profile.min_count:  # judged: thresholds and p-value at its own size
                        d = draws(tuple(ref), n_cur, m, profile.alpha)
                        warn, drift = (float(np.quantile(d, D.WARN_QUANTILE)), float(np.quantile(d, D.DRIFT_QUANTILE)))
                        pv = D.bootstrap_p_value(value, d)
                    else:
                        warn = drift = 0.0
                        pv = 1.0
                    st = D.status(value, n_cur, (warn, drift), constant=constant, min_count=profile.min_count)
                    pane.append(DriftRecord(profile.model_version, rid, f, seg, p, p + w, m, value,
                                            warn, drift, st, pv, False, n_ref, n_cur, oor, profile.alpha))
        for m in D.METRICS:  # BH over the pane's judged features x segments, per metric
            idx = [i for i, r in enumerate(pane) if r.metric == m and r.status in ("ok", "warn", "drift")]
            rejected = D.benjamini_hochberg([pane[i].p_value for i in idx], q)
            for i, rej in zip(idx, rejected):
                if rej:
                    pane[i] = replace(pane[i], significant=True)
        out.extend(pane)
    out.sort(key=lambda r: (r.window_start, r.feature, r.segment, r.metric))
    return out
