"""Where a W4A16 launch is decided: :class:`LaunchConfig` (which kernel, and its launch) and :func:`decide_launch`.

:func:`decide_launch` answers, for a call ``a (m, k) @ W (k, n)`` on a device, in this order:

1. **rule**: :func:`rule_launch`, the pattern of the tuned launches; it holds for any shape and device;
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
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

TUNED_FILES = ("tuned_h100.json",)
TABLE_SCHEMA = "kernelscope.w4a16-launch-table"
KERNELS = ("triton", "gluon")
TRITON_FIELDS = ("block_m", "block_n", "split_k", "num_warps", "tma")
GLUON_FIELDS = ("programs", "sync_mma", "cluster_size", "pdl")
BLOCK_SIZES = (16, 32, 64, 128, 256)


@dataclass(frozen=True)
class LaunchConfig:
    """One launch of the W4A16 GEMM: the kernel and its parameters. The other kernel's fields are None.

    Both kernels: ``num_stages`` (blocks of k in flight in shared memory) and ``max_registers`` (per thread, capped
    at launch; None: the compiler's choice).
    Triton kernel (:mod:`gemm`): ``block_m`` tokens x ``block_n`` columns a tile, k split ``split_k`` ways (the
    partials are added inside the launch), ``num_warps`` a program, ``tma``: tiles copied by the tensor memory
    accelerator (sm_90 and later).
    Gluon kernel (:mod:`gluon_kernel`, sm_90, m <= 64): ``programs`` (the stream-K grid; None: one a column tile),
    ``sync_mma`` (mma.sync instead of the warpgroup MMA), ``cluster_size`` (a column tile's programs one
    thread-block cluster, summing through distributed shared memory; 1: through L2), ``pdl`` (a programmatic
    dependent launch).
    """

    kernel: str = "triton"
    num_stages: int = 3
    max_registers: int | None = None
    block_m: int | None = None
    block_n: int | None = None
    split_k: int | None = None
    num_warps: int | None = None
    tma: bool | None = None
    programs: int | None = None
    sync_mma: bool | None = None
    cluster_size: int | None = None
    pdl: bool | None = None

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(f"LaunchConfig: kernel must be 'triton' or 'gluon', got {self.kernel!r}.")
        own, other = (TRITON_FIELDS, GLUON_FIELDS) if self.kernel == "triton" else (GLUON_FIELDS, TRITON_FIELDS)
        stray = [f for f in other if getattr(self, f) is not None]
        if stray:
            raise ValueError(f"LaunchConfig: {', '.join(stray)} are not parameters of the {self.kernel} kernel.")
        missing = [f for f in own if f != "programs" and getattr(self, f) is None]
        if missing:
            raise ValueError(f"LaunchConfig: the {self.kernel} kernel needs {', '.join(missing)} "
                             f"(use LaunchConfig.{self.kernel}()).")
        if self.num_stages < 1 or (self.max_registers is not None and self.max_registers < 1):
            raise ValueError(f"LaunchConfig: num_stages and max_registers must be positive, got {self.num_stages} "
                             f"and {self.max_registers}.")
        if self.kernel == "triton":
            if self.block_m not in BLOCK_SIZES or self.block_n not in BLOCK_SIZES:
                raise ValueError(f"LaunchConfig: block_m and block_n must be one of {BLOCK_SIZES}, got "
                                 f"{self.block_m} and {self.block_n}.")
            if self.split_k < 1 or self.num_warps < 1:
                raise ValueError(f"LaunchConfig: split_k and num_warps must be positive, got {self.split_k} and "
                                 f"{self.num_warps}.")

    @classmethod
    def triton(cls, block_m: int = 16, block_n: int = 128, split_k: int = 1, num_warps: int = 4,
               num_stages: int = 3, max_registers: int | None = None, tma: bool = False) -> "LaunchConfig":
        """A launch of the Triton kernel."""
        return cls("triton", num_stages, max_registers, block_m=block_m, block_n=block_n, split_k=split_k,
                   num_warps=num_warps, tma=bool(tma))

    @classmethod
    def gluon(cls, programs: int | None = None, num_stages: int = 4, max_registers: int | None = None,
              sync_mma: bool = False, cluster_size: int = 1, pdl: bool = False) -> "LaunchConfig":
        """A launch of the Gluon decode kernel."""
        return cls("gluon", num_stages, max_registers, programs=programs, sync_mma=bool(sync_mma),
                   cluster_size=cluster_size, pdl=bool(pdl))

    def to_dict(self) -> dict[str, Any]:
        """Every field, the other kernel's as None: the one key set of the table, the cache and the benchmark."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LaunchConfig":
        """The inverse of :meth:`to_dict`; unknown keys are an error (one sentence, ValueError)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"LaunchConfig: unknown fields {', '.join(unknown)}.")
        return cls(**d)

    def with_pdl(self) -> "LaunchConfig":
        """This launch as a programmatic dependent launch (the Gluon kernel's only; ValueError otherwise)."""
        if self.kernel != "gluon":
            raise ValueError("LaunchConfig: only the Gluon kernel has programmatic dependent launches.")
        return replace(self, pdl=True)


@dataclass(frozen=True)
class LaunchDecision:
    config: LaunchConfig
    source: str  # "rule (...)", "table tuned_h100.json (...)", "tuning cache ...", "tuned here ..."


def rule_launch(m: int, k: int, tma: bool = False) -> LaunchConfig:
    """The tuned launches' pattern, for any shape: the Triton kernel, one 128-row block of k an iteration; for
    decode (m <= 16) 16-token tiles of 128 columns with k split 4 ways; wider token tiles above. ``tma``: the
    device has the tensor memory accelerator (sm_90 and later)."""
    if m <= 16:
        block_m, block_n, split_k, stages = 16, 128, 4, 3
    elif m <= 64:
        block_m, block_n, split_k, stages = 64, 128, 4, 4
    else:
        block_m, block_n, split_k, stages = 128, 64, 1, 3
    while split_k > 1 and k % (split_k * 128):
        split_k //= 2  # k must split into whole 128-row blocks
    return LaunchConfig.triton(block_m, block_n, split_k, 4, stages, tma=tma)


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
    return LaunchDecision(rule_launch(m, k, tma), f"rule ({why}): kernelscope.kernels.marlin.launch.rule_launch")


def decide_launch(m: int, k: int, n: int, groupsize: int, words: Any, scales: Any, *, tune: bool | None = None,
                  **tune_kwargs: Any) -> LaunchDecision:
    """The launch for ``a (m, k) @ (words, scales)`` (kernel layout) and where it came from: the rule, then the
    shipped table, then the first-use tuner (the module docstring). ``tune``: None = tune on a GPU only; True = also
    in the interpreter (tests); False = the table or the rule only. ``tune_kwargs`` go to the tuner
    (``deadline_s``, ``limit``, ``timer``)."""
    key = (words.device, m, k, n, groupsize, tune)
    if key in _DECIDED:  # every call of a model's forward asks: answered from here after the first
        return _DECIDED[key]
    from . import autotune

    facts = autotune.device_facts(words)
    on_gpu = words.device.type == "cuda"
    fixed = rule_or_table(m, k, n, groupsize, facts.name if on_gpu else None, facts.tma)
    if tune is None:
        tune = on_gpu
    if not tune or fixed.source.startswith("table"):
        decision = fixed
    else:
        import torch

        if on_gpu and torch.cuda.is_current_stream_capturing():  # not kept: the next eager call may still tune
            return autotune.tuned_launch(m, k, n, groupsize, words, scales, facts, fixed, **tune_kwargs)
        decision = autotune.tuned_launch(m, k, n, groupsize, words, scales, facts, fixed, **tune_kwargs)
    _DECIDED[key] = decision
    return decision


def forget_decisions() -> None:
    """Drop this process's decisions (after a table or cache changed), so the next call decides again."""
    _DECIDED.clear()


_DECIDED: dict[tuple, LaunchDecision] = {}  # (device, m, k, n, groupsize, tune) -> decision, this process
