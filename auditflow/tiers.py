"""The one severity scheme: the deep path's tiers, most urgent first. An alert's tier is set by
its score against ``AUDITFLOW_TIER_CRITICAL_SCORE`` and ``_NORMAL_SCORE``; the deep path's queue,
its latency targets, a case's priority and the period summaries' severity all use it."""

from __future__ import annotations

TIERS = ("critical", "normal", "background")
