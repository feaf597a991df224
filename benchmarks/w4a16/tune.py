"""Sweep launch configurations of the Triton W4A16 kernel on the GPU, per (k, n, m), against cuBLAS fp16.

    PYTHONPATH=src python3 benchmarks/w4a16/tune.py --out tune.json [--deadline 400]

Every configuration is checked against the fp32 reference first (a wrong one is recorded, never timed),
then timed like the benchmark (CUDA events, L2 flushed before each call, median). Results are written
after every shape, so a run cut short keeps what it measured. The last lines print the best per point.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

import torch

from kernelscope.collect.timing import time_cuda
from kernelscope.bench.w4a16 import DEFAULT_MS, DEFAULT_SHAPES, W4A16Case, make_weights, relative_error
from kernelscope.kernels.marlin import to_kernel_layout, w4a16_matmul


def candidates(m: int) -> list[dict]:
    """The launch configurations worth trying at this m (PTX unpack, transposed weight loads, prefetch)."""
    out = []
    if m <= 16:
        for bn, bk, sk, pf in itertools.product((64, 128, 256), (64, 128), (4, 8, 16), (0, 1, 2)):
            out.append(dict(block_m=16, block_n=bn, block_k=bk, split_k=sk, num_warps=4, num_stages=3,
                            swap_ab=True, prefetch=pf))
        for bk, sk, pf in itertools.product((64, 128), (8, 16), (1, 2)):
            out.append(dict(block_m=16, block_n=256, block_k=bk, split_k=sk, num_warps=8, num_stages=3, swap_ab=True,
                            prefetch=pf))
        # round 1's best, Triton unpack, for the record of what the PTX unpack changed
        out.append(dict(block_m=16, block_n=128, block_k=64, split_k=8, num_warps=4, num_stages=3, swap_ab=True,
                        dequant_asm=False))
    else:
        bms = (64,) if m <= 64 else (64, 128)
        for bm, bn, bk, sk, nw, st in itertools.product(bms, (128, 256), (64, 128), (1, 2, 4), (4, 8), (3, 4)):
            if bn == 256 and nw == 4:
                continue
            out.append(dict(block_m=bm, block_n=bn, block_k=bk, split_k=sk, num_warps=nw, num_stages=st))
        for bm, bn, sk, nw in itertools.product((64, 128) if m > 64 else (64,), (64, 128), (1, 2, 4), (4, 8)):
            if bn == 64 and nw == 8:
                continue
            out.append(dict(block_m=bm, block_n=bn, block_k=64, split_k=sk, num_warps=nw, num_stages=3, swap_ab=True))
    return out


def candidates_round4(m: int) -> list[dict]:
    """Round 4, after kernelscope's counters on round 3's best m = 1 launch (NOTES.md): 96 registers held
    occupancy to 5 programs per SM and the grid to 0.78 waves; try capped registers, fewer warps, more splits.
    For m = 256, larger tiles with prefetch and capped registers."""
    out = []
    if m <= 16:
        for bn, sk, nreg, pf in itertools.product((64, 128), (4, 8), (None, 64, 80), (1, 2)):
            out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=sk, num_warps=4, num_stages=3,
                            swap_ab=True, prefetch=pf, maxnreg=nreg))
        for sk, st in itertools.product((4, 8, 16), (2, 3)):
            out.append(dict(block_m=16, block_n=64, block_k=64, split_k=sk, num_warps=4, num_stages=st, swap_ab=True,
                            prefetch=2, maxnreg=64))
    else:
        bms = (64,) if m <= 64 else (128, 256)
        for bm, bn, sk, pf, st in itertools.product(bms, (64, 128), (1, 2, 4), (0, 1), (3, 4)):
            nw = 8 if bm * bn >= 128 * 128 else 4
            out.append(dict(block_m=bm, block_n=bn, block_k=64, split_k=sk, num_warps=nw, num_stages=st,
                            swap_ab=True, prefetch=pf))
    return out


def candidates_round7(m: int) -> list[dict]:
    """Round 7: output tiles under 64 rows of n (BLOCK_N 16 or 32, swapped), where Triton 3.6 uses mma.sync
    (HMMA.16816, both operands in registers) instead of the warpgroup MMA, and pipelines the packed words,
    scales and activations through cp.async (SASS compiled for sm_90 on the CPU, NOTES.md v8)."""
    out = []
    if m > 16:
        return out
    for bn, bk, sk, st in itertools.product((16, 32), (64, 128), (4, 8, 16), (3, 5)):
        for nw in ((1, 2) if bn == 16 else (2, 4)):
            out.append(dict(block_m=16, block_n=bn, block_k=bk, split_k=sk, num_warps=nw, num_stages=st,
                            swap_ab=True, prefetch=0))
    for sk in (4, 8):  # round 3/4's best shape of launch, timed in the same run for comparison
        out.append(dict(block_m=16, block_n=64, block_k=128, split_k=sk, num_warps=4, num_stages=3,
                        swap_ab=True, prefetch=1))
    return out


def candidates_round8(m: int) -> list[dict]:
    """Round 8, nibble-major kernel layout (NOTES.md v8): BLOCK_K is one 128-row block, each nibble one
    16-deep MMA with its operand unpacked in registers; words pipelined by cp.async (prefetch 0) or
    prefetched into registers (prefetch 1, which brings back a shared-memory layout conversion)."""
    out = []
    if m <= 16:
        for bn, sk, st, pf in itertools.product((64, 128, 256), (2, 4, 8, 16), (3, 4, 5), (0, 1)):
            if pf and st != 3:
                continue
            out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=sk, num_warps=8 if bn == 256 else 4,
                            num_stages=st, swap_ab=True, prefetch=pf))
    else:
        for bm, bn, sk, st in itertools.product((64,) if m <= 64 else (128, 256), (64, 128, 256), (1, 2, 4), (3, 4)):
            nw = 8 if bm * bn >= 128 * 128 else 4
            if bm * bn > 256 * 128:
                continue
            out.append(dict(block_m=bm, block_n=bn, block_k=128, split_k=sk, num_warps=nw, num_stages=st,
                            swap_ab=True, prefetch=0))
    return out


def candidates_round9(m: int) -> list[dict]:
    """Round 9: round 7's mma.sync tiles (BLOCK_N 16 or 32) again, on the nibble-major layout of round 8."""
    out = []
    if m > 16:
        return out
    for bn, sk, st in itertools.product((16, 32), (4, 8, 16), (3, 5)):
        for nw in ((1, 2) if bn == 16 else (2, 4)):
            out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=sk, num_warps=nw, num_stages=st,
                            swap_ab=True, prefetch=0))
    return out


def candidates_round10(m: int) -> list[dict]:
    """Round 10, pair-major layout (NOTES.md v9): each unpacked f16x2 register is an MMA operand register
    as it is (no PRMT), the scale multiplies the fp32 sum of a block (no HMUL2); words through cp.async."""
    out = []
    if m <= 16:
        for bn, sk, st in itertools.product((32, 64, 128, 256), (2, 4, 8, 16), (3, 4, 5)):
            for nw in {32: (2, 4), 64: (4,), 128: (4, 8), 256: (8,)}[bn]:
                out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=sk, num_warps=nw, num_stages=st,
                                swap_ab=True, prefetch=0))
    else:
        for bm, bn, sk, st in itertools.product((64,) if m <= 64 else (128, 256), (64, 128, 256), (1, 2, 4), (3, 4)):
            if bm * bn > 256 * 128:
                continue
            out.append(dict(block_m=bm, block_n=bn, block_k=128, split_k=sk, num_warps=8 if bm * bn >= 128 * 128 else 4,
                            num_stages=st, swap_ab=True, prefetch=0))
    return out


def candidates_round11(m: int) -> list[dict]:
    """Round 11: round 10's tiles with weight and activation tiles loaded by TMA (one bulk copy per tile
    instead of 4-byte cp.async per thread and their address arithmetic; NOTES.md v10)."""
    out = []
    if m <= 16:
        for bn, sk, st in itertools.product((64, 128, 256), (2, 4, 8, 16), (3, 4, 6)):
            for nw in {64: (4,), 128: (4, 8), 256: (8,)}[bn]:
                out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=sk, num_warps=nw, num_stages=st,
                                swap_ab=True, tma=True))
    else:
        out = [dict(c, tma=True) for c in candidates_round10(m)]
    return out


def candidates_round12(m: int) -> list[dict]:
    """Round 12: the block's four unpacked slices concatenated along k into one dot (8 MMAs back to back,
    one wait, NOTES.md v11), with per-thread cp.async or TMA loads."""
    out = []
    if m <= 16:
        for (bn, nw), sk, st, tma in itertools.product(((64, 4), (128, 4), (128, 8), (256, 8)), (2, 4, 8, 16),
                                                      (3, 4, 5), (False, True)):
            out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=sk, num_warps=nw, num_stages=st,
                            swap_ab=True, tma=tma))
    else:
        out = [dict(c, tma=tma) for c in candidates_round10(m) for tma in (False, True)]
    return out


def candidates_round13(m: int) -> list[dict]:
    """Round 13: round 12's TMA launches after the per-group scales got a TMA copy of their own (kernelscope
    on round 12's m = 1 launch: 47 % of stalls long_scoreboard, on the scale load the pipeline left unstaged).
    Slower at every point (NOTES.md v12); that change was reverted, so this round now reruns round 12's launches."""
    return [c for c in candidates_round12(m) if c["tma"]]


def candidates_round14(m: int) -> list[dict]:
    """Round 14, on round 12's kernel: mma.sync tiles (BLOCK_N 16 or 32: Triton uses HMMA.16816, no waits)
    with TMA, for the small shapes where each program's start and end weigh most (NOTES.md "Where the gap
    stands"); two stages; and for m >= 64 tile shapes round 12 left out (8 warps on 64 columns, more tiles)."""
    out = []
    if m <= 16:
        for (bn, nw), sk, st in itertools.product(((16, 1), (16, 2), (32, 2), (32, 4)), (4, 8, 16), (2, 3, 4)):
            out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=sk, num_warps=nw, num_stages=st,
                            swap_ab=True, tma=True))
        for bn, sk in itertools.product((64, 128), (4, 8)):
            out.append(dict(block_m=16, block_n=bn, block_k=128, split_k=sk, num_warps=4, num_stages=2,
                            swap_ab=True, tma=True))
    else:
        bms = (64,) if m <= 64 else (64, 128, 256)
        for bm, (bn, nw), sk, st in itertools.product(bms, ((32, 2), (32, 4), (64, 4), (64, 8)), (1, 2, 4), (3, 4)):
            out.append(dict(block_m=bm, block_n=bn, block_k=128, split_k=sk, num_warps=nw, num_stages=st,
                            swap_ab=True, tma=True))
    return out


def candidates_round15(m: int) -> list[dict]:
    """Round 15, m = 256 only: tiles round 12 left out. Every 64-column tile re-reads all of A from L2
    (kernelscope: L2 71.8 % of peak at 8192x8192), so wider column tiles with fewer token rows
    (64 x 128, 64 x 256), and 256-token tiles (the swapped product's N side allows 256)."""
    out = []
    if m < 256:
        return out
    shapes = [(64, 128, 4), (64, 128, 8), (64, 256, 8), (128, 128, 4), (256, 64, 4), (256, 64, 8)]
    for (bm, bn, nw), sk, st in itertools.product(shapes, (1, 2), (3, 4)):
        out.append(dict(block_m=bm, block_n=bn, block_k=128, split_k=sk, num_warps=nw, num_stages=st,
                        swap_ab=True, tma=True))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=400.0, help="seconds; stop starting new points after it")
    ap.add_argument("--m", default=",".join(map(str, DEFAULT_MS)))
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--round", type=int, default=3, choices=(3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15))
    ap.add_argument("--shapes", default=None, help="KxN,... (default: the benchmark's five)")
    args = ap.parse_args()
    t0 = time.time()
    ms = [int(x) for x in args.m.split(",")]
    rows: list[dict] = []
    best: dict[str, dict] = {}
    gen = torch.Generator(device="cuda").manual_seed(1)
    pick = {3: candidates, 4: candidates_round4, 7: candidates_round7, 8: candidates_round8, 9: candidates_round9, 10: candidates_round10, 11: candidates_round11, 12: candidates_round12, 13: candidates_round13, 14: candidates_round14, 15: candidates_round15}[args.round]
    shapes = DEFAULT_SHAPES if not args.shapes else [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    for k, n in shapes:
        wt = make_weights(k, n, 128, "cuda", 0)
        bk, sk = to_kernel_layout(wt.B, wt.s, 128)
        w16 = None
        for m in ms:
            if time.time() - t0 > args.deadline:
                break
            a = torch.randn((m, k), generator=gen, device="cuda").half()
            if w16 is None:
                from kernelscope.kernels.marlin.format import dequantize
                w16 = dequantize(wt.q, wt.scales, 128).t().contiguous()
            cub = time_cuda(lambda: torch.matmul(a, w16.T), warmup=5, repeats=args.repeats).median_ms
            floor_ms = W4A16Case(m, k, n).bytes_moved / 3.0e12 * 1e3  # orientation only; the bench measures copy BW
            for cfg in pick(m):
                if k % (cfg["split_k"] * cfg["block_k"]):
                    continue
                row = dict(k=k, n=n, m=m, **cfg, cublas_ms=cub)
                try:
                    err = relative_error(w4a16_matmul(a, bk, sk, 128, **cfg), a, wt)
                    row["relative_error"] = err
                    if not err < 1e-2:
                        row["status"] = "wrong"
                    else:
                        t = time_cuda(lambda: w4a16_matmul(a, bk, sk, 128, **cfg), warmup=5, repeats=args.repeats)
                        row.update(status="ok", median_ms=t.median_ms, iqr_ms=t.iqr_ms)
                except Exception as e:  # a config that does not compile or fit is a result
                    row.update(status="failed", error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
                rows.append(row)
                key = f"{k}x{n} m={m}"
                if row.get("status") == "ok" and row["median_ms"] < best.get(key, {}).get("median_ms", 1e9):
                    best[key] = dict(row, floor_at_3tbps_ms=floor_ms)
            print(f"[{time.time() - t0:6.0f}s] {k}x{n} m={m}: best "
                  f"{best.get(f'{k}x{n} m={m}', {}).get('median_ms', float('nan')) * 1e3:.1f} us, "
                  f"cublas {cub * 1e3:.1f} us", flush=True)
        del wt, bk, sk, w16
        torch.cuda.empty_cache()
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
                       "rows": rows, "best": best}, f)
    print(f"{'point':<22}{'best us':>9}{'cublas us':>10}{'x cublas':>9}  config")
    for key, r in best.items():
        cfg = {c: r[c] for c in ("block_m", "block_n", "block_k", "split_k", "num_warps", "num_stages", "swap_ab",
                                 "prefetch", "dequant_asm", "maxnreg", "tma") if c in r}
        print(f"{key:<22}{r['median_ms'] * 1e3:>9.1f}{r['cublas_ms'] * 1e3:>10.1f}"
              f"{r['cublas_ms'] / r['median_ms']:>9.2f}  {cfg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
