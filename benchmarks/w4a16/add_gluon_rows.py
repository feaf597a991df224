"""Put the Gluon decode kernel into the shipped H100 table where a graph-time sweep measured it faster.

    python3 benchmarks/w4a16/add_gluon_rows.py runs/issue17_session5/streamk_sweep_h100.json.gz \
        runs/issue17_session5/shipped_shapes_sweep_h100.json.gz    # fifth session, the rule's launch of then
    python3 benchmarks/w4a16/add_gluon_rows.py runs/issue17_session6/tiles_sweep_h100.json.gz  # sixth session
    python3 benchmarks/w4a16/add_gluon_rows.py --wide runs/issue17_session10/table_m32_m64.json.gz  # tenth

For every (k, n, m) row of the table that a sweep (sweep_gluon.py) timed, the Gluon kernel on the table's own weight
layout (Bk) with the rule's grid (tune_space.gluon_launch) replaces the row's launch when it was more than 1 % faster
than that launch in the same run (the sweep times the Triton kernel at autotune.launch_for's launch, which for a
shape of the table is the table's row). The row keeps both times and says where they came from.

``--wide`` (16 < m <= 64): the fastest of tune_space.gluon_wide_launches' grids in the sweep replaces the launch of
the row the point ran on (the table's nearest m at or above) under the same 1 % rule; a point between rows (m = 32,
which ran the m = 64 row) gets a row of its own.
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
    from kernelscope.kernels.marlin.tune_space import gluon_launch, gluon_wide_launches

    p = argparse.ArgumentParser()
    p.add_argument("sweeps", nargs="+", type=Path)
    p.add_argument("--wide", action="store_true", help="16 < m <= 64: tune_space.gluon_wide_launches' grids")
    args = p.parse_args()
    doc = json.loads(TABLE.read_text())
    rows = {(r["k"], r["n"], r["m"]): r for r in doc["configs"]}
    changed = []
    for path in args.sweeps:
        sweep = json.load(gzip.open(path) if path.suffix == ".gz" else path.open())
        for point in sweep["rows"]:
            key = (point["k"], point["n"], point["m"])
            # the row the point ran on: its own, or (--wide) the table's nearest m at or above
            ran = sorted((r for (k, n, m), r in rows.items() if (k, n) == key[:2] and m >= key[2] and args.wide),
                         key=lambda r: r["m"])
            row = rows.get(key) or (ran[0] if ran else None)
            if row is None or row["launch"] != point["triton_launch"] or args.wide != (16 < key[2] <= 64):
                continue  # not a table shape, the sweep did not time the table's launch, or not this mode's m
            launches = (gluon_wide_launches(point["k"], point["n"], 132) if args.wide
                        else [gluon_launch(point["k"], point["n"], 132, 16)])  # the warpgroup MMA only
            timed = [(t["us"], launch) for launch in launches for t in point["tried"]
                     if t.get("status") == "ok" and t["launch"]["layout"] == "bk"
                     and (t["launch"]["programs"], t["launch"]["stages"], t["launch"]["maxnreg"])
                     == (launch["programs"], launch["num_stages"], launch["maxnreg"])]
            if not timed:
                continue
            gluon_us, launch = min(timed, key=lambda t: t[0])
            if gluon_us < MARGIN * point["triton_us"]:
                if row["m"] != key[2]:
                    row = rows[key] = {"k": key[0], "n": key[1], "m": key[2]}
                row.update(launch=launch, median_us=round(gluon_us, 2), timing="cuda-graph",
                           round=f"gluon-sweep-{sweep['utc'][:10]}",
                           replaced={"launch": point["triton_launch"], "median_us": round(point["triton_us"], 2),
                                     "sweep": str(path.resolve().relative_to(ROOT))})
                changed.append(f"{key}: {point['triton_us']:.2f} -> {gluon_us:.2f} us")
    doc["configs"] = sorted(rows.values(), key=lambda r: (r["k"], r["n"], r["m"]))
    doc["how"] += ("; rows with round gluon-sweep-* are the Gluon decode kernel where a graph-time sweep measured it "
                   "more than 1 % faster than the row's launch in the same run (benchmarks/w4a16/add_gluon_rows.py; "
                   "each row keeps the launch it replaced)") if changed and "gluon-sweep" not in doc["how"] else ""
    TABLE.write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(changed) or "no row changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
