"""Deterministic vector drawings for alert reports: the SHAP bar chart and the trace subgraph.

Both are pure functions of their inputs returning a :class:`reportlab.graphics.shapes.Drawing`;
nothing depends on dict order, randomness or the clock, so the same inputs draw the same bytes.

>>> from auditflow.records import ReasonCode
>>> d = shap_bar_chart([ReasonCode("amount_usd", 13359.92, 1.25, "amount paid, in USD")], width=400)
>>> d.width, d.height > 0
(400, True)
>>> shorten_label("0123/8000EBD30ABCDEF", 12)
'0123/..BCDEF'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reportlab.graphics.shapes import Drawing, Line, PolyLine, Polygon, Rect, String
from reportlab.lib import colors
from reportlab.pdfbase.pdfmetrics import stringWidth

from auditflow.records import EvidenceTrace, ReasonCode
from reports._fonts import SANS, SANS_BOLD

FONT = SANS
FONT_BOLD = SANS_BOLD

RISK_UP = colors.HexColor("#c0392b")  # contribution pushes the score towards an alert
RISK_DOWN = colors.HexColor("#2e6da4")  # contribution pushes the score away from an alert
ROOT_FILL = colors.HexColor("#f5b041")
NODE_FILL = colors.HexColor("#d6eaf8")
EDGE_COLOR = colors.HexColor("#555555")

#: Drawn-subgraph limits; the hop table always lists every node and edge.
MAX_DRAWN_NODES = 60
MAX_NODES_PER_COLUMN = 20


def shorten_label(text: str, max_chars: int) -> str:
    """Keep the head and tail of ``text`` around ``..`` so it fits in ``max_chars`` characters."""
    if max_chars < 5:
        raise ValueError(f"max_chars must be at least 5, got {max_chars}")
    if len(text) <= max_chars:
        return text
    keep = max_chars - 2
    head = (keep + 1) // 2
    tail = keep - head
    return f"{text[:head]}..{text[-tail:]}" if tail else f"{text[:head]}.."


def _fit(text: str, font: str, size: float, width: float) -> str:
    """Shorten ``text`` until it is at most ``width`` points wide."""
    if stringWidth(text, font, size) <= width:
        return text
    n = len(text)
    while n > 5 and stringWidth(shorten_label(text, n), font, size) > width:
        n -= 1
    return shorten_label(text, max(n, 5))


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def shap_bar_chart(reason_codes: Sequence[ReasonCode], *, width: float) -> Drawing:
    """Horizontal bars of each reason code's SHAP contribution, in the given order, top down."""
    bar_h, gap, label_w, value_w, font_size = 11.0, 4.0, 150.0, 48.0, 7.0
    n = len(reason_codes)
    top_pad, bottom_pad = 6.0, 30.0
    height = top_pad + n * (bar_h + gap) + bottom_pad
    d = Drawing(width, height, initialFontName=FONT, initialFontSize=7)
    if n == 0:
        d.add(String(0, height / 2, "No reason codes.", fontName=FONT, fontSize=font_size))
        return d

    contribs = [_finite(rc.contribution) for rc in reason_codes]
    neg = max(0.0, -min(contribs))
    pos = max(0.0, max(contribs))
    total = (neg + pos) or 1.0
    x0, x1 = label_w + value_w, width - value_w
    scale = (x1 - x0) / total
    zero_x = x0 + neg * scale if (neg + pos) else (x0 + x1) / 2

    y_axis = bottom_pad - 6
    for i, (rc, c) in enumerate(zip(reason_codes, contribs, strict=True)):
        y = height - top_pad - (i + 1) * (bar_h + gap) + gap / 2
        d.add(
            String(label_w - 4, y + 3, _fit(rc.feature, FONT, font_size, label_w - 4),
                   fontName=FONT, fontSize=font_size, textAnchor="end")
        )
        bar_w = c * scale
        color = RISK_UP if c >= 0 else RISK_DOWN
        d.add(Rect(min(zero_x, zero_x + bar_w), y, abs(bar_w), bar_h, fillColor=color,
                   strokeColor=None))
        text = f"{rc.contribution:+.4f}" if math.isfinite(rc.contribution) else repr(rc.contribution)
        if c >= 0:
            d.add(String(zero_x + bar_w + 3, y + 3, text, fontName=FONT, fontSize=font_size - 0.5))
        else:
            d.add(String(zero_x + bar_w - 3, y + 3, text, fontName=FONT, fontSize=font_size - 0.5,
                         textAnchor="end"))

    d.add(Line(zero_x, y_axis, zero_x, height - top_pad, strokeColor=colors.black, strokeWidth=0.6))
    d.add(Line(x0, y_axis, x1, y_axis, strokeColor=colors.black, strokeWidth=0.6))
    for x, label in ((x0, f"{-neg:+.3f}" if neg else None), (zero_x, "0"),
                     (x1, f"{pos:+.3f}" if pos else None)):
        if label is None:
            continue
        d.add(Line(x, y_axis, x, y_axis - 3, strokeColor=colors.black, strokeWidth=0.6))
        d.add(String(x, y_axis - 10, label, fontName=FONT, fontSize=6, textAnchor="middle"))
    d.add(String(0, 2, "SHAP contribution (log-odds): red raises the alert score, blue lowers it; "
                 "bar labels are rounded, exact values are in the table above.",
                 fontName=FONT, fontSize=6, fillColor=colors.HexColor("#444444")))
    return d


@dataclass(frozen=True, slots=True)
class SubgraphInfo:
    """What the drawn subgraph shows of the whole trace."""

    drawn_nodes: int
    total_nodes: int
    drawn_edges: int
    total_edges: int

    @property
    def capped(self) -> bool:
        return self.drawn_nodes < self.total_nodes or self.drawn_edges < self.total_edges


def select_drawn_nodes(
    trace: EvidenceTrace, *, max_nodes: int = MAX_DRAWN_NODES, max_per_column: int = MAX_NODES_PER_COLUMN
) -> list[tuple[str, int]]:
    """The (node id, hop depth) pairs to draw: shallowest first, by node id, within the caps.

    The root is always drawn, even when the trace's node list omits it.
    """
    depths = trace.depths()
    depths.setdefault(trace.root, 0)
    ordered = sorted(depths.items(), key=lambda kv: (kv[0] != trace.root, kv[1], kv[0]))
    per_col: dict[int, int] = {}
    chosen: list[tuple[str, int]] = []
    for node_id, depth in ordered:
        if len(chosen) >= max_nodes:
            break
        if per_col.get(depth, 0) >= max_per_column:
            continue
        per_col[depth] = per_col.get(depth, 0) + 1
        chosen.append((node_id, depth))
    return sorted(chosen, key=lambda kv: (kv[1], kv[0]))


def trace_subgraph(
    trace: EvidenceTrace,
    *,
    width: float,
    max_nodes: int = MAX_DRAWN_NODES,
    max_per_column: int = MAX_NODES_PER_COLUMN,
) -> tuple[Drawing, SubgraphInfo]:
    """Accounts in columns by hop depth (sorted by id), one arrow per sender -> receiver pair."""
    chosen = select_drawn_nodes(trace, max_nodes=max_nodes, max_per_column=max_per_column)
    columns = sorted({depth for _, depth in chosen})
    col_index = {depth: i for i, depth in enumerate(columns)}
    rows: dict[int, int] = {}
    slot: dict[str, tuple[int, int]] = {}
    for node_id, depth in chosen:
        slot[node_id] = (col_index[depth], rows.get(depth, 0))
        rows[depth] = rows.get(depth, 0) + 1

    n_cols = max(len(columns), 1)
    n_rows = max(rows.values(), default=1)
    row_h, header_h, pad = 18.0, 16.0, 4.0
    box_h, font_size = 12.0, 6.5
    col_w = width / n_cols
    box_w = min(120.0, col_w - 26.0)
    height = header_h + n_rows * row_h + pad
    d = Drawing(width, height, initialFontName=FONT, initialFontSize=7)

    def box_xy(node_id: str) -> tuple[float, float]:
        c, r = slot[node_id]
        x = c * col_w + (col_w - box_w) / 2
        y = height - header_h - (r + 1) * row_h + (row_h - box_h) / 2
        return x, y

    for depth in columns:
        label = "hop 0 (root)" if depth == 0 else f"hop {depth}"
        d.add(String(col_index[depth] * col_w + col_w / 2, height - 10, label, fontName=FONT_BOLD,
                     fontSize=7, textAnchor="middle"))

    # One arrow per (sender, receiver) pair, with the number of transfers when more than one.
    pairs: dict[tuple[str, str], int] = {}
    for e in trace.edges:
        pairs[(e.src, e.dst)] = pairs.get((e.src, e.dst), 0) + 1
    drawn_edges = 0
    for (src, dst), count in sorted(pairs.items()):
        if src not in slot or dst not in slot:
            continue
        drawn_edges += count
        _draw_arrow(d, box_xy(src), box_xy(dst), slot[src][0], slot[dst][0], box_w, box_h, count,
                    self_loop=src == dst)

    for node_id, depth in chosen:
        x, y = box_xy(node_id)
        is_root = node_id == trace.root
        d.add(Rect(x, y, box_w, box_h, rx=2, ry=2, fillColor=ROOT_FILL if is_root else NODE_FILL,
                   strokeColor=colors.black if is_root else EDGE_COLOR,
                   strokeWidth=1.2 if is_root else 0.5))
        font = FONT_BOLD if is_root else FONT
        d.add(String(x + box_w / 2, y + 3.5, _fit(node_id, font, font_size, box_w - 4), fontName=font,
                     fontSize=font_size, textAnchor="middle"))

    info = SubgraphInfo(len(chosen), len(set(trace.depths()) | {trace.root}), drawn_edges,
                        len(trace.edges))
    return d, info


def _arrow_head(d: Drawing, tip: tuple[float, float], frm: tuple[float, float]) -> None:
    (tx, ty), (fx, fy) = tip, frm
    length = math.hypot(tx - fx, ty - fy) or 1.0
    ux, uy = (tx - fx) / length, (ty - fy) / length
    size, half = 5.0, 2.2
    bx, by = tx - ux * size, ty - uy * size
    d.add(Polygon([tx, ty, bx - uy * half, by + ux * half, bx + uy * half, by - ux * half],
                  fillColor=EDGE_COLOR, strokeColor=None))


def _draw_arrow(
    d: Drawing,
    src_xy: tuple[float, float],
    dst_xy: tuple[float, float],
    src_col: int,
    dst_col: int,
    box_w: float,
    box_h: float,
    count: int,
    *,
    self_loop: bool,
) -> None:
    (sx, sy), (tx, ty) = src_xy, dst_xy
    mid_s, mid_t = sy + box_h / 2, ty + box_h / 2
    label_at: tuple[float, float]
    if self_loop:  # a small loop over the box's top-right corner, clear of the mid-height arrows
        right, top = sx + box_w, sy + box_h
        pts = [right - 3, top, right - 3, top + 3, right + 5, top + 3, right + 5, top - 3, right + 1, top - 3]
        d.add(PolyLine(pts, strokeColor=EDGE_COLOR, strokeWidth=0.6))
        _arrow_head(d, (right, top - 3), (right + 5, top - 3))
        label_at = (right + 7, top - 1)
    elif src_col == dst_col:
        right = sx + box_w
        pts = [right, mid_s, right + 9, mid_s, right + 9, mid_t, right + 1, mid_t]
        d.add(PolyLine(pts, strokeColor=EDGE_COLOR, strokeWidth=0.6))
        _arrow_head(d, (right, mid_t), (right + 9, mid_t))
        label_at = (right + 11, (mid_s + mid_t) / 2)
    else:
        if src_col < dst_col:
            start, end = (sx + box_w, mid_s), (tx, mid_t)
        else:
            start, end = (sx, mid_s), (tx + box_w, mid_t)
        d.add(Line(start[0], start[1], end[0], end[1], strokeColor=EDGE_COLOR, strokeWidth=0.6))
        _arrow_head(d, end, start)
        label_at = (start[0] + (end[0] - start[0]) * 0.3, start[1] + (end[1] - start[1]) * 0.3 + 1.5)
    if count > 1:
        d.add(String(label_at[0], label_at[1], f"x{count}", fontName=FONT, fontSize=5.5,
                     fillColor=EDGE_COLOR))
