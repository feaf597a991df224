"""Reading and writing files: the one pair of helpers every reader and writer goes through.

Writing. Sessions, reports, traces and plots are files people keep and share. So an output path that exists
is refused without ``force``; a path that is one of the command's own inputs is refused even with it
(``export run.json --chrome run.json`` must not replace the session); only a regular file is ever replaced (a
device such as /dev/null, a FIFO, a socket, a file-descriptor link such as /proc/self/fd/1 or a symbolic link to
nothing is refused, -f or not); and data is written to a temporary file in the same directory, flushed to disk,
then moved into place: without ``force`` by a hard link that fails if the name was taken meanwhile (so a file
created after the check is never destroyed and two writers cannot both win), with ``force`` by a rename. Ctrl-C,
SIGTERM, a killed process or a full disk leaves either the old file or the new one, never half of one, and
removes the temporary file (SIGKILL excepted: nothing runs after it).

Reading. An input must be a regular file: a FIFO, a device (/dev/zero, /dev/urandom), a socket or a directory is
refused from its ``stat`` before it is opened, and it is opened without blocking. What is read is bounded: the
file and, for gzip, the decompressed data may hold at most ``input_limit_bytes()`` (1 GiB unless
KERNELSCOPE_MAX_INPUT_MB says otherwise), decompressed as a stream that stops at the limit, so a gzip bomb costs
at most the limit in memory.
"""
from __future__ import annotations

import errno
import gzip
import os
import signal
import stat
import tempfile
import threading
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, Union

Data = Union[bytes, Callable[[BinaryIO], None]]  # the bytes, or a function that writes them to the file

INPUT_LIMIT_ENV = "KERNELSCOPE_MAX_INPUT_MB"
DEFAULT_INPUT_LIMIT_MB = 1024  # a session of a million launches is ~100 MB of JSON; its model takes ~10x that
NAME_MAX_BYTES = 255  # the longest file name (one path component) Linux and macOS file systems take
_READ_CHUNK = 1 << 20
_STDOUT_NAMES = ("-", "/dev/stdout", "/dev/stderr", "/dev/stdin")
_FD_DIRS = ("/proc/", "/dev/fd/")


class OutputFileError(Exception):
    """An output that may not or could not be written; the message is one sentence for the user."""


class InputFileError(Exception):
    """An input that may not or could not be read (not a regular file, over the size limit, damaged gzip).

    ``str(e)`` is one sentence naming the file; ``reason`` is the same without the name ("is a FIFO, not a
    regular file"), for messages that name the file themselves; ``damaged`` tells a corrupt gzip stream apart."""

    def __init__(self, path: Path, reason: str, damaged: bool = False) -> None:
        self.path, self.reason, self.damaged = path, reason, damaged
        super().__init__(f"{path} {reason}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def file_type(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def _special_output(out: Path, what: str) -> str | None:
    """Why ``out`` may never be written (even with -f), or None: a stdout spelling, a file-descriptor link, a
    device, FIFO or socket (also behind a symbolic link), a directory, a symbolic link to nothing, a name too
    long for the file system."""
    name = str(out)
    if name in _STDOUT_NAMES:
        return (f"the {what} {out} names a standard stream, which this command does not write; give the name of "
                "a file")
    if os.path.abspath(name).startswith(_FD_DIRS):
        return (f"the {what} {out} is a file-descriptor or process link, not a regular file; give the name of a "
                "file (-f replaces regular files only)")
    if len(os.fsencode(out.name)) > NAME_MAX_BYTES:
        return (f"the {what} name {out.name[:40]}... is {len(os.fsencode(out.name))} bytes long; file names may "
                f"be at most {NAME_MAX_BYTES} bytes")
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot write {out} ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(out)
        except OSError:
            return (f"the {what} {out} is a symbolic link to a file that does not exist; give the name of a file "
                    "(a dangling link is never followed or replaced)")
    if stat.S_ISDIR(st.st_mode):
        return f"the {what} {out} is a directory; give a file name"
    if not stat.S_ISREG(st.st_mode):
        return (f"the {what} {out} is {file_type(st.st_mode)}, not a regular file; give the name of a file "
                "(-f replaces regular files only)")
    return None


def check_output(path: str | os.PathLike[str], force: bool = False,
                 inputs: Iterable[str | os.PathLike[str]] = (), what: str = "output") -> Path:
    """The output path, checked before any work is done; raises OutputFileError with the reason.

    Give the name as typed: Path() drops a trailing "/" or "/.", which make a name a directory's (open()
    refuses them), so ``newdir/`` would become a file ``newdir`` and ``afile/.`` would overwrite ``afile``."""
    raw = os.fspath(path)
    if raw.endswith(("/", os.sep, "/.", "/..")) or raw in (".", ".."):
        raise OutputFileError(f"the {what} {raw} names a directory (a name ending in / or /. does); give a file "
                              "name")
    out = Path(path)
    for given in inputs:
        src = Path(given)
        if _same_file(out, src) or out.resolve() == src.resolve():
            raise OutputFileError(f"the {what} {out} is also an input of this command; choose another file "
                                  "(-f never overwrites an input)")
    special = _special_output(out, what)
    if special is not None:
        raise OutputFileError(special)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise OutputFileError(f"cannot write {out}: the directory {parent} does not exist")
    if os.path.lexists(out) and not force:
        raise OutputFileError(f"{out} already exists; use -f to overwrite it or choose another file")
    return out


class _Terminated(BaseException):
    """SIGTERM or SIGHUP arrived while a file was being written: unwinds so the temporary file is removed."""

    def __init__(self, signum: int) -> None:
        self.signum = signum


@contextmanager
def _terminate_as_exception() -> Iterator[None]:
    """While writing: SIGTERM / SIGHUP raise (their default kills the process with the temporary file left
    behind); afterwards the old handlers are back. Only the main thread can set handlers; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    def handler(signum: int, frame: object) -> None:
        raise _Terminated(signum)
    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                old[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _link_into_place(tmp: str, out: Path) -> None:
    """Move ``tmp`` to ``out`` only if ``out`` does not exist (FileExistsError otherwise)."""
    try:
        os.link(tmp, out)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        # a file system without hard links: reserve the name exclusively, then rename over our own empty file
        os.close(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.replace(tmp, out)
        return
    os.unlink(tmp)


def write_atomic(path: str | os.PathLike[str], data: Data, *, force: bool = True) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory, then move it into place.

    ``force=False`` never replaces anything: if ``path`` exists when the file is moved into place (also when it
    was created after check_output), OutputFileError and the other file stays. With ``force`` a regular file is
    replaced; a device, FIFO, socket, fd link or dangling link never is. On any failure (a full disk, a file-size
    limit, Ctrl-C, SIGTERM) the temporary file is removed and the file that was at ``path`` stays as it was; OS
    errors become OutputFileError.
    """
    out = Path(path)
    special = _special_output(out, "output")
    if special is not None:
        raise OutputFileError(special)
    temporary: list[str] = []
    try:
        with _terminate_as_exception():
            _write_and_move(out, data, force, temporary)
    except BaseException as e:
        for tmp in temporary:
            Path(tmp).unlink(missing_ok=True)
        _raise_for_user(e, out)
    return out


def _write_and_move(out: Path, data: Data, force: bool, temporary: list[str]) -> None:
    directory = out.parent if str(out.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".kernelscope.", suffix=".partial", dir=directory)
    except OSError as e:
        raise OutputFileError(f"cannot write {out} ({e.strerror or e})") from None
    temporary.append(tmp)
    with os.fdopen(fd, "wb") as f:
        if callable(data):
            data(f)
        else:
            f.write(data)
        f.flush()
        os.fsync(f.fileno())  # the bytes are on disk before the name points at them
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; an output is an ordinary file
    place_file(tmp, out, force)


def private_output(out: str | os.PathLike[str]) -> Path:
    """An empty file of this process's own beside ``out`` (same directory, so it can later be moved into place
    by link or rename; same compression suffix), for a writer that fills it before ``out`` is claimed."""
    out = Path(out)
    suffix = ".json.gz" if out.name.endswith(".gz") else ".json"
    try:
        fd, name = tempfile.mkstemp(prefix=".kernelscope-run-", suffix=suffix, dir=out.parent)
    except OSError as e:
        raise OutputFileError(f"cannot write beside {out} ({e.strerror or e})") from None
    os.close(fd)
    return Path(name)


def place_file(tmp: str | os.PathLike[str], out: str | os.PathLike[str], force: bool) -> None:
    """Move the finished temporary file ``tmp`` (same directory) to ``out``: without ``force`` only if the name
    is free (FileExistsError otherwise), with it over a regular file only (OutputFileError for anything else).
    For writers whose temporary file another program wrote (ncu's report)."""
    out = Path(out)
    if not force:
        _link_into_place(str(tmp), out)
        return
    special = _special_output(out, "output")  # again: it may have changed since the check
    if special is not None:
        raise OutputFileError(special)
    os.replace(tmp, out)


def _raise_for_user(e: BaseException, out: Path) -> None:
    """Re-raise what stopped a write (its temporary file already removed) as the user should see it."""
    if isinstance(e, FileExistsError):
        raise OutputFileError(f"{out} was created by something else while this command ran; it was left as it "
                              "was (use -f to overwrite it)") from None
    if isinstance(e, OSError):
        kept = f"; {out} was left as it was" if out.exists() else ""
        raise OutputFileError(f"cannot write {out} ({e.strerror or e}){kept}") from None
    if isinstance(e, _Terminated):
        signal.signal(e.signum, signal.SIG_DFL)
        os.kill(os.getpid(), e.signum)  # die of the signal, as without the handler, but with no temporary file
        raise SystemExit(128 + e.signum) from None
    raise e


def input_limit_bytes() -> int:
    """The most bytes an input may hold, compressed or decompressed: KERNELSCOPE_MAX_INPUT_MB (MiB), default
    1024 MiB. A value that is not a positive number is refused with one sentence (InputFileError)."""
    text = os.environ.get(INPUT_LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_INPUT_LIMIT_MB << 20
    try:
        mb = float(text)
    except ValueError:
        mb = float("nan")
    if not (mb > 0 and mb < 2**43):
        raise InputFileError(Path(INPUT_LIMIT_ENV), f"must be a positive number of MiB, not {text[:40]!r}")
    return max(1, int(mb * (1 << 20)))


def input_too_large(path: Path, limit: int, decompressed: bool) -> InputFileError:
    """The error for an input over the limit (``decompressed``: once decompressed)."""
    how = " once decompressed" if decompressed else ""
    return InputFileError(path, f"holds more than {limit / (1 << 20):g} MiB{how}, the input limit; set "
                                f"{INPUT_LIMIT_ENV} to a larger number of MiB to read it")


# The former private names, still imported by collect/trace/kineto_stream.py.


def check_input(path: str | os.PathLike[str]) -> os.stat_result:
    """``path`` is a regular file of at most the input limit (from its stat, without opening it);
    FileNotFoundError and IsADirectoryError as open() would raise them, InputFileError for a FIFO, device or
    socket, or a file over the limit."""
    p = Path(path)
    st = os.stat(p)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(p))
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(p, f"is {file_type(st.st_mode)}, not a regular file; give a file on disk")
    limit = input_limit_bytes()
    if st.st_size > limit:
        raise input_too_large(p, limit, False)
    return st


def read_input(path: str | os.PathLike[str], decompress: bool = True) -> bytearray:
    """The bytes of the regular file ``path``, gzip-decompressed when they start with the gzip magic (and
    ``decompress``), at most ``input_limit_bytes()`` of them either way.

    FileNotFoundError / IsADirectoryError / OSError as open() raises them; InputFileError for a file that is
    not regular, too large, or (``damaged``) not whole gzip data. Memory: the bytes returned plus one MiB."""
    p = Path(path)
    limit = input_limit_bytes()
    check_input(p)
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for something else between stat and open
            raise InputFileError(p, f"is {file_type(os.fstat(fd).st_mode)}, not a regular file; give a file on disk")
        head = f.read(2)
        f.seek(0)
        if not (decompress and head == b"\x1f\x8b"):
            return _read_bounded(f, p, limit, False)  # in chunks: read(limit) would allocate the limit up front
        try:
            with gzip.GzipFile(fileobj=f, mode="rb") as z:
                return _read_bounded(z, p, limit, True)  # a bomb inflates one chunk at a time, up to the limit
        except (OSError, EOFError, zlib.error):
            raise InputFileError(p, "is damaged: its gzip data is cut short or corrupt", damaged=True) from None


def _read_bounded(f: BinaryIO, p: Path, limit: int, decompressed: bool) -> bytearray:
    data = bytearray()
    while True:
        chunk = f.read(_READ_CHUNK)
        if not chunk:
            return data
        data += chunk
        if len(data) > limit:
            raise input_too_large(p, limit, decompressed)
