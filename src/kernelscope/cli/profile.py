"""`kernelscope profile`: run one kernel configuration under kernelscope and show the panels.

``kernelscope profile attention --impl flash --seq-len 512`` runs the attention
workload module (kernels/attention/workload.py) through the same runner as
`kernelscope run`, keeps the session file, and draws it as `kernelscope show`
does. ``--impl`` takes every implementation the benchmark knows, so one view
compares them. The Triton kernel is autotuned in a separate process first and
the profiled run pins the chosen config, so the trace holds no tuning launches.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import subprocess
import sys

from kernelscope.cli.common import add_view_args, fail, output_path, positive, render_show, require_gpu
from kernelscope.model import collectors as collector
from kernelscope.model.escape import visible

WORKLOAD = "kernelscope.kernels.attention.workload"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile",
        help="profile one kernel configuration and show it (kernelscope profile attention --help)",
        description="Run one configuration of a shipped kernel under kernelscope and show the panels.",
    )
    p.set_defaults(func=lambda args: _no_target(p))
    targets = p.add_subparsers(dest="target", metavar="KERNEL")
    a = targets.add_parser("attention", help="one attention forward configuration",
                           description="Profile one attention forward configuration; batch and heads default to "
                                       "the benchmark's budget (batch = 16384 / seq_len, heads = 2048 / head_dim).")
    a.add_argument("--impl", default="flash", metavar="IMPL",
                   help="flash, naive, sdpa-flash, sdpa-cudnn, sdpa-efficient or sdpa-math (default flash)")
    a.add_argument("--seq-len", type=positive, default=1024, help="sequence length (default 1024)")
    a.add_argument("--head-dim", type=positive, default=128, help="head dim (default 128)")
    a.add_argument("--batch", type=positive, help="batch size (default 16384 / seq-len, at least 1)")
    a.add_argument("--heads", type=positive, help="heads (default 2048 / head-dim)")
    a.add_argument("--causal", action="store_true", help="causal mask")
    a.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    a.add_argument("--iters", type=positive, default=10, help="profiled calls after the first (default 10)")
    a.add_argument("--config", metavar="BM,BN,WARPS,STAGES|gluon",
                   help="pin the flash config instead of autotuning, or 'gluon' for the Gluon kernel (sm_90)")
    a.add_argument("--counters", action="store_true", help="also run the counter pass (Nsight Compute)")
    a.add_argument("-o", "--output", metavar="FILE", help="session file (default kernelscope-attention-...json)")
    a.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite FILE if it exists")
    add_view_args(a)
    a.set_defaults(func=main_attention)


def _no_target(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _counter_pass(result, workload: list[str], quiet: bool = False) -> int:
    """--counters: the same counter pass as `kernelscope run --counters`, on the same workload."""
    from kernelscope.collect.ncu.counter_pass import CounterRequest, run_counter_pass

    if result.exit_code != 0:
        return 0  # the trace pass already failed; nothing worth re-running under ncu
    print("kernelscope: counter pass: running the workload under ncu ...", file=sys.stderr)

    def progress(line: str) -> None:
        if line.startswith("==PROF== Profiling") and not quiet:
            print("  " + visible(line.rstrip()), file=sys.stderr)  # ncu echoes kernel names

    from kernelscope.collect.child_python import isolated_module

    ok = run_counter_pass(result.session, isolated_module(WORKLOAD, *workload), result.output,
                          CounterRequest(), on_line=progress)
    result.session.save(result.output)
    if not ok:
        reason = visible(result.session.collectors[collector.COUNTERS].reason)
        print(f"kernelscope: error: counter pass failed: {reason}.", file=sys.stderr)
        return 1
    return 0


def _workload_args(args: argparse.Namespace) -> list[str]:
    batch = args.batch if args.batch is not None else max(1, 16384 // args.seq_len)
    heads = args.heads if args.heads is not None else max(1, 2048 // args.head_dim)
    out = ["--impl", args.impl, "--batch", str(batch), "--heads", str(heads), "--seq-len", str(args.seq_len),
           "--head-dim", str(args.head_dim), "--dtype", args.dtype, "--iters", str(args.iters)]
    return out + (["--causal"] if args.causal else [])


def _tune(workload: list[str]) -> str:
    """Autotune the flash kernel in a plain child process; return its config as 'BM,BN,WARPS,STAGES'."""
    from kernelscope.collect.child_python import isolated_module

    r = subprocess.run(isolated_module(WORKLOAD, *workload, "--print-config"), capture_output=True, text=True)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        err = (r.stderr.strip().splitlines() or ["no output"])[-1]
        fail(f"autotuning the flash kernel failed ({err})")
    config = json.loads(lines[-1]).get("config")
    if not config:
        fail("the autotuner chose no flash config; give one with --config BM,BN,WARPS,STAGES")
    return config


def main_attention(args: argparse.Namespace) -> int:
    require_gpu("profile attention", "runs the kernels", "torch", "triton")
    from kernelscope.kernels.attention import IMPLEMENTATIONS

    if args.impl not in IMPLEMENTATIONS:
        fail(f"unknown implementation {args.impl!r}; choose from {', '.join(IMPLEMENTATIONS)}")
    if min(args.seq_len, args.head_dim, args.iters, args.batch or 1, args.heads or 1) < 1:
        fail("--seq-len, --head-dim, --iters, --batch and --heads must be positive")
    if args.config and args.impl != "flash":
        fail("--config pins the Triton kernel's launch config; it only applies to --impl flash")
    out = output_path(args.output if args.output is not None else _dt.datetime.now().strftime(
        f"kernelscope-attention-{args.impl}-s{args.seq_len}-%Y%m%d-%H%M%S.json"), args.force_overwrite,
        what="session file")
    if args.counters:
        from kernelscope.collect.ncu.counter_pass import report_path_for

        output_path(report_path_for(out), args.force_overwrite, what="Nsight Compute report")
    from kernelscope.collect.driver import gpu_available

    ok, why = gpu_available()
    if not ok:
        fail(f"kernelscope profile attention runs the kernels on an NVIDIA GPU, and there is no CUDA GPU here: {why}")

    workload = _workload_args(args)
    if args.impl == "flash":
        config = args.config or _tune(workload)
        if config == "gluon":
            print("kernelscope: flash runs the Gluon kernel (kernels/attention/gluon_hopper.py; warp-specialised at "
                  "head dim 128), the default on sm_90 for these inputs.", file=sys.stderr)
        else:
            print(f"kernelscope: flash config {config} (BLOCK_M, BLOCK_N, warps, stages)"
                  f"{'' if args.config else ', chosen by the autotuner'}.", file=sys.stderr)
        workload += ["--config", config]
    from kernelscope.collect.trace.runner import RunError, run

    try:
        result = run(workload, out, module=WORKLOAD, force=args.force_overwrite)
    except RunError as e:
        fail(str(e))
    counters_failed = _counter_pass(result, workload) if args.counters else 0
    print(visible(f"kernelscope: session written to {out}; view it again with: kernelscope show {out}"),
          file=sys.stderr)
    if result.exit_code != 0:
        print(f"kernelscope: the workload exited with code {result.exit_code}; showing what was collected.",
              file=sys.stderr)
    banner = f"kernelscope profile attention: {' '.join(workload)}"
    render_show(result.session, args, banner=banner)
    return result.exit_code or counters_failed
