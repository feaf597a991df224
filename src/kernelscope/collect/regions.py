"""kernelscope.region: name a part of the workload so every pass can find it.

It opens an NVTX range (seen by ncu and Nsight tools) and a PyTorch
record_function (seen by the trace pass). Works as a context manager and as a
decorator; without torch it is a no-op that still runs the code.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class region(contextlib.ContextDecorator):
    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a kernelscope region needs a non-empty name")
        self.name = name
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> "region":
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
            with region(self.name):
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
