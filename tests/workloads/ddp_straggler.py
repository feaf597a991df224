"""A DDP-style training step on every rank of a torchrun job, with a planted straggler.

Each step: forward + backward of a small MLP, then the gradients are all-reduced in
two buckets (as DDP does) on the default process group, and a small all-gather runs
on a second process group. The straggler rank (STRAGGLER_RANK, default 1) first runs
a spin kernel (torch.cuda._sleep, STRAGGLER_CYCLES cycles) inside a region named
"planted_delay", so its all-reduce starts later and the other ranks wait for it; the
trace holds that kernel's measured duration, which the tests compare the waits with.
Recorded by kernelscope, every rank spins once more after the first step, then all-reduces
one number (region "head_start"): each host then runs ahead of its GPU, every step starts
on every GPU together, and a step's arrivals differ by the planted delay only, not by the
hosts' launch times.

Two ways to record it:
  torchrun --nproc-per-node 2 ddp_straggler.py --trace-dir DIR   (torch.profiler per rank,
      tensorboard_trace_handler: one DIR/<host>_rank<R>.<ts>.pt.trace.json.gz per rank)
  kernelscope run -o s.json -- torchrun --nproc-per-node 2 ddp_straggler.py   (kernelscope records)
"""
from __future__ import annotations

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-dir", help="record with torch.profiler into this directory")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    straggler = int(os.environ.get("STRAGGLER_RANK", "1"))
    cycles = int(os.environ.get("STRAGGLER_CYCLES", "6000000"))
    head_start_cycles = 10 * cycles  # 30 ms on an H200: the hosts stayed ahead of their GPUs at every later step
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
    for p in model.parameters():  # DDP broadcasts rank 0's parameters at construction
        dist.broadcast(p.data, 0)
    side = dist.new_group(list(range(world)))  # a second process group
    x = torch.randn(512, 1024, device="cuda")
    params = list(model.parameters())
    buckets = [params[: len(params) // 2], params[len(params) // 2:]]
    trace_each_step = bool(args.trace_dir)

    def step() -> None:
        with torch.profiler.record_function("forward_backward"):
            model.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
        if rank == straggler:
            with torch.profiler.record_function("planted_delay"):
                torch.cuda._sleep(cycles)
        for i, bucket in enumerate(buckets):
            with torch.profiler.record_function(f"allreduce_bucket{i}"):
                flat = torch.cat([p.grad.flatten() for p in bucket])
                dist.all_reduce(flat)
                flat /= world
        with torch.profiler.record_function("allgather_stats"):
            stats = torch.full((256,), float(rank), device="cuda")
            out = torch.empty(256 * world, device="cuda")
            dist.all_gather_into_tensor(out, stats, group=side)
        if trace_each_step:  # under the profiler's schedule each step is closed (as recorded in tests/data/ranks)
            torch.cuda.synchronize()
        # Otherwise no synchronize per step: the host queues ahead, so every rank's GPU starts the next step as
        # soon as the all-gather ends (together everywhere), and the ranks differ by the planted delay.

    def head_start() -> None:
        # After the first step (NCCL's communicators made, cuBLAS loaded) the GPUs have caught up with their hosts:
        # a step would then start when its host launches it, and the ranks would arrive at the all-reduce apart by
        # their hosts' launch times as well as by the planted delay (2x H200, 2026-11-28: both GPUs idle 3 ms of
        # that step, rank 0 waited 2.72 ms for a 3.03 ms delay; 3.03 ms at every later step). A spin on every rank
        # keeps each GPU busy while its host queues the next steps, and the all-reduce after it ends on every GPU
        # at once, so that every later step starts on every rank together.
        with torch.profiler.record_function("head_start"):
            torch.cuda._sleep(head_start_cycles)
            dist.all_reduce(torch.zeros(1, device="cuda"))

    t0 = time.perf_counter()
    if args.trace_dir:
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        handler = tensorboard_trace_handler(args.trace_dir, worker_name=f"{socket.gethostname()}_rank{rank}",
                                           use_gzip=True)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=1, warmup=1, active=args.steps - 2), on_trace_ready=handler) as prof:
            for i in range(args.steps):
                step()
                if i == args.steps - 1:  # the trace is written at this prof.step(): the GPU work must be done
                    torch.cuda.synchronize()
                prof.step()
    else:
        for i in range(args.steps):
            if i == 1:
                head_start()
            step()
        torch.cuda.synchronize()
    dist.barrier()
    print(f"rank {rank}/{world}: {args.steps} steps in {time.perf_counter() - t0:.3f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
