import json

import pytest

from auditflow.jsonlines import iter_json_lines, read_json_lines


def test_records_in_file_order_blank_lines_skipped(tmp_path):
    rows = [{"a": 1}, {"b": [1, 2], "c": "é"}, {"a": None}]
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1], ensure_ascii=False) + "\n   \n"
                    + json.dumps(rows[2]), encoding="utf-8")
    assert read_json_lines(path) == rows
    assert list(iter_json_lines(path)) == rows


def test_a_bad_line_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: not a JSON record"):
        read_json_lines(path)


def test_a_missing_file_is_empty_only_when_asked(tmp_path):
    assert read_json_lines(tmp_path / "none.jsonl", missing_ok=True) == []
    with pytest.raises(FileNotFoundError):
        read_json_lines(tmp_path / "none.jsonl")
