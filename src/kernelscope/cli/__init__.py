"""The `kernelscope` command. One module per subcommand; each registers itself.

Bad input gets one sentence on stderr and a non-zero exit, never a traceback
(set KERNELSCOPE_DEBUG=1 to see one for unexpected errors).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from typing import NoReturn, Sequence

from kernelscope import __version__
from kernelscope.cli.common import EXIT_USAGE
from kernelscope.model.escape import visible
from kernelscope.model.files import INPUT_LIMIT_ENV, InputFileError, OutputFileError

# Subcommand modules, in help order. A module with RAW_ARGS = True parses its own argv.
COMMANDS = ("run", "show", "import", "occupancy", "demo", "learn", "bench", "plot", "profile", "top", "export",
            "report", "diff", "merge", "calibrate", "tune", "doctor", "include-dir")
_HELP = {"run": "profile a workload and write a session file (kernelscope run --help)"}


_MODULE = {"import": "import_report", "include-dir": "include_dir"}  # names that are not Python identifiers


def _module(name: str):
    return importlib.import_module(f"kernelscope.cli.{_MODULE.get(name, name)}")


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose error message goes through the one escaping path: "unrecognized arguments",
    "invalid choice" and the like quote what was typed. Usage, then one sentence, exit 2, as argparse does.
    Subparsers are made of the same class (add_subparsers' default parser_class is the parent's)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {visible(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="kernelscope", description="Shows what a GPU kernel really does on the hardware.")
    p.add_argument("--version", action="version", version=f"kernelscope {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        mod = _module(name)
        if getattr(mod, "RAW_ARGS", False):
            sub.add_parser(name, help=_HELP.get(name, mod.__doc__.splitlines()[0]), add_help=False)
        else:
            mod.register(sub)
    return p


class StdoutWriteError(OSError):
    """Writing to stdout failed (a full disk, a terminal gone): not a bug of the command, one sentence."""


class _Stdout:
    """sys.stdout while a command runs: the same stream, whose write errors say they are stdout's (an OSError
    from anywhere else is an internal error). A closed pipe stays BrokenPipeError. Started with stdout closed
    (``>&-``: Python's sys.stdout is None), what is written is dropped, as print() and Rich drop it."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, s: str) -> int:
        if self._stream is None:
            return len(s)
        try:
            return self._stream.write(s)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise StdoutWriteError(e.errno, e.strerror) from e

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise StdoutWriteError(e.errno, e.strerror) from e

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _tolerant(stream) -> str | None:
    """Make a text stream write what its encoding cannot hold as escapes (an ASCII or Latin-1 stdout: box
    drawing, µ, …), keeping the encoding; its previous error handler, to put back (None: not reconfigurable)."""
    if not hasattr(stream, "reconfigure"):
        return None
    before = stream.errors
    stream.reconfigure(errors="backslashreplace")
    return before


def _silence(stream) -> None:
    """Point a failed stdout's descriptor at /dev/null, so that the interpreter's last flush of what is still
    buffered cannot fail again ("Exception ignored ...") on the way out. Nothing for a stream without one."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Output that cannot be written is one sentence (a full disk: exit 2, like ``-o`` onto a
    full disk; exit 1 stays for internal errors); a closed pipe (``| head``) ends every command quietly, exit 0."""
    argv = list(sys.argv[1:] if argv is None else argv)
    stdout, errors = sys.stdout, (_tolerant(sys.stdout), _tolerant(sys.stderr))
    sys.stdout = _Stdout(stdout)  # type: ignore[assignment]
    try:
        code = _run(argv)
        sys.stdout.flush()  # what is still buffered fails here, where it is reported, not at exit
        return code
    except StdoutWriteError as e:
        _silence(stdout)
        print(f"kernelscope: error: cannot write to stdout: {e.strerror}.", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader left (| head, | true): what it did not read is not wanted
        _silence(stdout)
        return 0
    finally:
        sys.stdout = stdout
        for stream, before in zip((stdout, sys.stderr), errors):
            if before is not None:
                with contextlib.suppress(OSError):  # it flushes: a stdout that failed was reported above
                    stream.reconfigure(errors=before)


def _run(argv: list[str]) -> int:
    try:
        if argv and argv[0] in COMMANDS and getattr(_module(argv[0]), "RAW_ARGS", False):
            return _module(argv[0]).main(argv[1:])
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        return args.func(args)
    except (OutputFileError, InputFileError) as e:  # a writer that could not finish (a full disk): the old file
        fail_message = str(e).rstrip(".") + "."        # is intact; an input that is not a bounded regular file
        print(f"kernelscope: error: {visible(fail_message)}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:  # past the bounds on what is read: still one sentence, not a traceback
        print("kernelscope: error: out of memory reading the input; it is larger than this machine can hold "
              f"(see {INPUT_LIMIT_ENV} in the README).", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kernelscope: interrupted.", file=sys.stderr)
        return 130
    except (BrokenPipeError, StdoutWriteError, SystemExit):
        raise
    except Exception as e:  # an unexpected bug: one line, with a way to see more
        if os.environ.get("KERNELSCOPE_DEBUG"):
            raise
        print(f"kernelscope: internal error: {type(e).__name__}: {visible(str(e))} (set KERNELSCOPE_DEBUG=1 for the "
              "traceback).", file=sys.stderr)
        return 1
