"""The Ranks and Collectives sections of a multi-GPU session's report: the rows and words the terminal's
panels print (render/ranks_panel.py), from the same analysis results (analyze/ranks.py, analyze/collectives.py)."""
from __future__ import annotations

from kernelscope.render.html.markup import Markup, el, esc, note, section, table
from kernelscope.render.ranks_panel import (COLLECTIVE_HEADERS, COLLECTIVE_TAIL, RANK_HEADERS, RANK_TEXT_COLUMNS,
                                            collective_cells, collective_notes, collective_origin, rank_notes,
                                            rank_rows, rank_selection)

COLLECTIVE_ROWS = 500  # rows of the collectives table (the terminal shows 20 unless --all-kernels)


def _line(text: str, kind: str) -> Markup:
    if kind == "note":
        return el("p", text, class_="warn")
    if kind == "straggler":
        return el("p", el("b", text))
    if kind in ("formula", "fact", "more", "warmup"):
        return note(text)
    return el("p", text)


def ranks_section(summary, straggler_rank: int | None = None) -> Markup:
    """The Ranks panel: per rank, kernel time by kind, overlap, waiting at collectives; imbalance and clocks. Past
    RANKS_SHOWN ranks, the first of them and the ranks that matter, as in the terminal (rank_selection)."""
    positions, left_out = rank_selection(summary, straggler_rank=straggler_rank)
    rows = [[Markup("<br>".join(esc(part) for part in c)) if isinstance(c, tuple) else c for c in row]
            for row in rank_rows(summary, positions)]  # a time and its share on two lines
    body: list = [table(RANK_HEADERS, rows, num_from=0, text_cols=RANK_TEXT_COLUMNS)]
    if left_out is not None:
        body.append(note(left_out))
    body += [_line(text, kind) for text, kind in rank_notes(summary)]
    return section(f"Ranks ({len(summary.ranks)})", *body, id_="ranks")


def collectives_section(a, limit: int = COLLECTIVE_ROWS) -> Markup:
    """The Collectives panel: each collective's per-rank arrival and wait, straggler and bus bandwidth; the run's
    straggler and each wait at a barrier."""
    title = f"Collectives ({len(a.rows)})"
    if a.missing_reason:
        return section(title, el("p", f"N/A: {a.missing_reason}", class_="na"), id_="collectives")
    origin = collective_origin(a)
    # one column of starts and waits, a line per rank (the terminal's table has two columns per rank where it
    # fits): the page stays as wide as its card with any number of ranks
    head = [*COLLECTIVE_HEADERS, "Start and wait per rank", *COLLECTIVE_TAIL]
    rows = []
    for row in a.rows[:limit]:
        first, per_rank, tail = collective_cells(row, origin)
        ranks = Markup("".join(el("div", f"r{r} {start} wait {wait}") for r, start, wait in per_rank))
        rows.append((*first, ranks, *tail))
    text_cols = (0, 2, len(COLLECTIVE_HEADERS))
    body: list = [table(head, rows, num_from=1, text_cols=text_cols)]
    lines = collective_notes(a, limit)
    waits = [text for text, kind in lines if kind == "barrier"]
    for text, kind in lines:
        if kind != "barrier":
            body.append(_line(text, kind))
    if waits:  # one line per rank that waited at a collective: folded, as they can be many
        body.append(el("details", el("summary", f"Waits at each collective ({len(waits)})"),
                       el("ul", *(el("li", w) for w in waits))))
    return section(title, *body, id_="collectives")
