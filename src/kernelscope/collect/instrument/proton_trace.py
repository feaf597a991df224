"""Proton instrumentation output (``NAME.chrome_trace``) -> model.PhaseScopes, one per kernel.

Pure: takes the file's text, so it is tested on the CPU with files shaped as
Triton 3.6's Proton writes them (TraceDataIO/TraceWriter.cpp, StreamChromeTraceWriter):
one JSON object ``{"displayTimeUnit": "ns", "traceEvents": [...]}`` on one line,
each event a complete ("X") event with

    pid  "<kernel> Core<smid> CTA<block id>"     tid  "warp <warp> (line <n>)"
    name  the scope name                          cat  the kernel name
    ts, dur  (cycle + block offset) / 1000 and cycles / 1000, as float32
    args  {"Frequency (MHz)": 1000.0, "Finalization Time (ns)": ..., "call_stack": [...]}

What Proton measures: each scope's start and end as clock64 (SM cycles) read by
the warp, and each block's start on %globaltimer (ns). Its ``ts`` adds the
block's %globaltimer offset (ns from the earliest block) to the cycles since the
block's first record and divides by a nominal 1000 MHz; the parser undoes that:
the smallest ``ts`` of a block is its offset, and ``ts*1000 - offset`` its
cycles. float32 keeps whole units up to 2**24 (16.7 ms of offset plus cycles);
past that the values are rounded by Proton itself.

Problems go into ``PhaseScopes.problems`` as one sentence each; a file that is
not a Proton trace at all raises ProtonTraceError.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass

from kernelscope.model import PhaseScopes, WarpScopes

PID_RE = re.compile(r"^(?P<kernel>.*) Core(?P<sm>\d+) CTA(?P<block>\d+)$")
TID_RE = re.compile(r"^warp (?P<warp>\d+)(?: \(line (?P<line>\d+)\))?$")
NOMINAL_MHZ = 1000.0  # Proton divides cycles by this to write "us"


class ProtonTraceError(ValueError):
    """Not a readable Proton trace; the message is one sentence for the user."""


@dataclass(frozen=True)
class _Event:
    kernel: str
    smid: int
    block: int
    warp: int
    name: str
    t: int  # ts * 1000: block offset (ns) + cycles since the block's first record
    dur: int  # cycles


def _salvage(text: str) -> tuple[list[object], bool]:
    """The complete events of a file cut short (a full disk, a killed process); True if any were found."""
    start = text.find('"traceEvents"')
    bracket = text.find("[", start) if start >= 0 else -1
    if bracket < 0:
        return [], False
    dec, pos, out = json.JSONDecoder(), bracket + 1, []
    while True:
        while pos < len(text) and text[pos] in " \r\n\t,":
            pos += 1
        try:
            obj, pos = dec.raw_decode(text, pos)
        except ValueError:
            return out, True
        out.append(obj)


def _events(text: str, source: str) -> tuple[list[object], list[str]]:
    problems: list[str] = []
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ProtonTraceError(f"{source} is empty: Proton wrote no trace (no instrumented kernel ran while it was on)")
    raw: list[object] = []
    for i, line in enumerate(lines):  # one object per line; Proton writes one for the instrumentation backend
        try:
            doc = json.loads(line)
        except ValueError:
            events, found = _salvage(line)
            if not found:
                raise ProtonTraceError(f"{source} is not a Proton trace: line {i + 1} is neither JSON nor the start "
                                       "of a traceEvents list") from None
            problems.append(f"the trace is truncated (line {i + 1} ends mid-way): the {len(events):,} complete "
                            "events before the cut were kept and the rest is lost")
            raw += events
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
            raise ProtonTraceError(f"{source} is JSON but not a Proton trace: it has no traceEvents list")
        raw += doc["traceEvents"]
    return raw, problems


def _parse_event(e: object) -> _Event | None:
    if not isinstance(e, dict) or e.get("ph") != "X":
        return None
    pid, tid = PID_RE.match(str(e.get("pid", ""))), TID_RE.match(str(e.get("tid", "")))
    ts, dur = e.get("ts"), e.get("dur")
    if pid is None or tid is None or not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
        return None
    freq = (e.get("args") or {}).get("Frequency (MHz)", NOMINAL_MHZ) if isinstance(e.get("args"), dict) else NOMINAL_MHZ
    scale = float(freq) if isinstance(freq, (int, float)) and 0 < freq < 1e6 else NOMINAL_MHZ
    if not (0 <= ts * scale < 2**62 and 0 <= dur * scale < 2**62):  # no real scope: NaN, infinite, negative
        return None
    return _Event(kernel=str(e.get("cat") or pid["kernel"]), smid=int(pid["sm"]), block=int(pid["block"]),
                  warp=int(tid["warp"]), name=str(e.get("name", "")), t=round(float(ts) * scale),
                  dur=round(float(dur) * scale))


def read_proton_trace(text: str, source: str = "the Proton trace") -> dict[str, PhaseScopes]:
    """Kernel name -> its phases per warp. Raises ProtonTraceError for a file that is not a Proton trace."""
    raw, file_problems = _events(text, source)
    by_kernel: dict[str, list[_Event]] = defaultdict(list)
    skipped = 0
    for e in raw:
        ev = _parse_event(e)
        if ev is None:
            skipped += 1
        else:
            by_kernel[ev.kernel].append(ev)
    if skipped:
        file_problems.append(f"{skipped:,} event(s) are not Proton scope events (no 'Core<sm> CTA<block>' process, "
                             "'warp <n>' thread, or numeric ts and dur) and were left out")
    if not by_kernel:
        raise ProtonTraceError(f"{source} holds no scope events: no instrumented kernel recorded a scope")
    return {k: _kernel_scopes(evs, file_problems) for k, evs in by_kernel.items()}


def _kernel_scopes(events: list[_Event], file_problems: list[str]) -> PhaseScopes:
    out = PhaseScopes(clock="clock64", source="proton", problems=list(file_problems))
    first_seen: dict[str, int] = {}
    block_base: dict[int, int] = {}
    block_sms: dict[int, set[int]] = defaultdict(set)
    for ev in events:
        block_base[ev.block] = min(block_base.get(ev.block, ev.t), ev.t)
        block_sms[ev.block].add(ev.smid)
    warps: dict[tuple[int, int], list[_Event]] = defaultdict(list)
    for ev in events:
        warps[(ev.block, ev.warp)].append(ev)
    negative = 0
    for (block, warp), evs in sorted(warps.items()):
        evs.sort(key=lambda v: (v.t, -v.dur))
        base = block_base[block]
        w = WarpScopes(block_id=block, warp=warp, smid=min(block_sms[block]), block_offset_ns=base)
        for ev in evs:
            if ev.dur < 0:
                negative += 1
                continue
            idx = first_seen.setdefault(ev.name, len(first_seen))
            w.scope.append(idx)
            w.start_ns.append(ev.t - base)
            w.end_ns.append(ev.t - base + ev.dur)
        out.warps.append(w)
    out.names = list(first_seen)
    # the earliest block defines offset 0; offsets are %globaltimer ns
    low = min(block_base.values())
    for w in out.warps:
        w.block_offset_ns = (w.block_offset_ns or 0) - low
    split = sorted(b for b, sms in block_sms.items() if len(sms) > 1)
    if split:
        out.problems.append(f"{len(split):,} block(s) appear on more than one SM (blocks {split[:8]}): the file "
                            "merges several launches of this kernel, so their scopes are mixed")
    if negative:
        out.problems.append(f"{negative:,} scope(s) end before they start and were left out")
    return out
