"""Session-wide sections of the HTML report: the header, the kernel table, the run's timeline (drawn
aggregated: one SVG column sums every launch inside it, so 100,000 launches cost no more than 100) and
the live GPU stats. The numbers the terminal prints, through the same helpers."""
from __future__ import annotations

from kernelscope.analyze.thresholds import BACK_TO_BACK_GAP_NS, HOST_WAIT_GAP_NS
from kernelscope.analyze.timeline import GAP_FORMULA, HOST_WAIT, LAUNCH_GAP
from kernelscope.model.names import distinct_short_names, short_kernel_name
from kernelscope.render.fmt import dim3_compact, duration, plural, truncate
from kernelscope.render.timeline import barrier_text, gap_text, mark_text, multi_rank_note
from kernelscope.render.header import collector_rows, header_rows
from kernelscope.render.gpu_stats import (LABELS, STRIP_FIELDS, as_number, bucket, clocks_text, field_scale,
                                          kernel_busy, outside_text, sampler_text, stats_title, throttle_text,
                                          value_text)
from kernelscope.render.html.charts import PALETTE, series, strips
from kernelscope.render.html.markup import Cell, Markup, el, kv, note, section, table

TIMELINE_COLUMNS = 400
TIMELINE_LANES = 8  # kernels by total time with a lane of their own; the rest share one
TIMELINE_ROWS = 200  # rows of the timeline table, as show --timeline's default
KERNEL_TABLE_ROWS = 500  # every kernel is a row up to here (the terminal shows 15)


def header_section(s) -> Markup:
    """What SessionHeader prints (the same rows: render/header.py)."""
    rows: list = list(header_rows(s))
    for name, status, text in collector_rows(s):
        rows.append((f"  {name}", el("span", status, class_=f"st-{status}") + text))
    return section("kernelscope session", kv(rows), id_="session")


def kernel_table_section(summary) -> Markup:
    """What KernelTable prints, every kernel up to KERNEL_TABLE_ROWS (the page is not 80 columns wide)."""
    if not summary.kernels:
        return section("Kernels", el("p", "No kernel launches were recorded."))
    rows = []
    more = False
    for i, k in enumerate(summary.kernels[:KERNEL_TABLE_ROWS], 1):
        c = k.configs[0].config
        cfg = f"{dim3_compact(c.grid)} / {dim3_compact(c.block)}"
        if len(k.configs) > 1:
            cfg += f" +{len(k.configs) - 1}"
            more = True
        rows.append((str(i), el("span", k.label, title=k.name), str(k.launches), duration(k.total_ns),
                     f"{100 * k.share_of_kernel_time:.1f}", duration(k.mean_ns), cfg))
    body: list = [table(("#", "Kernel", "Calls", "Total", "%", "Mean", "Grid / Block"), rows, num_from=2)]
    if more:
        body.append(note("+N: the kernel also ran with N other launch configurations (grid, block, registers or "
                         "shared memory); the one shown took the most time."))
    if len(summary.kernels) > KERNEL_TABLE_ROWS:
        body.append(note(f"… and {len(summary.kernels) - KERNEL_TABLE_ROWS} more kernels (show --json lists all)"))
    return section(f"Kernels by total GPU time ({plural(summary.launch_count, 'launch', 'launches')}, "
                   f"{duration(summary.total_kernel_ns)})",
                   *body, id_="kernels")


def operators_section(ops) -> Markup:
    """What OperatorsTable prints: the aten ops by kernel time, their inputs, the user's line and their rate."""
    from kernelscope.render.operators_panel import achieved_text, model_flops_text

    rows = [(str(i), r.label, r.shapes or "-", r.python_line or "-", str(r.calls), duration(r.kernel_ns),
             achieved_text(r)) for i, r in enumerate(ops.rows[:KERNEL_TABLE_ROWS], 1)]
    body: list = [table(("#", "Operator", "Inputs", "Python line", "Calls", "Kernels", "Achieved (% of ceiling)"),
                        rows, num_from=4)]
    if ops.model is not None:
        body.append(note(model_flops_text(ops.model)))
    if ops.missing:
        body.append(note(f"The trace did not record {' or '.join(ops.missing)}: those columns are empty."))
    if len(ops.rows) > KERNEL_TABLE_ROWS:
        body.append(note(f"… and {len(ops.rows) - KERNEL_TABLE_ROWS} more operators (show --json lists all)"))
    return section("Operators by kernel time (aten op, inputs, the user's line)", *body, id_="operators")


def _lanes(tl, top: list[str]) -> tuple[list[tuple[str, list[float]]], int, int]:
    """Busy fraction per column and lane: each top kernel, other kernels, copies. O(rows + columns)."""
    gpu = [r for r in tl.rows if r.kind != "region"]
    t0 = min(r.start_ns for r in gpu)
    t1 = max(r.start_ns + r.duration_ns for r in gpu)
    span = max(1, t1 - t0)
    names = {n: i for i, n in enumerate(top)}
    lanes = [[0.0] * TIMELINE_COLUMNS for _ in range(len(top) + 2)]
    col_ns = span / TIMELINE_COLUMNS
    for r in gpu:
        lane = names.get(r.name, len(top)) if r.kind == "kernel" else len(top) + 1
        s, e = r.start_ns - t0, r.start_ns - t0 + r.duration_ns
        c = min(TIMELINE_COLUMNS - 1, int(s / col_ns))
        while c < TIMELINE_COLUMNS and c * col_ns < e:
            lanes[lane][c] += min(e, (c + 1) * col_ns) - max(s, c * col_ns)
            c += 1
    fractions = [[min(1.0, v / col_ns) for v in lane] for lane in lanes]
    labels = distinct_short_names(top)
    named = [(truncate(labels.get(n, short_kernel_name(n)), 34), f) for n, f in zip(top, fractions)]
    return named + [("other kernels", fractions[-2]), ("copies / memsets", fractions[-1])], t0, t1


def _timeline_rows(tl, multi: bool, labels: dict[str, str], from_ns: int | None) -> tuple[list, int, int, int]:
    """The table's rows and marks in time order on the session clock, from ``from_ns`` on, at most TIMELINE_ROWS;
    with how many rows were passed, how many marks, and how many rows came before ``from_ns``."""
    origin = 0  # the session clock, which marks, regions and the memory panel share
    trows = []
    marks, m_next, shown = tl.marks, 0, 0  # the TIMELINE_ROWS bound counts rows and marks: a million marks
    # made a 153 MB page, with a quadratic pop(0)

    def rank(r) -> tuple:
        return (str(r.rank) if r.rank is not None else "",) if multi else ()

    def mark_row(m) -> tuple:
        return ("",) * multi + (f"{(m.t_ns - origin) / 1e6:,.3f}", "", "", "mark", f"◆ {m.name}", mark_text(m))

    before = 0
    if from_ns is not None:  # open on the window: earlier rows and marks are counted, not drawn
        while m_next < len(marks) and marks[m_next].t_ns < from_ns:
            m_next += 1
        before = m_next
    for r in tl.rows:
        if from_ns is not None and r.start_ns < from_ns:
            before += 1
            shown += 1
            continue
        while m_next < len(marks) and marks[m_next].t_ns < r.start_ns and len(trows) < TIMELINE_ROWS:
            trows.append(mark_row(marks[m_next]))  # kernelscope.mark() points in time order among the rows
            m_next += 1
        if len(trows) >= TIMELINE_ROWS:
            break
        shown += 1
        if r.kind == "region":
            trows.append(rank(r) + (f"{(r.start_ns - origin) / 1e6:,.3f}", duration(r.duration_ns), "", "region",
                                    f"▸ {r.name}", "" if r.on_gpu else "(CPU span: no GPU work seen)"))
            continue
        gap = f"{duration(r.gap_before_ns)} {r.gap_kind}" if r.gap_before_ns is not None and r.gap_kind in (
            LAUNCH_GAP, HOST_WAIT) else ""
        notes = " · ".join(f"{label} {float(m.value):.0f}%" for label, m in r.notes)
        if r.barrier is not None:
            notes = barrier_text(r.barrier) + (f" · {notes}" if notes else "")
        trows.append(rank(r) + (f"{(r.start_ns - origin) / 1e6:,.3f}", duration(r.duration_ns), gap, r.kind,
                                labels.get(r.name, r.short_name), notes))
    while shown == len(tl.rows) and m_next < len(marks) and len(trows) < TIMELINE_ROWS:  # after the last row
        trows.append(mark_row(marks[m_next]))
        m_next += 1
    return trows, shown, m_next, before


def timeline_section(tl, summary, from_ns: int | None = None) -> Markup:
    """Panel 8, the run: GPU busy and gaps, a lane per kernel drawn by busy share per column, and the first
    TIMELINE_ROWS rows of the table show --timeline prints, on the session clock, from ``from_ns`` (the verdict's
    window start; None: the run's start) as show draws them."""
    title = "Timeline"
    if tl.missing_reason is not None:
        return section(title, el("p", f"N/A: {tl.missing_reason}.", class_="na"), id_="timeline")
    busy_pct = 100.0 * tl.gpu_busy_ns / tl.span_ns if tl.span_ns else 0.0
    multi = any(r.rank is not None for r in tl.rows)  # several ranks: a Rank column, barriers in the notes
    of_any = " of any rank (the Ranks panel has each rank's)" if multi else ""
    rows: list = [("GPU busy", f"{duration(tl.gpu_busy_ns)} of a {duration(tl.span_ns)} span ({busy_pct:.1f}%), "
                               f"kernels and copies{of_any}")]
    for g in tl.gaps:
        rows.append((g.kind.capitalize() + "s", gap_text(g, multi)))
    if not tl.gaps:
        rows.append(("Gaps", f"none: every kernel started within {duration(BACK_TO_BACK_GAP_NS)} of the previous "
                             "one ending"))
    body: list = [kv(rows)]
    if any(r.kind != "region" for r in tl.rows):
        top = [k.name for k in summary.kernels[:TIMELINE_LANES]]
        lanes, t0, t1 = _lanes(tl, top)
        shades = {i: f"rgba(47,111,222,{0.2 + 0.8 * i / 4:.2f})" for i in range(1, 5)}
        cells = [(name, [0 if f <= 0 else max(1, round(4 * f)) for f in frac], "") for name, frac in lanes
                 if any(frac)]
        body.append(el("h3", f"The run, {duration(t1 - t0)} from the first GPU start (one column = "
                             f"{duration((t1 - t0) / TIMELINE_COLUMNS)}; darker = busier)"))
        body.append(strips(cells, shades, label_w=200, note_w=10, label="kernels over time"))
    labels = distinct_short_names(r.name for r in tl.rows[:TIMELINE_ROWS] if r.kind == "kernel")
    trows, shown, m_next, before = _timeline_rows(tl, multi, labels, from_ns)
    marks = tl.marks
    total = len(tl.rows) + len(marks)
    more = f" (first {len(trows)} of {total:,})" if shown + m_next < total else ""
    head = ("Start ms", "Duration", "Idle before", "Kind", "Name",
            "Notes (barriers, counter pass)" if multi else "Notes (counter pass)")
    if before:
        body.append(note(f"The rows open on the verdict's window at {from_ns / 1e6:,.3f} ms: {before:,} earlier rows "
                         "not drawn."))
    body.append(el("details", el("summary", f"Rows in time order{more}"),
                   table(("Rank",) * multi + head, trows, num_from=0,
                         text_cols=tuple(i + multi for i in (3, 4, 5)))))
    body.append(note(f"Idle before = {GAP_FORMULA}; up to {duration(BACK_TO_BACK_GAP_NS)} is back-to-back (not "
                     f"shown), under {duration(HOST_WAIT_GAP_NS)} a launch gap, longer a host wait. Notes are ncu's % "
                     "of peak for the launches the counter pass measured."))
    if multi:
        body.append(note(multi_rank_note(tl)))
    return section(title, *body, id_="timeline")


def _gpu_fields(s) -> list:
    """The summary table of every sampled field, and which fields NVML left out of some samples."""
    n = s.samples
    rows, partly, never = [], {}, {}
    for f in s.fields:
        label = LABELS.get(f.key, f.key)
        if f.count == 0:  # the reason once under the table, for every field it holds for (as the terminal)
            never.setdefault(f.missing_reason or "no reason recorded", []).append(label)
            cells = [Cell(el("span", "N/A", class_="na"), colspan=4)]
        else:
            if f.count < n and f.missing_reason:
                partly.setdefault(f.missing_reason, []).append(label)
            cells = [value_text(f.mean, f.unit), value_text(f.minimum, f.unit), value_text(f.peak, f.unit),
                     value_text(f.limit, f.unit) if f.limit is not None else ""]
        rows.append((label, *cells, f"{f.count}/{n}", f"{f.source}: {f.raw_name}"))
    body: list = [table(("Field", "Mean", "Min", "Peak", "Ceiling", "Samples", "Source"), rows, text_cols=(6,))]
    body += [note(f"N/A in every sample ({', '.join(v)}): {k}") for k, v in never.items()]
    body += [note(f"N/A in some samples ({', '.join(v)}): {k}") for k, v in partly.items()]
    return body


def _gpu_notes(session, s) -> list:
    """Clock events, throttled windows, the sampler's own cost, samples outside the trace."""
    body: list = []
    if s.throttle_counts:
        body.append(el("p", "Clock event reasons: " + "; ".join(
            throttle_text(r, c, s.samples, b) for r, c, b in s.throttle_counts)))
    elif s.field("sm_clock_mhz") is not None:
        body.append(el("p", "Clock event reasons: none reported"))
    if s.flagged_samples:
        body.append(el("p", clocks_text(s), class_="warn"))
    elif s.busy_samples:
        body.append(el("p", clocks_text(s)))
    st = session.collectors.get("sampler")
    d = st.details if st else {}
    if "read_ms_mean" in d:
        body.append(note(sampler_text(d)))
    if s.outside_trace:
        body.append(note(outside_text(s.outside_trace)))
    return body


def _gpu_plots(session, s, samples, width: int) -> list:
    """Each series plotted against the kernels' busy time (one SVG column per time bucket)."""
    body: list = []
    times = [x.t_ns if s.on_timeline else x.wall_time_ns for x in samples]
    if times:
        t0 = min(0, times[0]) if s.on_timeline else times[0]
        t1 = max(times[-1], s.trace_end_ns or times[-1])
        plots = []
        if s.on_timeline:
            launches = session.launch_table().timed(s.device_index)
            plots.append(("kernels", series(kernel_busy(launches, t0, t1, width), 0, 1, width, 24, PALETTE[3]),
                          "busy 0–100 %"))
        for i, key in enumerate(STRIP_FIELDS):
            f = s.field(key)
            if f is None:
                continue
            if f.count == 0:
                plots.append((LABELS[key], el("span", f"N/A: {f.missing_reason}", class_="na"), ""))
                continue
            lo, hi = field_scale(f)
            plots.append((LABELS[key], series(bucket(times, f.series, t0, t1, width), lo, hi, width),
                          f"{value_text(lo, f.unit)}–{value_text(hi, f.unit)}"))
        body.append(el("h3", f"Against the kernel timeline ({t0 / 1e9:.3f} s to {t1 / 1e9:.3f} s, "
                             f"{'session clock' if s.on_timeline else 'since 1st sample'})"))
        body.append(el("div", *(el("div", part) for plot in plots for part in plot), class_="plots"))
    return body


def gpu_stats_section(session, s, width: int = 600, max_rows: int = 12) -> Markup:
    """Panel 9 from analyze.gpu_stats.GpuStatsSummary: the summary table, clock events, each series plotted
    against the kernels' busy time, and sample rows."""
    title = stats_title(s)
    body: list = _gpu_fields(s)
    body += _gpu_notes(session, s)
    samples = s.used
    body += _gpu_plots(session, s, samples, width)
    picks = list(range(len(samples)))
    if len(samples) > max_rows:  # flagged ones first, the rest evenly spaced (as the terminal)
        flagged = [w.index for w in s.windows if w.flags][: max_rows // 2]
        rest = max_rows - len(flagged)
        picks = sorted(set(flagged) | {round(i * (len(samples) - 1) / max(1, rest - 1)) for i in range(rest)})
    labels = distinct_short_names(sh.kernel for sh in session.launch_table().shapes)
    srows = []
    for i in picks:
        x, w = samples[i], s.windows[i]
        names = [labels.get(k) or short_kernel_name(k) for k, _ in w.kernels]
        ks = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "") if names else "(none)"
        srows.append((f"{x.t_ns / 1e9:.3f} s" if x.t_ns is not None else "N/A",
                      value_text(as_number(x.value("gpu_utilization_pct")), "%"),
                      value_text(as_number(x.value("sm_clock_mhz")), ""),
                      value_text(as_number(x.value("power_w")), "W"),
                      value_text(as_number(x.value("temperature_c")), "C"),
                      "!" if w.flags else "", ks))
    body.append(table(("t", "GPU", "SM MHz", "power", "temp", "", "kernels that ran since the previous sample"),
                      srows, num_from=0, text_cols=(6,)))
    if len(picks) < len(samples):
        body.append(note(f"{len(picks)} of {len(samples)} samples shown: flagged ones first, the rest evenly spaced"))
    return section(title, *body, id_="gpu-stats")


