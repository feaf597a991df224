"""The Python API: ``with kernelscope.profile() as session: ...``."""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
from typing import Iterator

from kernelscope import __version__
from kernelscope.collect.trace.recorder import TraceRecorder
from kernelscope.model import Session


def new_session(command: list[str] | None = None) -> Session:
    return Session(
        command=list(command if command is not None else sys.argv),
        created_utc=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        kernelscope_version=__version__,
        environment={"python": sys.version.split()[0], "cwd": os.getcwd()},
    )


@contextlib.contextmanager
def profile(output: str | os.PathLike[str] | None = None, *, command: list[str] | None = None,
            keep_trace: str | None = None, steps: tuple[int, int] | None = None,
            memory: bool = False) -> Iterator[Session]:
    """Profile the block; the yielded Session is filled in when the block ends.

    If the block raises or is interrupted, the session is still completed (and
    saved when ``output`` is given) with its outcome recorded, then the
    exception propagates. ``steps=(first, last)`` records only those steps (kernelscope.step() ends one);
    ``memory=True`` records the caching allocator's history (collect/memory).
    """
    session = new_session(command)
    recorder = TraceRecorder(session, keep_trace=keep_trace, step_window=steps, memory=memory)
    recorder.start()
    try:
        yield session
    except KeyboardInterrupt:
        session.outcome = "interrupted"
        raise
    except BaseException as e:
        if not (isinstance(e, SystemExit) and e.code in (0, None)):
            session.outcome = "workload-failed"
        raise
    finally:
        recorder.stop()
        if output is not None:
            session.save(output)
