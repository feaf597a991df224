"""Timing as production runs a kernel: N calls captured in one CUDA graph, and the CUPTI kernel duration.

In LLM decoding the GEMMs run back to back inside CUDA graphs, so the per-call cost that a
CUDA-event time carries (launch, event records) is not paid per call (the measurements:
docs/decisions/0006). :func:`time_cuda_graph` captures
``calls_per_graph`` calls in one graph, replays it ``replays`` times with a pair of events around
each replay, and reports ``replay time / calls_per_graph`` per call (``GRAPH_FORMULA``).

Before the timed replays the graph is replayed for ``warmup_ms`` (25 ms by default, the warm-up time of
Triton's ``do_bench``), a time rather than a count of calls, so that a large layer is warmed as long as a small
one (docs/decisions/0006).

Cold caches, as one layer of a model sees them (its weights were evicted by the other layers'):
the graph cycles through ``variants`` (the same call on separate copies of the weights) so that
the bytes the graph touches exceed L2 (:func:`copies_for_cold_l2`), and L2 is flushed between
replays, outside the events. Warm points use one variant and no flush.

:func:`time_cupti_kernels` runs the call under the PyTorch profiler (CUPTI activity records) and
reports the summed duration of the GPU kernels one call launched, with no launch cost at all.
torch is imported on use; the arithmetic helpers run anywhere.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Sequence

from kernelscope.collect.trace.quiet import PROFILER_WARNINGS
from kernelscope.collect.timing import L2Flush, Timing, summarize

GRAPH_FORMULA = "graph_ms = (CUDA-event time of one graph replay) / calls_per_graph"
CUPTI_FORMULA = "cupti_kernel_ms = sum of the CUPTI durations of the GPU kernels one call launched (median over calls)"
MAX_COPIES = 16  # weight copies for a cold graph: bounds the memory a small layer's graph takes
WARMUP_MS = 25.0  # GPU time replayed before the timed replays (Triton's do_bench warms up for 25 ms too)
MAX_WARMUP_REPLAYS = 10_000


def copies_for_cold_l2(footprint_bytes: int, l2_bytes: int, max_copies: int = MAX_COPIES) -> int:
    """How many weight copies a graph must cycle through so that its calls read more than twice L2
    (then each call finds its weights evicted by the others). At least 2, at most ``max_copies``."""
    if footprint_bytes <= 0 or l2_bytes <= 0:
        raise ValueError("footprint_bytes and l2_bytes must be positive")
    return max(2, min(max_copies, math.ceil(2 * l2_bytes / footprint_bytes)))


def calls_in_graph(variants: int, min_calls: int = 20) -> int:
    """Calls captured per graph: a whole number of passes over the variants, at least ``min_calls``."""
    if variants < 1 or min_calls < 1:
        raise ValueError("variants and min_calls must be >= 1")
    return variants * math.ceil(min_calls / variants)


def warmup_replays(replay_ms: float, warmup_ms: float, max_replays: int = MAX_WARMUP_REPLAYS) -> int:
    """Graph replays that fill ``warmup_ms`` of GPU time at ``replay_ms`` a replay (at least 1, at most
    ``max_replays``; 0 when no warm-up time is asked for)."""
    if warmup_ms <= 0:
        return 0
    if replay_ms <= 0:
        return max_replays
    return max(1, min(max_replays, math.ceil(warmup_ms / replay_ms)))


def per_call_times(replay_ms: Sequence[float], calls_per_graph: int) -> list[float]:
    """Per-call times from replay times (GRAPH_FORMULA)."""
    if calls_per_graph < 1:
        raise ValueError("calls_per_graph must be >= 1")
    return [t / calls_per_graph for t in replay_ms]


def time_cuda_graph(variants: Sequence[Callable[[], Any]], *, calls_per_graph: int | None = None,
                    replays: int = 10, warmup: int = 3, flush_l2: bool = True,
                    warmup_ms: float = WARMUP_MS) -> Timing:
    """Per-call time of ``variants`` called in turn inside one CUDA graph (see the module docstring).

    Each variant is called ``warmup`` times eagerly first (compiles, allocates its workspaces), so
    nothing is compiled or first-allocated inside the capture; then the graph is replayed for
    ``warmup_ms`` of GPU time before the timed replays. Exceptions propagate.
    """
    import torch

    if not variants or replays < 1 or warmup < 0:
        raise ValueError("need at least one variant, replays >= 1 and warmup >= 0")
    calls = calls_per_graph or calls_in_graph(len(variants))
    flush = L2Flush() if flush_l2 else None
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # eager warm-up on a side stream, as torch's graph notes ask
        for _ in range(warmup):
            for fn in variants:
                fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            variants[i % len(variants)]()
    graph.replay()  # first replay uploads the graph
    torch.cuda.synchronize()
    first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    first.record()
    graph.replay()
    last.record()
    torch.cuda.synchronize()
    n_warm = warmup_replays(first.elapsed_time(last), warmup_ms)
    for _ in range(n_warm):
        graph.replay()
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for start, end in pairs:
        if flush is not None:
            flush()
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    replay_ms = [s.elapsed_time(e) for s, e in pairs]
    del graph
    return summarize(per_call_times(replay_ms, calls), warmup,
                     f"cuda-graph ({calls} calls per replay, {n_warm + 1} warm-up replays)", flush is not None)


def time_cupti_kernels(fn: Callable[[], Any], *, calls: int = 10, flush_l2: bool = True) -> Timing:
    """Median over ``calls`` calls of the summed CUPTI durations of the GPU kernels each call ran.

    Each call runs inside its own ``record_function`` range and ends with a device synchronize, and
    the L2 flush (when ``flush_l2``) runs and is synchronized before the range opens, so a call's
    kernels are exactly the GPU kernels that start inside its range (kineto puts CPU and GPU
    records on one clock).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    flush = L2Flush() if flush_l2 else None
    fn()
    torch.cuda.synchronize()
    names = [f"kernelscope.call.{i}" for i in range(calls)]
    with warnings.catch_warnings():  # torch's notice about its own profiler cycles is not the user's business
        for message, module in PROFILER_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=UserWarning, module=module)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for name in names:
                if flush is not None:
                    flush()
                torch.cuda.synchronize()
                with record_function(name):
                    fn()
                    torch.cuda.synchronize()
    ranges, kernels = [], []
    for ev in prof.events():
        if ev.name in names and ev.device_type.name == "CPU":
            ranges.append((ev.name, ev.time_range.start, ev.time_range.end))
        elif is_gpu_work(ev.device_type.name, ev.name, names, bool(getattr(ev, "is_user_annotation", False))):
            kernels.append((ev.time_range.start, ev.time_range.end))
    per_call = kernel_time_per_range(ranges, kernels)
    missing = [n for n in names if per_call.get(n) is None]
    if missing:
        raise RuntimeError(f"the profiler recorded no GPU kernel for {len(missing)} of {calls} calls")
    return summarize([per_call[n] for n in names], 1, "cupti kernel duration", flush is not None)


def is_gpu_work(device_type: str, name: str, range_names: Sequence[str], user_annotation: bool) -> bool:
    """A GPU kernel, memcpy or memset record; not kineto's GPU-side copy of a ``record_function`` range
    (a "gpu_user_annotation" with the range's name spanning the call's kernels: counting it would double the
    sum; docs/decisions/0006)."""
    return device_type == "CUDA" and not user_annotation and name not in range_names


def kernel_time_per_range(ranges: Sequence[tuple[str, float, float]],
                          kernels: Sequence[tuple[float, float]]) -> dict[str, float | None]:
    """Summed duration (ms) of the kernels (start_us, end_us) that start inside each named range
    (name, start_us, end_us); ``None`` for a range in which no kernel started."""
    out: dict[str, float | None] = {}
    for name, lo, hi in ranges:
        inside = [end - start for start, end in kernels if lo <= start <= hi]
        out[name] = sum(inside) / 1e3 if inside else None
    return out
