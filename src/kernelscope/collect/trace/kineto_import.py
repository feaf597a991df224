"""`kernelscope import` of PyTorch profiler / Kineto traces: one per rank, or directories of them
(torch.profiler's tensorboard_trace_handler, vLLM's VLLM_TORCH_PROFILER_DIR, torchrun jobs),
into one session. A trace that cannot be read is left out with one sentence; the others are kept.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelscope.collect.ranks import Joined, NoRankToJoin, RankPart, check_parts, join_ranks
from kernelscope.collect.trace.api import new_session
from kernelscope.collect.trace.kineto import ParsedTrace, TraceFormatError, parse_trace
from kernelscope.collect.trace.kineto_stream import (NotKinetoTrace, StreamedTrace, is_kineto_trace, read_json,  # noqa: F401
                                                     read_trace)
from kernelscope.collect.trace.kineto_dist import rank_info, trace_pid
from kernelscope.model import CollectorStatus, RankInfo, Session
from kernelscope.model.launch_table import LaunchTable

# tensorboard_trace_handler names files "<worker>.<ms>.pt.trace.json[.gz]", worker "<host>_<pid>" by default
_HANDLER_NAME = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json(?:\.gz)?$")


class TraceImportError(Exception):
    """No trace could be imported; the message is one sentence for the user."""


@dataclass
class ImportedTraces:
    joined: Joined
    files: list[Path]
    notes: list[str] = field(default_factory=list)  # files left out, ranks not joined: one sentence each


def trace_files(paths: list[Path]) -> list[Path]:
    """The files to read: each file given, and the .json / .json.gz files of each directory given (sorted)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():  # is_file(): regular files only, a FIFO or device in the directory is passed over
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith((".json", ".json.gz")))
            if not found:
                raise TraceImportError(f"{p} holds no .json or .json.gz trace files")
            out += found
        elif p.exists():
            out.append(p)
        else:
            raise TraceImportError(f"{p}: no such file or directory")
    return out


def part_from_trace(doc: dict[str, Any], path: Path) -> RankPart:
    """The rank part of a whole decoded trace document (the streaming reader's result: part_from_stream)."""
    return _part(parse_trace(doc), doc, trace_pid(doc), path)


def part_from_stream(streamed: StreamedTrace, path: Path) -> RankPart:
    """The rank part of a trace read event by event (kineto_stream.read_trace)."""
    return _part(streamed.parsed, streamed.top, streamed.pid, path)


def _part(parsed: ParsedTrace, top: dict[str, Any], pid: int | None, path: Path) -> RankPart:
    info = rank_info(top, str(path)) or RankInfo(rank=0, world_size=1, source=str(path))
    m = _HANDLER_NAME.match(path.name)
    info.host = m.group("host") if m else None
    info.pid = pid
    device = _main_device(parsed.table)
    info.device_index = device
    s = new_session(["kineto-trace", str(path)])
    s.set_launch_table(parsed.table)  # columns: no Launch object per kernel unless ranks are joined
    s.activities, s.regions = parsed.activities, parsed.regions
    s.time_origin_ns = parsed.time_origin_ns
    s.host_syncs, s.operators = parsed.host_syncs, parsed.operators
    s.device = next((d for d in parsed.devices if d.index == device), parsed.devices[0] if parsed.devices else None)
    if s.device is not None:
        info.device_name = s.device.name
    s.environment.update(parsed.info)
    details = {"kernel_launches": len(parsed.table), "collector": "torch.profiler (Kineto/CUPTI)",
               "imported": str(path), "operators": operators_recorded(parsed)}
    s.collectors["trace"] = (CollectorStatus("partial", "; ".join(parsed.problems), details) if parsed.problems
                             else CollectorStatus("ok", None, details))
    s.collectors["device"] = CollectorStatus(
        "partial" if s.device else "not-run",
        "from the trace's deviceProperties (imported, no CUDA driver query)" if s.device
        else "the trace has no deviceProperties")
    return RankPart(info, s)


def operators_recorded(parsed: ParsedTrace) -> str:
    """What the trace holds of the operators behind its kernels, in words ("... but not ..." when part is missing;
    "no CPU operators ..." when none)."""
    ops = parsed.operators
    if ops is None:
        return ("no CPU operators (record with activities=[CPU, CUDA], record_shapes=True and with_stack=True to "
                "see the operator, input shapes and Python line behind each kernel)")
    missing = ops.missing()
    return "operators, input shapes and Python stacks" if not missing else \
        f"operators but not {' and '.join(missing)}"


def _lacks(parsed: ParsedTrace) -> list[str]:
    recorded = operators_recorded(parsed)
    return [recorded] if recorded.startswith(("no ", "operators but")) else []


def _lacking_note(lacking: list[str], files: int) -> list[str]:
    """One sentence for the import (every trace of a job is usually recorded alike): what the traces lack."""
    if not lacking:
        return []
    which = "the trace records" if files == 1 else f"{len(lacking)} of the {files} traces record"
    return [f"{which} {max(lacking, key=len)}: kernels are shown without them"]


def _main_device(table: LaunchTable) -> int | None:
    """The device most of the rank's kernels ran on (the first seen of equal counts)."""
    counts: dict[int, int] = {}
    for sid, rows in enumerate(table.durations_by_shape()[0]):  # shapes numbered by first launch
        d = table.shapes[sid].device_index
        if d is not None:
            counts[d] = counts.get(d, 0) + len(rows)
    return max(counts, key=counts.__getitem__) if counts else None


def _one_process(part: RankPart, command: list[str]) -> Joined:
    """join_ranks of one part of a one-process trace, with its rank taken off again, as columns: the launches
    stay a table (a million kernels make no million Launch objects). The same session as the per-object
    join (tests/test_kineto_stream.py)."""
    p = part.session
    out = Session(command=list(command), created_utc=p.created_utc, kernelscope_version=p.kernelscope_version,
                  exit_code=p.exit_code, device=p.device, environment=dict(p.environment),
                  artifacts=dict(p.artifacts))
    out.time_origin_ns = p.time_origin_ns + part.info.clock_offset_ns  # one part: its times move by nothing
    out.outcome = p.outcome
    out.set_launch_table(p.launch_table())
    out.activities = sorted(p.activities, key=lambda a: a.start_ns)
    out.regions = list(p.regions)
    out.samples, out.declared_work = list(p.samples), list(p.declared_work)
    out.host_syncs, out.operators = list(p.host_syncs), p.operators  # one part: its times move by nothing
    out.collectors = dict(p.collectors)
    t = p.collectors.get("trace")
    if t is not None and t.status != "ok":
        out.collectors["trace"] = CollectorStatus(t.status, f"rank {part.info.rank}: {t.reason or t.status}",
                                                  t.details)
    return Joined(out, [])


def import_traces(paths: list[Path]) -> ImportedTraces:
    files = trace_files(paths)
    parts: list[RankPart] = []
    notes: list[str] = []
    lacking: list[str] = []  # what each trace that lacks part of the operators lacks
    for f in files:  # rank by rank: each file is read event by event, and only its session part is kept
        try:
            streamed = read_trace(f)
        except NotKinetoTrace:
            notes.append(f"{f} was left out: it is JSON but not a PyTorch profiler trace (no traceEvents list)")
            continue
        except TraceFormatError as e:
            notes.append(f"{f} was left out: {e}")
            continue
        except ValueError as e:
            notes.append(f"{f} was left out: {e}")
            continue
        except OSError as e:
            notes.append(f"{f} was left out: it cannot be read ({e.strerror})")
            continue
        if streamed.damage:
            notes.append(f"{f}: {streamed.damage}")
        lacking += _lacks(streamed.parsed)
        parts.append(part_from_stream(streamed, f))
    notes += _lacking_note(lacking, len(files))
    if not parts:
        raise TraceImportError(notes[0] if len(notes) == 1 else
                               f"none of the {len(files)} files is a readable PyTorch profiler trace ({notes[0]})")
    command = ["kineto-trace", *map(str, files)]
    if len(parts) == 1 and parts[0].info.world_size == 1 and not check_parts(parts)[1]:
        return ImportedTraces(_one_process(parts[0], command), files, notes)
    try:
        joined = join_ranks(parts, command=command, columns=True)  # rank by rank into one table: no Launch objects
    except NoRankToJoin as e:
        raise TraceImportError(str(e)) from None
    if len(joined.session.ranks) == 1 and joined.session.ranks[0].world_size == 1:
        for shape in joined.session.launch_table().shapes:  # one process: a plain one-process session
            shape.rank = None
        for a in joined.session.activities:
            a.rank = None
        for g in joined.session.regions:
            g.rank = None
        joined.session.ranks = []
        joined.session.collectors.pop("ranks", None)
    return ImportedTraces(joined, files, notes + joined.notes)
