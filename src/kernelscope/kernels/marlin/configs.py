"""Launch configurations of the W4A16 kernel: tuned per device, with a rule for the rest.

A tuned table (``tuned_<gpu>.json`` beside this module; its ``how`` field says how
it was measured) holds the fastest configuration measured per layer shape (k, n)
and token count m on one GPU model. :func:`choose_launch` looks the call up there
by device name; for a GPU or shape that was not tuned it applies :func:`rule_launch`
and says so (docs/decisions/0004).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

TUNED_FILES = ("tuned_h100.json",)


@dataclass(frozen=True)
class LaunchChoice:
    launch: dict[str, Any]  # keyword arguments of w4a16_matmul
    source: str  # "tuned on <device> (<date>) at m=<m>" or "rule (...)"


def rule_launch(m: int, k: int, tma: bool = False) -> dict[str, Any]:
    """The tuned launches' pattern (docs/decisions/0004): transposed product everywhere, one
    128-row block of k per iteration; for decode (m <= 16) 16-token tiles of 128 columns with k split 4
    ways; wider token tiles above. ``tma``: load tiles with the tensor memory accelerator (sm_90 and later)."""
    if m <= 16:
        launch = dict(block_m=16, block_n=128, block_k=128, split_k=4, num_warps=4, num_stages=3, swap_ab=True)
    elif m <= 64:
        launch = dict(block_m=64, block_n=128, block_k=128, split_k=4, num_warps=4, num_stages=4, swap_ab=True)
    else:
        launch = dict(block_m=128, block_n=64, block_k=128, split_k=1, num_warps=4, num_stages=3, swap_ab=True)
    if tma:
        launch["tma"] = True
    while launch["split_k"] > 1 and k % (launch["split_k"] * launch["block_k"]):
        launch["split_k"] //= 2  # k must split into whole BLOCK_K slices
    return launch


@lru_cache(maxsize=None)
def tuned_tables() -> dict[str, dict[str, Any]]:
    """Device name -> tuned table, from the files shipped with the package."""
    out = {}
    for name in TUNED_FILES:
        path = Path(__file__).with_name(name)
        if path.exists():
            doc = json.loads(path.read_text())
            out[doc["device_name"]] = doc
    return out


def choose_launch(m: int, k: int, n: int, groupsize: int, device_name: str | None,
                  tma: bool = False) -> LaunchChoice:
    """The tuned configuration for this device and (k, n) at the nearest tuned m at or above m (else the
    largest), or the rule when this device or shape was not tuned (``tma``: the device has TMA, sm_90+)."""
    table = tuned_tables().get(device_name or "")
    if table is not None and table.get("groupsize") == groupsize:
        rows = sorted((r for r in table["configs"] if (r["k"], r["n"]) == (k, n)), key=lambda r: r["m"])
        if rows:
            row = next((r for r in rows if r["m"] >= m), rows[-1])
            # rows added after the table's tuning name their own day in their round ("gluon-sweep-2026-11-23")
            day = re.search(r"\d{4}-\d{2}-\d{2}", str(row.get("round", "")))
            return LaunchChoice(dict(row["launch"]), f"tuned on {table['device_name']} "
                                                     f"({day.group(0) if day else table['measured']}) at m={row['m']}")
    why = "no tuned table for this GPU" if table is None else "this shape was not tuned"
    return LaunchChoice(rule_launch(m, k, tma), f"rule ({why}): kernelscope.kernels.marlin.configs.rule_launch")
