"""straggler-rank, DDP training (torchrun, NCCL): the data is sharded unevenly, the last rank gets twice the batch
of the others (b on ranks 0..n-2, 2b on rank n-1), so at every backward's gradient all-reduce the other ranks wait
for it. Fixed: the same (n+1)*b samples split evenly, (n+1)*b/n per rank.

    torchrun --nproc-per-node 2 straggler_ddp.py --variant defect
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import harness

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


if __name__ == "__main__":
    main()
