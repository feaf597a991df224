"""The Rich console every command draws on."""
from __future__ import annotations

from rich.console import Console


def make_console(width: int | None = None, file=None, color: bool | None = None) -> Console:
    """A console for the CLI; a fixed width and no colour make output testable as text."""
    kwargs = {"width": width, "file": file, "soft_wrap": False, "highlight": False}
    if color is False:
        kwargs.update(color_system=None, force_terminal=False)
    return Console(**kwargs)
