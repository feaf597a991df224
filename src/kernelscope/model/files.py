"""Writing files: the one helper every writer goes through.

Sessions, reports, traces and plots are files people keep and share. So an output
path that exists is refused without ``force``; a path that is one of the command's
own inputs is refused even with it (``export run.json --chrome run.json`` must not
replace the session); and data is written to a temporary file in the same directory,
flushed to disk, then renamed over the target, so Ctrl-C, a killed process or a full
disk leaves either the old file or the new one, never half of one.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Union

Data = Union[bytes, Callable[[BinaryIO], None]]  # the bytes, or a function that writes them to the file


class OutputFileError(Exception):
    """An output that may not or could not be written; the message is one sentence for the user."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def check_output(path: str | os.PathLike[str], force: bool = False,
                 inputs: Iterable[str | os.PathLike[str]] = (), what: str = "output") -> Path:
    """The output path, checked before any work is done; raises OutputFileError with the reason."""
    out = Path(path)
    for given in inputs:
        src = Path(given)
        if _same_file(out, src) or out.resolve() == src.resolve():
            raise OutputFileError(f"the {what} {out} is also an input of this command; choose another file "
                                  "(-f never overwrites an input)")
    if out.is_dir():
        raise OutputFileError(f"the {what} {out} is a directory; give a file name")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise OutputFileError(f"cannot write {out}: the directory {parent} does not exist")
    if out.exists() and not force:
        raise OutputFileError(f"{out} already exists; use -f to overwrite it or choose another file")
    return out


def write_atomic(path: str | os.PathLike[str], data: Data) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory, then rename.

    On any failure (a full disk, a file-size limit, Ctrl-C) the temporary file is removed and
    the file that was at ``path`` stays as it was; OS errors become OutputFileError.
    """
    out = Path(path)
    directory = out.parent if str(out.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=directory)
    except OSError as e:
        raise OutputFileError(f"cannot write {out} ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the name points at them
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; an output is an ordinary file
        os.replace(tmp, out)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        kept = f"; {out} was left as it was" if out.exists() else ""
        raise OutputFileError(f"cannot write {out} ({e.strerror or e}){kept}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
