"""The session verdict panel (analyze/verdict.py's data): where the wall time goes (per rank), the findings
ranked by their gain in wall time, what no rule could evaluate and what was not measured. `show` draws it right
after the header.
Strings from the session come made plain (render/text.display_copy) and go into markup as they are;
each name gets its own row, so none is split across lines."""
from __future__ import annotations

from typing import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.breakdown import CATEGORIES, IDLE
from kernelscope.analyze.verdict import SessionVerdict, TimeShare
from kernelscope.render.counter_panels import plain
from kernelscope.render.fmt import duration, number, plural

KIND_NAMES = {"kernel": "kernels", "memcpy": "copies", "memset": "memsets"}
# The span of the kernel time and of the shares by kind, kernel and region: the whole recorded run, not the window.
WHOLE_RUN = "Whole run"


def pct(share: float | None) -> str:
    return f"{100 * share:.1f}%" if share is not None else "N/A"


def time_line(v: SessionVerdict) -> str:
    """Kernel time, launches and kernels; with copies or memsets on the GPU, also the GPU time of all kinds, which
    the 'by kind' shares divide."""
    out = (f"{duration(v.kernel_time_ns)} of kernel time in {plural(v.launches, 'launch', 'launches')} of "
           f"{plural(v.kernel_count, 'kernel')}")
    others = [KIND_NAMES.get(r.name, r.name) for r in v.by_kind if r.name != "kernel"]
    if others:
        out += (f"; {duration(sum(r.total_ns for r in v.by_kind))} of GPU time with the {' and '.join(others)}, "
                "which the shares by kind divide")
    return out


def gain_text(f, ranks: int = 1) -> str:
    """A finding in one line: what, where, and (kernel findings) its gain in the kernel's own time; the rank of a
    rank's own program finding where the session has ``ranks`` > 1."""
    who = "" if f.source == "kernelscope" else " (NVIDIA's rule)"
    where = f"{f.kernel}: " if f.kernel and f.scope == "kernel" else ""
    own = f", about {f.kernel_gain_pct:.0f}% of its time" if f.kernel_gain_pct is not None else ""
    rank = (f" (rank {f.rank})" if ranks > 1 and f.rank is not None and f.scope == "program"
            and f.rule != "straggler-rank" else "")
    return f"{where}{f.title}{who}{own}{rank}"


def fix_text(f) -> str:
    """The finding's fix: a program rule's own words, a kernel rule's message (what it saw, then what to do)."""
    if not f.fix:
        return ""
    return f"fix: {f.fix}" if f.scope == "program" else f"fix: {plain(f.fix, sentences=3)}"


IN_VERDICT_TITLE = "In the verdict"
IN_VERDICT_NOTE = ("the session's findings that name this kernel, with their place in its list; gain = share of the "
                   "window's wall time")


def in_verdict_lines(i: int, f) -> list[str]:
    """One finding of the verdict as a kernel panel shows it: place and gain, title, then fix, evidence, formula."""
    return [f"#{i} · {f.gain_pct:.1f}% of wall · {f.title}"] + [
        line for line in (fix_text(f), evidence_text(f), formula_text(f)) if line]


def in_verdict_text(items) -> str:
    """The findings that name a kernel, in one line (the notebook's kernel verdicts)."""
    return "; ".join(f"#{i} {f.title} ({f.gain_pct:.1f}% of wall)" for i, f in items)


def evidence_text(f, limit: int = 6) -> str:
    """The values that triggered the finding, as the rule named them (show --json has every one)."""
    parts = [f"{name} = {number(value)}" for name, value in f.evidence[:limit]]
    more = len(f.evidence) - limit
    return "evidence: " + "; ".join(parts) + (f"; {more} more in show --json" if more > 0 else "") if parts else ""


def formula_text(f) -> str:
    return f"gain: {f.gain_formula}" if f.gain_formula else ""


def breakdown_rows(v: SessionVerdict) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Header and rows of the wall-time breakdown: one row per category any rank spent time in, one column per
    rank (share of its window's wall time)."""
    ranks = v.breakdown.ranks
    head = ("where the wall time goes",) + tuple(f"rank {r.rank}" if len(ranks) > 1 else "share" for r in ranks)
    rows = []
    for c in CATEGORIES:
        if any(r.ns(c) for r in ranks):
            label = ("GPU idle: " + c) if c in IDLE else c
            rows.append((label,) + tuple(pct(r.ns(c) / r.wall_ns if r.wall_ns else None) for r in ranks))
    return head, rows


def window_text(v: SessionVerdict) -> str:
    """Each rank's window: its wall time, how it was chosen and the median step; ranks whose windows read the
    same are named together, and a basis shared by ranks is said once."""
    ranks = v.breakdown.ranks
    if len(ranks) == 1:
        r = ranks[0]
        step = f", median step {duration(r.median_step_ns)} ({r.step_basis.split(':')[0]})" if r.median_step_ns else ""
        return f"{duration(r.wall_ns)} of wall time, {r.window_basis}{step}"
    by_basis: dict[str, list] = {}
    for r in ranks:
        by_basis.setdefault(r.window_basis, []).append(r)
    out = []
    for basis, rs in by_basis.items():
        times = {(duration(r.wall_ns), duration(r.median_step_ns) if r.median_step_ns else "") for r in rs}
        if len(times) == 1:
            wall, step = times.pop()
            who = f"ranks {', '.join(str(r.rank) for r in rs)}" if len(rs) > 1 else f"rank {rs[0].rank}"
            out.append(f"{who}: {wall} of wall time{' each' if len(rs) > 1 else ''}, {basis}"
                       + (f", median step {step}" if step else ""))
        else:
            each = ", ".join(f"rank {r.rank} {duration(r.wall_ns)}"
                             + (f" (median step {duration(r.median_step_ns)})" if r.median_step_ns else "")
                             for r in rs)
            out.append(f"{each} of wall time, {basis}")
    return "; ".join(out)


def unranked_text(v: SessionVerdict) -> str:
    return (
        f"{plural(v.unranked, 'more finding has', 'more findings have')} no kernel-time estimate; the kernels' panels "
        "list them" if v.unranked else ""
    )


def no_gain_text(v: SessionVerdict) -> str:
    counters = any(n.kernels for n in v.not_measured)
    return "Findings: no rule estimates a gain in wall time" + (
        " (some kernels lack counters: see below)" if counters else "")


def too_short_text(v: SessionVerdict) -> str:
    """Why the program was not judged (its window too short), empty when it was."""
    return f"Program findings: none given, the session is too short to judge: {v.too_short}" if v.too_short else ""


def not_evaluated_lines(v: SessionVerdict) -> list[str]:
    """The rules that could not run, those with one reason named together (a session too short to judge gives
    every program rule the same one), in the verdict's order."""
    by_reason: dict[str, list[str]] = {}
    for n in v.not_evaluated:
        by_reason.setdefault(n.reason, []).append(n.rule)
    return [f"{', '.join(rules)}: " + ("not run, the session is too short to judge (above)" if reason == v.too_short
                                       else reason) for reason, rules in by_reason.items()]


def not_measured_text(n) -> str:
    who = f" ({n.kernels} kernel{'s' if n.kernels != 1 else ''})" if n.kernels else ""
    return f"{n.what}{who}: {n.reason}"


GAINS_TITLE = "Findings, largest estimated gain first (share of the window's wall time)"


def gains_title(v: SessionVerdict) -> str:
    """GAINS_TITLE, and where a finding comes before a larger one (its fix is the larger one's first step, as
    host syncs before a CUDA graph), that it does."""
    gains = [f.gain_pct for f in v.gains]
    if all(a >= b for a, b in zip(gains, gains[1:])):
        return GAINS_TITLE
    return GAINS_TITLE + "; a finding whose fix another needs first comes before it"


def combined_text(v: SessionVerdict) -> str:
    if v.combined_gain_pct is None or len(v.findings) < 2:
        return ""
    return (f"together at most {v.combined_gain_pct:.1f}% of the wall time: gains that claim the same time are "
            "combined, not added")


def _rows(t: Table, label: str, rows: Sequence[TimeShare], names: dict[str, str] | None = None) -> None:
    for i, r in enumerate(rows):
        t.add_row(label if i == 0 else "", pct(r.share), duration(r.total_ns), (names or {}).get(r.name, r.name))


class VerdictPanel:
    def __init__(self, verdict: SessionVerdict) -> None:
        self.v = verdict

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        v = self.v
        parts: list = []
        if v.breakdown.ranks:  # the window and what it holds, then the whole run, each labelled with its span
            parts += [_labelled("Window", window_text(v)), *_breakdown_table(v)]
        whole = _labelled(WHOLE_RUN, time_line(v))
        if not v.by_kind and v.by_kind_missing:
            whole.add_row("  by kind", f"N/A: {v.by_kind_missing}")
        parts.append(whole)
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold", no_wrap=True)
        t.add_column(justify="right", no_wrap=True)
        t.add_column(justify="right", no_wrap=True)
        t.add_column(overflow="fold")
        _rows(t, "  by kind", v.by_kind, KIND_NAMES)  # GPU time of kernels, copies, memsets
        _rows(t, "  by kernel", v.by_kernel)
        _rows(t, "  by region", v.by_region)
        parts.append(t)
        parts += _findings(v)
        parts += _listed("Not evaluated", not_evaluated_lines(v))
        parts += _listed("Not measured", [not_measured_text(n) for n in v.not_measured])
        yield Panel(Group(*parts), title="Verdict", title_align="left")


def _labelled(label: str, text: str) -> Table:
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold", no_wrap=True)
    g.add_column(overflow="fold")
    g.add_row(label, text)
    return g


def _breakdown_table(v: SessionVerdict) -> list:
    if not v.breakdown.ranks:
        return []
    cols, rows = breakdown_rows(v)
    b = Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False)
    b.add_column(cols[0], style="bold", overflow="fold", min_width=12)
    for c in cols[1:]:
        b.add_column(c, justify="right", no_wrap=True)
    for row in rows:
        b.add_row(*row)
    return [b]


def _findings(v: SessionVerdict) -> list:
    short = [Text(too_short_text(v), style="bold")] if v.too_short else []
    return short + _gains(v)


def _gains(v: SessionVerdict) -> list:
    unranked = unranked_text(v)
    if not v.gains:
        return [Text(no_gain_text(v), style="bold")] + ([Text(f"  {unranked}", style="dim")] if unranked else [])
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold", no_wrap=True)
    g.add_column(justify="right", no_wrap=True)
    g.add_column(overflow="fold")
    for i, f in enumerate(v.gains, 1):
        g.add_row(f"  {i}.", f"{f.gain_pct:.1f}%", Text.from_markup(gain_text(f, len(v.breakdown.ranks))))
        for line in (fix_text(f), evidence_text(f), formula_text(f)):
            if line:
                g.add_row("", "", f"[dim]{line}[/]")  # display-copy strings: markup already escaped
    more = len(v.findings) - len(v.gains)
    notes = [f"{more} smaller finding{'s' if more != 1 else ''}: show --json lists every one" if more > 0 else "",
             combined_text(v), unranked]
    for n in notes:
        if n:
            g.add_row("", "", f"[dim]{n}[/]")
    return [Text(gains_title(v), style="bold"), g]


def _listed(title: str, lines: list[str]) -> list:
    if not lines:
        return []
    t = Table.grid(padding=(0, 1))
    t.add_column(no_wrap=True)
    t.add_column(overflow="fold")
    for line in lines:
        t.add_row("", line)
    return [Text(title, style="bold"), t]
