"""What the Gluon W4A16 kernel's copy pipeline costs by itself at m = 1, timed as the benchmark times a call.

    PYTHONPATH=src python3 benchmarks/w4a16/tma_read.py --shapes 4096x4096,5120x5120 --out tma_read.json

The eighth session's bare read (``read_floor.py``, ld.global) reached 60.8 % / 71.7 % of the bytes floor at
4096x4096 / 5120x5120, the W4A16 kernel 42-52 %. This script asks which part of the kernel holds it there: the
same warp-specialised TMA pipeline (a producer warp, STAGES stages, ready / empty mbarriers) with a consumer that
only loads each stage's words from shared memory (no unpack, no MMA, no split-tile sum), in three copy patterns:

* ``kernel``: each unit's words, activations and scales, the kernel's three copies (``gluon_copies``' functions);
* ``words``: only the words, in the kernel's unit order (stream-K, tile-major);
* ``box<R>``: only the words, in boxes of R rows of 64 bytes, each program a contiguous share of them;
* ``words+acts``, ``words+scales``: the words and one of the other two copies;
* ``kernel-tiled``, ``words+scales-tiled``: as ``kernel`` and ``words+scales`` with the scales regrouped tile-major
  (each program's blocks' scales contiguous; the same bytes, random values).

Each is timed by CUDA-graph time per call over enough weight copies to read more than twice L2, L2 flushed between
replays (``graph_timing.time_cuda_graph``), beside the W4A16 kernel's own candidates (``tune_space.gluon_candidates``)
and the fastest bare read of ``read_floor.py``. The table gives each as % of the bytes floor.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernelscope.kernels.marlin.gluon_copies import _copy_activations, _copy_scales, _copy_words, _segment

WORDS = gl.constexpr(16)  # int32 words of a 64-byte Bg row (128 k of one column)


@gluon.jit
def _reader(w_smem, ready, empty, out_ptr, U, P, STAGES: gl.constexpr, BOX: gl.constexpr):
    """The consumer: each stage's words into registers (as the kernel's consumer loads them), summed, released."""
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    start, end = _segment(gl.program_id(0), P, U)
    acc = gl.zeros([BOX, WORDS], gl.int32, layout=layout)
    for b in range(0, end - start):
        mbarrier.wait(ready.index(b % STAGES), (b // STAGES) & 1)
        acc += w_smem.index(b % STAGES).load(layout)
        mbarrier.arrive(empty.index(b % STAGES), count=1)
    gl.store(out_ptr + gl.program_id(0), gl.sum(gl.sum(acc, axis=1), axis=0))


@gluon.jit
def _copier(bufs, bars, descs, N, KB, U, P, STAGES: gl.constexpr, MODE: gl.constexpr, BOX: gl.constexpr,
            NBYTES: gl.constexpr):
    """The producer warp: MODE 0 the kernel's three copies a unit, 1 its words only, 2 contiguous boxes of words,
    3 its words and activations, 4 its words and scales; 5 and 6 as 0 and 4 with the scales regrouped tile-major
    (a tile's blocks' scales contiguous: s_t[t * KB + kb] holds the tile's 64 scales of block kb)."""
    w_desc, a_desc, s_desc = descs
    ready, empty = bars
    w_smem = bufs[0]
    start, end = _segment(gl.program_id(0), P, U)
    for u in range(start, end):
        b = u - start
        if MODE == 0:
            _copy_words(bufs, bars, descs, u, b, N, False, STAGES, False, KB)
            _copy_activations(bufs, bars, a_desc, u, b, STAGES, KB)
            _copy_scales(bufs, bars, s_desc, u, b, N, False, 1, STAGES, KB)
        elif MODE >= 3:
            t = u // KB
            stage = b % STAGES
            mbarrier.wait(empty.index(stage), ((b // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(stage), NBYTES)
            tma.async_copy_global_to_shared(w_desc, [(u - t * KB) * N + t * BOX, 0], ready.index(stage),
                                            w_smem.index(stage))
            if MODE != 4 and MODE != 6:
                _copy_activations(bufs, bars, a_desc, u, b, STAGES, KB)
            if MODE == 4:
                _copy_scales(bufs, bars, s_desc, u, b, N, False, 1, STAGES, KB)
            elif MODE >= 5:  # tile-major scales: unit u's 64 scales are row u
                tma.async_copy_global_to_shared(s_desc, [u * 64], ready.index(stage), bufs[2].index(stage))
        else:
            stage = b % STAGES
            mbarrier.wait(empty.index(stage), ((b // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(stage), w_desc.block_type.nbytes)
            if MODE == 1:
                t = u // KB
                row = (u - t * KB) * N + t * BOX
            else:
                row = u * BOX
            tma.async_copy_global_to_shared(w_desc, [row, 0], ready.index(stage), w_smem.index(stage))


@gluon.jit
def _tma_read(w_desc, a_desc, s_desc, out_ptr, N, KB, U, P, STAGES: gl.constexpr, MODE: gl.constexpr,
              NBYTES: gl.constexpr, num_warps: gl.constexpr):
    BOX: gl.constexpr = w_desc.block_type.shape[0]
    w_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BOX, WORDS], w_desc.layout)
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 8, 128], a_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 64], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (_reader, (w_smem, ready, empty, out_ptr, U, P, STAGES, BOX)),
        (_copier, ((w_smem, a_smem, s_smem), (ready, empty), (w_desc, a_desc, s_desc), N, KB, U, P, STAGES, MODE,
                   BOX, NBYTES)),
    ], [1], [24])


def tma_read(a: torch.Tensor, words: torch.Tensor, s: torch.Tensor, n: int, out: torch.Tensor, *, mode: str,
             programs: int, stages: int) -> None:
    """One launch of the copy pipeline over a layer's Bg words (``mode``: kernel, words or box<R>)."""
    k = a.shape[1]
    box = int(mode[3:]) if mode.startswith("box") else 64
    kb = k // 128
    units = n // 64 * kb if not mode.startswith("box") else kb * n // box
    w_desc = TensorDescriptor.from_tensor(words, [box, WORDS.value], gl.NVMMASharedLayout(0, 32, rank=2))
    a_desc = TensorDescriptor.from_tensor(a, [8, 128], gl.NVMMASharedLayout.get_default_for([8, 128], gl.float16))
    s_desc = TensorDescriptor.from_tensor(s.view(-1), [64], gl.NVMMASharedLayout(0, 16, rank=1))
    code = {"kernel": 0, "words": 1, "words+acts": 3, "words+scales": 4, "kernel-tiled": 5,
            "words+scales-tiled": 6}.get(mode, 2)
    nbytes = 4096 + (2048 if code in (3, 5) else 0) + (128 if code in (4, 5, 6) else 0)  # MODE >= 3's copies
    _tma_read[(programs, )](w_desc, a_desc, s_desc, out, n, kb, units, programs, STAGES=stages, MODE=code,
                            NBYTES=nbytes, num_warps=4, maxnreg=96)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096x4096,5120x5120")
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--modes", default="kernel,words,box64,box128,box256")
    p.add_argument("--stages", default="4,6,8")
    p.add_argument("--grids", default="", help="programs to try (default: the W4A16 candidates', one and two an SM)")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    from read_floor import _read_xor, read_launches  # this folder's bare read
    from sweep_graph import median_graph_us, run_header, weight_copies

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

    for shape in args.shapes.split(","):
        k, n = (int(x) for x in shape.split("x"))
        floor_us = W4A16Case(m=1, k=k, n=n).bytes_moved / bandwidth * 1e6
        wt, copies = weight_copies(k, n, l2, layout="bg")
        a = torch.randn((1, k), device="cuda").half()
        ref = reference_matmul(a, wt.B, wt.s, 128)
        rows = []
        for launch in gluon_candidates(1, k, n, sms):
            kw = kernel_kwargs(launch)
            got = gluon_w4a16(a, copies[0][0], copies[0][1], 128, n, **kw).float()
            err = ((got - ref).norm() / ref.norm()).item()
            us = timed([lambda b=b, s=s: gluon_w4a16(a, b, s, 128, n, **kw) for b, s in copies])
            rows.append({"what": "w4a16", "launch": launch, "us": us, "relative_error": err})
        sums = torch.zeros(4 * sms, dtype=torch.int32, device="cuda")
        grids = ([int(g) for g in args.grids.split(",")] if args.grids
                 else sorted({r["launch"]["programs"] for r in rows} | {sms, 2 * sms}))
        for mode, programs, stages in itertools.product(args.modes.split(","), grids,
                                                        [int(x) for x in args.stages.split(",")]):
            box = int(mode[3:]) if mode.startswith("box") else 64
            if programs > (k // 128) * n // box:
                continue
            us = timed([lambda b=b, s=s: tma_read(a, b, s, n, sums, mode=mode, programs=programs, stages=stages)
                        for b, s in copies])
            rows.append({"what": f"tma {mode}", "programs": programs, "stages": stages, "us": us})
        del copies
        numel = W4A16Case(m=1, k=k, n=n).bytes_moved // 4
        from kernelscope.bench.graph_timing import copies_for_cold_l2
        bufs = [torch.randint(-2**31, 2**31 - 1, (numel, ), dtype=torch.int32, device="cuda")
                for _ in range(copies_for_cold_l2(4 * numel, l2))]
        for launch in read_launches(numel, sms):
            outs = [torch.empty(launch["programs"], dtype=torch.int32, device="cuda") for _ in bufs]
            us = timed([lambda x=x, o=o: _read_xor[(launch["programs"], )](x, o, numel, launch["per_program"],
                                                                           BLOCK=launch["block"],
                                                                           num_warps=launch["num_warps"])
                        for x, o in zip(bufs, outs)])
            rows.append({"what": "ld.global read", **launch, "us": us})
        del bufs
        torch.cuda.empty_cache()
        doc["rows"].append({"k": k, "n": n, "floor_us": floor_us, "rows": rows})
        with open(args.out, "w") as f:
            json.dump(doc, f)
        print(f"\n{k}x{n}: floor {floor_us:.2f} us\n| what | launch | us | % of floor |\n|---|---|---:|---:|")
        best: dict[str, dict] = {}
        for r in rows:
            if r["what"] not in best or r["us"] < best[r["what"]]["us"]:
                best[r["what"]] = r
        for r in rows:
            if r["what"] == "w4a16" or r is best[r["what"]]:
                launch = r.get("launch") or {x: r[x] for x in ("programs", "stages", "block", "num_warps") if x in r}
                print(f"| {r['what']} | {launch} | {r['us']:.2f} | {100 * floor_us / r['us']:.1f} % |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
