"""The Flink client side of the Kafka job without a cluster: the ``flink run`` command line and its
environment, what a job restores from, and the JobID and counters read back from the client's
output and the REST API (a stand-in for ``urlopen``)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from pipelines import flink_client as C
from pipelines.kafka_job import KafkaJobConfig
from pipelines.stream_job import StreamSpec

REPO = Path(__file__).resolve().parents[2]
ID_A, ID_B = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"


def _cfg(**kw) -> KafkaJobConfig:
    return KafkaJobConfig(bootstrap="k:9092", topic_transactions="tx", topic_alerts="al", topic_dlq="dlq",
                          connector_jar="/jars/connector.jar", **kw)


def test_the_job_id_is_the_last_one_the_client_printed():
    out = f"Job has been submitted with JobID {ID_A}\nresubmitted: JobID {ID_B}\n"
    assert C.cluster_job_id(out) == ID_B
    with pytest.raises(RuntimeError, match="no JobID"):
        C.cluster_job_id("JobID 1234 (too short)")


def test_counters_come_from_the_accumulators_of_that_job(monkeypatch):
    asked = []
    body = {"user-task-accumulators": [{"name": "auditflow.processed", "value": "1234"},
                                       {"name": "auditflow.duplicate", "value": "7"},
                                       {"name": "other", "value": "99"}]}

    def urlopen(url, timeout):
        asked.append((url, timeout))
        return io.BytesIO(json.dumps(body).encode())

    monkeypatch.setattr(C.urllib.request, "urlopen", urlopen)
    assert C.cluster_job_counts("http://flink:8081/", f"JobID {ID_A}") == {"processed": 1234, "duplicate": 7}
    assert asked == [(f"http://flink:8081/jobs/{ID_A}/accumulators", 30)]
    body["user-task-accumulators"] = []
    assert C.cluster_job_counts("http://flink:8081", f"JobID {ID_A}") == {"processed": 0, "duplicate": 0}


def test_restore_path_savepoint_newest_checkpoint_or_none(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    assert C.restore_path(checkpoints) is None
    with pytest.raises(FileNotFoundError, match=f"no retained checkpoint under {checkpoints}"):
        C.restore_path(checkpoints, resume=True)
    with pytest.raises(FileNotFoundError, match="no _metadata there"):
        C.restore_path(checkpoints, tmp_path)
    older, newer = checkpoints / "job-a" / "chk-9", checkpoints / "job-b" / "chk-2"
    for i, d in enumerate((older, newer)):
        d.mkdir(parents=True)
        (d / "_metadata").write_bytes(b"x")
        os.utime(d / "_metadata", ns=(10**18 + i, 10**18 + i))  # job-b's chk-2 is the newer one
    assert C.restore_path(checkpoints, resume=True) == newer
    assert C.restore_path(checkpoints, older, resume=True) == older  # a savepoint given wins


def test_the_client_environment_drops_what_a_local_job_left():
    base = {"PATH": "/bin", "PYFLINK_GATEWAY_DISABLED": "1", "PYTHON_LOOPBACK_SERVER_ADDRESS": "x",
            "_PYFLINK_CONN_INFO_PATH": "/tmp/c", "FLINK_CONF_DIR": "/old"}
    assert C.client_environment(base, "/flink") == {"PATH": "/bin", "FLINK_HOME": "/flink", "FLINK_CONF_DIR": "/old"}
    assert C.client_environment(base, "/flink", Path("/conf"))["FLINK_CONF_DIR"] == "/conf"
    assert base["PYFLINK_GATEWAY_DISABLED"] == "1"  # the caller's mapping is left as it was


def test_the_flink_run_command_line(tmp_path):
    spec = StreamSpec(scorer_factory=lambda: None, parallelism=3, out_of_orderness_ms=11, allowed_lateness_ms=22)
    cmd = C.flink_run_command(_cfg(bounded=False), tmp_path / "model", spec, flink_home="/opt/flink",
                              rest_url="http://flink.example:9081", python="/venv/bin/python")
    assert cmd[:8] == ["/opt/flink/bin/flink", "run", "-D", "rest.address=flink.example", "-D", "rest.port=9081",
                       "-pyexec", "/venv/bin/python"]
    assert cmd[8:10] == ["-py", str(REPO / "pipelines" / "kafka_job.py")]
    args = cmd[10:]
    pairs = dict(zip(args[::2], args[1::2]))
    assert pairs["--bootstrap"] == "k:9092" and pairs["--model-dir"] == str((tmp_path / "model").resolve())
    assert (pairs["--parallelism"], pairs["--out-of-orderness-ms"], pairs["--allowed-lateness-ms"]) == ("3", "11", "22")
    assert "--bounded" not in args and "--detached" not in cmd
    detached = C.flink_run_command(_cfg(), "m", spec, flink_home="/f", rest_url="http://h", detached=True)
    # the client detaches (flink run --detached) and so does the job's main (it returns once submitted)
    assert detached[2] == "--detached" and detached[-1] == "--detached" and "--bounded" in detached
    assert "rest.port=8081" in detached and "rest.address=h" in detached
