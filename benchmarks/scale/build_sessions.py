"""Builds large sessions from recorded launches, for the scale benchmark.

The launches of a recorded session (tests/data/session_h100_mixed.json.gz: 37 launches of 13 kernels, with
their regions, streams and CUPTI metrics) are repeated as "steps" until the session holds N launches. Each
step starts after the previous one ends plus a host gap drawn from the recorded gaps, and every launch keeps
its recorded duration scaled by a small seeded jitter, so durations, gaps and orders vary like a real run's.
Counter-pass launches are not repeated (a real counter pass profiles a handful of launches): they keep only
the first step's. Usage: build_sessions.py N OUT.json.gz [--source FIXTURE] [--seed S] [--kineto]
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import gzip
import json
import random
import sys
from pathlib import Path

from kernelscope.model import Session

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SOURCE = ROOT / "tests/data/session_h100_mixed.json.gz"


def repeated_session(source: Session, n: int, seed: int = 0) -> Session:
    """``source``'s timed launches repeated as steps until there are ``n``; regions repeated with their step."""
    rng = random.Random(seed)
    timed = sorted((x for x in source.launches if x.start_ns is not None), key=lambda x: x.start_ns or 0)
    if not timed:
        raise SystemExit("the source session has no timed launches to repeat")
    t0 = timed[0].start_ns or 0
    step_span = max((x.start_ns or 0) + x.duration_ns for x in timed) - t0
    gaps = [max(0, (b.start_ns or 0) - (a.start_ns or 0) - a.duration_ns) for a, b in zip(timed, timed[1:])] or [1000]
    out = dataclasses.replace(source, launches=[], regions=[], activities=list(source.activities))
    step = 0
    offset = 0
    corr = max((x.correlation_id or 0) for x in timed) + 1
    while len(out.launches) < n:
        for x in timed:
            if len(out.launches) >= n:
                break
            jitter = 1.0 + rng.uniform(-0.05, 0.05)
            y = copy.copy(x)  # metrics and regions stay shared with the source: the same per configuration
            y.start_ns = (x.start_ns or 0) + offset
            y.duration_ns = max(1, int(x.duration_ns * jitter))
            y.correlation_id = corr
            if step:  # counter results belong to the one launch ncu replayed
                y.counters, y.findings, y.block_records, y.scopes = {}, [], None, None
            corr += 1
            out.launches.append(y)
        for r in source.regions:
            out.regions.append(dataclasses.replace(
                r, cpu_start_ns=r.cpu_start_ns + offset,
                gpu_start_ns=None if r.gpu_start_ns is None else r.gpu_start_ns + offset))
        offset += step_span + rng.choice(gaps)
        step += 1
    return out


def kineto_trace(session: Session) -> dict:
    """A PyTorch-profiler (Kineto) JSON trace of the session's launches, as `run`'s trace pass reads it: per
    kernel its GPU event and the cudaLaunchKernel runtime event (same correlation id) 5 µs before it on the
    host thread, and per region a user_annotation around its launches (the recorded trace's event kinds)."""
    events = []
    for r in session.regions:
        events.append({"ph": "X", "cat": "user_annotation", "name": r.name, "pid": 1, "tid": 1,
                       "ts": (session.time_origin_ns + r.cpu_start_ns) / 1000, "dur": r.cpu_duration_ns / 1000,
                       "args": {"External id": 0}})
    for x in session.launches:
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": (session.time_origin_ns + (x.start_ns or 0)) / 1000 - 5, "dur": 3.0,
                       "args": {"correlation": x.correlation_id}})
        ts = (session.time_origin_ns + (x.start_ns or 0)) / 1000
        args = {"device": x.device_index or 0, "stream": x.stream or 7, "correlation": x.correlation_id,
                "grid": list(x.grid), "block": list(x.block)}
        for key, m in x.metrics.items():
            if m.source == "cupti" and m.value is not None:
                args[m.raw_name] = m.value
        events.append({"ph": "X", "cat": "kernel", "name": x.kernel, "pid": 0, "tid": x.stream or 7,
                       "ts": ts, "dur": x.duration_ns / 1000, "args": args})
    return {"schemaVersion": 1, "traceEvents": events}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int)
    p.add_argument("out")
    p.add_argument("--source", default=str(DEFAULT_SOURCE))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kineto", action="store_true", help="write a Kineto JSON trace instead of a session")
    a = p.parse_args(argv)
    s = repeated_session(Session.load(a.source), a.n, a.seed)
    if a.kineto:
        data = json.dumps(kineto_trace(s)).encode()
        Path(a.out).write_bytes(gzip.compress(data, compresslevel=1) if a.out.endswith(".gz") else data)
    else:
        s.save(a.out)
    print(f"{a.out}: {len(s.launches)} launches", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
