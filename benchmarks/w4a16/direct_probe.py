"""A probe: the W4A16 m <= 8 product with plain loads instead of the TMA pipeline, summed through clusters.

    PYTHONPATH=src python3 benchmarks/w4a16/direct_probe.py --shapes 4096x4096,5120x5120 --out direct_probe.json

Why: ``tma_read.py`` measured the Gluon kernel's copy pipeline alone (a producer warp's TMA copies into STAGES
stages, a consumer that only loads them) at 51.8 % of the bytes floor at 4096x4096 m = 1 and 63.3 % at 5120x5120,
while a kernel of plain loads at full occupancy (``read_floor.py``) read the same bytes at 60 % / 71.5 %. So the
4096x4096 target (55 %) is out of the TMA design's reach whatever its consumer does. This probe asks how near a
design of plain loads comes: each program is one warpgroup (no producer), takes NB = KB / S consecutive k blocks
of one 64-column tile, loads each block's words (Bg), activations and scales straight into registers one block
ahead of its mma.sync products, and the tile's S programs are one thread-block cluster that sums through
distributed shared memory (``gluon_cluster``, as ``gluon_w4a16(..., cluster=S)``). Each launch is checked against
the fp32 reference, then timed by CUDA-graph time per call with cold weights, beside the shipped launches.
Not a shipped kernel: a measurement.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from kernelscope.kernels.marlin.gluon_cluster import (_cluster_arrive, _cluster_init, _cluster_send,
                                                       _cluster_total, extra_bytes, launch_in_clusters)
from kernelscope.kernels.marlin.gluon_hopper import _nibble_slices, _slice_operand
from kernelscope.kernels.marlin.gluon_store import _store_c, _tile_offsets

WORDS = gl.constexpr(16)
BLOCK_N = gl.constexpr(64)
PACK_K = gl.constexpr(128)


@gluon.jit
def _load_block(w_ptr, a_ptr, s_ptr, t, kb, M, N, K, w_offs, a_toks, a_ks, s_cols, a_layout: gl.constexpr,
                BLOCK_M: gl.constexpr):
    """Block kb of tile t: its (64, 16) words, its four 32-deep activation slices and its 64 scales, as registers."""
    words = gl.load(w_ptr + (kb * N + t * BLOCK_N) * WORDS + w_offs)
    base = a_ptr + gl.expand_dims(a_toks, 0) * K + kb * PACK_K + gl.expand_dims(a_ks, 1)
    mask = gl.expand_dims(a_toks < M, 0)
    a0 = gl.load(base, mask=mask, other=0.0)
    a1 = gl.load(base + 32, mask=mask, other=0.0)
    a2 = gl.load(base + 64, mask=mask, other=0.0)
    a3 = gl.load(base + 96, mask=mask, other=0.0)
    scale = gl.load(s_ptr + kb * N + t * BLOCK_N + s_cols)
    return words, a0, a1, a2, a3, scale


@gluon.jit
def _mma_block(acc, blk, w_layout: gl.constexpr, acc_layout: gl.constexpr, BLOCK_M: gl.constexpr):
    """acc + a block's four 32-deep mma.sync products times its scales (fp32), as the kernel's ``_sync_block``."""
    words, a0, a1, a2, a3, scale = blk
    t0, t1, t2, t3 = _nibble_slices(words)
    zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=acc_layout)
    p0 = mma_v2(_slice_operand(t0, w_layout, False), a0, zero)
    p1 = mma_v2(_slice_operand(t1, w_layout, False), a1, zero)
    p2 = mma_v2(_slice_operand(t2, w_layout, False), a2, zero)
    p3 = mma_v2(_slice_operand(t3, w_layout, False), a3, zero)
    return acc + ((p0 + p1) + (p2 + p3)) * gl.expand_dims(scale.to(gl.float32), 1)


@gluon.jit
def _direct(w_ptr, a_ptr, s_ptr, c_ptr, M, N, K, KB, S: gl.constexpr, NB: gl.constexpr, BLOCK_M: gl.constexpr,
            UNROLL: gl.constexpr, num_warps: gl.constexpr):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
    w_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=acc_layout, k_width=2)
    words_layout: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [8, 0]], lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]],
        warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[BLOCK_N, WORDS])
    pid = gl.program_id(0)
    t = pid // S
    rank = pid % S
    k0 = rank * NB
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, words_layout))
    wds = gl.arange(0, WORDS, layout=gl.SliceLayout(0, words_layout))
    w_offs = gl.expand_dims(cols, 1) * WORDS + gl.expand_dims(wds, 0)
    a_toks = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, a_layout))
    a_ks = gl.arange(0, 32, layout=gl.SliceLayout(1, a_layout))
    s_cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
    acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=acc_layout)
    if S > 1:
        # the receive region is found past Triton's own shared memory (gluon_cluster), which a kernel that uses
        # none does not declare: the partial passes through one small buffer at the end, which declares it
        buf = gl.allocate_shared_memory(gl.float32, [BLOCK_N, BLOCK_M], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        _cluster_init(S, BLOCK_N, BLOCK_M)
        _cluster_arrive()
    if UNROLL:  # every block's loads written first (ptxas issues them together: all of them in flight at once)
        b0 = _load_block(w_ptr, a_ptr, s_ptr, t, k0, M, N, K, w_offs, a_toks, a_ks, s_cols, a_layout, BLOCK_M)
        if NB > 1:
            b1 = _load_block(w_ptr, a_ptr, s_ptr, t, k0 + 1, M, N, K, w_offs, a_toks, a_ks, s_cols, a_layout,
                             BLOCK_M)
        if NB > 2:
            b2 = _load_block(w_ptr, a_ptr, s_ptr, t, k0 + 2, M, N, K, w_offs, a_toks, a_ks, s_cols, a_layout,
                             BLOCK_M)
        if NB > 3:
            b3 = _load_block(w_ptr, a_ptr, s_ptr, t, k0 + 3, M, N, K, w_offs, a_toks, a_ks, s_cols, a_layout,
                             BLOCK_M)
        acc = _mma_block(acc, b0, w_layout, acc_layout, BLOCK_M)
        if NB > 1:
            acc = _mma_block(acc, b1, w_layout, acc_layout, BLOCK_M)
        if NB > 2:
            acc = _mma_block(acc, b2, w_layout, acc_layout, BLOCK_M)
        if NB > 3:
            acc = _mma_block(acc, b3, w_layout, acc_layout, BLOCK_M)
    else:
        nxt = _load_block(w_ptr, a_ptr, s_ptr, t, k0, M, N, K, w_offs, a_toks, a_ks, s_cols, a_layout, BLOCK_M)
        for i in range(NB - 1):  # the next block's loads in flight while this one is multiplied
            cur = nxt
            nxt = _load_block(w_ptr, a_ptr, s_ptr, t, k0 + i + 1, M, N, K, w_offs, a_toks, a_ks, s_cols, a_layout,
                              BLOCK_M)
            acc = _mma_block(acc, cur, w_layout, acc_layout, BLOCK_M)
        acc = _mma_block(acc, nxt, w_layout, acc_layout, BLOCK_M)
    if S > 1:
        buf.store(acc)
        acc = buf.load(acc_layout)
        offs = _tile_offsets(BLOCK_M, acc_layout)
        if rank == 0:
            _store_c(c_ptr, t, M, N, _cluster_total(acc, offs, S, BLOCK_N, BLOCK_M), BLOCK_M, acc_layout)
        else:
            _cluster_send(acc, offs, rank, S, BLOCK_N, BLOCK_M)
    else:
        _store_c(c_ptr, t, M, N, acc, BLOCK_M, acc_layout)


def direct_w4a16(a: torch.Tensor, bg: torch.Tensor, s: torch.Tensor, n: int, out: torch.Tensor, *, cluster: int,
                 maxnreg: int | None = None, unroll: bool = False) -> torch.Tensor:
    """``a (m <= 8, k) @ W`` for Bg words and groups of 128 (s (k / 128, n)), tiles x ``cluster`` programs;
    ``unroll`` (at most 4 blocks a program): every block's loads before the first product."""
    m, k = a.shape
    kb = k // 128
    assert m <= 8 and kb % cluster == 0 and n % 64 == 0 and s.shape == (kb, n) and (kb // cluster <= 4 or not unroll)
    programs = n // 64 * cluster
    args = (bg, a, s, out, m, n, k, kb)
    kwargs = dict(S=cluster, NB=kb // cluster, BLOCK_M=8, UNROLL=unroll, num_warps=4,
                  **({"maxnreg": maxnreg} if maxnreg else {}))
    if cluster > 1:
        launch_in_clusters(_direct, programs, cluster, extra_bytes(cluster, 64, 8), args, kwargs)
    else:
        _direct[(programs, )](*args, **kwargs)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096x4096,5120x5120,13824x5120")
    p.add_argument("--clusters", default="2,4,8")
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--m", default="1,8")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    from sweep_graph import median_graph_us, run_header, weight_copies  # this folder's sweep

    from kernelscope.bench.w4a16 import W4A16Case
    from kernelscope.kernels.marlin import reference_matmul
    from kernelscope.kernels.marlin.gluon_args import kernel_kwargs
    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16
    from kernelscope.kernels.marlin.tune_space import gluon_candidates

    props, doc = run_header()
    sms, l2 = props.multi_processor_count, props.L2_cache_size
    bandwidth = doc["copy_bandwidth_bytes_per_s"]

    def timed(fns: list) -> float:
        return median_graph_us(fns, args.replays)

    print("| k x n | m | launch | us | % of floor | relative error |\n|---|---:|---|---:|---:|---:|")
    for shape in args.shapes.split(","):
        k, n = (int(x) for x in shape.split("x"))
        wt, copies = weight_copies(k, n, l2, layout="bg")
        for m in [int(x) for x in args.m.split(",")]:
            floor_us = W4A16Case(m=m, k=k, n=n).bytes_moved / bandwidth * 1e6
            a = torch.randn((m, k), device="cuda").half()
            ref = reference_matmul(a, wt.B, wt.s, 128)
            outs = [torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16) for _ in copies]
            runs = [(str(launch), lambda b, s, o, kw=kernel_kwargs(launch): gluon_w4a16(a, b, s, 128, n, out=o, **kw))
                    for launch in gluon_candidates(m, k, n, sms)]
            for size in (int(x) for x in args.clusters.split(",")):
                if (k // 128) % size:
                    continue
                for regs, unroll in ((None, False), (64, False), (None, True), (128, True)):
                    if unroll and k // 128 // size > 4:
                        continue
                    runs.append((f"direct, clusters of {size}, {regs or 'free'} registers{', unrolled' * unroll}",
                                 lambda b, s, o, size=size, regs=regs, unroll=unroll: direct_w4a16(
                                     a, b, s, n, o, cluster=size, maxnreg=regs, unroll=unroll)))
            for name, run in runs:
                try:
                    got = run(copies[0][0], copies[0][1], outs[0]).float()
                    torch.cuda.synchronize()
                    err = ((got - ref).norm() / ref.norm()).item()
                    us = timed([lambda b=b, s=s, o=o: run(b, s, o) for (b, s), o in zip(copies, outs)])
                except Exception as e:  # a probe: record the failure, go on
                    doc["rows"].append({"k": k, "n": n, "m": m, "launch": name, "error": str(e)[:300]})
                    print(f"| {k}x{n} | {m} | {name} | failed: {str(e)[:120]} | | |", flush=True)
                    continue
                doc["rows"].append({"k": k, "n": n, "m": m, "launch": name, "us": us, "floor_us": floor_us,
                                    "relative_error": err})
                print(f"| {k}x{n} | {m} | {name} | {us:.2f} | {100 * floor_us / us:.1f} % | {err:.1e} |", flush=True)
                with open(args.out, "w") as f:
                    json.dump(doc, f)
        del copies
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
