"""The W4A16 GEMM benchmark: the Triton kernel vs cuBLAS fp16 and torch's int4 tinygemm.

``C (m, n) = A (m, k) @ W`` for a layer of shape (k, n) at token counts m. Per
shape the weight is drawn once (~N(0, 1/k)), quantized symmetrically to 4 bits
with one scale per ``groupsize`` rows (:mod:`kernelscope.kernels.marlin.format`),
and every implementation is built from the same q and scales, so all of them
compute the same product and are checked against one fp32 reference
(``reference_matmul``) on the first CHECK_COLUMNS columns. A row whose result
is wrong is ``failed`` with its relative error and is never timed; a builder or
call that raises is ``failed`` (or ``oom``) with its error and the sweep goes on.

Per point: the bytes floor, ``FLOOR_FORMULA``, over the device-to-device copy
bandwidth measured once at the start of the same run (``COPY_METHOD``); three
timings per call (CUDA events around each call, ``median_ms``; N calls in one
CUDA graph / N, ``graph_median_ms``; CUPTI kernel durations, ``cupti_median_ms``:
:mod:`kernelscope.bench.w4a16_timing`); % of floor = floor / graph time and
speedups = baseline / this, on graph time where both rows have it (else event
time; ``timing_basis`` and ``speedup_basis`` say which).
"""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

from kernelscope.bench.attention import error_text, is_oom, release_memory
from kernelscope.collect.graph_timing import CUPTI_FORMULA, GRAPH_FORMULA, copies_for_cold_l2
from kernelscope.bench.environment import add_environment_at_end, clocks_now, environment_at_start
from kernelscope.bench.results import BenchResults, BenchRow
from kernelscope.collect.timing import Timing, time_cuda, time_wall
from kernelscope.bench.w4a16_impls import IMPLEMENTATIONS, Builder, Weights, make_weights
from kernelscope.bench.w4a16_timing import basis_key, production_times, timing_basis

__all__ = ["IMPLEMENTATIONS", "Builder", "W4A16Case", "W4A16Settings", "make_cases", "parse_shapes",
           "run_w4a16_sweep"]

BYTES_FORMULA = ("k*n/2 (packed int4 weights) + scale_rows*n*2 (fp16 scales, scale_rows = k/groupsize or 1) "
                 "+ m*k*2 (fp16 A) + m*n*2 (fp16 C)")
FLOOR_FORMULA = "floor_ms = bytes_moved / copy_bandwidth_bytes_per_s * 1e3"
PCT_FORMULA = "pct_of_floor = 100 * floor_ms / basis_ms (basis_ms: graph_median_ms if measured, else median_ms)"
SPEEDUP_FORMULA = ("speedup_vs_<impl> = <impl>.<t> / this.<t> at the same (m, k, n), t = graph_median_ms when both "
                   "rows have it, else median_ms (speedup_basis names it)")
COPY_METHOD = ("torch dst.copy_(src) of one uint8 buffer of copy_buffer_bytes (4x L2 on a GPU), device to device; "
               "bandwidth = 2 * copy_buffer_bytes (read + write) / median copy time over the repeats")
DEFAULT_SHAPES = ((4096, 4096), (4096, 14336), (8192, 8192), (8192, 28672), (28672, 8192))
DEFAULT_MS = (1, 4, 16, 64, 256)
CHECK_COLUMNS = 256  # whole 64-column chunks of Marlin's B, so B and s slice cleanly
TOLERANCE = 1e-2
Progress = Callable[[int, int, str], None]
Timer = Callable[..., Timing]


@dataclass(frozen=True)
class W4A16Case:
    m: int
    k: int
    n: int
    groupsize: int = 128

    @property
    def scale_rows(self) -> int:
        return 1 if self.groupsize == -1 else self.k // self.groupsize

    @property
    def bytes_moved(self) -> int:
        """The least any W4A16 GEMM must move: int4 weights, fp16 scales, A and C once each."""
        return self.k * self.n // 2 + self.scale_rows * self.n * 2 + self.m * self.k * 2 + self.m * self.n * 2

    def label(self) -> str:
        return f"m={self.m} k={self.k} n={self.n} g={self.groupsize}"


@dataclass(frozen=True)
class W4A16Settings:
    warmup: int = 10
    repeats: int = 30
    flush_l2: bool = True
    device: str = "cuda"
    seed: int = 0
    copy_buffer_bytes: int | None = None  # None: 4x the GPU's L2
    graph: bool = True  # time N calls captured in one CUDA graph too (CUDA only)
    graph_replays: int = 10
    cupti: bool = True  # CUPTI kernel durations from a profiler pass (CUDA only)
    cupti_calls: int = 10


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """"4096x4096,8192x28672" -> [(k, n), ...]; ValueError (one sentence) otherwise."""
    shapes = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        kn = part.lower().split("x")
        if len(kn) != 2 or not all(x.strip().isdigit() and int(x) > 0 for x in kn):
            raise ValueError(f"--shapes must be comma-separated KxN pairs of positive integers, got {part!r}")
        shapes.append((int(kn[0]), int(kn[1])))
    if not shapes:
        raise ValueError(f"--shapes must list at least one KxN pair, got {text!r}")
    return shapes


def make_cases(ms: list[int], shapes: list[tuple[int, int]], groupsize: int = 128) -> list[W4A16Case]:
    """Every (shape, m); ValueError (one sentence) for a shape the Marlin format cannot hold."""
    if groupsize not in (128, -1):
        raise ValueError(f"--groupsize must be 128 or -1 (one group per column), got {groupsize}")
    for k, n in shapes:
        if k % 128 or n % 256:
            raise ValueError(f"shape {k}x{n} does not suit the Marlin format: k must be a multiple of 128 "
                             "and n of 256")
    if not ms or min(ms) < 1:
        raise ValueError(f"--m must list positive integers, got {ms}")
    return [W4A16Case(m, k, n, groupsize) for k, n in shapes for m in ms]


def measure_copy_bandwidth(settings: W4A16Settings, timer: Timer) -> dict[str, Any]:
    """Device-to-device copy bandwidth (bytes read + written per second), the ceiling of the bytes floor."""
    import torch

    nbytes = settings.copy_buffer_bytes
    if nbytes is None:
        nbytes = 4 * torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    src = torch.ones(nbytes, dtype=torch.uint8, device=settings.device)
    dst = torch.empty_like(src)
    timing = timer(lambda: dst.copy_(src), warmup=3, repeats=max(settings.repeats, 5), flush_l2=False)
    return {"copy_bandwidth_bytes_per_s": 2 * nbytes / (timing.median_ms * 1e-3), "copy_buffer_bytes": nbytes,
            "copy_method": COPY_METHOD, "copy_timing": timing.to_dict()}


def _l2_bytes() -> int:
    import torch

    return torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size


def relative_error(out: Any, a: Any, wt: Weights) -> float:
    """|C - ref| / |ref| over the first CHECK_COLUMNS columns, against the fp32 reference on Marlin (B, s)."""
    from kernelscope.kernels.marlin import reference_matmul

    cols = min(CHECK_COLUMNS, wt.n)
    ref = reference_matmul(a, wt.B[:, : 2 * cols].contiguous(), wt.s[:, :cols].contiguous(), wt.groupsize)
    return ((out[:, :cols].float() - ref).norm() / ref.norm()).item()


def measure(case: W4A16Case, impl: str, fn: Callable[[Any], Any], a: Any, wt: Weights, settings: W4A16Settings,
            timer: Timer, bandwidth: float, copies: Callable[[], list[Callable[[Any], Any]]] | None = None,
            graph_timer: Timer | None = None, kernel_timer: Timer | None = None) -> BenchRow:
    """Check one call against the reference, then time it; wrong or raising -> failed row, no timing.

    ``copies()``: this implementation built on separate copies of the weights (the first is ``fn``),
    which the CUDA-graph timing cycles through; ``graph_timer`` / ``kernel_timer``: the graph and
    CUPTI timers (None: not measured, the row says why)."""
    params = asdict(case)
    try:
        err = relative_error(fn(a), a, wt)
        if not err < TOLERANCE:  # also catches NaN
            return BenchRow(impl, params, "failed", f"wrong result: relative error {err:.3g} >= {TOLERANCE}",
                            {"relative_error": err})
        timing = timer(lambda: fn(a), warmup=settings.warmup, repeats=settings.repeats, flush_l2=settings.flush_l2)
    except Exception as e:  # an implementation that cannot run this point is a result, not a crash
        return BenchRow(impl, params, "oom" if is_oom(e) else "failed", error_text(e))
    floor_ms = case.bytes_moved / bandwidth * 1e3
    launch = fn.launch_info(case.m) if hasattr(fn, "launch_info") else {}
    values = {**launch, **timing.to_dict(), "relative_error": err, "relative_error_columns": min(CHECK_COLUMNS, case.n),
              "bytes_moved": case.bytes_moved, "floor_ms": floor_ms}
    try:
        variants = [(lambda f=f: f(a)) for f in (copies() if copies is not None else [fn])]
    except Exception as e:
        variants = [lambda: fn(a)]
        values["weight_copies_error"] = error_text(e)
    no_timer = "not measured on a CPU run" if settings.device != "cuda" else "switched off for this run"
    values.update(production_times(variants, flush_l2=settings.flush_l2, replays=settings.graph_replays,
                                   cupti_calls=settings.cupti_calls, graph_timer=graph_timer,
                                   kernel_timer=kernel_timer, no_timer_reason=no_timer))
    basis, basis_ms = timing_basis(values)
    values.update(timing_basis=basis, basis_ms=basis_ms, pct_of_floor=100 * floor_ms / basis_ms,
                  event_pct_of_floor=100 * floor_ms / timing.median_ms)
    return BenchRow(impl, params, "ok", None, values)


def add_speedups(rows: list[BenchRow], baselines: tuple[str, ...] = ("cublas", "tinygemm")) -> None:
    """speedup_vs_<baseline> on each ok row of one point, or the reason it is missing."""
    by = {r.impl: r for r in rows}
    for r in rows:
        if r.status != "ok":
            continue
        for b in baselines:
            base = by.get(b)
            if base is not None and base.status == "ok":
                key = basis_key(r.values, base.values)
                r.values[f"speedup_vs_{b}"] = base.get(key) / r.get(key)
                r.values[f"speedup_vs_{b}_basis"] = key
            else:
                r.values[f"speedup_vs_{b}_missing_reason"] = (f"{b} was not run" if base is None
                                                              else f"{b} {base.status} here")


def _set_up_shape(case: W4A16Case, builders: Mapping[str, Builder], settings: W4A16Settings
                  ) -> tuple[Any, dict[str, Callable[[Any], Any]], dict[str, BenchRow]]:
    """The weights of one (k, n, groupsize) and every implementation built on them; what failed, as rows."""
    setup_error: dict[str, BenchRow] = {}
    fns: dict[str, Callable[[Any], Any]] = {}
    try:
        wt = make_weights(case.k, case.n, case.groupsize, settings.device, settings.seed)
    except Exception as e:  # no weights: every implementation misses this shape for the same reason
        return None, fns, {n: BenchRow(n, {}, "oom" if is_oom(e) else "failed",
                                       f"quantizing the weights: {error_text(e)}") for n in builders}
    for name, build in builders.items():
        try:
            fns[name] = build(wt)
        except Exception as e:
            setup_error[name] = BenchRow(name, {}, "oom" if is_oom(e) else "failed", f"setting up: {error_text(e)}")
    return wt, fns, setup_error


def run_w4a16_sweep(cases: list[W4A16Case], builders: Mapping[str, Builder],
                    settings: W4A16Settings = W4A16Settings(), *, timer: Timer | None = None,
                    on_progress: Progress | None = None, command: list[str] | None = None,
                    on_row: Callable[[BenchResults], None] | None = None, graph_timer: Timer | None = None,
                    kernel_timer: Timer | None = None) -> BenchResults:
    """Measure every implementation at every case; builders run once per (k, n, groupsize), and again
    per extra weight copy the CUDA-graph timing cycles through (built on first need, kept per shape)."""
    import torch

    from kernelscope.collect.graph_timing import time_cuda_graph, time_cupti_kernels

    on_gpu = settings.device == "cuda"
    timer = timer or (time_cuda if on_gpu else time_wall)
    # graph and CUPTI timings only on the GPU, and only where the settings ask for them
    graph_timer = graph_timer or (time_cuda_graph if on_gpu and settings.graph else None)
    kernel_timer = kernel_timer or (time_cupti_kernels if on_gpu and settings.cupti else None)

    env = environment_at_start()
    bw = measure_copy_bandwidth(settings, timer)
    results = BenchResults("w4a16", env, {
        **asdict(settings), "impls": list(builders), "bytes_formula": BYTES_FORMULA, "floor_formula": FLOOR_FORMULA,
        "pct_of_floor_formula": PCT_FORMULA, "speedup_formula": SPEEDUP_FORMULA, "tolerance": TOLERANCE,
        "check": f"relative Frobenius error vs reference_matmul (fp32) on the first {CHECK_COLUMNS} columns",
        "w4a16_launch": ("kernelscope.kernels.marlin.launch.decide_launch: the rule, the shipped table of this GPU, "
                         "else the first-use tuner (not for w4a16-untuned); each row records the launch and its "
                         "source"),
        "graph_formula": GRAPH_FORMULA, "cupti_formula": CUPTI_FORMULA,
        "timings": {"median_ms": "CUDA events around each call (per-call launch cost included)",
                    "graph_median_ms": "N calls captured in one CUDA graph, per call; cold points cycle through "
                                       "weight copies reading > 2x L2 and flush L2 between replays",
                    "cupti_median_ms": "CUPTI durations of the GPU work of one call (no launch cost)"}, **bw},
        command=list(command if command is not None else sys.argv))
    total, done = len(cases) * len(builders), 0
    shapes: dict[tuple[int, int, int], list[W4A16Case]] = {}
    for c in cases:
        shapes.setdefault((c.k, c.n, c.groupsize), []).append(c)
    gen = torch.Generator(device=settings.device).manual_seed(settings.seed)
    for group in shapes.values():
        wt, fns, setup_error = _set_up_shape(group[0], builders, settings)
        built: dict[str, list[Callable[[Any], Any]]] = {}

        def copies_of(name: str, first: Callable[[Any], Any], wt: Any = wt,
                      built: dict[str, list[Callable[[Any], Any]]] = built) -> Callable[[], list[Callable[[Any], Any]]]:
            # this shape's weights and copies bound now: the loop deletes its names once the shape is done
            def get() -> list[Callable[[Any], Any]]:
                if name not in built:
                    n_copies = copies_for_cold_l2(wt.k * wt.n // 2, _l2_bytes()) if settings.flush_l2 else 1
                    built[name] = [first] + [builders[name](wt) for _ in range(n_copies - 1)]
                return built[name]
            return get

        for case in group:
            a = torch.randn((case.m, case.k), generator=gen, device=settings.device).half()
            point = []
            for name in builders:
                if on_progress:
                    on_progress(done, total, f"{name} {case.label()}")
                if name in setup_error:
                    e = setup_error[name]
                    row = BenchRow(name, asdict(case), e.status, e.error)
                else:
                    row = measure(case, name, fns[name], a, wt, settings, timer, bw["copy_bandwidth_bytes_per_s"],
                                  copies_of(name, fns[name]) if graph_timer is not None else None,
                                  graph_timer, kernel_timer)
                    if row.status == "ok":  # the clock the GPU ran at just after timing: a throttled row shows
                        row.values.update(clocks_now(env.get("pci_bus_id")))
                point.append(row)
                results.rows.append(row)
                done += 1
                if on_row:
                    on_row(results)
            add_speedups(point)
            if on_row:
                on_row(results)
        del fns, wt, built
        release_memory(settings.device)
    if on_progress:
        on_progress(done, total, "done")
    add_environment_at_end(env)
    return results
