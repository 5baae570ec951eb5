"""Drift of the scoring inputs and the score against a frozen reference: the vocabulary (metrics,
statuses, segments, defaults) and the metric definitions over bin counts, defined once.

Every metric compares two histograms over the same frozen bins: the reference's counts and a
window's counts. Both get the same additive smoothing ``alpha`` per bin (recorded in each drift
record), so no probability is zero and no metric is infinite or NaN, whatever the window:

* ``psi``: population stability index, sum over bins of (q - p) * ln(q / p);
* ``kl``: Kullback-Leibler divergence of the window from the reference, KL(Q || P), in nats;
* ``js``: Jensen-Shannon *distance*, base 2 (the square root of the divergence), in [0, 1].

Logarithms of probabilities are taken as differences of logarithms of (smoothed) counts, and the
mixture of JS in log space (``logaddexp``), so a bin with a tiny mass loses no precision; sums are
``math.fsum``. P is the reference, Q the window.

A metric's size depends on the window's sample size as much as on drift (a small window of an
unchanged stream scatters), so thresholds are not fixed numbers: :func:`calibrated_thresholds`
draws windows of the same size from the reference itself (multinomial, seeded: the same inputs give
the same thresholds) and takes their quantiles; :func:`bootstrap_p_value` is the share of those
draws at least as far from the reference as the window, and :func:`benjamini_hochberg` controls the
false discovery rate across the features x segments of one window.

>>> round(psi([50, 50], [50, 50]), 12), round(js_distance([10, 0], [0, 10], alpha=0.0), 12)
(0.0, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The metrics of a drift record, in output order.
METRICS = ("psi", "js", "kl")
#: A drift record's status: the value against the thresholds, or why it is not judged.
STATUSES = ("ok", "warn", "drift", "insufficient_data", "empty_window", "constant")
#: What a segment is cut by (besides all events together, :data:`ALL_SEGMENT`).
SEGMENT_DIMENSIONS = ("payment_format", "currency", "bank")
ALL_SEGMENT = "__all__"
#: Segment values beyond the cap (the reference's most frequent ones are kept) share this one.
OTHER_SEGMENT = "__other__"
#: The bin of a categorical level the reference never saw.
NEW_CATEGORY = "__new__"
#: Numeric bins: this many from the reference's quantiles, plus underflow and overflow.
DEFAULT_BINS = 10
#: Additive smoothing per bin (Jeffreys' prior), applied to both histograms.
DEFAULT_SMOOTHING = 0.5
#: Fewer events in a window than this: ``insufficient_data`` (the value is still given).
DEFAULT_MIN_COUNT = 200
#: Tumbling event-time window of the drift scores.
DEFAULT_DRIFT_WINDOW_MINUTES = 60
#: Most segment values per dimension (the rest are OTHER_SEGMENT).
DEFAULT_SEGMENT_CAP = 20
#: Quantiles of the same-size reference draws that make a window ``warn`` and ``drift``.
WARN_QUANTILE = 0.95
DRIFT_QUANTILE = 0.99
#: Reference draws per threshold calibration (p-values down to 1/1001).
DEFAULT_DRAWS = 1000


#: A reference judges an input's drift only if it spans this many of the input's memories
#: (:data:`auditflow.features.FEATURE_MEMORY_MINUTES`): an input that looks back a week, in a
#: reference of one week, is one sample of its slow movements (month-end, paydays), and every later
#: week differs from it; one that grows without bound drifts by construction.
MEMORIES_PER_REFERENCE = 3


def monitored_features(memory: dict[str, int | None], span_minutes: int) -> tuple[str, ...]:
    """The inputs a reference spanning ``span_minutes`` judges, in ``memory``'s order.

    >>> monitored_features({"amount": 0, "n_24h": 1440, "n_7d": 10080, "n_life": None}, 3 * 1440)
    ('amount', 'n_24h')
    """
    return tuple(f for f, m in memory.items() if m is not None and MEMORIES_PER_REFERENCE * m <= span_minutes)


def _log_probs(counts: Sequence[float], alpha: float) -> list[float]:
    k = len(counts)
    if k == 0:
        raise ValueError("a histogram needs at least one bin")
    if any(c < 0 for c in counts):
        raise ValueError(f"negative bin count in {list(counts)[:8]}")
    total = math.fsum(counts) + alpha * k
    if total <= 0:
        raise ValueError("an empty histogram without smoothing has no distribution")
    log_total = math.log(total)
    return [math.log(c + alpha) - log_total if c + alpha > 0 else -math.inf for c in counts]


def _check(ref: Sequence[float], cur: Sequence[float]) -> None:
    if len(ref) != len(cur):
        raise ValueError(f"histograms over different bins: {len(ref)} and {len(cur)}")


def psi(ref: Sequence[float], cur: Sequence[float], alpha: float = DEFAULT_SMOOTHING) -> float:
    """Population stability index of ``cur`` against ``ref`` (both smoothed by ``alpha``)."""
    _check(ref, cur)
    lp, lq = _log_probs(ref, alpha), _log_probs(cur, alpha)
    return math.fsum(
        (math.exp(b) - math.exp(a)) * (b - a) for a, b in zip(lp, lq, strict=True) if a > -math.inf or b > -math.inf
    )


def kl(ref: Sequence[float], cur: Sequence[float], alpha: float = DEFAULT_SMOOTHING) -> float:
    """KL(Q || P) in nats: Q the smoothed window, P the smoothed reference."""
    _check(ref, cur)
    lp, lq = _log_probs(ref, alpha), _log_probs(cur, alpha)
    out = []
    for a, b in zip(lp, lq, strict=True):
        if b == -math.inf:
            continue  # 0 * log 0 = 0
        if a == -math.inf:
            return math.inf  # only without smoothing: the window has mass where the reference has none
        out.append(math.exp(b) * (b - a))
    return max(0.0, math.fsum(out))


def js_distance(ref: Sequence[float], cur: Sequence[float], alpha: float = DEFAULT_SMOOTHING) -> float:
    """Jensen-Shannon distance, base 2, in [0, 1] (``scipy.spatial.distance.jensenshannon``'s)."""
    _check(ref, cur)
    lp, lq = _log_probs(ref, alpha), _log_probs(cur, alpha)
    ln2 = math.log(2.0)
    terms = []
    for a, b in zip(lp, lq, strict=True):
        lm = np.logaddexp(a, b) - ln2  # log of the mixture (p + q) / 2
        if a > -math.inf:
            terms.append(0.5 * math.exp(a) * (a - lm))
        if b > -math.inf:
            terms.append(0.5 * math.exp(b) * (b - lm))
    div = max(0.0, math.fsum(terms)) / ln2
    return min(1.0, math.sqrt(div))


METRIC_FUNCTIONS = {"psi": psi, "js": js_distance, "kl": kl}


def metric(name: str, ref: Sequence[float], cur: Sequence[float], alpha: float = DEFAULT_SMOOTHING) -> float:
    try:
        f = METRIC_FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown drift metric {name!r} (one of {', '.join(METRICS)})") from None
    return f(ref, cur, alpha)


def metric_rows(name: str, ref: np.ndarray, samples: np.ndarray, alpha: float) -> np.ndarray:
    """The metric of each row of ``samples`` against ``ref`` (one histogram for all rows, or one
    per row), vectorized: the same definitions as :func:`psi`, :func:`kl`, :func:`js_distance`
    (needs ``alpha`` > 0)."""
    return metric_rows_all(ref, samples, alpha, (name,))[name]


#: Calibration sizes per doubling of the window size (see :func:`calibration_size`).
CALIBRATION_STEPS_PER_DOUBLING = 2


def calibration_size(n: int, min_count: int = DEFAULT_MIN_COUNT) -> int:
    """The window size thresholds are drawn at: the largest point of the grid
    ``min_count * 2**(j/2)`` (j = 0, 1, ...) at or below ``n`` (within 30 % of it, never above).
    Windows of similar size share one calibration, so a stream's scoring costs a few calibrations
    per feature and segment, not one per window; :func:`size_scale` carries the draws from the
    grid point to the window's own size.

    >>> [calibration_size(n, 200) for n in (200, 281, 282, 1000, 1_000_000)]
    [200, 200, 282, 800, 819200]
    """
    k = CALIBRATION_STEPS_PER_DOUBLING
    if n < min_count:
        return n
    j = math.floor(k * math.log2(n / min_count) + 1e-9)
    while math.floor(min_count * 2 ** ((j + 1) / k)) <= n:
        j += 1
    while j > 0 and math.floor(min_count * 2 ** (j / k)) > n:
        j -= 1
    return math.floor(min_count * 2 ** (j / k))


def size_scale(name: str, n_cal: int, n: int) -> float:
    """The factor that carries a metric's draws at ``n_cal`` events to windows of ``n``: the
    metrics of an unchanged stream shrink with the window's size like a chi-square over it
    (``2n * KL`` and ``2n * PSI`` tend to chi-square(bins - 1), the JS divergence to one over 8n),
    so PSI and KL scale as ``n_cal / n`` and the JS *distance* as its square root. With windows
    at most 30 % above their grid point the scaled quantiles stay within a few per cent of
    same-size draws (tests/auditflow/test_drift_metrics.py), where unscaled ones would sit up to
    40 % too high (PSI and KL; the JS distance 20 %).

    The scaled draws' thresholds are ``quantile * scale``; a value's p-value is taken at the
    grid point, ``tail_p_value(value / scale, draws at n_cal)``.

    >>> size_scale("psi", 200, 400), size_scale("js", 200, 800)
    (0.5, 0.5)
    """
    if name not in METRICS:
        raise ValueError(f"unknown drift metric {name!r} (one of {', '.join(METRICS)})")
    if n_cal <= 0 or n <= 0:
        raise ValueError(f"size_scale needs positive sizes: n_cal={n_cal!r}, n={n!r}")
    r = n_cal / n
    return math.sqrt(r) if name == "js" else r


def reference_draws(
    ref: Sequence[int],
    n: int,
    name: str,
    *,
    alpha: float = DEFAULT_SMOOTHING,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> np.ndarray:
    """The metric of ``draws`` windows of ``n`` events drawn from the reference's own
    distribution (multinomial on its counts, seeded): what an unchanged stream gives at that size."""
    return reference_draws_all(ref, n, (name,), alpha=alpha, draws=draws, seed=seed)[name]


def reference_samples(
    ref: Sequence[int] | np.ndarray, n: int, *, draws: int = DEFAULT_DRAWS, seed: int = 0
) -> np.ndarray:
    """``draws`` windows of ``n`` events from the reference's own distribution (multinomial on its
    counts), seeded by (seed, n, bins). Bins the reference never filled get none (drawn over the
    others only: the same distribution, fewer binomial steps per draw)."""
    ref_arr = np.asarray(ref, dtype=np.int64)
    total = ref_arr.sum()
    if n <= 0 or total <= 0:
        return np.zeros((draws, len(ref_arr)), dtype=np.int64)
    rng = np.random.default_rng([seed, n, len(ref_arr)])
    filled = np.flatnonzero(ref_arr)
    if filled.size == ref_arr.size:
        return rng.multinomial(n, ref_arr / total, size=draws)
    out = np.zeros((draws, len(ref_arr)), dtype=np.int64)
    out[:, filled] = rng.multinomial(n, ref_arr[filled] / total, size=draws)
    return out


def metric_rows_all(
    ref: np.ndarray, samples: np.ndarray, alpha: float, names: Sequence[str] = METRICS
) -> dict[str, np.ndarray]:
    """:func:`metric_rows` of several metrics, the log-probabilities computed once."""
    k = samples.shape[-1]
    lp = np.log(ref + alpha) - np.log(ref.sum(axis=-1, keepdims=True) + alpha * k)
    lq = np.log(samples + alpha) - np.log(samples.sum(axis=-1, keepdims=True) + alpha * k)
    p, q, d = np.exp(lp), np.exp(lq), lq - lp

    def rowsum(x):  # over the bins (einsum: several times faster than np.sum on a short last axis)
        return np.einsum("...k->...", x)

    out = {}
    for name in names:
        if name == "psi":
            out[name] = rowsum((q - p) * d)
        elif name == "kl":
            out[name] = np.maximum(0.0, rowsum(q * d))
        elif name == "js":
            lm = np.log(0.5 * (p + q))  # log of the mixture M = (P + Q) / 2
            div = 0.5 * rowsum(p * (lp - lm)) + 0.5 * rowsum(q * (lq - lm))
            out[name] = np.minimum(1.0, np.sqrt(np.maximum(0.0, div) / math.log(2.0)))
        else:
            raise ValueError(f"unknown drift metric {name!r} (one of {', '.join(METRICS)})")
    return out


def reference_draws_all(
    ref: Sequence[int],
    n: int,
    names: Sequence[str] = METRICS,
    *,
    alpha: float = DEFAULT_SMOOTHING,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """:func:`reference_draws` of several metrics over the same drawn windows (one draw)."""
    ref_arr = np.asarray(ref, dtype=np.int64)
    if n <= 0 or ref_arr.sum() <= 0:
        return {m: np.zeros(0) for m in names}
    samples = reference_samples(ref_arr, n, draws=draws, seed=seed)
    if alpha > 0:
        return metric_rows_all(ref_arr.astype(np.float64), samples.astype(np.float64), alpha, names)
    return {m: np.array([metric(m, ref_arr.tolist(), s.tolist(), alpha) for s in samples]) for m in names}


def calibrated_thresholds(
    ref: Sequence[int],
    n: int,
    name: str,
    *,
    alpha: float = DEFAULT_SMOOTHING,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> tuple[float, float]:
    """(warn, drift): the :data:`WARN_QUANTILE` and :data:`DRIFT_QUANTILE` of the metric over
    same-size reference draws (see :func:`reference_draws`)."""
    d = reference_draws(ref, n, name, alpha=alpha, draws=draws, seed=seed)
    if d.size == 0:
        return math.inf, math.inf
    return float(np.quantile(d, WARN_QUANTILE)), float(np.quantile(d, DRIFT_QUANTILE))


def bootstrap_p_value(value: float, draws: np.ndarray) -> float:
    """(1 + #draws >= value) / (1 + #draws): never 0, so BH stays meaningful."""
    return (1.0 + float(np.sum(draws >= value))) / (1.0 + draws.size)


def tail_fit(sorted_draws: np.ndarray, name: str) -> tuple[float, float]:
    """(a, nu) of the scaled chi-square a * chi2(nu) with the draws' mean and variance
    (Satterthwaite), of the divergence (the JS distance squared); (0, 0) when they do not allow one."""
    d = sorted_draws * sorted_draws if name == "js" else sorted_draws
    if d.size == 0:
        return 0.0, 0.0
    mean, var = float(d.mean()), float(d.var())
    if not (mean > 0 and var > 0):
        return 0.0, 0.0
    return var / (2.0 * mean), 2.0 * mean * mean / var


def tail_p_value(value: float, sorted_draws: np.ndarray, name: str, fit: tuple[float, float] | None = None) -> float:
    """The p-value of ``value`` against same-size reference draws (sorted ascending): the
    empirical (1 + #draws >= value) / (1 + #draws) while some draw reaches the value; beyond the
    largest draw, the tail of the scaled chi-square of :func:`tail_fit` (``fit``, if computed
    already), capped at 1 / (1 + #draws). So a window far beyond every draw gets a p-value that
    says how far, and one drifting block can survive Benjamini-Hochberg among hundreds (the
    empirical p-value alone stops at 1/1001)."""
    from scipy.special import chdtrc

    n = sorted_draws.size
    if n == 0:
        return 1.0
    above = n - int(np.searchsorted(sorted_draws, value, side="left"))
    if above > 0:
        return (1.0 + above) / (1.0 + n)
    a, nu = fit if fit is not None else tail_fit(sorted_draws, name)
    if a <= 0:
        return 1.0 / (1.0 + n)
    v = value * value if name == "js" else value
    return float(min(1.0 / (1.0 + n), max(float(chdtrc(nu, v / a)), 1e-300)))


def tail_p_values(values: np.ndarray, sorted_draws: np.ndarray, name: str, fits: np.ndarray) -> np.ndarray:
    """:func:`tail_p_value` of each row: ``values[i]`` against the sorted draws ``sorted_draws[i]``
    (rows of one length, at least one draw) with the fit ``fits[i]`` = (a, nu), vectorized."""
    from scipy.special import chdtrc

    v = np.asarray(values, dtype=np.float64)
    n = sorted_draws.shape[1]
    above = np.count_nonzero(sorted_draws >= v[:, None], axis=1)
    a, nu = fits[:, 0], fits[:, 1]
    cap = 1.0 / (1.0 + n)
    x = v * v if name == "js" else v
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.where(
            a > 0,
            np.minimum(cap, np.maximum(chdtrc(nu, np.where(a > 0, x / np.where(a > 0, a, 1.0), 0.0)), 1e-300)),
            cap,
        )
    return np.where(above > 0, (1.0 + above) / (1.0 + n), tail)


def benjamini_hochberg(p_values: Sequence[float], q: float = 0.05) -> list[bool]:
    """Which hypotheses are rejected at false discovery rate ``q`` (Benjamini-Hochberg step-up)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    k_max = 0
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= q * rank / m:
            k_max = rank
    rejected = [False] * m
    for rank, i in enumerate(order, start=1):
        if rank <= k_max:
            rejected[i] = True
    return rejected


def status(
    value: float,
    n_cur: int,
    thresholds: tuple[float, float],
    *,
    constant: bool = False,
    min_count: int = DEFAULT_MIN_COUNT,
) -> str:
    """The status of a window's metric: ``empty_window`` without events, ``constant`` when the
    reference and the window both hold one and the same bin only, ``insufficient_data`` below
    ``min_count`` events, else ``ok`` / ``warn`` / ``drift`` against the calibrated thresholds."""
    if n_cur == 0:
        return "empty_window"
    if constant:
        return "constant"
    if n_cur < min_count:
        return "insufficient_data"
    warn, drift = thresholds
    return "drift" if value > drift else "warn" if value > warn else "ok"


# ---------------------------------------------------------------------------- alert rules

#: What a rule's condition looks at in one window: each record's status (``status``), or the mean
#: value of a group's judged records (``mean_above``).
RULE_KINDS = ("status", "mean_above")
#: What a group is cut by.
RULE_GROUP_KEYS = ("feature", "segment")
#: What a rule asks for besides the alert.
RULE_ACTIONS = ("alert", "resample_reference")
JUDGED = ("ok", "warn", "drift")


@dataclass(frozen=True)
class DriftRule:
    """A drift alert rule: per group (``group_by`` of feature and segment; ``()``: every record
    of the window together), a condition on one metric's records of a window; the rule fires on
    the window where the condition has held for exactly ``consecutive`` windows in a row (once per
    run of windows; it fires again after the condition lapsed).

    * ``kind="status"``: some record of the group has a status in ``statuses`` (and, with
      ``significant``, survived Benjamini-Hochberg, and, with ``min_value``, a value at least
      that: on large windows a shift too small to matter is still significant, so the default
      rule also asks for a moderate PSI, 0.1).
    * ``kind="mean_above"``: the mean value of the group's judged records is above ``above``.

    "Drift on 3 consecutive windows":
    ``{"name": "sustained", "metric": "psi", "kind": "status", "consecutive": 3}``; "average drift
    score per group per minute above 0.85 raises an alert and re-samples the reference" (with
    one-minute windows): ``{"name": "group-mean", "metric": "js", "kind": "mean_above",
    "above": 0.85, "group_by": ["segment"], "action": "resample_reference"}``.

    >>> DriftRule.from_dict({"name": "x", "metric": "js", "kind": "mean_above", "above": 0.85}).group_by
    ('feature', 'segment')
    """

    name: str
    metric: str
    kind: str = "status"
    consecutive: int = 1
    group_by: tuple[str, ...] = RULE_GROUP_KEYS
    statuses: tuple[str, ...] = ("drift",)
    significant: bool = True
    above: float | None = None
    min_value: float | None = None  # status rules: the record's value must be at least this too
    features: tuple[str, ...] = ()  # only these features (all when empty)
    segments: tuple[str, ...] = ()  # only these segments (all when empty)
    action: str = "alert"

    def __post_init__(self) -> None:
        def bad(field: str, value, why: str):
            raise ValueError(f"drift rule {self.name!r}: {field}={value!r}: {why}")

        if not self.name:
            bad("name", self.name, "a rule needs a name")
        if self.metric not in METRICS:
            bad("metric", self.metric, f"expected one of {', '.join(METRICS)}")
        if self.kind not in RULE_KINDS:
            bad("kind", self.kind, f"expected one of {', '.join(RULE_KINDS)}")
        if (
            not isinstance(self.consecutive, int)
            or isinstance(self.consecutive, bool)
            or not 1 <= self.consecutive <= 1000
        ):
            bad("consecutive", self.consecutive, "expected an integer from 1 to 1000")
        if any(g not in RULE_GROUP_KEYS for g in self.group_by) or len(set(self.group_by)) != len(self.group_by):
            bad("group_by", list(self.group_by), f"expected distinct keys of {', '.join(RULE_GROUP_KEYS)}")
        if any(s not in STATUSES for s in self.statuses) or not self.statuses:
            bad("statuses", list(self.statuses), f"expected some of {', '.join(STATUSES)}")
        if self.kind == "mean_above":
            if (
                not isinstance(self.above, (int, float))
                or isinstance(self.above, bool)
                or not math.isfinite(self.above)
            ):
                bad("above", self.above, "a mean_above rule needs a finite number")
        elif self.above is not None:
            bad("above", self.above, "only a mean_above rule takes one")
        if self.min_value is not None and (
            self.kind != "status"
            or not isinstance(self.min_value, (int, float))
            or isinstance(self.min_value, bool)
            or not math.isfinite(self.min_value)
        ):
            bad("min_value", self.min_value, "a status rule's finite number")
        if self.action not in RULE_ACTIONS:
            bad("action", self.action, f"expected one of {', '.join(RULE_ACTIONS)}")

    @classmethod
    def from_dict(cls, d: dict) -> DriftRule:
        if not isinstance(d, dict):
            raise ValueError(f"a drift rule is an object, got {d!r}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(
                f"drift rule {d.get('name')!r}: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})"
            )
        kw = dict(d)
        for k in ("group_by", "statuses", "features", "segments"):
            if k in kw:
                if not isinstance(kw[k], (list, tuple)):
                    raise ValueError(f"drift rule {d.get('name')!r}: {k}={kw[k]!r}: expected a list")
                kw[k] = tuple(kw[k])
        return cls(**kw)

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


#: The rules a job runs unless configured otherwise: drift confirmed (significant after
#: Benjamini-Hochberg, and a PSI of at least 0.1) on 3 consecutive windows, per feature and segment.
DEFAULT_RULES = (DriftRule("sustained-drift", "psi", "status", consecutive=3, min_value=0.1),)


def parse_rules(doc) -> tuple[DriftRule, ...]:
    """Rules from a configuration document: a list of rule objects, or ``{"rules": [...]}``."""
    if isinstance(doc, dict) and "rules" in doc:
        doc = doc["rules"]
    if not isinstance(doc, list):
        raise ValueError('drift rules: expected a list of rule objects (or {"rules": [...]})')
    rules = tuple(DriftRule.from_dict(d) for d in doc)
    names = [r.name for r in rules]
    if len(set(names)) != len(names):
        raise ValueError(f"drift rules: duplicate rule name in {names}")
    return rules
