"""The attention benchmark: implementations x sequence lengths x head dims x causal x dtypes.

Shapes follow a fixed token budget, as in a transformer layer: ``batch =
tokens // seq_len`` and ``heads = hidden // head_dim`` (B·S = 16k tokens and
hidden 2048 by default), unless batch or heads are given. Every
implementation sees the same inputs at a point. One that raises is recorded as
``failed`` (or ``oom``) with its error and the sweep goes on.

Per row: the timing from :mod:`kernelscope.collect.timing`, TFLOP/s derived as
``FLOPS_FORMULA / median time``, and the peak memory the allocator reports. At a
point, the implementations are timed interleaved, repeat by repeat, so that all
of them run at the same clocks and power state.
"""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

from kernelscope.bench.environment import add_environment_at_end, clocks_now, environment_at_start
from kernelscope.bench.results import BenchResults, BenchRow
from kernelscope.collect.timing import Timing, time_cuda_interleaved, time_wall_interleaved

FLOPS_FORMULA = "4 * batch * heads * seq_len^2 * head_dim, halved when causal"
DTYPES = ("fp16", "bf16")
Progress = Callable[[int, int, str], None]
Timer = Callable[..., dict[str, Timing]]  # {name: fn} -> {name: Timing}, timed in turn


@dataclass(frozen=True)
class AttentionCase:
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: bool
    dtype: str  # one of DTYPES

    @property
    def flops(self) -> int:
        """Two matmuls of 2·S²·D flops per head; a causal mask skips half of them."""
        full = 4 * self.batch * self.heads * self.seq_len ** 2 * self.head_dim
        return full // 2 if self.causal else full

    def label(self) -> str:
        return (f"B={self.batch} H={self.heads} S={self.seq_len} D={self.head_dim} "
                f"{'causal' if self.causal else 'full'} {self.dtype}")


@dataclass(frozen=True)
class SweepSettings:
    warmup: int = 10
    repeats: int = 30
    flush_l2: bool = True
    device: str = "cuda"
    seed: int = 0


def make_cases(seq_lengths: list[int], head_dims: list[int], causal_modes: list[bool], dtypes: list[str],
               tokens: int = 16384, hidden: int = 2048, batch: int | None = None,
               heads: int | None = None) -> list[AttentionCase]:
    """The sweep's points; ValueError (one sentence) for a shape the budget cannot make."""
    cases = []
    for d in head_dims:
        h = heads if heads is not None else hidden // d
        if heads is None and hidden % d:
            raise ValueError(f"hidden size {hidden} is not a multiple of head dim {d}")
        for dtype in dtypes:
            if dtype not in DTYPES:
                raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
            for causal in causal_modes:
                for s in seq_lengths:
                    b = batch if batch is not None else tokens // s
                    if b < 1 or h < 1 or s < 1:
                        raise ValueError(f"seq_len {s} leaves no batch within {tokens} tokens; raise --tokens "
                                         "or give --batch")
                    cases.append(AttentionCase(b, h, s, d, causal, dtype))
    return cases


def is_oom(e: BaseException) -> bool:
    import torch

    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()


def error_text(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _inputs(case: AttentionCase, settings: SweepSettings) -> tuple[Any, Any, Any]:
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[case.dtype]
    gen = torch.Generator(device=settings.device).manual_seed(settings.seed)
    shape = (case.batch, case.heads, case.seq_len, case.head_dim)
    return tuple(torch.randn(shape, generator=gen, device=settings.device, dtype=dtype) for _ in range(3))


def _peak_memory(fn: Callable[[], Any], device: str) -> dict[str, Any]:
    """Peak allocator memory during one call, and how much of it the call itself added."""
    import torch

    if device != "cuda":
        return {"peak_memory_bytes": None, "memory_missing_reason": "CPU run: no CUDA allocator statistics"}
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    return {"peak_memory_bytes": peak, "extra_memory_bytes": peak - before,
            "memory_source": "torch.cuda.max_memory_allocated (inputs included; extra = peak - allocated before)"}


def prepare(case: AttentionCase, impl: str, fn: Callable[..., Any], qkv: tuple[Any, Any, Any],
            settings: SweepSettings) -> tuple[Callable[[], Any] | None, BenchRow | dict[str, Any]]:
    """A first untimed call (compile, autotune, plan), then one call for peak memory.

    Returns (call, memory fields), or (None, a failed / oom row). The first call is
    kept out of the memory figure: Triton's autotuner allocates a 256 MiB cache-flush
    buffer of its own while it tunes.
    """
    q, k, v = qkv

    def call() -> Any:
        return fn(q, k, v, case.causal)

    try:
        call()
        return call, _peak_memory(call, settings.device)
    except Exception as e:  # an implementation that cannot run this point is a result, not a crash
        release_memory(settings.device)
        return None, BenchRow(impl, asdict(case), "oom" if is_oom(e) else "failed", error_text(e))


def ok_row(case: AttentionCase, impl: str, timing: Timing, memory: dict[str, Any]) -> BenchRow:
    tflops = case.flops / (timing.median_ms * 1e-3) / 1e12
    values = {**timing.to_dict(), "flops": case.flops, "flops_formula": FLOPS_FORMULA, "tflops": tflops,
              "tflops_formula": "flops / (median_ms * 1e-3) / 1e12", **memory}
    return BenchRow(impl, asdict(case), "ok", None, values)


def time_point(case: AttentionCase, calls: dict[str, Callable[[], Any]], memory: dict[str, dict[str, Any]],
               settings: SweepSettings, timer: Timer) -> dict[str, BenchRow]:
    """Time the implementations that ran, interleaved; if that raises, each alone, so the failure is attributed."""
    kw = dict(warmup=settings.warmup, repeats=settings.repeats, flush_l2=settings.flush_l2)
    try:
        timings = timer(calls, **kw)
        return {n: ok_row(case, n, timings[n], memory[n]) for n in calls}
    except Exception:
        rows = {}
        for n, call in calls.items():
            try:
                rows[n] = ok_row(case, n, timer({n: call}, **kw)[n], memory[n])
            except Exception as e:
                rows[n] = BenchRow(n, asdict(case), "oom" if is_oom(e) else "failed", error_text(e))
        return rows


def release_memory(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()


def run_attention_sweep(cases: list[AttentionCase], impls: Mapping[str, Callable[..., Any]],
                        settings: SweepSettings = SweepSettings(), *, timer: Timer | None = None,
                        on_progress: Progress | None = None, command: list[str] | None = None,
                        on_row: Callable[[BenchResults], None] | None = None,
                        describe: Callable[[str, AttentionCase], dict[str, Any]] | None = None) -> BenchResults:
    """Measure every implementation at every case; ``on_row`` sees the results after each row.

    ``describe(impl, case)`` may add fields to an ok row (e.g. the launch config the autotuner chose).
    """
    timer = timer or (time_cuda_interleaved if settings.device == "cuda" else time_wall_interleaved)
    env = environment_at_start()
    results = BenchResults("attention", env, {**asdict(settings), "impls": list(impls), "flops_formula": FLOPS_FORMULA,
                                              "timing_order": "interleaved: every implementation once per repeat"},
                           command=list(command if command is not None else sys.argv))
    total, done = len(cases) * len(impls), 0
    for case in cases:
        try:
            qkv = _inputs(case, settings)
        except Exception as e:  # no inputs: every implementation misses this point for the same reason
            status, err = ("oom" if is_oom(e) else "failed"), f"allocating the inputs: {error_text(e)}"
            qkv = None
        rows: dict[str, BenchRow] = {}
        calls: dict[str, Callable[[], Any]] = {}
        memory: dict[str, dict[str, Any]] = {}
        for name, fn in impls.items():
            if on_progress:
                on_progress(done, total, f"{name} {case.label()}")
            if qkv is None:
                rows[name] = BenchRow(name, asdict(case), status, err)
                continue
            call, got = prepare(case, name, fn, qkv, settings)
            if call is None:
                rows[name] = got  # type: ignore[assignment]
            else:
                calls[name], memory[name] = call, got  # type: ignore[assignment]
        if calls:
            rows.update(time_point(case, calls, memory, settings, timer))
        for name in impls:  # rows in the order the implementations were given
            row = rows[name]
            if row.status == "ok":
                # The clock the GPU ran at just after timing: a throttled row shows as one.
                row.values.update(clocks_now(env.get("pci_bus_id")))
                if describe is not None:
                    row.values.update(describe(name, case))
            results.rows.append(row)
            done += 1
            if on_row:
                on_row(results)
        del qkv, calls
        release_memory(settings.device)
    if on_progress:
        on_progress(done, total, "done")
    add_environment_at_end(env)
    return results
