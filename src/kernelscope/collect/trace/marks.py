"""kernelscope.mark(name, **values): a point in time with the caching allocator's bytes and the user's values
(shapes, token counts). Recorded while a trace pass runs (inside its step window, if it has one); a no-op
otherwise."""
from __future__ import annotations

import time
from typing import Any

from kernelscope.collect.trace import steps
from kernelscope.model.memory import Mark

MAX_LIST = 64  # a list value is a shape or a few counts, not a tensor's contents


class MarkLog:
    def __init__(self) -> None:
        self.marks: list[Mark] = []


_LOGS: list[MarkLog] = []  # the logs of trace passes recording now (as regions._LOGS)


def start_mark_log() -> MarkLog:
    log = MarkLog()
    _LOGS.append(log)
    return log


def stop_mark_log(log: MarkLog) -> list[Mark]:
    if log in _LOGS:
        _LOGS.remove(log)
    return list(log.marks)


def _value(key: str, v: Any) -> Any:
    if isinstance(v, (bool, str)) or (isinstance(v, (int, float)) and v == v and abs(v) != float("inf")):
        return v
    if isinstance(v, (tuple, list)) or type(v).__name__ == "Size":  # torch.Size is a tuple
        items = list(v)
        if len(items) <= MAX_LIST and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
            return items
    raise ValueError(f"kernelscope.mark value {key}= must be a number, a string, true/false or a short list of "
                     f"numbers (a shape), not {type(v).__name__}")


def allocator_bytes() -> tuple[int | None, int | None, str | None]:
    """(allocated, reserved, why absent): torch.cuda.memory_allocated()/memory_reserved() of the current device."""
    try:
        import torch
    except ImportError:
        return None, None, "torch is not installed"
    if not torch.cuda.is_available():
        return None, None, "CUDA is not available to torch"
    # Before CUDA is initialised these read 0 without creating a context: the allocator holds nothing yet.
    return int(torch.cuda.memory_allocated()), int(torch.cuda.memory_reserved()), None


def mark(name: str, /, **values: Any) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError("kernelscope.mark needs a non-empty name")
    clean = {str(k): _value(k, v) for k, v in values.items()}
    if not _LOGS or not steps.in_window():
        return
    allocated, reserved, why = allocator_bytes()
    m = Mark(name, time.time_ns(), step=steps.current_step(), allocated_bytes=allocated, reserved_bytes=reserved,
             memory_missing_reason=why, values=clean)
    for log in _LOGS:
        log.marks.append(m)
