"""Why `kernelscope bench w4a16` and this folder's sweeps timed the same W4A16 launch 13-15 % apart at the
112 MiB layers (RESULTS.md, fifth session): the same launch timed four ways in one process (graph time, cold).

    PYTHONPATH=src python3 benchmarks/w4a16/harness_check.py --shapes 28672x8192,8192x28672 --out check.json

``sweep``: ``w4a16_matmul`` on cloned kernel-layout weights, as sweep_graph.py / ab_gluon.py time it;
``bench_call``: the benchmark's implementation object (``W4A16Call``, one per weight copy) in the same timer;
``bench``: ``run_w4a16_sweep`` with that implementation alone; ``bench_all``: with cuBLAS and tinygemm before it,
as the benchmark's tables run. The launch is the shipped table's (``launch_for(tune=False)``) in all four.

``--probe``: instead, one layer's graph time after each of the steps that differ between those runs (fresh
weights, the same weights again, an idle GPU, a busy one), without and with the timer's warm-up replays, with
the SM clock NVML reports just before each.
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
    p.add_argument("--m", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", required=True)
    p.add_argument("--probe", action="store_true", help="graph time after each setup step, first shape only")
    args = p.parse_args()
    if args.probe:
        return probe(args)
    import torch

    from kernelscope.bench.graph_timing import time_cuda_graph
    from kernelscope.bench.w4a16 import W4A16Settings, make_cases, run_w4a16_sweep
    from kernelscope.bench.w4a16_impls import W4A16Call, build_cublas, build_tinygemm, build_w4a16_untuned
    from kernelscope.kernels.marlin import w4a16_matmul
    from kernelscope.kernels.marlin.autotune import launch_for

    props = torch.cuda.get_device_properties(0)
    doc = {"device": props.name, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": []}
    names = ("sweep", "bench_call", "bench", "bench_all")
    print(f"{props.name}, {doc['utc']}: graph time per call, us, m = {args.m} (median of {args.rounds})", flush=True)
    print("| k x n | launch | " + " | ".join(names) + " |\n|---|---|" + "---:|" * len(names), flush=True)
    settings = W4A16Settings(cupti=False)
    for shape in args.shapes.split(","):
        k, n = (int(x) for x in shape.split("x"))
        wt, copies = weight_copies(k, n, props.L2_cache_size)
        launch = launch_for(args.m, k, n, 128, *copies[0], tune=False).launch
        a = torch.randn((args.m, k), device="cuda").half()
        calls = [W4A16Call(wt, tune=False) for _ in copies]
        times: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(args.rounds):
            times["sweep"].append(time_cuda_graph(
                [lambda b=b, s=s: w4a16_matmul(a, b, s, 128, **launch) for b, s in copies]).median_ms * 1e3)
            times["bench_call"].append(time_cuda_graph([lambda f=f: f(a) for f in calls]).median_ms * 1e3)
            for name, builders in (("bench", {"w4a16-untuned": build_w4a16_untuned}),
                                   ("bench_all", {"cublas": build_cublas, "tinygemm": build_tinygemm,
                                                  "w4a16-untuned": build_w4a16_untuned})):
                res = run_w4a16_sweep(make_cases([args.m], [(k, n)]), builders, settings, command=["harness_check"])
                row = next(r for r in res.rows if r.impl == "w4a16-untuned")
                times[name].append(row.get("graph_median_ms") * 1e3 if row.status == "ok" else float("nan"))
        med = {name: statistics.median(v) for name, v in times.items()}
        doc["rows"].append({"k": k, "n": n, "m": args.m, "launch": launch, "us": times})
        with open(args.out, "w") as f:
            json.dump(doc, f)
        print(f"| {k}x{n} | {launch} | " + " | ".join(f"{med[name]:.2f}" for name in names) + " |", flush=True)
    return 0


def probe(args: argparse.Namespace) -> int:
    import torch

    from kernelscope.bench.graph_timing import time_cuda_graph
    from kernelscope.kernels.marlin import w4a16_matmul
    from kernelscope.kernels.marlin.autotune import launch_for

    props = torch.cuda.get_device_properties(0)
    k, n = (int(x) for x in args.shapes.split(",")[0].split("x"))
    wt, copies = weight_copies(k, n, props.L2_cache_size)
    launch = launch_for(args.m, k, n, 128, *copies[0], tune=False).launch
    a = torch.randn((args.m, k), device="cuda").half()
    steps = []

    def timed(step: str, words: list, warmup_ms: float) -> None:
        torch.cuda.synchronize()
        clock = torch.cuda.clock_rate()
        t = time_cuda_graph([lambda b=b, s=s: w4a16_matmul(a, b, s, 128, **launch) for b, s in words],
                            warmup_ms=warmup_ms)
        steps.append({"step": step, "warmup_ms": warmup_ms, "us": t.median_ms * 1e3, "clock": t.clock,
                      "sm_clock_mhz_before": clock})
        print(f"| {step} | {warmup_ms:g} | {clock} | {t.median_ms * 1e3:.2f} |", flush=True)

    print(f"{props.name}: {k}x{n} m = {args.m}, {launch}\n| step | warm-up ms | SM MHz before | graph us |\n"
          "|---|---:|---:|---:|", flush=True)
    timed("fresh weights (make_weights, copies)", copies, 0)
    timed("the same weights again", copies, 0)
    time.sleep(1.0)
    timed("after 1 s idle, the same weights", copies, 0)
    for warmup_ms in (0, 25):
        del wt, copies
        wt, copies = weight_copies(k, n, props.L2_cache_size)
        timed("fresh weights again", copies, warmup_ms)
    busy = torch.randn((8192, 8192), device="cuda", dtype=torch.float16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.2:  # 200 ms of matmuls: the power limit lowers the SM clock
        busy @ busy
    timed("after 200 ms of fp16 matmuls, the same weights", copies, 25)
    with open(args.out, "w") as f:
        json.dump({"device": props.name, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "k": k, "n": n, "m": args.m, "launch": launch, "steps": steps}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
