"""The Gluon W4A16 kernel's split-tile sum through thread-block clusters against the launch rule (graph time).

    PYTHONPATH=src python3 benchmarks/w4a16/cluster_ab.py --m 1,16 --out cluster_ab.json \
        --candidates '{"13824x5120": [{"cluster": 3}, {"programs": 320, "cluster": 4, "maxnreg": 80}]}'

For each layer and m, the rule's launch (tune_space.gluon_launch) and each candidate (the rule's launch with the
candidate's keywords; or the shipped table's launch, or tune_space.gluon_cluster_launch's), on Bk weights (or Bg with
``--layout bg``, as the benchmark and the tuner run them), are checked against the fp32 reference,
then timed in turn ``--rounds`` times on the same weight copies; the table gives each one's median and its ratio to
the rule's. add_cluster_rows.py reads the output.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from sweep_graph import check_and_time, weight_copies  # this folder's sweep


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--m", default="1")
    p.add_argument("--out", required=True)
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--candidates", required=True,
                   help='JSON {"KxN": [keyword overrides, ...]}; "table": the shipped table\'s launch for the point, '
                        '"cluster": tune_space.gluon_cluster_launch\'s')
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--layout", choices=("bk", "bg"), default="bk",
                   help="weights as to_kernel_layout (bk) or to_gluon_layout (bg, the benchmark's and the tuner's)")
    args = p.parse_args()
    import torch

    from kernelscope.kernels.marlin import reference_matmul
    from kernelscope.kernels.marlin.gluon_args import kernel_kwargs
    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16
    from kernelscope.kernels.marlin.configs import choose_launch
    from kernelscope.kernels.marlin.tune_space import gluon_cluster_launch, gluon_launch

    props = torch.cuda.get_device_properties(0)
    candidates = json.loads(args.candidates)
    doc = {"device": props.name, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": []}
    print(f"{props.name}, {doc['utc']}", flush=True)
    print("| k x n | m | launch | us (median) | / rule |\n|---|---:|---|---:|---:|", flush=True)
    for shape, overrides in candidates.items():
        k, n = (int(x) for x in shape.split("x"))
        wt, copies = weight_copies(k, n, props.L2_cache_size, args.layout)
        bk, sk = copies[0]
        for m in (int(x) for x in args.m.split(",")):
            rule = kernel_kwargs(gluon_launch(k, n, props.multi_processor_count, m))
            named = {"table": lambda: choose_launch(m, k, n, 128, props.name, tma=True).launch,
                     "cluster": lambda: gluon_cluster_launch(k, n, props.multi_processor_count, m)}
            picked = [(named[o](), True) if isinstance(o, str) else ({**rule, **o}, False) for o in overrides]
            # a named launch that is not the Gluon kernel's (a Triton row of the table) or none is left out
            launches = [rule] + [kernel_kwargs(x) if is_named else x for x, is_named in picked
                                 if not is_named or (x or {}).get("kernel") == "gluon"]
            a = torch.randn((m, k), device="cuda").half()
            ref = reference_matmul(a, wt.B, wt.s, 128)
            times: list[list[float]] = [[] for _ in launches]
            status: list[str] = ["ok"] * len(launches)
            for _ in range(args.rounds):
                for i, kw in enumerate(launches):
                    row = check_and_time(lambda kw=kw: gluon_w4a16(a, bk, sk, 128, n, **kw), ref,
                                         [lambda b=b, s=s, kw=kw: gluon_w4a16(a, b, s, 128, n, **kw)
                                          for b, s in copies], args.replays)
                    if row["status"] == "ok":
                        times[i].append(row["us"])
                    else:
                        status[i] = row["status"]
            base = statistics.median(times[0]) if times[0] else float("nan")
            for kw, ts, st in zip(launches, times, status):
                doc["rows"].append({"k": k, "n": n, "m": m, "launch": kw, "status": st, "us": ts})
                name = ", ".join(f"{key}={val}" for key, val in kw.items())
                if ts and st == "ok":
                    med = statistics.median(ts)
                    print(f"| {shape} | {m} | {name} | {med:.2f} | {med / base:.3f} |", flush=True)
                else:
                    print(f"| {shape} | {m} | {name} | {st} | |", flush=True)
            with open(args.out, "w") as f:
                json.dump(doc, f)
        del copies
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
