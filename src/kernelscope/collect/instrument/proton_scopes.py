"""Phase scopes with Triton Proton's instrumentation backend, around one launch.

In the kernel, mark phases with Proton's language scopes::

    import triton.profiler.language as pl
    with pl.scope("load"):
        a = tl.load(...)

On the host, wrap the launch (the kernel must be compiled inside, so that the
scopes are compiled in)::

    with ProtonScopes("matmul_phases_kernel") as ps:
        kernel[grid](...)
    ps.scopes        # model.PhaseScopes, also handed to the session (attached to the launch)

Proton (Triton 3.6) instruments only Gluon kernels unless the "triton"
semantic is enabled; this enables it while recording and says so, because the
Triton compiler may move scope records (loop pipelining, reordering). Proton
reports dropped events (a full circular buffer: the *first* events of a warp
are lost) and parser errors only on stderr; those lines are copied through and
kept as problems. Outside a GPU (TRITON_INTERPRET=1) the scopes are no-ops and
nothing is recorded. A recorded trace: tests/data/proton_h100_phases.chrome_trace.gz.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelscope.collect.instrument import scope_sink
from kernelscope.model.files import write_atomic
from kernelscope.collect.instrument.proton_trace import (
    ProtonTraceError,
    read_proton_trace,
)
from kernelscope.model import PhaseScopes

# What Proton prints (CircularLayoutParser.cpp, Parser.cpp); kept as problems.
PROTON_STDERR = re.compile(r"events are dropped due to insufficient buffer size|ParserException|Clock overflow")
SEMANTIC_NOTE = ("Proton instruments Triton-language kernels only with the 'triton' semantic enabled, which it "
                 "leaves off by default because loop pipelining and reordering may move scope records")


class ProtonScopesError(RuntimeError):
    """Proton could not record here; the message is one sentence for the user."""


class _StderrTee:
    """Sends fd 2 to a temporary file while Proton runs; on close, copies it to the real stderr and keeps
    Proton's warning lines (printed from C++).

    A file, not a pipe: Proton prints one drop warning per warp from C++ while the GIL is held, so a pipe
    drained by a Python thread fills up (64 KiB) and the write blocks forever (docs/decisions/0007).
    Drop warnings past the first few are counted instead of repeated.
    """

    SHOWN_DROPS = 3

    def __init__(self) -> None:
        self.lines: list[str] = []
        sys.stderr.flush()
        self._saved = os.dup(2)
        self._file = tempfile.TemporaryFile()
        os.dup2(self._file.fileno(), 2)

    def close(self) -> list[str]:
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        text = self._file.read().decode(errors="replace")
        self._file.close()
        out, drops = [], 0
        for ln in text.splitlines(keepends=True):
            if PROTON_STDERR.search(ln):
                self.lines.append(ln.rstrip("\n"))
            if "dropped" in ln:
                drops += 1
                if drops > self.SHOWN_DROPS:
                    continue
            out.append(ln)
        if drops > self.SHOWN_DROPS:
            out.append(f"kernelscope: {drops - self.SHOWN_DROPS:,} more Proton warnings like these not repeated "
                       f"({drops:,} warps in all; kept as one problem)\n")
        if out:
            os.write(2, "".join(out).encode())
        return self.lines


def proton_problems(lines: list[str]) -> list[str]:
    """Proton's stderr lines -> one sentence each (counted when repeated per warp)."""
    dropped = [ln for ln in lines if "dropped" in ln]
    out = []
    if dropped:
        out.append(f"Proton's buffer was too small: {len(dropped):,} warp(s) lost their first events "
                   f"(e.g. {dropped[0].strip()}); raise buffer_size or mark fewer scopes in loops")
    out += [f"Proton's parser reported: {ln.strip()}" for ln in lines if "dropped" not in ln]
    return out


class ProtonScopes:
    """Start Proton's instrumentation backend on enter; on exit finalize it, read its trace, submit the scopes."""

    def __init__(self, kernel: str, mode: str | None = None, keep: str | None = None) -> None:
        self.kernel = kernel  # the Triton kernel's function name (as the trace shows it, shortened)
        self.mode = mode  # Proton instrumentation mode string, e.g. "default:buffer_size=65536"; None: Proton's
        self.keep = keep  # copy Proton's raw trace here (a fixture for tests); None: discard
        self.scopes: PhaseScopes | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._session: Any = None
        self._tee: _StderrTee | None = None
        self._enabled_semantic = False
        self.host_start_ns = 0

    def __enter__(self) -> ProtonScopes:
        if os.environ.get("TRITON_INTERPRET") == "1":
            return self  # the interpreter has no instrumentation: scopes are no-ops
        try:
            import triton.profiler as proton
            import triton.profiler.language as pl
        except ImportError as e:
            raise ProtonScopesError(f"Triton's Proton profiler cannot be imported here ({e})") from None
        if pl._ALL_SEMANTICS["triton"] not in pl._SEMANTICS:
            pl.enable_semantic("triton")
            self._enabled_semantic = True
        self._dir = tempfile.TemporaryDirectory(prefix="kernelscope-proton-")
        self._tee = _StderrTee()
        self.host_start_ns = time.time_ns()
        try:
            self._session = proton.start(str(Path(self._dir.name) / "scopes"), data="trace",
                                         backend="instrumentation", mode=self.mode)
        except Exception as e:  # noqa: BLE001  give stderr and the semantic back before saying why
            self._tee.close()
            if self._enabled_semantic:
                pl.disable_semantic("triton")
            self._dir.cleanup()
            self._dir = None
            raise ProtonScopesError(f"Proton's instrumentation backend did not start ({e})") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._dir is None:
            return
        import triton.profiler as proton
        import triton.profiler.language as pl

        try:
            proton.finalize(self._session, "chrome_trace")
        finally:
            lines = self._tee.close() if self._tee else []
            if self._enabled_semantic:
                pl.disable_semantic("triton")
        host_end = time.time_ns()
        try:
            if exc[0] is None:
                self.scopes = self._read(lines)
                scope_sink.submit(scope_sink.ScopeSubmission(self.kernel, self.scopes, self.host_start_ns, host_end,
                                                             SEMANTIC_NOTE if self._enabled_semantic else None))
        finally:
            self._dir.cleanup()

    def _read(self, lines: list[str]) -> PhaseScopes:
        assert self._dir is not None
        files = sorted(Path(self._dir.name).glob("scopes*.chrome_trace"))
        if not files:
            raise ProtonScopesError("Proton wrote no trace file: no instrumented kernel ran inside ProtonScopes")
        text = files[0].read_text(errors="replace")
        if self.keep:
            write_atomic(self.keep, text.encode())  # through the one write helper, as every output
        try:
            kernels = read_proton_trace(text, files[0].name)
        except ProtonTraceError as e:
            raise ProtonScopesError(str(e)) from None
        name = self.kernel if self.kernel in kernels else next((k for k in kernels if self.kernel in k), None)
        if name is None:
            raise ProtonScopesError(f"Proton recorded scopes for {', '.join(sorted(kernels))}, not {self.kernel}")
        scopes = kernels[name]
        scopes.problems += proton_problems(lines)
        others = sorted(k for k in kernels if k != name)
        if others:
            scopes.problems.append(f"Proton also recorded {', '.join(others)} in the same window; only {name} is kept")
        return scopes
