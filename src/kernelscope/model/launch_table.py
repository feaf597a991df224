"""Launches stored column-wise: what a million launches need without a million Launch objects.

A run repeats a few kernels in a few configurations many times. A `LaunchShape` holds what
launches of one configuration share (kernel name, grid, block, stream, device, regions and every
metric whose value is the same for all of them, with its provenance); the per-launch columns hold
only what differs (shape, start, duration, correlation id, and the values of the metrics that vary,
such as CUPTI's queued time). The few launches that carry more (counter results, NVIDIA's findings,
instrumentation) keep those parts in `details`. `launch(i)` rebuilds the Launch exactly.
"""
from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from kernelscope.model.blocks import BlockRecords, PhaseScopes
from kernelscope.model.vendor_rule import VendorRuleResult
from kernelscope.model.ranks import Collective
from kernelscope.model.source_lines import SourceLines
from kernelscope.model.launch import Dim3, Launch
from kernelscope.model.metric import Metric, MetricMap

@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while rows per launch are built (also as a decorator). Each of a million
    allocations counts toward a collection that walks every object already alive (a loaded session is
    millions), so building the rows of a large session costs mostly collections that find nothing: these rows
    and the session hold no reference cycles. The collector's previous state is restored on the way out."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


# What a varying metric keeps in its shape: everything but the value.
Template = tuple[str, str, str, "str | None", "str | None"]  # unit, source, raw_name, missing_reason, formula


def template(m: Metric) -> Template:
    return (m.unit, m.source, m.raw_name, m.missing_reason, m.formula)


@dataclass
class LaunchShape:
    """What every launch of one shape shares. ``metric_names`` keeps the collector's order."""

    kernel: str
    grid: Dim3
    block: Dim3
    stream: int | None
    device_index: int | None
    regions: tuple[str, ...]
    metric_names: tuple[str, ...]
    metrics: MetricMap  # the same value for every launch of the shape
    varying: dict[str, Template] = field(default_factory=dict)  # value per launch in LaunchTable.metric_values
    rank: int | None = None  # the process that launched them (Session.ranks); None in a one-process session

    def value(self, key: str) -> Any:
        """A metric's value when it is the same for every launch of the shape (else None)."""
        m = self.metrics.get(key)
        return None if m is None else m.value


DETAIL_PARTS = ("counters", "findings", "block_records", "scopes", "collective", "source_lines")  # LaunchDetails


def has_part(v: Any) -> bool:
    """Whether a launch has a detail: a non-empty dict or list (counters, findings), else any value."""
    return bool(v) if isinstance(v, (dict, list)) else v is not None


@dataclass
class LaunchDetails:
    """The parts of one launch that few launches have: counter pass and instrumentation."""

    counters: MetricMap = field(default_factory=dict)
    findings: list[VendorRuleResult] = field(default_factory=list)
    block_records: BlockRecords | None = None
    scopes: PhaseScopes | None = None
    collective: Collective | None = None  # an NCCL kernel: the collective it runs
    source_lines: SourceLines | None = None  # counters per source line (ncu SourceCounters)


class TimedLaunch(NamedTuple):
    """A launch's kernel name and time: what views of busy time read."""

    kernel: str
    start_ns: int | None
    duration_ns: int


@dataclass
class LaunchTable:
    shapes: list[LaunchShape] = field(default_factory=list)
    shape: list[int] = field(default_factory=list)  # per launch: index into shapes
    start_ns: list[int | None] = field(default_factory=list)
    duration_ns: list[int] = field(default_factory=list)
    correlation_id: list[int | None] = field(default_factory=list)
    metric_values: dict[str, list[Any]] = field(default_factory=dict)  # varying metrics; None where not varying
    details: dict[int, LaunchDetails] = field(default_factory=dict)
    _detailed: dict[int, Launch] = field(default_factory=dict, init=False, repr=False, compare=False)
    _by_shape: Any = field(default=None, init=False, repr=False, compare=False)
    _first: Any = field(default=None, init=False, repr=False, compare=False)
    _by_kernel: Any = field(default=None, init=False, repr=False, compare=False)
    _detailed_of: Any = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.shape)

    # -- per-launch reads, without building Launch objects --------------------------------------------------
    def kernels(self) -> list[str]:
        names = [s.kernel for s in self.shapes]
        return [names[i] for i in self.shape]

    def shapes_of(self, kernel: str) -> set[int]:
        return {i for i, s in enumerate(self.shapes) if s.kernel == kernel}

    def indices_of(self, kernel: str) -> list[int]:
        ids = self.shapes_of(kernel)
        return [i for i, s in enumerate(self.shape) if s in ids]

    def durations_by_shape(self) -> tuple[list[list[int]], list[list[int]]]:
        """Per shape, in launch order: the durations of every launch, and of those with a start time (the
        trace pass's). One pass, kept: a table is not changed once built."""
        if self._by_shape is None:
            every: list[list[int]] = [[] for _ in self.shapes]
            for sid, d in zip(self.shape, self.duration_ns):
                every[sid].append(d)
            if None not in self.start_ns:
                traced = every
            else:
                traced = [[] for _ in self.shapes]
                for sid, st, d in zip(self.shape, self.start_ns, self.duration_ns):
                    if st is not None:
                        traced[sid].append(d)
            self._by_shape = (every, traced)
        return self._by_shape

    def durations_by_kernel(self) -> dict[str, tuple[list[int], list[int]]]:
        """Per kernel: the durations of its launches with a start time (the trace pass's) and of all its launches,
        each sorted (one list for both when every launch has a start). One pass, kept: the kernel table's median,
        the duration statistics and the launch-bound test then read sorted lists instead of sorting a million
        durations each."""
        if self._by_kernel is None:
            every, traced = self.durations_by_shape()
            out: dict[str, tuple[list[int], list[int]]] = {}
            for sid, s in enumerate(self.shapes):
                t, e = out.setdefault(s.kernel, ([], []))
                t += traced[sid]
                if traced is not every:
                    e += every[sid]
            for k, (t, e) in out.items():
                t.sort()
                e.sort()
                if traced is every:
                    out[k] = (t, t)
            self._by_kernel = out
        return self._by_kernel

    def first_launch(self, sid: int) -> int | None:
        """The index of shape ``sid``'s first launch (None: it has none). One pass for every shape, kept."""
        if self._first is None:
            first: dict[int, int] = {}
            for i, s in enumerate(self.shape):
                if s not in first:
                    first[s] = i
            self._first = first
        return self._first.get(sid)

    def value(self, i: int, key: str) -> Any:
        """Launch i's value of metric ``key`` (None when it has none), like Launch.value."""
        s = self.shapes[self.shape[i]]
        if key in s.varying:
            return self.metric_values[key][i]
        return s.value(key)

    def has_details(self, i: int) -> bool:
        return i in self.details

    # -- Launch objects, for the few launches that need them ----------------------------------------------------
    def launch(self, i: int) -> Launch:
        s = self.shapes[self.shape[i]]
        metrics: MetricMap = {}
        for name in s.metric_names:
            t = s.varying.get(name)
            metrics[name] = s.metrics[name] if t is None else Metric(self.metric_values[name][i], *t)
        d = self.details.get(i)
        return Launch(
            kernel=s.kernel, grid=s.grid, block=s.block, start_ns=self.start_ns[i], duration_ns=self.duration_ns[i],
            stream=s.stream, device_index=s.device_index, correlation_id=self.correlation_id[i],
            regions=list(s.regions), metrics=metrics,
            counters=dict(d.counters) if d else {}, findings=list(d.findings) if d else [],
            block_records=d.block_records if d else None, scopes=d.scopes if d else None,
            rank=s.rank, collective=d.collective if d else None,
            source_lines=d.source_lines if d else None,
        )

    def timed(self, device_index: int | None) -> list[TimedLaunch]:
        """(kernel, start, duration) of the launches on ``device_index`` or on no recorded device, in launch order:
        what a view of busy time reads, without a Launch object per launch."""
        names = [(s.kernel if s.device_index in (None, device_index) else None) for s in self.shapes]
        return [TimedLaunch(names[sid], st, d) for sid, st, d in zip(self.shape, self.start_ns, self.duration_ns)
                if names[sid] is not None]

    def launches(self) -> list[Launch]:
        return [self.launch(i) for i in range(len(self))]

    def where(self, keep: Callable[[int], bool]) -> list[Launch]:
        return [self.launch(i) for i in range(len(self)) if keep(i)]

    def detailed(self, kernel: str | None = None, having: str | None = None) -> Iterator[tuple[int, Launch]]:
        """(index, Launch) of the launches with counter results or instrumentation (of ``kernel``; with the
        detail ``having``, a LaunchDetails field, e.g. "counters"), in launch order. Built once and kept, so every
        caller sees the same objects (as with a list of launches)."""
        if self._detailed_of is None:  # launch indices per kernel, found in one pass over the details
            names = [s.kernel for s in self.shapes]
            by_kernel: dict[str | None, list[int]] = {None: sorted(self.details)}
            for i in by_kernel[None]:
                by_kernel.setdefault(names[self.shape[i]], []).append(i)
            self._detailed_of = by_kernel
        for i in self._detailed_of.get(kernel, ()):
            if having is not None and not has_part(getattr(self.details[i], having)):
                continue  # no Launch built for it (an NCCL kernel's collective, when counters are asked for)
            x = self._detailed.get(i)
            if x is None:
                x = self._detailed[i] = self.launch(i)
            yield i, x

    def map_text(self, f: Callable[[Any], Any]) -> "LaunchTable":
        """A copy with ``f`` applied to every string-bearing part (names, regions, metrics, details): the
        terminal's plain-text copy, done per shape rather than per launch."""
        # Shapes that differ only in regions hold the same metric objects and names: each distinct part is mapped
        # once (f is applied to the same objects, so it gives the same result) and every shape gets its own dict.
        by_parts: dict[Any, tuple[Any, Any]] = {}
        by_value: dict[Any, Any] = {}

        def parts(d: dict[Any, Any], mapped: Callable[[dict[Any, Any]], Any]) -> Any:
            key = (tuple(map(id, d)), tuple(map(id, d.values())))
            got = by_parts.get(key)
            if got is None:
                got = by_parts[key] = (mapped(d), d)  # d kept: its objects' ids stay theirs while the key is kept
            return dict(got[0])

        def text(v: Any) -> Any:  # a string or a tuple of strings: mapped by its value
            got = by_value.get(v)
            if got is None:
                got = by_value[v] = f(v)
            return got

        shapes = [LaunchShape(text(s.kernel), s.grid, s.block, s.stream, s.device_index, text(s.regions),
                              text(s.metric_names), parts(s.metrics, f),
                              parts(s.varying, lambda d: {f(k): f(v) for k, v in d.items()}), s.rank)
                  for s in self.shapes]
        values = {f(k): v for k, v in self.metric_values.items()}
        details = {i: LaunchDetails(f(d.counters), f(d.findings), f(d.block_records), f(d.scopes), f(d.collective),
                                    f(d.source_lines))
                   for i, d in self.details.items()}
        out = LaunchTable(shapes, self.shape, self.start_ns, self.duration_ns, self.correlation_id, values, details)
        out._by_shape = self._by_shape  # the columns are shared, so is what was computed from them
        return out

    # -- building -----------------------------------------------------------------------------------------------
    @classmethod
    def from_launches(cls, launches: Iterable[Launch]) -> "LaunchTable":
        """The columns of ``launches``. Launches with equal configuration, stream, device, regions and metric
        provenance share a shape; a metric whose value differs between them becomes a per-launch column."""
        raw_ids: dict[Any, int] = {}
        raw: list[tuple[Any, tuple[tuple[str, Metric], ...]]] = []
        sig_by_dict: dict[int, tuple[tuple[str, Metric], ...]] = {}
        keep_alive: list[MetricMap] = []  # ids stay unique while cached
        t = cls()
        raw_of_launch: list[int] = []
        for i, x in enumerate(launches):
            sig = sig_by_dict.get(id(x.metrics))
            if sig is None:
                sig = tuple(x.metrics.items())
                sig_by_dict[id(x.metrics)] = sig
                keep_alive.append(x.metrics)
            base = (x.kernel, x.grid, x.block, x.stream, x.device_index, tuple(x.regions), x.rank)
            key = (base, sig)
            try:
                r = raw_ids.get(key)
            except TypeError:  # a metric value that is a list: compare by its text instead
                key = (base, tuple((n, repr(m)) for n, m in sig))
                r = raw_ids.get(key)
            if r is None:
                r = raw_ids[key] = len(raw)
                raw.append((base, sig))
            raw_of_launch.append(r)
            t.start_ns.append(x.start_ns)
            t.duration_ns.append(x.duration_ns)
            t.correlation_id.append(x.correlation_id)
            if x.counters or x.findings or x.block_records is not None or x.scopes is not None or x.collective \
                    or x.source_lines is not None:
                t.details[i] = LaunchDetails(dict(x.counters), list(x.findings), x.block_records, x.scopes,
                                             x.collective, x.source_lines)
        t._set_shapes(raw, raw_of_launch)
        return t

    @classmethod
    def from_columns(cls, raw: list[tuple[Any, tuple[tuple[str, Metric], ...]]], raw_of_launch: list[int],
                     start_ns: list[int | None], duration_ns: list[int], correlation_id: list[int | None],
                     details: dict[int, LaunchDetails]) -> "LaunchTable":
        """The table of launches given as columns: ``raw`` holds each distinct ((kernel, grid, block, stream,
        device_index, regions, rank), metric items) and ``raw_of_launch`` the entry of each launch; the same
        table as from_launches of those launches, without a Launch object per launch (a trace converter)."""
        t = cls(start_ns=start_ns, duration_ns=duration_ns, correlation_id=correlation_id, details=details)
        t._set_shapes(raw, raw_of_launch)
        return t

    def _set_shapes(self, raw: list[tuple[Any, tuple[tuple[str, Metric], ...]]], raw_of_launch: list[int]) -> None:
        shape_of_raw, values_of_raw = self._merge_shapes(raw)
        self.shape = [shape_of_raw[r] for r in raw_of_launch]
        for name in {n for v in values_of_raw for n in v}:
            self.metric_values[name] = [values_of_raw[r].get(name) for r in raw_of_launch]

    def _merge_shapes(self, raw: list[tuple[Any, tuple[tuple[str, Metric], ...]]]
                      ) -> tuple[list[int], list[dict[str, Any]]]:
        """Raw shapes that differ only in metric values become one shape with those metrics varying."""
        groups: dict[Any, list[int]] = {}
        for r, (base, sig) in enumerate(raw):
            groups.setdefault((base, tuple((n, template(m)) for n, m in sig)), []).append(r)
        shape_of_raw = [0] * len(raw)
        values_of_raw: list[dict[str, Any]] = [{} for _ in raw]
        for (base, templates), members in groups.items():
            first = dict(raw[members[0]][1])
            varying = {n for r in members[1:] for n, m in raw[r][1] if m.value != first[n].value
                       or type(m.value) is not type(first[n].value)}
            kernel, grid, block, stream, device_index, regions, rank = base
            self.shapes.append(LaunchShape(
                kernel, grid, block, stream, device_index, regions, tuple(n for n, _ in templates),
                {n: m for n, m in first.items() if n not in varying}, {n: t for n, t in templates if n in varying},
                rank))
            for r in members:
                shape_of_raw[r] = len(self.shapes) - 1
                if varying:
                    values_of_raw[r] = {n: m.value for n, m in raw[r][1] if n in varying}
        return shape_of_raw, values_of_raw
