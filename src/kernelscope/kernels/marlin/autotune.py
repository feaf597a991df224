"""The first-use tuner of the W4A16 launch (step 3 of :func:`launch.decide_launch`) and its per-device cache.

For a shape the shipped table does not hold, :func:`tuned_launch` answers from this process's memo, else from the
tuning cache of this GPU and Triton version (``~/.cache/kernelscope/w4a16/<device>-triton<version>.json``, or under
``$KERNELSCOPE_CACHE_DIR``, keyed by the token bucket (next power of two of m), k, n and group size), else tunes now
(:func:`tune_shape`): the pruned space of :mod:`tune_space`, the rule first, each candidate checked against a torch
reference on a spread of columns before it is timed by CUDA-graph time (:func:`graph_time_ms`, the benchmark's
method), stopped at a deadline (3 s by default; one line on stderr says it happened). The decision's ``source``
says which.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .launch_config import LaunchConfig, LaunchDecision
from .tune_space import candidates

CACHE_SCHEMA = "kernelscope.w4a16-launch-cache"
CACHE_VERSION = 7  # 7: launches as LaunchConfig fields, ranked by CUDA-graph time
FIRST_USE_DEADLINE_S = 3.0
# The next candidate is expected to take up to this many times the slowest one so far: compiles vary (capped
# registers, wider tiles), so a margin of 1.0 lets a tuning run past its deadline.
NEXT_CANDIDATE_MARGIN = 1.5
TOLERANCE = 1e-2  # relative Frobenius error, as the benchmark's check
CHECK_COLUMNS = 512
GRAPH_REPLAYS = 10  # timed replays of a candidate's graph
_MEMO: dict[tuple, LaunchDecision] = {}  # (device, triton, key) -> decision, for this process
_NOTED: set[str] = set()  # cache files already reported as unreadable


def m_bucket(m: int) -> int:
    """The token bucket a tuning holds for: the next power of two at or above m (at most 1024)."""
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    b = 1
    while b < m and b < 1024:
        b *= 2
    return b


def shape_key(m: int, k: int, n: int, groupsize: int) -> str:
    return f"m{m_bucket(m)}_k{k}_n{n}_g{groupsize}"


def cache_file(device_name: str, triton_version: str) -> Path:
    from kernelscope.collect.calibrate.ceilings import cache_dir

    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", device_name).strip("_") or "device"
    return cache_dir() / "w4a16" / f"{slug}-triton{re.sub(r'[^0-9A-Za-z.]+', '_', triton_version)}.json"


def read_cache(path: Path, device_name: str, triton_version: str) -> dict[str, Any]:
    """The cache's entries, or {} when there is none; an unreadable or foreign file is ignored with one note."""
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
        ok = (isinstance(doc, dict) and doc.get("schema") == CACHE_SCHEMA and doc.get("version") == CACHE_VERSION
              and doc.get("device_name") == device_name and doc.get("triton") == triton_version
              and isinstance(doc.get("entries"), dict))
        if not ok:
            raise ValueError("not a launch cache of this GPU and Triton version")
        entries = {k: v for k, v in doc["entries"].items() if isinstance(v, dict) and isinstance(v.get("launch"), dict)}
        for v in entries.values():
            LaunchConfig.from_dict(v["launch"])  # a launch this version cannot run makes the file foreign
        return entries
    except (OSError, ValueError, TypeError, UnicodeDecodeError) as e:
        if str(path) not in _NOTED:
            _NOTED.add(str(path))
            print(f"kernelscope: note: ignoring the W4A16 launch cache {path} ({e}); it will be rewritten.",
                  file=sys.stderr)
        return {}


def write_cache(path: Path, device_name: str, triton_version: str, key: str, entry: dict[str, Any]) -> None:
    """Add one entry (re-reading the file first, so entries other processes wrote are kept); atomic write."""
    from kernelscope.model.files import write_atomic

    entries = read_cache(path, device_name, triton_version)
    entries[key] = entry
    doc = {"schema": CACHE_SCHEMA, "version": CACHE_VERSION, "device_name": device_name, "triton": triton_version,
           "entries": dict(sorted(entries.items()))}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode())


def dequantize_kernel_layout(words: Any, scales: Any, groupsize: int) -> Any:
    """fp32 ``(k, n)`` weights from the kernel layout (the inverse of gemm.to_kernel_layout, then (q - 8) * s).

    Word (16 b + j, c) holds q[128 b + 32 i + 2 j + h, c] in nibble i + 4 h.
    """
    import torch

    k8, n = words.shape
    k = 8 * k8
    w = words.to(torch.int64) & 0xFFFFFFFF
    shifts = 4 * torch.arange(8, device=words.device, dtype=torch.int64).view(1, 1, 8, 1)
    nib = (w.view(k // 128, 16, 1, n) >> shifts) & 0xF  # (b, j, 4h + i, c)
    q = nib.view(k // 128, 16, 2, 4, n).permute(0, 3, 1, 2, 4).reshape(k, n)  # (b, i, j, h, c) -> k order
    rows = k if groupsize == -1 else groupsize
    return (q.float() - 8.0) * scales.float().repeat_interleave(rows, dim=0)


def graph_time_ms(run: Callable[[Any, Any], Any], words: Any, scales: Any, *, replays: int = GRAPH_REPLAYS) -> float:
    """Median per-call time (ms) of ``run(words, scales)`` in a CUDA graph, as the benchmark times a cold point:
    the calls cycle through copies of the weights that together read more than twice L2, and L2 is flushed between
    replays (:func:`kernelscope.collect.graph_timing.time_cuda_graph`)."""
    import torch

    from kernelscope.collect.graph_timing import copies_for_cold_l2, time_cuda_graph

    l2 = torch.cuda.get_device_properties(words.device).L2_cache_size
    n = copies_for_cold_l2(words.numel() * words.element_size(), l2)
    copies = [(words, scales)] + [(words.clone(), scales.clone()) for _ in range(n - 1)]
    variants = [lambda w=w, s=s: run(w, s) for w, s in copies]
    return time_cuda_graph(variants, replays=replays, flush_l2=True).median_ms


@dataclass
class Tuning:
    """What one tuning found: the fastest correct launch and how it got there."""

    best: LaunchConfig | None
    best_ms: float | None
    tried: list[dict[str, Any]] = field(default_factory=list)  # launch, status, ms or error / relative error
    candidates_total: int = 0
    seconds: float = 0.0
    deadline_hit: bool = False


def tune_shape(m: int, k: int, n: int, groupsize: int, words: Any, scales: Any, *, sm_count: int, tma: bool,
               deadline_s: float = FIRST_USE_DEADLINE_S, warm_start: list[LaunchConfig] = (),
               timer: Callable[..., float] | None = None, matmul: Callable[..., Any] | None = None,
               clock: Callable[[], float] = time.perf_counter, limit: int = 10, gluon: bool = False,
               first: list[LaunchConfig] = ()) -> Tuning:
    """Try the pruned space at m_bucket(m) tokens while the next candidate, expected to take up to
    NEXT_CANDIDATE_MARGIN times the slowest so far, would end before ``deadline_s`` (the first is always tried);
    keep the fastest candidate whose result matches the fp32 reference (relative error < TOLERANCE on up to
    CHECK_COLUMNS spread columns). ``timer(run, words, scales) -> ms``: :func:`graph_time_ms` on a GPU, wall time in
    the interpreter. ``gluon``: the device runs the Gluon decode kernel (sm_90), whose launches join the space at
    m <= 64. ``first``: launches tried before the space (a rebuild's current launch)."""
    import torch

    from .matmul import run

    matmul = matmul or run
    on_gpu = words.device.type == "cuda"
    timer = timer or (graph_time_ms if on_gpu else _wall_time_ms)
    t0 = clock()
    rows = m_bucket(m)
    gen = torch.Generator(device=words.device).manual_seed(0)
    a = torch.randn((rows, k), generator=gen, device=words.device).half()
    cols = torch.arange(0, n, max(1, n // CHECK_COLUMNS), device=words.device)
    ref = a.float() @ dequantize_kernel_layout(words[:, cols], scales[:, cols], groupsize)
    space = candidates(rows, k, n, sm_count, tma, list(warm_start), limit, gluon)
    space = list(first) + [c for c in space if c not in first]
    out = Tuning(None, None, candidates_total=len(space))
    longest = 0.0  # the slowest candidate so far (its compile included): the next one may take as long
    for launch in space:
        now = clock()
        if out.tried and now - t0 + NEXT_CANDIDATE_MARGIN * longest > deadline_s:
            out.deadline_hit = True
            break
        record: dict[str, Any] = {"launch": launch.to_dict()}
        try:
            got = matmul(a, words, scales, groupsize, launch)
            err = ((got[:, cols].float() - ref).norm() / ref.norm()).item()
            record["relative_error"] = err
            if not err < TOLERANCE:  # also NaN: a wrong launch is never timed, never cached
                record["status"] = "wrong"
            else:
                ms = timer(lambda w, s, launch=launch: matmul(a, w, s, groupsize, launch), words, scales)
                record.update(status="ok", median_ms=ms)
                if out.best_ms is None or ms < out.best_ms:
                    out.best, out.best_ms = launch, ms
        except Exception as e:  # e.g. out of shared memory for this tile: a result, the next one is tried
            record.update(status="failed", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        out.tried.append(record)
        longest = max(longest, clock() - now)
    out.seconds = clock() - t0
    return out


def _wall_time_ms(run: Callable[[Any, Any], Any], words: Any, scales: Any) -> float:
    """The interpreter's stand-in for graph time (tests only: it says nothing about a GPU)."""
    from kernelscope.collect.timing import time_wall

    return time_wall(lambda: run(words, scales), warmup=1, repeats=3).median_ms


@dataclass(frozen=True)
class DeviceFacts:
    name: str
    triton_version: str
    sm_count: int
    tma: bool  # the tensor memory accelerator (sm_90 and later)
    gluon: bool  # runs the Gluon decode kernel (sm_90)


def device_facts(words: Any) -> DeviceFacts:
    """What the tuner and the decision need to know of the device ``words`` live on."""
    import torch

    from .gluon_host import device_supported
    from .matmul import tma_supported

    try:
        import triton
        version = triton.__version__
    except ImportError:
        version = "none"
    if words.device.type == "cuda":
        props = torch.cuda.get_device_properties(words.device)
        return DeviceFacts(props.name, version, props.multi_processor_count, tma_supported(words.device),
                           device_supported(words.device))
    return DeviceFacts("cpu (Triton interpreter)", version, 8, False, False)


def tuned_launch(m: int, k: int, n: int, groupsize: int, words: Any, scales: Any, facts: DeviceFacts,
                 fallback: LaunchDecision, warm_start: list[LaunchConfig] = (), *,
                 deadline_s: float = FIRST_USE_DEADLINE_S, **tune_kwargs: Any) -> LaunchDecision:
    """Step 3 of :func:`launch.decide_launch`: this process's memo, else the cache, else a tuning now (the module
    docstring; ``warm_start``: extra candidates, the table's launches at this m); ``fallback`` (the rule's decision)
    while a CUDA graph is being captured or when no candidate is correct."""
    import torch

    key = shape_key(m, k, n, groupsize)
    memo_key = (facts.name, facts.triton_version, key)
    if memo_key in _MEMO:
        return _MEMO[memo_key]
    path = cache_file(facts.name, facts.triton_version)
    entry = read_cache(path, facts.name, facts.triton_version).get(key)
    if entry is not None:
        decision = LaunchDecision(LaunchConfig.from_dict(entry["launch"]),
                                  f"tuning cache {path} ({entry.get('source', 'tuned here')}, "
                                  f"{entry.get('measured_utc', '?')})")
    elif words.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        # not memoized: the next eager call may still tune
        return LaunchDecision(fallback.config, fallback.source + "; not tuned now: a CUDA graph was being captured")
    else:
        decision = _tune_and_cache(m, k, n, groupsize, words, scales, facts, fallback, list(warm_start), path, key,
                                   deadline_s, **tune_kwargs)
    _MEMO[memo_key] = decision
    return decision


def forget_tuning(m: int, k: int, n: int, groupsize: int, words: Any) -> None:
    """Drop one point from this process's memo and the cache file (:func:`launch.forget` also drops decisions)."""
    facts = device_facts(words)
    key = shape_key(m, k, n, groupsize)
    _MEMO.pop((facts.name, facts.triton_version, key), None)
    path = cache_file(facts.name, facts.triton_version)
    entries = read_cache(path, facts.name, facts.triton_version)
    if key in entries:
        from kernelscope.model.files import write_atomic

        del entries[key]
        doc = {"schema": CACHE_SCHEMA, "version": CACHE_VERSION, "device_name": facts.name,
               "triton": facts.triton_version, "entries": entries}
        write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode())


def _tune_and_cache(m: int, k: int, n: int, groupsize: int, words: Any, scales: Any, facts: DeviceFacts,
                    fallback: LaunchDecision, warm_start: list[LaunchConfig], path: Path, key: str, deadline_s: float,
                    **kw: Any) -> LaunchDecision:
    bucket = m_bucket(m)
    print(f"kernelscope: tuning the W4A16 launch for m<={bucket} k={k} n={n} on {facts.name} (first use, at most "
          f"{deadline_s:g} s; cached in {path})", file=sys.stderr)
    kw.setdefault("gluon", facts.gluon)
    result = tune_shape(m, k, n, groupsize, words, scales, sm_count=facts.sm_count, tma=facts.tma,
                        deadline_s=deadline_s, warm_start=warm_start, **kw)
    if result.best is None:
        return LaunchDecision(fallback.config, f"rule (first-use tuning found no correct candidate: "
                                               f"{len(result.tried)} tried)")
    when = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    ok = sum(1 for t in result.tried if t.get("status") == "ok")
    source = (f"tuned here in {result.seconds:.1f} s, {ok} of {result.candidates_total} candidates timed by "
              "CUDA-graph time" + (" (deadline)" if result.deadline_hit else ""))
    entry = {"launch": result.best.to_dict(), "median_ms": result.best_ms, "m_bucket": bucket, "source": source,
             "measured_utc": when, "tried": result.tried}
    try:
        write_cache(path, facts.name, facts.triton_version, key, entry)
        where = f"tuning cache {path} ({source}, {when})"
    except Exception as e:  # a read-only home: the launch still holds for this process
        where = f"{source}; not cached ({type(e).__name__}: {e})"
    return LaunchDecision(result.best, where)
