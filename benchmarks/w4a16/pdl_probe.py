"""Programmatic dependent launch (PDL) for the W4A16 kernel: what it gains back to back and beside another kernel.

    PYTHONPATH=src python3 benchmarks/w4a16/pdl_probe.py --sweep sweep.json --out pdl.json

For each point of a ``sweep_graph.py`` result, its fastest launch is timed by CUDA-graph time per call
(cold weights: copies cycled, L2 flushed between replays) four ways: without and with ``pdl=True``, and
each either back to back (every call follows another W4A16 call, which lets the next one launch early) or
with a neighbour (every call follows a one-pass elementwise kernel on its activations, ``torch.mul(a, 1,
out=b)``, launched without PDL, as a norm or activation kernel between two linear layers is). With a
neighbour, the per-call time includes the neighbour's.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sweep", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--replays", type=int, default=10)
    args = p.parse_args()
    import torch

    from kernelscope.bench.graph_timing import copies_for_cold_l2, time_cuda_graph
    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import reference_matmul, to_kernel_layout, w4a16_matmul

    sweep = json.load(open(args.sweep))
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    doc = {"device": torch.cuda.get_device_name(0), "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "rows": []}
    by_shape: dict[tuple[int, int], list[dict]] = {}
    for row in sweep["rows"]:
        by_shape.setdefault((row["k"], row["n"]), []).append(row)
    print(f"{'k x n':>12} {'m':>4} {'floor':>6} | {'b2b':>6} {'b2b pdl':>8} | {'nbr':>6} {'nbr pdl':>8} us")
    for (k, n), rows in by_shape.items():
        wt = make_weights(k, n, 128, "cuda", 0)
        bk, sk = to_kernel_layout(wt.B, wt.s, 128)
        copies = [(bk, sk)] + [(bk.clone(), sk.clone()) for _ in range(copies_for_cold_l2(k * n // 2, l2) - 1)]
        for row in rows:
            ok = sorted((r for r in row["tried"] if r.get("status") == "ok"), key=lambda r: r["us"])
            if not ok:
                continue
            launch = ok[0]["launch"]
            m = row["m"]
            a = torch.randn((m, k), device="cuda").half()
            b = torch.empty_like(a)
            ref = reference_matmul(a, wt.B, wt.s, 128)
            out = {"k": k, "n": n, "m": m, "floor_us": row["floor_us"], "launch": launch}
            for pdl in (False, True):
                got = w4a16_matmul(a, bk, sk, 128, **launch, pdl=pdl).float()
                out[f"relative_error_pdl_{pdl}"] = ((got - ref).norm() / ref.norm()).item()
                b2b = [lambda w=w, s=s: w4a16_matmul(a, w, s, 128, **launch, pdl=pdl) for w, s in copies]
                nbr = [lambda w=w, s=s: (torch.mul(a, 1, out=b), w4a16_matmul(b, w, s, 128, **launch, pdl=pdl))
                       for w, s in copies]
                out[f"b2b_pdl_{pdl}_us"] = time_cuda_graph(b2b, replays=args.replays).median_ms * 1e3
                out[f"nbr_pdl_{pdl}_us"] = time_cuda_graph(nbr, replays=args.replays).median_ms * 1e3
            ewise = [lambda: torch.mul(a, 1, out=b)]
            out["neighbour_alone_us"] = time_cuda_graph(ewise, replays=args.replays, flush_l2=False).median_ms * 1e3
            doc["rows"].append(out)
            print(f"{k:>5}x{n:<6} {m:>4} {row['floor_us']:6.1f} | {out['b2b_pdl_False_us']:6.2f} "
                  f"{out['b2b_pdl_True_us']:8.2f} | {out['nbr_pdl_False_us']:6.2f} {out['nbr_pdl_True_us']:8.2f}"
                  f"  (neighbour alone {out['neighbour_alone_us']:.2f}; err {out['relative_error_pdl_True']:.1e})",
                  flush=True)
            with open(args.out, "w") as f:
                json.dump(doc, f)
        del copies
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
