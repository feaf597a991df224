"""Join the processes of one job into one session: per-rank traces (import), per-rank sessions
(`run` under torchrun) and sessions of different hosts (`merge`).

Each part is a Session of one or more ranks whose times count from its own absolute
``time_origin_ns``. Joined, every launch, copy and region carries its rank, and all
times count from the earliest origin, plus the part's clock offset (0 for ranks that
share a clock, e.g. CUPTI on one host). What cannot be joined (a rank twice, another
world size, a rank missing) is said in one sentence each, and the ranks that are
there are kept.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kernelscope.model import CollectorStatus, Metric, RankInfo, Session
from kernelscope.model.launch_table import LaunchDetails, LaunchTable

MISSING_RANKS_NAMED = 16  # ranks without a trace named in the note; the rest are counted


class NoRankToJoin(ValueError):
    """Every part was left out (check_parts); the message is one sentence saying why."""

    def __init__(self, notes: list[str]) -> None:
        out = [n.removesuffix("; left out") for n in notes if n.endswith("; left out")] or notes
        why = out[0] if out else "there are no ranks"
        more = f" (and {len(out) - 1:,} more part{'s' if len(out) > 2 else ''} left out)" if len(out) > 1 else ""
        super().__init__(f"no rank can be joined: {why}{more}")


@dataclass
class RankPart:
    """One rank's data on its own clock: its session (one rank) and its record."""

    info: RankInfo
    session: Session


@dataclass
class Joined:
    session: Session
    notes: list[str] = field(default_factory=list)  # one sentence each, for stderr and the session


def split_ranks(session: Session, source: str | None = None) -> list[RankPart]:
    """The ranks of a session as parts (a one-process session is one part, rank 0 unless told)."""
    infos = session.ranks or [RankInfo(rank=0, world_size=1, source=source)]
    parts = []
    for info in infos:
        mine = (lambda x: x.rank in (None, info.rank)) if len(infos) == 1 else (lambda x: x.rank == info.rank)
        s = Session(command=session.command, created_utc=session.created_utc,
                    kernelscope_version=session.kernelscope_version, exit_code=session.exit_code,
                    outcome=session.outcome, device=session.device, time_origin_ns=session.time_origin_ns,
                    launches=[x for x in session.launches if mine(x)],
                    activities=[a for a in session.activities if mine(a)],
                    regions=[r for r in session.regions if mine(r)],
                    samples=list(session.samples) if info is infos[0] else [],
                    collectors=dict(session.collectors), artifacts=dict(session.artifacts),
                    environment=dict(session.environment), declared_work=list(session.declared_work))
        parts.append(RankPart(RankInfo(**{**info.__dict__, "source": info.source or source}), s))
    return parts


def check_parts(parts: list[RankPart]) -> tuple[list[RankPart], list[str]]:
    """The parts that can be joined, and one sentence for each that cannot or is missing."""
    notes: list[str] = []
    sizes = Counter(p.info.world_size for p in parts if p.info.world_size is not None)
    world = None
    if sizes:
        first = next(p.info.world_size for p in parts if p.info.world_size is not None)
        world = max(sizes, key=lambda w: (sizes[w], w == first))
        if len(sizes) > 1:
            odd = [p for p in parts if p.info.world_size not in (None, world)]
            notes.append("ranks of different world sizes cannot be one job: left out "
                         + ", ".join(f"rank {p.info.rank} of {p.info.source or '?'} (world size {p.info.world_size})"
                                     for p in odd) + f", kept the {sizes[world]} rank(s) of world size {world}")
            parts = [p for p in parts if p.info.world_size in (None, world)]
    kept: dict[int, RankPart] = {}
    for p in parts:
        if p.info.rank in kept:
            notes.append(f"rank {p.info.rank} appears twice ({kept[p.info.rank].info.source or '?'} and "
                         f"{p.info.source or '?'}): these are traces of two different jobs or runs; "
                         f"kept the first, left out {p.info.source or 'the second'}")
            continue
        if world is not None and p.info.rank >= world:
            notes.append(f"{p.info.source or 'a trace'} says rank {p.info.rank}, which is not below its world size "
                         f"{world}; left out")
            continue
        kept[p.info.rank] = p
    if world is not None:
        n_missing = world - len(kept)  # counted, not listed: a file may say world size 10**18
        missing: list[int] = []
        r = 0
        while r < world and len(missing) < MISSING_RANKS_NAMED:
            if r not in kept:
                missing.append(r)
            r += 1
        if n_missing:
            more = f" and {n_missing - len(missing):,} more" if n_missing > len(missing) else ""
            def ranks(rs: list[int], tail: str = "") -> str:  # "rank 1", "ranks 0, 2"
                return f"rank{'s' if len(rs) + bool(tail) > 1 else ''} {', '.join(map(str, rs))}{tail}"

            notes.append(f"{n_missing:,} of {world:,} ranks {'has' if n_missing == 1 else 'have'} no trace "
                         f"({ranks(missing, more)}): showing {ranks(sorted(kept))}; waits are measured among those "
                         "only")
    return [kept[r] for r in sorted(kept)], notes


def _move_part(out: Session, p: RankPart, shift: int, columns: bool) -> None:
    """Part ``p``'s launches (unless joined as ``columns``), copies, regions, samples and rank into ``out``, on
    its clock moved by ``shift``."""
    r = p.info.rank
    if not columns:
        for x in p.session.launches:
            x.rank = r
            if x.start_ns is not None:
                x.start_ns += shift
            out.launches.append(x)
    for a in p.session.activities:
        a.rank, a.start_ns = r, a.start_ns + shift
        out.activities.append(a)
    for g in p.session.regions:
        g.rank, g.cpu_start_ns = r, g.cpu_start_ns + shift
        if g.gpu_start_ns is not None:
            g.gpu_start_ns += shift
        out.regions.append(g)
    if not out.ranks:  # samples carry no rank: the first rank's GPU readings are kept, on the joined clock
        for smp in p.session.samples:
            if smp.t_ns is not None:
                smp.t_ns += shift
        out.samples = list(p.session.samples)
        out.declared_work = list(p.session.declared_work)
    if p.info.device_name is None and p.session.device is not None:
        p.info.device_name, p.info.device_index = p.session.device.name, p.session.device.index
    out.ranks.append(p.info)


def join_ranks(parts: list[RankPart], command: list[str] | None = None, columns: bool = False) -> Joined:
    """One session holding every part's rank, on the earliest part's clock plus each part's offset. With
    ``columns`` the launches are joined as launch tables (no Launch object per launch; the parts' tables are
    read, not changed): the same session as the join of Launch objects."""
    parts, notes = check_parts(parts)
    if not parts:
        raise NoRankToJoin(notes)
    out = Session(command=list(command) if command is not None else parts[0].session.command,
                  created_utc=parts[0].session.created_utc, kernelscope_version=parts[0].session.kernelscope_version,
                  exit_code=parts[0].session.exit_code, device=parts[0].session.device,
                  environment=dict(parts[0].session.environment), artifacts=dict(parts[0].session.artifacts))
    out.time_origin_ns = min(p.session.time_origin_ns + p.info.clock_offset_ns for p in parts)
    outcomes = [p.session.outcome for p in parts if p.session.outcome != "complete"]
    out.outcome = outcomes[0] if outcomes else "complete"
    shifts = [p.session.time_origin_ns + p.info.clock_offset_ns - out.time_origin_ns for p in parts]
    if columns:
        out.set_launch_table(joined_table([(p.session.launch_table(), p.info.rank, shift)
                                           for p, shift in zip(parts, shifts)]))
    for p, shift in zip(parts, shifts):
        _move_part(out, p, shift, columns)
    if not columns:
        out.launches.sort(key=lambda x: (x.start_ns is None, x.start_ns or 0))
    out.activities.sort(key=lambda a: a.start_ns)
    if len(parts) == 1 and shifts[0] == 0:  # one process: its host syncs and operators as they are (correlation
        # ids and host clocks of several processes would collide, so a job of ranks keeps them per rank only)
        out.host_syncs, out.operators = list(parts[0].session.host_syncs), parts[0].session.operators
    trace = [p.session.collectors.get("trace") for p in parts]
    bad = [(p.info.rank, t) for p, t in zip(parts, trace) if t is not None and t.status != "ok"]
    out.collectors = dict(parts[0].session.collectors)
    if bad:
        statuses = {t.status for _, t in bad}
        status = statuses.pop() if len(bad) == len(parts) and len(statuses) == 1 else "partial"
        out.collectors["trace"] = CollectorStatus(
            status,
            "; ".join(f"rank {r}: {t.reason or t.status}" for r, t in bad),
            out.collectors.get("trace", CollectorStatus("ok")).details,
        )
    out.collectors["ranks"] = CollectorStatus("partial" if notes else "ok", "; ".join(notes) or None,
                                              {"ranks": [p.info.rank for p in parts], "notes": list(notes)})
    return Joined(out, notes)


def joined_table(tables: list[tuple[LaunchTable, int | None, int]]) -> LaunchTable:
    """The launches of (table, rank, time shift in ns) parts as one table: every launch of a part given its rank
    and its start moved by the shift, launches by start (those without one last), ties in part order. The table
    LaunchTable.from_launches gives for those launches, read column-wise: a launch's shape and the values of its
    shape's varying metrics say what it shares with the others."""
    starts: list[int | None] = []
    shape_of: list[int] = []
    row_of: list[int] = []  # the launch's row in its own table
    first_shape: list[int] = []  # per part: its shapes' number in the joined list of shapes
    shapes: list[tuple[Any, tuple[str, ...], LaunchTable]] = []  # (base, varying metric names, table)
    for t, rank, shift in tables:
        first_shape.append(len(shapes))
        off = len(shapes)
        for s in t.shapes:
            base = (s.kernel, s.grid, s.block, s.stream, s.device_index, tuple(s.regions), rank)
            shapes.append((base, tuple(n for n in s.metric_names if n in s.varying), t))
        starts += [None if st is None else st + shift for st in t.start_ns]
        shape_of += [sid + off for sid in t.shape]
        row_of += range(len(t))
    n = len(starts)
    if None in starts:
        order = sorted(range(n), key=lambda i: (starts[i] is None, starts[i] or 0))
    elif all(a <= b for a, b in zip(starts, starts[1:])):
        order = range(n)
    else:
        order = sorted(range(n), key=starts.__getitem__)
    part_of_shape: list[int] = []
    for k, (t, _, _) in enumerate(tables):
        part_of_shape += [k] * len(t.shapes)
    raw_ids: dict[Any, int] = {}
    raw: list[tuple[Any, tuple[tuple[str, Metric], ...]]] = []
    raw_of: list[int] = []
    details: dict[int, LaunchDetails] = {}
    for pos, i in enumerate(order):
        g = shape_of[i]
        base, varying, t = shapes[g]
        row = row_of[i]
        key: Any = (g, tuple(t.metric_values[name][row] for name in varying)) if varying else g
        try:
            r = raw_ids.get(key)
        except TypeError:  # a varying value that is a list: compared by its text
            key = (g, repr(key[1]))
            r = raw_ids.get(key)
        if r is None:
            r = raw_ids[key] = len(raw)
            s = t.shapes[g - first_shape[part_of_shape[g]]]
            raw.append((base, tuple((name, s.metrics[name] if name not in s.varying else
                                     Metric(t.metric_values[name][row], *s.varying[name]))
                                    for name in s.metric_names)))
        raw_of.append(r)
        d = t.details.get(row) if t.details else None
        if d is not None and (d.counters or d.findings or d.block_records is not None or d.scopes is not None
                              or d.collective or d.source_lines is not None):  # as from_launches keeps them
            details[pos] = LaunchDetails(dict(d.counters), list(d.findings), d.block_records, d.scopes, d.collective,
                                         d.source_lines)
    durations = [t.duration_ns for t, _, _ in tables]
    corrs = [t.correlation_id for t, _, _ in tables]
    part_of_row: list[int] = []
    for k, (t, _, _) in enumerate(tables):
        part_of_row += [k] * len(t)
    return LaunchTable.from_columns(raw, raw_of, [starts[i] for i in order],
                                    [durations[part_of_row[i]][row_of[i]] for i in order],
                                    [corrs[part_of_row[i]][row_of[i]] for i in order], details)
