"""The laundering typologies, named once: the evidence graph detects them, the answer key of the
public AMLworld data labels attempts with them, the reports print them.

Names are lower-case (``fan-out``); the AMLworld ``_Patterns.txt`` files spell the same typology
in capitals (``FAN-OUT``), in this order.

>>> TYPOLOGIES[:3]
('fan-out', 'fan-in', 'gather-scatter')
>>> amlworld_label("scatter-gather"), from_amlworld_label("SCATTER-GATHER")
('SCATTER-GATHER', 'scatter-gather')
"""

from __future__ import annotations

from auditflow.errors import FieldError

TYPOLOGIES: tuple[str, ...] = (
    "fan-out",
    "fan-in",
    "gather-scatter",
    "scatter-gather",
    "cycle",
    "random",
    "bipartite",
    "stack",
)

#: The same typologies as the AMLworld answer key spells them, in the same order.
AMLWORLD_LABELS: tuple[str, ...] = tuple(t.upper() for t in TYPOLOGIES)


def amlworld_label(typology: str) -> str:
    if typology not in TYPOLOGIES:
        raise FieldError("typology", typology, f"unknown typology (expected one of {', '.join(TYPOLOGIES)})")
    return typology.upper()


def from_amlworld_label(label: str) -> str:
    if label not in AMLWORLD_LABELS:
        raise FieldError("typology", label, f"unknown AMLworld typology (expected one of {', '.join(AMLWORLD_LABELS)})")
    return label.lower()
