"""Reading back the stream job's output files (no MiniCluster): each tagged line lands in its own
output, in file order, hidden in-progress files are left out, and a tag no output has is an error
that names it instead of a line silently dropped. The lines are written here from records built
here; what comes back is compared with those records."""

from __future__ import annotations

import json
import re

import pytest

from auditflow.records import RejectedRecord
from evidence_graph.testing import tx
from pipelines.stream_job import SideOutput, SideOutputs, read_side_outputs


def _records():
    events = [tx(f"e{i}", "A", "B", i) for i in range(3)]
    alerts = [{"event": events[0].to_dict(), "score": 0.97}, {"event": events[2].to_dict(), "score": 0.5}]
    rejects = [RejectedRecord("f.csv", 3, "x,y", "amount", "y", "not a number", stage="decode")]
    late = [RejectedRecord("f.csv", 9, "a,b", "ts_ms", "17", "event time behind the watermark", stage="late")]
    drift = ['{"feature":"amount_usd","psi":0.1}', '{"feature":"hour","psi":0.3}']
    drift_alerts = ['{"alert_id":"d1","rule":"psi"}']
    return events, alerts, rejects, late, drift, drift_alerts


def test_each_tagged_line_comes_back_in_its_output_in_file_order(tmp_path) -> None:
    events, alerts, rejects, late, drift, drift_alerts = _records()
    first = [("A", json.dumps(alerts[0])), ("D", events[1].to_wire()), ("S", drift[0]),
             ("R", json.dumps(rejects[0].to_dict())), ("X", drift_alerts[0])]
    second = [("L", json.dumps(late[0].to_dict())), ("S", drift[1]), ("A", json.dumps(alerts[1]))]
    (tmp_path / "part-0").write_text("".join(tag + body + "\n" for tag, body in first), encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "part-1").write_text("".join(tag + body + "\n" for tag, body in second), encoding="utf-8")
    (tmp_path / ".part-2.inprogress").write_text("?not read\n", encoding="utf-8")

    out = read_side_outputs(tmp_path)
    assert out == SideOutputs(alerts=alerts, rejects=rejects, late=late, duplicates=[events[1]], drift_lines=drift,
                              drift_alert_lines=drift_alerts)
    assert sorted(k.value for k in SideOutput) == sorted("ADLRSX")


@pytest.mark.parametrize("line", ["Q{}\n", "a{}\n", "\n"])
def test_a_line_with_a_tag_no_output_has_is_an_error_naming_the_tag(tmp_path, line: str) -> None:
    events = _records()[0]
    (tmp_path / "part-0").write_text("D" + events[0].to_wire() + "\n" + line, encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"unknown output tag {line[:1]!r}")):
        read_side_outputs(tmp_path)
    with pytest.raises(ValueError, match="unknown output tag 'Q'"):
        SideOutputs().add("Q" + events[0].to_wire())
