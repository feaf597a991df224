"""The session verdict panel (analyze/verdict.py's data): where the time goes, the largest estimated
gains across the session, and what was not measured. `show` draws it right after the header.
Strings from the session come made plain (render/text.display_copy) and go into markup as they are;
each name gets its own row, so none is split across lines."""
from __future__ import annotations

from typing import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.verdict import SessionVerdict, TimeShare
from kernelscope.render.fmt import duration

KIND_NAMES = {"kernel": "kernels", "memcpy": "copies", "memset": "memsets"}


def pct(share: float | None) -> str:
    return f"{100 * share:.1f}%" if share is not None else "N/A"


def time_line(v: SessionVerdict) -> str:
    return f"{duration(v.kernel_time_ns)} of kernel time in {v.launches:,} launches of {v.kernel_count} kernels"


def gain_text(gain) -> str:
    who = "" if gain.source == "kernelscope" else " (NVIDIA's rule)"
    return f"{gain.kernel}: {gain.rule}{who}, about {gain.gain_pct:.0f}% of its time"


def unranked_text(v: SessionVerdict) -> str:
    return (
        f"{v.unranked} more findings have no kernel-time estimate; the kernels' panels list them" if v.unranked else ""
    )


def no_gain_text(v: SessionVerdict) -> str:
    counters = any(n.kernels for n in v.not_measured)
    return "Largest gains: no finding estimates a gain in kernel time" + (
        " (some kernels lack counters: see below)" if counters else "")


def not_measured_text(n) -> str:
    who = f" ({n.kernels} kernel{'s' if n.kernels != 1 else ''})" if n.kernels else ""
    return f"{n.what}{who}: {n.reason}"


GAINS_TITLE = "Largest gains: estimated share of all kernel time (the kernel's gain x its share of kernel time)"


def _rows(t: Table, label: str, rows: Sequence[TimeShare], names: dict[str, str] | None = None) -> None:
    for i, r in enumerate(rows):
        t.add_row(label if i == 0 else "", pct(r.share), duration(r.total_ns), (names or {}).get(r.name, r.name))


class VerdictPanel:
    def __init__(self, verdict: SessionVerdict) -> None:
        self.v = verdict

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        v = self.v
        head = Table.grid(padding=(0, 2))
        head.add_column(style="bold", no_wrap=True)
        head.add_column(overflow="fold")
        head.add_row("Time", time_line(v))
        if not v.by_kind and v.by_kind_missing:
            head.add_row("  by kind", f"N/A: {v.by_kind_missing}")
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold", no_wrap=True)
        t.add_column(justify="right", no_wrap=True)
        t.add_column(justify="right", no_wrap=True)
        t.add_column(overflow="fold")
        _rows(t, "  by kind", v.by_kind, KIND_NAMES)  # GPU time of kernels, copies, memsets
        _rows(t, "  by kernel", v.by_kernel)
        _rows(t, "  by region", v.by_region)
        parts: list = [head, t]
        g = Table.grid(padding=(0, 2))
        g.add_column(style="bold", no_wrap=True)
        g.add_column(justify="right", no_wrap=True)
        g.add_column(overflow="fold")
        unranked = unranked_text(v)
        if v.gains:
            parts.append(Text(GAINS_TITLE, style="bold"))
            for i, gain in enumerate(v.gains, 1):
                g.add_row(f"  {i}.", f"{gain.session_gain_pct:.1f}%", gain_text(gain))
            if unranked:
                g.add_row("", "", f"[dim]{unranked}[/]")
            parts.append(g)
        else:
            parts.append(Text(no_gain_text(v), style="bold"))
            if unranked:
                parts.append(Text(f"  {unranked}", style="dim"))
        if v.not_measured:
            parts.append(Text("Not measured", style="bold"))
            nm = Table.grid(padding=(0, 1))
            nm.add_column(no_wrap=True)
            nm.add_column(overflow="fold")
            for n in v.not_measured:
                nm.add_row("", not_measured_text(n))
            parts.append(nm)
        yield Panel(Group(*parts), title="Verdict", title_align="left")
