"""The attention forward pass against SDPA's cuDNN backend, in CUDA-graph time.

``python benchmarks/attention/sweep.py --out DIR [--rounds 3] [--variants plain,auto]``

Shapes: head dim 128, B·S = 16384 tokens, 16 heads (hidden 2048), S in --seqs, causal and full,
fp16 and bf16. Each variant is first checked against SDPA's math backend in fp32 at the point's
shape (max |err| printed; a variant off by more than 2x SDPA-cuDNN's own error is dropped), then
the variants of a point are timed in turn, round by round (``--rounds``), so all see the same
clocks: graph time = CUDA-event time of one replay of a graph of ``--calls`` back-to-back calls,
divided by the calls (kernelscope.bench.graph_timing). The table gives each variant's median over
the rounds in TFLOP/s (4·B·H·S²·D / time, halved when causal) and its ratio to cuDNN.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch

from kernelscope.bench.graph_timing import time_cuda_graph
from kernelscope.kernels.attention import get_impl
from kernelscope.kernels.attention.flash import FlashConfig, flash_attention

VARIANTS = {
    "plain": FlashConfig(128, 64, 4, 2),  # the Triton kernel pinned to its launch at head dim 128
    "auto": None,  # what flash_attention does by default (at these shapes on sm_90: a Gluon kernel)
}


def _variant(name: str):
    return partial(flash_attention, config=VARIANTS[name])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--seqs", default="4096,8192,16384")
    p.add_argument("--dtypes", default="fp16,bf16")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--replays", type=int, default=5)
    a = p.parse_args()
    names = a.variants.split(",")
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    cudnn = get_impl("sdpa-cudnn")
    rows, t0 = [], time.time()
    print(f"device {torch.cuda.get_device_name()} date {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
          flush=True)
    for dt in a.dtypes.split(","):
        for causal in (False, True):
            for s in (int(x) for x in a.seqs.split(",")):
                b, h, d = 16384 // s, 16, 128
                gen = torch.Generator(device="cuda").manual_seed(s + causal)
                q, k, v = (torch.randn((b, h, s, d), generator=gen, device="cuda", dtype=dtypes[dt]) for _ in range(3))
                flops = 4 * b * h * s * s * d // (2 if causal else 1)
                ref = torch.nn.functional.scaled_dot_product_attention(
                    q[:1].float(), k[:1].float(), v[:1].float(), is_causal=causal)
                fns = {"cudnn": lambda: cudnn(q, k, v, causal)}
                err_cudnn = float((cudnn(q, k, v, causal)[:1].float() - ref).abs().max())
                errs = {"cudnn": err_cudnn}
                for n in names:
                    fn = _variant(n)
                    try:
                        err = float((fn(q, k, v, causal)[:1].float() - ref).abs().max())
                    except Exception as e:
                        print(f"  {n} failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
                        continue
                    errs[n] = err
                    if not err <= 2 * err_cudnn + 1e-3:
                        print(f"  {n} dropped: max|err| {err:.3g} vs cuDNN {err_cudnn:.3g}", flush=True)
                        continue
                    fns[n] = (lambda fn=fn: fn(q, k, v, causal))
                ms: dict[str, list[float]] = {n: [] for n in fns}
                for _ in range(a.rounds):
                    for n, fn in fns.items():
                        ms[n].append(time_cuda_graph([fn], calls_per_graph=a.calls, replays=a.replays, warmup=2,
                                                     flush_l2=False).median_ms)
                med = {n: statistics.median(v) for n, v in ms.items()}
                tf = {n: flops / (t * 1e-3) / 1e12 for n, t in med.items()}
                row = {"dtype": dt, "causal": causal, "seq": s, "batch": b, "heads": h, "head_dim": d,
                       "graph_ms_per_round": ms, "graph_ms_median": med, "tflops": tf, "max_abs_err": errs}
                if "auto" in fns:
                    from kernelscope.kernels.attention.flash import _gluon_runs, tuned_config
                    from kernelscope.kernels.attention.gluon_hopper import hopper_kernel
                    row["auto_config"] = hopper_kernel(q) if _gluon_runs(q, k, v) else str(tuned_config(d, causal, s))
                rows.append(row)
                Path(a.out, "sweep.json").write_text(json.dumps(rows, indent=1))
                print(f"{dt} {'causal' if causal else 'full  '} S={s:5d} " + " | ".join(
                    f"{n} {tf[n]:5.0f} ({tf[n] / tf['cudnn']:.2f}x)" for n in fns), flush=True)
                del q, k, v, fns
                torch.cuda.empty_cache()
    print(f"total {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
