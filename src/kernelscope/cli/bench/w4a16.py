"""`kernelscope bench w4a16`: the Triton W4A16 GEMM vs cuBLAS fp16 and torch's int4 tinygemm.

Registered by :mod:`kernelscope.cli.bench` (``add_parser``); its options, output file,
progress bar and GPU check are those of :mod:`kernelscope.cli.bench.common`. The summary prints one
table per layer shape.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from kernelscope.cli.bench.common import (
    ResultsWriter,
    check_timing_args, chosen_impls, int_list, print_tables, progress, require_cuda, results_path,
)
from kernelscope.cli.common import exit_past_profiler_teardown, fail, require_gpu

DEFAULT_M = "1,4,16,64,256"
DEFAULT_SHAPES = "4096x4096,4096x14336,8192x8192,8192x28672,28672x8192"
DEFAULT_IMPLS = "w4a16,cublas,tinygemm"


def add_parser(benches: argparse._SubParsersAction, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = benches.add_parser("w4a16", help="W4A16 GEMM: Triton kernel on Marlin INT4 weights vs cuBLAS fp16 and "
                                         "torch int4 tinygemm",
                           description="C = A @ W with 4-bit weights over token counts m and layer shapes KxN; "
                                       "times, the bytes floor from the measured copy bandwidth, and speedups.")
    p.add_argument("--m", default=DEFAULT_M, metavar="LIST", help=f"comma-separated token counts (default {DEFAULT_M})")
    p.add_argument("--shapes", default=DEFAULT_SHAPES, metavar="LIST",
                   help=f"comma-separated KxN layer shapes (default {DEFAULT_SHAPES})")
    p.add_argument("--groupsize", type=int, default=128, help="rows per scale: 128, or -1 for one (default 128)")
    p.add_argument("--impl", default=DEFAULT_IMPLS, metavar="LIST",
                   help=f"comma-separated implementations (default {DEFAULT_IMPLS}; w4a16-untuned: the shipped "
                        "table or the rule, no first-use tuning; w4a16-gluon: the Gluon decode kernel, Hopper GPUs "
                        "and m <= 64; w4a16-pdl: w4a16's launch as a programmatic dependent launch, where it is "
                        "the Gluon kernel's)")
    p.add_argument("--no-graph", action="store_true", help="do not time N calls captured in one CUDA graph")
    p.add_argument("--no-cupti", action="store_true", help="do not measure CUPTI kernel durations")
    add_common(p)
    p.set_defaults(func=main_w4a16)


def main_w4a16(args: argparse.Namespace) -> int:
    require_gpu("bench w4a16", "times kernels", "torch", "triton")
    from kernelscope.bench.w4a16 import IMPLEMENTATIONS, W4A16Settings, make_cases, parse_shapes, run_w4a16_sweep

    ms = int_list(args.m, "--m")
    impls = chosen_impls(args.impl, IMPLEMENTATIONS)
    try:
        cases = make_cases(ms, parse_shapes(args.shapes), args.groupsize)
    except ValueError as e:
        fail(str(e))
    check_timing_args(args)
    out = results_path(args, "w4a16")
    require_cuda()
    settings = W4A16Settings(warmup=args.warmup, repeats=args.repeats, flush_l2=not args.no_l2_flush,
                             device="cuda", seed=args.seed, graph=not args.no_graph, cupti=not args.no_cupti)
    command = ["kernelscope", *sys.argv[1:]]
    save = ResultsWriter(out, args.force_overwrite)
    with progress(args) as on_progress:
        results = run_w4a16_sweep(cases, {n: IMPLEMENTATIONS[n] for n in impls}, settings, on_progress=on_progress,
                                  command=command, on_row=save)
    save(results)
    print_summary(results, args.width, None if not args.no_color else False)
    failed = sum(r.status != "ok" for r in results.rows)
    print(f"kernelscope: {len(results.rows)} results written to {out}"
          f"{f' ({failed} failed, wrong or out of memory)' if failed else ''}. Plot them with: kernelscope plot {out}",
          file=sys.stderr)
    if settings.cupti:  # CUPTI passes (torch.profiler) ran in this process
        exit_past_profiler_teardown(0)
    return 0


def print_summary(results, width: int | None, color: bool | None, file: Any = None) -> None:
    bw = results.settings.get("copy_bandwidth_bytes_per_s")
    preface = [f"copy bandwidth {bw / 1e9:.0f} GB/s (measured now: device-to-device copy, read + write)"] if bw else []
    print_tables(results, summary_tables(results), width, color, file=file, preface=preface)


def summary_tables(results) -> list[tuple[str, Any]]:
    """(title, Rich table) per layer shape: implementations by m, then w4a16's speedups.

    Each implementation's first line is its time on the basis the % of floor and the speedups use
    (graph time per call where measured, else event time; the label says which), then its event and
    CUPTI kernel times on lines of their own.
    """
    from rich.table import Table

    from kernelscope.bench.w4a16_timing import timing_basis

    groups: dict[tuple, dict[str, dict[int, Any]]] = {}
    for r in results.rows:
        p = r.params
        groups.setdefault((p["k"], p["n"], p["groupsize"]), {}).setdefault(r.impl, {})[p["m"]] = r
    tables = []
    for (k, n, g), by_impl in groups.items():
        ms = sorted({m for cells in by_impl.values() for m in cells})
        t = Table()
        t.add_column("impl (timing)")
        for m in ms:
            t.add_column(f"m={m}", justify="right")
        for impl, cells in by_impl.items():
            ok = [r for r in cells.values() if r.status == "ok"]
            bases = sorted({timing_basis(r.values)[0] for r in ok}) or ["-"]
            t.add_row(f"{impl} ({'/'.join(b.replace('cuda-', '') for b in bases)})", *(_cell(cells.get(m)) for m in ms))
            for key, label in (("median_ms", "event"), ("cupti_median_ms", "cupti")):
                if any(r.get(key) is not None for r in ok) and any(r.get("graph_median_ms") is not None for r in ok):
                    t.add_row(f"  {impl} ({label})", *(_time(cells.get(m), key) for m in ms))
        for impl in [i for i in by_impl if i.startswith("w4a16")]:
            for base in ("cublas", "tinygemm"):
                if base in by_impl:
                    t.add_row(f"{impl} vs {base}", *(_speedup(by_impl[impl].get(m), base) for m in ms))
        tables.append((f"W4A16 GEMM k={k} n={n} groupsize {g}: median ms per call / % of bytes floor; graph = N calls "
                       "in one CUDA graph / N, event = CUDA events around each call, cupti = kernel duration; "
                       "% of floor and speedups on the first line's timing", t))
    return tables


def _cell(row) -> str:
    if row is None:
        return "-"
    if row.status != "ok":
        return "wrong" if row.get("relative_error") is not None else row.status
    mark = " !" if row.get("clock_flags_after") else ""  # measured while throttled or clocked down
    pct = row.get("pct_of_floor")
    from kernelscope.bench.w4a16_timing import timing_basis

    ms = timing_basis(row.values)[1]
    return (f"{ms:.4f} / {pct:.0f}%" if pct >= 1 else f"{ms:.4g} / {pct:.2g}%") + mark


def _time(row, key: str) -> str:
    value = None if row is None or row.status != "ok" else row.get(key)
    return "-" if value is None else f"{value:.4f}"


def _speedup(row, base: str) -> str:
    value = None if row is None else row.get(f"speedup_vs_{base}")
    return "-" if value is None else f"{value:.3g}x"
