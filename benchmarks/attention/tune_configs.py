"""Time every candidate launch config of the flash kernel, next to SDPA flash and cuDNN.

Used to choose the autotune list (kernels/attention/flash.py HOPPER_CONFIGS):
``python benchmarks/attention/tune_configs.py --out DIR``. Shapes follow the
benchmark's budget (B·S = 16k tokens, hidden 2048). Prints one line per
(head dim, mask, seq) with the best config and writes every timing as JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

import torch

from kernelscope.collect.timing import time_cuda
from kernelscope.kernels.attention import get_impl
from kernelscope.kernels.attention.flash import HOPPER_CONFIGS, FlashConfig, flash_attention

# Outside the autotune list, to test whether other tile heights pay: BLOCK_M 256
# (two warpgroups of 128 rows, one CTA per SM) and 64 (one 64-row wgmma, more CTAs per SM).
# (Run 2 moved FlashConfig(64, 64, 4, 3) into the list.)
EXTRA = (FlashConfig(256, 64, 8, 2), FlashConfig(256, 64, 8, 3), FlashConfig(256, 128, 8, 2),
         FlashConfig(64, 128, 4, 3))


PRECOMPILE_SEQS = (256, 512, 1024, 2048, 4096, 8192, 16384)


def _compile_one(job: tuple[FlashConfig, int, bool]) -> str:
    """Compile one (config, head dim, causal) in a worker, filling Triton's disk cache.

    Runs the benchmark's own shapes (B·S = 16k, hidden 2048: 64 MB a tensor), so
    every integer specialisation the timed runs hit is compiled here.
    """
    config, d, causal = job
    try:
        for s in PRECOMPILE_SEQS:
            q = torch.zeros((16384 // s, 2048 // d, s, d), device="cuda", dtype=torch.float16)
            flash_attention(q, q, q, causal, config=config)
        torch.cuda.synchronize()
        return "ok"
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"


def precompile(configs, head_dims, processes: int = 12) -> None:
    import multiprocessing as mp

    jobs = [(c, d, causal) for d in head_dims for causal in (False, True) for c in configs]
    with mp.get_context("spawn").Pool(processes) as pool:
        for job, r in zip(jobs, pool.map(_compile_one, jobs, chunksize=1)):
            if r != "ok":
                print(f"compile {job[0]} D={job[1]} causal={job[2]}: {r}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--seqs", default="1024,4096,16384")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--precompile-only", action="store_true", help="fill Triton's cache for every config and exit")
    p.add_argument("--extra", action="store_true", help="also time BLOCK_M=64 configs")
    p.add_argument("--no-precompile", action="store_true")
    a = p.parse_args()
    rows = []
    configs = (*HOPPER_CONFIGS, *(EXTRA if a.extra else ()))
    head_dims = [int(x) for x in a.head_dims.split(",")]
    t0 = time.time()
    if not a.no_precompile:
        precompile(configs, head_dims)
    print(f"precompiled {len(configs) * len(head_dims) * 2} kernels in {time.time() - t0:.0f} s", flush=True)
    if a.precompile_only:
        return 0
    for d in head_dims:
        for causal in (False, True):
            for s in (int(x) for x in a.seqs.split(",")):
                b, h = 16384 // s, 2048 // d
                gen = torch.Generator(device="cuda").manual_seed(0)
                q, k, v = (torch.randn((b, h, s, d), generator=gen, device="cuda", dtype=torch.float16)
                           for _ in range(3))
                flops = 4 * b * h * s * s * d // (2 if causal else 1)
                results = {}
                for name in ("sdpa-flash", "sdpa-cudnn"):
                    fn = get_impl(name)
                    try:
                        results[name] = time_cuda(lambda: fn(q, k, v, causal), warmup=5, repeats=a.repeats).median_ms
                    except Exception as e:
                        results[name] = f"{type(e).__name__}: {str(e)[:80]}"
                for c in configs:
                    fn = partial(flash_attention, config=c)
                    try:
                        results[str(c)] = time_cuda(lambda: fn(q, k, v, causal), warmup=3, repeats=a.repeats).median_ms
                    except Exception as e:
                        results[str(c)] = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
                ok = {n: t for n, t in results.items() if isinstance(t, float) and n.startswith("BLOCK")}
                best = min(ok, key=ok.get) if ok else None
                tf = {n: flops / (t * 1e-3) / 1e12 for n, t in results.items() if isinstance(t, float)}
                rows.append({"head_dim": d, "causal": causal, "seq": s, "batch": b, "heads": h, "ms": results,
                             "tflops": tf, "best": best})
                line = (f"D={d} {'causal' if causal else 'full  '} S={s:5d}: best {best} {tf.get(best, 0):6.1f} TF/s"
                        f" | sdpa-flash {tf.get('sdpa-flash', 0):6.1f} | sdpa-cudnn {tf.get('sdpa-cudnn', 0):6.1f}")
                print(line, flush=True)
                for n in sorted(ok, key=ok.get):
                    print(f"    {n}: {tf[n]:6.1f}", flush=True)
                Path(a.out, "tune_configs.json").write_text(json.dumps(rows, indent=1))  # keep partial results
                del q, k, v
                torch.cuda.empty_cache()
    Path(a.out, "tune_configs.json").write_text(json.dumps(rows, indent=1))
    failures = {n: t for r in rows for n, t in r["ms"].items() if isinstance(t, str)}
    for n, t in list(failures.items())[:10]:
        print(f"failed: {n}: {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
