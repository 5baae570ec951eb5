"""The fonts every report PDF embeds: Bitstream Vera, shipped inside reportlab.

TrueType fonts are embedded (subset) in the PDF, so a report renders the same on any reader and
machine; the standard 14 PDF fonts (Helvetica...) are not embedded and are left to the reader.
Registered once per process, by name.
"""

from __future__ import annotations

from pathlib import Path

import reportlab
from reportlab.lib.fonts import addMapping
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont

SANS = "AuditflowSans"
SANS_BOLD = "AuditflowSans-Bold"
SANS_ITALIC = "AuditflowSans-Italic"
SANS_BOLD_ITALIC = "AuditflowSans-BoldItalic"
_FILES = {SANS: "Vera.ttf", SANS_BOLD: "VeraBd.ttf", SANS_ITALIC: "VeraIt.ttf", SANS_BOLD_ITALIC: "VeraBI.ttf"}
FONT_DIR = Path(reportlab.__file__).resolve().parent / "fonts"


def register_fonts() -> None:
    if SANS in pdfmetrics.getRegisteredFontNames():
        return
    for name, file in _FILES.items():
        pdfmetrics.registerFont(TTFont(name, str(FONT_DIR / file)))
    addMapping(SANS, 0, 0, SANS)
    addMapping(SANS, 1, 0, SANS_BOLD)
    addMapping(SANS, 0, 1, SANS_ITALIC)
    addMapping(SANS, 1, 1, SANS_BOLD_ITALIC)


register_fonts()
