"""The loop every program shares: parse --variant/--steps/--warmup/--tiny, run warm-up then timed steps,
call kernelscope.step() after each, and print one JSON line with the steady-state step times.

Each step ends with torch.cuda.synchronize() (as a loop that logs its loss once per step would), so a step's
wall time is the time the program really takes per step. Under torchrun only rank 0 prints.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Callable

import torch

try:  # does nothing outside `kernelscope run`
    import kernelscope
except ImportError:  # run without PYTHONPATH=src
    kernelscope = None

VARIANTS = ("defect", "fixed", "control")


def parse(argv: list[str] | None, variants: tuple[str, ...], steps: int, warmup: int = 5) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--variant", choices=variants, default=variants[0])
    p.add_argument("--steps", type=int, default=steps, help="timed steps after the warm-up")
    p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--tiny", action="store_true", help="tiny sizes (CPU tests)")
    return p.parse_args(argv)


def device(tiny: bool) -> torch.device:
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    if not tiny:
        raise SystemExit("this program needs a CUDA GPU (or --tiny on the CPU)")
    return torch.device("cpu")


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def run_steps(step: Callable[[], object], args: argparse.Namespace, dev: torch.device, name: str,
              extra: Callable[[], dict] | None = None) -> list[float]:
    """Warm up, then time each step (synchronized); print {"step_ms": [...], ...} once (rank 0)."""
    times: list[float] = []
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        step()
        sync(dev)
        t1 = time.perf_counter()
        if i >= args.warmup:
            times.append((t1 - t0) * 1e3)
        if kernelscope is not None:
            kernelscope.step()
    if int(os.environ.get("RANK", "0")) == 0:
        out = {"program": name, "variant": args.variant, "step_ms": [round(t, 4) for t in times],
               "median_ms": round(statistics.median(times), 4) if times else None,
               "world_size": int(os.environ.get("WORLD_SIZE", "1")), "warmup": args.warmup}
        if extra is not None:
            out.update(extra())
        print(json.dumps(out), flush=True)
    return times
