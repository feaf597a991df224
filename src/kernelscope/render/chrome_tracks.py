"""Tracks that trace viewers can draw: complete (``X``) events on one track must nest or be disjoint.

Perfetto and chrome://tracing draw the ``X`` events of one (pid, tid) as a
stack of nested slices; two that overlap only in part are drawn wrong or
dropped. :func:`assign_lanes` gives each span the first lane where it fits
(greedy interval colouring: as few lanes as the spans' overlap needs), and
:func:`split_partial_overlaps` uses it to move what would overlap in part onto
an extra, named track of the same process, so a trace never depends on a
viewer's tie-breaking.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any


def event_span_ns(e: dict[str, Any]) -> tuple[int, int]:
    """An ``X`` event's (start, end) in whole ns (``ts``/``dur`` are µs, written from whole ns)."""
    start = round(e["ts"] * 1000)
    return start, start + round(e["dur"] * 1000)


def assign_lanes(spans: list[tuple[int, int]], nest: bool) -> list[int]:
    """The lane of each (start, end) span, in input order: spans on one lane are disjoint, or nested if ``nest``.

    Each span, by start (longest first at equal starts), takes the first lane
    whose open spans have all ended by its start, or, with ``nest``, whose
    innermost open span contains it.
    """
    if all(a[1] <= b[0] for a, b in zip(spans, spans[1:])):  # one after another already (kernels on a stream)
        return [0] * len(spans)
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], -spans[i][1]))
    open_ends: list[list[int]] = []  # per lane: the ends of the spans still open, innermost last
    lane_of = [0] * len(spans)
    for i in order:
        start, end = spans[i]
        for lane, ends in enumerate(open_ends):
            while ends and ends[-1] <= start:
                ends.pop()
            if not ends or (nest and end <= ends[-1]):
                break
        else:
            lane, ends = len(open_ends), []
            open_ends.append(ends)
        ends.append(end)
        lane_of[i] = lane
    return lane_of


def split_partial_overlaps(events: list[Any], notes: list[str]) -> list[Any]:
    """Move ``X`` events that overlap others on their track only in part to extra tracks, with a note.

    Events stay in place where their track is already drawable (the usual case:
    kernels on a stream run one after another, regions nest); an extra track is
    named after its track ("stream 7 · overlap 1"). ``events`` are dicts, or runs of
    kernel events kept as columns (render/chrome_kernel_rows.KernelRows), which say
    their own spans and take their moves.
    """
    spans: dict[tuple[int, int], list[tuple[int, int]]] = {}
    refs: dict[tuple[int, int], list[int]] = {}  # per track: event position (>= 0) or ~launch index of a row
    rows: Any = None
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            e.add_spans(spans, refs)
            rows = e.cols
        elif e["ph"] == "X":
            key = (e["pid"], e["tid"])
            spans.setdefault(key, []).append(event_span_ns(e))
            refs.setdefault(key, []).append(i)
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
             if isinstance(e, dict) and e["ph"] == "M" and e["name"] == "thread_name"}
    next_tid: dict[int, int] = defaultdict(int)
    for pid, tid in list(spans) + list(names):
        next_tid[pid] = max(next_tid[pid], (tid or 0) + 1)
    extra: list[dict[str, Any]] = []
    for (pid, tid), track in spans.items():
        lanes = assign_lanes(track, nest=True)
        if max(lanes) == 0:
            continue
        base = names.get((pid, tid), f"track {tid}")
        lane_tid = {}
        for lane in range(1, max(lanes) + 1):
            lane_tid[lane] = next_tid[pid]
            next_tid[pid] += 1
            extra.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": lane_tid[lane],
                          "args": {"name": f"{base} · overlap {lane}"}})
        moved = 0
        for i, lane in zip(refs[(pid, tid)], lanes):
            if lane:
                if i >= 0:
                    events[i] = {**events[i], "tid": lane_tid[lane]}
                else:
                    rows.moved[~i] = lane_tid[lane]
                moved += 1
        notes.append(f"{moved} event(s) on track '{base}' overlap others there only in part and were drawn on "
                     f"{max(lanes)} extra track(s) named '{base} · overlap N'")
    return events + extra
