"""A/B of two versions of the Gluon W4A16 kernel in one run, at the launch rule's launch (graph time, cold L2).

    PYTHONPATH=src python3 benchmarks/w4a16/ab_gluon.py --b kernelscope.kernels.marlin.gluon_hopper_prev \
        --shapes 13824x5120,4096x4096 --m 1,16 --out ab.json
    PYTHONPATH=src python3 benchmarks/w4a16/ab_gluon.py --b-kwargs '{"sync_mma": true}' ...
    PYTHONPATH=src python3 benchmarks/w4a16/ab_gluon.py --a-kwargs '{"pdl": true}' --b-kwargs '{"pdl": true}' --b ...

A is ``kernelscope.kernels.marlin.gluon_hopper``; B a copy of an earlier version put beside it for the run (the
sixth session's first A/B used the module of commit 623abca), or the same module with other keyword arguments.
Each launch is first checked against the fp32 reference, then A and B are timed in turn ``--rounds`` times on the
same weight copies (tune_space.gluon_launch, Bk); the table gives each one's median and B / A.
"""
from __future__ import annotations

import argparse
import importlib
import itertools
import json
import statistics
import sys
import time

from sweep_graph import check_and_time, common_args, weight_copies  # this folder's sweep


def main() -> int:
    p = argparse.ArgumentParser()
    common_args(p)
    p.add_argument("--b", default="kernelscope.kernels.marlin.gluon_hopper",
                   help="module of the other version (same API as gluon_hopper)")
    p.add_argument("--b-kwargs", default="{}", help="JSON keyword arguments added to B's calls")
    p.add_argument("--a-kwargs", default="{}", help="JSON keyword arguments added to A's calls")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    import torch

    from kernelscope.kernels.marlin import reference_matmul
    from kernelscope.kernels.marlin.gluon_args import kernel_kwargs
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    mods = {"a": importlib.import_module("kernelscope.kernels.marlin.gluon_hopper"),
            "b": importlib.import_module(args.b)}
    props = torch.cuda.get_device_properties(0)
    a_kwargs, b_kwargs = json.loads(args.a_kwargs), json.loads(args.b_kwargs)
    doc = {"device": props.name, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "b": args.b,
           "a_kwargs": a_kwargs, "b_kwargs": b_kwargs, "rows": []}
    print(f"{props.name}, {doc['utc']}: A = gluon_hopper {a_kwargs}, B = {args.b} {b_kwargs}", flush=True)
    print("| k x n | m | launch | A us | B us | B / A |\n|---|---:|---|---:|---:|---:|", flush=True)
    for shape in args.shapes.split(","):
        k, n = (int(x) for x in shape.split("x"))
        wt, copies = weight_copies(k, n, props.L2_cache_size)
        bk, sk = copies[0]
        launch = gluon_launch(k, n, props.multi_processor_count, 16)  # the warpgroup MMA; B's kwargs may change it
        kw = kernel_kwargs(launch)
        for m in (int(x) for x in args.m.split(",")):
            a = torch.randn((m, k), device="cuda").half()
            ref = reference_matmul(a, wt.B, wt.s, 128)
            times: dict[str, list[float]] = {"a": [], "b": []}
            status = {}
            for _, name in itertools.product(range(args.rounds), ("a", "b")):
                fn = mods[name].gluon_w4a16
                kws = {**kw, **(b_kwargs if name == "b" else a_kwargs)}
                row = check_and_time(lambda: fn(a, bk, sk, 128, n, **kws), ref,
                                     [lambda b=b, s=s: fn(a, b, s, 128, n, **kws) for b, s in copies], args.replays)
                status[name] = row["status"]
                if row["status"] == "ok":
                    times[name].append(row["us"])
            point = {"k": k, "n": n, "m": m, "launch": launch, "status": status, "a_us": times["a"],
                     "b_us": times["b"]}
            doc["rows"].append(point)
            with open(args.out, "w") as f:
                json.dump(doc, f)
            if times["a"] and times["b"]:
                ma, mb = statistics.median(times["a"]), statistics.median(times["b"])
                print(f"| {k}x{n} | {m} | {launch['programs']} programs r{launch['maxnreg']} s{launch['num_stages']} "
                      f"| {ma:.2f} | {mb:.2f} | {mb / ma:.3f} |", flush=True)
            else:
                print(f"| {k}x{n} | {m} | {status} | | | |", flush=True)
        del copies
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
