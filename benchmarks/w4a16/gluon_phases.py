"""Where the time of one Gluon W4A16 launch goes, program by program: the kernel's phase records.

    PYTHONPATH=src python3 benchmarks/w4a16/gluon_phases.py --shapes 4096x4096,13824x5120 --m 1 --out phases.json
    PYTHONPATH=src python3 benchmarks/w4a16/gluon_phases.py --variants '[{}, {"stages": 8}]' ...

Each point runs the launch rule's launch (tune_space.gluon_launch, Bk weights) with ``records=`` (gluon_record:
each program's %globaltimer at its consumer's start, when its first block had landed, before its last tile's store
and at its end). It first checks the launch against the fp32 reference and times it by graph time per call (median
of 3 timings, cold weights, as the benchmark does), then records ``--launches`` eager launches, L2 flushed before
each. Per launch, from the programs' rows (medians over launches):

- span: first consumer start to last end (the kernel's own time, as far as its programs see it);
- start spread: first to last consumer start;
- first block: a program's start to its first block in shared memory (median and max over programs);
- per block: (last MMA - first block) / (blocks - 1), median over programs (the steady state of a program);
- end: last MMA to the program's end, for programs that only stored (a tile or a partial) and for those that
  summed a shared tile;
- outside: graph time per call - span (the launch, the programs' set-up before their consumer starts, the drain).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from kernelscope.kernels.marlin.gluon_record import FIELDS
from sweep_graph import weight_copies  # this folder's sweep


def summarize(rows: list[list[int]], fields: tuple[str, ...] = FIELDS) -> dict:
    """One launch's phase figures (us) from its programs' rows, in ``fields`` order (a recorded file's "fields": the
    eighth session's runs before 19:40 UTC put the end time sixth)."""
    r = [dict(zip(fields, row)) for row in rows]
    t0 = min(x["t_start_ns"] for x in r)
    us = 1e-3
    first = [(x["t_first_block_ns"] - x["t_start_ns"]) * us for x in r]
    per_block = [(x["t_last_mma_ns"] - x["t_first_block_ns"]) * us / (x["blocks"] - 1) for x in r if x["blocks"] > 1]
    end_store = [(x["t_end_ns"] - x["t_last_mma_ns"]) * us for x in r if x["tiles_summed"] == 0]
    end_sum = [(x["t_end_ns"] - x["t_last_mma_ns"]) * us for x in r if x["tiles_summed"] > 0]
    last = max(r, key=lambda x: x["t_end_ns"])
    med = statistics.median
    return {
        "span_us": (last["t_end_ns"] - t0) * us,
        "start_spread_us": (max(x["t_start_ns"] for x in r) - t0) * us,
        "first_block_median_us": med(first), "first_block_max_us": max(first),
        "per_block_median_us": med(per_block) if per_block else None,
        "end_store_median_us": med(end_store) if end_store else None,
        "end_sum_median_us": med(end_sum) if end_sum else None,
        "end_spread_us": (last["t_end_ns"] - min(x["t_end_ns"] for x in r)) * us,
        "last_program": {"program": last["program"], "start_us": (last["t_start_ns"] - t0) * us,
                         "first_block_us": (last["t_first_block_ns"] - last["t_start_ns"]) * us,
                         "mma_us": (last["t_last_mma_ns"] - last["t_first_block_ns"]) * us,
                         "end_us": (last["t_end_ns"] - last["t_last_mma_ns"]) * us, "summed": last["tiles_summed"]},
        "sms": len({x["sm"] & 0xFFFFFFFF for x in r}),
        "summed_median": med([x["tiles_summed"] for x in r if x["tiles_summed"] > 0] or [0]),
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096x4096,5120x5120,13824x5120")
    p.add_argument("--m", default="1")
    p.add_argument("--variants", default="[{}]", help="JSON list of gluon_w4a16 keyword overrides of the rule")
    p.add_argument("--launches", type=int, default=5)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    import torch

    from kernelscope.bench.graph_timing import time_cuda_graph
    from kernelscope.collect.timing import L2Flush
    from kernelscope.kernels.marlin import reference_matmul
    from kernelscope.kernels.marlin.gluon_args import kernel_kwargs
    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    props = torch.cuda.get_device_properties(0)
    flush = L2Flush()
    doc = {"device": props.name, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "fields": FIELDS,
           "points": []}
    print(f"{props.name}, {doc['utc']}: phase records of the rule's launch (us; medians over {args.launches} "
          "launches)", flush=True)
    print("| k x n | m | launch | graph us | span | outside | start spread | first block (max) | per block "
          "| end: store / sum | end spread | last program: start, first, MMAs, end |\n"
          "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|", flush=True)
    for shape in args.shapes.split(","):
        k, n = (int(x) for x in shape.split("x"))
        wt, copies = weight_copies(k, n, props.L2_cache_size)
        for m in (int(x) for x in args.m.split(",")):
            a = torch.randn((m, k), device="cuda").half()
            ref = reference_matmul(a, wt.B, wt.s, 128)
            for override in json.loads(args.variants):
                launch = gluon_launch(k, n, props.multi_processor_count, m)
                kw = {**kernel_kwargs(launch), **override}
                bk, sk = copies[0]
                err = ((gluon_w4a16(a, bk, sk, 128, n, **kw).float() - ref).norm() / ref.norm()).item()
                graph_us = statistics.median(
                    time_cuda_graph([lambda b=b, s=s: gluon_w4a16(a, b, s, 128, n, **kw) for b, s in copies],
                                    replays=10).median_ms * 1e3 for _ in range(3))
                rec = torch.zeros(kw["programs"] * len(FIELDS), dtype=torch.int64, device="cuda")
                launches = []
                for i in range(args.launches):
                    b, s = copies[i % len(copies)]
                    rec.zero_()
                    flush()
                    gluon_w4a16(a, b, s, 128, n, records=rec, record_values=len(FIELDS), **kw)
                    torch.cuda.synchronize()
                    launches.append(rec.view(-1, len(FIELDS)).tolist())
                sums = [summarize(rows) for rows in launches]
                med = {key: statistics.median(x[key] for x in sums) for key in sums[0]
                       if key not in ("last_program", "sms", "summed_median") and sums[0][key] is not None}
                last = sums[len(sums) // 2]["last_program"]
                doc["points"].append({"k": k, "n": n, "m": m, "kwargs": kw, "relative_error": err,
                                      "graph_us": graph_us, "summaries": sums, "launches": launches})
                with open(args.out, "w") as f:
                    json.dump(doc, f)
                desc = f"{kw['programs']} programs r{kw['maxnreg']} s{kw['stages']}"
                desc += " sync" if kw["sync_mma"] else ""

                def f(key: str) -> str:
                    return f"{med[key]:.2f}" if key in med else "-"
                print(f"| {k}x{n} | {m} | {desc} | {graph_us:.2f} | {f('span_us')} "
                      f"| {graph_us - med['span_us']:.2f} | {f('start_spread_us')} "
                      f"| {f('first_block_median_us')} ({f('first_block_max_us')}) | {f('per_block_median_us')} "
                      f"| {f('end_store_median_us')} / {f('end_sum_median_us')} | {f('end_spread_us')} "
                      f"| {last['start_us']:.2f}, {last['first_block_us']:.2f}, {last['mma_us']:.2f}, "
                      f"{last['end_us']:.2f}{' sum' if last['summed'] else ''} |", flush=True)
        del copies
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
