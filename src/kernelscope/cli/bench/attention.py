"""`kernelscope bench attention`: the Triton flash attention forward vs PyTorch naive and SDPA backends."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from kernelscope.cli.bench.common import (
    ResultsWriter,
    check_timing_args, chosen_impls, int_list, names, print_tables, progress, require_cuda, results_path,
)
from kernelscope.cli.common import fail, positive, require_gpu

DEFAULT_IMPLS = "flash,naive,sdpa-flash,sdpa-cudnn"


def add_parser(benches: argparse._SubParsersAction, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
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
    add_common(a)
    a.set_defaults(func=main_attention)


def main_attention(args: argparse.Namespace) -> int:
    require_gpu("bench attention", "times kernels", "torch", "triton")
    from kernelscope.bench.attention import SweepSettings, make_cases, run_attention_sweep
    from kernelscope.kernels.attention import IMPLEMENTATIONS, get_impl

    seqs = int_list(args.seq_lengths, "--seq-lengths")
    head_dims = int_list(args.head_dim, "--head-dim")
    impls = chosen_impls(args.impl, IMPLEMENTATIONS)
    causal = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    try:
        cases = make_cases(seqs, head_dims, causal, names(args.dtype), args.tokens, args.hidden, args.batch, args.heads)
    except ValueError as e:
        fail(str(e))
    check_timing_args(args)
    out = results_path(args, "attention")
    require_cuda()
    settings = SweepSettings(warmup=args.warmup, repeats=args.repeats, flush_l2=not args.no_l2_flush,
                             device="cuda", seed=args.seed)
    fns = {name: get_impl(name) for name in impls}
    command = ["kernelscope", *sys.argv[1:]]
    save = ResultsWriter(out, args.force_overwrite)
    with progress(args) as on_progress:
        results = run_attention_sweep(cases, fns, settings, on_progress=on_progress, command=command,
                                      on_row=save, describe=_describe_attention)
    save(results)
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


def _print_summary(results, args: argparse.Namespace) -> None:
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
