"""Drift scores of the scoring inputs and the score: the frozen reference profile, the bins, and
the windowed scores, in plain Python and numpy (the reference the stream job's counting is held
to; the metric definitions are :mod:`auditflow.drift`'s).

* :func:`build_profile` freezes a reference from scored rows (each: event time, segment values,
  the feature values and the score): per numeric input, the reference's quantiles as bin edges
  (ties merged) plus an underflow and an overflow bin; the segments to keep per dimension (the
  most frequent, at most ``segment_cap``; the rest are ``__other__``); and the reference's counts
  per feature and segment. Its ``reference_id`` is the SHA-256 of its canonical JSON (RFC 8785),
  so the same reference rows give the same id, and every drift record names it.
  :func:`reference_profile` builds it from a time range of events (:func:`reference_events`)
  scored by the model's fast path; :func:`write_reference` writes it, named by that id.
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
import json
import math
import re
from functools import cached_property
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from auditflow import drift as D
from auditflow.canonical import canonical_sha256
from auditflow.records import epoch_millis

if TYPE_CHECKING:
    from datetime import datetime

    from auditflow.records import TransactionEvent

PROFILE_SCHEMA = "auditflow.drift_reference/2"  # /1 had no dispersion: rebuild those
RECORD_SCHEMA = "auditflow.drift/1"
_encode_str = json.encoder.encode_basestring
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


def level_index(levels: Sequence[str], others: Sequence[str], value: str) -> int:
    """A categorical value's bin: its kept level's index, then one bin for the reference's other
    levels (:data:`auditflow.drift.OTHER_SEGMENT`), then one for a level the reference never saw
    (:data:`auditflow.drift.NEW_CATEGORY`)."""
    try:
        return list(levels).index(value)
    except ValueError:
        return len(levels) if value in others else len(levels) + 1


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
    edges: dict[str, list[float]]  # numeric feature -> bin edges
    segments: dict[str, list[str]]  # dimension -> kept values (most frequent first)
    counts: dict[str, dict[str, list[int]]]
    n: int
    alpha: float = D.DEFAULT_SMOOTHING
    bins: int = D.DEFAULT_BINS
    min_count: int = D.DEFAULT_MIN_COUNT
    model_version: str = ""
    source: dict = field(default_factory=dict)  # what the reference was built from (file, time range)
    # categorical feature (a segment dimension's value) -> its kept levels; bins: the levels, then
    # OTHER_SEGMENT (a reference level beyond the cap), then NEW_CATEGORY (one it never saw)
    levels: dict[str, list[str]] = field(default_factory=dict)
    other_levels: dict[str, list[str]] = field(default_factory=dict)
    # the features scored within each segment of a dimension (every feature in ALL_SEGMENT)
    segment_features: tuple[str, ...] = ()
    # the windows the dispersion was measured on (0: none measured) and, per feature and segment,
    # the dispersion factor (>= 1) of the reference's own windows of that size (estimate_dispersion)
    window_minutes: int = 0
    dispersion: dict[str, dict[str, float]] = field(default_factory=dict)

    def body(self) -> dict:
        d = asdict(self)
        d["features"] = list(self.features)
        d["segment_features"] = list(self.segment_features)
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
        if d.get("schema") == "auditflow.drift_reference/1":
            raise ValueError("a reference of format /1 (no dispersion): rebuild it (auditflow reference build)")
        if d.get("schema") != PROFILE_SCHEMA:
            raise ValueError(f"not a {PROFILE_SCHEMA} document (schema {d.get('schema')!r})")
        kw = {k: v for k, v in d.items() if k != "schema"}
        kw["features"] = tuple(kw["features"])
        kw["segment_features"] = tuple(kw.get("segment_features", ()))
        return cls(**kw)

    def nbins(self, feature: str) -> int:
        if feature in self.levels:
            return len(self.levels[feature]) + 2
        return bin_count(self.edges[feature])

    def bin_of(self, feature: str, row: Row) -> int:
        if feature in self.levels:
            return level_index(self.levels[feature], self.other_levels.get(feature, ()), row.segments[feature])
        return bin_index(self.edges[feature], row.values[feature])

    def scored_in_segments(self, feature: str) -> bool:
        return feature in self.segment_features


def build_profile(rows: Iterable[Row], features: Sequence[str], *, bins: int = D.DEFAULT_BINS,
                  segment_cap: int = D.DEFAULT_SEGMENT_CAP, alpha: float = D.DEFAULT_SMOOTHING,
                  min_count: int = D.DEFAULT_MIN_COUNT, model_version: str = "", source: dict | None = None,
                  categorical: Sequence[str] = (), segment_features: Sequence[str] | None = None) -> Profile:
    """Freeze a reference from scored rows (see the module docstring). ``categorical``: segment
    dimensions whose value distribution is itself scored (levels plus an other and a new-level
    bin); ``segment_features``: the features scored within each segment (default: all)."""
    rows = list(rows)
    if not rows:
        raise ValueError("a drift reference needs at least one row")
    bad = [c for c in categorical if c not in D.SEGMENT_DIMENSIONS]
    if bad:
        raise ValueError(f"categorical drift feature {bad[0]!r}: expected one of {', '.join(D.SEGMENT_DIMENSIONS)}")
    numeric = tuple(f for f in features if f not in categorical)
    features = (*numeric, *categorical)
    seg_features = tuple(features if segment_features is None else segment_features)
    unknown = [f for f in seg_features if f not in features]
    if unknown:
        raise ValueError(f"segment feature {unknown[0]!r} is not one of the reference's features")
    seg_features = tuple(f for f in features if f in seg_features)  # in feature order
    edges = {f: quantile_edges([r.values[f] for r in rows], bins) for f in numeric}
    freq: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        for d in D.SEGMENT_DIMENSIONS:
            if d in r.segments:
                freq[d][r.segments[d]] += 1
    ranked = {d: [v for v, _ in sorted(freq[d].items(), key=lambda kv: (-kv[1], kv[0]))] for d in D.SEGMENT_DIMENSIONS if d in freq}
    segments = {d: ranked[d][:segment_cap] for d in ranked}
    levels = {c: ranked[c][:segment_cap] for c in categorical}
    other_levels = {c: sorted(ranked[c][segment_cap:]) for c in categorical}
    kw = dict(levels=levels, other_levels=other_levels, segment_features=seg_features)
    draft = Profile(features, edges, segments, {}, len(rows), alpha, bins, min_count, model_version,
                    dict(source or {}), **kw)
    counts: dict[str, dict[str, list[int]]] = {f: {} for f in features}
    for r in rows:
        for seg in draft.row_segments(r):
            for f in features:
                if seg != D.ALL_SEGMENT and f not in seg_features:
                    continue
                c = counts[f].setdefault(seg, [0] * draft.nbins(f))
                c[draft.bin_of(f, r)] += 1
    return replace(draft, counts=counts)


#: Fewest judged reference windows a block's own dispersion is measured on; below, the dispersion
#: of its feature over all events stands in (and 1 where that is not measured either).
MIN_DISPERSION_WINDOWS = 8


def estimate_dispersion(profile: Profile, rows: Iterable[Row], window_minutes: int) -> Profile:
    """The profile with its dispersion for windows of ``window_minutes``: per feature and segment,
    the factor by which the drift threshold of independent events must grow for the reference's
    own windows to cross it no more often than the threshold's quantile says: the
    :data:`auditflow.drift.DRIFT_QUANTILE` (99 %) over its judged windows of PSI / the PSI drift
    threshold of same-size multinomial draws; at least 1.

    The draws behind the thresholds treat a window's events as independent. Events are not: the
    same account's transfers share its window features, recurring payments repeat amounts, and
    days and weeks have their rhythm, so an unchanged stream's windows scatter more than the draws
    say, and with independent thresholds every such feature "drifts" half the time. Scoring
    divides a block's metrics by its dispersion (the JS distance by its square root) before the
    thresholds and p-values, which is to judge the window at its effective size,
    ``events / dispersion``. The reference is measured against itself, so this needs no labels and
    no other data; it can only see the rhythms the reference spans (take two weeks or more)."""
    rows = list(rows)
    bare = replace(profile, window_minutes=0, dispersion={})
    scorer = PaneScorer(bare, window_minutes)
    counts = window_counts(bare, rows, window_minutes)
    first = bare.features[0]
    ratios: list[list[float]] = [[] for _ in scorer.cells]
    for p in sorted({p for p, _, _ in counts}):
        sp = scorer.scored(Pane(p, scorer.layout.flat(counts, p), sum(counts.get((p, first, D.ALL_SEGMENT), ())),
                                None, None))
        col = sp.metrics["psi"]
        for i, status in enumerate(col.statuses):
            if status not in D.JUDGED:
                continue
            if col.drift[i] > 0:
                ratios[i].append(float(col.values[i]) / float(col.drift[i]))
    own = {(f, seg): float(np.quantile(r, D.DRIFT_QUANTILE))
           for (f, seg, _, _), r in zip(scorer.cells, ratios) if len(r) >= MIN_DISPERSION_WINDOWS}
    dispersion: dict[str, dict[str, float]] = {}
    for f, seg, _, _ in scorer.cells:
        got = own.get((f, seg), own.get((f, D.ALL_SEGMENT), 1.0))
        dispersion.setdefault(f, {})[seg] = round(max(1.0, got), 6)
    return replace(profile, window_minutes=window_minutes, dispersion=dispersion)


#: Model inputs scored within each segment of a reference besides the score (all of them are
#: scored over all events).
DEFAULT_SEGMENT_FEATURES = ("amount_usd",)


def reference_events(events: Iterable[TransactionEvent], start: datetime,
                     end: datetime) -> list[tuple[TransactionEvent, dict[str, float]]]:
    """The events with ``start <= time < end`` and their stream features, computed with every
    event before them (as the stream job would)."""
    from pipelines.features import iter_features

    return [(ev, f) for ev, f in iter_features(events) if start <= ev.timestamp < end]


def reference_profile(picked: Sequence[tuple[TransactionEvent, Mapping[str, float]]], model_dir: str | Path, *,
                      span_minutes: int, window_minutes: int = D.DEFAULT_DRIFT_WINDOW_MINUTES,
                      segment_features: Sequence[str] = DEFAULT_SEGMENT_FEATURES,
                      source: Mapping | None = None) -> Profile:
    """The drift reference of ``picked`` (:func:`reference_events`) scored by the fast path of the
    model in ``model_dir`` (its digest is the reference's ``model_version``): the score and every
    model input whose memory the reference's ``span_minutes`` covers
    (:func:`auditflow.drift.monitored_features`) over all events; within each segment (payment
    format, currency, bank), the score, ``segment_features`` and the segment dimensions' own
    distributions (categorical: levels, other, new); and its dispersion on windows of
    ``window_minutes`` (:func:`estimate_dispersion`). ``source``: what it was built from (file,
    hash, time range)."""
    from auditflow.features import FEATURE_NAMES
    from model_service.fast_path import batch_scorer

    predict, _, digest, names = batch_scorer(str(Path(model_dir).resolve()))[:4]
    X = np.array([[f[n] for n in names] for _, f in picked], dtype=np.float64)
    scores = np.asarray(predict(X), dtype=np.float64)
    rows = [Row(epoch_millis(ev.timestamp),
                {"payment_format": ev.payment_format, "currency": ev.amount_paid.currency, "bank": ev.sender.bank},
                {**{n: float(f[n]) for n in FEATURE_NAMES}, SCORE: float(s)})
            for (ev, f), s in zip(picked, scores)]
    return product_profile(rows, span_minutes, window_minutes, segment_features=segment_features,
                           model_version=digest, source=source)


def product_profile(rows: Sequence[Row], span_minutes: int, window_minutes: int = D.DEFAULT_DRIFT_WINDOW_MINUTES, *,
                    segment_features: Sequence[str] = DEFAULT_SEGMENT_FEATURES, model_version: str = "",
                    source: Mapping | None = None) -> Profile:
    """The reference the product builds from scored rows (:func:`reference_profile`'s, without
    the model): the score and the inputs whose memory ``span_minutes`` covers, segments, dispersion
    on windows of ``window_minutes``."""
    from auditflow.features import FEATURE_MEMORY_MINUTES

    monitored = D.monitored_features(FEATURE_MEMORY_MINUTES, span_minutes)
    profile = build_profile(rows, (*monitored, SCORE), model_version=model_version, categorical=D.SEGMENT_DIMENSIONS,
                            segment_features=(SCORE, *segment_features, *D.SEGMENT_DIMENSIONS),
                            source=dict(source or {}))
    return estimate_dispersion(profile, rows, window_minutes)


def write_reference(profile: Profile, out_dir: str | Path) -> Path:
    """Write the reference as canonical JSON (RFC 8785) to ``out_dir/<reference_id>.json``.
    Content-addressed: a file of that name with other bytes is a ``RuntimeError``."""
    from auditflow.canonical import canonical_json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{profile.reference_id}.json"
    body = canonical_json(profile.body())
    if path.exists() and path.read_bytes() != body:  # content-addressed: same name, same bytes
        raise RuntimeError(f"{path} exists with other content")
    path.write_bytes(body)
    return path


Counts = dict[tuple[int, str, str], list[int]]  # (pane start ms, feature, segment) -> bin counts


def pane_start(ts_ms: int, window_minutes: int) -> int:
    w = window_minutes * 60_000
    return ts_ms - ts_ms % w


def window_counts(profile: Profile, rows: Iterable[Row], window_minutes: int = D.DEFAULT_DRIFT_WINDOW_MINUTES) -> Counts:
    """Bin counts per (pane, feature, segment) of ``rows``, one row at a time."""
    out: Counts = {}
    for r in rows:
        p = pane_start(r.ts_ms, window_minutes)
        for seg in profile.row_segments(r):
            for f in profile.features:
                if seg != D.ALL_SEGMENT and not profile.scored_in_segments(f):
                    continue
                key = (p, f, seg)
                c = out.get(key)
                if c is None:
                    c = out[key] = [0] * profile.nbins(f)
                c[profile.bin_of(f, r)] += 1
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
    out_of_reference: float  # the window's share outside the reference's bins (under/overflow, new levels)
    alpha: float
    calibration_n: int  # the window size the thresholds' draws were made at (auditflow.drift.calibration_size; scaled to n_cur)
    events: int  # the pane's events (all segments)
    first_offset: int | None  # the smallest and largest source offset (line of the input) of the pane's events
    last_offset: int | None
    counts: tuple[int, ...] = ()  # the window's bin counts (the reference's bins): windows add up, a day = its hours

    def to_dict(self) -> dict:
        d = {"schema": RECORD_SCHEMA}
        for k in self.__slots__:
            d[k] = getattr(self, k)
        d["counts"] = list(self.counts)
        return d

    def to_json(self) -> str:
        """``json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)``, built directly
        in one format (the stream job writes one per record: :func:`records_json`)."""
        return self._head_json() + self._metric_json() + self._tail_json()

    # The record's JSON in three parts: the block's key, the metric's result, the window's sizes
    # and counts; the metrics of one block (consecutive records) share the first and the last.
    def _head_json(self) -> str:
        return _HEAD_JSON % (_encode_str(self.model_version), _encode_str(self.reference_id),
                             _encode_str(self.feature), _encode_str(self.segment), int.__repr__(self.window_start),
                             int.__repr__(self.window_end))

    def _metric_json(self) -> str:
        self._check_finite(self.value, self.warn_threshold, self.drift_threshold, self.p_value)
        return _METRIC_JSON % (_encode_str(self.metric), _num(self.value), _num(self.warn_threshold),
                               _num(self.drift_threshold), _encode_str(self.status), _num(self.p_value),
                               "true" if self.significant else "false")

    def _tail_json(self) -> str:
        self._check_finite(self.out_of_reference, self.alpha)
        return _TAIL_JSON % (int.__repr__(self.n_ref), int.__repr__(self.n_cur), _num(self.out_of_reference),
                             _num(self.alpha), int.__repr__(self.calibration_n), int.__repr__(self.events),
                             "null" if self.first_offset is None else int.__repr__(self.first_offset),
                             "null" if self.last_offset is None else int.__repr__(self.last_offset),
                             ",".join(map(int.__repr__, self.counts)))

    def _check_finite(self, *values) -> None:
        for v in values:
            if not math.isfinite(v):
                bad = [k for k in _FLOAT_FIELDS if not math.isfinite(getattr(self, k))]
                raise ValueError(f"drift record {self.key}: {bad[0]}={getattr(self, bad[0])!r} is not finite")

    @classmethod
    def from_dict(cls, d: dict) -> DriftRecord:
        if d.get("schema") != RECORD_SCHEMA:
            raise ValueError(f"not a {RECORD_SCHEMA} record (schema {d.get('schema')!r})")
        kw = {k: v for k, v in d.items() if k != "schema"}
        kw["counts"] = tuple(kw.get("counts", ()))
        return cls(**kw)

    @property
    def key(self) -> tuple:
        return (self.model_version, self.reference_id, self.feature, self.segment, self.window_start,
                self.window_end, self.metric)


_FLOAT_FIELDS = ("value", "warn_threshold", "drift_threshold", "p_value", "out_of_reference", "alpha")
_HEAD_JSON = ('{"schema":' + json.dumps(RECORD_SCHEMA) + ',"model_version":%s,"reference_id":%s,"feature":%s,'
              '"segment":%s,"window_start":%s,"window_end":%s,')
_METRIC_JSON = '"metric":%s,"value":%s,"warn_threshold":%s,"drift_threshold":%s,"status":%s,"p_value":%s,"significant":%s,'
_TAIL_JSON = ('"n_ref":%s,"n_cur":%s,"out_of_reference":%s,"alpha":%s,"calibration_n":%s,"events":%s,"first_offset":%s,'
              '"last_offset":%s,"counts":[%s]}')
if re.findall(r'"(\w+)":\[?%s', _HEAD_JSON + _METRIC_JSON + _TAIL_JSON) != list(DriftRecord.__slots__):
    raise RuntimeError("_HEAD_JSON, _METRIC_JSON and _TAIL_JSON must name DriftRecord's fields in their order")


def records_json(records: Iterable[DriftRecord]) -> str:
    """``"\n".join(r.to_json() for r in records)``, built faster: consecutive records of one
    block (a pane's metrics of one feature and segment, as :meth:`PaneScorer.score` orders them)
    share the text of their key and of their sizes and counts."""
    lines: list[str] = []
    head_key = tail_key = None
    head = tail = ""
    for r in records:
        hk = (r.model_version, r.reference_id, r.feature, r.segment, r.window_start, r.window_end)
        if hk != head_key:
            head_key, head = hk, r._head_json()
        tk = (r.n_ref, r.n_cur, _float_key(r.out_of_reference), _float_key(r.alpha), r.calibration_n, r.events,
              r.first_offset, r.last_offset, r.counts)
        if tk != tail_key:
            tail_key, tail = tk, r._tail_json()
        lines.append(head + r._metric_json() + tail)
    return "\n".join(lines)


def _float_key(v) -> tuple:
    """Equal for two numbers exactly when they print the same (1 and 1.0, 0.0 and -0.0 do not; NaN never)."""
    return v.__class__, v, math.copysign(1.0, v)


def _num(v) -> str:
    """A finite number as json.dumps writes it."""
    return float.__repr__(v) if isinstance(v, float) else int.__repr__(v)


# ---------------------------------------------------------------------------- the flat layout

@dataclass(frozen=True)
class Layout:
    """Where each (segment, feature, bin) count of a pane lives in one flat array (the stream
    job's JVM counter keeps it; ``DriftPanes.java`` computes the same offsets from the same sizes).

    First the ALL_SEGMENT block: every feature's bins in feature order. Then, per dimension of
    SEGMENT_DIMENSIONS, per segment index (its kept values in order, then OTHER_SEGMENT), a block
    of the segment features' bins. An event's codes: per dimension its segment index, then per
    feature its bin (:func:`event_codes`)."""

    features: tuple[str, ...]
    nbins: tuple[int, ...]
    segment_features: tuple[int, ...]  # indices into features
    segment_counts: tuple[int, ...]  # per dimension: kept values + 1
    segment_names: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, profile: Profile) -> Layout:
        missing = [d for d in D.SEGMENT_DIMENSIONS if d not in profile.segments]
        if missing:
            raise ValueError(f"the reference has no segments of {missing[0]!r}: the stream needs all of "
                             f"{', '.join(D.SEGMENT_DIMENSIONS)}")
        names = tuple(tuple(f"{d}={v}" for v in (*profile.segments[d], D.OTHER_SEGMENT)) for d in D.SEGMENT_DIMENSIONS)
        return cls(profile.features, tuple(profile.nbins(f) for f in profile.features),
                   tuple(i for i, f in enumerate(profile.features) if profile.scored_in_segments(f)),
                   tuple(len(n) for n in names), names)

    @cached_property
    def all_offsets(self) -> tuple[int, ...]:
        return tuple(int(x) for x in np.concatenate([[0], np.cumsum(self.nbins)[:-1]]))

    @cached_property
    def segment_offsets(self) -> tuple[int, ...]:  # within a segment block, per segment feature
        nb = [self.nbins[i] for i in self.segment_features]
        return tuple(int(x) for x in np.concatenate([[0], np.cumsum(nb)[:-1]])) if nb else ()

    @cached_property
    def stride(self) -> int:
        return sum(self.nbins[i] for i in self.segment_features)

    @cached_property
    def dimension_bases(self) -> tuple[int, ...]:
        base, out = sum(self.nbins), []
        for c in self.segment_counts:
            out.append(base)
            base += c * self.stride
        return tuple(out)

    @property
    def size(self) -> int:
        return self.dimension_bases[-1] + self.segment_counts[-1] * self.stride

    def cells(self) -> list[tuple[str, str, int, int]]:
        """(feature, segment, offset, bins) of every block in the layout."""
        out = [(f, D.ALL_SEGMENT, o, n) for f, o, n in zip(self.features, self.all_offsets, self.nbins)]
        for d, base in enumerate(self.dimension_bases):
            for s, seg in enumerate(self.segment_names[d]):
                for i, o in zip(self.segment_features, self.segment_offsets):
                    out.append((self.features[i], seg, base + s * self.stride + o, self.nbins[i]))
        return out

    def flat(self, counts: Counts, pane: int) -> np.ndarray:
        """The flat array of one pane of :func:`window_counts`'s counts."""
        out = np.zeros(self.size, dtype=np.int64)
        for f, seg, o, n in self.cells():
            c = counts.get((pane, f, seg))
            if c is not None:
                out[o:o + n] = c
        return out

    def counts(self, flat: np.ndarray, pane: int) -> Counts:
        """The inverse of :meth:`flat` (blocks without events left out, as window_counts does)."""
        out: Counts = {}
        for f, seg, o, n in self.cells():
            block = flat[o:o + n]
            if block.any():
                out[(pane, f, seg)] = [int(x) for x in block]
        return out


#: The af1 field each segment dimension (and the categorical feature of that name) is read from.
SEGMENT_FIELDS = {"payment_format": "payment_format", "currency": "paid_currency", "bank": "from_bank"}


@dataclass(frozen=True)
class JvmBins:
    """The reference's bins as flat arrays for the JVM counter (``DriftPanes.Params.bins``):
    per dimension its af1 field and kept values; per feature its kind (NUMERIC: a column of the
    packed features, with its edges; CATEGORICAL: an af1 field, with (value, bin) pairs for the
    kept levels and the reference's other levels; SCORE: the fast path's score, with its edges)."""

    segment_fields: tuple[int, ...]
    segment_values: tuple[str, ...]
    segment_value_ends: tuple[int, ...]
    feature_kind: tuple[int, ...]
    feature_source: tuple[int, ...]
    edges: tuple[float, ...]
    edge_ends: tuple[int, ...]
    level_values: tuple[str, ...]
    level_bins: tuple[int, ...]
    level_ends: tuple[int, ...]

    NUMERIC, CATEGORICAL, SCORE = 0, 1, 2

    @classmethod
    def of(cls, profile: Profile, feature_columns: Sequence[str], wire_fields: Sequence[str]) -> JvmBins:
        """``feature_columns``: the packed features' names in order; ``wire_fields``: the af1 fields."""
        seg_fields, seg_values, seg_ends = [], [], []
        for d in D.SEGMENT_DIMENSIONS:
            seg_fields.append(wire_fields.index(SEGMENT_FIELDS[d]))
            seg_values.extend(profile.segments[d])
            seg_ends.append(len(seg_values))
        kind, source, edges, edge_ends, lvals, lbins, lends = [], [], [], [], [], [], []
        for f in profile.features:
            if f in profile.levels:
                if f not in SEGMENT_FIELDS:
                    raise ValueError(f"categorical drift feature {f!r}: the stream knows only {sorted(SEGMENT_FIELDS)}")
                kind.append(cls.CATEGORICAL)
                source.append(wire_fields.index(SEGMENT_FIELDS[f]))
                kept = profile.levels[f]
                for i, v in enumerate(kept):
                    lvals.append(v)
                    lbins.append(i)
                for v in profile.other_levels.get(f, ()):
                    if v not in kept:
                        lvals.append(v)
                        lbins.append(len(kept))
            elif f == SCORE:
                kind.append(cls.SCORE)
                source.append(-1)
                edges.extend(float(e) for e in profile.edges[f])
            elif f in feature_columns:
                kind.append(cls.NUMERIC)
                source.append(list(feature_columns).index(f))
                edges.extend(float(e) for e in profile.edges[f])
            else:
                raise ValueError(f"drift feature {f!r} is neither a stream feature, the score nor a segment dimension")
            edge_ends.append(len(edges))
            lends.append(len(lvals))
        return cls(tuple(seg_fields), tuple(seg_values), tuple(seg_ends), tuple(kind), tuple(source), tuple(edges),
                   tuple(edge_ends), tuple(lvals), tuple(lbins), tuple(lends))


# ---------------------------------------------------------------------------- scoring

@dataclass
class Pane:
    """One pane's counts as the stream job's counter emits them."""

    start: int
    counts: np.ndarray  # the flat layout
    events: int
    first_offset: int | None
    last_offset: int | None


def check_window(profile: Profile, window_minutes: int) -> None:
    """``ValueError`` unless the profile's dispersion was measured on windows of this size."""
    if profile.window_minutes and profile.window_minutes != window_minutes:
        raise ValueError(f"the reference's dispersion was measured on {profile.window_minutes}-minute windows, not "
                         f"{window_minutes}: build it for these (AUDITFLOW_DRIFT_WINDOW_MINUTES={window_minutes} "
                         "auditflow reference build)")


def _sorted_quantile(d: np.ndarray, q: float) -> float:
    """numpy's (linear) quantile of an array already sorted ascending."""
    pos = q * (d.size - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, d.size - 1)
    return float(d[lo] + (d[hi] - d[lo]) * (pos - lo))


class PaneScorer:
    """Scores panes of one reference: every (feature, segment) block the reference has counts
    for, three metrics each, vectorized over the blocks of one bin count; thresholds and p-values
    from reference draws at the calibration size (:func:`auditflow.drift.reference_draws_all`,
    cached per block and calibration size) carried to each window's size
    (:func:`auditflow.drift.size_scale`)."""

    def __init__(self, profile: Profile, window_minutes: int = D.DEFAULT_DRIFT_WINDOW_MINUTES, *, q: float = 0.05):
        check_window(profile, window_minutes)
        self.profile, self.layout, self.q = profile, Layout.of(profile), q
        self.window_ms = window_minutes * 60_000
        self.rid = profile.reference_id
        # calibrations by (reference counts, size): blocks whose reference counts are the same (quantile
        # bins often fill alike) draw the same windows, so they share one
        self._draws: dict[tuple[int, int], tuple[dict, dict, dict]] = {}
        cells = [(f, seg, o, n) for f, seg, o, n in self.layout.cells() if seg in profile.counts.get(f, {})]
        cells.sort(key=lambda c: (c[0], c[1]))
        self.cells = cells
        self.groups: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # bins -> (cell ids, index, ref)
        for nb in sorted({c[3] for c in cells}):
            ids = np.array([i for i, c in enumerate(cells) if c[3] == nb])
            index = np.array([np.arange(cells[i][2], cells[i][2] + nb) for i in ids])
            ref = np.array([profile.counts[cells[i][0]][cells[i][1]] for i in ids], dtype=np.float64)
            self.groups[nb] = (ids, index, ref)
        self.ref_n = [int(sum(profile.counts[f][seg])) for f, seg, _, _ in cells]
        same: dict[tuple, int] = {}
        self.ref_key = [same.setdefault(tuple(profile.counts[f][seg]), len(same)) for f, seg, _, _ in cells]
        # per cell: a one-bin reference, its first filled bin, a categorical feature
        self.ref_single = np.array([sum(1 for x in profile.counts[f][seg] if x) == 1 for f, seg, _, _ in cells], dtype=bool)
        self.ref_bin = np.array([next((i for i, x in enumerate(profile.counts[f][seg]) if x), 0)
                                 for f, seg, _, _ in cells], dtype=np.int64)
        self.categorical = np.array([f in profile.levels for f, _, _, _ in cells], dtype=bool)
        # per cell: its dispersion (estimate_dispersion), by which its metrics are divided
        self.dispersion = np.array([profile.dispersion.get(f, {}).get(seg, 1.0) for f, seg, _, _ in cells])
        self._groups_of: dict[D.DriftRule, list[tuple[tuple, list[int]]]] = {}

    def _calibration(self, cell: int, n: int):
        key = (self.ref_key[cell], n)
        got = self._draws.get(key)
        if got is None and self.ref_single[cell]:
            # one-bin reference: every draw is the same window (all n in that bin), so one metric
            # value is all 1000 draws would give
            f, seg, _, _ = self.cells[cell]
            ref = self.profile.counts[f][seg]
            window = [n if i == self.ref_bin[cell] else 0 for i in range(len(ref))]
            draws = {m: np.full(D.DEFAULT_DRAWS, D.metric(m, ref, window, self.profile.alpha)) for m in D.METRICS}
            got = self._draws[key] = (draws, {m: (float(d[0]), float(d[0])) for m, d in draws.items()},
                                      {m: (0.0, 0.0) for m in D.METRICS})
        if got is None:
            f, seg, _, _ = self.cells[cell]
            draws = {m: np.sort(d) for m, d in
                     D.reference_draws_all(self.profile.counts[f][seg], n, D.METRICS, alpha=self.profile.alpha).items()}
            thresholds = {m: (_sorted_quantile(d, D.WARN_QUANTILE), _sorted_quantile(d, D.DRIFT_QUANTILE))
                          for m, d in draws.items()}
            fits = {m: D.tail_fit(d, m) for m, d in draws.items()}
            got = self._draws[key] = (draws, thresholds, fits)
        return got

    def _p_values(self, m: str, values: np.ndarray, cals: Mapping[int, tuple]) -> np.ndarray:
        """:func:`auditflow.drift.tail_p_value` of each judged cell's value (1 for the others), the
        values given at the cells' calibration sizes (divided by the size scale): the empirical
        p-value from each cell's sorted draws, the scaled chi-square tail
        (:func:`auditflow.drift.tail_p_values`) for the few beyond every draw."""
        out = np.ones(len(self.cells))
        vs = values.tolist()
        beyond: list[int] = []
        for i, (draws, _, _) in cals.items():
            d = draws[m]
            size = d.size
            if size == 0:
                continue  # no draws: p = 1
            above = size - int(d.searchsorted(vs[i], "left"))
            if above:
                out[i] = (1.0 + above) / (1.0 + size)
            else:
                beyond.append(i)
        by_size: dict[int, list[int]] = defaultdict(list)
        for i in beyond:
            by_size[cals[i][0][m].size].append(i)
        for size, ids in by_size.items():
            out[ids] = D.tail_p_values(values[ids], np.stack([cals[i][0][m] for i in ids]), m,
                                       np.array([cals[i][2][m] for i in ids], dtype=np.float64))
        return out

    @cached_property
    def _heads(self) -> list[str]:
        """Per cell, the JSON of its records' key up to the window (see :meth:`DriftRecord.to_json`)."""
        p = self.profile
        return [_HEAD_JSON.split('"window_start"')[0] % (_encode_str(p.model_version), _encode_str(self.rid),
                                                          _encode_str(f), _encode_str(seg))
                for f, seg, _, _ in self.cells]

    def _rule_groups(self, rule: D.DriftRule) -> list[tuple[tuple, list[int]]]:
        """The rule's groups over the cells it looks at: (group key, cell ids), cells in order."""
        got = self._groups_of.get(rule)
        if got is None:
            groups: dict[tuple, list[int]] = defaultdict(list)
            for i, (f, seg, _, _) in enumerate(self.cells):
                if (rule.features and f not in rule.features) or (rule.segments and seg not in rule.segments):
                    continue
                groups[tuple({"feature": f, "segment": seg}[g] for g in rule.group_by)].append(i)
            got = self._groups_of[rule] = list(groups.items())
        return got

    def score(self, pane: Pane) -> list[DriftRecord]:
        """The pane's records, sorted by (feature, segment, metric)."""
        return self.scored(pane).records()

    def scored(self, pane: Pane) -> ScoredPane:
        """The pane's scores, column by column (:class:`ScoredPane`)."""
        alpha, mc = self.profile.alpha, self.profile.min_count
        k = len(self.cells)
        values = {m: np.zeros(k) for m in D.METRICS}
        n_cur = np.zeros(k, dtype=np.int64)
        oor = np.zeros(k)
        constant = np.zeros(k, dtype=bool)
        cell_counts: list[tuple[int, ...]] = [()] * k
        flat = np.asarray(pane.counts, dtype=np.int64)
        for nb, (ids, index, ref) in self.groups.items():
            cur = flat[index]
            n = cur.sum(axis=1)
            n_cur[ids] = n
            for m, v in D.metric_rows_all(ref, cur.astype(np.float64), alpha).items():
                values[m][ids] = v
            for i, row in zip(ids.tolist(), cur.tolist()):
                cell_counts[i] = tuple(row)
            outside = np.where(self.categorical[ids], cur[:, -1], cur[:, 0] + cur[:, -1])
            oor[ids] = np.divide(outside, n, out=np.zeros(len(ids)), where=n > 0)
            constant[ids] = self.ref_single[ids] & (cur[np.arange(len(ids)), self.ref_bin[ids]] == n)
        n_list = n_cur.tolist()
        cal_sizes = [D.calibration_size(n, mc) if n >= mc else n for n in n_list]
        cals = {i: self._calibration(i, c) for i, (n, c) in enumerate(zip(n_list, cal_sizes)) if n >= mc}
        # the statuses of auditflow.drift.status, for every cell at once
        gate = np.select([n_cur == 0, constant, n_cur < mc], [_EMPTY, _CONSTANT, _INSUFFICIENT], -1)
        judged = gate < 0
        columns = {}
        for m in D.METRICS:  # thresholds, statuses, p-values and Benjamini-Hochberg over the judged blocks
            scale, warn, drift = np.ones(k), np.zeros(k), np.zeros(k)
            spread = np.sqrt(self.dispersion) if m == "js" else self.dispersion
            for i, (_, thresholds, _) in cals.items():  # draws at the grid point carried to the cell's size
                scale[i] = sc = D.size_scale(m, cal_sizes[i], n_list[i]) * spread[i]
                warn[i], drift[i] = thresholds[m][0] * sc, thresholds[m][1] * sc
            v = values[m]
            code = np.where(judged, np.where(v > drift, _DRIFT, np.where(v > warn, _WARN, _OK)), gate)
            pvs = self._p_values(m, v / scale, cals)
            idx = np.flatnonzero(judged)
            sig = np.zeros(k, dtype=bool)
            sig[idx] = D.benjamini_hochberg(pvs[idx].tolist(), self.q)
            columns[m] = MetricColumns(v, warn, drift, _STATUS_NAMES[code].tolist(), pvs, sig)
        return ScoredPane(self, pane.start, pane.start + self.window_ms, pane.events, pane.first_offset,
                          pane.last_offset, n_list, oor.tolist(), cal_sizes, cell_counts, columns)


_OK, _WARN, _DRIFT, _INSUFFICIENT, _EMPTY, _CONSTANT = (D.STATUSES.index(s) for s in
                                                        ("ok", "warn", "drift", "insufficient_data", "empty_window",
                                                         "constant"))
_STATUS_NAMES = np.array(D.STATUSES, dtype=object)
_METRIC_PART = {m: _METRIC_JSON.replace("%s", _encode_str(m), 1) for m in D.METRICS}


@dataclass(frozen=True, slots=True)
class MetricColumns:
    """One metric's results over a pane's cells (in :attr:`PaneScorer.cells` order)."""

    values: np.ndarray
    warn: np.ndarray
    drift: np.ndarray
    statuses: list[str]
    p_values: np.ndarray
    significant: np.ndarray


@dataclass(frozen=True, eq=False)
class ScoredPane:
    """A pane's drift scores column by column: what :meth:`records` gives as records, written as
    JSON lines (:meth:`json`) and judged by the alert rules (:meth:`conditions`) without building
    them. Its records are ordered by (feature, segment, metric)."""

    scorer: PaneScorer
    window_start: int
    window_end: int
    events: int
    first_offset: int | None
    last_offset: int | None
    n_cur: list[int]
    out_of_reference: list[float]
    calibration_n: list[int]
    counts: list[tuple[int, ...]]
    metrics: dict[str, MetricColumns]

    @property
    def reference_id(self) -> str:
        return self.scorer.rid

    @property
    def model_version(self) -> str:
        return self.scorer.profile.model_version

    def __len__(self) -> int:
        return len(self.n_cur) * len(D.METRICS)

    def records(self) -> list[DriftRecord]:
        sc, alpha = self.scorer, self.scorer.profile.alpha
        mv, rid, start, end = self.model_version, self.reference_id, self.window_start, self.window_end
        cols = [(m, c.values.tolist(), c.warn.tolist(), c.drift.tolist(), c.statuses, c.p_values.tolist(),
                 c.significant.tolist()) for m, c in self.metrics.items()]
        out = []
        for i, (f, seg, _, _) in enumerate(sc.cells):
            for m, vs, ws, ds, sts, pvs, sig in cols:
                out.append(DriftRecord(mv, rid, f, seg, start, end, m, vs[i], ws[i], ds[i], sts[i], pvs[i], sig[i],
                                       sc.ref_n[i], self.n_cur[i], self.out_of_reference[i], alpha,
                                       self.calibration_n[i], self.events, self.first_offset, self.last_offset,
                                       self.counts[i]))
        return out

    def json(self) -> str:
        """``records_json(self.records())``, written from the columns."""
        cols = [(_METRIC_PART[m], c.values.tolist(), c.warn.tolist(), c.drift.tolist(), c.statuses,
                 c.p_values.tolist(), c.significant.tolist()) for m, c in self.metrics.items()]
        floats = [np.concatenate([c.values, c.warn, c.drift, c.p_values]) for c in self.metrics.values()]
        if not (np.isfinite(np.concatenate(floats)).all() and np.isfinite(self.out_of_reference).all()
                and math.isfinite(self.scorer.profile.alpha)):
            return records_json(self.records())  # which record and field: DriftRecord says
        window = '"window_start":%s,"window_end":%s,' % (int.__repr__(self.window_start), int.__repr__(self.window_end))
        alpha = _num(self.scorer.profile.alpha)
        events = int.__repr__(self.events)
        first = "null" if self.first_offset is None else int.__repr__(self.first_offset)
        last = "null" if self.last_offset is None else int.__repr__(self.last_offset)
        r, lines = float.__repr__, []
        ref_n, heads = self.scorer.ref_n, self.scorer._heads
        for i, head in enumerate(heads):
            head += window
            tail = _TAIL_JSON % (int.__repr__(ref_n[i]), int.__repr__(self.n_cur[i]), _num(self.out_of_reference[i]),
                                 alpha, int.__repr__(self.calibration_n[i]), events, first, last,
                                 ",".join(map(int.__repr__, self.counts[i])))
            for part, vs, ws, ds, sts, pvs, sig in cols:
                lines.append(head + part % (r(vs[i]), r(ws[i]), r(ds[i]), _encode_str(sts[i]), r(pvs[i]),
                                            "true" if sig[i] else "false") + tail)
        return "\n".join(lines)

    def conditions(self, rule: D.DriftRule) -> dict[tuple, tuple[float, float, list]]:
        """:func:`_conditions` of this pane's records, from the columns."""
        c, cells = self.metrics[rule.metric], self.scorer.cells
        rows = list(zip(c.values.tolist(), c.drift.tolist(), c.statuses, c.significant.tolist(),
                        ((f, seg) for f, seg, _, _ in cells)))
        out = {}
        for key, ids in self.scorer._rule_groups(rule):
            got = _judge(rule, [rows[i] for i in ids])
            if got is not None:
                out[key] = got
        return out


def score_windows(profile: Profile, counts: Counts, window_minutes: int = D.DEFAULT_DRIFT_WINDOW_MINUTES,
                  *, panes: Iterable[int] | None = None, q: float = 0.05,
                  coverage: Mapping[int, tuple[int, int | None, int | None]] | None = None) -> list[DriftRecord]:
    """Drift records of every pane in ``panes`` (default: every pane from the first to the last
    one with counts), for every feature and every segment the reference holds (a segment without
    events in a pane is an ``empty_window``), sorted by their key. Thresholds and p-values are
    those of windows the size of the pane's (drawn at :func:`auditflow.drift.calibration_size`,
    carried to the pane's size by :func:`auditflow.drift.size_scale`); a pane
    too small to be judged (``insufficient_data``, ``empty_window``) gets thresholds 0 and p-value
    1. ``coverage``: per pane, (events, first offset, last offset) (default: the ALL_SEGMENT count,
    no offsets)."""
    w = window_minutes * 60_000
    if panes is None:
        starts = sorted({p for p, _, _ in counts})
        panes = range(starts[0], starts[-1] + w, w) if starts else ()
    scorer = PaneScorer(profile, window_minutes, q=q)
    out: list[DriftRecord] = []
    first = profile.features[0]
    for p in panes:
        events, lo, hi = (coverage or {}).get(p, (sum(counts.get((p, first, D.ALL_SEGMENT), ())), None, None))
        out.extend(scorer.score(Pane(p, scorer.layout.flat(counts, p), events, lo, hi)))
    out.sort(key=lambda r: (r.window_start, r.feature, r.segment, r.metric))
    return out


def coverage_of(rows: Iterable[Row], offsets: Iterable[int], window_minutes: int) -> dict[int, tuple[int, int, int]]:
    """Per pane: (events, smallest offset, largest offset) of ``rows`` (with their source offsets)."""
    out: dict[int, list[int]] = {}
    for r, off in zip(rows, offsets):
        c = out.setdefault(pane_start(r.ts_ms, window_minutes), [0, off, off])
        c[0] += 1
        c[1], c[2] = min(c[1], off), max(c[2], off)
    return {p: (c[0], c[1], c[2]) for p, c in out.items()}


# ---------------------------------------------------------------------------- alert rules

ALERT_SCHEMA = "auditflow.drift_alert/1"


@dataclass(frozen=True, slots=True)
class DriftAlert:
    """A drift rule that fired on a window: which group, since when, and the records it rests on."""

    alert_id: str
    rule: str
    action: str
    metric: str
    kind: str
    group: dict  # group_by key -> value
    window_start: int
    window_end: int
    since: int  # the first window of the run of windows that made it fire
    consecutive: int
    value: float  # the group's mean (mean_above) or largest value (status) on this window
    threshold: float  # the rule's `above`, or the largest drift threshold among those records
    records: tuple[tuple[str, str], ...]  # (feature, segment) of the records that met the condition
    reference_id: str
    model_version: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["records"] = [list(r) for r in self.records]
        return {"schema": ALERT_SCHEMA, **d}


def _group_key(rule: D.DriftRule, r: DriftRecord) -> tuple:
    return tuple(getattr(r, g) for g in rule.group_by)


def _conditions(rule: D.DriftRule, records: Sequence[DriftRecord]) -> dict[tuple, tuple[float, float, list]]:
    """Per group of one window: (value, threshold, (feature, segment) of the records) where the
    rule's condition holds."""
    groups: dict[tuple, list[tuple]] = defaultdict(list)
    for r in records:
        if r.metric != rule.metric or (rule.features and r.feature not in rule.features) \
                or (rule.segments and r.segment not in rule.segments):
            continue
        groups[_group_key(rule, r)].append((r.value, r.drift_threshold, r.status, r.significant, (r.feature, r.segment)))
    out = {}
    for key, rows in groups.items():
        got = _judge(rule, rows)
        if got is not None:
            out[key] = got
    return out


def _judge(rule: D.DriftRule, rows: Sequence[tuple]) -> tuple[float, float, list] | None:
    """The rule's condition on one group of one window, each record as (value, drift threshold,
    status, significant, (feature, segment)): (value, threshold, the records' pairs) where it holds."""
    if rule.kind == "status":
        hit = [r for r in rows if r[2] in rule.statuses and (r[3] or not rule.significant)
               and (rule.min_value is None or r[0] >= rule.min_value)]
        if hit:
            return max(r[0] for r in hit), max(r[1] for r in hit), [r[4] for r in hit]
        return None
    judged = [r for r in rows if r[2] in D.JUDGED]
    if judged:
        mean = math.fsum(r[0] for r in judged) / len(judged)
        if mean > rule.above:
            return mean, float(rule.above), [r[4] for r in judged]
    return None


def rule_alerts(rules: Sequence[D.DriftRule], history: Sequence[Sequence[DriftRecord] | ScoredPane],
                memo: dict | None = None) -> list[DriftAlert]:
    """The alerts of the last window of ``history`` (consecutive windows, oldest first, each the
    records of one window or a :class:`ScoredPane`): a rule fires where its condition held on exactly ``consecutive``
    windows up to and including the last (so once per run of windows).

    ``memo``: a dict the caller keeps between calls over a sliding history (the same window
    objects): each window's conditions are then evaluated once, not once per later window; it
    holds only the windows of the last call."""
    if not history or not history[-1]:
        return []

    def evaluate(rule: D.DriftRule, w) -> dict:
        return w.conditions(rule) if isinstance(w, ScoredPane) else _conditions(rule, w)

    def conditions(rule: D.DriftRule, w) -> dict:
        if memo is None:
            return evaluate(rule, w)
        got = memo.get((rule.name, id(w)))
        if got is None or got[0] is not w:  # the window itself is kept, so its id is not reused
            got = memo[(rule.name, id(w))] = (w, evaluate(rule, w))
        return got[1]

    def first(w):  # what names the window: its first record, or the scored pane itself
        return w if isinstance(w, ScoredPane) else w[0]

    conds = {rule.name: [conditions(rule, w) for w in history] for rule in rules}
    if memo is not None:
        live = {id(w) for w in history}
        for k in [k for k in memo if k[1] not in live]:
            del memo[k]
    last = first(history[-1])
    out = []
    for rule in rules:
        per_window = conds[rule.name]
        for key, (value, threshold, hit) in sorted(per_window[-1].items()):
            run = 0
            for c in reversed(per_window):
                if key not in c:
                    break
                run += 1
            if run != rule.consecutive:
                continue
            since = first(history[len(history) - run]).window_start
            group = dict(zip(rule.group_by, key))
            aid = "drift-" + canonical_sha256({"rule": rule.to_dict(), "group": group, "window_start": last.window_start,
                                               "reference_id": last.reference_id})[:20]
            out.append(DriftAlert(aid, rule.name, rule.action, rule.metric, rule.kind, group, last.window_start,
                                  last.window_end, since, run, value, threshold,
                                  tuple(sorted(hit)), last.reference_id,
                                  last.model_version))
    return out


def history_needed(rules: Sequence[D.DriftRule]) -> int:
    """How many earlier windows :func:`rule_alerts` needs besides the last."""
    return max((r.consecutive for r in rules), default=1)


# ---------------------------------------------------------------------------- in the stream job

@dataclass(frozen=True)
class DriftSpec:
    """What the stream job needs to score drift: the reference, the window, the alert rules."""

    profile: Profile
    window_minutes: int = D.DEFAULT_DRIFT_WINDOW_MINUTES
    rules: tuple[D.DriftRule, ...] = D.DEFAULT_RULES
    # more empty windows than this between two with events: not emitted (and rules start over)
    max_gap_panes: int = 1000

    def __post_init__(self) -> None:
        if not isinstance(self.window_minutes, int) or not 1 <= self.window_minutes <= 7 * 1440:
            raise ValueError(f"drift window of {self.window_minutes!r} minutes: expected 1 to {7 * 1440}")
        Layout.of(self.profile)  # the stream needs every segment dimension
        check_window(self.profile, self.window_minutes)
        bad = [f for f in self.profile.features if f not in self.profile.levels and f not in self.profile.edges]
        if bad:
            raise ValueError(f"drift reference feature {bad[0]!r} has neither bin edges nor levels")


def decode_panes(blob: bytes, size: int) -> list[tuple[Pane, bytes]]:
    """The panes of one ``DriftPanes.java`` row (oldest first), each with a digest of its bytes."""
    import hashlib

    width = 4 + size
    arr = np.frombuffer(blob, dtype="<i8")
    if arr.size % width:
        raise ValueError(f"drift panes of {arr.size} longs: not a multiple of {width}")
    out = []
    for row in arr.reshape(-1, width):
        start, events, lo, hi = (int(x) for x in row[:4])
        out.append((Pane(start, row[4:], events, lo if events else None, hi if events else None),
                    hashlib.sha256(row.tobytes()).digest()))
    return out


def load_drift_spec(reference: str | Path, window_minutes: int = D.DEFAULT_DRIFT_WINDOW_MINUTES,
                    rules_file: str | Path | None = None) -> DriftSpec:
    """A :class:`DriftSpec` from a reference file (``auditflow reference build``'s JSON) and an
    optional rules file (JSON, :func:`auditflow.drift.parse_rules`). ``ValueError`` naming the file."""
    import json

    try:
        profile = Profile.from_body(json.loads(Path(reference).read_bytes()))
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{reference}: not a drift reference ({e})") from None
    rules = D.DEFAULT_RULES
    if rules_file is not None:
        try:
            rules = D.parse_rules(json.loads(Path(rules_file).read_text(encoding="utf-8")))
        except (OSError, ValueError) as e:
            raise ValueError(f"{rules_file}: {e}") from None
    try:
        return DriftSpec(profile, window_minutes, rules)
    except ValueError as e:
        raise ValueError(f"{reference}: {e}") from None


class PaneScoring:
    """The stream job's pane scoring: each row of ``DriftPanes.java`` (a pane and the panes before
    it) to ``('S', drift records)`` and ``('X', drift alerts)`` rows, each the JSON lines of that
    kind joined by newlines. A function of its input row alone (the panes before come with it),
    so a restored job scores and alerts as an uninterrupted one; what it keeps between rows is a
    cache (scored panes, by content, and the calibrations)."""

    def __init__(self, spec: DriftSpec):
        self.spec = spec
        self.scorer = PaneScorer(spec.profile, spec.window_minutes)
        self.cache: dict[tuple[int, bytes], ScoredPane] = {}
        self.memo: dict = {}

    def rows(self, panes: bytes) -> list[tuple[str, str]]:
        history, keep = [], set()
        for pane, digest in decode_panes(panes, self.scorer.layout.size):
            key = (pane.start, digest)
            keep.add(key)
            recs = self.cache.get(key)
            if recs is None:
                recs = self.cache[key] = self.scorer.scored(pane)
            history.append(recs)
        for k in [k for k in self.cache if k not in keep]:
            del self.cache[k]
        out = []
        if history and history[-1]:
            out.append(("S", history[-1].json()))
        alerts = rule_alerts(self.spec.rules, history, self.memo)
        if alerts:
            out.append(("X", "\n".join([json.dumps(a.to_dict(), separators=(",", ":"), allow_nan=False)
                                        for a in alerts])))
        return out
