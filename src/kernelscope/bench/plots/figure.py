"""What the benchmark plots share: the panel grid, the measured-points axis, the note naming the points not
drawn, the title and legend row, the header (device, date) and the atomic PNG save."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelscope.model.files import write_atomic

if TYPE_CHECKING:
    from kernelscope.bench.results import BenchResults, BenchRow

MARKERS = "osD^v<>p*h"


def impl_order(rows: list["BenchRow"]) -> list[str]:
    """Implementation names in the order the rows first name them (a line keeps its colour across panels)."""
    seen: list[str] = []
    for r in rows:
        if r.impl not in seen:
            seen.append(r.impl)
    return seen


def panel_grid(plt: Any, n: int) -> tuple[Any, list[Any]]:
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.6 * rows), squeeze=False)
    flat = [ax for line in axes for ax in line]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def point_axis(ax: Any, points: list[int], label: str, tick_labels: list[str] | None = None) -> None:
    """x: the measured points on a log2 axis, each labelled, no minor labels (they would collide)."""
    from matplotlib import ticker

    ax.set_xscale("log", base=2)
    ax.set_xlim(min(points) / 1.25, max(points) * 1.25)
    ax.set_xticks(points)
    ax.set_xticklabels(tick_labels or [str(s) for s in points], rotation=45 if len(points) > 6 else 0)
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(label)
    ax.grid(True, which="major", alpha=0.3)


def missing_note(ax: Any, rows: list["BenchRow"], point: str = "seq_len", short: str = "S") -> None:
    """Under the axes: the rows that failed or ran out of memory, so a missing point is never silent."""
    gaps = [f"{r.impl} {short}={r.params[point]}: {r.status}" for r in rows if r.status != "ok"]
    if gaps:
        text = "not drawn: " + "; ".join(gaps[:6]) + (f"; +{len(gaps) - 6} more" if len(gaps) > 6 else "")
        ax.text(0.0, -0.22, text, transform=ax.transAxes, fontsize=7, va="top", wrap=True)


def finish_figure(fig: Any, axes: list[Any], full_title: str) -> None:
    """Title, then one legend row for all panels under it (never over data), then the panels."""
    from kernelscope.render.plot_text import figure_legend

    inches = fig.get_figheight()
    fig.suptitle(full_title, fontsize=12, y=1 - 0.06 / inches, va="top")
    legend = figure_legend(fig, axes, top=1 - 0.3 / inches)
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.5 if legend is not None else 0.3) / inches))


def save_figure(plt: Any, fig: Any, path: Path, full_title: str, force: bool = True) -> Path:
    """The PNG (the title also as PNG text, for tools); the figure is closed."""
    try:  # through the one writer: never half a PNG where a good one was
        write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=90, metadata={"Title": full_title}),
                     force=force)
    finally:
        plt.close(fig)
    return path


def run_header(results: "BenchResults") -> str:
    env = results.environment
    name = (env.get("device") or {}).get("name") or {}
    date = (env.get("date_utc") or "date unknown")[:10]
    return f"{name.get('value') or 'unknown device'}, {date}"


def speedup_label(baseline: str) -> str:
    return f"speedup (×) = {baseline} median / median"
