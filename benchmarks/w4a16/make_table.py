"""Markdown tables of a `kernelscope bench w4a16` results file, with the targets of issues 6 and 7 checked.

    python3 benchmarks/w4a16/make_table.py benchmarks/w4a16/runs/final/bench_w4a16_h100.json
"""
from __future__ import annotations

import json
import sys


def main(path: str) -> None:
    d = json.load(open(path))
    env, st = d["environment"], d["settings"]
    rows = {(r["impl"], r["params"]["k"], r["params"]["n"], r["params"]["m"]): r for r in d["rows"]}
    shapes = sorted({(k, n) for _, k, n, _ in rows}, key=lambda s: (s[0] * s[1], s))
    ms = sorted({m for *_, m in rows})
    val = lambda x: x.get("value") if isinstance(x, dict) else x  # noqa: E731  (Metric dicts or plain values)
    print(f"Device: {val(env['device']['name'])}, driver {val(env.get('driver_version'))}, {env.get('date_utc')}; "
          "copy bandwidth measured in the same run "
          f"{st['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s; median of {st['repeats']} calls, L2 flushed.\n")
    print("| k x n | m | w4a16 us | % of floor | cuBLAS fp16 us | tinygemm us | vs cuBLAS | vs tinygemm | launch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for k, n in shapes:
        for m in ms:
            w, c, t = (rows.get((i, k, n, m)) for i in ("w4a16", "cublas", "tinygemm"))
            if w is None or w["status"] != "ok":
                print(f"| {k}x{n} | {m} | {w and w['status']} | | | | | | |")
                continue
            us = lambda r: f"{r['median_ms'] * 1e3:.1f}" if r and r["status"] == "ok" else (r or {}).get("status", "")
            lc = w.get("launch", {})
            launch = (f"{lc.get('block_m')}x{lc.get('block_n')}x{lc.get('block_k')} split {lc.get('split_k')}"
                      f"{' swap' if lc.get('swap_ab') else ''}{' pf' + str(lc['prefetch']) if lc.get('prefetch') else ''}{' tma' if lc.get('tma') else ''}"
                      f" w{lc.get('num_warps')}")
            print(f"| {k}x{n} | {m} | {us(w)} | {w['pct_of_floor']:.0f}% | {us(c)} | {us(t)} | "
                  f"{w.get('speedup_vs_cublas', float('nan')):.2f}x | {w.get('speedup_vs_tinygemm', float('nan')):.2f}x "
                  f"| {launch} |")


if __name__ == "__main__":
    main(sys.argv[1])
