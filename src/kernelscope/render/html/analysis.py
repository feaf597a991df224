"""The counter panels (3 memory hierarchy, 5 memory transactions, 7 tensor cores, warp state, NVIDIA's
rules) and the profiling summary (10) of one kernel, with the verdict's findings that name it, and the session's
roofline, as HTML: the terminal panels' numbers through the same formatting helpers."""
from __future__ import annotations

from collections import defaultdict

from kernelscope.analyze.bound import UNKNOWN, Bound
from kernelscope.analyze.counters import SECTOR_BYTES
from kernelscope.render.kernel_analysis import (VendorComparisonList, comparison_line, duration_text, evidence_text,
                                               gain_cell, no_recommendation_text, pct_of_peak_text, rate_cell,
                                               roofline_text, si, throughput_parts)
from kernelscope.render.fmt import metric_cell, plural, short_cell
from kernelscope.render.counter_panels import plain, shared_na_reasons, shared_wavefront_notes
from kernelscope.render.html.charts import pct_bar, roofline
from kernelscope.render.html.markup import Markup, el, kv, note, section, table
from kernelscope.render.roofline_term import MARKS, intensity_text, input_origin, placed
from kernelscope.render.verdict import IN_VERDICT_NOTE, IN_VERDICT_TITLE, in_verdict_lines


def _pct_cell(m) -> Markup | str:
    if m is None or m.is_missing:
        return "N/A"
    return Markup(pct_bar(float(m.value)) + f"{float(m.value):.1f}%")


def counter_sections(cv, label: str) -> list[Markup]:
    """Panels 3, 5, 7, warp state and NVIDIA's findings from analyze.counters.CounterViews."""
    title = label + (f" (1st of {cv.profiled} profiled launches)" if cv.profiled > 1 else "")
    v = cv.memory
    rows = [(lv.name, _pct_cell(lv.throughput_pct), short_cell(lv.bytes) if lv.bytes else "",
             short_cell(lv.hit_rate_pct) if lv.hit_rate_pct else "") for lv in v.levels]
    mem: list = [table(("Level", "Throughput (% of peak)", "Bytes", "Hit rate"), rows),
                 kv([("DRAM read / write", f"{metric_cell(v.dram_read_bytes)} / {metric_cell(v.dram_write_bytes)}"),
                     ("Shared mem / block", f"static {metric_cell(v.shared_memory_static_bytes)} · dynamic "
                                            f"{metric_cell(v.shared_memory_dynamic_bytes)}"),
                     ("Registers / thread", metric_cell(v.registers_per_thread))])]
    for lv in v.levels:
        for what, m in (("throughput", lv.throughput_pct), ("bytes", lv.bytes), ("hit rate", lv.hit_rate_pct)):
            if m is not None and m.is_missing:
                mem.append(note(f"N/A {lv.name} {what}: {m.missing_reason}"))
    mem.append(note("% of peak are ncu's own pct_of_peak_sustained metrics; bytes and hit rates are ncu counters."))
    out = [section(f"Memory hierarchy · {title}", *mem)]

    t = cv.transactions
    g = table(("", "Requests", "Sectors", "Sectors/req", "Bytes used/sector", "Efficiency", "Wasted"),
              [(r.kind, short_cell(r.requests), short_cell(r.sectors), short_cell(r.sectors_per_request),
                short_cell(r.bytes_used_per_sector), short_cell(r.efficiency_pct), short_cell(r.wasted_bytes))
               for r in t.global_access], caption="Global memory")
    s = table(("", "Instructions", "Wavefronts", "Bank conflicts", "Wavefronts/inst"),
              [(r.kind, short_cell(r.instructions), short_cell(r.wavefronts), short_cell(r.bank_conflicts),
                short_cell(r.wavefronts_per_instruction)) for r in t.shared_access], caption="Shared memory")
    reasons: list[str] = []
    for r in t.global_access:
        m = r.bytes_used_per_sector if r.bytes_used_per_sector.is_missing else r.efficiency_pct
        if m.is_missing and f"global {r.kind}: {m.missing_reason}" not in reasons:
            reasons.append(f"global {r.kind}: {m.missing_reason}")
    out.append(section(f"Memory transactions · {title}", g, s,
                       *(note(f"N/A {x}") for x in reasons + shared_na_reasons(t)),
                       *(note(x) for x in shared_wavefront_notes(t)),
                       note(f"Efficiency = bytes used per {SECTOR_BYTES}-byte sector / {SECTOR_BYTES} (ncu's "
                            "smsp__sass_average_data_bytes_per_sector ratio); wasted = sectors x unused bytes. A "
                            "warp's 4-byte coalesced access needs 4 sectors per request.")))

    tv = cv.tensor
    pct = tv.tensor_pipe_pct
    head = (el("p", "Tensor pipe utilization ", _pct_cell(pct), f" of peak ({pct.raw_name})") if not pct.is_missing
            else el("p", f"Tensor pipe utilization N/A ({pct.missing_reason})"))
    mma = table(("MMA kind", "Instructions", "Rate"),
                [(lab, "N/A", "not in this report") if n.is_missing else
                 (lab, metric_cell(n), "" if rate.is_missing else f"{float(rate.value):.3g} inst/s")
                 for lab, n, rate in tv.mma_instructions])
    tnotes = [note("Rate = instructions / kernel duration (derived).")]
    if tv.hmma_includes_gmma:
        tnotes.append(note("HMMA and GMMA counts are equal: ncu counts the wgmma instructions on the HMMA pipe too, so "
                           "they are the same instructions, not two kinds."))
    out.append(section(f"Tensor cores · {title}", head, mma, *tnotes))

    ws = cv.warp_state
    if ws.total_cycles_per_issue is None:
        out.append(section(f"Warp state · {title}",
                           el("p", "N/A: no warp-state counters in this report (WarpStateStats section)", class_="na")))
    else:
        rest = len(ws.stalls) - 8
        out.append(section(f"Warp state · {title}", table(
            ("Stall reason", "Cycles/issue", "Share", "Meaning"),
            [(st.reason, f"{float(st.cycles_per_issue.value):.2f}",
              Markup(pct_bar(st.share_pct) + f"{st.share_pct:.1f}%"), st.meaning) for st in ws.stalls[:8]],
            num_from=1), note(f"{ws.total_cycles_per_issue:.1f} warp cycles per issued instruction in all; share = "
                              f"{ws.share_formula}." + (f" {rest} smaller reasons not shown." if rest > 0 else ""))))
    shown = sorted((f for f in cv.launch.findings if f.severity in ("optimization", "warning", "error")
                    and not f.message.startswith("The optional metric")), key=lambda f: -(f.speedup_pct or 0.0))[:5]
    if shown:
        out.append(section(f"Nsight Compute rules · {title}", table(
            ("Est. speedup", "Rule", "Finding"),
            [(f"{f.speedup_pct:.1f}% ({f.speedup_type})" if f.speedup_pct is not None else "—", f.name or f.rule_id,
              plain(f.message, sentences=2)) for f in shown], num_from=99),
            note("NVIDIA's guided analysis as recorded in the report (full text: show --json)")))
    return out


def _bound(b: Bound) -> list:
    head = b.bound if not b.limiter or b.bound == UNKNOWN else f"{b.bound} ({b.limiter})"
    out: list = [el("b", head), f": {b.reason}"]
    if b.basis:
        out.append(el("span", f" (basis: {b.basis})", class_="na"))
    if b.inside is not None:
        out.append(f"; inside the kernel: {b.inside.bound}, {b.inside.reason}")
    return out


def recommendations_table(recs, limit: int = 5, show_kernel: bool = False) -> list:
    rows = []
    for i, r in enumerate(recs[:limit], 1):
        src = "kernelscope" if r.source == "kernelscope" else "ncu rule"
        title = r.finding.title or r.finding.rule_title or r.finding.rule
        body = [el("b", title), ": ", plain(r.finding.message, sentences=3 if r.source == "kernelscope" else 1),
                el("div", f"evidence: {evidence_text(r)}", class_="note")]
        rows.append((str(i), gain_cell(r), src, *([r.short_name] if show_kernel else []), body))
    out: list = [table(("#", "Gain", "Source", *(["Kernel"] if show_kernel else []), "Finding and evidence"), rows,
                       num_from=99)]
    if len(recs) > limit:
        out.append(note(f"… and {plural(len(recs) - limit, 'more finding')} with smaller or no estimated gain"))
    bases = dict.fromkeys(f"{r.finding.rule}: {r.gain_basis}" if r.source == "kernelscope" else r.gain_basis
                          for r in recs[:limit]
                          if r.gain_pct is not None or r.local_pct is not None or r.vendor_pct is not None)
    if bases:
        out.append(note("Gain estimates: " + " · ".join(bases)))
    return out


def summary_section(k, in_verdict: tuple = ()) -> Markup:
    """Panel 10 from analyze.analysis.KernelAnalysis and the verdict's findings that name the kernel: what
    SummaryPanel prints."""
    rows: list = []
    if k.verdict:
        rows.append(("Verdict", el("b", k.verdict)))
    rows.append(("Duration", duration_text(k)))
    rows.append(("Throughput", " · ".join(throughput_parts(k))))
    known = {why for _, why in k.missing}  # reasons the missing list already gives
    rows.append(("% of peak", pct_of_peak_text(k, known)))
    rows.append(("Roofline", roofline_text(k, known)))
    rows.append(("Bottleneck", _bound(k.bound)))
    body: list = [kv(rows)]
    if in_verdict:
        body.append(el("h3", f"{IN_VERDICT_TITLE} ", el("span", f"({IN_VERDICT_NOTE})", class_="note")))
        for i, f in in_verdict:
            first, *rest = in_verdict_lines(i, f)
            # a div, not a p: a p cannot hold the div notes (the browser would close it before them)
            body.append(el("div", el("b", first), *(el("div", line, class_="note") for line in rest)))
    recs = k.recommendations
    if recs.recommendations:
        body.append(el("h3", "Recommendations ", el("span", "(best estimated gain first; gain = share of this kernel's "
                                                          "time a fix could save)", class_="note")))
        body += recommendations_table(recs.recommendations)
    else:
        body.append(el("p", f"Recommendations: {no_recommendation_text(recs.rules_run, bool(in_verdict))}"))
    differ = VendorComparisonList(k.nvidia_comparison).rows  # the rows the terminal lists
    if differ:
        body.append(note("NVIDIA's rules beside kernelscope's (where they differ):"))
        body.append(el("ul", *(el("li", comparison_line(c).plain) for c in differ), class_="note"))
    by_reason: dict[str, list[str]] = defaultdict(list)
    for what, why in k.missing:
        by_reason[why].append(what)
    for n in recs.not_evaluated:
        by_reason[n.reason].append(f"rule {n.rule}")
    if by_reason:
        body.append(note("Not shown or not evaluated:"))
        body.append(el("ul", *(el("li", f"{', '.join(w)}: {why}") for why, w in by_reason.items()), class_="note"))
    return section(f"Profiling summary · {k.kernel.label}", *body)


def roofline_section(a) -> Markup | None:
    """The roofline of every kernel and declared region (SessionAnalysis), drawn when any can be placed."""
    points = tuple(k.roofline for k in a.kernels) + a.regions
    pts = placed(points)
    if not pts:
        return None
    c = a.ceilings
    bw = None if c.memory_bandwidth.is_missing else float(c.memory_bandwidth.value)
    peaks = [(label, float(m.value)) for label, m in c.compute if not m.is_missing]
    marks = list(zip(MARKS, pts))
    chart = roofline([(mk, float(p.intensity.value), float(p.flop_rate.value)) for mk, p in marks], bw, peaks, si)
    rows = [(mk, f"{p.label} ({p.kind})", intensity_text(float(p.intensity.value)), rate_cell(p.flop_rate),
             "N/A" if p.pct_of_roof.is_missing else f"{float(p.pct_of_roof.value):.0f}% ({p.side})",
             f"{input_origin(p.flops)} / {input_origin(p.bytes)}") for mk, p in marks]
    body: list = [chart, table(("", "Kernel / region", "FLOP/byte", "FLOP/s", "% of roof", "FLOPs / bytes"), rows,
                               num_from=2)]
    reasons: dict[str, list[str]] = {}
    for p in points:
        if p not in pts:
            why = p.intensity.missing_reason if p.intensity.is_missing else p.flop_rate.missing_reason
            reasons.setdefault(str(why), []).append(p.label)
    for why, labels in reasons.items():
        shown = ", ".join(labels[:4]) + (f" and {len(labels) - 4} more" if len(labels) > 4 else "")
        body.append(note(f"Not placed: {shown}: {why}"))
    if c.missing_reason:
        body.append(note(f"Roofs: N/A ({c.missing_reason})."))
    else:
        body.append(note("Roofs (" + c.source + "): memory " + rate_cell(c.memory_bandwidth) + "; "
                         + "; ".join(f"{label} {rate_cell(m)}" for label, m in c.compute) + "."))
    return section("Roofline", *body, id_="roofline")
