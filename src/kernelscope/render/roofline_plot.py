"""The roofline as a PNG (matplotlib, Agg): the points of the terminal roofline, and the
measured roofs when a calibration exists; without one the plot says so instead of
drawing a roof. The title names the device and the session's date.

Layout: the chart on the left, a key on the right (the roofs, then each point by
number, then what is N/A and why), so no text covers the data; each point carries
only its number, placed where it covers no other label or point. Rates are in
TFLOP/s. The axes span the region of interest: the points and the roofs' ridges
(where the memory roof meets a compute roof), not the whole memory line.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

from kernelscope.model.files import write_atomic
from typing import Any

from kernelscope.analyze.roofline import Ceilings, RooflinePoint
from kernelscope.render.roofline_term import placed

TERA = 1e12
KEY_CHARS = 64  # width of the key's text, in characters, so it stays inside the figure
KEY_LEFT = 0.04  # the key's left edge, in its axes' width: a gap after the chart


def _limits(xs: list[float], ys: list[float], bw: float | None, peaks: list[float]) -> tuple[float, float, float,
                                                                                                  float]:
    """(x_lo, x_hi, y_lo, y_hi): the points and the ridges of the roofs in view, with room around them (ys and
    peaks in TFLOP/s); the memory roof is drawn only where it crosses that region."""
    ridges = [p * TERA / bw for p in peaks] if bw else []
    x_all, y_all = xs + ridges, ys + peaks
    x_lo, x_hi = (min(x_all) / 3, max(x_all) * 3) if x_all else (0.1, 1000.0)
    y_lo, y_hi = (min(y_all) / 3, max(y_all) * 2) if y_all else (0.1, 1000.0)
    return x_lo, x_hi, y_lo, y_hi


def _in_view(label: str, pts: list[RooflinePoint]) -> bool:
    """A compute roof sets the axes if a drawn point is of its kind (tensor work: the matmul roofs; else
    fp32 FMA, as Ceilings.compute_roof picks), or if no point is drawn."""
    return not pts or any(("matmul" in label) == p.tensor for p in pts)


def roofline_figure(points: tuple[RooflinePoint, ...], ceilings: Ceilings, title: str = "roofline") -> Any:
    """The roofline figure (chart and key); the caller saves and closes it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from kernelscope.render.plot_text import place_point_labels, plain_log_axis

    pts = placed(points)
    fig, (ax, key) = plt.subplots(1, 2, figsize=(12.0, 5.6), gridspec_kw={"width_ratios": [1.45, 1.0]})
    key.axis("off")
    xs = [float(p.intensity.value) for p in pts]
    ys = [float(p.flop_rate.value) / TERA for p in pts]
    bw = None if ceilings.memory_bandwidth.is_missing else float(ceilings.memory_bandwidth.value)
    peaks = [float(m.value) / TERA for label, m in ceilings.compute if _in_view(label, pts)]
    x_lo, x_hi, y_lo, y_hi = _limits(xs, ys, bw, peaks)
    handles: list[Any] = []
    labels: list[str] = []
    notes: list[str] = []
    if bw:
        top_ridge = max([p * TERA / bw for p in peaks], default=x_hi)
        (line,) = ax.plot([x_lo, top_ridge], [x_lo * bw / TERA, top_ridge * bw / TERA], color="grey", linewidth=1.5)
        handles.append(line)
        labels.append(f"memory roof: measured copy bandwidth {bw / 1e12:.2f} TB/s")
    else:
        notes.append(f"memory roof N/A: {ceilings.memory_bandwidth.missing_reason or ceilings.missing_reason}")
    for i, (label, m) in enumerate(ceilings.compute):
        peak = float(m.value) / TERA
        start = peak * TERA / bw if bw else x_lo
        # roofs in black and grey (by line style), so no roof shares a colour with a point
        (line,) = ax.plot([start, x_hi], [peak, peak], linewidth=1.3, linestyle=("-", "--", "-.", ":")[i % 4],
                          color="black")
        handles.append(line)
        off = "" if y_lo <= peak <= y_hi else (" (below the chart)" if peak < y_lo else " (above the chart)")
        labels.append(f"compute roof: measured {label} {peak:.1f} TFLOP/s{off}")
    if not ceilings.compute and ceilings.missing_reason:
        notes.insert(0, f"roofs N/A: {ceilings.missing_reason}")
        notes = notes[:1]
    for i, (p, x, y) in enumerate(zip(pts, xs, ys)):
        ax.scatter([x], [y], marker="o" if p.kind == "kernel" else "s", color=f"C{i % 10}", zorder=3, s=30)
        handles.append(Line2D([], [], marker="o" if p.kind == "kernel" else "s", color=f"C{i % 10}", linestyle=""))
        labels.append(f"{i + 1}  {p.label if len(p.label) <= 48 else p.label[:47] + '…'} ({p.kind})")
    if not pts:
        ax.text(0.5, 0.5, "no kernel or region has both FLOPs and bytes", transform=ax.transAxes, ha="center")
    left_out = len(points) - len(pts)
    if left_out:
        notes.append(f"{left_out} of {len(points)} kernels and regions are not drawn: they lack FLOPs, bytes or "
                     "a time (the terminal roofline says which)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    plain_log_axis(ax, "x")
    plain_log_axis(ax, "y")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s (FLOPs / time)")
    ax.grid(True, which="major", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    place_point_labels(ax, list(zip(xs, ys)), [str(i + 1) for i in range(len(pts))])
    _key(fig, key, handles, labels, notes)
    return fig


def _key(fig: Any, key: Any, handles: list[Any], labels: list[str], notes: list[str]) -> None:
    """Notes (wrapped to the key's width) at the top of the key axes, the legend below them."""
    renderer = fig.canvas.get_renderer()
    top = 1.0
    if notes:
        text = "\n\n".join(textwrap.fill(n, KEY_CHARS) for n in notes)
        note = key.text(KEY_LEFT, 1.0, text, transform=key.transAxes, va="top", ha="left", fontsize=8)
        box = note.get_window_extent(renderer).transformed(key.transAxes.inverted())
        top = box.y0 - 0.03
    if handles:
        key.legend(handles, labels, loc="upper left", bbox_to_anchor=(KEY_LEFT, top),
                   fontsize=7 if len(labels) > 20 else 8, frameon=False, borderaxespad=0.0, handlelength=2.2)


def write_roofline_png(points: tuple[RooflinePoint, ...], ceilings: Ceilings, path: str | Path,
                       title: str = "roofline") -> Path:
    fig = roofline_figure(points, ceilings, title)  # selects the Agg backend before pyplot is imported here
    import matplotlib.pyplot as plt

    out = Path(path)
    try:  # through the one writer: never half a PNG where a good one was
        write_atomic(out, lambda f: fig.savefig(f, format="png", dpi=90, metadata={"Title": title}))
    finally:
        plt.close(fig)
    return out


def roofline_png_bytes(points: tuple[RooflinePoint, ...], ceilings: Ceilings, title: str = "roofline") -> bytes:
    """The same PNG as write_roofline_png, as bytes (the roofline-png renderer's output)."""
    import io

    fig = roofline_figure(points, ceilings, title)
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=90, metadata={"Title": title})
    finally:
        plt.close(fig)
    return buf.getvalue()
