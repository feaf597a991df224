"""What a file that other tools wrote holds, told by its first bytes, so that a command given the wrong kind of
file can name the command that reads it (`show report.ncu-rep` -> use `kernelscope import`).

- an Nsight Compute report starts with the magic ``NVR\\0`` (rep_file.MAGIC);
- a PyTorch profiler (Kineto) trace is JSON, often gzip-compressed, that opens with ``"schemaVersion"`` (Kineto
  writes it first) and holds ``"traceEvents"``;
- another Chrome / Perfetto trace (Trace Event Format: kernelscope export, Proton) has ``"traceEvents"`` near its
  start and no ``"schemaVersion"``.
"""
from __future__ import annotations

import gzip
import os
import shlex
import zlib

from kernelscope.collect.ncu.rep_file import MAGIC

NCU_REPORT = "an Nsight Compute report"
KINETO_TRACE = "a PyTorch profiler trace"
CHROME_TRACE = "a Chrome / Perfetto trace"
HEAD_BYTES = 4096  # Kineto writes schemaVersion in its first line; a Chrome trace's traceEvents comes early too


def head(path: str | os.PathLike[str], size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of the file, decompressed when it is gzip; b"" when it cannot be read."""
    try:
        with open(path, "rb") as f:
            raw = f.read(size)
            if raw[:2] != b"\x1f\x8b":
                return raw
            f.seek(0)
            with gzip.GzipFile(fileobj=f) as z:
                return z.read(size)
    except (OSError, EOFError, zlib.error):
        return b""


def file_kind(path: str | os.PathLike[str]) -> str | None:
    """NCU_REPORT, KINETO_TRACE, CHROME_TRACE, or None for anything else (a session, a damaged file, a PNG)."""
    if not os.path.isfile(path):
        return None
    start = head(path)
    if start[:4] == MAGIC:
        return NCU_REPORT
    if start.lstrip()[:1] != b"{":
        return None
    if b'"schemaVersion"' in start:
        return KINETO_TRACE
    if b'"traceEvents"' in start:
        return CHROME_TRACE
    return None


def not_a_session(path: str | os.PathLike[str]) -> str | None:
    """One sentence for a file given as a session that is another tool's file, with what to do; else None."""
    kind = file_kind(path)
    if kind in (NCU_REPORT, KINETO_TRACE):
        # the command mid-sentence: a sentence's closing period after it would be copied with it
        return (f"{path} is {kind}, not a kernelscope session: `kernelscope import {shlex.quote(str(path))}` "
                "turns it into one")
    if kind == CHROME_TRACE:
        return (f"{path} is {kind}, not a kernelscope session: open it in ui.perfetto.dev (a PyTorch profiler "
                f"trace becomes a session with kernelscope import)")
    return None
