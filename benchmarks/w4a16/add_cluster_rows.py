"""Put the Gluon kernel's cluster launches into the shipped H100 table where a graph-time A/B measured them faster.

    python3 benchmarks/w4a16/add_cluster_rows.py runs/issue17_session9/cluster_ab_table.json.gz

For every (k, n, m) row of the table that the A/B (cluster_ab.py, run with the candidates "table" and "cluster")
timed at the row's own launch, the fastest cluster launch (``cluster`` > 1) replaces the row's launch when its median
was more than 1 % below the row's launch's median in the same run. The row keeps the launch it replaced and both
times, as add_gluon_rows.py's rows do.
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "src/kernelscope/kernels/marlin/tuned_h100.json"
MARGIN = 0.99


def as_launch(kw: dict) -> dict:
    """gluon_w4a16 keywords (cluster_ab.py's rows) -> the table's w4a16_matmul keywords."""
    launch = dict(kernel="gluon", programs=kw["programs"], num_stages=kw["stages"], maxnreg=kw["maxnreg"])
    launch.update({key: kw[key] for key in ("sync_mma", "pdl") if kw.get(key)})
    if kw.get("cluster", 1) > 1:
        launch["cluster"] = kw["cluster"]
    return launch


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from kernelscope.kernels.marlin.gluon_args import kernel_kwargs

    p = argparse.ArgumentParser()
    p.add_argument("ab", type=Path)
    args = p.parse_args()
    doc = json.loads(TABLE.read_text())
    ab = json.load(gzip.open(args.ab) if args.ab.suffix == ".gz" else args.ab.open())
    changed = []
    for row in doc["configs"]:
        if row["launch"].get("kernel") != "gluon":
            continue
        points = [r for r in ab["rows"] if (r["k"], r["n"], r["m"]) == (row["k"], row["n"], row["m"])
                  and r["status"] == "ok" and r["us"]]
        base = [r for r in points if r["launch"] == kernel_kwargs(row["launch"])]
        clusters = sorted((statistics.median(r["us"]), r["launch"]) for r in points
                          if r["launch"].get("cluster", 1) > 1)
        if not base or not clusters:
            continue
        base_us, (best_us, best) = statistics.median(base[0]["us"]), clusters[0]
        if best_us < MARGIN * base_us:
            row.update(launch=as_launch(best), median_us=round(best_us, 2), timing="cuda-graph",
                       round=f"cluster-ab-{ab['utc'][:10]}",
                       replaced={"launch": row["launch"], "median_us": round(base_us, 2),
                                 "ab": str(args.ab.resolve().relative_to(ROOT))})
            changed.append(f"{row['k']}x{row['n']} m={row['m']}: {base_us:.2f} -> {best_us:.2f} us")
    if changed and "cluster-ab" not in doc["how"]:
        doc["how"] += ("; rows with round cluster-ab-* are the Gluon kernel's cluster launches where a graph-time A/B "
                       "measured them more than 1 % faster than the row's launch in the same run "
                       "(benchmarks/w4a16/add_cluster_rows.py; each row keeps the launch it replaced)")
    TABLE.write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(changed) or "no row changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
