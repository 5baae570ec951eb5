"""Windowed drift scores (pipelines.drift, the reference the stream job's counting is held to):
bins as an independent numpy computation gives them, panes that merge exactly, an injected shift
flagged in its segment only within a few windows, a false-alarm rate under the target on an
unshifted stream of 240 windows, statuses instead of NaN, and the same records for the same input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from auditflow import drift as D
from pipelines import drift as P

HOUR_MS = 3_600_000
FORMATS = ("ACH", "Wire", "Cash", "Cheque")


def stream(hours: int, seed: int, *, shift_from_hour: int | None = None, per_hour: int = 400, start_hour: int = 0):
    """Scored rows: amounts log-normal per payment format (Cash scaled x2.5 from ``shift_from_hour``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for h in range(start_hour, start_hour + hours):
        for _ in range(per_hour):
            fmt = FORMATS[rng.choice(4, p=[0.4, 0.2, 0.25, 0.15])]
            amount = float(np.exp(rng.normal(6.0 + FORMATS.index(fmt) * 0.3, 1.0)))
            if shift_from_hour is not None and h >= shift_from_hour and fmt == "Cash":
                amount *= 2.5
            rows.append(P.Row(h * HOUR_MS + int(rng.integers(HOUR_MS)),
                              {"payment_format": fmt, "currency": str(rng.choice(["USD", "EUR", "GBP"])),
                               "bank": f"b{int(rng.integers(30)):02d}"},
                              {"amount_usd": amount, "hour": float(h % 24), P.SCORE: float(rng.beta(1, 20))}))
    return rows


FEATURES = ("amount_usd", P.SCORE)


def test_bins_are_the_ones_numpy_gives():
    edges = P.quantile_edges(np.random.default_rng(1).exponential(size=5000).tolist(), 10)
    values = np.concatenate([np.random.default_rng(2).exponential(size=3000) * 1.3, [edges[0], edges[-1], -1.0, 1e9]])
    want = np.where(values < edges[0], 0, np.where(values > edges[-1], len(edges),
                                                   np.minimum(np.searchsorted(edges, values, side="right"), len(edges) - 1)))
    assert [P.bin_index(edges, float(v)) for v in values] == want.tolist()
    assert P.bin_index(edges, math.nan) == P.bin_index(edges, math.inf) == len(edges)  # overflow
    assert P.bin_index([5.0], 5.0) == 1 and P.bin_index([5.0], 4.0) == 0 and P.bin_index([5.0], 6.0) == 2


def test_a_day_is_the_sum_of_its_hours():
    profile = P.build_profile(stream(24, 1), FEATURES)
    rows = stream(48, 2, start_hour=24)
    assert P.merge_counts(P.window_counts(profile, rows, 60), 60, 1440) == P.window_counts(profile, rows, 1440)


def test_the_same_input_gives_the_same_records_and_reference_id():
    a = P.build_profile(stream(24, 1), FEATURES)
    b = P.build_profile(stream(24, 1), FEATURES)
    assert a.reference_id == b.reference_id and a.reference_id != P.build_profile(stream(24, 9), FEATURES).reference_id
    assert P.Profile.from_body(a.body()).reference_id == a.reference_id
    rows = stream(6, 3, start_hour=24)
    r1 = P.score_windows(a, P.window_counts(a, rows, 60), 60)
    r2 = P.score_windows(b, P.window_counts(b, list(reversed(rows)), 60), 60)  # arrival order does not matter
    assert [r.to_dict() for r in r1] == [r.to_dict() for r in r2]
    assert all(math.isfinite(r.value) and math.isfinite(r.p_value) for r in r1)
    assert {r.reference_id for r in r1} == {a.reference_id}


def test_an_injected_shift_is_flagged_in_its_segment_only_within_three_windows():
    profile = P.build_profile(stream(72, 11), FEATURES)
    rows = stream(24, 12, shift_from_hour=72 + 6, start_hour=72, per_hour=600)  # Cash amounts x2.5 from hour 6
    window = 120  # two-hour windows: ~300 Cash events each
    recs = P.score_windows(profile, P.window_counts(profile, rows, window), window)
    psi = [r for r in recs if r.metric == "psi" and r.feature == "amount_usd"]
    by_seg: dict[str, list] = {}
    for r in psi:
        by_seg.setdefault(r.segment, []).append(r)
    shift_ms = (72 + 6) * HOUR_MS
    cash = sorted(by_seg["payment_format=Cash"], key=lambda r: r.window_start)
    flagged = [r for r in cash if r.status == "drift"]
    assert flagged and all(r.window_start >= shift_ms - window * 60_000 for r in flagged)
    first_after = min(r.window_start for r in cash if r.window_start >= shift_ms)
    assert flagged[0].window_start - first_after <= 2 * window * 60_000  # within 3 windows
    assert all(r.status == "drift" for r in cash if r.window_start >= shift_ms + window * 60_000)
    assert all(r.significant for r in flagged)  # and after Benjamini-Hochberg over the pane
    for seg in ("payment_format=ACH", "payment_format=Wire", "payment_format=Cheque"):
        assert [r for r in by_seg[seg] if r.status == "drift" or r.significant] == [], seg
    # the score did not move: its windows drift no more often than the 1% the thresholds allow by chance
    judged = [r for r in recs if r.feature == P.SCORE and r.status in ("ok", "warn", "drift")]
    assert len(judged) > 200 and sum(r.status == "drift" for r in judged) / len(judged) <= 0.03


def test_an_unshifted_stream_keeps_false_alarms_under_the_target_over_240_windows():
    profile = P.build_profile(stream(96, 21), FEATURES)
    rows = stream(240, 22, start_hour=96, per_hour=300)
    recs = [r for r in P.score_windows(profile, P.window_counts(profile, rows, 60), 60)
            if r.status in ("ok", "warn", "drift")]
    panes = {r.window_start for r in recs}
    assert len(panes) == 240
    for m in D.METRICS:
        judged = [r for r in recs if r.metric == m]
        rate = sum(r.status == "drift" for r in judged) / len(judged)
        assert rate <= 0.02, (m, rate)  # thresholds at the draws' 99th percentile: ~1% expected
        assert sum(r.significant for r in judged) / len(judged) <= 0.05  # BH at q = 0.05 under the null


def test_statuses_instead_of_nan():
    rows = stream(24, 31)
    for r in rows:
        r.values["hour"] = 3.0  # constant in the reference
    profile = P.build_profile(rows, ("hour", "amount_usd"))
    later = stream(3, 32, start_hour=24, per_hour=50)
    for r in later:
        r.values["hour"] = 3.0
    counts = P.window_counts(profile, later, 60)
    recs = P.score_windows(profile, counts, 60, panes=[24 * HOUR_MS, 25 * HOUR_MS, 40 * HOUR_MS])
    st = {(r.feature, r.segment, r.window_start): r.status for r in recs if r.metric == "js"}
    assert st[("hour", D.ALL_SEGMENT, 24 * HOUR_MS)] == "constant"
    assert st[("amount_usd", D.ALL_SEGMENT, 24 * HOUR_MS)] == "insufficient_data"  # 50 < min_count
    assert st[("amount_usd", D.ALL_SEGMENT, 40 * HOUR_MS)] == "empty_window"
    assert all(math.isfinite(r.value) for r in recs)
    # a bank the reference never kept counts in __other__
    assert profile.segment_of("bank", "never-seen") == f"bank={D.OTHER_SEGMENT}"


def test_a_level_the_reference_never_saw_has_its_own_bin_and_counts_as_out_of_reference():
    ref_rows = stream(24, 41)
    profile = P.build_profile(ref_rows, FEATURES, categorical=("payment_format", "bank"), segment_cap=25)
    assert profile.levels["payment_format"] == sorted(FORMATS, key=lambda f: -sum(r.segments["payment_format"] == f
                                                                                 for r in ref_rows))
    assert len(profile.other_levels["bank"]) == 5  # 30 banks, 25 kept
    later = stream(2, 42, start_hour=24, per_hour=400)
    for r in later[::4]:
        r.segments["payment_format"] = "Bitcoin"  # a level the reference never saw
    counts = P.window_counts(profile, later, 60)
    nb = profile.nbins("payment_format")
    assert nb == len(FORMATS) + 2
    hour = 24 * HOUR_MS
    cur = counts[(hour, "payment_format", D.ALL_SEGMENT)]
    n_new = sum(1 for r in later if r.ts_ms // HOUR_MS == 24 and r.segments["payment_format"] == "Bitcoin")
    assert cur[-1] == n_new > 0 and cur[-2] == 0  # the new-level bin; none in the other-levels bin
    banks = counts[(hour, "bank", D.ALL_SEGMENT)]
    kept = set(profile.levels["bank"])
    assert banks[-2] == sum(1 for r in later if r.ts_ms // HOUR_MS == 24 and r.segments["bank"] not in kept)
    recs = {(r.feature, r.segment, r.metric): r for r in P.score_windows(profile, counts, 60, panes=[hour])}
    fmt = recs[("payment_format", D.ALL_SEGMENT, "psi")]
    assert fmt.out_of_reference == pytest.approx(n_new / fmt.n_cur, abs=1e-15)
    assert fmt.status == "drift" and math.isfinite(fmt.value)
    assert recs[("bank", D.ALL_SEGMENT, "psi")].out_of_reference == 0.0  # other levels were in the reference


def test_a_record_as_json_is_what_the_json_module_writes():
    profile = P.build_profile(stream(24, 51), FEATURES, categorical=("payment_format",))
    recs = P.score_windows(profile, P.window_counts(profile, stream(3, 52, start_hour=24), 60), 60,
                           coverage={24 * HOUR_MS: (5, 3, 99)})

    for r in recs[::7]:
        assert r.to_json() == json.dumps(r.to_dict(), separators=(",", ":"), allow_nan=False)
        assert P.DriftRecord.from_dict(json.loads(r.to_json())) == r
    bad = recs[0].__class__(**{**{k: getattr(recs[0], k) for k in recs[0].__slots__}, "value": math.nan})
    with pytest.raises(ValueError, match="value=nan"):
        bad.to_json()
    # the stream job's lines: one per record, the json module's text, also where consecutive
    # records differ only in how a number prints (1 and 1.0, 0.0 and -0.0)
    like = lambda r, **kw: r.__class__(**{**{k: getattr(r, k) for k in r.__slots__}, **kw})  # noqa: E731
    tricky = [recs[0], like(recs[0], alpha=1), like(recs[0], alpha=1.0), like(recs[0], out_of_reference=-0.0),
              like(recs[0], out_of_reference=0.0)]
    for batch in (recs, tricky):
        lines = P.records_json(batch).split("\n")
        assert lines == [json.dumps(r.to_dict(), separators=(",", ":"), allow_nan=False) for r in batch]
    with pytest.raises(ValueError, match="out_of_reference=inf"):
        P.records_json([recs[0], like(recs[0], out_of_reference=math.inf)])


def test_records_carry_their_counts_and_a_day_is_the_sum_of_its_hours_records():
    profile = P.build_profile(stream(24, 61), FEATURES)
    rows = stream(24, 62, start_hour=48)
    hourly = P.score_windows(profile, P.window_counts(profile, rows, 60), 60)
    daily = P.score_windows(profile, P.window_counts(profile, rows, 1440), 1440)
    summed: dict[tuple, np.ndarray] = {}
    for r in hourly:
        if r.metric == "psi":
            key = (r.feature, r.segment)
            summed[key] = summed.get(key, 0) + np.asarray(r.counts)
    for r in daily:
        assert r.counts == tuple(int(x) for x in summed[(r.feature, r.segment)])
        assert sum(r.counts) == r.n_cur
        # a record is checkable on its own: its value from its counts and the reference's
        assert abs(r.value - D.metric(r.metric, profile.counts[r.feature][r.segment], list(r.counts))) < 1e-12


def test_a_one_bin_reference_judges_a_full_window_by_its_one_possible_draw():
    rows = stream(24, 71)
    for r in rows:
        r.values["hour"] = 3.0
    profile = P.build_profile(rows, ("hour",))
    later = stream(2, 72, start_hour=24, per_hour=400)
    for i, r in enumerate(later):
        r.values["hour"] = 3.0 if r.ts_ms < 25 * HOUR_MS or i % 10 else 5.0  # the second hour: 10 % elsewhere
    recs = {(r.window_start, r.metric): r for r in P.score_windows(profile, P.window_counts(profile, later, 60), 60)
            if r.segment == D.ALL_SEGMENT}
    for m in D.METRICS:
        same, moved = recs[(24 * HOUR_MS, m)], recs[(25 * HOUR_MS, m)]
        assert same.status == "constant" and same.value == pytest.approx(same.drift_threshold, abs=1e-15)
        assert moved.status == "drift" and moved.value > moved.drift_threshold and moved.p_value <= 1 / 1001


def test_the_jobs_pane_scoring_gives_each_panes_records_and_alerts_from_its_row_alone():
    profile = P.build_profile(stream(24, 71), FEATURES)
    spec = P.DriftSpec(profile, 60)
    rows = stream(8, 72, start_hour=24, shift_from_hour=26, per_hour=1500)
    counts = P.window_counts(profile, rows, 60)
    layout = P.Layout.of(profile)
    starts = sorted({p for p, _, _ in counts})
    depth = P.history_needed(spec.rules)

    def pane_bytes(p):  # DriftPanes.java's layout: start, events, first and last offset, the counts
        events = sum(1 for r in rows if P.pane_start(r.ts_ms, 60) == p)
        return np.array([p, events, 0, events - 1, *layout.flat(counts, p)], dtype="<i8").tobytes()

    scoring = P.PaneScoring(spec)
    history, got_alerts = [], []
    for i, p in enumerate(starts):
        row = b"".join(pane_bytes(q) for q in starts[max(0, i - depth):i + 1])
        out = dict(scoring.rows(row))
        events = sum(1 for r in rows if P.pane_start(r.ts_ms, 60) == p)
        want = P.score_windows(profile, counts, 60, panes=[p], coverage={p: (events, 0, events - 1)})
        got = sorted((json.loads(x) for x in out["S"].split("\n")), key=lambda d: (d["feature"], d["segment"], d["metric"]))
        assert got == [r.to_dict() for r in want]  # score_windows sorts by key
        history = (history + [want])[-(depth + 1):]
        want_alerts = [a.to_dict() for a in P.rule_alerts(spec.rules, history)]
        assert ([json.loads(x) for x in out["X"].split("\n")] if "X" in out else []) == want_alerts
        got_alerts += want_alerts
        assert dict(P.PaneScoring(spec).rows(row)) == out  # a restored job: the row alone, nothing kept
    assert any(a["group"].get("segment") == "payment_format=Cash" for a in got_alerts)  # the shift alerts


def test_a_panes_columns_are_the_scalar_definitions_cell_by_cell():
    """Statuses, thresholds, p-values and significance of the column-wise scoring against
    auditflow.drift's one-record functions: status, reference draws at the calibration size
    scaled to the window's, tail_p_value, Benjamini-Hochberg over the judged records."""
    rows = stream(24, 81)
    for r in rows:
        r.values["hour"] = 3.0  # a one-bin reference: constant windows
    profile = P.build_profile(rows, ("amount_usd", "hour"), categorical=("payment_format",))
    later = stream(6, 82, start_hour=24, shift_from_hour=27, per_hour=300)
    later = [r for r in later if not (r.ts_ms // HOUR_MS == 26 and r.segments["payment_format"] == "Wire")]  # empty
    for i, r in enumerate(later):
        r.values["hour"] = 3.0 if i % 7 else 4.0
    later += [P.Row(29 * HOUR_MS + 5, {"payment_format": "Cheque", "currency": "USD", "bank": "b00"},
                    {"amount_usd": 1e12, "hour": 3.0, P.SCORE: 0.5})]
    counts = P.window_counts(profile, later, 60)
    recs = P.score_windows(profile, counts, 60)
    mc, statuses = profile.min_count, set()
    for start in sorted({r.window_start for r in recs}):
        window = [r for r in recs if r.window_start == start]
        for r in window:
            ref = profile.counts[r.feature][r.segment]
            one_bin = sum(1 for x in ref if x) == 1
            constant = one_bin and r.n_cur > 0 and r.counts[[bool(x) for x in ref].index(True)] == r.n_cur
            if r.n_cur >= mc and not one_bin:
                n_cal = D.calibration_size(r.n_cur, mc)
                assert r.calibration_n == n_cal and mc <= n_cal <= r.n_cur
                draws = np.sort(D.reference_draws(ref, n_cal, r.metric, alpha=profile.alpha))
                # the draws carried from n_cal to n_cur: PSI and KL as 1/n, the JS distance as 1/sqrt(n)
                scale = (n_cal / r.n_cur) ** (0.5 if r.metric == "js" else 1.0)
                warn, drift = np.quantile(draws * scale, (D.WARN_QUANTILE, D.DRIFT_QUANTILE)).tolist()
                assert (r.warn_threshold, r.drift_threshold) == pytest.approx((warn, drift), rel=1e-12, abs=1e-15)
                assert r.p_value == pytest.approx(D.tail_p_value(r.value / scale, draws, r.metric), rel=1e-12)
            elif r.n_cur < mc:
                assert (r.warn_threshold, r.drift_threshold, r.p_value) == (0.0, 0.0, 1.0)
            assert r.status == D.status(r.value, r.n_cur, (r.warn_threshold, r.drift_threshold), constant=constant,
                                        min_count=mc)
            statuses.add(r.status)
        for m in D.METRICS:
            judged = [r for r in window if r.metric == m and r.status in D.JUDGED]
            assert [r.significant for r in judged] == D.benjamini_hochberg([r.p_value for r in judged], 0.05)
            assert not any(r.significant for r in window if r.metric == m and r.status not in D.JUDGED)
    assert {"ok", "drift", "empty_window", "insufficient_data", "constant"} <= statuses


def test_a_scored_pane_writes_and_judges_what_its_records_say():
    profile = P.build_profile(stream(24, 91), FEATURES, categorical=("payment_format",))
    rows = stream(3, 92, start_hour=24, shift_from_hour=25, per_hour=900)
    counts = P.window_counts(profile, rows, 60)
    scorer = P.PaneScorer(profile, 60)
    rules = [D.DriftRule("each", "psi"), D.DriftRule("loose", "js", significant=False, statuses=("warn", "drift")),
             D.DriftRule("moderate", "kl", min_value=0.05, group_by=("segment",)),
             D.DriftRule("mean", "js", "mean_above", above=0.01, group_by=("feature",)),
             D.DriftRule("cash", "psi", "mean_above", above=0.0, group_by=(), segments=("payment_format=Cash",)),
             D.DriftRule("amounts", "psi", features=("amount_usd",), statuses=("ok",), significant=False),
             D.DriftRule("significant", "js", statuses=("ok", "warn", "drift"))]  # judged, and significant
    fired = 0
    for p in sorted({p for p, _, _ in counts}):
        pane = scorer.scored(P.Pane(p, scorer.layout.flat(counts, p), 900, 1, 900))
        recs = pane.records()
        assert len(pane) == len(recs) == len(scorer.cells) * len(D.METRICS)
        assert pane.json().split("\n") == [json.dumps(r.to_dict(), separators=(",", ":"), allow_nan=False) for r in recs]
        for rule in rules:
            want = P._conditions(rule, recs)
            assert pane.conditions(rule) == want
            fired += bool(want)
        assert [a.to_dict() for a in P.rule_alerts(rules, [pane])] == [a.to_dict() for a in P.rule_alerts(rules, [recs])]
    assert fired >= len(rules)
    bad = P.ScoredPane(**{**pane.__dict__, "out_of_reference": [math.inf] + pane.out_of_reference[1:]})
    with pytest.raises(ValueError, match="out_of_reference=inf"):
        bad.json()


def _psi_draws(p: np.ndarray, n_unique: int, repeat: int, rng, alpha: float = 0.5, draws: int = 4000) -> np.ndarray:
    """PSI (smoothed as the product smooths) of windows of ``n_unique`` draws from ``p``, each
    counted ``repeat`` times, against ``p`` scaled to the reference's size: plain numpy."""
    ref = p * 10_000
    lp = np.log((ref + alpha) / (ref + alpha).sum())
    cur = rng.multinomial(n_unique, p, size=draws) * repeat
    lq = np.log((cur + alpha) / (cur + alpha).sum(axis=1, keepdims=True))
    return np.sum((np.exp(lq) - np.exp(lp)) * (lq - lp), axis=1)


def test_dispersion_is_about_one_for_independent_events_and_what_repeats_make_it():
    """Independent events cross the drift threshold as often as it says (dispersion near 1); in a
    stream where every event comes k times (an account repeating its transfer) the threshold must
    grow by the ratio of the 99th percentiles of the PSI of windows of n / k draws counted k times
    and of n independent draws, computed here apart from the product with numpy."""
    rows = stream(240, 101, per_hour=300)
    iid = P.estimate_dispersion(P.build_profile(rows, FEATURES), rows, 60)
    assert iid.window_minutes == 60
    assert 1.0 <= iid.dispersion["amount_usd"][D.ALL_SEGMENT] < 1.4
    k = 4
    repeated = [r for r in stream(240, 102, per_hour=300 // k) for _ in range(k)]
    profile = P.build_profile(repeated, FEATURES)
    ref = np.asarray(profile.counts["amount_usd"][D.ALL_SEGMENT], dtype=float)
    p, rng = ref / ref.sum(), np.random.default_rng(5)
    want = np.quantile(_psi_draws(p, 300 // k, k, rng), 0.99) / np.quantile(_psi_draws(p, 300, 1, rng), 0.99)
    assert want > 2  # repeats matter
    got = P.estimate_dispersion(profile, repeated, 60).dispersion["amount_usd"][D.ALL_SEGMENT]
    assert 0.65 * want < got < 1.5 * want


def test_dispersion_keeps_an_unchanged_repeating_stream_quiet_and_still_sees_a_shift():
    """With repeated events, independent thresholds see drift in windows of an unchanged stream;
    the dispersion-aware ones do not, and a real shift (Cash x2.5, of events repeated alike) is
    still flagged in the Cash segment."""
    k = 4

    def rep(rows):
        return [r for r in rows for _ in range(k)]

    ref = rep(stream(96, 111, per_hour=250))
    bare = P.build_profile(ref, FEATURES)
    profile = P.estimate_dispersion(bare, ref, 60)
    quiet = rep(stream(48, 112, per_hour=250, start_hour=96))

    def drifting(p, rows, segment=D.ALL_SEGMENT):
        recs = P.score_windows(p, P.window_counts(p, rows, 60), 60)
        return sum(r.status == "drift" and r.significant for r in recs
                   if r.feature == "amount_usd" and r.segment == segment and r.metric == "psi")

    assert drifting(bare, quiet) >= 24  # of 48 windows: what independent thresholds make of repeats
    assert drifting(profile, quiet) <= 4
    shifted = rep(stream(48, 113, per_hour=250, start_hour=96, shift_from_hour=96))
    assert drifting(profile, shifted, "payment_format=Cash") >= 24


def test_a_reference_is_scored_on_the_windows_its_dispersion_was_measured_on():
    rows = stream(24, 121)
    profile = P.estimate_dispersion(P.build_profile(rows, FEATURES), rows, 60)
    with pytest.raises(ValueError, match="measured on 60-minute windows, not 30"):
        P.DriftSpec(profile, 30)
    P.DriftSpec(profile, 60)
    body = json.loads(json.dumps(profile.body()))
    assert P.Profile.from_body(body) == profile
    with pytest.raises(ValueError, match="format /1"):
        P.Profile.from_body({**body, "schema": "auditflow.drift_reference/1"})
