"""PNG plots of a benchmark results file: latency, TFLOP/s, speedup and memory vs sequence length.

matplotlib is imported on first use, with the Agg backend (no display needed).
One figure per quantity; one panel per (batch, heads, head dim, mask, dtype)
group; one line per implementation, in the same colour in every panel, named in
one legend row under the title (never over the data). Points that failed or ran
out of memory are not drawn and are named under the panel, so a gap never looks
like a measurement. Titles carry the device name and the date of the run.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelscope.model.files import write_atomic
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from kernelscope.bench.results import BenchResults, BenchRow

PLOTS = ("latency", "tflops", "speedup", "memory")
# The speedup plot's default baseline per benchmark: the peer each kernel has to beat.
DEFAULT_BASELINES = {"attention": "sdpa-flash", "w4a16": "cublas"}
_MARKERS = "osD^v<>p*h"


@dataclass(frozen=True)
class Group:
    """One panel: the attention shape apart from the sequence length (and the batch, where the sweep
    ties it to the sequence length: then each x tick names its batch)."""
    heads: int | None
    head_dim: int
    causal: bool
    dtype: str
    batch: int | None = None  # set when the whole panel has one batch size

    def title(self, rows: list["BenchRow"]) -> str:
        batches = {r.params.get("batch") for r in rows} - {None}
        tokens = {r.params["seq_len"] * r.params["batch"] for r in rows if r.params.get("batch") is not None}
        if len(batches) == 1:
            batch = f"batch {batches.pop()}, "
        elif len(tokens) == 1:
            batch = f"batch × seq = {tokens.pop():,} tokens, "
        else:
            batch = ""
        heads = f"{self.heads} heads, " if self.heads is not None else ""
        mask = "causal" if self.causal else "full (non-causal)"
        return f"{batch}{heads}head dim {self.head_dim}, {mask}, {self.dtype}"


def _groups(rows: list["BenchRow"]) -> dict[Group, list["BenchRow"]]:
    by_shape: dict[Group, list] = {}
    for r in rows:
        g = Group(r.params.get("heads"), r.params["head_dim"], bool(r.params["causal"]), r.params["dtype"])
        by_shape.setdefault(g, []).append(r)
    out: dict[Group, list] = {}
    for g, rs in by_shape.items():
        points = [(r.impl, r.params["seq_len"]) for r in rs]
        if len(points) == len(set(points)):  # one batch per sequence length: one panel, batch under each tick
            out[g] = rs
            continue
        for r in rs:  # several batches at one sequence length: a panel per batch
            out.setdefault(Group(g.heads, g.head_dim, g.causal, g.dtype, r.params.get("batch")), []).append(r)
    return dict(sorted(out.items(), key=lambda kv: (kv[0].dtype, kv[0].head_dim, kv[0].heads or 0,
                                                    kv[0].batch or 0, kv[0].causal)))


def _seq_tick_labels(rows: list["BenchRow"], seqs: list[int]) -> list[str] | None:
    """Sequence lengths with the batch under each, when the batch changes along the axis; else None."""
    batch = {r.params["seq_len"]: r.params.get("batch") for r in rows}
    if len({batch[s] for s in seqs}) <= 1:
        return None
    return [f"{s}\nB={batch[s]}" if batch[s] is not None else str(s) for s in seqs]


def _impls(rows: list["BenchRow"]) -> list[str]:
    seen: list[str] = []
    for r in rows:
        if r.impl not in seen:
            seen.append(r.impl)
    return seen


def _figure(plt: Any, n: int) -> tuple[Any, list[Any]]:
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


def _missing_note(ax: Any, rows: list["BenchRow"], point: str = "seq_len", short: str = "S") -> None:
    """Under the axes: the rows that failed or ran out of memory, so a missing point is never silent."""
    gaps = [f"{r.impl} {short}={r.params[point]}: {r.status}" for r in rows if r.status != "ok"]
    if gaps:
        text = "not drawn: " + "; ".join(gaps[:6]) + (f"; +{len(gaps) - 6} more" if len(gaps) > 6 else "")
        ax.text(0.0, -0.22, text, transform=ax.transAxes, fontsize=7, va="top", wrap=True)


def _series(rows: list["BenchRow"], impl: str, value: Callable[["BenchRow"], float | None]) -> tuple[list, list]:
    pts = sorted((r.params["seq_len"], value(r)) for r in rows if r.impl == impl and r.status == "ok")
    pts = [(s, v) for s, v in pts if v is not None]
    return [s for s, _ in pts], [v for _, v in pts]


def _speedup_fn(rows: list["BenchRow"], baseline: str) -> Callable[["BenchRow"], float | None]:
    base = {r.params["seq_len"]: r.get("median_ms") for r in rows if r.impl == baseline and r.status == "ok"}

    def speedup(r: "BenchRow") -> float | None:
        b = base.get(r.params["seq_len"])
        return b / r.get("median_ms") if b else None
    return speedup


def finish_figure(fig: Any, axes: list[Any], full_title: str) -> None:
    """Title, then one legend row for all panels under it (never over data), then the panels."""
    from kernelscope.render.plot_layout import figure_legend

    inches = fig.get_figheight()
    fig.suptitle(full_title, fontsize=12, y=1 - 0.06 / inches, va="top")
    legend = figure_legend(fig, axes, top=1 - 0.3 / inches)
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.5 if legend is not None else 0.3) / inches))


def save_figure(plt: Any, fig: Any, path: Path, full_title: str) -> Path:
    """The PNG (the title also as PNG text, for tools); the figure is closed."""
    try:  # through the one writer: never half a PNG where a good one was
        write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=90, metadata={"Title": full_title}))
    finally:
        plt.close(fig)
    return path


def _header(results: "BenchResults") -> str:
    env = results.environment
    name = (env.get("device") or {}).get("name") or {}
    date = (env.get("date_utc") or "date unknown")[:10]
    return f"{name.get('value') or 'unknown device'}, {date}"


def speedup_label(baseline: str) -> str:
    return f"speedup (×) = {baseline} median / median"


def write_plots(results: "BenchResults", output_dir: str | Path, baseline: str | None = None,
                prefix: str = "attention", check: Callable[[Path], Any] | None = None) -> list[Path]:
    """Write the PNGs into output_dir and return their paths. The speedup plot divides by ``baseline``
    (default: the benchmark's, DEFAULT_BASELINES) and is drawn only if that implementation has rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = list(figures(results, baseline))
    for name, _, _ in figs:  # every file is checked (exists? an input?) before any is written
        if check is not None:
            check(out / f"{prefix}_{name}.png")
    return [save_figure(plt, fig, out / f"{prefix}_{name}.png", title) for name, fig, title in figs]


def figures(results: "BenchResults", baseline: str | None = None) -> list[tuple[str, Any, str]]:
    """(name, figure, title) of each plot of a results file; the caller saves or inspects and closes them."""
    if baseline is None:
        baseline = DEFAULT_BASELINES.get(results.benchmark)
    if results.benchmark == "w4a16":  # its own axes (m) and quantities: render/plots_w4a16.py
        from kernelscope.render.plots_w4a16 import w4a16_figures

        return w4a16_figures(results, baseline)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernelscope.render.plot_layout import plain_log_axis

    groups = _groups(results.rows)
    impls = _impls(results.rows)
    header = _header(results)
    specs: list[tuple[str, str, str, Callable[[Any], Any] | None, bool]] = [
        ("latency", "attention forward latency", "median latency (ms), IQR as error bar", lambda r: r.get("median_ms"),
         True),
        ("tflops", "attention forward throughput", "TFLOP/s (4·B·H·S²·D, ½ causal) / median time",
         lambda r: r.get("tflops"), False),
        ("memory", "attention forward peak memory", "peak allocated memory (MiB, inputs included)",
         lambda r: r.get("peak_memory_bytes") / 2**20 if r.get("peak_memory_bytes") else None, True),
    ]
    if baseline is not None and any(r.impl == baseline and r.status == "ok" for r in results.rows):
        specs.append(("speedup", f"attention forward speedup over {baseline}", speedup_label(baseline), None, False))
    out = []
    for name, title, ylabel, value, logy in specs:
        fig, axes = _figure(plt, len(groups))
        for ax, (group, rows) in zip(axes, groups.items()):
            fn = value if value is not None else _speedup_fn(rows, baseline)
            for i, impl in enumerate(impls):
                xs, ys = _series(rows, impl, fn)
                if not xs:
                    continue
                style = {"marker": _MARKERS[i % len(_MARKERS)], "color": f"C{i % 10}", "label": impl}
                if name == "latency":
                    q1 = dict(zip(*_series(rows, impl, lambda r: r.get("q1_ms"))))
                    q3 = dict(zip(*_series(rows, impl, lambda r: r.get("q3_ms"))))
                    err = [[y - q1.get(x, y) for x, y in zip(xs, ys)], [q3.get(x, y) - y for x, y in zip(xs, ys)]]
                    ax.errorbar(xs, ys, yerr=err, capsize=3, **style)
                else:
                    ax.plot(xs, ys, **style)
            seqs = sorted({r.params["seq_len"] for r in rows})
            ticks = _seq_tick_labels(rows, seqs)
            point_axis(ax, seqs, "sequence length (tokens)" + (", B = batch" if ticks else ""), ticks)
            if not ax.lines:
                reasons = sorted({r.get("memory_missing_reason") or "no successful row has this value"
                                  for r in rows if r.status == "ok"} or {"no successful row"})
                ax.text(0.5, 0.5, "no values: " + "; ".join(reasons), transform=ax.transAxes, ha="center",
                        fontsize=8, wrap=True)
            elif logy:
                ax.set_yscale("log")
                plain_log_axis(ax, "y")
            if name == "speedup":
                ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
            ax.set_ylabel(ylabel)
            ax.set_title(group.title(rows), fontsize=10)
            _missing_note(ax, rows)
        full_title = f"{title} — {header}"
        finish_figure(fig, axes, full_title)
        out.append((name, fig, full_title))
    return out
