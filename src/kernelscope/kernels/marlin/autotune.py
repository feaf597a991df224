"""Any shape tuned: the W4A16 launch from a per-device cache, the shipped table, or a tuning on first use.

:func:`launch_for` answers, in order: this process's memo; the tuning cache of this GPU and Triton
version (``~/.cache/kernelscope/w4a16/<device>-triton<version>.json``, or under
``$KERNELSCOPE_CACHE_DIR``), keyed by the token bucket (next power of two of m), k, n and group
size; the table shipped for this GPU (:mod:`configs`) for the shapes it holds; a tuning now
(:func:`tune_shape`: the pruned space of :mod:`tune_space`, each candidate checked against a
torch reference on a spread of columns before it is timed, stopped at a deadline, 3 s by
default; one line on stderr says it happened); else the rule. The choice's ``source`` says which.
Nothing is tuned while a CUDA graph is being captured (a tuning synchronizes the device).
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

from .configs import LaunchChoice, choose_launch, rule_launch, tuned_tables
from .tune_space import candidates

CACHE_SCHEMA = "kernelscope.w4a16-launch-cache"
# 2: the Gluon decode kernel joined the space (m <= 16, sm_90); older tunings never tried it. 3: its launch rule
# chose registers, stages and mma.sync (tune_space.gluon_launch); older tunings timed the earlier rule's launch. 4: a
# cluster launch joined the Gluon candidates (tune_space.gluon_cluster_launch). 5: the Gluon kernel joined the space at
# 16 < m <= 64 (tune_space.gluon_wide_launches). 6: the cluster launch of grids between two and three programs an SM
# leaves room for four (64 registers)
CACHE_VERSION = 6
FIRST_USE_DEADLINE_S = 3.0
# The next candidate is expected to take up to this many times the slowest one so far: compiles vary (capped
# registers, wider tiles), and with a margin of 1.0 first-use tunings were measured running past the deadline
# (docs/decisions/0004).
NEXT_CANDIDATE_MARGIN = 1.5
TOLERANCE = 1e-2  # relative Frobenius error, as the benchmark's check
CHECK_COLUMNS = 512
_MEMO: dict[tuple, LaunchChoice] = {}  # (device, triton, key) -> choice, for this process
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
        return entries
    except (OSError, ValueError, UnicodeDecodeError) as e:
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


@dataclass
class Tuning:
    """What one tuning found: the fastest correct launch and how it got there."""

    best: dict[str, Any] | None
    best_ms: float | None
    tried: list[dict[str, Any]] = field(default_factory=list)  # launch, status, ms or error / relative error
    candidates_total: int = 0
    seconds: float = 0.0
    deadline_hit: bool = False


def tune_shape(m: int, k: int, n: int, groupsize: int, words: Any, scales: Any, *, sm_count: int, tma: bool,
               deadline_s: float = FIRST_USE_DEADLINE_S, warm_start: list[dict[str, Any]] = (),
               timer: Callable[..., Any] | None = None, matmul: Callable[..., Any] | None = None,
               clock: Callable[[], float] = time.perf_counter, limit: int = 10, gluon: bool = False) -> Tuning:
    """Try the pruned space at m_bucket(m) tokens while the next candidate, expected to take up to
    NEXT_CANDIDATE_MARGIN times the slowest so far, would end before ``deadline_s`` (the first is always tried);
    keep the fastest candidate whose result matches the fp32 reference (relative error < TOLERANCE on up to
    CHECK_COLUMNS spread columns). ``gluon``: the device runs the Gluon decode kernel (sm_90), whose launches
    join the space at m <= 64."""
    import torch

    from .matmul import w4a16_matmul

    matmul = matmul or w4a16_matmul
    on_gpu = words.device.type == "cuda"
    if timer is None:
        from kernelscope.collect.timing import time_cuda, time_wall

        timer = time_cuda if on_gpu else time_wall
    t0 = clock()
    rows = m_bucket(m)
    gen = torch.Generator(device=words.device).manual_seed(0)
    a = torch.randn((rows, k), generator=gen, device=words.device).half()
    cols = torch.arange(0, n, max(1, n // CHECK_COLUMNS), device=words.device)
    ref = a.float() @ dequantize_kernel_layout(words[:, cols], scales[:, cols], groupsize)
    space = candidates(rows, k, n, sm_count, tma, list(warm_start), limit, gluon)
    out = Tuning(None, None, candidates_total=len(space))
    longest = 0.0  # the slowest candidate so far (its compile included): the next one may take as long
    for launch in space:
        now = clock()
        if out.tried and now - t0 + NEXT_CANDIDATE_MARGIN * longest > deadline_s:
            out.deadline_hit = True
            break
        record: dict[str, Any] = {"launch": launch}
        try:
            got = matmul(a, words, scales, groupsize, **launch)
            err = ((got[:, cols].float() - ref).norm() / ref.norm()).item()
            record["relative_error"] = err
            if not err < TOLERANCE:  # also NaN: a wrong launch is never timed, never cached
                record["status"] = "wrong"
            else:
                t = timer(lambda: matmul(a, words, scales, groupsize, **launch), warmup=2, repeats=10,
                          flush_l2=on_gpu)
                record.update(status="ok", median_ms=t.median_ms)
                if out.best_ms is None or t.median_ms < out.best_ms:
                    out.best, out.best_ms = dict(launch), t.median_ms
        except Exception as e:  # e.g. out of shared memory for this tile: a result, the next one is tried
            record.update(status="failed", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        out.tried.append(record)
        longest = max(longest, clock() - now)
    out.seconds = clock() - t0
    return out


def _device_facts(words: Any) -> tuple[str, str, int, bool]:
    import torch

    from .matmul import tma_supported

    try:
        import triton
        version = triton.__version__
    except ImportError:
        version = "none"
    if words.device.type == "cuda":
        props = torch.cuda.get_device_properties(words.device)
        return props.name, version, props.multi_processor_count, tma_supported(words.device)
    return "cpu (Triton interpreter)", version, 8, False


def launch_for(m: int, k: int, n: int, groupsize: int, words: Any, scales: Any, *, tune: bool | None = None,
               deadline_s: float = FIRST_USE_DEADLINE_S, **tune_kwargs: Any) -> LaunchChoice:
    """The launch for ``a (m, k) @ (words, scales)`` and where it came from (see the module docstring).
    ``tune``: None = cache and first-use tuning on a GPU, the table or the rule in the CPU interpreter
    (whose timings say nothing about a GPU); True = also in the interpreter (tests); False = the
    shipped table or the rule only, as before first-use tuning."""
    import torch

    device, triton_version, sm_count, tma = _device_facts(words)
    if tune is None:
        tune = words.device.type == "cuda"
    if not tune:
        return choose_launch(m, k, n, groupsize, device if words.device.type == "cuda" else None, tma)
    key = shape_key(m, k, n, groupsize)
    memo_key = (device, triton_version, key)
    if memo_key in _MEMO:
        return _MEMO[memo_key]
    path = cache_file(device, triton_version)
    entry = read_cache(path, device, triton_version).get(key)
    if entry is not None:
        choice = LaunchChoice(dict(entry["launch"]), f"tuning cache {path} ({entry.get('source', 'tuned here')}, "
                                                     f"{entry.get('measured_utc', '?')})")
    else:
        shipped = choose_launch(m, k, n, groupsize, device, tma)
        capturing = words.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
        if shipped.source.startswith("tuned on") or capturing:
            choice = shipped if not capturing else LaunchChoice(
                shipped.launch, shipped.source + "; not tuned now: a CUDA graph was being captured")
            if capturing:
                return choice  # not memoized: the next eager call may still tune
        else:
            choice = _tune_and_cache(m, k, n, groupsize, words, scales, device, triton_version, sm_count, tma,
                                     path, key, deadline_s, **tune_kwargs)
    _MEMO[memo_key] = choice
    return choice


def forget(m: int, k: int, n: int, groupsize: int, words: Any) -> None:
    """Drop one point from this process's memo and the cache file, so the next launch_for tunes it again."""
    device, triton_version, _, _ = _device_facts(words)
    key = shape_key(m, k, n, groupsize)
    _MEMO.pop((device, triton_version, key), None)
    path = cache_file(device, triton_version)
    entries = read_cache(path, device, triton_version)
    if key in entries:
        from kernelscope.model.files import write_atomic

        del entries[key]
        doc = {"schema": CACHE_SCHEMA, "version": CACHE_VERSION, "device_name": device, "triton": triton_version,
               "entries": entries}
        write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode())


def _tune_and_cache(m: int, k: int, n: int, groupsize: int, words: Any, scales: Any, device: str, triton_version: str,
                    sm_count: int, tma: bool, path: Path, key: str, deadline_s: float, **kw: Any) -> LaunchChoice:
    table = tuned_tables().get(device)
    bucket = m_bucket(m)
    warm = [] if table is None else [r["launch"] for r in table["configs"] if m_bucket(r["m"]) == bucket]
    print(f"kernelscope: tuning the W4A16 launch for m<={bucket} k={k} n={n} on {device} (first use, at most "
          f"{deadline_s:g} s; cached in {path})", file=sys.stderr)
    from .gluon_args import device_supported

    kw.setdefault("gluon", device_supported(words.device))
    result = tune_shape(m, k, n, groupsize, words, scales, sm_count=sm_count, tma=tma, deadline_s=deadline_s,
                        warm_start=warm, **kw)
    if result.best is None:
        return LaunchChoice(rule_launch(m, k, tma), "rule (first-use tuning found no correct candidate: "
                                                   f"{len(result.tried)} tried)")
    when = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    ok = sum(1 for t in result.tried if t.get("status") == "ok")
    source = (f"tuned here in {result.seconds:.1f} s, {ok} of {result.candidates_total} candidates timed"
              + (" (deadline)" if result.deadline_hit else ""))
    entry = {"launch": result.best, "median_ms": result.best_ms, "m_bucket": bucket, "source": source,
             "measured_utc": when, "tried": result.tried}
    try:
        write_cache(path, device, triton_version, key, entry)
        where = f"tuning cache {path} ({source}, {when})"
    except Exception as e:  # a read-only home: the launch still holds for this process
        where = f"{source}; not cached ({type(e).__name__}: {e})"
    return LaunchChoice(dict(result.best), where)
