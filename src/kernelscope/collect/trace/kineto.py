"""Parse a PyTorch profiler (Kineto) Chrome trace into model objects.

Pure JSON in, model objects out, so it is tested on traces recorded on a real
GPU without one. Kineto writes times in microseconds with nanosecond decimals.
"""
from __future__ import annotations

import functools
import math
import operator
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

from kernelscope.collect.trace.kineto_dist import nccl_collective
from kernelscope.collect.fields import KINETO_DEVICE_PROPERTIES, KINETO_KERNEL_FIELDS, KINETO_MISSING_FIELDS
from kernelscope.collect.trace.host_syncs import host_syncs
from kernelscope.collect.trace.kineto_ops import OperatorEvents, link_operators
from kernelscope.model import Activity, Device, HostSync, Launch, Metric, Region, attribute
from kernelscope.model.operators import Operators
from kernelscope.model import session_file as schema
from kernelscope.model.launch_table import LaunchDetails, LaunchTable
from kernelscope.model.schema import Invalid
from kernelscope.model.session_file import decode_launches, encode_launches

_LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}


@dataclass
class ParsedTrace:
    table: LaunchTable = field(default_factory=LaunchTable)  # the kernel launches, column-wise, by start time
    activities: list[Activity] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    host_syncs: list[HostSync] = field(default_factory=list)  # calls that blocked the host (host_syncs.py)
    time_origin_ns: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # events left out as malformed, one line per kind
    operators: Operators | None = None  # the aten ops behind launches and syncs (kineto_ops.py); None: no cpu_op

    @property
    def launches(self) -> list[Launch]:
        """The launches as objects, built from the table when first asked (a run's session keeps the table)."""
        got = self.__dict__.get("_launches")
        if got is None:
            got = self.__dict__["_launches"] = self.table.launches()
        return got


_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError)


class TraceFormatError(ValueError):
    """The document is not a Kineto trace this parser understands."""


MAX_TIME_NS = 2 ** 62  # a time or duration past this many ns (146 years) is out of range: any two such times, and
# their difference, fit the session's int64 ns


_MAX_TIME_US = MAX_TIME_NS / 1000


def _is_time(v: Any) -> bool:
    """A number of µs (not a bool) whose ns are within MAX_TIME_NS: compared before any conversion (an int of
    any size, infinity and NaN are simply out of range)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and -_MAX_TIME_US <= v <= _MAX_TIME_US


def _ns(us: float) -> int:
    """µs to whole ns; OverflowError (the event is malformed) for a value out of range, ValueError / TypeError
    for one that is not a number."""
    if not _is_time(us):
        v = float(us)  # ValueError / TypeError for what is not a number, OverflowError for an int past a float
        if not -_MAX_TIME_US <= v <= _MAX_TIME_US:
            raise OverflowError("a time out of range")
    return int(round(float(us) * 1000.0))


def base_time_ns(value: Any, bad: list[str]) -> int:
    """The trace's ``baseTimeNanoseconds`` (0 when absent); one out of range or not a number is left out as 0 and
    named in ``bad``."""
    if value is None or value == 0:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -MAX_TIME_NS <= value <= MAX_TIME_NS:
        bad.append("baseTimeNanoseconds")
        return 0
    return int(value)


def parse_trace(doc: dict[str, Any]) -> ParsedTrace:
    """Launches, copies, regions and devices of a Kineto trace. A malformed event is left out and counted in
    ``problems``; what is kept passes the session schema, so a damaged trace never makes a damaged session."""
    return checked_parse(lambda: _parse(doc))


def checked_parse(build: Callable[[], ParsedTrace]) -> ParsedTrace:
    """``build()``'s parse with what fails the session schema left out and counted in ``problems`` (the
    whole-document parser above and the streaming reader, kineto_stream.py, share it)."""
    try:
        out = build()
    except TraceFormatError:
        raise
    except _MALFORMED as e:
        raise TraceFormatError(f"a malformed PyTorch profiler trace ({type(e).__name__}: {e})") from None
    skipped: Counter[str] = Counter(out.problems)
    out.problems = []
    if len(out.table) and not _launches_valid(out.table):  # else every launch passed, checked column-wise
        every = out.table.launches()
        kept_launches = [x for x in every if _valid(schema.launch, x.to_dict())]
        skipped["kernel"] += len(every) - len(kept_launches)
        out.table = LaunchTable.from_launches(kept_launches)
    for kind, items, spec in (("memcpy/memset", out.activities, schema.activity),
                              ("annotation", out.regions, schema.region),
                              ("synchronize", out.host_syncs, schema.host_sync)):
        kept = [x for x in items if _valid(spec, x.to_dict())]
        skipped[kind] += len(items) - len(kept)
        items[:] = kept
    out.devices = [d for d in out.devices if _valid(schema.device, d.to_dict())]
    out.problems = [f"{n:,} malformed {kind} event(s) left out" for kind, n in sorted(skipped.items()) if n]
    return out


def _launches_valid(table: LaunchTable) -> bool:
    """Whether every launch passes the session schema, checked as the session file will be read (shapes and
    columns, model/session_file.py): the same checks as schema.launch per launch, at column speed."""
    problems: list[str] = []
    try:
        decode_launches(encode_launches(table), problems)
    except Invalid:
        return False
    return not problems


def _valid(spec: Any, d: dict[str, Any]) -> bool:
    try:
        spec(d, "", [])
    except Invalid:
        return False
    return True


def _parse(doc: dict[str, Any]) -> ParsedTrace:
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError("not a PyTorch profiler trace: no traceEvents list")
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    bad: list[str] = []
    base_ns = base_time_ns(doc.get("baseTimeNanoseconds"), bad)
    origin_us = min((float(e["ts"]) for e in events if _is_time(e.get("ts")) and e.get("cat") != "Trace"),
                    default=0.0)  # events with a malformed time are left out below, not allowed to move the origin
    origin_ns = _ns(origin_us)

    launch_site, gpu_annotation_by_ext = _launch_sites_and_gpu_annotations(events)
    cpu_annotations: dict[tuple[Any, Any], list[tuple[int, int, str]]] = defaultdict(list)
    out = ParsedTrace(time_origin_ns=base_ns + origin_ns)
    for e in events:
        if e.get("cat") != "user_annotation":
            continue
        try:
            _region(e, origin_ns, out, cpu_annotations, gpu_annotation_by_ext)
        except _MALFORMED:
            bad.append("annotation")
    for spans in cpu_annotations.values():
        spans.sort()
    regions_of = _enclosing_regions(launch_site, cpu_annotations)

    def enclosing(corr: Any) -> list[str]:
        try:
            return list(regions_of.get(int(corr), ())) if corr is not None else []
        except (TypeError, ValueError, OverflowError):
            return []

    _add_kernels_and_copies(events, origin_ns, enclosing, out, bad)
    out.devices = []
    for p in doc.get("deviceProperties") or []:
        try:
            out.devices.append(_device(p))
        except _MALFORMED:
            bad.append("device")
    out.host_syncs, n_bad = host_syncs(events, origin_ns)
    bad += ["synchronize"] * n_bad
    ops = OperatorEvents()
    for e in events:
        if e.get("cat") in ("cpu_op", "python_function"):
            ops.add(e)
        elif e.get("cat") in _LAUNCH_CATEGORIES:
            ops.runtime_call(e)
    out.operators = link_operators(ops, launch_site.items(), set(out.table.correlation_id),
                                   (e for e in events if e.get("cat") in _LAUNCH_CATEGORIES),
                                   {h.cpu_start_ns for h in out.host_syncs}, origin_ns)
    out.info = {k: doc[k] for k in ("cuda_driver_version", "cuda_runtime_version", "cupti_version") if k in doc}
    out.problems = bad
    return out


def _launch_sites_and_gpu_annotations(
        events: list[dict[str, Any]]) -> tuple[dict[int, tuple[Any, Any, int]], dict[Any, dict[str, Any]]]:
    """correlation id -> (pid, tid, ts_ns) of each launch call, and External id -> the GPU span of an annotation."""
    launch_site: dict[int, tuple[Any, Any, int]] = {}
    gpu_annotation_by_ext: dict[Any, dict[str, Any]] = {}
    for e in events:
        cat = e.get("cat")
        try:
            if cat in _LAUNCH_CATEGORIES:
                corr = (e.get("args") or {}).get("correlation")
                if corr is not None:
                    launch_site[int(corr)] = (e.get("pid"), e.get("tid"), _ns(e["ts"]))
            elif cat == "gpu_user_annotation":
                ext = (e.get("args") or {}).get("External id")
                if ext is not None:
                    gpu_annotation_by_ext.setdefault(ext, e)
        except _MALFORMED:  # a launch site or GPU span that cannot be used: its kernel just has no region
            continue
    return launch_site, gpu_annotation_by_ext


def _add_kernels_and_copies(events: list[dict[str, Any]], origin_ns: int, enclosing: Callable[[Any], list[str]],
                            out: ParsedTrace, bad: list[str]) -> None:
    """Kernel launches (as columns, in start order) and memcpy/memset activities into ``out``; what cannot be
    read is named in ``bad``."""
    rows = _KernelRows()
    for e in events:
        cat = e.get("cat")
        try:
            args = e.get("args") or {}
            if cat == "kernel":
                rows.add(e, args)
            elif cat in ("gpu_memcpy", "gpu_memset"):
                out.activities.append(Activity(
                    kind=cat[4:], name=str(e.get("name")), start_ns=_ns(e["ts"]) - origin_ns,
                    duration_ns=_ns(e.get("dur", 0)), bytes=args.get("bytes"), stream=args.get("stream"),
                ))
        except _MALFORMED:
            bad.append("kernel" if cat == "kernel" else "memcpy/memset")
    out.table = rows.table(origin_ns, lambda corr: tuple(enclosing(corr)))


_FIELD_NAMES = tuple(f.raw_name for f in KINETO_KERNEL_FIELDS)
_field_values = operator.itemgetter(*_FIELD_NAMES)
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def _append(col: Any, v: Any) -> Any:
    """``v`` appended to a column kept as an int64 array while every value is one (8 bytes a launch, no
    object); a value that is not becomes a list of the same values. Returns the column."""
    if type(col) is array:
        if type(v) is int and _INT64[0] <= v <= _INT64[1]:
            col.append(v)
            return col
        col = col.tolist()
    col.append(v)
    return col


class _KernelRows:
    """Kernel events as launch columns, added one at a time in trace order: what launches of one configuration
    share (name, grid, block, stream, device, the metrics of the same arg values) is built once and looked up by
    the event's raw values, so a million kernels make no million Launch objects. The time origin and each
    launch's regions are known only once every event is seen: rows keep the launch's own time and correlation
    id, and ``table`` applies both."""

    def __init__(self) -> None:
        self.raw_ids: dict[Any, int] = {}
        self.raw: list[tuple[Any, tuple[tuple[str, Metric], ...]]] = []  # base without regions, metric items
        self.raw_of: Any = array("q")
        self.start: Any = array("q")  # ns on the trace's clock (the origin is taken off in table())
        self.dur: Any = array("q")
        self.corr: Any = array("q")  # a list once a value is not an int
        self.collective: dict[int, Any] = {}  # row -> the NCCL collective it runs
        self.metrics: dict[Any, tuple[tuple[str, Metric], ...]] = {}  # by the event's raw field values
        self.dims: dict[Any, tuple[int, int, int]] = {}  # grid / block as the trace gives it -> ints

    def __len__(self) -> int:
        return len(self.raw_of)

    def _dim(self, d: Any) -> tuple[int, int, int]:
        if type(d) is list and len(d) == 3:
            try:
                key = (d[0], d[1], d[2], type(d[0]), type(d[1]), type(d[2]))
                got = self.dims.get(key)
            except TypeError:  # an unhashable element: converted (and refused) below
                key, got = None, None
            if got is None:
                got = (int(d[0]), int(d[1]), int(d[2]))
                if key is not None:
                    self.dims[key] = got
            return got
        return (int(d[0]), int(d[1]), int(d[2]))

    def add(self, e: dict[str, Any], args: dict[str, Any]) -> None:
        """One kernel event; raises as Launch building would (a malformed value: _MALFORMED), in the same order,
        before anything is kept. A correlation id that is not finite is malformed (checked before conversion)."""
        corr = args.get("correlation")
        if type(corr) is float and not math.isfinite(corr):
            raise OverflowError("the correlation id is not a finite number")
        try:
            values = _field_values(args) if type(args) is dict else tuple(args.get(n) for n in _FIELD_NAMES)
        except KeyError:
            values = tuple(args.get(n) for n in _FIELD_NAMES)
        try:
            hash(values)
            vkey: Any = values
        except TypeError:  # an unhashable value (a list): compared by its text
            vkey = repr(values)
        metrics = self.metrics.get(vkey)
        if metrics is None:
            metrics = self.metrics[vkey] = tuple(_metrics(args).items())
        try:
            grid, block = args["grid"], args["block"]
        except KeyError:
            raise TraceFormatError(f"kernel event {e.get('name')!r} has no grid/block") from None
        name = e.get("name")
        if type(name) is not str:
            name = str(name)
        base = (name, self._dim(grid), self._dim(block), args.get("stream"), args.get("device"))
        start, dur = _ns(e["ts"]), _ns(e.get("dur", 0))
        collective = nccl_collective(name, args) if name.startswith("nccl") else None
        key = (base, vkey)
        r = self.raw_ids.get(key)
        if r is None:
            r = self.raw_ids[key] = len(self.raw)
            self.raw.append((base, metrics))
        if collective is not None:
            self.collective[len(self.raw_of)] = collective
        self.raw_of.append(r)
        try:
            self.start.append(start)
            self.dur.append(dur)
        except (TypeError, OverflowError):  # past int64: kept, in a list (the session check says what it is)
            if len(self.start) == len(self.raw_of):
                self.start.pop()
            self.start, self.dur = _append(self.start, start), _append(self.dur, dur)
        if type(corr) is int and type(self.corr) is array and _INT64[0] <= corr <= _INT64[1]:
            self.corr.append(corr)
        else:
            self.corr = _append(self.corr, corr)

    def table(self, origin_ns: int, regions_of: Callable[[Any], tuple[str, ...]]) -> LaunchTable:
        """The launch table: starts from ``origin_ns``, each launch with the regions ``regions_of`` gives for its
        correlation id; launches by start, ties in trace order; shapes numbered by first launch."""
        n = len(self.raw_of)
        ids: dict[tuple[int, tuple[str, ...]], int] = {}
        raw: list[tuple[Any, tuple[tuple[str, Metric], ...]]] = []
        raw_of: list[int] = []
        for r0, corr in zip(self.raw_of, self.corr):
            key = (r0, regions_of(corr))
            r = ids.get(key)
            if r is None:
                r = ids[key] = len(raw)
                base, metrics = self.raw[r0]
                raw.append((base + (key[1], None), metrics))
            raw_of.append(r)
        self.raw_of = array("q")
        start = [t - origin_ns for t in self.start]
        self.start = array("q")
        order: Any = range(n)
        if not all(a <= b for a, b in zip(start, start[1:])):  # by start, ties in trace order
            order = sorted(range(n), key=start.__getitem__)
        pos = {row: k for k, row in enumerate(order)} if self.collective else {}
        details = {pos[row]: LaunchDetails(collective=c) for row, c in sorted(self.collective.items())}
        same: dict[int, int] = {}  # durations repeat (ns of a few kernels): one int object per value
        if isinstance(order, range):
            dur, corr = [same.setdefault(d, d) for d in self.dur], list(self.corr)
        else:  # shapes numbered by first launch in start order, as from_launches does
            raw_of = [raw_of[k] for k in order]
            start = [start[k] for k in order]
            dur, corr = [same.setdefault(self.dur[k], self.dur[k]) for k in order], [self.corr[k] for k in order]
            new_id: dict[int, int] = {}
            for r in raw_of:
                if r not in new_id:
                    new_id[r] = len(new_id)
            raw = [raw[old] for old in new_id]
            raw_of = [new_id[r] for r in raw_of]
        self.dur, self.corr = array("q"), array("q")
        return LaunchTable.from_columns(raw, raw_of, start, dur, corr, dict(sorted(details.items())))


class LaunchSites(Protocol):
    def items(self) -> Iterable[tuple[int, tuple[Any, Any, int]]]: ...


def _enclosing_regions(
    launch_site: LaunchSites, cpu_annotations: dict[tuple[Any, Any], list[tuple[int, int, str]]]
) -> dict[int, tuple[str, ...]]:
    """Correlation id -> names of the CPU regions open on the launching thread when the kernel was launched
    (outermost first). One sweep per thread over launches and regions in time order: a run with a region per
    step has as many regions as steps, and a scan of every region per launch would be quadratic.
    ``launch_site`` gives (correlation id, (pid, tid, launch time in ns)) per launch call, each id once."""
    sites: dict[tuple[Any, Any], list[tuple[int, int]]] = defaultdict(list)
    for corr, (pid, tid, ts) in launch_site.items():
        if (pid, tid) in cpu_annotations:
            sites[(pid, tid)].append((ts, corr))
    out: dict[int, tuple[str, ...]] = {}
    names: dict[tuple[str, ...], tuple[str, ...]] = {}  # one tuple per distinct nesting, shared by its launches
    for key, launches in sites.items():
        if not all(a <= b for a, b in zip(launches, launches[1:])):
            launches.sort()
        spans = cpu_annotations[key]  # sorted by start
        j, active, open_names = 0, [], ()
        for ts, corr in launches:
            changed = False
            while j < len(spans) and spans[j][0] <= ts:
                active.append(spans[j])
                j += 1
                changed = True
            if active and (changed or any(sp[1] < ts for sp in active)):
                active = [sp for sp in active if sp[1] >= ts]  # ended before this launch: never open again
                got = tuple(name for _, _, name in active)
                open_names = names.setdefault(got, got)
            elif not active:
                open_names = ()
            if open_names:
                out[corr] = open_names
        sites[key] = []
    del sites
    _steps_by_time(launch_site, cpu_annotations, out)
    return out


STEP_PREFIX = "ProfilerStep#"


def _steps_by_time(launch_site: LaunchSites,
                   cpu_annotations: dict[tuple[Any, Any], list[tuple[int, int, str]]],
                   out: dict[int, tuple[str, ...]]) -> None:
    """A launch belongs to the step, and the regions, open when it was launched, whatever thread launched it: the
    backward pass's kernels come from autograd's own thread while the main thread waits in backward() inside its
    step and regions. A launch whose thread has no range of its own open gets the ranges open at its launch time on
    its process's main thread (the one that opens the step ranges, else the one with the most ranges); a launch
    with ranges of its own but no step gets the step, as the outermost region."""
    main: dict[Any, Any] = {}
    weight: dict[tuple[Any, Any], tuple[int, int]] = {}
    for (pid, tid), spans in cpu_annotations.items():
        weight[(pid, tid)] = (sum(sp[2].startswith(STEP_PREFIX) for sp in spans), len(spans))
    for (pid, tid), w in weight.items():
        if pid not in main or w > weight[(pid, main[pid])]:
            main[pid] = tid
    if not main:
        return
    by_pid: dict[Any, list[tuple[int, int, Any]]] = defaultdict(list)
    for corr, (pid, tid, ts) in launch_site.items():
        if pid in main and (tid != main[pid] or corr not in out):
            by_pid[pid].append((ts, corr, tid))  # each id once: the tid never decides the order
    for pid, launches in by_pid.items():
        tid, spans = main[pid], cpu_annotations[(pid, main[pid])]  # sorted by start
        launches.sort()
        j, active = 0, []
        for ts, corr, launch_tid in launches:
            while j < len(spans) and spans[j][0] <= ts:
                active.append(spans[j])
                j += 1
            active = [sp for sp in active if sp[1] >= ts]
            have = out.get(corr, ())
            if launch_tid != tid and not any(not n.startswith(STEP_PREFIX) for n in have):
                if active:
                    out[corr] = tuple(name for _, _, name in active)
            elif not any(n.startswith(STEP_PREFIX) for n in have):
                step = [name for _, _, name in active if name.startswith(STEP_PREFIX)]
                if step:
                    out[corr] = (step[0],) + have


def _region(e: dict[str, Any], origin_ns: int, out: ParsedTrace, cpu_annotations: Any,
            gpu_annotation_by_ext: dict[Any, dict[str, Any]]) -> None:
    start, dur = _ns(e["ts"]), _ns(e.get("dur", 0))
    cpu_annotations[(e.get("pid"), e.get("tid"))].append((start, start + dur, str(e.get("name"))))
    gpu = gpu_annotation_by_ext.get((e.get("args") or {}).get("External id"))
    out.regions.append(Region(
        name=str(e.get("name")),
        cpu_start_ns=start - origin_ns,
        cpu_duration_ns=dur,
        gpu_start_ns=None if gpu is None else _ns(gpu["ts"]) - origin_ns,
        gpu_duration_ns=None if gpu is None else _ns(gpu.get("dur", 0)),
    ))


@functools.lru_cache(maxsize=65536)
def _field_metric(i: int, raw: Any) -> Metric:
    """KINETO_KERNEL_FIELDS[i] with the trace's value (None: absent). Metrics are immutable, and a run repeats
    the same few values a million times: each is built once."""
    f = KINETO_KERNEL_FIELDS[i]
    if raw is None:
        return Metric.missing(f.raw_name, "not in this PyTorch profiler trace", f.source, f.unit)
    return Metric(value=f.cast(raw), unit=f.unit, source=f.source, raw_name=f.raw_name, formula=f.formula)


_MISSING_METRICS = {model_name: Metric.missing(raw_name, reason, "ncu" if "ncu" in reason else "cupti", unit)
                    for model_name, raw_name, unit, reason in KINETO_MISSING_FIELDS}


def _metrics(args: dict[str, Any]) -> dict[str, Metric]:
    """A kernel event's metrics: every Kineto field (missing ones with the reason), then what Kineto never has."""
    metrics: dict[str, Metric] = {}
    for i, f in enumerate(KINETO_KERNEL_FIELDS):
        raw = args.get(f.raw_name)
        try:
            metrics[f.model_name] = _field_metric(i, raw)
        except TypeError:  # an unhashable value (a list): build it, uncached
            metrics[f.model_name] = _field_metric.__wrapped__(i, raw)
    metrics.update(_MISSING_METRICS)
    return metrics


def _device(p: dict[str, Any]) -> Device:
    attrs = {
        model: attribute(p[raw], unit, f"deviceProperties.{raw}", source="cupti")
        for raw, model, unit in KINETO_DEVICE_PROPERTIES if raw in p
    }
    return Device(
        index=int(p.get("id", 0)),
        name=str(p.get("name", "unknown")),
        compute_capability=(int(p.get("computeMajor", 0)), int(p.get("computeMinor", 0))),
        attributes=attrs,
    )
