"""kernelscope.region: name a part of the workload so every pass can find it.

It opens an NVTX range (seen by ncu and Nsight tools) and a PyTorch
record_function (seen by the trace pass). Works as a context manager and as a
decorator; without torch it is a no-op that still runs the code.

``flops=``, ``bytes=`` and ``units=`` (e.g. ``{"tokens": 4096}``) declare the
work one entry of the region does; while a trace pass records, each entry's
declaration is logged (DeclaredWorkLog) and stored in the session, where the
roofline and the summary use it.
"""
from __future__ import annotations

import contextlib
import functools
from collections import Counter
from typing import Any, Callable, Iterator, Mapping, TypeVar

from kernelscope.model.launch import DeclaredWork

F = TypeVar("F", bound=Callable[..., Any])


class DeclaredWorkLog:
    """Declarations of region entries while a trace pass records (entry order, per name)."""

    def __init__(self) -> None:
        self.entries: list[DeclaredWork] = []
        self._seen: Counter[str] = Counter()

    def enter(self, name: str, flops: float | None, nbytes: float | None, units: dict[str, float]) -> None:
        occurrence = self._seen[name]
        self._seen[name] += 1
        if flops is not None or nbytes is not None or units:
            self.entries.append(DeclaredWork(name, occurrence, flops, nbytes, dict(units)))


# The logs of trace passes recording now. Module state because region() is called
# from user code that has no handle on the recorder; empty when nothing records.
_LOGS: list[DeclaredWorkLog] = []


def start_declared_work_log() -> DeclaredWorkLog:
    log = DeclaredWorkLog()
    _LOGS.append(log)
    return log


def stop_declared_work_log(log: DeclaredWorkLog) -> list[DeclaredWork]:
    if log in _LOGS:
        _LOGS.remove(log)
    return list(log.entries)


def _amount(what: str, v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != v:
        raise ValueError(f"kernelscope region {what} must be a non-negative number, not {v!r}")
    return float(v)


class region(contextlib.ContextDecorator):
    def __init__(self, name: str, flops: float | None = None, bytes: float | None = None,  # noqa: A002
                 units: Mapping[str, float] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a kernelscope region needs a non-empty name")
        self.name = name
        self.flops, self.bytes = _amount("flops", flops), _amount("bytes", bytes)
        self.units = {str(k): _amount(f"units[{k!r}]", v) or 0.0 for k, v in (units or {}).items() if v is not None}
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> "region":
        for log in _LOGS:
            log.enter(self.name, self.flops, self.bytes, self.units)
        stack = contextlib.ExitStack()
        for cm in _markers(self.name):
            stack.enter_context(cm)
        self._stack = stack
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    def __call__(self, func: F) -> F:  # fresh markers per call, so recursion nests correctly
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with region(self.name, self.flops, self.bytes, self.units):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def _markers(name: str) -> Iterator[contextlib.AbstractContextManager[Any]]:
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        yield _nvtx(torch, name)
    yield torch.profiler.record_function(name)


@contextlib.contextmanager
def _nvtx(torch: Any, name: str) -> Iterator[None]:
    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()
