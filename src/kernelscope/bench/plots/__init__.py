"""PNG plots of a `kernelscope bench` results file, one module per benchmark (attention.py, w4a16.py) over
the shared figure helpers (figure.py).

matplotlib is imported on first use, with the Agg backend (no display needed); the text placement shared with
the roofline plot is render/plot_text.py. One figure per quantity; one panel per shape; one line per
implementation, in the same colour in every panel, named in one legend row under the title (never over the
data). Points that failed or ran out of memory are not drawn and are named under the panel, so a gap never
looks like a measurement. Titles carry the device name and the date of the run.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from kernelscope.bench.results import BenchResults

# The speedup plot's default baseline per benchmark: the peer each kernel has to beat.
DEFAULT_BASELINES = {"attention": "sdpa-flash", "w4a16": "cublas"}


def write_plots(results: "BenchResults", output_dir: str | Path, baseline: str | None = None,
                prefix: str = "attention", check: Callable[[Path], Any] | None = None,
                force: bool = True) -> list[Path]:
    """Write the PNGs into output_dir and return their paths. The speedup plot divides by ``baseline``
    (default: the benchmark's, DEFAULT_BASELINES) and is drawn only if that implementation has rows.
    ``check`` sees every file (exists? an input?) before matplotlib is imported (1-2 s) and before any is written;
    without ``force`` a PNG that appeared since is kept (model/files.write_atomic)."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    planned = plot_paths(results, out, baseline, prefix)
    for path in planned:
        if check is not None:
            check(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernelscope.bench.plots.figure import save_figure

    figs = list(figures(results, baseline))
    drawn = [out / f"{prefix}_{name}.png" for name, _, _ in figs]
    if drawn != planned:  # PLOTS out of step with the figure modules: a bug, said before anything is written
        raise RuntimeError(f"plot_paths named {[p.name for p in planned]}, the figures {[p.name for p in drawn]}")
    return [save_figure(plt, fig, path, title, force) for path, (_, fig, title) in zip(drawn, figs)]


# The figures each benchmark's module draws, in order; "speedup" follows where the baseline has successful rows.
PLOTS = {"attention": ("latency", "tflops", "memory"), "w4a16": ("time", "floor")}


def plot_paths(results: "BenchResults", output_dir: str | Path, baseline: str | None = None,
               prefix: str = "attention") -> list[Path]:
    """The PNGs write_plots writes, named without drawing (or importing matplotlib)."""
    if baseline is None:
        baseline = DEFAULT_BASELINES.get(results.benchmark)
    names = list(PLOTS["w4a16" if results.benchmark == "w4a16" else "attention"])
    if baseline is not None and any(r.impl == baseline and r.status == "ok" for r in results.rows):
        names.append("speedup")
    return [Path(output_dir) / f"{prefix}_{name}.png" for name in names]


def figures(results: "BenchResults", baseline: str | None = None) -> list[tuple[str, Any, str]]:
    """(name, figure, title) of each plot of a results file; the caller saves or inspects and closes them."""
    if baseline is None:
        baseline = DEFAULT_BASELINES.get(results.benchmark)
    if results.benchmark == "w4a16":  # its own axes (m) and quantities
        from kernelscope.bench.plots.w4a16 import w4a16_figures

        return w4a16_figures(results, baseline)
    from kernelscope.bench.plots.attention import attention_figures

    return attention_figures(results, baseline)
