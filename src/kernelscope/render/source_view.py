"""`show --source`: each kernel's hottest source lines (share of warp samples, top stall reasons, excess
memory traffic, the line's text), and with ``--sass`` the SASS instructions under each line. Source text is
drawn escaped (model/escape.visible) and as plain Text: nothing in a source file is read as markup."""
from __future__ import annotations

from typing import Any, Callable

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.source_lines import DIVERGED_ACTIVE_THREADS, WARP_SIZE, KernelLines, LineRank
from kernelscope.model.escape import visible
from kernelscope.model.source_lines import COUNT_METRICS

NO_SOURCE = ("no launch in this session has per-line counters: record them with `kernelscope run --counters "
             "--source`, or import an .ncu-rep recorded with --section SourceCounters --import-source yes")


def plain(sentence: str) -> Text:
    """A sentence drawn as plain text (escaped: no markup, no terminal codes)."""
    return Text(visible(sentence))


def pct_text(v: float | None) -> str:
    return "N/A" if v is None else f"{100 * v:.1f}%"


def _num(v: float | None) -> str:
    if v is None:
        return "N/A"
    return f"{v:,.0f}" if v == int(v) else f"{v:,.2f}"


def excess_text(r: LineRank) -> str:
    parts = []
    if r.excess_sectors:
        ratio = f" ({r.sectors / r.ideal_sectors:.1f}x ideal)" if r.sectors and r.ideal_sectors else ""
        parts.append(f"{_num(r.excess_sectors)} sectors{ratio}")
    if r.excess_wavefronts:
        parts.append(f"{_num(r.excess_wavefronts)} smem wavefronts"
                     + (f" ({r.conflict_ways:.0f}-way)" if r.conflict_ways and r.conflict_ways > 1 else ""))
    if r.local_sectors:
        parts.append(f"{_num(r.local_sectors)} local sectors")
    if r.active_threads is not None and r.active_threads <= DIVERGED_ACTIVE_THREADS:
        parts.append(f"{r.active_threads:.1f} of {WARP_SIZE} lanes active")
    return "; ".join(parts) or "-"


def source_files(k: KernelLines) -> list[str]:
    """The files the kernel's hot lines come from (a Triton kernel's lines may also be in triton/language)."""
    return sorted({r.location.rsplit(":", 1)[0] for r in k.hot + k.by_excess if r.line.file is not None})


def line_label(r: LineRank, several_files: bool) -> str:
    """The line number; with the file's name when the kernel's lines come from several files (a bare number
    would read as a line of the kernel's own file)."""
    if r.line.file is None:
        return "-"
    if several_files:
        return f"{r.location.rsplit(':', 1)[0].rsplit('/', 1)[-1]}:{r.line.line}"
    return str(r.line.line)


def stalls_text(r: LineRank) -> str:
    return ", ".join(f"{reason} {100 * share:.0f}%" for reason, share in r.stalls) or "-"


class SourcePanel:
    """One kernel's hot lines. ``tag``: an extra column (named ``tag_name``) with a label per line, e.g. the phase
    its SASS opcodes belong to (analyze/source_lines.line_phase)."""

    def __init__(self, k: KernelLines, sass: bool = False, tag: Callable[[LineRank], str | None] | None = None,
                 tag_name: str = "", title: str | None = None) -> None:
        self.k, self.sass, self.tag, self.tag_name, self.title = k, sass, tag, tag_name, title

    def _table(self, rows: list[LineRank], several_files: bool = False) -> Table:
        t = Table(box=None, pad_edge=False, show_edge=False, expand=False)
        names = [("line", "right"), ("samples", "right")] + ([(self.tag_name, "left")] if self.tag else [])
        for name, just in names + [("top stalls", "left"), ("excess traffic, idle lanes", "left"), ("source", "left")]:
            t.add_column(name, justify=just, overflow="fold")
        for r in rows:
            line = line_label(r, several_files)
            text = r.text if r.text is not None else ("(SASS only)" if r.line.file is None else "(text not kept)")
            tag = [Text(visible(self.tag(r) or "-"))] if self.tag else []
            t.add_row(Text(line), Text(pct_text(r.sample_share)), *tag, Text(stalls_text(r)), Text(excess_text(r)),
                      Text(visible(text.strip())))
            if self.sass:
                for ins in sorted(r.line.instructions, key=lambda i: i.pc_offset):
                    share = (ins.counts.get("samples", 0.0) / self.k.total_samples
                             if self.k.total_samples and "samples" in ins.counts else None)
                    extra = []
                    if ins.counts.get("global_sectors_excessive"):
                        extra.append(f"{_num(ins.counts['global_sectors_excessive'])} sectors")
                    if ins.counts.get("shared_wavefronts_excessive"):
                        extra.append(f"{_num(ins.counts['shared_wavefronts_excessive'])} smem wavefronts")
                    if ins.counts.get("local_sectors"):
                        extra.append(f"{_num(ins.counts['local_sectors'])} local sectors")
                    top = sorted(ins.stalls.items(), key=lambda kv: -kv[1])[:2]
                    t.add_row(Text(f"+{ins.pc_offset:04x}"), Text(pct_text(share)), *([Text("")] if self.tag else []),
                              Text(", ".join(f"{k} {_num(v)}" for k, v in top) or "-"),
                              Text("; ".join(extra) or "-"), Text("  " + visible(ins.sass)))
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        k = self.k
        parts: list[Any] = []
        files = source_files(k)
        total = "N/A (no warp samples in the report)" if k.total_samples is None else f"{k.total_samples:,.0f}"
        parts.append(Text(visible(f"{k.lines_total} lines with counters; warp samples: {total}"
                                  + (f"; file: {', '.join(files)}" if files else ""))))
        for note in k.notes:
            parts.append(Text(visible(note)))
        parts.append(Text("Hottest lines (share of warp samples):"))
        parts.append(self._table(k.hot, len(files) > 1))
        if k.by_excess:
            parts.append(Text("Most excess memory traffic (beyond the ideal for the bytes used):"))
            parts.append(self._table(k.by_excess, len(files) > 1))
        yield Panel(Group(*parts), title=Text(visible(self.title or f"Hot lines: {k.kernel} (launch {k.launch})")),
                    title_align="left")


class SourceView:
    def __init__(self, kernels: list[KernelLines], sass: bool = False) -> None:
        self.kernels, self.sass = kernels, sass

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.kernels:
            yield Text(NO_SOURCE)
        for k in self.kernels:
            yield SourcePanel(k, self.sass)


def _line_json(r: LineRank, sass: bool) -> dict[str, Any]:
    d: dict[str, Any] = {
        "location": r.location, "line": r.line.line, "text": r.text, "samples": r.samples,
        "sample_share": r.sample_share, "top_stalls": [{"reason": s, "share": v} for s, v in r.stalls],
        "counts": dict(r.line.counts),
    }
    if sass:
        d["instructions"] = [i.to_dict() for i in r.line.instructions]
    return d


def source_lines_json(kernels: list[KernelLines], sass: bool = True) -> list[dict[str, Any]]:
    """The `source_lines` part of `show --json`."""
    return [{
        "kernel": k.kernel, "launch": k.launch, "total_samples": k.total_samples, "lines_with_counters": k.lines_total,
        "notes": list(k.notes), "hot": [_line_json(r, sass) for r in k.hot],
        "by_excess": [_line_json(r, sass) for r in k.by_excess],
        "count_metrics": dict(COUNT_METRICS),  # each count's ncu metric, summed over the line's instructions
        "formulas": {"sample_share": "line smsp__pcsamp_sample_count / all samples of the launch",
                     "stall share": "line smsp__pcsamp_warps_issue_stalled_<reason> / line samples",
                     "excess sectors": "derived__memory_l2_theoretical_sectors_global_excessive, summed over the line",
                     "shared_conflicts_nway": "the largest of the line's instructions (not a sum)"},
    } for k in kernels]
