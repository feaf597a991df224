"""What a PyTorch profiler trace says about distributed work: the top-level `distributedInfo`
(rank, world size, process groups, NCCL version) and the collective each NCCL kernel runs
(its args `Collective name`, `In msg nelems`, `Out msg nelems`, `Group size`, `dtype`,
`Process Group Name`, and a sequence number where present). Pure JSON in, model objects out.
"""
from __future__ import annotations

import re
from typing import Any

from kernelscope.model import Collective, RankInfo
from kernelscope.model import session_file as schema
from kernelscope.model.schema import Invalid

# NCCL kernel names as NCCL 2.x writes them: ncclDevKernel_AllReduce_Sum_f32_RING_LL,
# ncclKernel_AllGather_RING_LL_Sum_int8_t
_NCCL_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_SEQ_ARGS = ("Seq", "seq", "Sequence number", "sequence_number")  # torch versions name it differently


def is_nccl_kernel(name: str) -> bool:
    return name.startswith(("ncclDevKernel", "ncclKernel"))


def as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    try:
        i = int(v)
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e400 is read as infinity
        return None
    return i if 0 <= i <= 2**63 - 1 else None


def nccl_collective(kernel_name: str, args: dict[str, Any]) -> Collective | None:
    """The collective of an NCCL kernel event; None for any other kernel. The operation comes from the
    `Collective name` arg, or from the kernel's name when the trace has no args (older torch)."""
    if not is_nccl_kernel(kernel_name):
        return None
    name = args.get("Collective name")
    if not isinstance(name, str) or not name:
        m = _NCCL_KERNEL.match(kernel_name)
        name = m.group(1).lower() if m else "nccl"
    pg = args.get("Process Group Name")
    seq = next((as_int(args[k]) for k in _SEQ_ARGS if k in args), None)
    dtype = args.get("dtype")
    return Collective(
        name=name,
        process_group=None if pg is None else str(pg),
        in_nelems=as_int(args.get("In msg nelems")),
        out_nelems=as_int(args.get("Out msg nelems")),
        group_size=as_int(args.get("Group size")) or None,
        dtype=None if dtype is None else str(dtype),
        seq=seq,
    )


def rank_info(doc: dict[str, Any], source: str | None = None) -> RankInfo | None:
    """The rank record of a trace with `distributedInfo`; None for a trace of one process."""
    info = doc.get("distributedInfo")
    if not isinstance(info, dict) or as_int(info.get("rank")) is None:
        return None
    groups = info.get("pg_config")
    nccl = info.get("nccl_version")
    return RankInfo(rank=int(info["rank"]), world_size=as_int(info.get("world_size")) or None,
                    backend=None if info.get("backend") is None else str(info["backend"]),
                    nccl_version=None if nccl is None else str(nccl),
                    process_groups=[g for g in groups if _valid_group(g)] if isinstance(groups, list) else [],
                    source=source)


def _valid_group(group: Any) -> bool:
    """A pg_config entry the session file can hold (a JSON object of finite numbers, within its bounds); one that
    is not (a pg_size of 1e400) is left out, not allowed to make the rank's record unsaveable."""
    if not isinstance(group, dict):
        return False
    problems: list[str] = []
    try:
        schema.rank_info({"rank": 0, "process_groups": [group]}, "", problems)
    except Invalid:
        return False
    return not problems


def trace_pid(doc: dict[str, Any]) -> int | None:
    """The OS process id of the profiled process (its CPU events' pid)."""
    for e in doc.get("traceEvents") or []:
        if isinstance(e, dict) and e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime"):
            return as_int(e.get("pid"))
    return None
