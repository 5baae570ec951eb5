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


@pytest.mark.parametrize("ref", [[500, 1200, 3000, 2500, 900, 400, 100, 30],
                                 [0, 4000, 3000, 2000, 1000, 500, 20, 5, 0],  # never-filled and sparse bins
                                 [7000, 2000, 600, 300, 60, 0, 10]])
def test_draws_at_the_grid_point_scaled_to_the_window_give_its_own_thresholds(ref):
    """Windows share the calibration of the grid point at or below their size; the draws carried
    to the window's size (size_scale) give the quantiles of draws at that very size, within 8 %,
    for windows just below the next grid point (the farthest from theirs). Unscaled they would sit
    15-50 % too high. Many draws on both sides, so the Monte Carlo error is small against that."""
    for n in (281, 399, 1130, 4524):
        n_cal = drift.calibration_size(n, 200)
        assert n_cal < n and drift.calibration_size(n + 1, 200) == n + 1  # the next grid point
        same = drift.reference_draws_all(ref, n, draws=20_000, seed=1)
        grid = drift.reference_draws_all(ref, n_cal, draws=20_000, seed=2)
        for name in drift.METRICS:
            for q in (drift.WARN_QUANTILE, drift.DRIFT_QUANTILE):
                want = float(np.quantile(same[name], q))
                scaled = float(np.quantile(grid[name] * drift.size_scale(name, n_cal, n), q))
                assert scaled == pytest.approx(want, rel=0.08), (n, name, q)
                assert float(np.quantile(grid[name], q)) > 1.15 * want, (n, name, q)


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
    samples = drift.reference_samples(ref, 300)  # the windows reference_draws scores
    want = [drift.metric(name, ref, s.tolist()) for s in samples]
    assert drift.reference_draws(ref, 300, name).tolist() == pytest.approx(want, abs=1e-12)


def test_reference_samples_are_multinomial_windows_of_the_reference():
    ref = np.array([500, 1200, 3000, 2500, 900, 400, 100, 0, 30, 0])
    s = drift.reference_samples(ref.tolist(), 250, draws=20_000, seed=4)
    assert s.shape == (20_000, 10) and (s.sum(axis=1) == 250).all() and (s[:, [7, 9]] == 0).all()
    p = ref / ref.sum()
    mean, var = s.mean(axis=0), s.var(axis=0)
    assert np.abs(mean - 250 * p).max() < 4 * np.sqrt(250 * p * (1 - p) / 20_000).max() + 1e-12
    assert np.allclose(var[p > 0], (250 * p * (1 - p))[p > 0], rtol=0.06)  # multinomial variances
    cov = np.cov(s[:, 2], s[:, 3])[0, 1]
    assert abs(cov - (-250 * p[2] * p[3])) < 0.1 * 250 * p[2] * p[3]  # and covariances
    assert (drift.reference_samples(ref.tolist(), 250, seed=4) == drift.reference_samples(ref.tolist(), 250, seed=4)).all()


@pytest.mark.parametrize("name", drift.METRICS)
def test_beyond_every_draw_the_p_value_follows_the_tail(name):
    ref = [500, 1200, 3000, 2500, 900, 400, 100, 30]
    big = np.sort(drift.reference_draws(ref, 400, name, draws=200_000, seed=5))  # the truth, from many draws
    small = np.sort(drift.reference_draws(ref, 400, name, seed=6))
    inside = float(small[-10])
    assert drift.tail_p_value(inside, small, name) == 11 / 1001  # empirical while draws reach it
    ps = []
    for q in (0.99995, 0.999995):
        v = float(np.quantile(big, q)) if q < 0.99999 else float(big[-1]) * 1.2
        assert v > small[-1]
        p = drift.tail_p_value(v, small, name)
        ps.append(p)
        if q < 0.99999:
            assert 0.5 * (1 - q) <= p <= 4 * (1 - q), (p, 1 - q)  # the right order, on the safe side
    assert ps[1] < ps[0] <= 1 / 1001


@pytest.mark.parametrize("name", drift.METRICS)
def test_p_values_of_many_cells_at_once_are_each_cells_own(name):
    rng = np.random.default_rng(8)
    refs = [[500, 1200, 3000, 2500, 900, 400, 100, 30], [10, 0, 0, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9], [7, 7]]
    draws = [np.sort(drift.reference_draws(r, n, name, seed=9)) for r in refs for n in (60, 400)]
    fits = np.array([drift.tail_fit(d, name) for d in draws] + [(0.0, 0.0)])
    draws.append(np.zeros(1000))  # a fit of (0, 0): the cap
    values = [float(d[rng.integers(0, d.size)]) for d in draws[:-1]] + [0.5]
    values[0], values[1] = float(draws[0][-1]) * 3, float(draws[1][-1]) + 1e-9  # beyond every draw
    got = drift.tail_p_values(np.array(values), np.stack(draws), name, fits)
    assert got.tolist() == [drift.tail_p_value(v, d, name, tuple(f)) for v, d, f in zip(values, draws, fits)]
