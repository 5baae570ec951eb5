"""Cases as people and pages read them: a queue row, a timeline line, a case document (the
command line and the cases API render these)."""

from __future__ import annotations

from typing import Any


def case_row(c, age: int) -> dict[str, Any]:
    """A case as one queue row."""
    return {
        "case_id": c.case_id,
        "state": c.state,
        "priority": c.priority,
        "subject": f"{c.subject.get('bank', '')}/{c.subject['account']}",
        "alerts": len(c.alerts),
        "assignee": c.assignee,
        "age_days": age,
        "due": c.due,
        "version": c.version,
    }


def entry_text(e) -> str:
    """One timeline line of an entry."""
    p = e.payload
    match e.kind:
        case "opened" | "alert_joined":
            a = p["alert"]
            return f"{e.kind.replace('_', ' ')}: {a['alert_id']} ({a.get('tier') or 'no tier'})"
        case "assigned":
            return f"assigned to {p['assignee']}"
        case "noted":
            return f"note: {p['text']}"
        case "attached":
            return f"attached {p['name']} ({p['size']:,} bytes, sha256 {p['sha256'][:16]}...)"
        case "sar_proposed":
            cats = ", ".join(f"{a}/{b}" for a, b in p["categories"])
            return f"SAR proposed for {len(p['alert_ids'])} alert(s), categories {cats}"
        case "sar_approved":
            return f"SAR approved (proposal of entry {p['proposal_seq']})"
        case "sar_filed":
            return f"SAR filed: {p.get('file_name', '')} sha256 {p['xml_sha256'][:16]}..."
        case _:
            reason = p.get("reason")
            return e.kind.replace("_", " ") + (f": {reason}" if reason else "")


def case_document(case, actor) -> dict[str, Any]:
    """A case as JSON (``show --json`` and the cases API)."""
    p = case.proposal
    return {
        "case_id": case.case_id,
        "state": case.state,
        "priority": case.priority,
        "subject": case.subject,
        "assignee": case.assignee,
        "opened_at": case.opened_at,
        "due": case.due,
        "version": case.version,
        "alerts": list(case.alerts),
        "proposal": None
        if p is None
        else {
            "seq": p.seq,
            "by": p.actor,
            "at": p.at,
            "narrative": p.narrative,
            "categories": [list(c) for c in p.categories],
            "alert_ids": list(p.alert_ids),
        },  # fmt: skip
        "approved_by": case.approved_by,
        "filed": case.filed,
        "attachments": list(case.attachments),
        "timeline": [{**e.to_dict(), "kind": e.kind, "line": entry_text(e)} for e in case.entries],
        "allowed": case.allowed(actor),
    }
