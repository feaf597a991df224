"""`kernelscope bench`: benchmark kernels against their peers and write a results file.

One sub-subcommand per benchmark (``attention`` now; a GEMM benchmark adds its
own parser with :func:`_add_common`). The results file is rewritten after every
row, so an interrupted run keeps what it measured; ``kernelscope plot`` draws it.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import sys
from pathlib import Path
from typing import Any

from kernelscope.cli.common import columns, fail, non_negative, output_path, positive, require_modules

DEFAULT_IMPLS = "flash,naive,sdpa-flash,sdpa-cudnn"


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="benchmark kernels against their peers (kernelscope bench attention --help)",
                       description="Benchmark a kernel against its peers on the GPU and write a JSON results file.")
    b.set_defaults(func=lambda args: _no_benchmark(b))
    benches = b.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    a = benches.add_parser("attention", help="attention forward: Triton flash vs PyTorch naive and SDPA backends",
                           description="Attention forward over sequence lengths at a fixed token budget "
                                       "(batch = tokens / seq_len, heads = hidden / head_dim).")
    a.add_argument("--seq-lengths", default="128,256,512,1024,2048", metavar="LIST",
                   help="comma-separated sequence lengths (default 128,256,512,1024,2048)")
    a.add_argument("--impl", default=DEFAULT_IMPLS, metavar="LIST",
                   help=f"comma-separated implementations (default {DEFAULT_IMPLS}); any of flash, naive, "
                        "sdpa-flash, sdpa-cudnn, sdpa-efficient, sdpa-math")
    a.add_argument("--head-dim", default="64", metavar="LIST", help="comma-separated head dims (default 64)")
    a.add_argument("--causal", nargs="?", const="yes", default="no", choices=("yes", "no", "both"),
                   help="causal mask: --causal alone means yes; 'both' measures with and without (default no)")
    a.add_argument("--dtype", default="fp16", metavar="LIST", help="fp16 and/or bf16, comma-separated (default fp16)")
    a.add_argument("--tokens", type=positive, default=16384, help="batch x seq_len per point (default 16384)")
    a.add_argument("--hidden", type=positive, default=2048, help="heads x head_dim (default 2048)")
    a.add_argument("--batch", type=positive, help="fixed batch size instead of tokens / seq_len")
    a.add_argument("--heads", type=positive, help="fixed head count instead of hidden / head_dim")
    _add_common(a)
    a.set_defaults(func=main_attention)
    from kernelscope.cli import bench_w4a16  # its own module: this one would pass 300 lines

    bench_w4a16.add_parser(benches, _add_common)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="FILE", help="results file (default bench-<name>-YYYYmmdd-HHMMSS.json)")
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--warmup", type=non_negative, default=10, help="untimed calls before timing (default 10)")
    p.add_argument("--repeats", type=positive, default=30, help="timed calls per point (default 30)")
    p.add_argument("--no-l2-flush", action="store_true", help="do not overwrite L2 between timed calls")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--width", type=columns, metavar="COLS", help="render the summary at this terminal width (>= 40)")
    p.add_argument("--no-color", action="store_true", help="plain text output")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _no_benchmark(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{what} must be comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        fail(f"{what} must list positive integers, got {text!r}")
    return values


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _chosen_impls(text: str, known) -> list[str]:
    """--impl as a list of known implementation names; one sentence and exit 2 otherwise."""
    impls = _names(text)
    unknown = [i for i in impls if i not in known]
    if unknown or not impls:
        fail(f"unknown implementation {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}")
    return impls


def _check_timing_args(args: argparse.Namespace) -> None:
    if args.warmup < 0 or args.repeats < 1:
        fail("--warmup must be >= 0 and --repeats >= 1")


def _output_path(args: argparse.Namespace, name: str) -> Path:
    out = Path(args.output or _dt.datetime.now().strftime(f"bench-{name}-%Y%m%d-%H%M%S.json"))
    return output_path(out, args.force_overwrite, what="results file")


def _require_cuda() -> None:
    try:
        import torch
    except ImportError:
        fail("kernelscope bench needs PyTorch with CUDA; torch is not installed in this Python")
    if not torch.cuda.is_available():
        fail("kernelscope bench times kernels on an NVIDIA GPU, and PyTorch sees no CUDA GPU here")


def main_attention(args: argparse.Namespace) -> int:
    require_modules("bench attention", "torch", "triton")
    from kernelscope.bench.attention import SweepSettings, make_cases, run_attention_sweep
    from kernelscope.kernels.attention import IMPLEMENTATIONS, get_impl

    seqs = _int_list(args.seq_lengths, "--seq-lengths")
    head_dims = _int_list(args.head_dim, "--head-dim")
    impls = _chosen_impls(args.impl, IMPLEMENTATIONS)
    causal = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    try:
        cases = make_cases(seqs, head_dims, causal, _names(args.dtype), args.tokens, args.hidden, args.batch, args.heads)
    except ValueError as e:
        fail(str(e))
    _check_timing_args(args)
    out = _output_path(args, "attention")
    _require_cuda()
    settings = SweepSettings(warmup=args.warmup, repeats=args.repeats, flush_l2=not args.no_l2_flush,
                             device="cuda", seed=args.seed)
    fns = {name: get_impl(name) for name in impls}
    command = ["kernelscope", *sys.argv[1:]]
    with _progress(args) as on_progress:
        results = run_attention_sweep(cases, fns, settings, on_progress=on_progress, command=command,
                                      on_row=lambda r: r.save(out), describe=_describe_attention)
    results.save(out)
    _print_summary(results, args)
    failed = sum(r.status != "ok" for r in results.rows)
    print(f"kernelscope: {len(results.rows)} results written to {out}"
          f"{f' ({failed} failed or out of memory)' if failed else ''}. Plot them with: kernelscope plot {out}",
          file=sys.stderr)
    return 0


def _describe_attention(impl: str, case) -> dict[str, Any]:
    """The Triton kernel's autotuned launch config, so a row says which kernel variant was timed."""
    if impl != "flash":
        return {}
    from kernelscope.kernels.attention.flash import tuned_config

    config = (tuned_config(case.head_dim, case.causal, case.seq_len, warp_specialize=True)
              or tuned_config(case.head_dim, case.causal, case.seq_len))
    return {"flash_config": str(config) if config else None}


class _progress:
    """A Rich progress bar on stderr (transient); a no-op callback when disabled."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.enabled = not args.no_progress
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                             console=Console(stderr=True), transient=True)
        self._bar.__enter__()
        self._task = self._bar.add_task("starting", total=None)
        return self.update

    def update(self, done: int, total: int, label: str) -> None:
        self._bar.update(self._task, completed=done, total=total, description=label)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def _print_summary(results, args: argparse.Namespace) -> None:
    from kernelscope.cli.bench_output import print_tables

    print_tables(results, summary_tables(results), args.width, False if args.no_color else None)


def summary_tables(results) -> list[tuple[str, Any]]:
    """(title, Rich table) per (head dim, heads, mask, dtype): implementations by sequence length."""
    from rich.table import Table

    groups: dict[tuple, dict[str, dict[int, Any]]] = {}
    for r in results.rows:
        p = r.params
        key = (p["head_dim"], p["causal"], p["dtype"], p["heads"])
        groups.setdefault(key, {}).setdefault(r.impl, {})[p["seq_len"]] = r
    tables = []
    for (d, causal, dtype, heads), by_impl in groups.items():
        seqs = sorted({s for cells in by_impl.values() for s in cells})
        title = (f"attention forward, head dim {d}, {heads} heads, {'causal' if causal else 'full'}, {dtype}: "
                 "median ms / TFLOP/s")
        t = Table()
        t.add_column("impl")
        for s in seqs:
            t.add_column(f"S={s}", justify="right")
        for impl, cells in by_impl.items():
            t.add_row(impl, *(_cell(cells.get(s)) for s in seqs))
        tables.append((title, t))
    return tables


def _cell(row) -> str:
    if row is None:
        return "-"
    if row.status != "ok":
        return row.status
    tflops = row.get("tflops")
    mark = " !" if row.get("clock_flags_after") else ""  # measured while throttled or clocked down
    return (f"{row.get('median_ms'):.3f} / {tflops:.0f}" if tflops >= 10 else
            f"{row.get('median_ms'):.3f} / {tflops:.2g}") + mark
