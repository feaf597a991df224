"""straggler-rank: one rank of a torchrun job does more work, so the others wait at each collective.

Each function is one program: its docstring says what it plants, and it returns the names the program
defines (build, main, SIZES, CPU_SKIP and its helpers). ``python run.py NAME --variant V`` runs one.
"""
from __future__ import annotations

import os
import statistics
import time

from torch.nn.parallel import DistributedDataParallel
import torch
import torch.distributed as dist

import harness


def straggler_ddp() -> dict:
    """straggler-rank, DDP training (torchrun, NCCL): the data is sharded unevenly, the last rank gets twice the batch
    of the others (b on ranks 0..n-2, 2b on rank n-1), so at every backward's gradient all-reduce the other ranks wait
    for it. Fixed: the same (n+1)*b samples split evenly, (n+1)*b/n per rank.

        torchrun --nproc-per-node 2 run.py straggler_ddp --variant defect
    """
    CPU_SKIP = "needs torchrun and a process group; defect and fixed split the samples differently"
    SIZES = {"full": dict(batch=4096, hidden=4096, layers=4), "tiny": dict(batch=4, hidden=8, layers=2)}

    def local_batch(variant: str, base: int, rank: int, world: int) -> int:
        if variant == "defect":
            return 2 * base if rank == world - 1 else base
        return (world + 1) * base // world

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)
        layers: list[torch.nn.Module] = []
        for _ in range(s["layers"]):
            layers += [torch.nn.Linear(s["hidden"], s["hidden"]), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(s["hidden"], 1)).to(dev)
        ddp = DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
        torch.manual_seed(1 + rank)
        n = local_batch(variant, s["batch"], rank, world)
        x = torch.randn(n, s["hidden"], device=dev)
        y = torch.randn(n, 1, device=dev)

        def step() -> torch.Tensor:
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                out = ddp(x)
            loss = torch.nn.functional.mse_loss(out.float(), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=30)
        dev = harness.device(args.tiny)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        try:
            harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "straggler_ddp",
                              extra=lambda: {"straggler_rank": int(os.environ.get("WORLD_SIZE", "1")) - 1})
        finally:
            dist.destroy_process_group()

    return locals()


def straggler_allreduce() -> dict:
    """straggler-rank, plain collective loop (torchrun, NCCL): each step every rank runs its share of bf16 matmuls
    and then all-reduces a 128 MB FP32 buffer; the work is split unevenly, the last rank runs 32 matmuls and the others
    16, so they wait for it in the all-reduce. Fixed: the same 16*(n+1) matmuls split evenly, 16 + 16/n per rank.
    Rank 0 also times its all-reduce (synchronized before and after) and reports it as allreduce_ms: the wait is
    the defect's allreduce_ms minus the fixed one's.

        torchrun --nproc-per-node 4 run.py straggler_allreduce --variant defect
    """
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

    return locals()
