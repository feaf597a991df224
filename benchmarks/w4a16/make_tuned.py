"""Write the shipped tuned table (src/kernelscope/kernels/marlin/tuned_<gpu>.json) from tune.py runs.

    python3 benchmarks/w4a16/make_tuned.py runs/round12/tune_h100.json.gz --out src/.../tuned_h100.json

Keeps, per (k, n, m), the fastest configuration that was checked correct ("ok") over the given runs.
Only runs of the current kernel belong here: a configuration timed on an earlier kernel is not a
measurement of this one.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys

LAUNCH_KEYS = ("block_m", "block_n", "block_k", "split_k", "num_warps", "num_stages", "swap_ab", "prefetch",
               "dequant_asm", "maxnreg", "tma")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="tune.py output files (.json or .json.gz)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    best: dict[tuple[int, int, int], dict] = {}
    device = date = None
    for path in args.runs:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            doc = json.load(f)
        device, date = doc["device"], doc["date"]
        rnd = int(m.group(1)) if (m := re.search(r"round(\d+)", path)) else None
        for r in doc["rows"]:
            key = (r["k"], r["n"], r["m"])
            if r.get("status") == "ok" and r["median_ms"] < best.get(key, {}).get("median_ms", float("inf")):
                best[key] = dict(r, round=rnd)
    table = {
        "device_name": device,
        "measured": date,
        "how": "benchmarks/w4a16/tune.py (" + ", ".join(args.runs) + "): every candidate checked against the "
               "fp32 reference, then timed (CUDA events, L2 flushed, median of 15); the fastest per (k, n, m) kept "
               "(benchmarks/w4a16/make_tuned.py)",
        "groupsize": 128,
        "configs": [{"k": k, "n": n, "m": m, "median_us": round(r["median_ms"] * 1e3, 2), "round": r["round"],
                     "launch": {c: r[c] for c in LAUNCH_KEYS if c in r and r[c] is not None}}
                    for (k, n, m), r in sorted(best.items())],
    }
    with open(args.out, "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    print(f"{len(table['configs'])} points from {device} ({date}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
