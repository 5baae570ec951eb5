"""One PDF audit report per alert, with a signed manifest of what it was made from.

:func:`render_alert_report` is deterministic: the same alert, trace, reason codes and
parameters give a byte-identical PDF (reportlab invariant mode, a fixed creation date that
ignores ``SOURCE_DATE_EPOCH``, no compression, no randomness, no clock). Money is printed with
:func:`auditflow.money.format_amount` exactly as it arrived, floats with ``repr`` (the shortest
text that reads back to the same value).

File names come from the alert id through :func:`report_file_stem` only: an id that is already a
plain, short name (``[A-Za-z0-9._-]``, starting with a letter or digit, at most
:data:`MAX_FILE_STEM` characters) is used as is; any other id (a ``/``, a control character, a
name longer than a file system allows...) gets its safe characters, cut short, then ``~`` and a
64-bit hash of the whole id, so two ids never share a name. The full id stays inside the report
and its manifest. :class:`ReportWriter` writes the reports of a run: one that fails is recorded as a
:class:`ReportFailure` (alert id and reason) and the others are still written.

>>> report_file_stem("alert-tx-4b1d0c9e7f2a3b65")
'alert-tx-4b1d0c9e7f2a3b65'
>>> report_file_stem("alert-01/0X")
'alert-01_0X~55d1233b25c6c73c'
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import reportlab
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.lib.utils import TimeStamp
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import KeepTogether, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from auditflow.canonical import canonical_sha256
from auditflow.money import CURRENCIES, Money, format_amount
from auditflow.records import Alert, EvidenceTrace, ReasonCode, ReportManifest, TraceEdge
from reports._charts import MAX_DRAWN_NODES, MAX_NODES_PER_COLUMN, shap_bar_chart, trace_subgraph
from reports.names import MAX_FILE_STEM, report_file_stem  # noqa: F401 - re-exported
from reports.manifest import SIGNATURE_ALGORITHM
from reports.signing import Signer

#: The PDF's CreationDate/ModDate: 2000-01-01T00:00:00Z, reportlab's own invariant date.
PDF_CREATION_EPOCH = 946684800
PDF_CREATION_DATE = "2000-01-01T00:00:00Z"

PAGE_W, PAGE_H = A4
MARGIN = 15 * mm
CONTENT_W = PAGE_W - 2 * MARGIN
SHORT_DIGEST = 12


class _FixedDateCanvas(Canvas):
    """A canvas whose document timestamp is fixed, whatever ``SOURCE_DATE_EPOCH`` says.

    reportlab's invariant mode reads ``SOURCE_DATE_EPOCH`` from the environment when set; an
    audit report must not change bytes with the environment, so the timestamp and the PDF /ID
    seed are reset here exactly as invariant mode would set them with no variable set.
    """

    def __init__(self, *args, **kwargs):
        kwargs["invariant"] = 1
        super().__init__(*args, **kwargs)
        ts = TimeStamp.__new__(TimeStamp)
        ts.t = float(PDF_CREATION_EPOCH)
        ts.lt = time.gmtime(PDF_CREATION_EPOCH)
        ts.YMDhms = tuple(ts.lt)[:6]
        ts.dhh = ts.dmm = 0
        ts.tzname = "UTC"
        doc = self._doc
        doc._timeStamp = ts
        sig = hashlib.md5(usedforsecurity=False)
        sig.update(b"a reportlab document")
        sig.update(ascii(ts.t).encode("ascii"))
        doc.signature = sig


# ----------------------------------------------------------------------------- styles

_BASE = ParagraphStyle("base", fontName="Helvetica", fontSize=8.5, leading=11)
STYLES = {
    "title": ParagraphStyle("title", _BASE, fontName="Helvetica-Bold", fontSize=15, leading=19,
                            spaceAfter=4),
    "h2": ParagraphStyle("h2", _BASE, fontName="Helvetica-Bold", fontSize=11.5, leading=14,
                         spaceBefore=10, spaceAfter=4, textColor=colors.HexColor("#1b2631"),
                         keepWithNext=1),
    "body": _BASE,
    "note": ParagraphStyle("note", _BASE, fontSize=7.5, leading=9.5,
                           textColor=colors.HexColor("#444444")),
    "warn": ParagraphStyle("warn", _BASE, fontName="Helvetica-Bold",
                           textColor=colors.HexColor("#a93226")),
    "cell": ParagraphStyle("cell", _BASE, fontSize=7.5, leading=9.5),
    "cell_small": ParagraphStyle("cell_small", _BASE, fontSize=7, leading=8.8),
    "cell_mono": ParagraphStyle("cell_mono", _BASE, fontName="Courier", fontSize=7.5, leading=9.5),
    "cell_head": ParagraphStyle("cell_head", _BASE, fontName="Helvetica-Bold", fontSize=7.5,
                                leading=9.5),
    "caption": ParagraphStyle("caption", _BASE, fontName="Helvetica-Bold", fontSize=7.5,
                              leading=9.5, spaceAfter=2, keepWithNext=1),
}

_GRID = TableStyle(
    [
        ("GRID", (0, 0), (-1, -1), 0.4, colors.HexColor("#999999")),
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e5e8e8")),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LEFTPADDING", (0, 0), (-1, -1), 3),
        ("RIGHTPADDING", (0, 0), (-1, -1), 3),
        ("TOPPADDING", (0, 0), (-1, -1), 2),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 2),
    ]
)

_KEY_VALUE = TableStyle(
    [
        ("GRID", (0, 0), (-1, -1), 0.4, colors.HexColor("#999999")),
        ("BACKGROUND", (0, 0), (0, -1), colors.HexColor("#f2f3f4")),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LEFTPADDING", (0, 0), (-1, -1), 3),
        ("RIGHTPADDING", (0, 0), (-1, -1), 3),
        ("TOPPADDING", (0, 0), (-1, -1), 2),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 2),
    ]
)


def _p(text: str, style: str = "cell") -> Paragraph:
    return Paragraph(escape(text), STYLES[style])


def _lines(lines: Sequence[str], style: str = "cell") -> Paragraph:
    return Paragraph("<br/>".join(escape(t) for t in lines), STYLES[style])


def _head(*names: str) -> list[Paragraph]:
    return [_p(n, "cell_head") for n in names]


def _key_value_table(rows: Sequence[tuple[str, str, str]]) -> Table:
    """Rows of (label, value, value style)."""
    data = [[_p(k, "cell_head"), _p(v, s)] for k, v, s in rows]
    t = Table(data, colWidths=[38 * mm, CONTENT_W - 38 * mm], hAlign="LEFT")
    t.setStyle(_KEY_VALUE)
    return t


def _grid_table(header: Sequence[str], rows: list[list[Paragraph]], widths: Sequence[float]) -> Table:
    t = Table([_head(*header), *rows], colWidths=list(widths), repeatRows=1, hAlign="LEFT")
    t.setStyle(_GRID)
    return t


# ----------------------------------------------------------------------------- text helpers


def money_text(m: Money) -> str:
    """``0.025852 Bitcoin (XBT)``: the exact amount, then the currency name and code."""
    return f"{format_amount(m)} {m.currency} ({CURRENCIES[m.currency][0]})"


def number_text(x: float) -> str:
    """``repr`` of the float: the shortest text that reads back to exactly this value."""
    return repr(float(x))


def _ts(dt) -> str:
    return dt.strftime("%Y-%m-%d %H:%M")


def _short(digest: str) -> str:
    return digest if len(digest) <= SHORT_DIGEST else digest[:SHORT_DIGEST] + "..."


def report_id_for(
    alert: Alert,
    trace: EvidenceTrace,
    reason_codes: Sequence[ReasonCode],
    *,
    input_sha256: str,
    code_version: str,
    seed: int,
    typologies: Sequence[tuple[str, str]],
    narrative: str | None,
) -> str:
    """A content address of everything the report shows: same inputs, same report id."""
    payload = {
        "alert": alert.to_dict(),
        "trace": trace.to_dict(),
        "reason_codes": [rc.to_dict() for rc in reason_codes],
        "input_sha256": input_sha256,
        "code_version": code_version,
        "seed": seed,
        "typologies": [[n, e] for n, e in typologies],
        "narrative": narrative,
    }
    return "report-" + canonical_sha256(payload)[:16]


# ----------------------------------------------------------------------------- sections


def _summary_section(alert: Alert) -> list:
    ev = alert.event
    verdict = "at or above" if alert.score >= alert.threshold else "BELOW"
    rows = [
        ("Alert id", alert.alert_id, "cell_mono"),
        ("Event id", ev.event_id, "cell_mono"),
        ("Time", _ts(ev.timestamp), "cell"),
        ("Sender", f"bank {ev.sender.bank} / account {ev.sender.account} ({ev.sender.node_id})", "cell"),
        ("Receiver", f"bank {ev.receiver.bank} / account {ev.receiver.account} "
                     f"({ev.receiver.node_id})", "cell"),
        ("Amount paid", money_text(ev.amount_paid), "cell"),
        ("Amount received", money_text(ev.amount_received), "cell"),
        ("Payment format", ev.payment_format, "cell"),
        ("Score / threshold", f"{number_text(alert.score)} / {number_text(alert.threshold)} "
                              f"(score {verdict} threshold)", "cell"),
        ("Model digest", f"{_short(alert.model_digest)} (full digest in the manifest section)", "cell"),
        ("Source offset", str(ev.source_offset), "cell"),
    ]
    return [Paragraph("Alert summary", STYLES["h2"]), _key_value_table(rows)]


def _reason_section(reason_codes: Sequence[ReasonCode]) -> list:
    out: list = [Paragraph("Reason codes", STYLES["h2"])]
    if not reason_codes:
        out.append(_p("No reason codes were supplied for this alert.", "body"))
        return out
    rows = [
        [_p(str(i)), _p(rc.feature), _p(rc.description), _p(number_text(rc.value)),
         _p(number_text(rc.contribution))]
        for i, rc in enumerate(reason_codes, start=1)
    ]
    w = [8 * mm, 34 * mm, None, 32 * mm, 34 * mm]
    w[2] = CONTENT_W - sum(x for x in w if x is not None)
    out.append(_grid_table(["#", "Feature", "Description", "Actual value", "SHAP contribution"], rows, w))
    out.append(Spacer(1, 6))
    out.append(KeepTogether([_p("SHAP contributions", "caption"),
                             shap_bar_chart(reason_codes, width=CONTENT_W)]))
    return out


def _typology_section(typologies: Sequence[tuple[str, str]]) -> list:
    out: list = [Paragraph("Typologies found", STYLES["h2"])]
    if not typologies:
        out.append(_p("No known laundering typology matched this alert's evidence.", "body"))
        return out
    rows = [[_p(name), _p(explanation)] for name, explanation in typologies]
    out.append(_grid_table(["Typology", "Explanation"], rows, [45 * mm, CONTENT_W - 45 * mm]))
    return out


def _edge_owner(edge: TraceEdge, depths: dict[str, int]) -> str:
    """The account whose hop-table row lists ``edge``: the end the trace reached through it."""
    ends = [n for n in (edge.dst, edge.src) if n in depths]
    if not ends:
        return edge.dst
    reached = [n for n in ends if depths[n] == edge.hop]
    if reached:
        return reached[0]
    return max(ends, key=lambda n: (depths[n], n == edge.dst))


def _counterparty(edge: TraceEdge, owner: str) -> str:
    if edge.src == edge.dst:
        return "self-transfer"
    return f"from {edge.src}" if edge.dst == owner else f"to {edge.dst}"


#: The hop table lists at most this many transfers (shallowest hops first); the complete trace
#: is written beside the PDF as ``<alert_id>.trace.json`` and hashed in the manifest.
MAX_TABLE_TRANSFERS = 300


def _hop_table(trace: EvidenceTrace) -> tuple[Table, bool]:
    """One row per transfer, grouped under the account it reached; groups shaded alternately."""
    depths = trace.depths()
    by_owner: dict[str, list[TraceEdge]] = {}
    for e in trace.edges:
        by_owner.setdefault(_edge_owner(e, depths), []).append(e)
    groups: list[tuple[str, str, list[str], list[TraceEdge]]] = []
    for node in sorted(trace.nodes, key=lambda n: (n.hop_depth, n.node_id)):
        upstream = sorted(node.upstream_ids) or ["(root)" if node.node_id == trace.root else "(none)"]
        groups.append((str(node.hop_depth), node.node_id, upstream, by_owner.pop(node.node_id, [])))
    for owner in sorted(by_owner):  # transfers whose accounts are missing from the node list
        groups.append(("?", owner, ["(not in trace nodes)"], by_owner[owner]))

    s = "cell_small"
    rows: list[list[Paragraph]] = []
    shading: list[tuple] = []
    capped = False
    for g, (hop, account, upstream, edges) in enumerate(groups):
        if len(rows) >= MAX_TABLE_TRANSFERS:
            capped = True
            break
        first = len(rows) + 1  # +1 for the header row
        edges = sorted(edges, key=lambda e: (e.timestamp, e.event_id))
        for i, e in enumerate(edges or [None]):
            if i == 0:
                node_cells = [_p(hop, s), _p(account, s), _lines(upstream, s)]
            else:
                node_cells = [_p("", s) for _ in range(3)]
            if e is None:
                edge_cells = [_p("(none)", s)] + [_p("", s) for _ in range(3)]
            else:
                edge_cells = [_p(e.event_id, s), _p(money_text(e.amount_paid), s),
                              _p(_ts(e.timestamp), s), _p(_counterparty(e, account), s)]
            rows.append(node_cells + edge_cells)
        if g % 2:
            shading.append(("BACKGROUND", (0, first), (-1, len(rows)), colors.HexColor("#f4f6f7")))
    w = [9 * mm, 26 * mm, 26 * mm, 28 * mm, 0, 24 * mm, 29 * mm]
    w[4] = CONTENT_W - sum(w)
    t = _grid_table(["Hop", "Account", "Upstream accounts", "Transfer event id", "Amount paid",
                     "Time", "Counterparty"], rows, w)
    t.setStyle(TableStyle(shading))
    return t, capped


def _trace_section(trace: EvidenceTrace) -> list:
    if trace.window_start is None and trace.window_end is None:
        window = "no time window"
    else:
        window = (f"window {_ts(trace.window_start) if trace.window_start else 'unbounded'} to "
                  f"{_ts(trace.window_end) if trace.window_end else 'unbounded'}")
    params = [
        ("Trace id", trace.trace_id, "cell_mono"),
        ("Root account", trace.root, "cell"),
        ("Parameters", f"direction {trace.direction}, max hops {trace.max_hops}, "
                       f"fan-out cap {trace.fanout_cap}, {window}", "cell"),
        ("Backend", trace.backend or "(not recorded)", "cell"),
        ("Size", f"{len(trace.nodes)} accounts, {len(trace.edges)} transfers", "cell"),
    ]
    out: list = [Paragraph("Evidence trace", STYLES["h2"]), _key_value_table(params)]
    if trace.truncated:
        out.append(Spacer(1, 3))
        out.append(_p("The fan-out cap dropped edges: this trace does not show every transfer "
                      "of the accounts it reached.", "warn"))

    drawing, info = trace_subgraph(trace, width=CONTENT_W)
    legend = ("Columns are hop depths, accounts sorted by id; the root is highlighted; arrows point "
              "from payer to payee; xN marks N transfers between the same pair; a loop marks a "
              "self-transfer.")
    if info.capped:
        caption = (
            f"Drawing capped: showing {info.drawn_nodes} of {info.total_nodes} accounts and "
            f"{info.drawn_edges} of {info.total_edges} transfers (at most {MAX_DRAWN_NODES} accounts, "
            f"{MAX_NODES_PER_COLUMN} per hop, shallowest first, by account id). "
            "The hop table and the trace file list the accounts and transfers."
        )
    else:
        caption = f"All {info.total_nodes} accounts and {info.total_edges} transfers drawn."
    out.append(Spacer(1, 6))
    out.append(KeepTogether([_p("Trace subgraph", "caption"), drawing,
                             _p(caption, "warn" if info.capped else "note"), _p(legend, "note")]))

    out.append(Spacer(1, 6))
    table, capped = _hop_table(trace)
    if capped:
        out.append(_p(f"Hop table (shallowest hops first, about {MAX_TABLE_TRANSFERS} rows; the complete "
                      f"trace of {len(trace.nodes)} accounts and {len(trace.edges)} transfers is in the "
                      "trace file listed in the manifest)", "caption"))
    else:
        out.append(_p("Hop table (every account and transfer in the trace)", "caption"))
    out.append(table)
    return out


def _narrative_section(narrative: str | None) -> list:
    if narrative is None:
        return []
    out: list = [Paragraph("Narrative", STYLES["h2"])]
    for para in narrative.strip().split("\n\n"):
        out.append(Paragraph(escape(para.strip()).replace("\n", "<br/>"), STYLES["body"]))
        out.append(Spacer(1, 3))
    return out


def _manifest_section(manifest: ReportManifest, manifest_name: str) -> list:
    rows = [
        ("Report id", manifest.report_id, "cell_mono"),
        ("Input SHA-256", manifest.input_sha256, "cell_mono"),
        ("Model digest", manifest.model_digest, "cell_mono"),
        ("Trace id", manifest.trace_id, "cell_mono"),
        ("Code version", manifest.code_version, "cell_mono"),
        ("Seed", str(manifest.seed), "cell_mono"),
        *((_EXTRA_LABELS.get(k, k), v, "cell_mono") for k, v in manifest.extra),
    ]
    return [KeepTogether([
        Paragraph("Manifest", STYLES["h2"]),
        _key_value_table(rows),
        Spacer(1, 3),
        _p(f"This PDF's SHA-256 and the {SIGNATURE_ALGORITHM} signature over the manifest are "
           f"recorded in {manifest_name} (a file cannot contain its own hash).", "note"),
    ])]


_EXTRA_LABELS = {
    "renderer": "Renderer",
    "pdf_creation_date": "PDF creation date",
    "signature_algorithm": "Signature algorithm",
}


# ----------------------------------------------------------------------------- entry point


def render_alert_pdf(
    alert: Alert,
    trace: EvidenceTrace,
    reason_codes: Sequence[ReasonCode],
    manifest: ReportManifest,
    *,
    typologies: Sequence[tuple[str, str]] = (),
    narrative: str | None = None,
) -> bytes:
    """The report PDF as bytes (pure: no files written)."""
    manifest_name = f"{report_file_stem(alert.alert_id)}.manifest.json"
    story: list = [
        Paragraph(escape(f"AML alert report: {alert.alert_id}"), STYLES["title"]),
        _p(f"Report {manifest.report_id}. Every value below is printed exactly as recorded: "
           "amounts in their original currency and precision, model numbers as exact decimals.",
           "note"),
    ]
    story += _summary_section(alert)
    story += _reason_section(reason_codes)
    story += _typology_section(typologies)
    story += _trace_section(trace)
    story += _narrative_section(narrative)
    story += _manifest_section(manifest, manifest_name)

    def footer(canv: Canvas, doc) -> None:
        canv.saveState()
        canv.setFont("Helvetica", 7)
        canv.setFillColor(colors.HexColor("#555555"))
        canv.drawString(MARGIN, 9 * mm, f"auditflow alert report  {alert.alert_id}")
        canv.drawRightString(PAGE_W - MARGIN, 9 * mm, f"{manifest.report_id}  page {doc.page}")
        canv.restoreState()

    buf = io.BytesIO()
    doc = SimpleDocTemplate(
        buf,
        pagesize=A4,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=MARGIN + 4 * mm,
        title=f"AML alert report {alert.alert_id}",
        author="auditflow",
        subject=f"Alert {alert.alert_id}, trace {trace.trace_id}",
        creator="auditflow.reports",
        keywords=[alert.alert_id, manifest.report_id, trace.trace_id],
        invariant=1,
        pageCompression=0,
    )
    doc.build(story, onFirstPage=footer, onLaterPages=footer, canvasmaker=_FixedDateCanvas)
    return buf.getvalue()


def prepare_alert_report(
    alert: Alert,
    trace: EvidenceTrace,
    reason_codes: Sequence[ReasonCode],
    *,
    input_sha256: str,
    code_version: str,
    seed: int,
    typologies: Sequence[tuple[str, str]] = (),
    narrative: str | None = None,
) -> tuple[str, list[tuple[str, bytes]], ReportManifest]:
    """The report's file stem, its files as (suffix, bytes) and its manifest before it is placed
    and signed (pure: nothing written). ``ValueError`` when the trace is not rooted at the alert's
    sender or receiver."""
    parties = {alert.event.sender.node_id, alert.event.receiver.node_id}
    if trace.root not in parties:
        raise ValueError(f"trace {trace.trace_id} is rooted at {trace.root!r}, not at the alert's "
                         f"sender or receiver {sorted(parties)}")
    typologies = tuple((str(n), str(e)) for n, e in typologies)
    report_id = report_id_for(alert, trace, reason_codes, input_sha256=input_sha256,
                              code_version=code_version, seed=seed, typologies=typologies,
                              narrative=narrative)
    unsigned = ReportManifest(
        report_id=report_id,
        alert_id=alert.alert_id,
        files=(),
        input_sha256=input_sha256,
        model_digest=alert.model_digest,
        trace_id=trace.trace_id,
        code_version=code_version,
        seed=seed,
        extra=(
            ("renderer", f"reportlab {reportlab.Version}"),
            ("pdf_creation_date", PDF_CREATION_DATE),
            ("signature_algorithm", SIGNATURE_ALGORITHM),
        ),
    )
    pdf = render_alert_pdf(alert, trace, reason_codes, unsigned, typologies=typologies,
                           narrative=narrative)
    trace_bytes = (trace.to_json() + "\n").encode()
    return report_file_stem(alert.alert_id), [(".pdf", pdf), (".trace.json", trace_bytes)], unsigned


def render_alert_report(
    alert: Alert,
    trace: EvidenceTrace,
    reason_codes: list[ReasonCode],
    *,
    out_dir: str | Path,
    input_sha256: str,
    code_version: str,
    seed: int,
    typologies: Sequence[tuple[str, str]] = (),
    narrative: str | None = None,
    signer: Signer,
) -> ReportManifest:
    """Publish the alert's report in ``out_dir`` (a :class:`~reports.store.ReportStore`):
    ``<stem>.pdf``, the complete trace as ``<stem>.trace.json`` and the signed
    ``<stem>.manifest.json`` that hashes both, appended to ``out_dir/audit_log.jsonl``. Identical
    content already there is left as is; different content becomes ``<stem>@2``...

    Raises ``ValueError`` when the trace is not rooted at the alert's sender or receiver, or
    ``signer`` is no :class:`~reports.signing.Signer`.
    """
    from reports.store import ReportStore

    if not isinstance(signer, Signer):
        raise ValueError(f"signer must be a reports.signing.Signer, got {type(signer).__name__}")
    stem, contents, unsigned = prepare_alert_report(
        alert, trace, reason_codes, input_sha256=input_sha256, code_version=code_version, seed=seed,
        typologies=typologies, narrative=narrative)
    return ReportStore(out_dir, signer).publish(stem, contents, unsigned).manifest


# ----------------------------------------------------------------------------- a run's reports


@dataclass(frozen=True, slots=True)
class ReportFailure:
    """A report that could not be written: which alert, and why (``"ExceptionType: message"``)."""

    alert_id: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"alert_id": self.alert_id, "reason": self.reason}


def _unicode_text(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (lone surrogates) written as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_MAX_REASON = 500


class ReportWriter:
    """Writes the per-alert reports of one run into a :class:`~reports.store.ReportStore`.

    Opening repairs what a crashed run left (:attr:`repaired`). :meth:`write` never lets one
    alert stop the run: a report that raises is recorded as a :class:`ReportFailure` (audit log
    kind ``report_failed``, with the alert id and the reason) and the next alert is written as
    usual, so ``attempted == len(written) + len(failed)``. :meth:`finish` writes the signed tree
    head at the end of the run.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        input_sha256: str,
        code_version: str,
        seed: int,
        signer: Signer,
    ) -> None:
        from reports.store import ReportStore

        self.out_dir = Path(out_dir)
        self.store = ReportStore(self.out_dir, signer)
        self.repaired = self.store.repair()
        self._args = dict(input_sha256=input_sha256, code_version=code_version, seed=seed)
        self.written: list[ReportManifest] = []
        self.unchanged: list[ReportManifest] = []  # identical reports already there (a rerun)
        self.failed: list[ReportFailure] = []

    @property
    def attempted(self) -> int:
        return len(self.written) + len(self.unchanged) + len(self.failed)

    def write(
        self,
        alert: Alert,
        trace: EvidenceTrace,
        reason_codes: list[ReasonCode],
        *,
        typologies: Sequence[tuple[str, str]] = (),
        narrative: str | None = None,
    ) -> ReportManifest | ReportFailure:
        """The alert's report (see :func:`render_alert_report`), or why it could not be written."""
        try:
            stem, contents, unsigned = prepare_alert_report(
                alert, trace, reason_codes, typologies=typologies, narrative=narrative, **self._args)
            published = self.store.publish(stem, contents, unsigned)
        except Exception as e:  # noqa: BLE001 - any failure of one report is recorded, not raised
            failure = ReportFailure(alert.alert_id, _unicode_text(f"{type(e).__name__}: {e}"[:_MAX_REASON]))
            self.failed.append(failure)
            # canonical JSON carries valid Unicode only: a lone surrogate as \\udXXX
            self.store.record("report_failed", {k: _unicode_text(v) for k, v in failure.to_dict().items()})
            return failure
        (self.unchanged if published.status == "unchanged" else self.written).append(published.manifest)
        return published.manifest

    def finish(self):
        """Sign and write the tree head (``tree_head.json``); returns it."""
        return self.store.finish()
