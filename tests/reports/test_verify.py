"""verify against every tampering the audit review listed: each one fails, naming what failed."""

from __future__ import annotations

import shutil

import pytest

from reports.audit_log import TreeHead
from reports.signing import Keyring, development_signer
from reports.testing import KEYRING, TAMPER_CASES, make_reports_folder
from reports.verify import verify_reports


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    d = tmp_path_factory.mktemp("pristine") / "reports"
    make_reports_folder(d, 3)
    kept = tmp_path_factory.mktemp("kept") / "head.json"
    shutil.copy(d / "tree_head.json", kept)
    return d, kept


@pytest.fixture
def folder(pristine, tmp_path):
    d = tmp_path / "reports"
    shutil.copytree(pristine[0], d)
    return d


def test_an_untouched_folder_verifies(folder, pristine):
    res = verify_reports(folder, KEYRING, tree_head=TreeHead.load(pristine[1]))
    assert res.ok, res.findings
    assert (res.reports, res.files, res.log_size) == (3, 6, 3)


@pytest.mark.parametrize("case", sorted(TAMPER_CASES))
def test_each_tampering_fails_and_is_named(folder, pristine, case):
    tamper, expected, needs_kept_head = TAMPER_CASES[case]
    tamper(folder)
    res = verify_reports(folder, KEYRING, tree_head=TreeHead.load(pristine[1]))
    assert not res.ok
    assert any(expected in str(f) for f in res.findings), [str(f) for f in res.findings]
    if not needs_kept_head:  # caught from the folder alone, too
        assert not verify_reports(folder, KEYRING).ok


def test_swapped_report_names_both_the_manifest_and_the_pdf(folder):
    TAMPER_CASES["swap manifest+pdf"][0](folder)
    items = {f.item for f in verify_reports(folder, KEYRING).findings}
    stems = sorted(p.name[:-14] for p in folder.glob("*.manifest.json"))
    assert f"{stems[1]}.manifest.json" in items and f"{stems[1]}.pdf" in items


def test_an_emptied_folder_fails_even_without_a_kept_head(folder):
    TAMPER_CASES["empty the folder"][0](folder)
    res = verify_reports(folder, KEYRING)
    assert [f.problem for f in res.findings] == [
        "nothing to verify: no audit log and no reports (an emptied folder shows only against a kept tree head, --tree-head)"]


def test_cut_log_lines_are_caught_by_the_kept_head_even_with_the_folder_head_re_signed(folder, pristine):
    """Cut the last entry and its report, then sign a fresh head for the shorter log with the
    trusted key itself (an insider): only the head kept elsewhere still shows the cut."""
    from reports.audit_log import AuditLog
    from reports.testing import SIGNER

    TAMPER_CASES["truncate the log"][0](folder)
    last = sorted(folder.glob("*.manifest.json"))
    logged = {e.payload["manifest"][0] for e in AuditLog(folder / "audit_log.jsonl").entries()}
    for m in last:
        if m.name not in logged:
            for p in folder.glob(m.name[:-14] + ".*"):
                p.unlink()
    AuditLog(folder / "audit_log.jsonl").tree_head(SIGNER).write(folder / "tree_head.json")
    assert verify_reports(folder, KEYRING).ok  # self-consistent...
    res = verify_reports(folder, KEYRING, tree_head=TreeHead.load(pristine[1]))
    assert any("records 3 log entries, the log has 2" in str(f) for f in res.findings)


def test_the_dev_key_is_trusted_only_when_asked(tmp_path):
    d = tmp_path / "demo"
    make_reports_folder(d, 1, signer=development_signer())
    assert any("development key" in str(f) for f in verify_reports(d, KEYRING).findings)
    assert verify_reports(d, Keyring([development_signer().public_key])).ok


def test_no_trusted_keys_is_a_failure(folder):
    assert any(f.item == "keys" for f in verify_reports(folder, Keyring()).findings)


def test_a_later_run_extends_the_kept_head(folder, pristine):
    from reports.testing import make_reports_folder as more

    more(folder, 5)  # reports 0..2 unchanged, 3 and 4 new: the log grows, consistently
    res = verify_reports(folder, KEYRING, tree_head=TreeHead.load(pristine[1]))
    assert res.ok, res.findings
    assert res.log_size == 5


# ---------------------------------------------------------------------------- the root cause first


@pytest.fixture(scope="module")
def twelve(tmp_path_factory):
    d = tmp_path_factory.mktemp("twelve") / "reports"
    make_reports_folder(d, 12)
    return d


def _tampered(twelve, tmp_path, change, keyring=KEYRING):
    d = tmp_path / "reports"
    shutil.copytree(twelve, d)
    log = d / "audit_log.jsonl"
    lines = log.read_bytes().split(b"\n")[:-1]
    change(lines)
    log.write_bytes(b"".join(line + b"\n" for line in lines))
    return verify_reports(d, keyring)


def _edit_a_digit(lines):  # one byte of entry 5, the line still canonical JSON
    i = lines[5].index(b"tx-") + 5
    lines[5] = lines[5][:i] + (b"9" if lines[5][i:i + 1] != b"9" else b"8") + lines[5][i + 1:]


def test_one_edited_byte_is_named_as_the_cause_and_the_rest_folds(twelve, tmp_path):
    res = _tampered(twelve, tmp_path, _edit_a_digit)
    assert [c.item for c in res.causes] == ["log entry 5"]
    assert res.causes[0].problem.startswith("was rewritten: it is not the entry the signed manifest "
                                            "alert-tx-0000000000000005.manifest.json records there")
    assert res.causes[0].problem.endswith("nothing else in the log was changed")
    groups = res.grouped()
    assert ("log entries 0-11", "inclusion proof does not verify against the signed tree head", 12) in groups
    assert sum(n for _, _, n in groups) == len(res.findings)  # folded, none lost
    assert len(groups) < len(res.findings) / 2


def test_a_line_made_non_canonical_is_the_cause(twelve, tmp_path):
    res = _tampered(twelve, tmp_path, lambda lines: lines.__setitem__(5, lines[5].replace(b'":', b'": ', 1)))
    assert [c.item for c in res.causes] == ["log entry 5"] and "nothing else" in res.causes[0].problem


def test_a_removed_line_and_swapped_lines_are_named(twelve, tmp_path):
    res = _tampered(twelve, tmp_path / "removed", lambda lines: lines.__delitem__(5))
    assert [c.item for c in res.causes] == ["log entry 5", "log entries 6-11"]
    assert res.causes[0].problem.startswith("was removed")
    assert "a line before them was removed or one inserted" in res.causes[1].problem

    def swap(lines):
        lines[5], lines[6] = lines[6], lines[5]

    res = _tampered(twelve, tmp_path / "swapped", swap)
    assert [c.item for c in res.causes] == ["log entries 5-6"]
    assert "the log was reordered" in res.causes[0].problem and "nothing else" in res.causes[0].problem


def test_an_untrusted_manifest_vouches_for_nothing(twelve, tmp_path):
    assert _tampered(twelve, tmp_path, _edit_a_digit, Keyring()).causes == []
