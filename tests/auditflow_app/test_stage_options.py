"""The app layer builds the stages' plain arguments from the settings: the producer's options
(``auditflow produce``, the Kafka flow) and the deep-path tiers (the deep path, ``serve model``)."""

from __future__ import annotations

from datetime import datetime

from auditflow_app.flow import producer_options, tier_policy
from auditflow_app.settings import Settings
from ingest.kafka_io import ProducerOptions
from model_service.service import TierPolicy


def test_producer_options_come_from_the_settings_with_the_topic_option_first():
    window = (datetime(2020, 1, 1), datetime(2021, 1, 1))
    s = Settings(kafka_bootstrap="broker:9093", topic_transactions="tx", topic_dlq="tx.dead", topic_partitions=5,
                 event_time_window=window)
    assert producer_options(s) == ProducerOptions("broker:9093", "tx", "tx.dead", 5, window)
    assert producer_options(s, "other").topic == "other"
    assert producer_options(s, None).topic == producer_options(s, "").topic == "tx"  # not given: the setting


def test_tier_policy_comes_from_the_settings_over_the_cascades_threshold():
    s = Settings(tier_critical_score=0.95, tier_normal_score=0.6, tier_critical_ms=10.0, tier_normal_ms=20.0,
                 tier_background_ms=30.0)
    policy = tier_policy(s, 0.25)
    assert policy == TierPolicy(0.95, 0.6, 0.25, {"critical": 10.0, "normal": 20.0, "background": 30.0})
    assert [policy.tier(x) for x in (0.95, 0.7, 0.3, 0.2)] == ["critical", "normal", "background", "none"]
