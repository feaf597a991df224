"""Where a W4A16 launch is decided (:func:`decide_launch`) and the public GEMM that uses it (:func:`w4a16_matmul`).

A launch is a :class:`LaunchConfig` (:mod:`launch_config`): the kernel, Triton or Gluon, and its parameters.
:func:`decide_launch` answers, for a call ``a (m, k) @ W (k, n)`` on a device, in this order:

1. **rule**: :func:`rule_launch` (:mod:`tune_space`), the pattern of the tuned launches; it holds for any shape
   and device;
2. **shipped table**: where ``tuned_<gpu>.json`` beside this module holds this GPU and layer shape (k, n), its row
   at the nearest tuned m at or above m (else the largest) replaces the rule;
3. **first-use tuner**: on a GPU, for a shape the table does not hold, the launch the tuner measured fastest for
   this GPU and Triton version, from its cache or tuned now (:mod:`autotune`, at most a few seconds, one line on
   stderr; the candidates are :func:`tune_space.candidates`: on sm_90 at m <= 64 the Gluon kernel's rule launches,
   then the Triton rule's, then the launches whose grids best fill whole waves), so a tuning never picks a launch
   measured slower than the rule's. Nothing is tuned in the CPU interpreter (its times say nothing about a GPU) or
   while a CUDA graph is being captured.

Each decision is kept for the process (:func:`forget_decisions` drops them), so a model's forward decides once per
shape.

Timing: the tuner ranks candidates by CUDA-graph time on cold weights
(:func:`kernelscope.collect.graph_timing.time_cuda_graph`), the benchmark's method; each table row says how it was
timed (``timing``: ``cuda-graph``, or ``cuda-events`` for rows kept from an earlier sweep).
``kernelscope tune w4a16 --rebuild-table`` regenerates the table, every row by graph time.
"""
from __future__ import annotations

import json
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import torch

from . import autotune
from .launch_config import LaunchConfig, LaunchDecision
from .matmul import check_inputs, run_checked
from .tune_space import rule_launch

__all__ = ["LaunchConfig", "LaunchDecision", "decide_launch", "forget", "forget_decisions", "rebuild_table",
           "rule_launch", "rule_or_table", "table_launch", "tuned_tables", "w4a16_matmul"]

TUNED_FILES = ("tuned_h100.json",)
TABLE_SCHEMA = "kernelscope.w4a16-launch-table"
REBUILD_BUDGET_S = 300.0  # the whole table on one GPU


@lru_cache(maxsize=None)
def tuned_tables() -> dict[str, dict[str, Any]]:
    """Device name -> shipped table (the files beside this module)."""
    out = {}
    for name in TUNED_FILES:
        path = Path(__file__).with_name(name)
        if path.exists():
            doc = json.loads(path.read_text())
            out[doc["device_name"]] = doc
    return out


def table_launch(m: int, k: int, n: int, groupsize: int, device_name: str | None) -> LaunchDecision | None:
    """The shipped table's row for this device and (k, n) at the nearest tuned m at or above m (else the largest),
    or None when the table does not hold this device, group size or shape."""
    table = tuned_tables().get(device_name or "")
    if table is None or table.get("groupsize") != groupsize:
        return None
    rows = sorted((r for r in table["rows"] if (r["k"], r["n"]) == (k, n)), key=lambda r: r["m"])
    if not rows:
        return None
    row = next((r for r in rows if r["m"] >= m), rows[-1])
    return LaunchDecision(LaunchConfig.from_dict(row["launch"]),
                          f"table {TUNED_FILES[0]} ({table['device_name']}, m={row['m']}, {row['measured']}, "
                          f"{row['timing']})")


def rule_or_table(m: int, k: int, n: int, groupsize: int, device_name: str | None, tma: bool) -> LaunchDecision:
    """Steps 1 and 2 of :func:`decide_launch`: the table's row where it holds the shape, else the rule."""
    row = table_launch(m, k, n, groupsize, device_name)
    if row is not None:
        return row
    table = tuned_tables().get(device_name or "")
    why = "no tuned table for this GPU" if table is None else "this shape was not tuned"
    return LaunchDecision(rule_launch(m, k, tma), f"rule ({why}): kernelscope.kernels.marlin.tune_space.rule_launch")


def decide_launch(m: int, k: int, n: int, groupsize: int, words: Any, scales: Any, *, tune: bool | None = None,
                  **tune_kwargs: Any) -> LaunchDecision:
    """The launch for ``a (m, k) @ (words, scales)`` (kernel layout) and where it came from: the rule, then the
    shipped table, then the first-use tuner (the module docstring). ``tune``: None = tune on a GPU only; True = also
    in the interpreter (tests); False = the table or the rule only. ``tune_kwargs`` go to the tuner
    (``deadline_s``, ``limit``, ``timer``)."""
    key = (words.device, m, k, n, groupsize, tune)
    if key in _DECIDED:  # every call of a model's forward asks: answered from here after the first
        return _DECIDED[key]
    facts = autotune.device_facts(words)
    on_gpu = words.device.type == "cuda"
    fixed = rule_or_table(m, k, n, groupsize, facts.name if on_gpu else None, facts.tma)
    if tune is None:
        tune = on_gpu
    if not tune or fixed.source.startswith("table"):
        decision = fixed
    else:
        warm = table_warm_start(m, facts.name)
        decision = autotune.tuned_launch(m, k, n, groupsize, words, scales, facts, fixed, warm, **tune_kwargs)
        if on_gpu and torch.cuda.is_current_stream_capturing():  # not kept: the next eager call may still tune
            return decision
    _DECIDED[key] = decision
    return decision


def w4a16_matmul(a: torch.Tensor, B: torch.Tensor, s: torch.Tensor, groupsize: int, *,
                 config: LaunchConfig | None = None, out: torch.Tensor | None = None,
                 workspace: torch.Tensor | None = None, recorder: Any = None) -> torch.Tensor:
    """``a @ dequant(B, s)`` in fp16, with ``(B, s)`` from :func:`to_kernel_layout`; a is fp16 ``(m, k)``, m >= 1.

    ``config``: the launch (:class:`LaunchConfig`: the Triton kernel or, on sm_90 at m <= 64, the Gluon decode
    kernel); None: :func:`decide_launch` picks it (rule, shipped table, first-use tuner).
    Split-k partial sums are added inside the launch, in split order, so results are deterministic.
    ``out``, if given, receives the result.
    ``workspace`` (Triton kernel): zeroed int32 per-tile counters for split-k, at least one per output tile, owned
    by the caller (e.g. one per stream); the kernel leaves it zeroed. Without it a per-device buffer is kept, for
    one stream at a time.
    ``recorder``: a ``collect.instrument.recorder.BlockRecorder`` sized for this launch's grid
    (:func:`matmul.launch_grid` for the Triton kernel, ``(programs, 1, 1)`` for the Gluon kernel): every program
    writes the SM it ran on and its start and end time (GPU only).
    """
    shape = check_inputs(a, B, s, groupsize, out)
    if config is None:
        config = decide_launch(*shape, groupsize, B, s).config
    return run_checked(a, B, s, groupsize, config, shape, out=out, workspace=workspace, recorder=recorder)


def forget_decisions() -> None:
    """Drop this process's decisions (after a table or cache changed), so the next call decides again."""
    _DECIDED.clear()


def forget(m: int, k: int, n: int, groupsize: int, words: Any) -> None:
    """Drop one point's tuning (this process's and the cache file's) and every decision, so the next call of that
    point tunes it again."""
    autotune.forget_tuning(m, k, n, groupsize, words)
    forget_decisions()


_DECIDED: dict[tuple, LaunchDecision] = {}  # (device, m, k, n, groupsize, tune) -> decision, this process


def table_warm_start(m: int, device_name: str) -> list[LaunchConfig]:
    """The shipped table's launches at this token bucket (other shapes): extra candidates for a tuning."""
    table = tuned_tables().get(device_name)
    bucket = autotune.m_bucket(m)
    return [] if table is None else [LaunchConfig.from_dict(r["launch"]) for r in table["rows"]
                                     if autotune.m_bucket(r["m"]) == bucket]


def rebuild_table(points: list[tuple[int, int, int]], groupsize: int, weights: Callable[[int, int], tuple[Any, Any]],
                  *, budget_s: float = REBUILD_BUDGET_S, limit: int = 10,
                  on_point: Callable[[dict[str, Any]], None] | None = None,
                  clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """A shipped table for this GPU, as :func:`table_launch` reads it: every (m, k, n) of ``points`` tuned by
    :func:`autotune.tune_shape` (graph time) within an equal share of what is left of ``budget_s``, the current
    table's launch for the point tried first (so a rebuild keeps it unless a candidate is measured faster).
    ``weights(k, n)``: that layer's (words, scales) in kernel layout on the GPU, asked once per point in the order
    of ``points``."""
    import datetime as dt

    start = clock()
    rows: list[dict[str, Any]] = []
    facts = None
    for i, (m, k, n) in enumerate(points):
        words, scales = weights(k, n)
        facts = facts or autotune.device_facts(words)
        share = max(0.0, budget_s - (clock() - start)) / (len(points) - i)
        old = table_launch(m, k, n, groupsize, facts.name)
        result = autotune.tune_shape(m, k, n, groupsize, words, scales, sm_count=facts.sm_count, tma=facts.tma,
                                     deadline_s=share, warm_start=table_warm_start(m, facts.name), limit=limit,
                                     gluon=facts.gluon, first=[old.config] if old is not None else [])
        if result.best is None:
            continue  # no correct candidate: the rule answers for this point
        row = {"m": m, "k": k, "n": n, "launch": result.best.to_dict(), "median_us": round(result.best_ms * 1e3, 2),
               "timing": "cuda-graph", "measured": dt.date.today().isoformat()}
        rows.append(row)
        if on_point:
            on_point(row)
    how = ("Each row: the fastest correct launch (fp32 reference check) of `kernelscope tune w4a16 --rebuild-table` "
           "for (k, n, m) on this GPU and its median time per call (timing = cuda-graph: the calls captured in a CUDA "
           "graph that cycles through weight copies reading more than twice L2, L2 flushed between replays; "
           "kernelscope.collect.graph_timing, the benchmark's method).")
    return {"schema": TABLE_SCHEMA, "version": 1, "device_name": facts.name if facts else None,
            "groupsize": groupsize, "how": how, "rows": rows}
