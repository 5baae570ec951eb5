"""Hand-built alerts, traces and reason codes (real records, no pipeline) for report tests.

Shipped with the package, like Bytewax's ``testing.py``, so other stages' tests and the CLI's
smoke test can render a report without running the pipeline.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from auditflow.money import parse_amount
from auditflow.records import (
    AccountRef,
    Alert,
    EvidenceTrace,
    ReasonCode,
    TraceEdge,
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
                         tuple(nodes), tuple(edges), backend="networkx", truncated=True)

