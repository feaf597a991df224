"""kernelscope.step(): iteration boundaries, and the window of steps a trace pass records (`run --steps A-B`).

Call ``kernelscope.step()`` once at the end of each iteration, as with ``torch.profiler``'s ``prof.step()``:
step 0 runs from the start to the first call, step k from the k-th call to the (k+1)-th. Outside a
`kernelscope run` it does nothing (unless the counter pass asked for a window, below).

While a trace pass records, each StepCounter counts the calls and tells its listeners when the window opens
(step FIRST begins) and closes (step LAST ends): the PyTorch profiler records only those steps (a
torch.profiler schedule, one warm-up step before them), the allocator history (--memory) too. Under the
counter pass (ncu re-runs the plain workload), ``$KERNELSCOPE_PROFILE_STEPS`` names the window and the
window is bracketed with cudaProfilerStart/Stop, which ncu honours with ``--profile-from-start off``.
"""
from __future__ import annotations

import os
import re
import warnings
from typing import Any, Callable

STEPS_ENV = "KERNELSCOPE_PROFILE_STEPS"  # "A-B" in the counter pass's environment


class StepRangeError(ValueError):
    """A --steps value that is not a range of steps; the message is one sentence."""


def parse_steps(text: str) -> tuple[int, int]:
    """'50-52' -> (50, 52), '7' -> (7, 7); both ends included, steps counted from 0."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text or "")
    if m is None:
        raise StepRangeError(f"--steps takes FIRST-LAST (steps counted from 0, e.g. 50-52) or one step, not {text!r}")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    if last < first:
        raise StepRangeError(f"--steps {text}: the last step ({last}) comes before the first ({first})")
    return first, last


def steps_ran_sentence(first: int, last: int, steps_run: int) -> str:
    """Why a window recorded nothing: which steps the run had (one sentence)."""
    if steps_run == 0:
        return (f"--steps {first}-{last} recorded nothing: the run never called kernelscope.step(), so it had only "
                "step 0 and no step boundaries (call kernelscope.step() at the end of each iteration)")
    return (f"--steps {first}-{last} is outside the run: it ran steps 0-{steps_run} (kernelscope.step() was called "
            f"{steps_run} times; the last step ends with the program)")


class StepCounter:
    """Counts kernelscope.step() calls; calls ``on_step(n)`` after each (n: the calls so far, the step now
    running) and ``on_open()`` / ``on_close()`` when the window [first, last] opens and closes."""

    def __init__(self, window: tuple[int, int] | None) -> None:
        self.window = window
        self.ended = 0  # calls so far; the step now running
        self.on_step: list[Callable[[int], None]] = []
        self.on_open: list[Callable[[], None]] = []
        self.on_close: list[Callable[[], None]] = []
        self.opened = self.closed = False

    @property
    def in_window(self) -> bool:
        return self.window is None or (self.opened and not self.closed)

    def begin(self) -> None:
        """The program starts (step 0): a window from step 0 opens now."""
        if self.window is not None and self.window[0] == 0:
            self._open()

    def step(self) -> None:
        self.ended += 1
        for fn in self.on_step:
            fn(self.ended)
        if self.window is None:
            return
        if self.ended == self.window[0]:
            self._open()
        elif self.ended == self.window[1] + 1:
            self.close()

    def _open(self) -> None:
        if not self.opened:
            self.opened = True
            for fn in self.on_open:
                fn()

    def close(self) -> None:
        """The window closes (step LAST ended, or the program ended inside it)."""
        if self.opened and not self.closed:
            self.closed = True
            for fn in self.on_close:
                fn()

    def recorded(self) -> tuple[int, int] | None:
        """The steps of the window that ran (the run may end inside it)."""
        if self.window is None or not self.opened:
            return None
        return self.window[0], min(self.window[1], self.ended)


# Counters of the trace passes recording now. Module state because kernelscope.step() is called from user code
# that has no handle on the recorder (as regions._LOGS); empty when nothing records.
_COUNTERS: list[StepCounter] = []


def start_counter(window: tuple[int, int] | None) -> StepCounter:
    c = StepCounter(window)
    _COUNTERS.append(c)
    return c


def stop_counter(c: StepCounter) -> None:
    if c in _COUNTERS:
        _COUNTERS.remove(c)


def current_step() -> int | None:
    """The step running now (None: no trace pass counts steps)."""
    return _COUNTERS[-1].ended if _COUNTERS else None


def in_window() -> bool:
    return all(c.in_window for c in _COUNTERS)


def step() -> None:
    """End the current iteration (kernelscope.step())."""
    if not _COUNTERS and os.environ.get(STEPS_ENV):
        _start_profiler_range_counter(os.environ[STEPS_ENV])
    for c in list(_COUNTERS):
        c.step()


def _start_profiler_range_counter(text: str) -> None:
    """The counter pass's workload: cudaProfilerStart when step FIRST begins, cudaProfilerStop when LAST ends."""
    try:
        window = parse_steps(text)
        import torch
    except (StepRangeError, ImportError):
        return
    if not torch.cuda.is_available():
        return
    cudart: Any = torch.cuda.cudart()
    c = start_counter(window)  # created at the first call, which the caller then counts
    c.opened = window[0] == 0  # a window from step 0: ncu profiles from the program's start (runner.py)
    c.on_open.append(lambda: cudart.cudaProfilerStart())
    c.on_close.append(lambda: (torch.cuda.synchronize(), cudart.cudaProfilerStop()))


def windowed_profiler(torch: Any, activities: list[Any], window: tuple[int, int],
                      on_trace_ready: Callable[[Any], None], **options: bool) -> Any:
    """A torch.profiler.profile that records steps FIRST..LAST (its prof.step() is called at each
    kernelscope.step()), warming up during the step before FIRST so CUPTI's start-up cost falls outside.
    ``options``: the operator options (record_shapes, with_stack)."""
    first, last = window
    warmup = 1 if first >= 1 else 0
    with warnings.catch_warnings():  # a window from step 0 has no step before it to warm up in; nothing to warn of
        warnings.simplefilter("ignore", UserWarning)
        schedule = torch.profiler.schedule(skip_first=first - warmup, wait=0, warmup=warmup,
                                           active=last - first + 1, repeat=1)
    return torch.profiler.profile(activities=activities, schedule=schedule, on_trace_ready=on_trace_ready, **options)
