"""Drift alert rules as configuration: what a rule file may say (errors name the field and the
value), "drift on K consecutive windows" firing once per run of windows, and the monitoring
teams' rule "average drift score per group per minute above 0.85 raises an alert and re-samples
the reference" in the same format, on hand-made windows."""

from __future__ import annotations

import json

import pytest

from auditflow import drift as D
from pipelines import drift as P

MIN_MS = 60_000


def rec(w, feature, segment, metric, value, status="ok", significant=False):
    return P.DriftRecord("m", "ref-1", feature, segment, w * MIN_MS, (w + 1) * MIN_MS, metric, value, 0.1, 0.2,
                         status, 0.5, significant, 1000, 300, 0.0, 0.5, 300, 900, 1, 9)


def test_rule_files_parse_and_errors_name_the_field():
    doc = json.loads("""{"rules": [
        {"name": "sustained", "metric": "psi", "kind": "status", "consecutive": 3},
        {"name": "group-mean", "metric": "js", "kind": "mean_above", "above": 0.85, "group_by": ["segment"],
         "action": "resample_reference"}]}""")
    rules = D.parse_rules(doc)
    assert [r.name for r in rules] == ["sustained", "group-mean"]
    assert rules[1].group_by == ("segment",) and rules[1].action == "resample_reference"
    assert D.parse_rules([r.to_dict() for r in rules]) == rules  # round trip
    for bad, words in [({"name": "a", "metric": "hellinger"}, "metric='hellinger'"),
                       ({"name": "a", "metric": "psi", "consecutive": 0}, "consecutive=0"),
                       ({"name": "a", "metric": "psi", "kind": "mean_above"}, "above=None"),
                       ({"name": "a", "metric": "psi", "group_by": ["bank"]}, "group_by=['bank']"),
                       ({"name": "a", "metric": "psi", "statuses": ["red"]}, "statuses=['red']"),
                       ({"name": "a", "metric": "psi", "thresold": 1}, "unknown field 'thresold'"),
                       ({"name": "a", "metric": "psi", "action": "page"}, "action='page'"),
                       ({"name": "a", "metric": "js", "kind": "mean_above", "above": 0.5, "min_value": 0.1},
                        "min_value=0.1")]:
        with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
            D.parse_rules([bad])
    with pytest.raises(ValueError, match="duplicate rule name"):
        D.parse_rules([{"name": "a", "metric": "psi"}, {"name": "a", "metric": "js"}])


def test_k_consecutive_windows_fire_once_per_run():
    rule = D.DriftRule("k3", "psi", consecutive=3)
    pattern = [1, 1, 1, 1, 0, 1, 1, 1, 0, 1]  # drift (significant) on these windows of one block
    windows = [[rec(w, "amount_usd", "payment_format=Cash", "psi", 0.5 if d else 0.01, "drift" if d else "ok", bool(d)),
                rec(w, "amount_usd", "payment_format=ACH", "psi", 0.01)] for w, d in enumerate(pattern)]
    fired = []
    for w in range(len(windows)):
        for a in P.rule_alerts([rule], windows[max(0, w - 3): w + 1]):
            fired.append((w, a.since // MIN_MS, a.group["segment"]))
    assert fired == [(2, 0, "payment_format=Cash"), (7, 5, "payment_format=Cash")]
    # a drift status that did not survive Benjamini-Hochberg does not count unless the rule says so
    loose = [[rec(0, "f", "__all__", "psi", 0.5, "drift", False)]]
    assert P.rule_alerts([D.DriftRule("strict", "psi")], loose) == []
    assert len(P.rule_alerts([D.DriftRule("loose", "psi", significant=False)], loose)) == 1
    # and with a minimum effect size, a significant but small shift does not count
    small = [[rec(0, "f", "__all__", "psi", 0.04, "drift", True), rec(0, "g", "__all__", "psi", 0.3, "drift", True)]]
    hit = P.rule_alerts([D.DriftRule("moderate", "psi", min_value=0.1)], small)
    assert [a.group["feature"] for a in hit] == ["g"]
    assert D.DEFAULT_RULES[0].min_value == 0.1


def test_average_per_group_per_minute_above_085_raises_and_resamples():
    rule = D.DriftRule("group-mean", "js", "mean_above", above=0.85, group_by=("segment",), action="resample_reference")
    window = [rec(7, "amount_usd", "currency=Euro", "js", 0.95, "drift"), rec(7, "score", "currency=Euro", "js", 0.80, "drift"),
              rec(7, "hour", "currency=Euro", "js", 0.10, "insufficient_data"),  # not judged: not in the mean
              rec(7, "amount_usd", "currency=Yen", "js", 0.90, "drift"), rec(7, "score", "currency=Yen", "js", 0.70, "warn"),
              rec(7, "amount_usd", "currency=Euro", "psi", 9.0, "drift")]  # another metric
    alerts = P.rule_alerts([rule], [window])
    assert [(a.group, a.action) for a in alerts] == [({"segment": "currency=Euro"}, "resample_reference")]
    assert alerts[0].value == pytest.approx((0.95 + 0.80) / 2, abs=1e-15) and alerts[0].window_end - alerts[0].window_start == MIN_MS
    assert alerts[0].to_dict()["schema"] == P.ALERT_SCHEMA
