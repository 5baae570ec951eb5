"""Hand-built alerts, traces and reason codes (real records, no pipeline) for report tests.

Shipped with the package, like Bytewax's ``testing.py``, so other stages' tests and the CLI's
smoke test can render a report without running the pipeline.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from auditflow.money import parse_amount
from auditflow.records import (
    AccountRef,
    Alert,
    EvidenceTrace,
    ReasonCode,
    TraceEdge,
    TraceCut,
    TraceNode,
    TransactionEvent,
    alert_id_for,
)
from reports.signing import Keyring, Signer

#: The tests' own signing key (a fixed seed, like the development key public, so never trusted
#: outside tests) and the keyring that trusts it.
SIGNER = Signer.from_seed(hashlib.sha256(b"auditflow tests signing key").digest())
KEYRING = Keyring([SIGNER.public_key])
INPUT_SHA256 = "3f" * 32
MODEL_DIGEST = "sha256:" + "9a1c" * 16

ROOT = "00220/8001C8C51"
A1, A2, A3 = "01420/8003093C1", "0119/80F2A3B11", "070/800AB12C0"
B1, B2 = "0011/8011D2E40", "00220/8009F00D1"


def make_alert() -> Alert:
    event = TransactionEvent(
        event_id="tx-4b1d0c9e7f2a3b65",
        timestamp=datetime(2022, 9, 1, 0, 16),
        sender=AccountRef("00220", "8001C8C51"),
        receiver=AccountRef("01420", "8003093C1"),
        amount_received=parse_amount("0.025852", "Bitcoin", field="Amount Received"),
        amount_paid=parse_amount("0.025852", "Bitcoin", field="Amount Paid"),
        payment_format="Bitcoin",
        is_laundering=True,
        source_offset=1874,
    )
    return Alert(
        alert_id=alert_id_for(event.event_id),
        event=event,
        score=0.9731842279434204,
        threshold=0.62,
        model_digest=MODEL_DIGEST,
        features=(("amount_usd", 297.3), ("snd_out_cp_24h", 7.0), ("snd_out_n_1h", 4.0)),
    )


def make_reason_codes() -> list[ReasonCode]:
    return [
        ReasonCode("snd_out_cp_24h", 7.0, 1.4213, "sender: distinct payees in the last 24 hours (fan-out)"),
        ReasonCode("snd_out_n_1h", 4.0, 0.8875, "sender: outgoing transfers in the last hour"),
        ReasonCode("amount_usd", 297.3, 0.3120577, "amount paid, in USD"),
        ReasonCode("cross_currency", 0.0, -0.2047, "paid and received currencies differ"),
        ReasonCode("rcv_gap_min", 10080.0, -0.0911, "receiver: minutes since its previous transfer (at most 7 days)"),
    ]


def _edge(eid: str, src: str, dst: str, amount: str, currency: str, ts: datetime, hop: int) -> TraceEdge:
    return TraceEdge(eid, src, dst, parse_amount(amount, currency, field="Amount Paid"), ts, hop)


def make_trace() -> EvidenceTrace:
    t = datetime(2022, 9, 1, 0, 16)
    edges = (
        _edge("tx-4b1d0c9e7f2a3b65", ROOT, A1, "0.025852", "Bitcoin", t, 1),
        _edge("tx-01aa9e1c33d2f870", ROOT, A2, "3697.34", "US Dollar", datetime(2022, 9, 1, 0, 40), 1),
        _edge("tx-01aa9e1c33d2f871", ROOT, A2, "12.05", "US Dollar", datetime(2022, 9, 1, 0, 41), 1),
        _edge("tx-77c0ffee00000001", A1, B1, "0.010000", "Bitcoin", datetime(2022, 9, 1, 2, 5), 2),
        _edge("tx-77c0ffee00000002", A2, B2, "1250000.00", "Euro", datetime(2022, 9, 1, 3, 0), 2),
        _edge("tx-01aa9e1c33d2f872", ROOT, A3, "98.10", "Yen", datetime(2022, 9, 1, 0, 55), 1),
        _edge("tx-77c0ffee00000003", A2, A3, "410.00", "UK Pound", datetime(2022, 9, 1, 3, 30), 2),
    )
    nodes = (
        TraceNode(ROOT, 0, ()),
        TraceNode(A1, 1, (ROOT,)),
        TraceNode(A2, 1, (ROOT,)),
        TraceNode(A3, 1, (ROOT,)),
        TraceNode(B1, 2, (A1,)),
        TraceNode(B2, 2, (A2,)),
    )
    return EvidenceTrace(
        trace_id="trace-5e2b7c01d9a4f3aa",
        root=ROOT,
        direction="out",
        max_hops=3,
        fanout_cap=25,
        window_start=datetime(2022, 9, 1, 0, 0),
        window_end=datetime(2022, 9, 3, 0, 0),
        nodes=nodes,
        edges=edges,
        backend="networkx",
        truncated=False,
    )


def make_big_trace(width: int = 30, hops: int = 4) -> EvidenceTrace:
    """A wide trace (more accounts than the drawing shows) with deterministic ids."""
    nodes = [TraceNode(ROOT, 0, ())]
    edges = []
    frontier = [ROOT]
    n = 0
    for hop in range(1, hops + 1):
        nxt = []
        for i in range(width if hop == 1 else max(1, width // 3)):
            up = frontier[i % len(frontier)]
            node = f"{100 + hop:03d}/8{n:08X}"
            n += 1
            nodes.append(TraceNode(node, hop, (up,)))
            edges.append(_edge(f"tx-{n:016x}", up, node, f"{n * 7}.{n % 100:02d}", "US Dollar",
                               datetime(2022, 9, 1, hop, i % 60), hop))
            nxt.append(node)
        frontier = nxt
    return EvidenceTrace("trace-big0000000000001", ROOT, "out", hops, 50, None, None,
                         tuple(nodes), tuple(edges), backend="networkx", truncated=True,
                         cuts=(TraceCut(hops, "", "fan-out cap", 12), TraceCut(1, ROOT, "hub", 3)))



# ----------------------------------------------------------------------------- tamper cases
#
# A reports folder with a few signed reports, and every way of tampering with it the audit
# review listed; each case names the file or check verify must report. The tests and
# bench/reports.py share them.


def alert_number(i: int) -> Alert:
    """``make_alert`` with its own event id (so its own alert id and report)."""
    from dataclasses import replace

    base = make_alert()
    event = replace(base.event, event_id=f"tx-{i:016x}")
    return replace(base, alert_id=alert_id_for(event.event_id), event=event)


def make_reports_folder(directory, n: int = 3, *, signer: Signer | None = None):
    """``n`` reports written by a :class:`~reports.alert_report.ReportWriter` into ``directory``,
    finished (signed tree head); returns the manifests."""
    from reports.alert_report import ReportWriter

    writer = ReportWriter(directory, input_sha256=INPUT_SHA256, code_version="v", seed=7, signer=signer or SIGNER)
    manifests = [writer.write(alert_number(i), make_trace(), make_reason_codes()) for i in range(n)]
    writer.finish()
    return manifests


def _stems(directory) -> list[str]:
    from pathlib import Path

    return sorted(p.name[: -len(".manifest.json")] for p in Path(directory).glob("*.manifest.json"))


def _flip(path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))


def _swap(d) -> None:
    """Report B becomes a copy of report A: A's valid manifest over B's, A's PDF over B's."""
    a, b = _stems(d)[:2]
    (d / f"{b}.manifest.json").write_bytes((d / f"{a}.manifest.json").read_bytes())
    (d / f"{b}.pdf").write_bytes((d / f"{a}.pdf").read_bytes())


def _delete_report(d) -> None:
    s = _stems(d)[1]
    for p in d.glob(f"{s}.*"):
        p.unlink()


def _truncate_log(d) -> None:
    log = d / "audit_log.jsonl"
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:-1]))


def _rewrite_log(d) -> None:
    """Drop one report's entry and recompute the whole log (new leaves, new root), re-signing the
    folder's tree head with another key."""
    from reports.audit_log import AuditLog

    log_path = d / "audit_log.jsonl"
    old = AuditLog(log_path).entries()
    log_path.unlink()
    new = AuditLog(log_path)
    for e in old[1:]:
        new.append(e.kind, e.payload)
    new.tree_head(Signer.from_seed(bytes(32))).write(d / "tree_head.json")


def _rewrite_log_keep_head(d) -> None:
    """Reorder two entries into a new valid log (indices renumbered), leaving the signed head."""
    import json

    from reports.audit_log import AuditLog

    log_path = d / "audit_log.jsonl"
    old = AuditLog(log_path).entries()
    log_path.unlink()
    new = AuditLog(log_path)
    for e in [old[1], old[0], *old[2:]]:
        new.append(e.kind, json.loads(json.dumps(e.payload)))


def _delete_log(d) -> None:
    (d / "audit_log.jsonl").unlink()


def _empty_folder(d) -> None:
    import shutil

    for p in list(d.iterdir()):
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def _resign(d, signer: Signer) -> None:
    """Edit a manifest (another seed) and sign it again with ``signer``."""
    import json
    from dataclasses import replace

    from auditflow.records import ReportManifest
    from reports.manifest import sign_manifest, write_manifest

    path = d / f"{_stems(d)[0]}.manifest.json"
    m = ReportManifest.from_dict(json.loads(path.read_text()))
    write_manifest(sign_manifest(replace(m, seed=m.seed + 1), signer), path)


def _resign_dev(d) -> None:
    from reports.signing import development_signer

    _resign(d, development_signer())


def _resign_other(d) -> None:
    _resign(d, Signer.from_seed(bytes(32)))


def _unlogged_pdf(d) -> None:
    (d / "alert-planted.pdf").write_bytes((d / f"{_stems(d)[0]}.pdf").read_bytes())


def _forged_tree_head(d) -> None:
    import json

    head = json.loads((d / "tree_head.json").read_text())
    head["tree_size"] -= 1
    (d / "tree_head.json").write_text(json.dumps(head))


def _delete_tree_head(d) -> None:
    (d / "tree_head.json").unlink()


#: name -> (tamper(folder), what a finding must contain, whether it is only visible against a
#: tree head kept outside the folder).
TAMPER_CASES = {
    "swap manifest+pdf": (_swap, "a manifest copied over another", False),
    "delete a report": (_delete_report, "was deleted", False),
    "truncate the log": (_truncate_log, "the log has", False),
    "rewrite the log, re-sign its head": (_rewrite_log, "not among the trusted keys", False),
    "rewrite the log, keep its head": (_rewrite_log_keep_head, "do not give its root", False),
    "delete the log": (_delete_log, "the log was deleted", False),
    "empty the folder": (_empty_folder, "the folder emptied", True),
    "re-sign a manifest with the dev key": (_resign_dev, "development key", False),
    "re-sign a manifest with another key": (_resign_other, "not among the trusted keys", False),
    "flip a byte in a pdf": (lambda d: _flip(d / f"{_stems(d)[0]}.pdf"), "altered or replaced", False),
    "flip a byte in a trace": (lambda d: _flip(d / f"{_stems(d)[0]}.trace.json.gz", 0.3), "altered or replaced", False),
    "flip a byte in a manifest": (lambda d: _flip(d / f"{_stems(d)[0]}.manifest.json", 0.4), "manifest", False),
    "flip a byte in the log": (lambda d: _flip(d / "audit_log.jsonl", 0.6), "audit_log.jsonl", False),
    "plant an unlogged pdf": (_unlogged_pdf, "not in the audit log", False),
    "edit the tree head": (_forged_tree_head, "does not verify", False),
    "delete the tree head": (_delete_tree_head, "signed by no tree head", False),
}


def figures_over_four_digits(text: str) -> list[str]:
    """Standalone numbers of ``text`` with more than 4 significant digits (ids, dates and times
    are not standalone): what a text for people must not hold outside the appendix."""
    out = []
    for m in re.finditer(r"(?<![\w./:-])\d[\d,]*(?:\.\d+)?(?![\w/:-])", text):
        plain = m.group().replace(",", "")
        digits = plain.replace(".", "").lstrip("0") if "." in plain else plain.lstrip("0").rstrip("0")
        if len(digits) > 4:
            out.append(m.group())
    return out
