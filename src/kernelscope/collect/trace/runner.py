"""`kernelscope run`: start the workload in a child process under the trace pass.

The child (collect/trace/bootstrap.py) writes the session itself, also when the
workload raises or is interrupted. If the child dies before it can (a crash,
a kill), this parent still writes a session saying what happened.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import kernelscope
from kernelscope.collect.trace.api import new_session
from kernelscope.collect.trace.bootstrap import CHILD_CODE
from kernelscope.collect.trace.errors import RunError  # noqa: F401  (raised here; callers import it from here)
from kernelscope.model import CollectorStatus, Session, SessionFileError
from kernelscope.model.files import OutputFileError, private_output
from kernelscope.model import collectors as collector


@dataclass
class RunResult:
    exit_code: int
    session: Session
    output: Path


def is_python_command(arg0: str) -> bool:
    name = os.path.basename(arg0)
    return arg0 == sys.executable or name.startswith("python") and not name.endswith((".py", ".sh"))


def build_child_command(command: list[str], module: str | None, output: Path, keep_trace: str | None,
                        steps: str | None = None, memory: bool = False) -> list[str]:
    """The child's argv, after checking that the workload exists."""
    if module is not None:
        python, workload = sys.executable, ["-m", module, *command]
    elif not command:
        raise RunError(
            "nothing to run: give a command after '--' (e.g. kernelscope run -- python train.py) or -m MODULE"
        )
    elif is_python_command(command[0]):
        python, workload = command[0], command[1:]
        if shutil.which(python) is None and not os.path.isfile(python):
            raise RunError(f"cannot run {python!r}: no such program")
        if not workload:
            raise RunError("give the Python workload to run: a script, -m MODULE or -c CODE")
        if workload[0] in ("-m", "-c"):
            if len(workload) < 2:
                raise RunError(f"python {workload[0]} needs an argument")
        elif workload[0].startswith("-"):
            raise RunError(f"python option {workload[0]!r} is not supported by kernelscope run; use a script, -m or -c")
        elif not os.path.isfile(workload[0]):
            raise RunError(f"cannot run {workload[0]!r}: no such file")
    else:
        raise RunError(
            f"{command[0]!r} is not a Python program: the trace pass runs in-process with the PyTorch "
            "profiler, so it needs a Python workload (python script.py, -m module)")
    opts = ["--output", str(output), "--command", json.dumps(command if module is None else ["-m", module, *command])]
    if keep_trace:
        opts += ["--keep-trace", keep_trace]
    if steps:
        opts += ["--steps", steps]
    if memory:
        opts += ["--memory"]
    return [python, "-c", CHILD_CODE, *opts, "--", *workload]


def run(command: list[str], output: Path, module: str | None = None, keep_trace: str | None = None,
        steps: str | None = None, memory: bool = False, force: bool = True) -> RunResult:
    """Run the workload under the trace pass and write its session to ``output``.

    The child writes into a private file beside ``output``; this process moves the session into place once,
    at the end: without ``force`` only if the name is still free (a file created there while the workload ran
    is never replaced; the session then stays in the private file, named in the error)."""
    from kernelscope.collect.trace.torchrun import is_torchrun, run_torchrun

    if module is None and is_torchrun(command):  # a multi-GPU job: every rank records itself (torchrun.py)
        if steps or memory:
            raise RunError("--steps and --memory are not supported under torchrun yet: profile one process")
        if keep_trace:
            raise RunError("--keep-trace keeps one trace; under torchrun each rank has its own: record them with "
                           "torch.profiler and use kernelscope import instead")
        exit_code, session = run_torchrun(command, output, force=force)
        return RunResult(exit_code=exit_code, session=session, output=output)
    try:
        private = private_output(output)
    except OutputFileError as e:
        raise RunError(str(e)) from None
    try:
        return _run_child(command, output, private, module, keep_trace, steps, memory, force)
    finally:
        if private.exists() and private.stat().st_size == 0:
            private.unlink()  # the child never wrote it


def _run_child(command: list[str], output: Path, private: Path, module: str | None, keep_trace: str | None,
               steps: str | None, memory: bool, force: bool) -> RunResult:
    from kernelscope.collect.trace.recorder import KEEP_TRACE_NO_CLOBBER

    child = build_child_command(command, module, private, keep_trace, steps, memory)
    env = dict(os.environ)
    env[KEEP_TRACE_NO_CLOBBER] = "0" if force else "1"
    pkg_root = str(Path(kernelscope.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # Ctrl-C reaches the child too (same process group); it saves its session
    # and exits, so the parent keeps waiting and then reports what it left.
    try:
        proc = subprocess.Popen(child, env=env)
    except OSError as e:
        raise RunError(f"cannot start {child[0]!r}: {e.strerror}") from None
    interrupted = False
    while True:
        try:
            proc.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
            continue
    rc = proc.returncode
    exit_code = 128 - rc if rc < 0 else rc
    if interrupted and exit_code == 0:  # a workload that catches Ctrl-C itself and exits 0 was still interrupted
        exit_code = 130
    written = private.exists() and private.stat().st_size > 0
    session: Session | None = None
    if written:
        try:
            session = Session.load(private)
        except SessionFileError:
            session = None
    if session is None:
        session = new_session(child[child.index("--") + 1:] if module is None else ["-m", module, *command])
        why = f"killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"exited with code {rc}"
        session.outcome = "collector-failed"
        session.collectors[collector.TRACE] = CollectorStatus(
            "failed", f"the workload process {why} before kernelscope could write its trace; nothing was collected")
    session.exit_code = exit_code
    if interrupted and session.outcome == "complete":
        session.outcome = "interrupted"
    if exit_code != 0 and session.outcome == "complete":
        session.outcome = "workload-failed"
    try:
        session.save(output, force=force)
    except OutputFileError as e:
        raise RunError(f"{e}; the session of this run is kept in {private}") from None
    private.unlink(missing_ok=True)
    return RunResult(exit_code=exit_code, session=session, output=output)


def run_without_trace(command: list[str], output: Path, force: bool = True) -> RunResult:
    """A session for a program the trace pass cannot enter (not Python): the
    counter pass (ncu) will run and measure it."""
    if not command:
        raise RunError("nothing to run: give a command after '--'")
    if shutil.which(command[0]) is None and not os.path.isfile(command[0]):
        raise RunError(f"cannot run {command[0]!r}: no such program")
    session = new_session(list(command))
    session.collectors[collector.TRACE] = CollectorStatus(
        "not-run", "not a Python program: the trace pass runs inside Python (PyTorch profiler); "
                   "the counter pass (ncu) profiles it instead")
    try:
        session.save(output, force=force)
    except OutputFileError as e:
        raise RunError(str(e)) from None
    return RunResult(exit_code=0, session=session, output=output)
