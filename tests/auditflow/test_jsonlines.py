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


def test_the_writer_spells_each_record_one_way(tmp_path):
    """Sorted keys, no spaces, non-ASCII escaped, ``\\n`` after each; a string is written as it is."""
    from auditflow.jsonlines import json_line, write_json_lines

    path = tmp_path / "w.jsonl"
    records = [{"b": [1, None], "a": "café\u2028"}, '{"kept":"as given"}', {}]
    assert write_json_lines(path, iter(records)) == 3
    assert path.read_bytes() == b'{"a":"caf\\u00e9\\u2028","b":[1,null]}\n{"kept":"as given"}\n{}\n'
    assert read_json_lines(path) == [records[0], {"kept": "as given"}, {}]
    assert json_line({"z": 1.5, "y": True}) == '{"y":true,"z":1.5}\n'
    assert write_json_lines(tmp_path / "empty.jsonl", []) == 0 and (tmp_path / "empty.jsonl").read_bytes() == b""
