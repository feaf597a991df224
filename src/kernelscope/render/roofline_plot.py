"""The roofline as a PNG (matplotlib, Agg): the points of the terminal roofline, and the
measured roofs when a calibration exists; without one the plot says so instead of
drawing a roof. The title names the device and the session's date."""
from __future__ import annotations

from pathlib import Path

from kernelscope.analyze.roofline import Ceilings, RooflinePoint
from kernelscope.render.roofline_term import placed


def write_roofline_png(points: tuple[RooflinePoint, ...], ceilings: Ceilings, path: str | Path,
                       title: str = "roofline") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = placed(points)
    fig, ax = plt.subplots(figsize=(8.0, 5.5))
    xs = [float(p.intensity.value) for p in pts] or [1.0]
    bw = None if ceilings.memory_bandwidth.is_missing else float(ceilings.memory_bandwidth.value)
    lo, hi = min(xs) / 10, max(xs) * 10
    if bw:
        for label, m in ceilings.compute:
            peak = float(m.value)
            lo, hi = min(lo, peak / bw / 10), max(hi, peak / bw * 10)
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(grid, [x * bw for x in grid], color="grey", linestyle="--", linewidth=1,
                label=f"measured copy bandwidth {bw / 1e12:.2f} TB/s")
        for label, m in ceilings.compute:
            peak = float(m.value)
            ax.plot(grid, [min(x * bw, peak) for x in grid], linewidth=1.5,
                    label=f"measured {label} {peak / 1e12:.1f} TFLOP/s")
    else:
        ax.text(0.02, 0.97, f"roofs N/A: {ceilings.missing_reason}", transform=ax.transAxes, va="top", fontsize=8)
    for i, p in enumerate(pts, 1):
        marker = "o" if p.kind == "kernel" else "s"
        ax.scatter([float(p.intensity.value)], [float(p.flop_rate.value)], marker=marker, zorder=3)
        ax.annotate(f"{i} {p.label[:28]}", (float(p.intensity.value), float(p.flop_rate.value)),
                    textcoords="offset points", xytext=(5, 4), fontsize=7)
    if not pts:
        ax.text(0.5, 0.5, "no kernel or region has both FLOPs and bytes", transform=ax.transAxes, ha="center")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.grid(True, which="major", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=90, metadata={"Title": title})
    plt.close(fig)
    return out
