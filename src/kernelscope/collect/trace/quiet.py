"""Keep the PyTorch profiler's own notices about kernelscope's use of it off the user's terminal.

Starting and stopping ``torch.profiler.profile`` makes torch say things that concern how
kernelscope drives the profiler, not the user's workload:
- a ``UserWarning`` "Profiler clears events at the end of each cycle ..." (torch 2.10/2.11 emit it
  even when no schedule cycles are used, which is kernelscope's case; torch fixed that later);
- Kineto's progress lines on stderr, "USDT:... profiler_start" / "profiler_stop" (torch 2.13).
Only those, and only around kernelscope's own start/stop calls: a warning the workload raises
between them is the user's and is shown as Python would.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from typing import Iterator

# (message regex, module regex): warnings torch raises about the profiler's cycles.
PROFILER_WARNINGS: tuple[tuple[str, str], ...] = (
    (r"Warning: Profiler clears events at the end of each cycle", r"torch\.profiler"),
)
# Lines Kineto writes to stderr (file descriptor 2) when a profiling session starts or stops.
KINETO_PROGRESS = re.compile(rb"^USDT:.*\]\s*profiler_(start|stop)\s*$")


@contextlib.contextmanager
def profiler_notices_silenced() -> Iterator[None]:
    """Around a start or stop of the profiler: drop its notices about itself, pass on anything else."""
    with warnings.catch_warnings(), _kineto_progress_dropped():
        for message, module in PROFILER_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=UserWarning, module=module)
        yield


@contextlib.contextmanager
def _kineto_progress_dropped() -> Iterator[None]:
    """Send fd 2 to a temporary file for the call; then copy back every line but Kineto's progress lines."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable fd 2 (embedded interpreter): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except ValueError:
                pass
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured if not KINETO_PROGRESS.match(line.rstrip(b"\r\n"))]
            data = b"".join(kept)
            while data:
                data = data[os.write(2, data):]
