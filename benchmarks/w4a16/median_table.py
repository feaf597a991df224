"""Median of several `kernelscope bench w4a16` runs, per point, as a Markdown table, with the targets checked.

    python3 benchmarks/w4a16/median_table.py run1.json run2.json run3.json[.gz] [--timing graph_median_ms]

Per (k, n, m) and implementation: the median over the runs of the chosen timing (graph time per call by
default); % of floor = floor_ms (same in every run of one machine, the median taken) / that median;
speedups = baseline median / this median. Targets (graph time): m = 1 >= 75 % of the floor for
layers of >= 32 MiB of packed weights, >= 55 % below; vs cuBLAS >= 2.5x at m <= 16 on >= 32 MiB layers,
>= 1.5x at m = 64, >= 1.1x at m = 128; never slower than cuBLAS or tinygemm at m <= 128.
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
from collections import defaultdict

MIB = 1 << 20


def load(paths: list[str], timing: str) -> tuple[dict, list[dict]]:
    cells: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    floors: dict[tuple, list[float]] = defaultdict(list)
    launches: dict[tuple, set] = defaultdict(set)
    docs = [json.load(gzip.open(p) if p.endswith(".gz") else open(p)) for p in paths]
    for d in docs:
        for r in d["rows"]:
            if r["status"] != "ok" or r.get(timing) is None:
                continue
            p = r["params"]
            key = (p["k"], p["n"], p["m"])
            cells[key][r["impl"]].append(r[timing])
            floors[key].append(r["floor_ms"])
            if r.get("launch"):
                launches[(key, r["impl"])].add(launch_text(r["launch"]))
    return {"cells": cells, "floors": floors, "launches": launches}, docs


def launch_text(lc: dict) -> str:
    """A Triton launch (BLOCK_M x BLOCK_N split, stages, registers) or a Gluon one (split, registers, loop)."""
    reg_cap = lc.get("max_registers", lc.get("maxnreg"))  # LaunchConfig's name; "maxnreg" in older run files
    regs = f" r{reg_cap}" if reg_cap else ""
    if lc.get("kernel") == "gluon":  # the Gluon kernel (tune_space.gluon_launch)
        stages = f" s{lc['num_stages']}" if "num_stages" in lc else ""  # a launch without it is shown without it
        return (f"gluon {lc['programs']} programs{regs}{stages}{' sync' if lc.get('sync_mma') else ''}"
                f"{' pdl' if lc.get('pdl') else ''}")
    if "block_m" not in lc:  # an older Gluon launch record (a split of its column tiles)
        return f"gluon 64 split {lc['split_k']}{regs}{' chained' if lc.get('pipeline') else ''}"
    stages = f" st{lc['num_stages']}" if lc.get("num_stages") != 3 else ""
    return f"{lc['block_m']}x{lc['block_n']} split {lc['split_k']}{stages}{regs}"


def targets(k: int, n: int, m: int, pct: float, vs_cublas: float | None, vs_tiny: float | None) -> str:
    big = k * n // 2 >= 32 * MIB
    miss = []
    if m == 1 and pct < (75 if big else 55):
        miss.append(f"floor < {75 if big else 55}%")
    need = {1: 2.5, 16: 2.5, 64: 1.5, 128: 1.1}.get(m) if big else None
    if need and vs_cublas is not None and vs_cublas < need:
        miss.append(f"< {need}x cuBLAS")
    if vs_cublas is not None and vs_cublas < 1:
        miss.append("slower than cuBLAS")
    if vs_tiny is not None and vs_tiny < 1:
        miss.append("slower than tinygemm")
    return "met" if not miss else "MISS: " + ", ".join(miss)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--timing", default="graph_median_ms")
    ap.add_argument("--kernels", default="w4a16,w4a16-untuned",
                    help="kernelscope implementations to tabulate (e.g. w4a16,w4a16-gluon); targets are checked on "
                         "the first")
    args = ap.parse_args()
    kernels = args.kernels.split(",")
    data, docs = load(args.files, args.timing)
    print(f"{len(docs)} runs; timing {args.timing}; median over runs; targets on {kernels[0]}\n")
    head = "".join(f" {i} us | % floor | vs cuBLAS | vs tinygemm | {i} launch |" for i in kernels)
    print(f"| k x n | MiB | m | cuBLAS us | tinygemm us |{head} targets |")
    print("|---|---:|---:|---:|---:|" + "---:|---:|---:|---:|---|" * len(kernels) + "---|")
    f = lambda x: f"{x * 1e3:.1f}" if x else "-"  # noqa: E731
    for (k, n, m), by in sorted(data["cells"].items(), key=lambda kv: (-kv[0][0] * kv[0][1], kv[0])):
        med = {impl: statistics.median(v) for impl, v in by.items()}
        floor = statistics.median(data["floors"][(k, n, m)])
        c, t = med.get("cublas"), med.get("tinygemm")
        cells, verdict = [], "-"
        for j, impl in enumerate(kernels):
            w = med.get(impl)
            if w is None:
                cells.append(" - | - | - | - | - |")
                continue
            vc = c / w if c else None
            vt = t / w if t else None
            launch = "; ".join(sorted(data["launches"].get(((k, n, m), impl), ())))
            cells.append(f" {f(w)} | {100 * floor / w:.0f}% | {f'{vc:.2f}x' if vc else '-'} | "
                         f"{f'{vt:.2f}x' if vt else '-'} | {launch} |")
            if j == 0:
                verdict = targets(k, n, m, 100 * floor / w, vc, vt)
        print(f"| {k}x{n} | {k * n / 2 / MIB:.1f} | {m} | {f(c)} | {f(t)} |{''.join(cells)} {verdict} |")


if __name__ == "__main__":
    main()
