"""Tiny keyed PyFlink job: a fixture for tests/deploy/test_services.py, not a test module.

Submitted to the standalone session cluster started by ``deploy/services up flink`` with

    FLINK_CONF_DIR=var/flink/conf $FLINK_HOME/bin/flink run -pyexec .venv/bin/python -py tests/deploy/tiny_keyed_job.py

It keys 30 records by ``k0``/``k1``/``k2``, keeps a running sum and count per key in keyed
``ValueState`` inside a Python ``KeyedProcessFunction`` (so the TaskManager's Python workers run),
collects the results back to the client, and prints one line ``TINY_JOB_RESULT {json}`` with the
final (sum, count) per key and what the Python workers saw (interpreter, whether the repo root is
importable). Expected: k0 -> (165, 10), k1 -> (145, 10), k2 -> (155, 10).
"""
from __future__ import annotations

import json
import sys

RECORDS = [(f"k{i % 3}", i) for i in range(1, 31)]
MARKER = "TINY_JOB_RESULT"


def main() -> None:
    from pyflink.common import Types
    from pyflink.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment
    from pyflink.datastream.state import ValueStateDescriptor

    class RunningSum(KeyedProcessFunction):
        def open(self, runtime_context: RuntimeContext) -> None:
            self.state = runtime_context.get_state(
                ValueStateDescriptor("sum_count", Types.TUPLE([Types.LONG(), Types.LONG()])))

        def process_element(self, value, ctx):
            import importlib.util
            import os
            import sys as worker_sys

            total, count = self.state.value() or (0, 0)
            total, count = total + value[1], count + 1
            self.state.update((total, count))
            worker = {
                "python": worker_sys.executable,
                "repo_importable": importlib.util.find_spec("pipelines") is not None,
                "pythonpath": os.environ.get("PYTHONPATH", ""),
            }
            yield json.dumps({"key": value[0], "sum": total, "count": count, "worker": worker})

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    stream = (
        env.from_collection(RECORDS, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .key_by(lambda r: r[0], key_type=Types.STRING())
        .process(RunningSum(), output_type=Types.STRING())
    )
    final: dict[str, dict] = {}
    workers = []
    with stream.execute_and_collect("auditflow-tiny-keyed-job") as results:
        for line in results:
            rec = json.loads(line)
            prev = final.get(rec["key"])
            if prev is None or rec["count"] > prev["count"]:
                final[rec["key"]] = rec
            workers.append(rec["worker"])
    out = {
        "final": {k: [v["sum"], v["count"]] for k, v in sorted(final.items())},
        "records_out": len(workers),
        "worker_pythons": sorted({w["python"] for w in workers}),
        "repo_importable": all(w["repo_importable"] for w in workers),
        "worker_pythonpath": sorted({w["pythonpath"] for w in workers}),
    }
    print(MARKER, json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
