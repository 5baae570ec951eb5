"""A Python worker of a TaskManager killed with SIGKILL exits instead of lingering.

A stand-in parent whose command line names ``TaskManagerRunner`` (as a TaskManager JVM's does)
spawns a worker that starts the watchdog; the parent is then killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipelines.stream_job import taskmanager_ancestor

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

WORKER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    from pipelines import stream_job
    print(stream_job.taskmanager_ancestor(), flush=True)
    stream_job.exit_with_taskmanager(poll_s=0.05)
    print(int(stream_job._WATCHDOG[0] is not None and stream_job._WATCHDOG[0].is_alive()), flush=True)
    time.sleep(120)
""")

PARENT = textwrap.dedent("""
    import subprocess, sys
    p = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=sys.stdout)
    print(p.pid, flush=True)
    p.wait()
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _diagnose(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        threads = [Path(t, "comm").read_text().strip() for t in Path(f"/proc/{pid}/task").iterdir()]
        return f"stat {stat!r}, threads {threads}"
    except OSError as e:
        return f"gone while diagnosing ({e})"


def test_this_process_has_no_taskmanager_above_it():
    assert taskmanager_ancestor() is None  # pytest is not a TaskManager's child


def test_worker_exits_when_its_taskmanager_is_killed():
    # the stand-in's command line names TaskManagerRunner: what taskmanager_ancestor looks for
    parent = subprocess.Popen([sys.executable, "-c", PARENT, WORKER, str(REPO),
                               "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        worker = int(parent.stdout.readline())
        assert int(parent.stdout.readline()) == parent.pid  # the worker found the stand-in
        assert parent.stdout.readline().strip() == "1"  # and watches it
        assert _alive(worker)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker), f"the worker outlived its TaskManager: {_diagnose(worker)}"
    finally:
        parent.kill()
