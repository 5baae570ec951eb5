"""The file-backed embedded store after a crash: a writer killed mid-append leaves a torn last
line; the next writer must not glue its lines onto it, and no event whose ``flush()`` returned
may be lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from auditflow.records import TransactionEvent
from evidence_graph import NetworkxGraphStore
from evidence_graph.testing import chain, tx

ROOT = Path(__file__).resolve().parents[2]


def torn(ev: TransactionEvent, cut: int) -> bytes:
    """The first ``cut`` bytes of ``ev``'s line, as a writer killed inside write() leaves them."""
    line = (ev.to_json() + "\n").encode()
    assert 0 < cut < len(line) - 1
    return line[:cut]


def ids_in_file(path: Path) -> list[str]:
    """Event ids of the file's complete lines, parsed independently of the store."""
    data = path.read_bytes()
    return [TransactionEvent.from_json(raw).event_id for raw in data[: data.rfind(b"\n") + 1].splitlines()]


def test_torn_tail_then_append_then_reopen_gives_the_acknowledged_events(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    acked = chain("ABCD", prefix="a")
    with NetworkxGraphStore(path) as s:
        s.add_transactions(acked)
    with path.open("ab") as fh:  # a writer killed mid-append: never acknowledged
        fh.write(torn(tx("lost", "D", "E", 7), 25))
    later = NetworkxGraphStore(path)
    assert later.edge_count() == 3  # the torn line is not an event (nor an error) on open
    later.add_transactions([tx("b0", "E", "F", 8), tx("b1", "F", "G", 9)])
    later.flush()
    fresh = NetworkxGraphStore(path)
    assert sorted(e.event_id for e in fresh.edges()) == ["a0", "a1", "a2", "b0", "b1"]
    assert path.read_bytes().endswith(b"\n")
    assert ids_in_file(path) == ["a0", "a1", "a2", "b0", "b1"]  # the torn bytes are gone
    assert later.reload() == 0 and later.edge_count() == 5


def test_a_reader_that_saw_the_torn_tail_follows_the_repair(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    with NetworkxGraphStore(path) as s:
        s.add_transactions(chain("ABC", prefix="a"))
    with path.open("ab") as fh:
        fh.write(torn(tx("lost", "C", "D", 7), 40))
    reader = NetworkxGraphStore(path)
    assert reader.edge_count() == 2
    with NetworkxGraphStore(path) as w:
        w.add_transactions([tx("b0", "X", "Y", 8)])
    assert reader.reload() == 1
    assert sorted(e.event_id for e in reader.edges()) == ["a0", "a1", "b0"]


def test_a_file_holding_only_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_bytes(torn(tx("lost", "A", "B"), 60))
    reader = NetworkxGraphStore(path)
    assert reader.edge_count() == 0
    with NetworkxGraphStore(path) as w:
        w.add_transactions([tx("b0", "X", "Y", 8)])
    assert ids_in_file(path) == ["b0"]
    assert reader.reload() == 1 and [e.event_id for e in reader.edges()] == ["b0"]


SHORT_WRITE = textwrap.dedent("""
    import os, resource, sys
    from evidence_graph import NetworkxGraphStore
    from evidence_graph.testing import tx
    path, room = sys.argv[1], int(sys.argv[2])
    store = NetworkxGraphStore(path)
    size = os.path.getsize(path)
    # the file may grow by `room` bytes only: the kernel writes that much of the batch, then the
    # write fails (EFBIG), as a full disk or a crash inside write() would leave it
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + room, resource.RLIM_INFINITY))
    store.add_transactions([tx(f"t{k}", "P", "Q", k) for k in range(20)])
    try:
        store.flush()
    except OSError as e:
        print("failed", e.errno)
    else:
        print("flushed")
    if sys.argv[3] == "retry":
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        store.flush()
        print("retried", getattr(store, "discarded_bytes", None))
""")


def run_short_write(path: Path, room: int, mode: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", SHORT_WRITE, str(path), str(room), mode],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    return out


def test_a_write_cut_short_by_the_kernel_is_cut_away_by_the_next_writer(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    with NetworkxGraphStore(path) as s:
        s.add_transactions(chain("ABC", prefix="a"))
    before = path.read_bytes()
    line = len(tx("t0", "P", "Q", 0).to_json()) + 1
    room = 2 * line + line // 2  # two whole lines and half of the third
    assert run_short_write(path, room, "exit") == ["failed", "27"]  # EFBIG
    after = path.read_bytes()
    assert len(after) == len(before) + room and not after.endswith(b"\n")  # really torn
    assert NetworkxGraphStore(path).edge_count() == 4  # 2 acked + 2 whole lines of the failed flush
    w = NetworkxGraphStore(path)
    w.add_transactions([tx("b0", "X", "Y", 9)])
    w.flush()
    assert ids_in_file(path) == ["a0", "a1", "t0", "t1", "b0"]
    assert NetworkxGraphStore(path).edge_count() == 5
    assert w.discarded_bytes == room - 2 * line  # the half line, counted


def test_a_failed_flush_retried_writes_every_event_once(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    with NetworkxGraphStore(path) as s:
        s.add_transactions(chain("AB", prefix="a"))
    line = len(tx("t0", "P", "Q", 0).to_json()) + 1
    out = run_short_write(path, 3 * line + 7, "retry")
    ids = ids_in_file(path)
    # the failed flush's three whole lines stay, the retry appends all 20 again: reloading is
    # idempotent on event id, so the graph holds each once
    assert ids == ["a0", "t0", "t1", "t2", *(f"t{k}" for k in range(20))]
    assert sorted(e.event_id for e in NetworkxGraphStore(path).edges()) == sorted(
        ["a0", *(f"t{k}" for k in range(20))])
    assert out == ["failed", "27", "retried", "7"]  # EFBIG, then the 7 torn bytes cut on retry


WRITER = textwrap.dedent("""
    import sys
    from evidence_graph import NetworkxGraphStore
    from evidence_graph.testing import tx
    path, tag = sys.argv[1], sys.argv[2]
    store = NetworkxGraphStore(path, flush_every=10**9)
    i = 0
    while True:
        batch = [tx(f"{tag}-{i + k}", f"{tag}{(i + k) % 97}", f"{tag}{(i + k + 1) % 97}", i + k)
                 for k in range(500)]
        store.add_transactions(batch)
        store.flush()
        print(batch[-1].event_id, flush=True)  # acknowledged: flush() returned
        i += 500
""")


def test_kill_9_mid_append_never_corrupts_nor_loses_a_flushed_event(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    rng = random.Random(8)
    acked: set[str] = set()
    unacked: set[str] = set()  # written by a killed run after its last acknowledged flush
    for run in range(4):
        tag = f"r{run}"
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), tag],
            cwd=ROOT, stdout=subprocess.PIPE, text=True,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()  # started and flushed at least once
        assert first, "writer died before its first flush"
        time.sleep(rng.uniform(0.0, 0.5))
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        last = int((first + rest).split()[-1].split("-")[1])  # last batch whose flush() returned
        acked |= {f"{tag}-{k}" for k in range(last + 1)}
        stored = {e.event_id for e in NetworkxGraphStore(path).edges()}  # readable after each kill
        assert acked <= stored
        new = stored - acked - unacked
        assert all(e.startswith(tag + "-") and int(e.split("-")[1]) > last for e in new)
        unacked |= new
    ids = ids_in_file(path)
    assert len(ids) == len(set(ids)) == len(acked | unacked)  # each written once, nothing glued
