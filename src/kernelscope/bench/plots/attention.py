"""PNG plots of an attention results file: latency, TFLOP/s, speedup and memory vs sequence length.

matplotlib is imported on first use, with the Agg backend (no display needed).
One figure per quantity; one panel per (batch, heads, head dim, mask, dtype)
group; one line per implementation, in the same colour in every panel, named in
one legend row under the title (never over the data). Points that failed or ran
out of memory are not drawn and are named under the panel, so a gap never looks
like a measurement. Titles carry the device name and the date of the run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from kernelscope.bench.plots.figure import (
    MARKERS, finish_figure, impl_order, missing_note, panel_grid, point_axis, run_header, speedup_label,
)

if TYPE_CHECKING:
    from kernelscope.bench.results import BenchResults, BenchRow


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


def attention_figures(results: "BenchResults", baseline: str | None) -> list[tuple[str, Any, str]]:
    """(name, figure, title): latency, TFLOP/s, memory and (when the baseline has rows) speedup."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernelscope.render.plot_text import plain_log_axis

    groups = _groups(results.rows)
    impls = impl_order(results.rows)
    header = run_header(results)
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
        fig, axes = panel_grid(plt, len(groups))
        for ax, (group, rows) in zip(axes, groups.items()):
            fn = value if value is not None else _speedup_fn(rows, baseline)
            for i, impl in enumerate(impls):
                xs, ys = _series(rows, impl, fn)
                if not xs:
                    continue
                style = {"marker": MARKERS[i % len(MARKERS)], "color": f"C{i % 10}", "label": impl}
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
            missing_note(ax, rows)
        full_title = f"{title} — {header}"
        finish_figure(fig, axes, full_title)
        out.append((name, fig, full_title))
    return out
