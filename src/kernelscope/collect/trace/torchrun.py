"""`kernelscope run -- torchrun ...`: every rank records itself, the parent joins the ranks.

torchrun (torch.distributed.run) starts the ranks itself, so kernelscope does not start or
coordinate them: it runs the command as given, with rank_hook/ first on PYTHONPATH so each
rank's Python starts the trace pass (rank_record.py) and writes rank-<RANK>.json into a
temporary directory; when torchrun exits, the ranks found there become one session.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import kernelscope
from kernelscope.collect.ranks import RankPart, join_ranks, split_ranks
from kernelscope.collect.trace.api import new_session
from kernelscope.collect.trace.rank_record import RANK_DIR_ENV
from kernelscope.model import CollectorStatus, Session, SessionFileError
from kernelscope.model.files import OutputFileError, private_output

HOOK_DIR = Path(__file__).resolve().parent / "rank_hook"


def is_torchrun(command: list[str]) -> bool:
    if not command:
        return False
    if os.path.basename(command[0]) == "torchrun":
        return True
    return len(command) >= 3 and command[1] == "-m" and command[2] in ("torch.distributed.run",
                                                                       "torch.distributed.launch")


def hook_env() -> dict[str, str]:
    """The environment that puts rank_hook/ (and this kernelscope) first on the ranks' PYTHONPATH."""
    env = dict(os.environ)
    pkg_root = str(Path(kernelscope.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HOOK_DIR), pkg_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    return env


def run_torchrun(command: list[str], output: Path, force: bool = True) -> tuple[int, Session]:
    if shutil.which(command[0]) is None and not os.path.isfile(command[0]):
        from kernelscope.collect.trace.errors import RunError

        raise RunError(f"cannot run {command[0]!r}: no such program")
    rank_dir = Path(tempfile.mkdtemp(prefix="kernelscope-ranks-"))
    env = hook_env()
    env[RANK_DIR_ENV] = str(rank_dir)
    env.pop("KERNELSCOPE_RANK_HOOKED", None)
    try:
        proc = subprocess.Popen(command, env=env)
        while True:
            try:
                proc.wait()
                break
            except KeyboardInterrupt:  # torchrun passes Ctrl-C to its ranks; they write what they have
                continue
        rc = proc.returncode
        exit_code = 128 - rc if rc < 0 else rc
        parts: list[RankPart] = []
        unreadable: list[str] = []
        for f in sorted(rank_dir.glob("rank-*.json")):
            try:
                parts += split_ranks(Session.load(f), f.name)
            except SessionFileError as e:
                unreadable.append(str(e).rstrip("."))
    finally:
        shutil.rmtree(rank_dir, ignore_errors=True)
    if not parts:
        session = new_session(list(command))
        session.outcome = "collector-failed"
        session.collectors["trace"] = CollectorStatus(
            "failed", f"torchrun exited with code {exit_code} and no rank wrote its trace"
            + (f" ({'; '.join(unreadable)})" if unreadable else ""))
    else:
        joined = join_ranks(parts, command=list(command))
        session = joined.session
        if unreadable:
            status = session.collectors["ranks"]
            status.status = "partial"
            status.details["notes"] = list(status.details.get("notes") or []) + unreadable
            status.reason = "; ".join(status.details["notes"])
    session.exit_code = exit_code
    if exit_code != 0 and session.outcome == "complete":
        session.outcome = "workload-failed"
    session.environment["launcher"] = "torchrun (each rank recorded its own trace pass)"
    try:
        session.save(output, force=force)  # without -f only onto a free name, also if a file appeared meanwhile
    except OutputFileError as e:
        from kernelscope.collect.trace.errors import RunError

        kept = private_output(output)
        session.save(kept)  # the joined ranks are not lost: they stay beside the name that was taken
        raise RunError(f"{e}; the session of this run is kept in {kept}") from None
    return exit_code, session
