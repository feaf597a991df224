"""Check and time the Gluon W4A16 decode kernel (kernels/marlin/gluon_hopper.py) against the Triton kernel.

    PYTHONPATH=src python3 benchmarks/w4a16/sweep_gluon.py --shapes 5120x13824,4096x4096 --m 1 --out gluon.json

First every launch of a small check grid is compared with the fp32 reference (m = 1..16, groups of 128 and one
group per column, both layouts, whole-tile and stream-K grids). Then, per (k, n, m), every Gluon launch of the
space is checked and timed as the benchmark times a cold point (CUDA-graph time per call over enough weight copies
to read > 2x L2, L2 flushed between replays), next to the Triton kernel's launch for the shape
(``autotune.launch_for``, tuned on first use), cuBLAS fp16 and tinygemm in the same run.
Kernels are compiled first in a pool of processes.

Earlier runs (RESULTS.md) timed earlier kernels: 64- and 128-column programs on a (tiles, split) grid (the 128-column
kernel had two consumer warpgroups; it was slower at every point and was removed), then a chained-MMA loop (slower
at every point, removed), then a 4-warp variant without a producer warp (no faster, removed: NOTES.md v15).
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

from sweep_graph import check_and_time, common_args, copy_bandwidth, precompile  # this folder's sweep


def grids(k: int, n: int, sms: int, multiples: int = 4, per_sm: float | None = None) -> list[int]:
    """Program counts to try: one a column tile and 2..``multiples`` times that (a whole-tile or k-split launch;
    past one a tile only within ``per_sm`` programs an SM, when given), and 1-4 programs an SM (stream-K shares)."""
    tiles, units = n // 64, n // 64 * (k // 128)
    whole = {c * tiles for c in range(1, multiples + 1) if c == 1 or per_sm is None or c * tiles <= per_sm * sms}
    return sorted(g for g in whole | {c * sms for c in range(1, 5)} if g <= units)


def space(k: int, n: int, sms: int, layouts: tuple[str, ...] = ("bg", "bk"), stages: tuple[int, ...] = (4, ),
          regs: tuple[int, ...] = (96, ), multiples: int = 4, per_sm: float | None = None,
          sync_mma: bool = False, pdl: bool = False) -> list[dict]:
    """Launches of the Gluon kernel for a (k, n) layer: weight layout, programs, stages, registers a thread (and
    mma.sync instead of the warpgroup MMA, programmatic dependent launches, when asked)."""
    return [dict(layout=layout, programs=g, stages=st, maxnreg=r, **({"sync_mma": True} if sync_mma else {}),
                 **({"pdl": True} if pdl else {}))
            for layout, st, r in itertools.product(layouts, stages, regs)
            for g in grids(k, n, sms, multiples, per_sm)]


def compile_key(launch: dict, k: int, n: int, m: int) -> dict:
    """What a launch compiles to: its layout, stages, registers, token bucket and whether tiles are shared."""
    key = {x: launch[x] for x in ("layout", "stages", "maxnreg")}
    key["sync_mma"] = launch.get("sync_mma", False)
    key["pdl"] = launch.get("pdl", False)
    from kernelscope.kernels.marlin.gluon_args import block_m_for

    return dict(key, m=block_m_for(m), partials=(n // 64) % launch["programs"] != 0)


def _compile_one(args: tuple[int, dict]) -> str:
    m, key = args
    import torch

    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16

    k, n = 256, 256  # 4 tiles of 2 blocks: 3 programs share tiles, 4 do not
    try:
        a = torch.randn((m, k), device="cuda").half()
        shape = (k // 128 * n, 16) if key["layout"] == "bg" else (k // 8, n)
        words = torch.randint(-2**31, 2**31 - 1, shape, dtype=torch.int32, device="cuda")
        scales = torch.rand((k // 128, n), device="cuda").half()
        gluon_w4a16(a, words, scales, 128, n, programs=3 if key["partials"] else 4, stages=key["stages"],
                    maxnreg=key["maxnreg"], sync_mma=key["sync_mma"], pdl=key["pdl"])
        torch.cuda.synchronize()
        return "ok"
    except Exception as e:  # out of shared memory, etc.: recorded, not fatal
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def check_grid(check_ms: tuple[int, ...] = (1, 3, 8, 13, 16)) -> list[dict]:
    """Every launch of a small grid against the fp32 reference; returns the rows (with relative errors)."""
    import torch

    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import reference_matmul, to_kernel_layout
    from kernelscope.kernels.marlin.gluon_hopper import from_gluon_layout, gluon_w4a16, to_gluon_layout

    rows = []
    for (k, n), gs in itertools.product([(512, 256), (2048, 768), (4096, 4096)], (128, -1)):
        wt = make_weights(k, n, gs, "cuda", 1)
        bk, sk = to_kernel_layout(wt.B, wt.s, gs)
        bg = to_gluon_layout(bk)
        assert torch.equal(from_gluon_layout(bg, n), bk)
        for m, programs, layout in itertools.product(check_ms, grids(k, n, 132) + [7], ("bg", "bk")):
            a = torch.randn((m, k), device="cuda").half()
            ref = reference_matmul(a, wt.B, wt.s, gs)
            row = dict(k=k, n=n, groupsize=gs, m=m, programs=programs, layout=layout)
            try:
                for _ in range(2):  # twice: the tile counters must be left at zero
                    got = gluon_w4a16(a, bg if layout == "bg" else bk, sk, gs, n, programs=programs).float()
                torch.cuda.synchronize()
                row["relative_error"] = ((got - ref).norm() / ref.norm()).item()
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            rows.append(row)
    return rows


def main() -> int:
    p = argparse.ArgumentParser()
    common_args(p)
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--check-m", default="1,3,8,13,16", help="token counts of the check grid")
    p.add_argument("--layouts", default="bg,bk", help="weight layouts: bg (to_gluon_layout), bk (to_kernel_layout)")
    p.add_argument("--stages", default="4,6")
    p.add_argument("--regs", default="96", help="registers a thread at launch")
    p.add_argument("--tile-multiples", type=int, default=4, help="grids of up to this many programs a column tile")
    p.add_argument("--per-sm", type=float, help="grids of more than one program a tile within this many an SM")
    p.add_argument("--sync-mma", action="store_true", help="mma.sync instead of the warpgroup MMA (m <= 8)")
    p.add_argument("--pdl", action="store_true", help="programmatic dependent launches (back to back in the graph)")
    args = p.parse_args()
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dims = (tuple(args.layouts.split(",")), tuple(int(x) for x in args.stages.split(",")),
            tuple(int(x) for x in args.regs.split(",")), args.tile_multiples, args.per_sm, args.sync_mma,
            args.pdl)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    ms = [int(x) for x in args.m.split(",")]
    jobs = {}
    for (k, n), m in itertools.product(shapes, ms):
        for launch in space(k, n, sms, *dims):
            key = compile_key(launch, k, n, m)
            jobs[json.dumps(key, sort_keys=True)] = (key["m"], key)
    status = precompile(list(jobs.values()), args.workers, _compile_one)
    compiled = {json.dumps(key, sort_keys=True): status[json.dumps([m, key], sort_keys=True)]
                for m, key in jobs.values()}
    failed = sorted({r for r in compiled.values() if r != "ok"})
    print(f"{len(failed)} kinds of compile failure: {failed[:3]}", flush=True)

    from kernelscope.bench.graph_timing import copies_for_cold_l2, time_cuda_graph
    from kernelscope.bench.w4a16 import W4A16Case
    from kernelscope.bench.w4a16_impls import build_cublas, build_tinygemm, make_weights
    from kernelscope.kernels.marlin import reference_matmul, to_kernel_layout, w4a16_matmul
    from kernelscope.kernels.marlin.autotune import launch_for
    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16, to_gluon_layout

    props = torch.cuda.get_device_properties(0)
    doc = {"device": props.name, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "torch": torch.__version__, "rows": []}
    if not args.no_check:
        checks = check_grid(tuple(int(x) for x in args.check_m.split(",")))
        bad = [r for r in checks if not r.get("relative_error", 1.0) < 1e-2]
        doc["checks"] = checks
        print(f"check grid: {len(checks)} launches, {len(bad)} wrong or failed", flush=True)
        for r in bad[:12]:
            print("   ", r, flush=True)
    l2 = props.L2_cache_size
    bw = copy_bandwidth()
    doc["copy_bandwidth_bytes_per_s"] = bw
    print(f"{props.name}: copy {bw / 1e12:.2f} TB/s", flush=True)
    for k, n in shapes:
        wt = make_weights(k, n, 128, "cuda", 0)
        bk, sk = to_kernel_layout(wt.B, wt.s, 128)
        copies = copies_for_cold_l2(k * n // 2, l2)
        bks = [(bk, sk)] + [(bk.clone(), sk.clone()) for _ in range(copies - 1)]
        bgs = [(to_gluon_layout(b), s) for b, s in bks]
        base = {"cublas": [build_cublas(wt) for _ in range(copies)],
                "tinygemm": [build_tinygemm(wt) for _ in range(copies)]}
        for m in ms:
            floor_us = W4A16Case(m, k, n, 128).bytes_moved / bw * 1e6
            a = torch.randn((m, k), device="cuda").half()
            ref = reference_matmul(a, wt.B, wt.s, 128)
            point = {"k": k, "n": n, "m": m, "floor_us": floor_us}
            for name, fns in base.items():
                point[f"{name}_us"] = time_cuda_graph([lambda f=f: f(a) for f in fns],
                                                      replays=args.replays).median_ms * 1e3
            triton_launch = launch_for(m, k, n, 128, bk, sk).launch
            point["triton_launch"] = triton_launch
            point["triton_us"] = time_cuda_graph(
                [lambda b=b, s=s: w4a16_matmul(a, b, s, 128, **triton_launch) for b, s in bks],
                replays=args.replays).median_ms * 1e3
            tried = []
            for launch in space(k, n, sms, *dims):
                row = {"launch": launch}
                status = compiled.get(json.dumps(compile_key(launch, k, n, m), sort_keys=True), "ok")
                if status != "ok":
                    row["status"] = status
                    tried.append(row)
                    continue
                kw = {key: v for key, v in launch.items() if key != "layout"}
                words = bgs if launch["layout"] == "bg" else bks
                row.update(check_and_time(lambda: gluon_w4a16(a, words[0][0], sk, 128, n, **kw), ref,
                                          [lambda b=b, s=s: gluon_w4a16(a, b, s, 128, n, **kw) for b, s in words],
                                          args.replays))
                tried.append(row)
            point["tried"] = tried
            doc["rows"].append(point)
            with open(args.out, "w") as f:
                json.dump(doc, f)
            ok = sorted((r for r in tried if r.get("status") == "ok"), key=lambda r: r["us"])
            tri = point["triton_us"]
            print(f"{k}x{n} m={m}: floor {floor_us:.1f} us; cuBLAS {point['cublas_us']:.1f}, tinygemm "
                  f"{point['tinygemm_us']:.1f}, triton {tri:.1f} ({100 * floor_us / tri:.0f}%); {len(ok)} gluon "
                  f"timed, {sum(r.get('status') == 'wrong' for r in tried)} wrong", flush=True)
            for r in ok[:4]:
                print(f"   {r['us']:7.2f} us {100 * floor_us / r['us']:5.1f}% floor  {r['launch']}", flush=True)
        del bks, bgs, base
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
