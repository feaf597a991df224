"""PNG plots of a benchmark results file: latency, TFLOP/s, speedup and memory vs sequence length.

matplotlib is imported on first use, with the Agg backend (no display needed).
One figure per quantity; one panel per (head dim, mask, dtype) group; one line
per implementation. Points that failed or ran out of memory are not drawn and
are named under the panel, so a gap never looks like a measurement. Titles
carry the device name and the date of the run.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from kernelscope.bench.results import BenchResults, BenchRow

PLOTS = ("latency", "tflops", "speedup", "memory")
_MARKERS = "osD^v<>p*h"


@dataclass(frozen=True)
class Group:
    head_dim: int
    causal: bool
    dtype: str

    def title(self) -> str:
        return f"head dim {self.head_dim}, {'causal' if self.causal else 'full'}, {self.dtype}"


def _groups(rows: list["BenchRow"]) -> dict[Group, list["BenchRow"]]:
    out: dict[Group, list] = {}
    for r in rows:
        out.setdefault(Group(r.params["head_dim"], bool(r.params["causal"]), r.params["dtype"]), []).append(r)
    return dict(sorted(out.items(), key=lambda kv: (kv[0].dtype, kv[0].head_dim, kv[0].causal)))


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


def _seq_axis(ax: Any, seqs: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(seqs) / 1.25, max(seqs) * 1.25)
    ax.set_xticks(seqs)
    ax.set_xticklabels([str(s) for s in seqs], rotation=45 if len(seqs) > 6 else 0)
    ax.set_xlabel("sequence length (tokens)")
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


def _save(plt: Any, fig: Any, path: Path, full_title: str) -> Path:
    """Title, tight layout, PNG (the title also as PNG text, for tools); the figure is closed."""
    fig.suptitle(full_title, fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata={"Title": full_title})
    plt.close(fig)
    return path


def _header(results: "BenchResults") -> str:
    env = results.environment
    name = (env.get("device") or {}).get("name") or {}
    date = (env.get("date_utc") or "date unknown")[:10]
    return f"{name.get('value') or 'unknown device'}, {date}"


def write_plots(results: "BenchResults", output_dir: str | Path, baseline: str | None = None,
                prefix: str = "attention") -> list[Path]:
    """Write the four PNGs into output_dir and return their paths (speedup only if the baseline has rows)."""
    if results.benchmark == "w4a16":  # its own axes (m) and quantities: render/plots_w4a16.py
        from kernelscope.render.plots_w4a16 import write_w4a16_plots

        return write_w4a16_plots(results, output_dir, prefix=prefix)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups = _groups(results.rows)
    impls = _impls(results.rows)
    header = _header(results)
    specs: list[tuple[str, str, str, Callable[[Any], Any], bool]] = [
        ("latency", "attention forward latency", "median latency (ms), IQR as error bar", lambda r: r.get("median_ms"),
         True),
        ("tflops", "attention forward throughput", "TFLOP/s (4·B·H·S²·D, ½ causal) / median time",
         lambda r: r.get("tflops"), False),
        ("memory", "attention forward peak memory", "peak allocated memory (MiB, inputs included)",
         lambda r: r.get("peak_memory_bytes") / 2**20 if r.get("peak_memory_bytes") else None, True),
    ]
    if baseline is not None and any(r.impl == baseline and r.status == "ok" for r in results.rows):
        specs.append(("speedup", f"attention forward speedup over {baseline}",
                      f"speedup over {baseline} (×, higher is faster)", None, False))
    paths = []
    for name, title, ylabel, value, logy in specs:
        fig, axes = _figure(plt, len(groups))
        for ax, (group, rows) in zip(axes, groups.items()):
            fn = value if value is not None else _speedup_fn(rows, baseline)
            for i, impl in enumerate(impls):
                xs, ys = _series(rows, impl, fn)
                if not xs:
                    continue
                if name == "latency":
                    q1 = dict(zip(*_series(rows, impl, lambda r: r.get("q1_ms"))))
                    q3 = dict(zip(*_series(rows, impl, lambda r: r.get("q3_ms"))))
                    err = [[y - q1.get(x, y) for x, y in zip(xs, ys)], [q3.get(x, y) - y for x, y in zip(xs, ys)]]
                    ax.errorbar(xs, ys, yerr=err, marker=_MARKERS[i % len(_MARKERS)], capsize=3, label=impl)
                else:
                    ax.plot(xs, ys, marker=_MARKERS[i % len(_MARKERS)], label=impl)
            seqs = sorted({r.params["seq_len"] for r in rows})
            _seq_axis(ax, seqs)
            if not ax.lines:
                reasons = sorted({r.get("memory_missing_reason") or "no successful row has this value"
                                  for r in rows if r.status == "ok"} or {"no successful row"})
                ax.text(0.5, 0.5, "no values: " + "; ".join(reasons), transform=ax.transAxes, ha="center",
                        fontsize=8, wrap=True)
            elif logy:
                ax.set_yscale("log")
                plain = ticker.FuncFormatter(lambda y, _: f"{y:g}")
                ax.yaxis.set_major_formatter(plain)
                ax.yaxis.set_minor_formatter(plain)
            if name == "speedup":
                ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
            ax.set_ylabel(ylabel)
            ax.set_title(group.title(), fontsize=10)
            if ax.lines:
                ax.legend(fontsize=8)
            _missing_note(ax, rows)
        paths.append(_save(plt, fig, out / f"{prefix}_{name}.png", f"{title} — {header}"))
    return paths
