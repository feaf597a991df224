"""The Hot lines section of the HTML report: per launch with per-line counters (run --counters --source), its
hottest source lines with a heat column (share of warp samples), top stall reasons, excess memory traffic and the
line's text. Every string goes through markup.el, which escapes it."""
from __future__ import annotations

from kernelscope.analyze.source_lines import DIVERGED_ACTIVE_THREADS, WARP_SIZE, KernelLines
from kernelscope.render.html.charts import pct_bar
from kernelscope.render.html.markup import Markup, el, note, section, table
from kernelscope.render.source_view import excess_text, line_label, pct_text, source_files, stalls_text

TITLE = "Hot lines · counters per source line"


def _rows(k: KernelLines, rows) -> list:
    several_files = len(source_files(k)) > 1
    return [(line_label(r, several_files),
             el("span", pct_bar(None if r.sample_share is None else 100 * r.sample_share, width=80),
                pct_text(r.sample_share)),
             stalls_text(r), excess_text(r),
             el("code", (r.text or ("(SASS only)" if r.line.file is None else "(text not kept)")).strip()))
            for r in rows]


def source_section(kernels: list[KernelLines]) -> Markup:
    body: list = []
    for k in kernels:
        total = "N/A (no warp samples in the report)" if k.total_samples is None else f"{k.total_samples:,.0f}"
        body.append(el("h3", f"{k.kernel} (launch {k.launch}): {k.lines_total} lines with counters, "
                              f"{total} warp samples"))
        body += [el("p", f"! {n}", class_="warn") for n in k.notes]
        head = ("Line", "Share of samples", "Top stalls", "Excess traffic, idle lanes", "Source")
        body.append(table(head, _rows(k, k.hot), num_from=1, text_cols=(2, 3, 4), caption="Hottest lines"))
        if k.by_excess:
            body.append(table(head, _rows(k, k.by_excess), num_from=1, text_cols=(2, 3, 4),
                              caption="Most excess memory traffic"))
    body.append(note("share of samples = line smsp__pcsamp_sample_count / all samples of the launch; stall share = "
                     "line samples of the reason / line samples; excess sectors = "
                     "derived__memory_l2_theoretical_sectors_global_excessive, summed over the line's instructions; "
                     "lanes active = line thread_inst_executed / inst_executed, shown at or under "
                     f"{DIVERGED_ACTIVE_THREADS:g} of {WARP_SIZE}."))
    return section(TITLE, *body, id_="source-lines")
