"""Median over separate runs of ``sweep.py`` of each variant's ratio to cuDNN (each ratio taken within its run).

    python3 benchmarks/attention/median_runs.py run1/sweep.json run2/sweep.json run3/sweep.json
"""
from __future__ import annotations

import gzip
import json
import statistics
import sys


def main(paths: list[str]) -> None:
    runs = [json.load(gzip.open(p) if p.endswith(".gz") else open(p)) for p in paths]
    names = [n for n in runs[0][0]["tflops"] if n != "cudnn" and all(n in r[0]["tflops"] for r in runs)]
    print(f"median over {len(runs)} runs of TFLOP/s / cuDNN's TFLOP/s in the same run (graph time)")
    print("| dtype | mask | S | cuDNN TF/s | " + " | ".join(f"{n} x cuDNN (runs)" for n in names) + " |")
    print("|---|---|---:|---:|" + "---|" * len(names))
    for i, row in enumerate(runs[0]):
        cells = []
        for n in names:
            ratios = [r[i]["tflops"][n] / r[i]["tflops"]["cudnn"] for r in runs]
            cells.append(f"{statistics.median(ratios):.2f} ({', '.join(f'{x:.2f}' for x in ratios)})")
        cudnn = statistics.median(r[i]["tflops"]["cudnn"] for r in runs)
        print(f"| {row['dtype']} | {'causal' if row['causal'] else 'full'} | {row['seq']} | {cudnn:.0f} | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
