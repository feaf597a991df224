"""PNG plots of a W4A16 GEMM results file: time, % of the bytes floor and speedup over a baseline vs m.

One panel per layer shape (k, n), one line per implementation; failed, wrong or
out-of-memory points are not drawn and are named under the panel. Titles carry
the device name and the date of the run (:func:`figure.run_header`). The speedup is
``baseline median / median`` at the same (m, k, n, groupsize), the formula
bench/w4a16.py stores as ``speedup_vs_<impl>``, computed here for whichever
baseline is asked for.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from kernelscope.bench.plots.figure import (
    MARKERS, finish_figure, impl_order, missing_note, panel_grid, point_axis, run_header, speedup_label,
)

if TYPE_CHECKING:
    from kernelscope.bench.results import BenchResults, BenchRow


def _shapes(rows: list["BenchRow"]) -> dict[tuple[int, int, int], list["BenchRow"]]:
    out: dict[tuple[int, int, int], list] = {}
    for r in rows:
        out.setdefault((r.params["k"], r.params["n"], r.params["groupsize"]), []).append(r)
    return out


def _speedup_fn(rows: list["BenchRow"], baseline: str) -> Callable[["BenchRow"], float | None]:
    base = {r.params["m"]: r.get("median_ms") for r in rows if r.impl == baseline and r.status == "ok"}

    def speedup(r: "BenchRow") -> float | None:
        b = base.get(r.params["m"])
        return b / r.get("median_ms") if b else None
    return speedup


def w4a16_figures(results: "BenchResults", baseline: str | None) -> list[tuple[str, Any, str]]:
    """(name, figure, title): time, % of floor and (when the baseline has rows) speedup over the baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernelscope.render.plot_text import plain_log_axis

    shapes = _shapes(results.rows)
    impls = impl_order(results.rows)
    header = run_header(results)
    specs: list[tuple[str, str, str, Callable[[Any], Any] | None, bool]] = [
        ("time", "W4A16 GEMM median time", "median time (ms), L2 cleared", lambda r: r.get("median_ms"), True),
        ("floor", "W4A16 GEMM % of bytes floor", "% of floor (bytes / measured copy bandwidth)",
         lambda r: r.get("pct_of_floor"), False),
    ]
    if baseline is not None and any(r.impl == baseline and r.status == "ok" for r in results.rows):
        specs.append(("speedup", f"W4A16 GEMM speedup over {baseline}", speedup_label(baseline), None, False))
    out = []
    for name, title, ylabel, value, logy in specs:
        fig, axes = panel_grid(plt, len(shapes))
        for ax, ((k, n, g), rows) in zip(axes, shapes.items()):
            fn = value if value is not None else _speedup_fn(rows, baseline)  # type: ignore[arg-type]
            for i, impl in enumerate(impls):
                pts = sorted((r.params["m"], fn(r)) for r in rows if r.impl == impl and r.status == "ok")
                pts = [(m, v) for m, v in pts if v is not None]
                if pts:
                    ax.plot([m for m, _ in pts], [v for _, v in pts], marker=MARKERS[i % len(MARKERS)],
                            color=f"C{i % 10}", label=impl)
            point_axis(ax, sorted({r.params["m"] for r in rows}), "m (tokens)")
            if logy and ax.lines:
                ax.set_yscale("log")
                plain_log_axis(ax, "y")
                ax.grid(True, which="major", axis="y", alpha=0.3)
            if name == "speedup":
                ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
            if name == "floor":
                ax.axhline(100.0, color="grey", linestyle="--", linewidth=1)
            ax.set_ylabel(ylabel)
            ax.set_title(f"k={k} n={n} groupsize {g}", fontsize=10)
            missing_note(ax, rows, point="m", short="m")
        full_title = f"{title} — {header}"
        finish_figure(fig, axes, full_title)
        out.append((name, fig, full_title))
    return out
