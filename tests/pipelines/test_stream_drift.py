"""Drift counted in the stream job (the JVM pane counter over the fast path's codes) against
the plain-Python reference of :mod:`pipelines.drift`: the records of a file run equal, key for
key and value for value, those scored from counts made here one row at a time from the
reference features of the events the job processed (input out of order, late and twice);
metric values against scipy; the alerts the rules raise on those records; and the alert path
unchanged by drift."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from operator import itemgetter

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from auditflow import drift as D
from auditflow.canonical import canonical_sha256
from auditflow.features import FEATURE_NAMES
from auditflow.records import TransactionEvent, epoch_millis
from ingest.amlworld import read_transactions
from ingest.synthetic import generate, write_dataset
from pipelines import drift as P
from pipelines.features import admit, iter_features
from pipelines.stream_job import StreamSpec, run_wire_job
from pipelines.testing import linear_scorer

pytestmark = pytest.mark.flink

BOUND_MS = 30 * 60_000
WINDOW = 240  # minutes
RULES = (D.DriftRule("sustained", "psi", consecutive=2),
         D.DriftRule("mean-js", "js", "mean_above", above=0.05, group_by=("segment",), action="resample_reference"))


def rows_of(events):
    out, offsets = [], []
    for ev, f in iter_features(events):
        out.append(P.Row(epoch_millis(ev.timestamp),
                         {"payment_format": ev.payment_format, "currency": ev.amount_paid.currency, "bank": ev.sender.bank},
                         {**{n: float(f[n]) for n in FEATURE_NAMES}, P.SCORE: float(f["amount_usd"]) / 20_000.0}))
        offsets.append(ev.source_offset)
    return out, offsets


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("drift")
    csv_path, _ = write_dataset(generate(accounts=250, days=5, laundering_rate=0.01, seed=8), root, name="w")
    events = [e for e in read_transactions(csv_path) if isinstance(e, TransactionEvent)]
    rng = random.Random(3)
    arrivals = list(events)
    for i in range(0, len(arrivals) - 3, 5):  # out of order within the bound
        j = i + rng.randrange(1, 4)
        arrivals[i], arrivals[j] = arrivals[j], arrivals[i]
    for i in sorted(rng.sample(range(len(arrivals)), 20), reverse=True):  # some twice
        arrivals.insert(min(len(arrivals), i + rng.choice([1, 50])), arrivals[i])
    for ev in [arrivals.pop(k) for k in sorted(rng.sample(range(200, len(arrivals) // 2), 8), reverse=True)]:
        arrivals.append(ev)  # far behind the watermark: late
    processed = admit(arrivals, BOUND_MS, 0).processed
    rows, offsets = rows_of(sorted(processed, key=lambda e: (e.timestamp, e.source_offset)))
    t0 = rows[0].ts_ms
    profile = P.build_profile([r for r in rows if r.ts_ms < t0 + 2 * 86_400_000], (*FEATURE_NAMES, P.SCORE),
                              categorical=D.SEGMENT_DIMENSIONS,
                              segment_features=(P.SCORE, "amount_usd", *D.SEGMENT_DIMENSIONS))
    rules = RULES
    wire = root / "arrivals.af1"
    wire.write_text("".join(e.to_wire() + "\n" for e in arrivals))
    spec = StreamSpec(scorer_factory=linear_scorer(threshold=0.5), out_of_orderness_ms=BOUND_MS, allowed_lateness_ms=0,
                      drift=P.DriftSpec(profile, WINDOW, rules))
    out = run_wire_job(wire, spec)
    plain = run_wire_job(wire, StreamSpec(scorer_factory=linear_scorer(threshold=0.5), out_of_orderness_ms=BOUND_MS,
                                          allowed_lateness_ms=0))
    return {"out": out, "plain": plain, "rows": rows, "offsets": offsets, "profile": profile, "rules": rules,
            "processed": processed, "wire": wire, "spec": spec}


def test_the_stream_records_are_the_ones_counted_row_by_row(world):
    profile, rows = world["profile"], world["rows"]
    want = P.score_windows(profile, P.window_counts(profile, rows, WINDOW), WINDOW,
                           coverage=P.coverage_of(rows, world["offsets"], WINDOW))
    got = world["out"].drift_records
    assert len(got) == len(want) > 1000
    assert got == [r.to_dict() for r in want]
    panes = {r["window_start"] for r in got}
    assert sum(r["n_cur"] for r in got if r["feature"] == P.SCORE and r["segment"] == D.ALL_SEGMENT
               and r["metric"] == "psi") == len(world["processed"])  # every processed event, once
    assert len(panes) >= 25 and all(math.isfinite(r["value"]) for r in got)


def test_stream_metric_values_equal_scipy(world):
    profile = world["profile"]
    counts = P.window_counts(profile, world["rows"], WINDOW)
    by_key = {(r["window_start"], r["feature"], r["segment"], r["metric"]): r for r in world["out"].drift_records}
    checked = 0
    for (p, f, seg), cur in sorted(counts.items())[::37]:
        a = profile.alpha
        ref = np.asarray(profile.counts[f].get(seg, []), dtype=np.float64)
        if ref.size == 0:
            continue
        pp = (ref + a) / (ref + a).sum()
        qq = (np.asarray(cur, dtype=np.float64) + a) / (np.asarray(cur, dtype=np.float64) + a).sum()
        assert abs(by_key[(p, f, seg, "psi")]["value"] - float(np.sum((qq - pp) * np.log(qq / pp)))) < 1e-12
        assert abs(by_key[(p, f, seg, "kl")]["value"] - float(np.sum(qq * np.log(qq / pp)))) < 1e-12
        assert abs(by_key[(p, f, seg, "js")]["value"] - float(jensenshannon(pp, qq, base=2))) < 1e-12
        checked += 1
    assert checked > 20


def expected_drift_alerts(records: list[dict], window_minutes: int) -> list[dict]:
    """The alerts the fixture's two rules raise on the records, by the rules' definitions written
    out here (not with :func:`pipelines.drift.rule_alerts`): a rule's condition holds per group and
    window, and the rule fires on the window where it has held for exactly ``consecutive`` windows
    in a row (so once per run).

    * ``sustained`` (psi, per feature and segment, 2 windows): some psi record of the group has
      status ``drift`` and is significant; value: the largest such value, threshold: the largest
      drift threshold among them, records: their (feature, segment).
    * ``mean-js`` (js, per segment, 1 window): the mean value of the segment's judged js records
      (status ok, warn or drift) is above 0.05; threshold 0.05, records: all the judged ones."""
    by_pane: dict[int, list[dict]] = {}
    for r in records:
        by_pane.setdefault(r["window_start"], []).append(r)
    panes = sorted(by_pane)
    assert all(b - a == window_minutes * 60_000 for a, b in zip(panes, panes[1:]))  # no window left out

    def sustained(rs: list[dict]) -> dict[tuple, tuple[float, float, list]]:
        held: dict[tuple, list[dict]] = {}
        for r in rs:
            if r["metric"] == "psi" and r["status"] == "drift" and r["significant"]:
                held.setdefault((r["feature"], r["segment"]), []).append(r)
        return {k: (max(r["value"] for r in hit), max(r["drift_threshold"] for r in hit),
                    sorted([r["feature"], r["segment"]] for r in hit)) for k, hit in held.items()}

    def mean_js(rs: list[dict]) -> dict[tuple, tuple[float, float, list]]:
        judged: dict[tuple, list[dict]] = {}
        for r in rs:
            if r["metric"] == "js" and r["status"] in ("ok", "warn", "drift"):
                judged.setdefault((r["segment"],), []).append(r)
        means = {k: (math.fsum(r["value"] for r in js) / len(js), js) for k, js in judged.items()}
        return {k: (m, 0.05, sorted([r["feature"], r["segment"]] for r in js))
                for k, (m, js) in means.items() if m > 0.05}

    rules = (("sustained", "psi", "status", ("feature", "segment"), 2, "alert", sustained),
             ("mean-js", "js", "mean_above", ("segment",), 1, "resample_reference", mean_js))
    want = []
    for name, metric, kind, group_by, consecutive, action, condition in rules:
        held = [condition(by_pane[p]) for p in panes]
        for i, p in enumerate(panes):
            for key, (value, threshold, hit) in held[i].items():
                run = next((i - j for j in range(i, -1, -1) if key not in held[j]), i + 1)  # windows in a row up to p
                if run != consecutive:
                    continue
                first = by_pane[p][0]
                rule = next(r for r in RULES if r.name == name)
                group = dict(zip(group_by, key))
                aid = "drift-" + canonical_sha256({"rule": rule.to_dict(), "group": group, "window_start": p,
                                                   "reference_id": first["reference_id"]})[:20]
                want.append({"schema": "auditflow.drift_alert/1", "alert_id": aid, "rule": name, "action": action,
                             "metric": metric, "kind": kind, "group": group, "window_start": p,
                             "window_end": first["window_end"], "since": panes[i - consecutive + 1],
                             "consecutive": consecutive, "value": value, "threshold": threshold, "records": hit,
                             "reference_id": first["reference_id"], "model_version": first["model_version"]})
    return want


def test_the_alerts_are_what_the_rules_say_of_the_records(world):
    assert world["rules"] == RULES
    got = world["out"].drift_alerts
    want = expected_drift_alerts(world["out"].drift_records, WINDOW)
    assert {a["rule"] for a in want} == {"sustained", "mean-js"}  # both rules fire somewhere
    key = itemgetter("window_start", "rule", "alert_id")
    assert sorted(got, key=key) == sorted(want, key=key)


def test_drift_leaves_the_alerts_and_counts_as_they_were(world):
    out, plain = world["out"], world["plain"]
    def content(alerts):  # each alert but its arrival stamp (the wall clock of that run)
        return [{k: v for k, v in a.items() if k != "arrived_ms"} for a in alerts]

    assert content(out.alerts) == content(plain.alerts) and out.processed == plain.processed
    assert all(a["arrived_ms"] > 1.6e12 for a in out.alerts)
    assert out.records_in == out.processed + len(out.rejects) + len(out.late) + len(out.duplicates)


def test_a_score_that_is_not_a_number_is_counted_in_the_overflow_bin(world):
    """A model's NaN score (which the Arrow transfer turns into NULL) and an infinite one land in
    the score's overflow bin, as bin_index puts them: the job does not fail, no event is lost."""
    spec = replace(world["spec"], scorer_factory=linear_scorer("cross_currency", divisor=0.0))  # 0/0 NaN, 1/0 inf
    with np.errstate(divide="ignore", invalid="ignore"):
        out = run_wire_job(world["wire"], spec)
    rows = [replace(r, values={**r.values, P.SCORE: math.inf if r.values["cross_currency"] else math.nan})
            for r in world["rows"]]
    assert any(r.values["cross_currency"] == 0 for r in rows) and any(r.values["cross_currency"] for r in rows)
    profile = world["profile"]
    want = P.score_windows(profile, P.window_counts(profile, rows, WINDOW), WINDOW,
                           coverage=P.coverage_of(rows, world["offsets"], WINDOW))
    assert out.drift_records == [r.to_dict() for r in want]
    score_all = [r for r in out.drift_records if r["feature"] == P.SCORE and r["segment"] == D.ALL_SEGMENT
                 and r["metric"] == "psi"]
    assert sum(r["counts"][-1] for r in score_all) == sum(r["n_cur"] for r in score_all) == len(world["processed"])
