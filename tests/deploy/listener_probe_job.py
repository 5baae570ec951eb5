"""A PyFlink job whose Python worker lists its TaskManager's listening sockets: a fixture for
tests/deploy/test_security.py, not a test module.

    FLINK_CONF_DIR=var/flink/conf $FLINK_HOME/bin/flink run -pyexec .venv/bin/python -py tests/deploy/listener_probe_job.py

While a Python function runs, the TaskManager holds the gRPC servers its Python worker talks to
(Beam's control, data, state, logging, ... services), so the worker -- a child process of the
TaskManager -- sees them all when it reads the TaskManager's sockets from /proc. Prints one line
``LISTENER_PROBE {json}``: the TaskManager's pid and its listeners (address, port) with the
worker's own, as seen from inside the job.
"""
from __future__ import annotations

import json
import sys

MARKER = "LISTENER_PROBE"


def probe(_value: int) -> str:
    """Runs in the Python worker: the listeners of the TaskManager this worker descends from."""
    import os

    from pipelines.stream_job import taskmanager_ancestor  # the daemons' PYTHONPATH has the repo root
    from tests.deploy.sockets import listeners_of

    tm = taskmanager_ancestor()
    return json.dumps({"taskmanager": tm, "listeners": listeners_of(tm) if tm else [],
                       "worker": listeners_of(os.getpid())})


def main() -> None:
    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    stream = env.from_collection([1], type_info=Types.INT()).map(probe, output_type=Types.STRING())
    with stream.execute_and_collect("auditflow-listener-probe") as results:
        (line,) = list(results)
    print(MARKER, line, flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
