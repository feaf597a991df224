"""Best launch per point in two or more ``sweep_graph.py`` results, side by side (graph time, us).

    python3 benchmarks/w4a16/compare_sweeps.py base.json scale_ahead.json
"""
from __future__ import annotations

import json
import sys


def best(row: dict) -> tuple[float, dict] | None:
    ok = [r for r in row["tried"] if r.get("status") == "ok"]
    if not ok:
        return None
    r = min(ok, key=lambda r: r["us"])
    return r["us"], r["launch"]


def short(launch: dict) -> str:
    return (f"{launch['block_m']}x{launch['block_n']} s{launch['split_k']} st{launch['num_stages']} "
            f"w{launch['num_warps']}")


def main(paths: list[str]) -> None:
    docs = [json.load(open(p)) for p in paths]
    keys = [(r["k"], r["n"], r["m"]) for r in docs[0]["rows"]]
    print(f"{docs[0]['device']}, {docs[0]['utc']}; best graph time per point (us), % of floor, vs cuBLAS / tinygemm")
    print("k x n m floor | " + " | ".join(p.rsplit("/", 1)[-1] for p in paths) + " | cuBLAS tinygemm")
    for key in keys:
        cells, base = [], None
        for d in docs:
            row = next((r for r in d["rows"] if (r["k"], r["n"], r["m"]) == key), None)
            b = best(row) if row else None
            base = base or row
            cells.append("-" if b is None else f"{b[0]:.2f} {100 * row['floor_us'] / b[0]:.0f}% "
                         f"{row['cublas_us'] / b[0]:.2f}x/{row['tinygemm_us'] / b[0]:.2f}x {short(b[1])}")
        print(f"{key[0]}x{key[1]} {key[2]} {base['floor_us']:.1f} | " + " | ".join(cells)
              + f" | {base['cublas_us']:.1f} {base['tinygemm_us']:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
