"""The collectives of a multi-GPU session, matched across ranks: who arrived when, who waited,
the straggler of each and of the run, and bandwidth as nccl-tests define it.

A collective is the same operation on every rank of its process group; NCCL requires each
group's collectives to be issued in the same order everywhere, so the k-th NCCL kernel of a
group on one rank is the k-th on every other (the sequence number is used where the trace
has one). Arrival = the kernel's start on that rank (the rank is ready to communicate);
all ranks leave together once the last has arrived, so

    wait_ns(rank) = last rank's arrival - this rank's arrival                 (0 for the straggler)

Bandwidth (nccl-tests, doc/PERFORMANCE.md):
    algbw = bytes / transfer time,   transfer time = latest end - last arrival (the wait left out)
    busbw = algbw * factor:  allreduce 2(n-1)/n;  allgather, reducescatter, alltoall (n-1)/n;
                             broadcast, reduce, send/recv 1
with bytes the larger of the input and output message (nelems x element size): the whole
gathered buffer for allgather, the whole input for reducescatter, as nccl-tests count them.

The straggler of the run is the rank whose lateness cost the others the most wait, counted over the
steady collectives: the first collective of each name in each process group is warm-up and left out
(WARMUP_RULE) when that collective ran again. Why, measured: in the 2x H200 `kernelscope run -- torchrun`
session (tests/data/ranks) rank 0 arrives 43.6 ms late once, at the first all-reduce (its first step's
start-up), against rank 1's planted 3.0 ms at every other step; counting that one start-up made rank 0
"the straggler" (46.8 ms caused vs 11.9 ms), counting steady collectives names rank 1 (11.9 ms vs 1.7 ms).
The warm-up collectives keep their rows, waits and per-collective stragglers.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from kernelscope.model import Session
from kernelscope.model.ranks import Collective

WAIT_FORMULA = "last rank's arrival - this rank's arrival (arrival = the NCCL kernel's start)"
ALGBW_FORMULA = "bytes / (latest end - last arrival)"
WARMUP_RULE = "the first collective of each name in each process group (when it ran again) is warm-up: " \
              "it carries the first step's start-up; left out of the run's straggler"
BUSBW_FORMULA = "algbw * nccl-tests factor (allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; " \
                "broadcast, reduce, send/recv 1)"

# Element sizes of the profiler's `dtype` arg (torch scalar type names).
DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
               "long": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "int16": 2, "char": 1, "int8": 1,
               "byte": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
               "float8_e5m2fnuz": 1, "complexfloat": 8, "complexdouble": 16}


def operation(name: str) -> str:
    """The nccl-tests operation of a collective name as torch writes it (all_reduce, _allgather_base, ...)."""
    n = name.lower().replace("_", "").replace(" ", "")
    for op in ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "barrier"):
        if op in n:
            return "allreduce" if op == "barrier" else op  # a barrier is an all-reduce of one element
    if "reduce" in n:
        return "reduce"
    if "send" in n or "recv" in n:
        return "sendrecv"
    return n


def busbw_factor(op: str, n: int) -> float | None:
    """nccl-tests' bus bandwidth factor for ``n`` ranks; None for an operation it does not define."""
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    return None


@dataclass(frozen=True)
class RankTiming:
    rank: int
    start_ns: int
    end_ns: int
    wait_ns: int
    kernel: str


@dataclass(frozen=True)
class CollectiveRow:
    index: int  # occurrence in its process group, 0 first (the seq number where the trace has one)
    name: str  # as the trace names it
    operation: str  # nccl-tests' name
    process_group: str
    bytes: int | None
    bytes_missing_reason: str | None
    ranks: tuple[RankTiming, ...]  # in rank order
    straggler_rank: int | None  # the last to arrive; None with one rank
    first_rank: int
    spread_ns: int  # last arrival - first arrival: the longest wait
    transfer_ns: int  # latest end - last arrival
    algbw_gb_s: float | None
    busbw_gb_s: float | None
    bandwidth_missing_reason: str | None

    @property
    def start_ns(self) -> int:
        return min(t.start_ns for t in self.ranks)


@dataclass(frozen=True)
class Straggler:
    rank: int
    collectives: int  # how many steady (not warm-up) collectives it arrived last at (with a spread > 0)
    caused_wait_ns: int  # the sum of those collectives' spreads
    worst: CollectiveRow | None  # of those
    sentence: str  # its worst collective, said the methodology's way (straggler_sentence)
    warmup_collectives: int = 0  # warm-up collectives it arrived last at, left out of the counts above
    warmup_wait_ns: int = 0  # the sum of their spreads


@dataclass(frozen=True)
class CollectiveAnalysis:
    rows: tuple[CollectiveRow, ...]  # in time order per process group (groups in order of first use)
    ranks: tuple[int, ...]
    stragglers: tuple[Straggler, ...]  # most wait caused first
    problems: tuple[str, ...]  # collectives that could not be matched, one sentence each
    missing_reason: str | None = None

    @property
    def run_straggler(self) -> Straggler | None:
        return self.stragglers[0] if self.stragglers and self.stragglers[0].caused_wait_ns > 0 else None


class NcclKernel(NamedTuple):
    """One NCCL kernel as the collectives analysis reads it: a row of the launch columns and its collective."""

    kernel: str
    start_ns: int
    duration_ns: int
    rank: int | None
    collective: Collective


def _bytes(x: NcclKernel) -> tuple[int | None, str | None]:
    c = x.collective
    assert c is not None
    nelems = max((n for n in (c.in_nelems, c.out_nelems) if n is not None), default=None)
    if nelems is None:
        return None, "the trace has no message size (In/Out msg nelems) for this kernel"
    size = DTYPE_BYTES.get((c.dtype or "").lower().replace("torch.", ""))
    if size is None:
        return None, f"element size of dtype {c.dtype!r} unknown" if c.dtype else "the trace has no dtype"
    return nelems * size, None


def collective_launches(session: Session) -> dict[tuple[str, int], list[NcclKernel]]:
    """NCCL kernels with a start time by (process group, rank), in start order: read from the launch columns
    (NCCL kernels carry their collective as a launch detail), without a Launch object per kernel."""
    table = session.launch_table()
    shapes, shape_of, start, duration = table.shapes, table.shape, table.start_ns, table.duration_ns
    out: dict[tuple[str, int], list[NcclKernel]] = defaultdict(list)
    for i in sorted(table.details):
        c = table.details[i].collective
        if c is not None and start[i] is not None:
            s = shapes[shape_of[i]]
            out[(c.process_group or "?", s.rank or 0)].append(NcclKernel(s.kernel, start[i], duration[i], s.rank, c))
    for v in out.values():
        v.sort(key=lambda x: x.start_ns or 0)
    return out


def analyze_collectives(session: Session) -> CollectiveAnalysis:
    ranks = tuple(sorted(r.rank for r in session.ranks)) or (0,)
    by_group = collective_launches(session)
    if not by_group:
        return CollectiveAnalysis((), ranks, (), (), "no NCCL kernels in this session")
    groups: dict[str, dict[int, list[NcclKernel]]] = defaultdict(dict)
    for (pg, rank), xs in by_group.items():
        groups[pg][rank] = xs
    rows: list[CollectiveRow] = []
    problems: list[str] = []
    order = sorted(groups, key=lambda pg: min(xs[0].start_ns or 0 for xs in groups[pg].values()))
    for pg in order:
        per_rank = groups[pg]
        keyed = _keyed(per_rank)
        counts = {r: len(v) for r, v in per_rank.items()}
        if len(set(counts.values())) > 1:
            problems.append(f"process group {pg}: ranks ran different numbers of collectives ("
                            + ", ".join(f"rank {r}: {n}" for r, n in sorted(counts.items()))
                            + "); matched those every rank has")
        common = set.intersection(*(set(k) for k in keyed.values()))
        for index in sorted(common):
            launches = {r: keyed[r][index] for r in sorted(keyed)}
            names = {x.collective.name for x in launches.values() if x.collective}
            if len(names) > 1:
                problems.append(f"process group {pg} collective #{index}: ranks ran different operations "
                                f"({', '.join(sorted(names))}); left out")
                continue
            rows.append(_row(pg, index, launches))
    return CollectiveAnalysis(tuple(rows), ranks, _stragglers(rows), tuple(problems))


def _keyed(per_rank: dict[int, list[NcclKernel]]) -> dict[int, dict[int, NcclKernel]]:
    """Each rank's kernels of one group by sequence number when every kernel has a distinct one, else by order."""
    use_seq = all(x.collective and x.collective.seq is not None for xs in per_rank.values() for x in xs) and all(
        len({x.collective.seq for x in xs}) == len(xs) for xs in per_rank.values())  # type: ignore[union-attr]
    return {r: {(x.collective.seq if use_seq else i): x for i, x in enumerate(xs)}  # type: ignore[union-attr]
            for r, xs in per_rank.items()}


def _row(pg: str, index: int, launches: dict[int, NcclKernel]) -> CollectiveRow:
    first = next(iter(launches.values()))
    c = first.collective
    assert c is not None
    last_arrival = max(x.start_ns or 0 for x in launches.values())
    first_arrival = min(x.start_ns or 0 for x in launches.values())
    timings = tuple(RankTiming(r, x.start_ns or 0, (x.start_ns or 0) + x.duration_ns, last_arrival - (x.start_ns or 0),
                               x.kernel) for r, x in launches.items())
    straggler = max(timings, key=lambda t: (t.start_ns, t.rank)).rank if len(timings) > 1 else None
    first_rank = min(timings, key=lambda t: (t.start_ns, t.rank)).rank
    transfer = max(t.end_ns for t in timings) - last_arrival
    nbytes, why = _bytes(first)
    op = operation(c.name)
    n = c.group_size or len(launches)
    factor = busbw_factor(op, n)
    algbw = busbw = None
    bw_why = why
    if nbytes is not None:
        if transfer <= 0:
            bw_why = "the transfer time (latest end - last arrival) is not positive"
        else:
            algbw = nbytes / transfer  # bytes per ns = GB/s
            busbw = None if factor is None else algbw * factor
            if factor is None:
                bw_why = f"nccl-tests define no bus bandwidth for {c.name!r}"
    return CollectiveRow(index=index, name=c.name, operation=op, process_group=pg, bytes=nbytes,
                         bytes_missing_reason=why, ranks=timings, straggler_rank=straggler, first_rank=first_rank,
                         spread_ns=last_arrival - first_arrival, transfer_ns=transfer, algbw_gb_s=algbw,
                         busbw_gb_s=busbw, bandwidth_missing_reason=bw_why if busbw is None else None)


def warmup_rows(rows: list[CollectiveRow] | tuple[CollectiveRow, ...]) -> set[tuple[str, int]]:
    """(process group, index) of the warm-up collectives (WARMUP_RULE): the first of each name in each group
    that has more than one."""
    by_name: dict[tuple[str, str], list[CollectiveRow]] = defaultdict(list)
    for row in rows:
        by_name[(row.process_group, row.name)].append(row)
    return {(v[0].process_group, v[0].index) for v in (sorted(v, key=lambda x: x.start_ns) for v in by_name.values())
            if len(v) > 1}


def _stragglers(rows: list[CollectiveRow]) -> tuple[Straggler, ...]:
    warmup = warmup_rows(rows)
    caused: dict[int, list[CollectiveRow]] = defaultdict(list)
    early: dict[int, list[CollectiveRow]] = defaultdict(list)
    for row in rows:
        if row.straggler_rank is not None and row.spread_ns > 0:
            (early if (row.process_group, row.index) in warmup else caused)[row.straggler_rank].append(row)
    out = []
    for r in set(caused) | set(early):
        v, w = caused.get(r, []), early.get(r, [])
        worst = max(v, key=lambda x: x.spread_ns) if v else None
        out.append(Straggler(r, len(v), sum(x.spread_ns for x in v), worst,
                             straggler_sentence(worst) if worst else "late only at warm-up collectives",
                             len(w), sum(x.spread_ns for x in w)))
    return tuple(sorted(out, key=lambda s: (-s.caused_wait_ns, -s.warmup_wait_ns, s.rank)))


def _wait(ns: float) -> str:
    """A wait in the unit that shows it: 3.60 ms, 1.41 µs, 800 ns (a 1.41 µs wait is not "0.00 ms")."""
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def straggler_sentence(row: CollectiveRow) -> str:
    """'rank 1 arrives 3.6 ms after rank 0 at allreduce #2 (group 0); rank 0 waits'."""
    waiting = [t.rank for t in row.ranks if t.wait_ns > 0 and t.rank != row.straggler_rank]
    who = f"rank{'s' if len(waiting) > 1 else ''} " + ", ".join(map(str, waiting)) if waiting else "no rank"
    return (f"rank {row.straggler_rank} arrives {_wait(row.spread_ns)} after rank {row.first_rank} at "
            f"{row.name} #{row.index} (group {row.process_group}); {who} wait{'s' if len(waiting) == 1 else ''}")
