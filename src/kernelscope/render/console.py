"""The Rich console every command draws on."""
from __future__ import annotations

import errno
import os

from rich.console import Console


class _CliConsole(Console):
    """Rich's console, except that a closed pipe (``kernelscope occupancy | head -1``) raises BrokenPipeError
    like any other write to stdout, for the command line to end quietly, the same way for every command (Rich
    would exit 1 on its own)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def make_console(width: int | None = None, file=None, color: bool | None = None) -> Console:
    """A console for the CLI; a fixed width and no colour make output testable as text."""
    kwargs = {"width": width, "file": file, "soft_wrap": False, "highlight": False}
    if color is False:
        kwargs.update(color_system=None, force_terminal=False)
    return _CliConsole(**kwargs)
