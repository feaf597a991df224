"""The Memory section of the HTML report: analyze.memory's MemoryReport as a chart of allocated and reserved
bytes over time, the peak with the largest allocations live at it (and their Python stacks), and the peak
per region. Every string goes through markup.el, which escapes it."""
from __future__ import annotations

from kernelscope.analyze.memory import ALLOCATED_FORMULA, BASELINE_FORMULA, RESERVED_FORMULA, MemoryUnavailable
from kernelscope.render.fmt import duration, size_bytes
from kernelscope.render.html.charts import PALETTE, legend, series
from kernelscope.render.html.markup import Markup, el, kv, note, section, table
from kernelscope.render.memory_panel import columns_max

TITLE = "Memory · caching allocator"
COLUMNS = 300


def memory_section(m) -> Markup:
    if isinstance(m, MemoryUnavailable):
        return section(TITLE, el("p", f"N/A: {m.reason}.", class_="na"), id_="memory")
    rows = [("Peak allocated", f"{size_bytes(m.peak_allocated_bytes)} ({m.peak_allocated_bytes:,} B) at "
                               f"{duration(m.peak_allocated_ns)} on the session clock; {m.live_at_peak} allocations "
                               f"live then ({size_bytes(m.live_at_peak_bytes)} made while recording, "
                               f"{size_bytes(m.untraced_at_peak_bytes)} from before)"),
            ("Peak reserved", f"{size_bytes(m.peak_reserved_bytes)} at {duration(m.peak_reserved_ns)}"),
            ("Before recording", f"{size_bytes(m.baseline_allocated_bytes)} allocated, "
                                 f"{size_bytes(m.baseline_reserved_bytes)} reserved ({BASELINE_FORMULA})"),
            ("History", f"{m.events:,} allocator events over {duration(m.end_ns - m.start_ns)}, device "
                        f"{m.device_index}")]
    hi = max(m.peak_reserved_bytes, m.peak_allocated_bytes, 1)
    body: list = [kv(rows), el("h3", f"Allocated and reserved, 0 to {size_bytes(hi)}, over "
                                     f"{duration(m.end_ns - m.start_ns)} (largest value per column)")]
    for label, key, color in (("allocated", "allocated_bytes", PALETTE[0]), ("reserved", "reserved_bytes", PALETTE[1])):
        cols = columns_max(m.points, m.start_ns, m.end_ns, COLUMNS, key)
        body.append(series([None if v is None else float(v) for v in cols], 0.0, float(hi), width=600, height=50,
                           color=color))
    body.append(legend([("allocated", PALETTE[0]), ("reserved", PALETTE[1])]))
    top = [(size_bytes(a.size_bytes), duration(a.allocated_at_ns),
            el("span", " ← ".join(a.stack) if a.stack else "no Python stack (allocated from C++ or another thread, "
               "e.g. autograd's backward)", class_="name")) for a in m.top_at_peak]
    body.append(table(("Size", "Allocated at", "Python stack (innermost first)"), top, num_from=3,
                      caption="Largest allocations live at the peak"))
    if m.region_peaks:
        body.append(table(("Region", "Entries", "Peak allocated", "Largest growth"),
                          [(r.name, str(r.occurrences), size_bytes(r.peak_allocated_bytes), size_bytes(r.growth_bytes))
                           for r in m.region_peaks], num_from=1, caption="Peak allocated per region"))
    body += [el("p", f"! {p}", class_="warn") for p in m.problems]
    body.append(note(f"allocated = {ALLOCATED_FORMULA}; reserved = {RESERVED_FORMULA}. Region peaks use the regions' "
                     "CPU spans (the allocator runs on the host); growth = peak inside - allocated at entry."))
    return section(TITLE, *body, id_="memory")
