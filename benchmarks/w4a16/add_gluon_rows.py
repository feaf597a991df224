"""Put the Gluon decode kernel into the shipped H100 table where a graph-time sweep measured it faster.

    python3 benchmarks/w4a16/add_gluon_rows.py runs/issue17_session5/streamk_sweep_h100.json.gz \
        runs/issue17_session5/shipped_shapes_sweep_h100.json.gz    # fifth session, the rule's launch of then
    python3 benchmarks/w4a16/add_gluon_rows.py runs/issue17_session6/tiles_sweep_h100.json.gz  # sixth session

For every (k, n, m) row of the table that a sweep (sweep_gluon.py) timed, the Gluon kernel on the table's own weight
layout (Bk) with the rule's grid (tune_space.gluon_launch) replaces the row's launch when it was more than 1 % faster
than that launch in the same run (the sweep times the Triton kernel at autotune.launch_for's launch, which for a
shape of the table is the table's row). The row keeps both times and says where they came from.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "src/kernelscope/kernels/marlin/tuned_h100.json"
MARGIN = 0.99


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    p = argparse.ArgumentParser()
    p.add_argument("sweeps", nargs="+", type=Path)
    args = p.parse_args()
    doc = json.loads(TABLE.read_text())
    rows = {(r["k"], r["n"], r["m"]): r for r in doc["configs"]}
    changed = []
    for path in args.sweeps:
        sweep = json.load(gzip.open(path) if path.suffix == ".gz" else path.open())
        for point in sweep["rows"]:
            key = (point["k"], point["n"], point["m"])
            row = rows.get(key)
            if row is None or row["launch"] != point["triton_launch"]:
                continue  # not a table shape, or the sweep did not time the table's launch
            launch = gluon_launch(point["k"], point["n"], 132, 16)  # the sweeps timed the warpgroup MMA only
            gluon_us = [t["us"] for t in point["tried"] if t.get("status") == "ok" and t["launch"]["layout"] == "bk"
                        and (t["launch"]["programs"], t["launch"]["stages"], t["launch"]["maxnreg"])
                        == (launch["programs"], launch["num_stages"], launch["maxnreg"])]
            if gluon_us and gluon_us[0] < MARGIN * point["triton_us"]:
                row.update(launch=launch, median_us=round(gluon_us[0], 2), timing="cuda-graph",
                           round=f"gluon-sweep-{sweep['utc'][:10]}",
                           replaced={"launch": point["triton_launch"], "median_us": round(point["triton_us"], 2),
                                     "sweep": str(path.resolve().relative_to(ROOT))})
                changed.append(f"{key}: {point['triton_us']:.2f} -> {gluon_us[0]:.2f} us")
    doc["how"] += ("; rows with round gluon-sweep-* are the Gluon decode kernel where a graph-time sweep measured it "
                   "more than 1 % faster than the row's launch in the same run (benchmarks/w4a16/add_gluon_rows.py; "
                   "each row keeps the launch it replaced)") if changed and "gluon-sweep" not in doc["how"] else ""
    TABLE.write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(changed) or "no row changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
