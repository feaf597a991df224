"""The per-kernel sections of the HTML report: configuration, block -> SM layout, warp execution and
phases (Proton scopes), the counter panels and the profiling summary. The same numbers, formatted by
the same helpers, as the terminal panels; pictures as inline SVG. Draws KernelReport data only."""
from __future__ import annotations

from kernelscope.analyze.kernel_table import WAVES_FORMULA as CONFIG_WAVES_FORMULA
from kernelscope.analyze.phases import IDLE_FORMULA, OVERLAP_FORMULA, PER_WARP_FORMULA, SHARE_FORMULA
from kernelscope.analyze.sm_layout import (
    COMPUTED_LABEL, CONCURRENT_FORMULA, OVERHEAD_FORMULA, SLOT_USE_FORMULA, SPREAD_FORMULA, TAIL_FORMULA,
    TAIL_IDLE_SMS_FORMULA, WAVES_FORMULA, ComputedLayout, MeasuredLayout, SMLayoutData,
)
from kernelscope.model import Metric
from kernelscope.render.config_panel import LIMITER_LABELS
from kernelscope.render.fmt import count, dim3, duration, plural, size_bytes, waves
from kernelscope.render.html.charts import IDLE, PALETTE, legend, pct_bar, strips, svg
from kernelscope.render.html.markup import Markup, el, kv, note, section, table
from kernelscope.render.sm_layout import (MEASURED_NOTE, concurrency_strip, idle_sms_text, overhead_text,
                                          sm_idle_text, tail_text)
from kernelscope.render.kernel_phases import not_shown, overlap_among
from kernelscope.render.warp_execution import (
    OTHER,
    choose_block,
    drawn_phases,
    no_scopes_why,
    other_phases,
    scopes_recorder,
    warp_strip,
)

STRIP_COLUMNS = 300  # time columns of a warp or SM strip: the SVG's size does not grow with events


def _src(m: Metric | None) -> str:
    if m is None:
        return "N/A"
    return m.source if m.raw_name == "" else f"{m.source}: {m.raw_name}"


def _na(m: Metric | None, fallback: str) -> str:
    return f"N/A: {m.missing_reason}" if m is not None and m.is_missing else f"N/A: {fallback}"


def config_section(k) -> Markup:
    """Panel 1: what KernelConfigPanel prints, row for row."""
    head = (f"{k.launches} launch{'es' if k.launches != 1 else ''} · total {duration(k.total_ns)} · mean "
            f"{duration(k.mean_ns)} (min {duration(k.min_ns)}, max {duration(k.max_ns)}) · "
            f"{100 * k.share_of_kernel_time:.1f}% of kernel time")
    body: list = [el("p", k.name, class_="name"), el("p", el("b", head))]
    if k.regions:
        body.append(el("p", "regions: " + ", ".join(k.regions)))
    for i, c in enumerate(k.configs):
        rows = []
        cfg, m = c.config, c.metrics
        rows.append(("Grid", f"{dim3(cfg.grid)} = {cfg.blocks:,} blocks", c.grid_source))
        warps = -(-cfg.threads_per_block // 32)
        rows.append(("Block", f"{dim3(cfg.block)} = {cfg.threads_per_block:,} threads, {warps} warps", c.block_source))
        rows.append(("Threads", f"{cfg.blocks * cfg.threads_per_block:,}", "derived: grid blocks × threads per block"))
        regs = m.get("registers_per_thread")
        rows.append(("Registers / thread", count(cfg.registers_per_thread) if cfg.registers_per_thread is not None
                     else _na(regs, "not recorded"), _src(regs)))
        smem = m.get("shared_memory_per_block_bytes")
        if cfg.shared_memory_per_block_bytes is not None:
            v = cfg.shared_memory_per_block_bytes
            rows.append(("Shared mem / block", f"{v:,} B{f' ({size_bytes(v)})' if v >= 1024 else ''}, static + dynamic",
                         _src(smem)))
        else:
            rows.append(("Shared mem / block", _na(smem, "not recorded"), _src(smem)))
        st, dy = m.get("shared_memory_static_bytes"), m.get("shared_memory_dynamic_bytes")
        if st is not None and not st.is_missing and dy is not None and not dy.is_missing:
            rows.append(("  static / dynamic", f"{st.value:,} B / {dy.value:,} B", _src(st)))
        else:
            rows.append(("  static / dynamic", _na(st, "not recorded"), ""))
        occ = c.occupancy
        if occ is None:
            rows.append(("Theoretical occupancy", f"N/A: {c.occupancy_missing_reason}", ""))
        else:
            rows.append(("Theoretical occupancy", f"{occ.theoretical_occupancy_pct:.1f}%  "
                         f"{plural(occ.active_blocks_per_sm, 'block')}/SM = {occ.active_warps_per_sm} of "
                         f"{occ.max_warps_per_sm} warps",
                         f"derived: occupancy calculator ({occ.arch})" + (f"; {occ.caveat}" if occ.caveat else "")))
            rows.append(("  limited by", " + ".join(LIMITER_LABELS[x] for x in occ.limiters), ""))
            rows.append(
                (
                    "  blocks/SM allowed by",
                    " · ".join(f"{LIMITER_LABELS[a]} {b}" for a, b in occ.blocks_limit.items()),
                    f"smem/block allocated {occ.shared_memory_allocated_per_block_bytes:,} B of "
                    f"{occ.shared_memory_config_bytes:,} B carveout",
                )
            )
        rows.append(("Waves", waves(c.waves_per_sm), f"derived: {CONFIG_WAVES_FORMULA}") if c.waves_per_sm is not None
                    else ("Waves", "N/A: needs theoretical occupancy and the SM count", ""))
        ach = m.get("achieved_occupancy_pct")
        rows.append(
            ("Achieved occupancy", f"{float(ach.value):.1f}%", _src(ach))
            if ach is not None and not ach.is_missing
            else ("Achieved occupancy", _na(ach, "needs the counter pass (ncu)"), "")
        )
        caption = (f"Configuration {i + 1} of {len(k.configs)}: {plural(c.launches, 'launch', 'launches')}, "
                   f"{duration(c.total_ns)}"
                   if len(k.configs) > 1 else None)
        body.append(table(("", "Value", "Source"), rows, caption=caption, num_from=99))
    return section(f"Kernel configuration · {k.label}", *body)


def _computed(c: ComputedLayout) -> list:
    if c.waves.is_missing:
        return [el("p", f"{c.blocks:,} blocks. Waves and tail: N/A: {c.waves.missing_reason}")]
    slots, n, last = int(c.concurrent_blocks.value), int(c.wave_count.value), int(c.last_wave_blocks.value)  # type: ignore[arg-type]
    out: list = [el("p", f"{c.blocks:,} blocks / ({c.active_blocks_per_sm} resident per SM × {c.sm_count} SMs = "
                         f"{slots:,} at once) = {waves(float(c.waves.value))} waves → {plural(n, 'wave')}")]  # type: ignore[arg-type]
    shown = list(range(n)) if n <= 6 else [0, 1, -1, n - 2, n - 1]
    rows = []
    for i in shown:
        if i < 0:
            rows.append((f"… {n - 4} more full waves", [], ""))
            continue
        blocks = last if i == n - 1 else slots
        filled = round(STRIP_COLUMNS * blocks / slots)
        rows.append((f"wave {i + 1}", [1] * filled + [0] * (STRIP_COLUMNS - filled), f"{blocks:,} of {slots:,} slots"))
    out.append(strips(rows, {1: PALETTE[0]}, label="waves"))
    v = lambda m, f="{:,}": f"N/A: {m.missing_reason}" if m.is_missing else f.format(m.value)  # noqa: E731
    out.append(el("p", tail_text(c)))
    out.append(el("p", f"Block slots used: {v(c.slot_use_pct, '{:.1f}%')} if every block takes as long"))
    out.append(note(f"derived: concurrent = {CONCURRENT_FORMULA}; waves = {WAVES_FORMULA}, rounded up for whole "
                    f"waves; last wave = {TAIL_FORMULA}; idle SMs >= {TAIL_IDLE_SMS_FORMULA}; slots used = "
                    f"{SLOT_USE_FORMULA}"))
    return out


def _sm_heatmap(m: MeasuredLayout) -> Markup:
    """One cell per SM id, darker for more blocks; hollow for an SM that ran none."""
    counts = {s.smid: len(s.block_ids) for s in m.sms}
    most = max(counts.values())
    n = max(m.sm_count or 0, max(counts) + 1)
    per_row, cell = 33, 16
    parts = []
    for i in range(n):
        x, y = (i % per_row) * cell, (i // per_row) * cell
        c = counts.get(i, 0)
        fill = "#fff" if c == 0 else f"rgba(47,111,222,{0.15 + 0.85 * c / most:.2f})"
        parts.append(el("rect", el("title", f"SM {i}: {c} blocks"), x=x + 1, y=y + 1, width=cell - 2,
                        height=cell - 2, fill=fill, stroke="#98a2b3"))
    return svg(per_row * cell, -(-n // per_row) * cell, *parts, label="blocks per SM")


def _measured(m: MeasuredLayout, theoretical: int | None, max_strips: int = 16) -> list:
    rows = [("Blocks recorded", f"{plural(m.recorded_blocks, 'row')} for {plural(m.expected_blocks, 'block')}")]
    idle = idle_sms_text(m)
    rows.append(("SMs used", f"{len(m.sms)}; {idle}"))
    peak = max((s.max_resident_blocks for s in m.sms), default=0)
    rows.append(("Waves (measured)", f"up to {m.waves} on one SM; up to {plural(peak, 'block')} resident at once on "
                 f"one SM (occupancy calculator: {'N/A' if theoretical is None else theoretical})"))
    span = "N/A: no valid record" if m.span_ns is None else duration(m.span_ns)
    step = "N/A" if m.timer_step_ns is None else duration(m.timer_step_ns)
    rows.append(("Time span", f"records {span}; trace pass {duration(m.launch_duration_ns)} (timer step {step})"))
    if m.span_ns:
        rows.append(("SM idle time", sm_idle_text(m)))
    rows.append(("Overhead", overhead_text(m)))
    out: list = [kv(rows)]
    out += [el("p", f"{'✓' if c.ok else '✗'} {c.name}: {c.detail}", class_=None if c.ok else "warn") for c in m.checks]
    out += [el("p", f"✗ buffer: {p}", class_="warn") for p in m.problems]
    if m.sms and m.span_ns:
        counts = [len(s.block_ids) for s in m.sms]
        out.append(el("h3", f"Blocks per SM (darkest = {max(counts)}, hollow = none), by %smid"))
        out.append(_sm_heatmap(m))
        by_idle = sorted(m.sms, key=lambda s: (-(s.head_idle_ns + s.gap_idle_ns + s.tail_idle_ns), s.smid))
        chosen = sorted(by_idle[:max_strips], key=lambda s: s.smid)
        what = "every SM" if len(chosen) == len(m.sms) else f"the {len(chosen)} SMs with the most idle time"
        out.append(el("h3", f"Blocks running over the span ({what}; darker = more blocks at once)"))
        shade = {str(i): f"rgba(47,111,222,{min(1.0, 0.3 + 0.2 * i):.2f})" for i in range(1, 10)} | {"+": PALETTE[0]}
        rows2 = [(f"SM {s.smid}", list(concurrency_strip(s, m.span_ns, STRIP_COLUMNS)),
                  f"{len(s.block_ids)} blk, tail idle {duration(s.tail_idle_ns)}") for s in chosen]
        out.append(strips(rows2, shade, label="blocks over time per SM"))
    out.append(note(MEASURED_NOTE + OVERHEAD_FORMULA + "; spread = " + SPREAD_FORMULA))
    return out


def sm_layout_section(d: SMLayoutData, label: str) -> Markup:
    """Panel 2, from analyze.sm_layout.SMLayoutData."""
    if d.measured is not None:
        body = _measured(d.measured, d.theoretical_blocks_per_sm)
        if d.instrumented_launches > 1:
            body.insert(0, note(f"{d.instrumented_launches} instrumented launches; showing the last"))
        return section(f"Block → SM layout · {label} · measured", *body)
    assert d.computed is not None
    body = _computed(d.computed)
    if d.configs > 1:
        body.insert(0, note(f"Configuration 1 of {d.configs} (most time)"))
    body.append(note("Not measured: no launch of this kernel was instrumented with the block recorder."))
    if (p := d.proton_sms) is not None:
        body.append(note(f"{p.recorder} scopes of one launch recorded the SM of {p.blocks_recorded:,} of its "
                         f"{p.grid_blocks:,} blocks: {p.distinct_sms:,} distinct SMs (instrument: %smid per block)"))
    return section(f"Block → SM layout · {label} · {COMPUTED_LABEL}", *body)


def _stall_rows(ws, limit: int) -> list:
    return [(s.reason, f"{float(s.cycles_per_issue.value):.2f}", Markup(pct_bar(s.share_pct) + f"{s.share_pct:.1f}%"),
             s.meaning) for s in ws.stalls[:limit]]


def warp_section(scoped, counters, label: str, max_warps: int = 32) -> Markup:
    """Panel 4 from the ScopedLaunchView: each warp of one block as a strip of its phases over time."""
    title = f"Warp execution · {label}"
    s = scoped.launch.scopes
    if s is None or not s.warps:
        return section(title, el("p", f"N/A: {no_scopes_why(s)}", class_="na"))
    block = choose_block(s, None)
    ws = sorted((w for w in s.warps if w.block_id == block), key=lambda w: w.warp)
    idle = {(i.block_id, i.warp): i for i in scoped.warp_idle}
    t0 = min(v for w in ws for v in w.start_ns)
    span = max(max(v for w in ws for v in w.end_ns) - t0, 1)
    marks = drawn_phases(s, scoped.phases)
    other_color = "#868e96"  # phases outside the busiest (PhaseSummary.busiest)
    colors = {i: (PALETTE[i % len(PALETTE)] if i in marks else other_color) for i in range(len(s.names))}
    rows = []
    for w in ws[:max_warps]:
        i = idle.get((w.block_id, w.warp))
        pct = 100.0 * i.idle / i.span if i is not None and i.span else 0.0
        rows.append((f"warp {w.warp}", warp_strip(w, t0, span, STRIP_COLUMNS),
                     f"unscoped {pct:.1f}% ({len(i.gaps) if i else 0} gaps)"))
    sm = ws[0].smid
    body: list = [el("p", f"block {block}" + (f" on SM {sm}" if sm is not None else "") + f" · {len(ws)} warps · span "
                          f"{span:,} {s.time_unit} · one column = {span / STRIP_COLUMNS:,.0f} {s.time_unit}"),
                  strips(rows, colors, label="warp phases over time")]
    if len(ws) > max_warps:
        body.append(note(f"… {len(ws) - max_warps} more warps"))
    others = other_phases(s, scoped.phases, marks)
    body.append(legend([(f"{ch}={s.names[i]}", colors[i]) for i, ch in marks.items()]
                       + ([(f"{others:,} other phases", other_color)] if others > 0 else [])
                       + [("outside any scope", IDLE)]))
    body.append(note(f"measured: {scopes_recorder(s)} scopes, {s.clock} per warp; {IDLE_FORMULA}"))
    if counters is None:
        body.append(note("Stall reasons: N/A: the counter pass (ncu) did not measure this kernel"))
    elif counters.warp_state.total_cycles_per_issue is None:
        body.append(note("Stall reasons: N/A: no warp-state counters in the ncu report"))
    else:
        body.append(table(("reason", "share"), [(st.reason, f"{st.share_pct:.1f}%")
                                                for st in counters.warp_state.stalls[:6]],
                          caption="Stall reasons (ncu, all warps)"))
        body.append(note(f"share = {counters.warp_state.share_formula}"))
    body += [el("p", f"problem: {p}", class_="warn") for p in s.problems]
    return section(title, *body)


def phases_section(scoped, label: str, overlap_limit: int = 6) -> Markup:
    """Panel 8 (inside the kernel): the phase table KernelPhasesPanel prints."""
    title = f"Kernel timeline (inside) · {label}"
    v, s = scoped.phases, scoped.launch.scopes
    if v is None:
        return section(title, el("p", f"N/A: {no_scopes_why(s)}", class_="na"))
    u = v.unit
    letters = {s.names[i]: ch for i, ch in drawn_phases(s, v).items()}
    span = "N/A" if v.block_span_median is None else f"{v.block_span_median:,.0f} {u}"
    rows = []
    shown = v.busiest
    for p in shown:
        share = "N/A" if p.share_of_block_median is None else Markup(
            pct_bar(100 * p.share_of_block_median) + f"{100 * p.share_of_block_median:.1f}%")
        rows.append(
            (
                f"{letters.get(p.name, OTHER)} {p.name}",
                f"{p.scopes:,}",
                f"{p.warps:,}",
                f"{p.per_warp_median:,.0f}",
                f"{p.per_warp_min:,}",
                f"{p.per_warp_max:,}",
                f"{p.first_start_median:,.0f}",
                share,
            )
        )
    body: list = [el("p", f"{v.blocks:,} blocks, {v.warps:,} warps recorded; median block span {span} (first to last "
                          "scope record of a block)"),
                  table(("phase", "scopes", "warps", f"per warp median ({u})", "min", "max", f"starts at ({u})",
                         "share of block"), rows)]
    if (rest := not_shown(v, len(shown))):
        body.append(note(rest))
    if v.overlaps:
        body.append(el("p", f"Overlap between phases (pipeline stages working at once){overlap_among(v)}:"))
        body.append(el("ul", *(el("li", f"{o.a} ∥ {o.b}: {100 * o.fraction_median:.1f}% of the block span (median "
                                        f"over {o.blocks:,} blocks)") for o in v.overlaps[:overlap_limit])))
    else:
        body.append(el("p", f"Overlap between phases{overlap_among(v)}: none measured (no two phases ran at once in "
                            "any block)"))
    body.append(note(f"derived: {PER_WARP_FORMULA}; share = {SHARE_FORMULA}; overlap = {OVERLAP_FORMULA}. Times in "
                     f"{u} ({s.clock}) from each block's first record."))
    body += [note(f"check: {c}") for c in v.checks]
    body += [el("p", f"problem: {p}", class_="warn") for p in v.problems]
    return section(title, *body)
