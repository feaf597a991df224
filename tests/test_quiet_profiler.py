"""kernelscope's start/stop of the PyTorch profiler prints none of torch's notes about that use, and
nothing of the workload's is hidden (CPU profiler: the same start/stop calls the trace pass makes)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import HANG_S

pytestmark = pytest.mark.slow

pytest.importorskip("torch")

# Starts the CPU profiler twice on one object: the second start makes torch warn "Profiler clears
# events at the end of each cycle" (torch 2.10/2.11 do at every start). torch 2.13 writes Kineto's
# "USDT: ... profiler_start/stop" lines to fd 2 at each start and stop.
SCRIPT = textwrap.dedent("""
    import os, sys, warnings
    warnings.simplefilter("always")
    import torch
    from torch.profiler import ProfilerActivity, profile
    from kernelscope.collect.trace.quiet import profiler_notices_silenced
    QUIET = sys.argv[1] == "quiet"
    def call(fn):
        if QUIET:
            with profiler_notices_silenced():
                fn()
        else:
            fn()
    p = profile(activities=[ProfilerActivity.CPU])
    for _ in range(2):
        call(p.__enter__)
        torch.ones(4).sum()
        warnings.warn("the workload's own warning", UserWarning)
        call(lambda: os.write(2, b"a line the workload's library wrote\\n"))
        call(lambda: p.__exit__(None, None, None))
""")


def _stderr(mode: str) -> str:
    r = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_torch_notes_about_the_profiler_are_dropped_and_the_workloads_kept():
    loud, quiet = _stderr("loud"), _stderr("quiet")
    assert "Profiler clears events at the end of each cycle" in loud  # the note exists without the filter
    assert "Profiler clears events" not in quiet
    assert "USDT:" not in quiet and "profiler_start" not in quiet
    assert quiet.count("the workload's own warning") == 2  # raised between start and stop: shown
    assert quiet.count("a line the workload's library wrote") == 2  # fd 2 output in the window: copied back
