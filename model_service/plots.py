"""The precision-recall curves of an evaluation as a PNG (Pillow: reportlab renders PNGs only with
a cairo backend we do not install). Same curves, same bytes.

>>> import numpy as np
>>> png = pr_curve_png({"graph": (np.array([1.0, 0.5]), np.array([0.0, 1.0]))})
>>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
True
"""

from __future__ import annotations

import io
from collections.abc import Mapping

import numpy as np
from PIL import Image, ImageDraw, ImageFont

COLOURS = {"baseline": (150, 150, 150), "stream": (31, 119, 180), "graph": (214, 39, 40)}
_W, _H, _M = 640, 480, 60


def pr_curve_png(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], title: str = "precision-recall (test split)",
                 labels: Mapping[str, str] | None = None) -> bytes:
    """``curves``: name -> (precision, recall) arrays (as from sklearn's precision_recall_curve)."""
    img = Image.new("RGB", (_W, _H), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.load_default()
    x0, y0, x1, y1 = _M, _H - _M, _W - 20, 30

    def xy(r: float, p: float) -> tuple[float, float]:
        return x0 + r * (x1 - x0), y0 - p * (y0 - y1)

    d.rectangle([x0, y1, x1, y0], outline="black")
    for k in range(11):
        v = k / 10
        gx, gy = xy(v, v)
        d.line([gx, y0, gx, y0 + 4], fill="black")
        d.line([x0 - 4, gy, x0, gy], fill="black")
        d.text((gx - 8, y0 + 8), f"{v:.1f}", fill="black", font=font)
        d.text((x0 - 30, gy - 6), f"{v:.1f}", fill="black", font=font)
    d.text(((x0 + x1) / 2 - 20, _H - 22), "recall", fill="black", font=font)
    d.text((6, y1 - 20), "precision", fill="black", font=font)
    d.text((x0, 8), title, fill="black", font=font)
    for i, (name, (prec, rec)) in enumerate(curves.items()):
        colour = COLOURS.get(name, (44, 160, 44))
        pts = [xy(float(r), float(p)) for p, r in zip(prec, rec)]
        if len(pts) > 1:
            d.line(pts, fill=colour, width=2)
        d.line([x1 - 170, y1 + 16 + 16 * i, x1 - 150, y1 + 16 + 16 * i], fill=colour, width=3)
        d.text((x1 - 145, y1 + 10 + 16 * i), (labels or {}).get(name, name), fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()
