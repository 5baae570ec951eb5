"""The job's calls to the JVM stay on one Java thread when other Python threads call it too.

Py4J serves each call on the connection given back last, each connection a Java thread of its
own; PyFlink and Flink keep per-thread state (the class loader with the job's jars, Calcite's
metadata provider: FLINK-23020). Unpinned, a call from another Python thread that ends last moves
our next call to its Java thread; a query parsed on ours then fails to plan there with
``NullPointerException: metadataHandlerProvider`` (seen once in ``make test``, in the stream job's
``to_data_stream``). ``pin_gateway_threads`` keeps each Python thread on its own connection.
Marker ``flink``."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.flink


@pytest.fixture()
def t_env():
    from pipelines.stream_job import table_environment

    _, t_env = table_environment()  # pins the gateway's threads
    t_env.execute_sql("CREATE TEMPORARY VIEW v AS SELECT * FROM (VALUES (1, 'a'), (2, 'b'), (3, 'c')) AS t(x, y)")
    return t_env


def java_thread() -> int:
    from pyflink.java_gateway import get_gateway

    return get_gateway().jvm.java.lang.Thread.currentThread().getId()


def while_another_thread_calls(fn):
    """``fn()``, run here while another Python thread is inside a call to the JVM (a 0.4 s sleep
    there, which it began while this thread was idle: unpinned, it took this thread's connection)."""
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    inside = threading.Event()

    def other() -> None:
        inside.set()
        jvm.java.lang.Thread.sleep(400)

    t = threading.Thread(target=other)
    t.start()
    inside.wait()
    time.sleep(0.05)  # into its call
    try:
        return fn()
    finally:
        t.join()


def test_a_thread_stays_on_its_java_thread_while_another_thread_calls(t_env):
    ours = java_thread()
    assert while_another_thread_calls(lambda: [java_thread() for _ in range(3)]) == [ours] * 3
    assert [java_thread() for _ in range(3)] == [ours] * 3


def test_a_query_parsed_before_another_threads_call_plans_during_it(t_env):
    from py4j.java_gateway import JavaClass
    from pyflink.java_gateway import get_gateway

    table = t_env.sql_query("SELECT x, y FROM v WHERE x > 1")
    stream = while_another_thread_calls(lambda: t_env.to_data_stream(table))
    with stream.execute_and_collect("gateway-threads") as rows:
        assert sorted((r[0], r[1]) for r in rows) == [(2, "b"), (3, "c")]
    # the job's operators, on the class loader PyFlink gave our Java thread only
    operators = while_another_thread_calls(lambda: get_gateway().jvm.io.auditflow.stream.StreamFeatures)
    assert isinstance(operators, JavaClass)


def test_a_connection_closed_after_an_error_is_replaced(t_env):
    from pyflink.java_gateway import get_gateway

    client = get_gateway()._gateway_client
    ours = java_thread()
    client._get_connection().close()  # our kept connection, taken from the pool and closed
    after = java_thread()  # on a connection kept from now on
    assert after != ours
    assert while_another_thread_calls(java_thread) == after
