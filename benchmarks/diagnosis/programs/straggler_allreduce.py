"""straggler-rank, plain collective loop (torchrun, NCCL): each step every rank runs its share of bf16 matmuls
and then all-reduces a 128 MB FP32 buffer; the work is split unevenly, the last rank runs 32 matmuls and the others
16, so they wait for it in the all-reduce. Fixed: the same 16*(n+1) matmuls split evenly, 16 + 16/n per rank.
Rank 0 also times its all-reduce (synchronized before and after) and reports it as allreduce_ms: the wait is
the defect's allreduce_ms minus the fixed one's.

    torchrun --nproc-per-node 4 straggler_allreduce.py --variant defect
"""
from __future__ import annotations

import os
import statistics
import time

import torch
import torch.distributed as dist

import harness

CPU_SKIP = "needs torchrun and a process group"
SIZES = {"full": dict(work=16, dim=4096, buffer=32 * 1024 * 1024), "tiny": dict(work=4, dim=8, buffer=64)}


def local_work(variant: str, base: int, rank: int, world: int) -> int:
    if variant == "defect":
        return 2 * base if rank == world - 1 else base
    return base + base // world


def build(variant: str, tiny: bool, dev: torch.device, waits: list[float]):
    s = SIZES["tiny" if tiny else "full"]
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    a = torch.randn(s["dim"], s["dim"], device=dev, dtype=torch.bfloat16) / s["dim"] ** 0.5
    h0 = torch.randn(s["dim"], s["dim"], device=dev, dtype=torch.bfloat16)
    grad = torch.zeros(s["buffer"], device=dev)
    work = local_work(variant, s["work"], rank, world)

    def step() -> torch.Tensor:
        h = h0
        for _ in range(work):
            h = torch.tanh(h @ a)
        grad[: h.numel()].copy_(h.flatten().float())
        harness.sync(dev)
        t0 = time.perf_counter()
        dist.all_reduce(grad)
        harness.sync(dev)
        waits.append((time.perf_counter() - t0) * 1e3)
        return grad

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=40)
    dev = harness.device(args.tiny)
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    waits: list[float] = []

    def extra() -> dict:
        steady = waits[args.warmup:]
        return {"allreduce_ms": [round(w, 4) for w in steady],
                "allreduce_median_ms": round(statistics.median(steady), 4) if steady else None,
                "straggler_rank": int(os.environ.get("WORLD_SIZE", "1")) - 1}

    try:
        harness.run_steps(build(args.variant, args.tiny, dev, waits), args, dev, "straggler_allreduce", extra=extra)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
