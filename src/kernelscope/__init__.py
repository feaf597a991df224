"""kernelscope: what a GPU kernel really does on the hardware.

The public API is lazy so that `import kernelscope` needs neither torch nor a GPU:
`kernelscope.profile()`, `region()`, `step()` and `mark()` import the collectors on use.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["profile", "region", "step", "mark", "load", "Session", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "profile":
        from kernelscope.collect.trace.api import profile

        return profile
    if name == "region":
        from kernelscope.collect.trace.regions import region

        return region
    if name == "step":
        from kernelscope.collect.trace.steps import step

        return step
    if name == "mark":
        from kernelscope.collect.trace.marks import mark

        return mark
    if name == "load":
        from kernelscope.notebook import load

        return load
    if name == "Session":
        from kernelscope.model import Session

        return Session
    raise AttributeError(f"module 'kernelscope' has no attribute {name!r}")
