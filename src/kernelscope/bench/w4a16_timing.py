"""The W4A16 benchmark's production timings: CUDA-graph time per call and CUPTI kernel time, per point.

:func:`production_times` adds to a row's values, next to the CUDA-event time ``median_ms``:
``graph_*_ms`` (:func:`graph_timing.time_cuda_graph`: the calls cycle through ``graph_weight_copies``
builds of the implementation, each on its own copy of the weights, so that with a cold-cache point
the graph reads more than twice L2 and every call finds its weights evicted, as one layer of a
model does) and ``cupti_*_ms`` (:func:`graph_timing.time_cupti_kernels`). A timing that could not
be taken is absent and ``graph_missing_reason`` / ``cupti_missing_reason`` says why.
:func:`timing_basis` picks the time the % of floor and the speedups use: graph time when the row
has it, else the event time, and the row says which.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

GRAPH_KEYS = ("median_ms", "min_ms", "max_ms", "q1_ms", "q3_ms", "repeats")
Timer = Callable[..., Any]


def production_times(variants: Sequence[Callable[[], Any]], *, flush_l2: bool, replays: int, cupti_calls: int,
                     graph_timer: Timer | None, kernel_timer: Timer | None,
                     no_timer_reason: str) -> dict[str, Any]:
    """Graph and CUPTI timings of one point, or the reason each is missing (errors are recorded, not raised)."""
    from kernelscope.bench.attention import error_text

    out: dict[str, Any] = {}
    if graph_timer is None:
        out["graph_missing_reason"] = no_timer_reason
    else:
        try:
            t = graph_timer(variants, replays=replays, flush_l2=flush_l2)
            out.update({f"graph_{k}": v for k, v in t.to_dict().items() if k in GRAPH_KEYS})
            out["graph_clock"] = t.clock
            out["graph_weight_copies"] = len(variants)
        except Exception as e:  # a call that cannot be captured (host sync, allocation) is a result too
            out["graph_missing_reason"] = f"CUDA-graph capture or replay failed: {error_text(e)}"
    if kernel_timer is None:
        out["cupti_missing_reason"] = no_timer_reason
    else:
        try:
            t = kernel_timer(variants[0], calls=cupti_calls, flush_l2=flush_l2)
            out.update({f"cupti_{k}": v for k, v in t.to_dict().items() if k in GRAPH_KEYS})
        except Exception as e:
            out["cupti_missing_reason"] = f"the profiler pass failed: {error_text(e)}"
    return out


def timing_basis(values: dict[str, Any]) -> tuple[str, float]:
    """(name of the timing, per-call ms) that % of floor and speedups use: graph time, else event time."""
    if values.get("graph_median_ms") is not None:
        return "cuda-graph", values["graph_median_ms"]
    return "cuda-event", values["median_ms"]


def basis_key(a: dict[str, Any], b: dict[str, Any]) -> str:
    """The timing field two rows are compared on: graph time when both have it, else event time."""
    both = a.get("graph_median_ms") is not None and b.get("graph_median_ms") is not None
    return "graph_median_ms" if both else "median_ms"
