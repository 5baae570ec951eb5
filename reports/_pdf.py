"""What every report PDF shares: embedded fonts, styles, tables and a byte-deterministic build.

:func:`build_pdf` lays out a story with reportlab in invariant mode, a fixed creation date that
ignores ``SOURCE_DATE_EPOCH``, no compression, TrueType fonts embedded (:mod:`reports._fonts`),
no randomness and no clock: the same story gives the same bytes on any machine.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable, Sequence
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.lib.utils import TimeStamp
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Paragraph, SimpleDocTemplate, Table, TableStyle

from reports._fonts import SANS, SANS_BOLD

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
        kwargs["initialFontName"] = SANS  # not Helvetica: a page names no font that is not embedded
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

_BASE = ParagraphStyle("base", fontName=SANS, fontSize=8.5, leading=11)
STYLES = {
    "title": ParagraphStyle("title", _BASE, fontName=SANS_BOLD, fontSize=15, leading=19,
                            spaceAfter=4),
    "h2": ParagraphStyle("h2", _BASE, fontName=SANS_BOLD, fontSize=11.5, leading=14,
                         spaceBefore=10, spaceAfter=4, textColor=colors.HexColor("#1b2631"),
                         keepWithNext=1),
    "body": _BASE,
    "note": ParagraphStyle("note", _BASE, fontSize=7.5, leading=9.5,
                           textColor=colors.HexColor("#444444")),
    "warn": ParagraphStyle("warn", _BASE, fontName=SANS_BOLD,
                           textColor=colors.HexColor("#a93226")),
    "cell": ParagraphStyle("cell", _BASE, fontSize=7.5, leading=9.5),
    "cell_small": ParagraphStyle("cell_small", _BASE, fontSize=7, leading=8.8),
    "cell_mono": ParagraphStyle("cell_mono", _BASE, fontName=SANS, fontSize=7.5, leading=9.5),
    "cell_head": ParagraphStyle("cell_head", _BASE, fontName=SANS_BOLD, fontSize=7.5,
                                leading=9.5),
    "caption": ParagraphStyle("caption", _BASE, fontName=SANS_BOLD, fontSize=7.5,
                              leading=9.5, spaceAfter=2, keepWithNext=1),
}

_CELLS = [  # what every table here shares
    ("GRID", (0, 0), (-1, -1), 0.4, colors.HexColor("#999999")),
    ("VALIGN", (0, 0), (-1, -1), "TOP"),
    ("FONTNAME", (0, 0), (-1, -1), SANS),  # the cell default is Helvetica: not embedded
    ("LEFTPADDING", (0, 0), (-1, -1), 3),
    ("RIGHTPADDING", (0, 0), (-1, -1), 3),
    ("TOPPADDING", (0, 0), (-1, -1), 2),
    ("BOTTOMPADDING", (0, 0), (-1, -1), 2),
]
_GRID = TableStyle([*_CELLS, ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e5e8e8"))])  # header row
_KEY_VALUE = TableStyle([*_CELLS, ("BACKGROUND", (0, 0), (0, -1), colors.HexColor("#f2f3f4"))])  # key column


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



def build_pdf(story: list, *, title: str, subject: str, keywords: Sequence[str], footer_left: str,
              footer_right: str, on_page: Callable[[Canvas, object], None] | None = None) -> bytes:
    """The story as PDF bytes: A4, the footer on every page (``footer_right`` + page number)."""

    def footer(canv: Canvas, doc) -> None:
        canv.saveState()
        canv.setFont(SANS, 7)
        canv.setFillColor(colors.HexColor("#555555"))
        canv.drawString(MARGIN, 9 * mm, footer_left)
        canv.drawRightString(PAGE_W - MARGIN, 9 * mm, f"{footer_right}  page {doc.page}")
        canv.restoreState()

    buf = io.BytesIO()
    doc = SimpleDocTemplate(
        buf, pagesize=A4, leftMargin=MARGIN, rightMargin=MARGIN, topMargin=MARGIN,
        bottomMargin=MARGIN + 4 * mm, title=title, author="auditflow", subject=subject,
        creator="auditflow.reports", keywords=list(keywords), invariant=1, pageCompression=0,
    )
    doc.build(story, onFirstPage=footer, onLaterPages=footer, canvasmaker=_FixedDateCanvas)
    return buf.getvalue()
