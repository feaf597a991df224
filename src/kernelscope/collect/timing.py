"""Timing a GPU callable with CUDA events: warm-up, repeats, median and spread. Measurement, so it
lives in collect/: the benchmarks (bench/) and the W4A16 tuner (kernels/) both time with it.

Each repeat is bracketed by its own pair of CUDA events on the current stream,
so host overhead between repeats is not counted. With ``flush_l2`` a buffer
twice the size of L2 is overwritten and then a second one as large is read,
before every repeat (outside the events), so each repeat starts with a cold
cache, as one layer of a model would. The read matters: overwriting alone
leaves L2 full of dirty lines, and the timed call would pay for writing them
back to DRAM as it evicts them (docs/decisions/0006 has the measurement).
Before the repeats the GPU spins (``HOST_LEAD_CYCLES``) while the host queues
all of them, so a short kernel is timed as the GPU runs it, not as fast as
Python can launch it.
torch is imported on first use. :func:`time_wall` measures the same way with
the host clock, for CPU callables (tests, machines without a GPU).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

HOST_LEAD_CYCLES = 20_000_000  # ~10 ms of GPU clock: more than queuing 30 repeats takes the host


@dataclass(frozen=True)
class Timing:
    """Per-call times in milliseconds over ``repeats`` calls after ``warmup`` calls."""

    median_ms: float
    min_ms: float
    max_ms: float
    q1_ms: float
    q3_ms: float
    mean_ms: float
    repeats: int
    warmup: int
    clock: str  # "cuda-event" or "perf_counter"
    l2_flushed: bool

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "iqr_ms": self.iqr_ms}


def summarize(times_ms: list[float], warmup: int, clock: str, l2_flushed: bool) -> Timing:
    """Median, extremes and quartiles (inclusive method) of the per-call times."""
    if not times_ms:
        raise ValueError("no timed repeats")
    xs = sorted(times_ms)
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else (xs[0], xs[0], xs[0])
    return Timing(median_ms=statistics.median(xs), min_ms=xs[0], max_ms=xs[-1], q1_ms=q1, q3_ms=q3,
                  mean_ms=statistics.fmean(xs), repeats=len(xs), warmup=warmup, clock=clock, l2_flushed=l2_flushed)


class L2Flush:
    """Evicts L2: overwrite a buffer twice its size, then read another as large (clean lines left)."""

    def __init__(self) -> None:
        import torch

        l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        size = max(2 * l2_bytes, 1 << 20)
        self._write = torch.empty(size, dtype=torch.int8, device="cuda")
        self._read = torch.zeros(size // 8, dtype=torch.int64, device="cuda")
        self._sink = torch.zeros((), dtype=torch.int64, device="cuda")

    def __call__(self) -> None:
        import torch

        self._write.zero_()
        torch.sum(self._read, dim=0, out=self._sink)


def time_cuda(fn: Callable[[], Any], *, warmup: int = 10, repeats: int = 30, flush_l2: bool = True) -> Timing:
    """Time ``fn()`` on the current CUDA device; exceptions from fn propagate."""
    import torch

    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    flush = L2Flush() if flush_l2 else None
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    torch.cuda._sleep(HOST_LEAD_CYCLES * max(1, repeats // 30))
    for start, end in zip(starts, ends):
        if flush is not None:
            flush()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return summarize(times, warmup, "cuda-event", flush is not None)


def time_wall(fn: Callable[[], Any], *, warmup: int = 1, repeats: int = 5, flush_l2: bool = False) -> Timing:
    """Time ``fn()`` with the host's perf_counter (CPU work; no cache flush)."""
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return summarize(times, warmup, "perf_counter", False)


def time_cuda_interleaved(fns: dict[str, Callable[[], Any]], *, warmup: int = 10, repeats: int = 30,
                          flush_l2: bool = True, flush: Callable[[], Any] | None = None) -> dict[str, Timing]:
    """Time several callables in turn, repeat by repeat (a, b, c, a, b, c, ...), on the current CUDA device.

    Sequential timing lets the GPU's clock drift between implementations (power cap, temperature);
    interleaved, every implementation sees the same power state, so their ratio is the one to trust.
    ``flush``: run before every timed call instead of :class:`L2Flush` (to compare ways of flushing).
    """
    import torch

    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    if flush is None and flush_l2:
        flush = L2Flush()
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    events = {name: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                     for _ in range(repeats)] for name in fns}
    torch.cuda._sleep(HOST_LEAD_CYCLES * max(1, repeats * len(fns) // 30))
    for i in range(repeats):
        for name, fn in fns.items():
            if flush is not None:
                flush()
            start, end = events[name][i]
            start.record()
            fn()
            end.record()
    torch.cuda.synchronize()
    return {name: summarize([s.elapsed_time(e) for s, e in pairs], warmup, "cuda-event (interleaved)",
                            flush is not None) for name, pairs in events.items()}


def time_wall_interleaved(fns: dict[str, Callable[[], Any]], *, warmup: int = 1, repeats: int = 5,
                          flush_l2: bool = False) -> dict[str, Timing]:
    """:func:`time_cuda_interleaved` with the host clock, for CPU callables."""
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {name: summarize(ts, warmup, "perf_counter (interleaved)", False) for name, ts in times.items()}
