"""Sweep W4A16 launches by CUDA-graph time (the benchmark's production timing), per shape and m.

    PYTHONPATH=src python3 benchmarks/w4a16/sweep_graph.py --shapes 5120x13824,4096x4096 --m 1 --out sweep.json

For each (k, n, m): every launch of the space is checked against the fp32 reference, then timed as the
benchmark times a cold point (``graph_timing.time_cuda_graph`` over enough weight copies to read > 2x L2, L2
flushed between replays); cuBLAS fp16 and tinygemm are timed the same way in the same run. The kernels are
compiled first in a pool of processes (one compile per launch, on a small problem with the same
specialisation), so the sweep's time goes to timing. Also times the per-call graph cost of a one-element
add (the floor under any kernel in a graph). Results are written after every shape; the last lines print
the best launches per point.
"""
from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import sys
import time

SPLITS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16)


def space(m: int, extra: dict | None = None, narrow: bool = False) -> list[dict]:
    """Launches worth timing at m tokens (swapped product, TMA loads; block_k is one 128-row group).
    ``narrow``: 16- and 32-column tiles (mma.sync, no warpgroup MMA) with little or no split-k."""
    out = []
    if narrow:
        for bn, split, stages, warps in itertools.product((16, 32), (1, 2), (3, 4, 6, 8), (1, 2, 4)):
            out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=split, num_warps=warps,
                            num_stages=stages, swap_ab=True, tma=True))
    elif m <= 16:
        for bn, split, stages in itertools.product((64, 128, 256), SPLITS, (3, 4, 6)):
            for warps in ((4, 8) if bn == 256 else (4,)):
                out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=split, num_warps=warps,
                                num_stages=stages, swap_ab=True, tma=True))
    else:
        for bm, bn, split, warps, stages in itertools.product((64, 128), (64, 128), (1, 2, 3, 4), (4, 8), (3, 4)):
            out.append(dict(block_m=bm, block_n=bn, block_k=128, split_k=split, num_warps=warps, num_stages=stages,
                            swap_ab=True, tma=True))
    return [{**launch, **(extra or {})} for launch in out]


def fits(launch: dict, k: int, n: int) -> bool:
    return k % (launch["split_k"] * 128) == 0 and n % launch["block_n"] == 0


def _compile_one(args: tuple[int, dict]) -> str:
    """Compile one launch on a small problem with the same specialisation (the on-disk cache keeps it)."""
    m, launch = args
    import torch

    from kernelscope.kernels.marlin.matmul import w4a16_matmul

    k = launch["split_k"] * 256
    n = 256
    try:
        a = torch.randn((m, k), device="cuda").half()
        words = torch.randint(-2**31, 2**31 - 1, (k // 8, n), dtype=torch.int32, device="cuda")
        scales = torch.rand((k // 128, n), device="cuda").half()
        w4a16_matmul(a, words, scales, 128, **launch)
        torch.cuda.synchronize()
        return "ok"
    except Exception as e:  # out of shared memory, etc.: recorded, not fatal
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def precompile(jobs: list, workers: int, compile_one=None) -> dict[str, str]:
    """Run ``compile_one`` (default: this sweep's) over ``jobs`` in a pool of spawned processes; job -> status."""
    ctx = mp.get_context("spawn")
    t0 = time.time()
    with ctx.Pool(workers) as pool:
        res = pool.map(compile_one or _compile_one, jobs, chunksize=1)
    print(f"precompiled {len(jobs)} launches in {time.time() - t0:.1f} s", flush=True)
    return {json.dumps(j, sort_keys=True): r for j, r in zip(jobs, res)}


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s over 4x L2 (the bytes floor's rate, as the benchmark measures)."""
    import torch

    from kernelscope.collect.timing import time_cuda

    src = torch.empty(4 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = time_cuda(lambda: dst.copy_(src), warmup=5, repeats=30, flush_l2=False).median_ms
    return 2 * src.numel() / (copy_ms * 1e-3)


def weight_copies(k: int, n: int, l2_bytes: int, layout: str = "bk") -> tuple:
    """A (k, n) layer's weights (groups of 128, seed 0) and its (words, scales) copies, enough of them for a graph
    to read more than twice L2 (cold weights, as the benchmark times them). ``layout``: the words as
    to_kernel_layout's Bk, or ``"bg"``, to_gluon_layout's (the benchmark's and the tuner's for the Gluon kernel)."""
    from kernelscope.bench.graph_timing import copies_for_cold_l2
    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import to_kernel_layout
    from kernelscope.kernels.marlin.layout_gluon import to_gluon_layout

    wt = make_weights(k, n, 128, "cuda", 0)
    bk, sk = to_kernel_layout(wt.B, wt.s, 128)
    if layout == "bg":
        bk = to_gluon_layout(bk)
    return wt, [(bk, sk)] + [(bk.clone(), sk.clone()) for _ in range(copies_for_cold_l2(k * n // 2, l2_bytes) - 1)]


def run_header() -> tuple:
    """The device's properties and a result document's head (device, UTC time, copy bandwidth), printed once."""
    import torch

    props = torch.cuda.get_device_properties(0)
    bandwidth = copy_bandwidth()
    doc = {"device": props.name, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "copy_bandwidth_bytes_per_s": bandwidth, "rows": []}
    print(f"{props.name}, {doc['utc']}: copy bandwidth {bandwidth / 1e12:.2f} TB/s", flush=True)
    return props, doc


def median_graph_us(fns: list, replays: int, rounds: int = 3) -> float:
    """The median over ``rounds`` of graph_timing.time_cuda_graph's per-call time of ``fns``, in us."""
    import statistics

    from kernelscope.bench.graph_timing import time_cuda_graph

    return statistics.median(time_cuda_graph(fns, replays=replays).median_ms * 1e3 for _ in range(rounds))


def check_and_time(call, ref, variants: list, replays: int, check: bool = True) -> dict:
    """One launch: ``call()`` against the fp32 reference, then ``variants`` (the same launch on each weight copy)
    timed by graph time per call; the row's status, error or time."""
    from kernelscope.bench.graph_timing import time_cuda_graph

    try:
        got = call().float()
        err = ((got - ref).norm() / ref.norm()).item()
        if check and not err < 1e-2:
            return {"status": "wrong", "relative_error": err}
        return {"status": "ok", "us": time_cuda_graph(variants, replays=replays).median_ms * 1e3}
    except Exception as e:
        return {"status": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}


def common_args(p: argparse.ArgumentParser) -> None:
    """The arguments every sweep takes."""
    p.add_argument("--shapes", required=True)
    p.add_argument("--m", default="1")
    p.add_argument("--out", required=True)
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    p.add_argument("--replays", type=int, default=10)


def main() -> int:
    p = argparse.ArgumentParser()
    common_args(p)
    p.add_argument("--extra", default="{}", help="JSON keyword arguments added to every launch, e.g. "
                   '\'{"maxnreg": 80}\'; \'{"_skip_split_sum": true}\' times the launch without its split-k sum '
                   '(results wrong by design, not checked)')
    p.add_argument("--narrow", action="store_true", help="the 16- and 32-column tiles instead (m <= 16)")
    args = p.parse_args()
    extra = json.loads(args.extra)
    check = not extra.get("_skip_split_sum")  # a timing-only variant (no split-k sum): wrong by design
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    ms = [int(x) for x in args.m.split(",")]
    jobs = {}
    for m in ms:
        for launch in space(m, extra, args.narrow):
            if any(fits(launch, k, n) for k, n in shapes):
                jobs[json.dumps((m, launch), sort_keys=True)] = (m, launch)
    compiled = precompile(list(jobs.values()), args.workers)

    import torch

    from kernelscope.bench.graph_timing import copies_for_cold_l2, time_cuda_graph
    from kernelscope.bench.w4a16 import W4A16Case
    from kernelscope.bench.w4a16_impls import build_cublas, build_tinygemm, make_weights
    from kernelscope.kernels.marlin import reference_matmul, to_kernel_layout, w4a16_matmul

    props = torch.cuda.get_device_properties(0)
    l2 = props.L2_cache_size
    bw = copy_bandwidth()
    one = torch.zeros(1, device="cuda")
    floor_graph = time_cuda_graph([lambda: one.add_(1)], replays=20, flush_l2=False).median_ms
    doc = {"device": props.name, "extra": extra, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "copy_bandwidth_bytes_per_s": bw, "graph_ms_one_element_add": floor_graph,
           "torch": torch.__version__, "rows": []}
    print(f"{props.name}: copy {bw / 1e12:.2f} TB/s, one-element add in a graph {floor_graph * 1e3:.2f} us/call",
          flush=True)
    for k, n in shapes:
        wt = make_weights(k, n, 128, "cuda", 0)
        bk, sk = to_kernel_layout(wt.B, wt.s, 128)
        copies = copies_for_cold_l2(k * n // 2, l2)
        bks = [(bk, sk)] + [(bk.clone(), sk.clone()) for _ in range(copies - 1)]
        base = {"cublas": [build_cublas(wt) for _ in range(copies)],
                "tinygemm": [build_tinygemm(wt) for _ in range(copies)]}
        for m in ms:
            case = W4A16Case(m, k, n, 128)
            floor_us = case.bytes_moved / bw * 1e6
            a = torch.randn((m, k), device="cuda").half()
            ref = reference_matmul(a, wt.B, wt.s, 128)
            point = {"k": k, "n": n, "m": m, "floor_us": floor_us}
            for name, fns in base.items():
                t = time_cuda_graph([lambda f=f: f(a) for f in fns], replays=args.replays)
                point[f"{name}_us"] = t.median_ms * 1e3
            tried = []
            for launch in space(m, extra, args.narrow):
                if not fits(launch, k, n):
                    continue
                status = compiled.get(json.dumps((m, launch), sort_keys=True), "ok")
                row = {"launch": launch}
                if status != "ok":
                    row["status"] = status
                    tried.append(row)
                    continue
                row.update(check_and_time(lambda: w4a16_matmul(a, bk, sk, 128, **launch), ref,
                                          [lambda b=b, s=s: w4a16_matmul(a, b, s, 128, **launch) for b, s in bks],
                                          args.replays, check))
                tried.append(row)
            point["tried"] = tried
            ok = sorted((r for r in tried if r.get("status") == "ok"), key=lambda r: r["us"])
            doc["rows"].append(point)
            with open(args.out, "w") as f:
                json.dump(doc, f)
            best = ok[:4]
            print(f"{k}x{n} m={m}: floor {floor_us:.1f} us, cuBLAS {point['cublas_us']:.1f}, tinygemm "
                  f"{point['tinygemm_us']:.1f}; {len(ok)} timed", flush=True)
            for r in best:
                lc = r["launch"]
                print(f"   {r['us']:7.2f} us {100 * floor_us / r['us']:5.1f}% floor  {lc['block_m']}x{lc['block_n']} "
                      f"split {lc['split_k']} st{lc['num_stages']} w{lc['num_warps']}", flush=True)
        del bks, base
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
