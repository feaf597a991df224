"""PNG plots of a W4A16 GEMM results file: time, % of the bytes floor and speedup over cuBLAS vs m.

One panel per layer shape (k, n), one line per implementation; failed, wrong or
out-of-memory points are not drawn and are named under the panel. Titles carry
the device name and the date of the run (:func:`plots._header`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from kernelscope.render.plots import _MARKERS, _figure, _header, _impls, _missing_note, _save

if TYPE_CHECKING:
    from kernelscope.bench.results import BenchResults, BenchRow


def _shapes(rows: list["BenchRow"]) -> dict[tuple[int, int, int], list["BenchRow"]]:
    out: dict[tuple[int, int, int], list] = {}
    for r in rows:
        out.setdefault((r.params["k"], r.params["n"], r.params["groupsize"]), []).append(r)
    return out


def write_w4a16_plots(results: "BenchResults", output_dir: str | Path, prefix: str = "w4a16") -> list[Path]:
    """Write time, % of floor and (when cuBLAS has rows) speedup PNGs into output_dir; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    shapes = _shapes(results.rows)
    impls = _impls(results.rows)
    header = _header(results)
    specs: list[tuple[str, str, str, Callable[[Any], Any], bool]] = [
        ("time", "W4A16 GEMM median time", "median time (ms), L2 cleared", lambda r: r.get("median_ms"), True),
        ("floor", "W4A16 GEMM % of bytes floor", "% of floor (bytes / measured copy bandwidth)",
         lambda r: r.get("pct_of_floor"), False),
    ]
    if any(r.impl == "cublas" and r.status == "ok" for r in results.rows):
        specs.append(("speedup", "W4A16 GEMM speedup over cuBLAS fp16", "cuBLAS median / median (×)",
                      lambda r: r.get("speedup_vs_cublas"), False))
    paths = []
    for name, title, ylabel, value, logy in specs:
        fig, axes = _figure(plt, len(shapes))
        for ax, ((k, n, g), rows) in zip(axes, shapes.items()):
            for i, impl in enumerate(impls):
                pts = sorted((r.params["m"], value(r)) for r in rows if r.impl == impl and r.status == "ok"
                             and value(r) is not None)
                if pts:
                    ax.plot([m for m, _ in pts], [v for _, v in pts], marker=_MARKERS[i % len(_MARKERS)], label=impl)
            ms = sorted({r.params["m"] for r in rows})
            ax.set_xscale("log", base=2)
            ax.set_xticks(ms)
            ax.set_xticklabels([str(m) for m in ms])
            ax.set_xlabel("m (tokens)")
            ax.grid(True, alpha=0.3)
            if logy and ax.lines:
                ax.set_yscale("log")
            if name == "speedup":
                ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
            if name == "floor":
                ax.axhline(100.0, color="grey", linestyle="--", linewidth=1)
            ax.set_ylabel(ylabel)
            ax.set_title(f"k={k} n={n} groupsize {g}", fontsize=10)
            if ax.lines:
                ax.legend(fontsize=8)
            _missing_note(ax, rows, point="m", short="m")
        paths.append(_save(plt, fig, out / f"{prefix}_{name}.png", f"{title} — {header}"))
    return paths
