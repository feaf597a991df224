"""Kernel launch events of a Chrome trace kept as the session's columns, written as JSON text.

A million launches make a million kernel events of which most differ only in start, duration, launch
index and correlation id (and the kernel name in ``args`` can be 2 KB). So the events of launches on
the common path stay rows of the LaunchTable: each shape's constant parts are encoded once as JSON
fragments, and a row is written by joining its numbers between them, byte for byte what ``json.dumps``
writes for the same event dict (``events()`` builds those dicts, for tests and small traces).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from kernelscope.model.launch_table import LaunchTable

ROWS_PER_CHUNK = 5000  # rows joined into one string before writing: bounded memory, few write calls


@dataclass
class KernelColumns:
    """What the kernel rows of one process trace share: the table, each shape's event parts (text already
    made plain), the process id and the rows moved to an overlap track (launch index -> tid)."""

    table: LaunchTable
    shape_event: list[tuple[Any, ...]]  # per shape: name, tid, kernel, grid, block, regions, extra args
    pid: int
    moved: dict[int, int] = field(default_factory=dict)

    def event(self, i: int) -> dict[str, Any]:
        t = self.table
        name, tid, kernel, grid, block, regions, extra = self.shape_event[t.shape[i]]
        return {"ph": "X", "cat": "kernel", "name": name, "pid": self.pid, "tid": self.moved.get(i, tid),
                "ts": t.start_ns[i] / 1000.0, "dur": t.duration_ns[i] / 1000.0,  # type: ignore[operator]
                "args": {"kernel": kernel, "launch_index": i, "grid": grid, "block": block,
                         "correlation_id": t.correlation_id[i], "regions": regions, **extra}}

    def fragments(self, sid: int, tid: int) -> tuple[str, str, str, str]:
        """The JSON text of shape ``sid``'s event around its per-row numbers: before ``ts``, between ``dur``
        and ``launch_index``, between it and ``correlation_id``, and after it."""
        name, _, kernel, grid, block, regions, extra = self.shape_event[sid]
        d = json.dumps
        head = f'{{"ph": "X", "cat": "kernel", "name": {d(name)}, "pid": {d(self.pid)}, "tid": {d(tid)}, "ts": '
        args = f', "args": {{"kernel": {d(kernel)}, "launch_index": '
        mid = f', "grid": {d(grid)}, "block": {d(block)}, "correlation_id": '
        tail = f', "regions": {d(regions)}' + "".join(f", {d(k)}: {d(v)}" for k, v in extra.items()) + "}}"
        return head, args, mid, tail


@dataclass
class KernelRows:
    """The kernel events of launches ``first`` .. ``stop - 1`` (those with a start time), in launch order."""

    cols: KernelColumns
    first: int
    stop: int

    def indices(self) -> Iterator[int]:
        start = self.cols.table.start_ns
        return (i for i in range(self.first, self.stop) if start[i] is not None)

    def count(self) -> int:
        start = self.cols.table.start_ns
        return sum(1 for i in range(self.first, self.stop) if start[i] is not None)

    def events(self) -> list[dict[str, Any]]:
        return [self.cols.event(i) for i in self.indices()]

    def add_spans(self, spans: dict[tuple[int, int], list[tuple[int, int]]],
                  refs: dict[tuple[int, int], list[int]]) -> None:
        """Each row's (start, end) in whole ns (as chrome_tracks.event_span_ns reads the event) on its track,
        with ``~launch index`` as its reference (dict events use their position, >= 0)."""
        c, t = self.cols, self.cols.table
        shape, start, dur = t.shape, t.start_ns, t.duration_ns
        lists: dict[int, tuple[Any, Any]] = {}
        for i in range(self.first, self.stop):
            st = start[i]
            if st is None:
                continue
            sid = shape[i]
            pair = lists.get(sid)
            if pair is None:
                key = (c.pid, c.moved.get(i, c.shape_event[sid][1]))
                pair = lists[sid] = (spans.setdefault(key, []), refs.setdefault(key, []))
            s = round(st / 1000.0 * 1000)
            pair[0].append((s, s + round(dur[i] / 1000.0 * 1000)))
            pair[1].append(~i)

    def write(self, add: Callable[[str], None]) -> None:
        """The rows as JSON text, ``ROWS_PER_CHUNK`` at a time, each chunk handed to ``add``."""
        c, t = self.cols, self.cols.table
        shape, start, dur, corr, moved = t.shape, t.start_ns, t.duration_ns, t.correlation_id, c.moved
        frags: dict[tuple[int, int], tuple[str, str, str, str]] = {}
        base = [c.fragments(sid, ev[1]) for sid, ev in enumerate(c.shape_event)]
        rows: list[str] = []
        for i in range(self.first, self.stop):
            st = start[i]
            if st is None:
                continue
            sid = shape[i]
            if i in moved:
                key = (sid, moved[i])
                f = frags.get(key) or frags.setdefault(key, c.fragments(*key))
            else:
                f = base[sid]
            k = corr[i]
            rows.append(f'{f[0]}{st / 1000.0!r}, "dur": {dur[i] / 1000.0!r}{f[1]}{i}{f[2]}'
                        f'{"null" if k is None else k}{f[3]}')
            if len(rows) >= ROWS_PER_CHUNK:
                add(", ".join(rows))
                rows = []
        if rows:
            add(", ".join(rows))
