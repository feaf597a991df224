"""Reduce `ncu --csv --page raw` output to the columns the occupancy tests use.

Usage: python scripts/ncu_occupancy_table.py RAW.csv > tests/data/ncu_occupancy_h100.csv
Values are converted to base units (bytes) so tests compare integers.
"""
from __future__ import annotations

import csv
import sys

COLUMNS = {
    "launch__block_size": ("block_size", 1),
    "launch__registers_per_thread": ("registers_per_thread", 1),
    "launch__shared_mem_per_block_static": ("smem_static_bytes", None),
    "launch__shared_mem_per_block_dynamic": ("smem_dynamic_bytes", None),
    "launch__shared_mem_config_size": ("smem_config_bytes", None),
    "launch__occupancy_limit_warps": ("limit_warps", 1),
    "launch__occupancy_limit_registers": ("limit_registers", 1),
    "launch__occupancy_limit_shared_mem": ("limit_shared_mem", 1),
    "launch__occupancy_limit_blocks": ("limit_blocks", 1),
    "sm__maximum_warps_per_active_cycle_pct": ("theoretical_occupancy_pct", None),
    "sm__warps_active.avg.pct_of_peak_sustained_active": ("achieved_occupancy_pct", None),
}
SCALE = {"byte": 1, "Kbyte": 1000, "Mbyte": 1000**2, "Kbyte/block": 1000, "byte/block": 1}


def main(path: str) -> None:
    rows = list(csv.reader(open(path, newline="")))
    header, units = rows[0], rows[1]
    unit_of = dict(zip(header, units))
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["kernel", "cc", "grid_size"] + [c for c, _ in COLUMNS.values()])
    for r in rows[2:]:
        d = dict(zip(header, r))
        out = [d["Kernel Name"][:120], d["CC"], d["launch__grid_size"].replace(",", "")]
        for raw, (_, _) in COLUMNS.items():
            v = float(d[raw].replace(",", ""))
            scale = SCALE.get(unit_of[raw], 1)
            v *= scale
            out.append(str(int(round(v))) if raw != "sm__maximum_warps_per_active_cycle_pct"
                       and "pct" not in raw else f"{v:.4f}")
        w.writerow(out)


if __name__ == "__main__":
    main(sys.argv[1])
