"""Kill -9 the session cluster's TaskManager mid-stream, twice in one run, and lose nothing.

The Kafka job (exactly-once sinks, checkpoints every second) runs on the real Flink session
cluster over a topic holding a generated live set plus malformed records; its TaskManager is
killed with SIGKILL after a checkpoint, a new one is started, the job restores and goes on, and
once more. What it committed is compared with the uninterrupted file run over the same records:
the same alerts with no duplicate and no gap, one dead letter per malformed record, and the
same Neo4j node and relationship counts (see tests/support/recovery_drill.py).

Needs Kafka, Neo4j and the Flink session cluster (``make test`` starts them).
"""

from __future__ import annotations

import pytest

from tests.support.recovery_drill import prepare, run_drill

pytestmark = pytest.mark.services("kafka", "neo4j", "flink")


@pytest.fixture(scope="module")
def drill(tmp_path_factory):
    return run_drill(prepare(tmp_path_factory.mktemp("drill")), kills=2)


def test_both_kills_happened_mid_stream_and_the_job_restored_a_checkpoint(drill):
    assert drill.kills == 2, drill.notes
    assert all(c >= 1 for c in drill.restored_checkpoints), drill.restored_checkpoints


def test_committed_alerts_equal_the_uninterrupted_run(drill):
    assert drill.reference_alerts, "the reference run alerted on nothing: the comparison would be empty"
    assert drill.duplicates == 0
    assert set(drill.alerts) == drill.reference_alerts  # no gap, nothing extra


def test_each_malformed_record_is_one_dead_letter(drill):
    assert sorted(drill.dead_letters) == sorted(drill.bad_offsets)


def test_graph_counts_equal_the_uninterrupted_run(drill):
    nodes, edges = drill.reference_counts
    assert edges == drill.events  # the reference itself: one relationship per event
    assert drill.graph_counts == (nodes, edges)


def test_no_python_worker_outlives_its_killed_taskmanager(drill):
    assert drill.leftover_workers == 0
