"""The trace pass inside one rank of a torchrun job (started by rank_hook/sitecustomize.py).

Each rank records its own trace with the PyTorch profiler and, when the process exits,
writes a one-rank session (rank, local rank, world size, host and device from torchrun's
environment) into $KERNELSCOPE_RANK_DIR as rank-<RANK>.json; the `run` parent joins them.
"""
from __future__ import annotations

import atexit
import os
import socket
import sys
from pathlib import Path

RANK_DIR_ENV = "KERNELSCOPE_RANK_DIR"
HOOKED_ENV = "KERNELSCOPE_RANK_HOOKED"  # set in the rank: its own child processes are not ranks


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def start_rank_trace() -> None:
    from kernelscope.collect.trace.api import new_session
    from kernelscope.collect.trace.recorder import TraceRecorder

    os.environ[HOOKED_ENV] = str(os.getpid())
    rank = _env_int("RANK")
    local = _env_int("LOCAL_RANK")
    try:  # the rank's own GPU before the profiler starts, so no rank makes a context on GPU 0 for nothing
        import torch

        if local is not None and torch.cuda.is_available() and local < torch.cuda.device_count():
            torch.cuda.set_device(local)
    except ImportError:
        pass
    session = new_session([sys.executable, *sys.argv])
    recorder = TraceRecorder(session)
    recorder.start()
    out = Path(os.environ[RANK_DIR_ENV]) / f"rank-{rank}.json"
    # sys.path as it is now, while site starts the process: before python puts the script's folder first
    atexit.register(_finish, recorder, session, out, rank, local, list(sys.path))


def _finish(recorder, session, out: Path, rank: int | None, local: int | None, own_path: list[str]) -> None:
    """Write the rank's session at exit, importing with the path of the process start (not the workload's
    folder first), then give the workload its path back for the exit handlers that follow."""
    workload_path, sys.path[:] = list(sys.path), own_path
    try:
        _write(recorder, session, out, rank, local)
    finally:
        sys.path[:] = workload_path


def _write(recorder, session, out: Path, rank: int | None, local: int | None) -> None:
    from kernelscope.model import RankInfo

    try:
        recorder.stop()
    finally:
        nccl = None
        try:
            import torch

            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:  # no NCCL in this torch: the version is left N/A
            pass
        d = session.device
        session.ranks = [RankInfo(rank=rank or 0, world_size=_env_int("WORLD_SIZE"), local_rank=local,
                                  host=socket.gethostname(), device_index=None if d is None else d.index,
                                  device_name=None if d is None else d.name, pid=os.getpid(), nccl_version=nccl,
                                  backend=None, source=f"rank {rank} (kernelscope run)")]
        session.save(out)
