"""Panel 4, Warp execution: for one block, each warp's phases over time with its idle gaps
(Proton scopes), and the ncu stall reasons of the kernel beside it when the counter pass ran."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.phases import IDLE_FORMULA, PhaseSummary, ScopedLaunchView, WarpIdle
from kernelscope.analyze.warp_state import WarpStateView
from kernelscope.model import PhaseScopes, WarpScopes
from kernelscope.render.fit import fitted_panel
from kernelscope.render.fmt import plural

IDLE = "·"
OTHER = "+"  # a phase outside the busiest (PhaseSummary.busiest), which the panels name
STYLES = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")


def scopes_recorder(scopes: PhaseScopes) -> str:
    """Who recorded the scopes, for the panels' notes: Proton, or kernelscope.cuh (CUDA C++)."""
    return "Proton" if scopes.source == "proton" else scopes.source


def no_scopes_why(scopes: PhaseScopes | None) -> str:
    if scopes is None:
        return "the kernel was not instrumented with Proton scopes"
    return f"{scopes_recorder(scopes)} recorded no scopes"


def no_scopes_panel(scopes: PhaseScopes | None, title: str, width: int = 10_000) -> Panel | None:
    """The N/A panel of a launch without phase scopes (and why), or None when it has some."""
    if scopes is not None and scopes.warps:
        return None
    return fitted_panel(Text(f"N/A: {no_scopes_why(scopes)}"), title, width)


def phase_letters(names: list[str]) -> list[str]:
    """One mark per phase: its initial, or the next free letter of its name, or a digit, or a lower-case letter;
    OTHER once those run out."""
    used: set[str] = set()
    out = []
    for n in names:
        pick = next((c.upper() for c in n if c.isascii() and c.isalnum() and c.upper() not in used), None)
        if pick is None:
            pick = next((d for d in "0123456789" + "abcdefghijklmnopqrstuvwxyz" if d not in used), OTHER)
        used.add(pick)
        out.append(pick)
    return out


def drawn_phases(s: PhaseScopes, v: PhaseSummary | None) -> dict[int, str]:
    """Scope index -> its mark, for the busiest phases (PhaseSummary.busiest); every other phase is drawn as
    OTHER and counted in the legend."""
    limit = len(v.busiest) if v is not None else 0
    shown = {p.name for p in v.busiest} if v is not None else set()
    ids = [i for i, n in enumerate(s.names) if n in shown][:limit]
    return dict(zip(ids, phase_letters([s.names[i] for i in ids])))


def other_phases(s: PhaseScopes, v: PhaseSummary | None, marks: dict[int, str]) -> int:
    """How many recorded phases a panel draws as OTHER."""
    return (len(s.names) if v is None else len(v.phases)) - len(marks)


def legend_text(s: PhaseScopes, marks: dict[int, str], others: int) -> str:
    text = "  ".join(f"{ch}={s.names[i]}" for i, ch in marks.items())
    return text + (f"  {OTHER}={others:,} other phases" if others > 0 else "") + f"  {IDLE}=outside any scope"


def warp_strip(w: WarpScopes, t0: int, span: int, width: int) -> list[int | None]:
    """Per column: the phase covering most of it (the innermost when nested ties; the first recorded when
    equal), None when idle. Each scope visits only the columns it covers."""
    best: list[int | None] = [None] * width
    best_cover = [0] * width
    best_len = [0] * width
    for sc, s, e in zip(w.scope, w.start_ns, w.end_ns):
        if e <= s:
            continue
        first = max(0, (s - t0) * width // span - 1)
        last = min(width - 1, (e - t0) * width // span + 1)
        for c in range(first, last + 1):
            lo = t0 + span * c // width
            hi = max(t0 + span * (c + 1) // width, lo + 1)
            cover = min(e, hi) - max(s, lo)
            if cover > best_cover[c] or (cover == best_cover[c] > 0 and e - s < best_len[c]):
                best[c], best_cover[c], best_len[c] = sc, cover, e - s
    return best


def choose_block(s: PhaseScopes, block: int | None) -> int | None:
    ids = sorted({w.block_id for w in s.warps})
    if not ids:
        return None
    return block if block in ids else ids[0]


class WarpExecutionPanel:
    """Draws a ``ScopedLaunchView`` and, beside it, the kernel's ncu warp state (``stalls``; None: the
    counter pass did not measure the kernel), both computed by analyze.report.build_report."""

    def __init__(self, view: ScopedLaunchView, title: str, block: int | None = None,
                 stalls: WarpStateView | None = None, max_warps: int = 32) -> None:
        self.view, self.title, self.block, self.stalls, self.max_warps = view, title, block, stalls, max_warps

    def _timeline(self, s: PhaseScopes, block: int, width: int) -> list:
        idle_of: dict[int, WarpIdle] = {id(w): i for w, i in zip(s.warps, self.view.warp_idle)}
        ws = sorted((w for w in s.warps if w.block_id == block), key=lambda w: w.warp)
        starts = [v for w in ws for v in w.start_ns]
        ends = [v for w in ws for v in w.end_ns]
        t0, span = min(starts), max(max(ends) - min(starts), 1)
        marks = drawn_phases(s, self.view.phases)
        strip_w = max(10, width - 34)
        sm = ws[0].smid
        parts: list = [Text(f"block {block}" + (f" on SM {sm}" if sm is not None else "") +
                            f" · {plural(len(ws), 'warp')} · span {span:,} {s.time_unit} · one column = "
                            f"{span / strip_w:,.0f} {s.time_unit}")]
        for w in ws[: self.max_warps]:
            line = Text(f"warp {w.warp:>2} ")
            for sc in warp_strip(w, t0, span, strip_w):
                if sc is None:
                    line.append(IDLE, style="dim")
                elif sc in marks:
                    line.append(marks[sc], style=STYLES[sc % len(STYLES)])
                else:
                    line.append(OTHER if 0 <= sc < len(s.names) else IDLE, style="dim")
            idle = idle_of[id(w)]
            pct = 100.0 * idle.idle / idle.span if idle.span else 0.0
            line.append(f" unscoped {pct:4.1f}% ({len(idle.gaps)} gaps)")
            parts.append(line)
        if len(ws) > self.max_warps:
            parts.append(Text(f"… {len(ws) - self.max_warps} more warps", style="dim"))
        legend = Text(legend_text(s, marks, other_phases(s, self.view.phases, marks)))
        parts += [legend, Text(f"measured: {scopes_recorder(s)} scopes, {s.clock} per warp; {IDLE_FORMULA}",
                               style="dim")]
        return parts

    def _stalls(self) -> list:
        if self.stalls is None:
            return [Text("Stall reasons: N/A: the counter pass (ncu) did not measure this kernel", style="dim")]
        v = self.stalls
        if v.total_cycles_per_issue is None:
            return [Text("Stall reasons: N/A: no warp-state counters in the ncu report", style="dim")]
        t = Table(box=None, padding=(0, 1), title="Stall reasons (ncu, all warps)", title_justify="left")
        t.add_column("reason", no_wrap=True)
        t.add_column("share", justify="right", no_wrap=True)
        for st in v.stalls[:6]:
            t.add_row(st.reason, f"{st.share_pct:.1f}%")
        return [t, Text(f"share = {v.share_formula}", style="dim")]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        s = self.view.launch.scopes
        title = f"Warp execution · {self.title}"
        if (na := no_scopes_panel(s, title, options.max_width)) is not None:
            yield na
            return
        block = choose_block(s, self.block)
        assert block is not None
        stalls = self._stalls()
        if options.max_width >= 110 and self.stalls is not None:
            grid = Table.grid(padding=(0, 2))
            grid.add_column(ratio=3)
            grid.add_column(ratio=1)
            grid.add_row(Group(*self._timeline(s, block, options.max_width * 3 // 4 - 4)), Group(*stalls))
            body: list = [grid]
        else:
            body = self._timeline(s, block, options.max_width - 4) + stalls
        if self.block is not None and block != self.block:
            body.append(Text(f"note: block {self.block} has no recorded scopes; showing block {block} "
                             f"({plural(len({w.block_id for w in s.warps}), 'block')} recorded)", style="yellow"))
        body += [Text(f"problem: {p}", style="yellow") for p in s.problems]
        yield fitted_panel(body, title, options.max_width)
