"""SVG charts drawn in Python, inline in the page (no script, nothing fetched): bars, strips of
segments, a log-log roofline and series plots. Every label goes through markup.el, so it is escaped."""
from __future__ import annotations

import math
from typing import Sequence

from kernelscope.render.html.markup import Markup, el

PALETTE = ("#2f6fde", "#d9480f", "#2b8a3e", "#ae3ec9", "#f59f00", "#0b7285", "#c2255c", "#5c940d", "#1864ab",
           "#e8590c", "#862e9c", "#087f5b")
IDLE = "#e4e7ec"
FONT_PX = 11  # svg text (markup.CSS)
CHAR_EM = 0.68  # an upper bound of a character's width in system-ui, in em, for sizing label space
MAX_LABEL_PX = 300  # a strip's label column at most; a longer label is cut, its whole text in a tooltip


def text_px(text: str, size: int = FONT_PX) -> float:
    """The width ``text`` takes at most in pixels: label space is made this wide, so no label is clipped."""
    return len(text) * size * CHAR_EM


def fit_label(text: str, width: float) -> str:
    """``text`` cut (ending in …) to fit ``width`` px."""
    room = int(width / (FONT_PX * CHAR_EM) + 1e-6)  # text_px's own width holds its text whole
    return text if len(text) <= room else text[: max(1, room - 1)] + "…"


def svg(width: int, height: int, *children, label: str = "") -> Markup:
    return el("svg", *children, xmlns="http://www.w3.org/2000/svg", viewBox=f"0 0 {width} {height}",
              width=width, height=height, role="img", aria_label=label or None)


def pct_bar(pct: float | None, width: int = 120, color: str = PALETTE[0]) -> Markup:
    """A small inline bar for a percentage (0-100, clipped); nothing for None."""
    if pct is None:
        return Markup("")
    w = max(0.0, min(100.0, pct)) / 100.0 * width
    return el("svg", el("rect", x=0, y=2, width=width, height=10, fill=IDLE),
              el("rect", x=0, y=2, width=f"{w:.1f}", height=10, fill=color),
              xmlns="http://www.w3.org/2000/svg", width=width, height=14, viewBox=f"0 0 {width} 14",
              style="display:inline-block;vertical-align:middle;margin:0 6px 0 0;max-width:none")


def runs(cells: Sequence[object]) -> list[tuple[int, int, object]]:
    """Run-length encoding: (first column, length, value) for each stretch of equal cells."""
    out: list[tuple[int, int, object]] = []
    for i, v in enumerate(cells):
        if out and out[-1][2] == v:
            first, n, _ = out[-1]
            out[-1] = (first, n + 1, v)
        else:
            out.append((i, 1, v))
    return out


def strips(rows: Sequence[tuple[str, Sequence[object], str]], colors: dict[object, str], label_w: int = 90,
           note_w: int = 190, col_w: float = 1.5, row_h: int = 14, label: str = "") -> Markup:
    """One row per (label, cells, note): each cell a column, equal neighbouring cells one rect; a cell whose
    value is not in ``colors`` is drawn idle. Bounded by rows x columns, never by the number of events.
    The label and note columns are at least ``label_w`` and ``note_w`` px and as wide as their longest text
    (a label up to MAX_LABEL_PX, longer ones cut with the whole text as a tooltip)."""
    cols = max((len(c) for _, c, _ in rows), default=0)
    label_w = math.ceil(min(MAX_LABEL_PX, max([label_w] + [text_px(n) + 10 for n, _, _ in rows])))
    note_w = math.ceil(max([note_w] + [text_px(n) + 10 for _, _, n in rows]))
    width = int(label_w + cols * col_w + note_w)
    parts = []
    for r, (name, cells, note) in enumerate(rows):
        y = r * row_h
        shown = fit_label(name, label_w - 10)
        parts.append(el("text", el("title", name) if shown != name else None, shown, x=label_w - 6, y=y + row_h - 3,
                        text_anchor="end"))
        for first, n, v in runs(cells):
            parts.append(el("rect", x=f"{label_w + first * col_w:.1f}", y=y + 1, width=f"{n * col_w:.1f}",
                            height=row_h - 2, fill=colors.get(v, IDLE)))
        parts.append(el("text", note, x=int(label_w + cols * col_w + 6), y=y + row_h - 3))
    return svg(width, max(row_h, len(rows) * row_h), *parts, label=label)


def legend(items: Sequence[tuple[str, str]]) -> Markup:
    return el("p", *(el("span", el("span", "■ ", style=f"color:{c}"), name, " ", style="margin-right:10px")
                     for name, c in items), class_="note")


def _log_axis(lo: float, hi: float) -> tuple[float, float]:
    return math.floor(math.log10(lo)), max(math.ceil(math.log10(hi)), math.floor(math.log10(lo)) + 1)


def roofline(points: Sequence[tuple[str, float, float]], bandwidth: float | None, peaks: Sequence[tuple[str, float]],
             si, width: int = 640, height: int = 360) -> Markup:
    """Log-log FLOP/s against FLOP/byte: the memory roof (bandwidth x intensity) and each compute roof as
    lines, each point (mark, intensity, FLOP/s) a dot with its mark. ``si`` formats an axis value."""
    xs = [p[1] for p in points]
    ys = [p[2] for p in points]
    peak = max((v for _, v in peaks), default=None)
    if bandwidth and peak:
        xs.append(peak / bandwidth)
    ys += [v for _, v in peaks]  # every roof inside the plot, the lowest too
    x0, x1 = _log_axis(min(xs) / 2, max(xs) * 2)
    y0, y1 = _log_axis(min(ys) / 2, max(ys) * 2)
    y_labels = [si(10 ** d, "FLOP/s") for d in range(y0, y1 + 1)]
    left = int(max(70, max(text_px(t) for t in y_labels) + 10))  # room for the longest axis label
    right = int(max(20, max((text_px(m) for m, _, _ in points), default=0) + 14))  # and for a mark at the right
    bottom, top = 40, 10
    pw, ph = width - left - right, height - top - bottom

    def X(x: float) -> float:
        return left + (math.log10(x) - x0) / (x1 - x0) * pw

    def Y(y: float) -> float:
        return top + (y1 - math.log10(y)) / (y1 - y0) * ph

    parts = [el("rect", x=left, y=top, width=pw, height=ph, fill="#fff", stroke="#d0d5dd")]
    for d in range(x0, x1 + 1):
        parts.append(el("line", x1=f"{X(10 ** d):.1f}", x2=f"{X(10 ** d):.1f}", y1=top, y2=top + ph, stroke="#eef1f6"))
        parts.append(el("text", f"{10 ** d:g}", x=f"{X(10 ** d):.1f}", y=top + ph + 14, text_anchor="middle"))
    for d, text in zip(range(y0, y1 + 1), y_labels):
        parts.append(el("line", x1=left, x2=left + pw, y1=f"{Y(10**d):.1f}", y2=f"{Y(10**d):.1f}", stroke="#eef1f6"))
        parts.append(el("text", text, x=left - 4, y=f"{Y(10 ** d) + 4:.1f}", text_anchor="end"))
    parts.append(el("text", "arithmetic intensity, FLOP/byte (log scale)", x=left + pw / 2, y=height - 6,
                    text_anchor="middle"))
    lo_x, hi_x = 10.0 ** x0, 10.0 ** x1
    label_ys: list[float] = []
    for i, (name, p) in enumerate(sorted(peaks, key=lambda kv: -kv[1])):
        start = p / bandwidth if bandwidth else lo_x
        if start < hi_x:
            parts.append(el("line", x1=f"{X(max(start, lo_x)):.1f}", x2=f"{X(hi_x):.1f}", y1=f"{Y(p):.1f}",
                            y2=f"{Y(p):.1f}", stroke="#344054", stroke_width=1.5 if p == peak else 1,
                            stroke_dasharray=None if p == peak else "4 3"))
            y = Y(p) - 4  # above its roof; under it where the roof above left its label too near
            if any(abs(y - u) < FONT_PX + 1 for u in label_ys):
                y = Y(p) + FONT_PX + 2
            label_ys.append(y)
            parts.append(el("text", name, x=f"{X(hi_x) - 4:.1f}", y=f"{y:.1f}", text_anchor="end"))
    if bandwidth:
        end = (peak / bandwidth) if peak else hi_x
        a, b = lo_x, min(end, hi_x)
        ya, yb = bandwidth * a, bandwidth * b
        if ya < 10.0 ** y0:  # start the line where it enters the plot
            a = 10.0 ** y0 / bandwidth
            ya = 10.0 ** y0
        if a < b:
            parts.append(el("line", x1=f"{X(a):.1f}", y1=f"{Y(ya):.1f}", x2=f"{X(b):.1f}", y2=f"{Y(yb):.1f}",
                            stroke="#344054", stroke_width=1.5))
    for i, (mark, x, y) in enumerate(points):
        c = PALETTE[i % len(PALETTE)]
        parts.append(el("circle", cx=f"{X(x):.1f}", cy=f"{Y(y):.1f}", r=5, fill=c))
        parts.append(el("text", mark, x=f"{X(x) + 7:.1f}", y=f"{Y(y) - 5:.1f}", fill=c))
    return svg(width, height, *parts, label="roofline")


def series(columns: Sequence[float | None], lo: float, hi: float, width: int = 600, height: int = 40,
           color: str = PALETTE[0]) -> Markup:
    """A filled series plot: one value per column (None or NaN: no data), scaled to [lo, hi]."""
    span = (hi - lo) or 1.0
    n = max(1, len(columns))
    step = width / n
    parts = [el("rect", x=0, y=0, width=width, height=height, fill="#fff", stroke="#eef1f6")]
    for first, k, v in runs([None if v is None or v != v else v for v in columns]):
        if v is None:
            continue
        frac = min(1.0, max(0.0, (float(v) - lo) / span))  # type: ignore[arg-type]
        h = max(1.0, frac * (height - 2))
        parts.append(el("rect", x=f"{first * step:.1f}", y=f"{height - h:.1f}", width=f"{k * step:.1f}",
                        height=f"{h:.1f}", fill=color))
    return svg(width, height, *parts)
