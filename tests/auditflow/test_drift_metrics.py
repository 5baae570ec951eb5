"""The drift metrics (auditflow.drift) against independent computations on the same smoothed
histograms: numpy for PSI, scipy for KL (scipy.stats.entropy) and the Jensen-Shannon distance
(scipy.spatial.distance.jensenshannon, base 2), within 1e-12; never NaN or infinite with
smoothing, whatever the window; thresholds that depend on the window's size and not on chance;
Benjamini-Hochberg as scipy's false_discovery_control decides."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from scipy.stats import entropy, false_discovery_control

from auditflow import drift

counts = st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=14)


def smoothed(c, alpha):
    c = np.asarray(c, dtype=np.float64) + alpha
    return c / c.sum()


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from([0.5, 1.0, 1e-3]))
def test_metrics_equal_numpy_and_scipy(data, alpha):
    ref = data.draw(counts)
    cur = data.draw(st.lists(st.integers(min_value=0, max_value=10**7), min_size=len(ref), max_size=len(ref)))
    p, q = smoothed(ref, alpha), smoothed(cur, alpha)
    assert drift.psi(ref, cur, alpha) == pytest.approx(float(np.sum((q - p) * np.log(q / p))), abs=1e-12)
    assert drift.kl(ref, cur, alpha) == pytest.approx(float(entropy(q, p)), abs=1e-12)
    js, want = drift.js_distance(ref, cur, alpha), float(jensenshannon(p, q, base=2))
    assert js**2 == pytest.approx(want**2, abs=1e-12)  # the divergence
    if want > 1e-3:  # near 0 the square root magnifies round-off (d sqrt(x)/dx -> infinity) in both
        assert js == pytest.approx(want, abs=1e-12)


def test_hand_worked_values():
    # p = (0.5, 0.5), q = (0.9, 0.1): PSI = 0.4 ln 1.8 + (-0.4) ln 0.2; KL(q||p) = 0.9 ln 1.8 + 0.1 ln 0.2
    assert drift.psi([5, 5], [9, 1], alpha=0.0) == pytest.approx(0.4 * math.log(1.8) - 0.4 * math.log(0.2), abs=1e-15)
    assert drift.kl([5, 5], [9, 1], alpha=0.0) == pytest.approx(0.9 * math.log(1.8) + 0.1 * math.log(0.2), abs=1e-15)
    assert drift.js_distance([1, 0], [0, 1], alpha=0.0) == 1.0  # disjoint: the maximum
    assert drift.psi([3, 7], [3, 7]) == 0.0 and drift.kl([3, 7], [30, 70], alpha=0.0) == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize(("ref", "cur"), [
    ([0, 0, 0], [0, 0, 0]),  # nothing anywhere
    ([100, 0, 0], [0, 0, 0]),  # an empty window
    ([100, 0, 0], [100, 0, 0]),  # a constant feature
    ([100, 0, 0], [0, 0, 100]),  # all mass where the reference has none
    ([10**9, 1, 0], [0, 1, 10**9]),
])
def test_never_nan_or_infinite_with_smoothing(ref, cur):
    for name in drift.METRICS:
        v = drift.metric(name, ref, cur)
        assert math.isfinite(v) and v >= 0.0, (name, v)
    assert drift.js_distance(ref, cur) <= 1.0


def test_thresholds_follow_the_window_size_and_are_reproducible():
    ref = [500, 1200, 3000, 2500, 900, 400, 100, 30]
    small = drift.calibrated_thresholds(ref, 200, "psi", seed=3)
    large = drift.calibrated_thresholds(ref, 20_000, "psi", seed=3)
    assert small == drift.calibrated_thresholds(ref, 200, "psi", seed=3)  # seeded: the same thresholds
    assert small[0] < small[1] and large[0] < large[1]
    assert large[1] < small[0] / 10  # 100x the events: an unchanged stream scatters far less
    # windows drawn from the reference exceed the warn threshold about 5% of the time
    draws = drift.reference_draws(ref, 200, "psi", seed=99)
    assert 0.02 < float(np.mean(draws > small[0])) < 0.09


def test_status_names_why_a_window_is_not_judged():
    th = (0.1, 0.2)
    assert drift.status(0.0, 0, th) == "empty_window"
    assert drift.status(0.0, 500, th, constant=True) == "constant"
    assert drift.status(0.5, 50, th) == "insufficient_data"
    assert [drift.status(v, 500, th) for v in (0.05, 0.15, 0.25)] == ["ok", "warn", "drift"]
    assert set(drift.STATUSES) >= {"ok", "warn", "drift", "insufficient_data", "empty_window", "constant"}


@pytest.mark.parametrize("seed", range(5))
def test_benjamini_hochberg_rejects_what_scipy_adjusts_below_q(seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(0, 1, 40), rng.uniform(0, 0.002, 6)])
    assert drift.benjamini_hochberg(p.tolist(), 0.05) == list(false_discovery_control(p) <= 0.05)
    assert drift.bootstrap_p_value(1.0, np.array([0.5, 2.0, 3.0])) == 0.75


@pytest.mark.parametrize("name", drift.METRICS)
def test_the_vectorized_draws_are_the_scalar_metric(name):
    ref = [500, 1200, 3000, 2500, 900, 400, 100, 0, 30]
    rng = np.random.default_rng([0, 300, len(ref)])  # the draws reference_draws makes
    samples = rng.multinomial(300, np.array(ref) / sum(ref), size=drift.DEFAULT_DRAWS)
    want = [drift.metric(name, ref, s.tolist()) for s in samples]
    assert drift.reference_draws(ref, 300, name).tolist() == pytest.approx(want, abs=1e-12)
