"""How fast a kernel that only reads a layer's bytes runs, timed as the W4A16 benchmark times a call.

    PYTHONPATH=src python3 benchmarks/w4a16/read_floor.py --shapes 4096x4096,13824x5120 --out read_floor.json

The targets of issue 17 are fractions of the bytes floor (bytes / copy bandwidth), which counts no per-call cost.
This script asks what any kernel pays per call on these bytes: a Triton kernel that reads a buffer of the layer's
bytes (packed weights, scales, A and C, W4A16Case.bytes_moved) and xors them (one int per program), swept over
block size, warps and grid, and torch's sum of the same buffer. Each is timed by CUDA-graph time per call over
enough copies to read more than twice L2, L2 flushed between replays (graph_timing.time_cuda_graph), beside the
one-element add (the graph's own per-call cost) and the shipped Gluon decode launch (tune_space.gluon_launch, plain)
at m = 1. The table gives the fastest read per layer and the W4A16 launch as % of the floor, and what 75 % / 55 %
of the floor would need.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time

import triton
import triton.language as tl

from sweep_graph import copy_bandwidth, weight_copies  # this folder's sweep


@triton.jit
def _read_xor(x_ptr, out_ptr, numel, per_program, BLOCK: tl.constexpr):
    """Program p xors elements [p * per_program, (p + 1) * per_program) of x, BLOCK at a time."""
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    start = pid * per_program
    for off in range(start, start + per_program, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        acc ^= tl.load(x_ptr + idx, mask=idx < numel, other=0)
    tl.store(out_ptr + pid, tl.xor_sum(acc, axis=0))


def read_launches(numel: int, sms: int) -> list[dict]:
    """The swept reads: block (int32 elements an iteration), warps and grid (1-8 programs an SM, or one block each)."""
    out = []
    for block, warps in itertools.product((2048, 4096, 8192), (4, 8)):
        blocks = triton.cdiv(numel, block)
        for programs in sorted({sms, 2 * sms, 4 * sms, 8 * sms, blocks}):
            if programs <= blocks:
                out.append({"block": block, "num_warps": warps, "programs": programs,
                            "per_program": triton.cdiv(blocks, programs) * block})
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096x4096,5120x5120,13824x5120,5120x13824,3584x18944")
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    import torch

    from kernelscope.bench.graph_timing import copies_for_cold_l2, time_cuda_graph
    from kernelscope.bench.w4a16 import W4A16Case
    from kernelscope.kernels.marlin import reference_matmul
    from kernelscope.kernels.marlin.gluon_args import kernel_kwargs
    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    props = torch.cuda.get_device_properties(0)
    sms, l2 = props.multi_processor_count, props.L2_cache_size
    bandwidth = copy_bandwidth()
    one = torch.zeros(1, device="cuda")
    add_us = time_cuda_graph([lambda: one.add_(1)], replays=20, flush_l2=False).median_ms * 1e3
    doc = {"device": props.name, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "copy_bandwidth_bytes_per_s": bandwidth, "one_element_add_us": add_us, "rows": []}
    print(f"{props.name}, {doc['utc']}: copy bandwidth {bandwidth / 1e12:.2f} TB/s, graph time of a one-element "
          f"add {add_us:.2f} us", flush=True)
    print("| k x n | bytes | floor us | fastest read us (launch) | read % of floor | torch sum us "
          "| W4A16 m = 1 us | W4A16 % of floor | 75 % / 55 % need us |\n|---|---:|---:|---|---:|---:|---:|---:|---:|",
          flush=True)
    for shape in args.shapes.split(","):
        k, n = (int(x) for x in shape.split("x"))
        nbytes = W4A16Case(m=1, k=k, n=n).bytes_moved
        floor_us = nbytes / bandwidth * 1e6
        numel = triton.cdiv(nbytes, 4)
        bufs = [torch.randint(-2**31, 2**31 - 1, (numel, ), dtype=torch.int32, device="cuda")
                for _ in range(copies_for_cold_l2(nbytes, l2))]
        reads = []
        for launch in read_launches(numel, sms):
            outs = [torch.empty(launch["programs"], dtype=torch.int32, device="cuda") for _ in bufs]
            fns = [lambda x=x, o=o: _read_xor[(launch["programs"], )](x, o, numel, launch["per_program"],
                                                                      BLOCK=launch["block"],
                                                                      num_warps=launch["num_warps"])
                   for x, o in zip(bufs, outs)]
            reads.append({**launch, "us": time_cuda_graph(fns, replays=args.replays).median_ms * 1e3})
        torch_us = time_cuda_graph([lambda x=x: x.sum() for x in bufs], replays=args.replays).median_ms * 1e3
        del bufs
        wt, copies = weight_copies(k, n, l2)
        a = torch.randn((1, k), device="cuda").half()
        launch = gluon_launch(k, n, sms, 1)
        kw = kernel_kwargs(launch)
        got = gluon_w4a16(a, copies[0][0], copies[0][1], 128, n, **kw).float()
        ref = reference_matmul(a, wt.B, wt.s, 128)
        err = ((got - ref).norm() / ref.norm()).item()
        w4_us = statistics.median(
            time_cuda_graph([lambda b=b, s=s: gluon_w4a16(a, b, s, 128, n, **kw) for b, s in copies],
                            replays=args.replays).median_ms * 1e3 for _ in range(3))
        del copies
        torch.cuda.empty_cache()
        best = min(reads, key=lambda r: r["us"])
        row = {"k": k, "n": n, "bytes": nbytes, "floor_us": floor_us, "reads": reads, "torch_sum_us": torch_us,
               "w4a16_launch": launch, "w4a16_us": w4_us, "w4a16_relative_error": err}
        doc["rows"].append(row)
        with open(args.out, "w") as f:
            json.dump(doc, f)
        print(f"| {k}x{n} | {nbytes / 2**20:.1f} MiB | {floor_us:.2f} | {best['us']:.2f} ({best['programs']} programs, "
              f"block {best['block']}, {best['num_warps']} warps) | {100 * floor_us / best['us']:.1f} % "
              f"| {torch_us:.2f} | {w4_us:.2f} | {100 * floor_us / w4_us:.1f} % "
              f"| {floor_us / 0.75:.2f} / {floor_us / 0.55:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
