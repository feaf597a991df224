"""`kernelscope report`: one self-contained HTML page of a session report (analyze.report.Report).

Inline CSS and inline SVG drawn here in Python: no script, font or style is fetched when the page is
viewed, and nothing runs in it. Every string from the session is escaped (markup.el escapes all text
and attribute values). The page is aggregated: one row per kernel, lanes of busy time for the run; its
size does not grow with the number of launches beyond the timeline table's first rows.
"""
from __future__ import annotations

from kernelscope.render.html.analysis import (
    counter_sections,
    roofline_section,
    summary_section,
)
from kernelscope.render.html.kernel import config_section, phases_section, sm_layout_section, warp_section
from kernelscope.render.html.memory import memory_section
from kernelscope.render.html.markup import CSS, Markup, el, kv, render, scoped_css
from kernelscope.render.html.ranks import collectives_section, ranks_section
from kernelscope.render.html.session import (gpu_stats_section, header_section, kernel_table_section,
                                             operators_section, timeline_section)
from kernelscope.render.html.verdict import verdict_section
from kernelscope.render.verdict import in_verdict_text

__all__ = ["render_html", "render_summary_html"]


def kernel_sections(kr, verdict=None) -> list[Markup]:
    """Everything `show` draws for one selected kernel, in its order; ``verdict``: the session's, whose findings
    that name the kernel its summary shows."""
    k = kr.summary
    out = [config_section(k), sm_layout_section(kr.sm_layout, k.label)]
    if kr.scoped is not None:
        out += [warp_section(kr.scoped, kr.counters, k.label), phases_section(kr.scoped, k.label)]
    if kr.counters is not None:
        out += counter_sections(kr.counters, k.label)
    out.append(summary_section(kr.analysis, verdict.for_kernel(k.name) if verdict is not None else ()))
    return out


def render_html(report) -> str:
    """The report as one HTML document (str)."""
    s = report.session
    device = s.device.name if s.device is not None else "unknown device"
    title = f"kernelscope report · {device} · {s.created_utc[:19] or 'date unknown'}"
    nav = [el("a", "session", href="#session"), el("a", "kernels", href="#kernels")]
    kernels = []
    for i, kr in enumerate(report.kernels):
        anchor = f"kernel-{i + 1}"
        nav.append(el("a", kr.summary.label, href=f"#{anchor}"))
        kernels.append(el("div", el("h2", f"{i + 1}. {kr.summary.label}"),
                          *kernel_sections(kr, getattr(report, "verdict", None)), class_="kernel", id=anchor))
    a = report.analysis
    v = getattr(report, "verdict", None)
    opens = min((b.window_start_ns for b in v.breakdown.ranks), default=None) if v is not None else None
    tail = [roofline_section(a), timeline_section(a.timeline, report.summary, opens)]
    memory = getattr(report, "memory", None)
    if memory is not None:  # run --memory
        tail.append(memory_section(memory))
        nav.append(el("a", "memory", href="#memory"))
    lines = getattr(report, "source_lines", ())
    if lines:  # run --counters --source: the hot lines of each launch with per-line counters
        from kernelscope.render.html.source import source_section

        tail.append(source_section(list(lines)))
        nav.append(el("a", "hot lines", href="#source-lines"))
    if report.gpu_stats is not None:
        tail.append(gpu_stats_section(s, report.gpu_stats))
    nav += [el("a", "timeline", href="#timeline")] + ([el("a", "GPU stats", href="#gpu-stats")]
                                                      if report.gpu_stats is not None else [])
    ranks = getattr(report, "ranks", None)
    if ranks is not None and ranks.multi_rank:  # a multi-GPU session: the Ranks and Collectives panels, as show
        straggler = ranks.collectives.run_straggler
        tail += [ranks_section(ranks.summary, straggler.rank if straggler is not None else None),
                 collectives_section(ranks.collectives)]
        nav += [el("a", "ranks", href="#ranks"), el("a", "collectives", href="#collectives")]
    verdict = [verdict_section(report.verdict)] if getattr(report, "verdict", None) is not None else []
    ops = getattr(report, "operators", None)
    operators = [operators_section(ops)] if ops is not None and ops.rows else []
    if operators:
        nav.insert(2, el("a", "operators", href="#operators"))
    body = el("main", el("h1", title), el("nav", *nav), header_section(s), *verdict,
              kernel_table_section(report.summary), *operators,
              *kernels, *tail,
              el("p", f"Written by kernelscope {s.kernelscope_version or ''}: every number is measured by a collector, "
                      "derived by the formula shown beside it, or N/A with the reason.", class_="note"))
    head = el("head", Markup('<meta charset="utf-8">'),
              Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
              # nothing may be fetched or run: no network, no script, inline styles and SVG only
              Markup("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                     "style-src 'unsafe-inline'; img-src data:\">"),
              el("title", title), el("style", Markup(CSS)))
    return Markup("<!DOCTYPE html>\n") + render(el("html", head, el("body", body), lang="en")) + Markup("\n")


def render_summary_html(report) -> str:
    """The report's summary as an HTML fragment (a notebook cell): the session, its verdict (the same section as
    the report's), the kernel table and each selected kernel's verdict; styles scoped to the fragment, no script."""
    verdict = getattr(report, "verdict", None)
    verdicts = [(kr.summary.label, kr.analysis.verdict or "N/A") for kr in report.kernels]
    if verdict is not None:  # each kernel's line names the findings of the session's list that are about it
        verdicts = [(label, line + (f"; in the verdict: {in_verdict_text(items)}" if items else ""))
                    for (label, line), items in zip(verdicts, (verdict.for_kernel(kr.summary.name)
                                                               for kr in report.kernels))]
    body = [header_section(report.session)]
    if getattr(report, "verdict", None) is not None:
        body.append(verdict_section(report.verdict))
    body.append(kernel_table_section(report.summary))
    if verdicts:
        body.append(el("section", el("h2", "Verdicts"), kv(verdicts), class_="panel"))
    return render(el("div", el("style", Markup(scoped_css(".ks-report"))), *body, class_="ks-report"))
