"""Where the PNG plots put their text: readable log-axis tick labels, one legend outside the data,
text labels beside points that do not cover each other, and the overlap checks tests use.

matplotlib objects are passed in; nothing here imports pyplot, so these work on any figure.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

# Tick mantissas per decade, sparsest first: a log axis gets the densest set that puts at most MAX_TICKS
# ticks on it (so a one-decade axis is not left with ticks only at powers of ten, and a wide one is not crowded).
_MANTISSAS = ((1.0,), (1.0, 3.0), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0))
MIN_TICKS, MAX_TICKS = 3, 7


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values in [lo, hi] for a log axis: 1·10ᵏ, or 1 and 3, or 1, 2 and 5 …, as densely as fits."""
    chosen: list[float] = []
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for mantissas in _MANTISSAS:
        ticks = [t for t in (float(f"{m * 10.0 ** e:.12g}") for e in decades for m in mantissas) if lo <= t <= hi]
        if len(ticks) > MAX_TICKS and chosen:
            break
        chosen = ticks
    if len(chosen) < MIN_TICKS:  # less than a factor of ~1.5 on the axis: evenly spaced round values
        from matplotlib.ticker import MaxNLocator

        chosen = [float(t) for t in MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi) if lo <= t <= hi]
    return chosen


def _plain(v: float, _pos: Any = None) -> str:
    """A tick value as a plain number (0.02, 300, 16384), not 10ˣ or 2×10ˣ."""
    if v == 0:
        return "0"
    if abs(v) >= 1e6 or abs(v) < 1e-3:
        return f"{v:.0e}"
    return f"{v:.6g}"


def plain_log_axis(ax: Any, which: str) -> None:
    """Put readable ticks on a log axis ('x' or 'y') of ax, for its current limits: plain numbers at
    :func:`log_ticks`, unlabelled minor ticks (labelled minor ticks are what collide)."""
    from matplotlib import ticker

    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if which == "y" else ax.get_xlim())
    axis.set_major_locator(ticker.FixedLocator(log_ticks(lo, hi)))
    axis.set_major_formatter(ticker.FuncFormatter(_plain))
    axis.set_minor_formatter(ticker.NullFormatter())


def figure_legend(fig: Any, axes: Iterable[Any], top: float) -> Any | None:
    """One legend for the whole figure, in a row above the panels (below the title), so it never covers
    data; the panels are laid out below ``top`` (figure fraction). Entries are gathered from all axes."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if not handles:
        return None
    return fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=min(len(handles), 6),
                      bbox_to_anchor=(0.5, top), fontsize=9, frameon=False)


def boxes_overlap(a: Any, b: Any, pad: float = 0.0) -> bool:
    """Whether two display-space Bboxes overlap by more than ``pad`` pixels on both axes."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > pad) and (min(a.y1, b.y1) - max(a.y0, b.y0) > pad)


def tick_label_boxes(ax: Any, which: str, renderer: Any) -> list[Any]:
    """Display-space boxes of the visible, non-empty tick labels (major and minor) on one axis of ax."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if which == "y" else ax.get_xlim())
    out = []
    for tick in axis.get_major_ticks() + axis.get_minor_ticks():
        label = tick.label1
        if label.get_visible() and label.get_text() and lo <= tick.get_loc() <= hi:
            out.append(label.get_window_extent(renderer))
    return out


def place_point_labels(ax: Any, points: list[tuple[float, float]], texts: list[str], fontsize: float = 8) -> list[Any]:
    """Label each data point with a short text beside it, trying offsets until the label covers no
    other label, no point marker and stays inside the axes; returns the Text artists."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    inside = ax.get_window_extent(renderer)
    markers = [to_px(p) for p in points]
    r = 5.0  # marker radius in pixels, about (default scatter size at 90 dpi)
    offsets = [(6, 4), (6, -12), (-12, 4), (-12, -12), (6, 14), (6, -22), (-12, 14), (-12, -22), (16, -4),
               (-22, -4), (6, 24), (6, -32)]
    placed: list[Any] = []
    artists = []
    for (x, y), text in zip(points, texts):
        artist = None
        for dx, dy in offsets:
            cand = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize)
            box = cand.get_window_extent(renderer)
            hits_marker = any(box.x0 - r < mx < box.x1 + r and box.y0 - r < my < box.y1 + r for mx, my in markers)
            if (not hits_marker and not any(boxes_overlap(box, b) for b in placed)
                    and inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1):
                artist = cand
                break
            cand.remove()
        if artist is None:  # crowded: the first place, with a leader line, rather than no label
            artist = ax.annotate(text, (x, y), textcoords="offset points", xytext=(10, 18), fontsize=fontsize,
                                 arrowprops={"arrowstyle": "-", "linewidth": 0.5})
        placed.append(artist.get_window_extent(renderer))
        artists.append(artist)
    return artists
