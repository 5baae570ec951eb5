"""The file-backed embedded store as the stream job (writer) and the CLI / worker (readers) use it."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evidence_graph import NetworkxGraphStore, open_store, trace_evidence
from evidence_graph.testing import acct, chain, cycle, tx


def test_writes_are_visible_to_readers_after_flush(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    writer = NetworkxGraphStore(path)
    reader = NetworkxGraphStore(path)
    writer.add_transactions(chain("ABC"))
    assert reader.reload() == 0 and reader.edge_count() == 0  # buffered, not yet written
    writer.flush()
    assert reader.reload() == 2 and reader.edge_count() == 2
    writer.add_transactions([tx("x", "C", "D", 5)])
    writer.close()
    assert reader.reload() == 1
    assert reader.reload() == 0
    assert trace_evidence(reader, acct("A")) == trace_evidence(writer, acct("A"))
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(line.startswith('{"amount_paid"') for line in lines)


def test_a_separate_process_sees_the_same_graph(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    with NetworkxGraphStore(path) as w:
        w.add_transactions(cycle("ABCD"))
    code = textwrap.dedent(f"""
        from evidence_graph import open_store, trace_evidence
        s = open_store("embedded:{path}")
        print(s.edge_count(), trace_evidence(s, "001/A").trace_id)
    """)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.split()
    here = NetworkxGraphStore(path)
    assert out == [str(here.edge_count()), trace_evidence(here, acct("A")).trace_id]


def test_auto_flush_and_two_writers_interleaving(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    a = NetworkxGraphStore(path, flush_every=2)
    b = NetworkxGraphStore(path, fsync=False)
    a.add_transactions(chain("ABC"))  # two new events: flushed at once
    assert len(path.read_text().splitlines()) == 2
    b.add_transactions([*chain("ABC"), tx("y", "X", "Y", 1)])  # duplicates of a's: written again
    b.close()
    a.add_transactions([tx("z", "Y", "Z", 2)])
    a.flush()
    fresh = NetworkxGraphStore(path)
    assert fresh.edge_count() == 4 == len({*path.read_text().splitlines()})
    assert a.reload() == 1 and a.edge_count() == 4  # b's line; its duplicates are skipped


def test_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    line = tx("p", "A", "B").to_json()
    path.write_text(chain("AB", prefix="q")[0].to_json() + "\n" + line[:20])
    s = NetworkxGraphStore(path)
    assert s.edge_count() == 1
    with path.open("a") as fh:
        fh.write(line[20:] + "\n")
    assert s.reload() == 1 and s.edge_count() == 2


def test_replaced_file_is_loaded_again_and_bad_lines_are_named(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    with NetworkxGraphStore(path) as w:
        w.add_transactions(chain("ABCD"))
    s = NetworkxGraphStore(path)
    s.add_transactions([tx("mine", "Q", "R")])  # unflushed: survives the reload
    path.unlink()
    path.write_text(tx("new", "E", "F").to_json() + "\n")
    s.reload()
    assert sorted(e.event_id for e in s.edges()) == ["mine", "new"]
    # rewritten in place (same inode) and longer than before: told apart by its first bytes
    path.write_text("".join(e.to_json() + "\n" for e in chain("GHIJKL", prefix="g")))
    s.reload()
    assert sorted(e.event_id for e in s.edges()) == ["g0", "g1", "g2", "g3", "g4", "mine"]
    path.write_text(path.read_text() + '{"schema": "nope"}\n')
    with pytest.raises(ValueError, match=r"g.jsonl:6: schema"):
        s.reload()


def test_pickle_carries_pending_events_and_reopens_the_file(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    s = NetworkxGraphStore(path)
    s.add_transactions(chain("ABC"))
    s.flush()
    s.add_transactions([tx("pending", "C", "D", 9)])
    copy = pickle.loads(pickle.dumps(s))
    assert copy.path == path and copy.edge_count() == 3
    copy.close()
    assert NetworkxGraphStore(path).edge_count() == 3


def test_open_store_urls(tmp_path: Path) -> None:
    assert isinstance(open_store("memory:"), NetworkxGraphStore)
    s = open_store(f"embedded:{tmp_path / 'x.jsonl'}", flush_every=5)
    assert isinstance(s, NetworkxGraphStore) and s.flush_every == 5
    for bad in ("embedded:", "mysql://x", ""):
        with pytest.raises(ValueError):
            open_store(bad)


def test_closed_store_refuses_writes() -> None:
    s = NetworkxGraphStore()
    s.close()
    with pytest.raises(ValueError, match="closed"):
        s.add_transactions(chain("AB"))
