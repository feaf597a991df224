"""The session verdict as HTML: the same rows and words as the terminal's Verdict panel (render/verdict.py)."""
from __future__ import annotations

from kernelscope.render.fmt import duration
from kernelscope.render.html.markup import Markup, el, kv, note, section, table
from kernelscope.render.verdict import (KIND_NAMES, WHOLE_RUN, breakdown_rows, combined_text, evidence_text, fix_text,
                                        formula_text, gain_text, gains_title,
                                        no_gain_text, not_evaluated_lines, not_measured_text, pct, time_line,
                                        too_short_text, unranked_text, window_text)


def verdict_section(v) -> Markup:
    body: list = []
    if v.breakdown.ranks:  # the window and what it holds, then the whole run, each labelled with its span
        cols, brows = breakdown_rows(v)
        body += [kv([("Window", window_text(v))]), table(cols, brows, num_from=1)]
    body.append(kv([(WHOLE_RUN, time_line(v))]
                   + ([("By kind", f"N/A: {v.by_kind_missing}")] if not v.by_kind and v.by_kind_missing else [])))
    rows = []
    for label, shares, names in (("by kind", v.by_kind, KIND_NAMES), ("by kernel", v.by_kernel, {}),
                                 ("by region", v.by_region, {})):
        for i, r in enumerate(shares):
            rows.append((label if i == 0 else "", pct(r.share), duration(r.total_ns), names.get(r.name, r.name)))
    if rows:
        body.append(table(("", "Share", "Time", "What"), rows, num_from=1, text_cols=(3,)))  # '15 other kernels
    if v.too_short:
        body.append(el("p", too_short_text(v)))
    if v.gains:
        body.append(table(("#", "Of wall time", "Finding", "Fix"),
                          [(f"{i}.", f"{g.gain_pct:.1f}%",
                            [gain_text(g, len(v.breakdown.ranks))] + [el("div", line, class_="note") for line in
                                                                      (evidence_text(g), formula_text(g)) if line],
                            fix_text(g).removeprefix("fix: "))
                           for i, g in enumerate(v.gains, 1)], caption=gains_title(v), num_from=1, text_cols=(2, 3)))
        if combined_text(v):
            body.append(note(combined_text(v)))
    else:
        body.append(el("p", no_gain_text(v)))
    if unranked_text(v):
        body.append(note(unranked_text(v)))
    if v.not_evaluated:
        body.append(el("h3", "Not evaluated"))
        body.append(el("ul", *(el("li", line) for line in not_evaluated_lines(v))))
    if v.not_measured:
        body.append(el("h3", "Not measured"))
        body.append(el("ul", *(el("li", not_measured_text(n)) for n in v.not_measured)))
    return section("Verdict", *body, id_="verdict")
