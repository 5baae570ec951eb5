"""The Neo4j password never travels with the stream job: not in the graph-write UDF as PyFlink
serializes it into the job graph (cloudpickle of the function object), not in the pickled spec,
not in the ``flink run`` arguments. The UDF carries the password file's path and reads the file
in ``open()``, where it runs."""

from __future__ import annotations

import inspect
import secrets
from pathlib import Path

import cloudpickle
import pytest

from auditflow_app import flow
from auditflow_app.settings import Settings
from pipelines import kafka_job
from pipelines.stream_job import StreamSpec, _graph_udf


@pytest.fixture
def secret_settings(tmp_path: Path) -> tuple[Settings, str, Path]:
    password = "pw-" + secrets.token_urlsafe(24)
    f = tmp_path / "password"
    f.write_text(password + "\n")
    s = Settings(out_dir=tmp_path, graph_url="bolt://127.0.0.1:7687", neo4j_password_file=f,
                 graph_namespace="tsecret")
    return s, password, f


def test_pyflink_serializes_udfs_with_cloudpickle():
    """What the next test relies on: PyFlink ships a Python UDF as ``cloudpickle.dumps`` of the
    function object (pyflink.table.udf), so those bytes are what the job graph holds."""
    from pyflink.table.udf import UserDefinedFunctionWrapper

    source = inspect.getsource(UserDefinedFunctionWrapper._java_user_defined_function)
    assert "cloudpickle.dumps(func)" in source and "func = self._func" in source


def test_the_graph_udf_carries_the_password_file_not_the_password(secret_settings):
    s, password, f = secret_settings
    spec = flow.stream_spec(s.out_dir / "model", s)
    udf = _graph_udf(spec)
    shipped = cloudpickle.dumps(udf._func)  # exactly what PyFlink puts in the job graph
    assert password.encode() not in shipped
    assert str(f).encode() in shipped  # the reference the TaskManager resolves in open()
    assert password.encode() not in cloudpickle.dumps(spec)


def test_the_cluster_job_arguments_carry_the_password_file_not_the_password(secret_settings):
    s, password, f = secret_settings
    cfg = kafka_job.KafkaJobConfig(bootstrap=s.kafka_bootstrap, topic_transactions="t", topic_alerts="a",
                                   topic_dlq="d", connector_jar="/jars/connector.jar")
    args = kafka_job.job_arguments(cfg, s.out_dir / "model", flow.stream_spec(s.out_dir / "model", s))
    assert not [a for a in args if password in a]
    assert f"password_file={f}" in args


def test_a_spec_holding_a_password_is_refused():
    spec = StreamSpec(scorer_factory=lambda: None, graph_url="bolt://127.0.0.1:7687",
                      graph_options={"user": "neo4j", "password": "would-be-pickled"})
    with pytest.raises(ValueError, match="password_file"):
        _graph_udf(spec)


@pytest.mark.flink
def test_the_jvm_side_function_holds_no_password(secret_settings):
    """The serialized function the JVM keeps for the job graph (PythonScalarFunction), read back
    from a real gateway."""
    from pyflink.java_gateway import get_gateway

    s, password, f = secret_settings
    get_gateway()
    judf = _graph_udf(flow.stream_spec(s.out_dir / "model", s))._java_user_defined_function()
    shipped = bytes(judf.getSerializedPythonFunction())
    assert len(shipped) > 100
    assert password.encode() not in shipped and str(f).encode() in shipped
