"""What a programmatic dependent launch (PDL) of the Gluon W4A16 kernel gains after a kernel that is not the kernel
itself (graph time, cold L2, H100).

    PYTHONPATH=src python3 benchmarks/w4a16/pdl_chain.py --shapes 4096x4096,13824x5120 --out pdl_chain.json

Per layer, at the launch rule's launch, four graphs are timed in turn ``--rounds`` times (per call of the layer):
``gemm``: the layer back to back (the benchmark's graph); ``gemm_pdl``: the same as PDL launches, so each launch
starts while the one before ends (the kernel lets its dependents launch once it has waited for its own
predecessor); ``mul+gemm`` and ``mul+gemm_pdl``: each call preceded by a small elementwise torch kernel that writes
the layer's activations (as a norm does in a model), which does not let dependents launch early, so the PDL launch
can only start as its blocks end. ``mul`` alone is timed too. Each PDL chain is first checked against the plain one.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from sweep_graph import weight_copies  # this folder's sweep


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", required=True)
    p.add_argument("--m", default="1")
    p.add_argument("--out", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--replays", type=int, default=10)
    args = p.parse_args()
    import torch

    from kernelscope.bench.graph_timing import time_cuda_graph
    from kernelscope.kernels.marlin.gluon_args import kernel_kwargs
    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    props = torch.cuda.get_device_properties(0)
    doc = {"device": props.name, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": []}
    names = ("gemm", "gemm_pdl", "mul", "mul+gemm", "mul+gemm_pdl")
    print(f"{props.name}, {doc['utc']}: graph time per call, us (median of {args.rounds})", flush=True)
    print("| k x n | m | launch | " + " | ".join(names) + " |\n|---|---:|---|" + "---:|" * len(names), flush=True)
    for shape in args.shapes.split(","):
        k, n = (int(x) for x in shape.split("x"))
        _, copies = weight_copies(k, n, props.L2_cache_size)
        bk, sk = copies[0]
        for m in (int(x) for x in args.m.split(",")):
            launch = gluon_launch(k, n, props.multi_processor_count, m)
            kw = kernel_kwargs(launch)
            x = torch.randn((m, k), device="cuda").half()
            g = torch.rand((k, ), device="cuda").half()
            a = torch.empty_like(x)
            out = torch.empty((m, n), device="cuda", dtype=torch.float16)

            def mul() -> None:
                torch.mul(x, g, out=a)

            def gemm(b, s, pdl: bool) -> None:
                gluon_w4a16(a, b, s, 128, n, out=out, **{**kw, "pdl": pdl})

            mul()
            gemm(bk, sk, False)
            plain = out.clone()
            out.zero_()
            gemm(bk, sk, True)
            same = bool(torch.equal(out, plain))
            graphs = {
                "gemm": [lambda b=b, s=s: gemm(b, s, False) for b, s in copies],
                "gemm_pdl": [lambda b=b, s=s: gemm(b, s, True) for b, s in copies],
                "mul": [mul],
                "mul+gemm": [lambda b=b, s=s: (mul(), gemm(b, s, False)) for b, s in copies],
                "mul+gemm_pdl": [lambda b=b, s=s: (mul(), gemm(b, s, True)) for b, s in copies],
            }
            times: dict[str, list[float]] = {name: [] for name in names}
            for _ in range(args.rounds):
                for name in names:
                    times[name].append(time_cuda_graph(graphs[name], replays=args.replays).median_ms * 1e3)
            med = {name: statistics.median(v) for name, v in times.items()}
            doc["rows"].append({"k": k, "n": n, "m": m, "launch": launch, "pdl_equals_plain": same, "us": times})
            with open(args.out, "w") as f:
                json.dump(doc, f)
            tag = f"{launch['programs']} programs r{launch['maxnreg']} s{launch['num_stages']}" + (
                " sync" if launch.get("sync_mma") else "") + ("" if same else " PDL RESULT DIFFERS")
            print(f"| {k}x{n} | {m} | {tag} | " + " | ".join(f"{med[name]:.2f}" for name in names) + " |",
                  flush=True)
        del copies
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
