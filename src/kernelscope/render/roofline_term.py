"""The roofline in the terminal: log-log character plot of FLOP/s against FLOP/byte,
with the measured roofs when a calibration exists, and a legend with the numbers."""
from __future__ import annotations

import math

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel

from kernelscope.analyze.roofline import Ceilings, RooflinePoint
from kernelscope.render.fit import Column, fit_tables
from kernelscope.render.kernel_analysis import rate_cell
from kernelscope.render.fmt import si
from kernelscope.render.text import plain

MARKS = "123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def placed(points: tuple[RooflinePoint, ...]) -> list[RooflinePoint]:
    return [p for p in points if not p.intensity.is_missing and not p.flop_rate.is_missing
            and float(p.intensity.value) > 0 and float(p.flop_rate.value) > 0]


def input_origin(m) -> str:
    """Where a roofline input came from, briefly: declared by the user, or the counter's name."""
    return {"user": "declared"}.get(m.source, m.raw_name if m.source == "ncu" else "SASS counters")


def intensity_text(v: float) -> str:
    """FLOP/byte: whole numbers from 100 up (a 3-digit .3g would print 1,000 as 1e+03), else 3 digits."""
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _decades(lo: float, hi: float) -> tuple[int, int]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return a, max(b, a + 1)


class RooflineChart:
    def __init__(self, points: tuple[RooflinePoint, ...], ceilings: Ceilings, height: int = 14) -> None:
        self.points, self.ceilings, self.height = points, ceilings, height

    def _grid(self, pts: list[RooflinePoint], width: int) -> list[str]:
        c = self.ceilings
        xs = [float(p.intensity.value) for p in pts]
        ys = [float(p.flop_rate.value) for p in pts]
        bw = None if c.memory_bandwidth.is_missing else float(c.memory_bandwidth.value)
        peak = max((float(m.value) for _, m in c.compute), default=None)
        if bw and peak:
            xs.append(peak / bw)  # the ridge point
            ys.append(peak)
        x0, x1 = _decades(min(xs) / 2, max(xs) * 2)
        y0, y1 = math.log10(min(ys) / 2), math.log10(max(ys) * 2)  # not whole decades: points would bunch up
        h, w = self.height, width
        grid = [[" "] * w for _ in range(h)]

        def col(x: float) -> int:
            return min(w - 1, max(0, round((math.log10(x) - x0) / (x1 - x0) * (w - 1))))

        def row(y: float) -> int | None:
            r = round((y1 - math.log10(y)) / (y1 - y0) * (h - 1))
            return r if 0 <= r < h else None

        if bw or peak:
            for i in range(w):
                x = 10 ** (x0 + i / (w - 1) * (x1 - x0))
                roofs = [v for v in ((x * bw) if bw else None, peak) if v is not None]
                y = min(roofs)
                r = row(y)
                if r is not None:
                    grid[r][i] = "─" if peak is not None and y >= peak else "╱"
        for mark, p in zip(MARKS, pts):
            r = row(float(p.flop_rate.value))
            if r is not None:
                i = col(float(p.intensity.value))
                grid[r][i] = "+" if grid[r][i] in MARKS else mark  # "+": several points in one cell
        labels = {}
        for d in range(math.ceil(y0), math.floor(y1) + 1):
            r = row(10 ** d)
            if r is not None:
                labels[r] = si(10 ** d, "FLOP/s")
        if len(labels) < 2:  # less than two decades tall: name the top and bottom rows too
            labels.setdefault(0, si(10 ** y1, "FLOP/s"))
            labels.setdefault(h - 1, si(10 ** y0, "FLOP/s"))
        lines = [f"{labels.get(r, ''):>13} │{''.join(grid[r])}" for r in range(h)]
        axis = [" "] * w
        tick_line = [" "] * (w + 15)
        for d in range(x0, x1 + 1):
            i = col(10 ** d)
            axis[i] = "┴"
            text = f"{10 ** d:g}"
            start = min(15 + i, len(tick_line) - len(text))
            if all(ch == " " for ch in tick_line[max(0, start - 1): start + len(text)]):
                tick_line[start: start + len(text)] = list(text)
        lines.append(" " * 14 + "└" + "".join(axis))
        lines.append("".join(tick_line).rstrip())
        lines.append(" " * 15 + "arithmetic intensity, FLOP/byte (log scale); marks are the rows below, "
                     "+ several in one cell")
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        pts = placed(self.points)
        c = self.ceilings
        # The ceilings come from a calibration file, not the session's display copy: its date, device name
        # and path are made plain here.
        if c.missing_reason:
            roofs = f"Roofs: N/A ({plain(c.missing_reason)})."
        else:
            roofs = "Roofs (" + plain(c.source) + "): memory " + rate_cell(c.memory_bandwidth) + "; " + "; ".join(
                f"{label} {rate_cell(m)}" for label, m in c.compute) + "."
        parts: list = []
        if pts:
            width = max(30, min(90, options.max_width - 22))
            parts.append("\n".join(self._grid(pts, width)))
            cols = [Column("", "left"), Column("Kernel / region", "left", wrap=True, min_width=20),
                    Column("FLOP/byte"), Column("FLOP/s"), Column("% of roof"),
                    Column("FLOPs / bytes", "left", wrap=True, min_width=16)]
            rows = []
            for mark, p in zip(MARKS, pts):
                pct = "N/A" if p.pct_of_roof.is_missing else f"{float(p.pct_of_roof.value):.0f}% ({p.side})"
                rows.append((mark, f"{p.label} ({p.kind})", intensity_text(float(p.intensity.value)),
                             rate_cell(p.flop_rate), pct, f"{input_origin(p.flops)} / {input_origin(p.bytes)}"))
            # what does not fit beside the numbers goes to a second table, keyed by the mark and name
            parts += fit_tables(options.max_width - 4, cols, rows, keys=2)
        else:
            parts.append("No kernel or region has both FLOPs and bytes, so none can be placed.")
        unplaced = [p for p in self.points if p not in pts]
        reasons: dict[str, list[str]] = {}
        for p in unplaced:
            why = p.intensity.missing_reason if p.intensity.is_missing else p.flop_rate.missing_reason
            reasons.setdefault(str(why), []).append(p.label)
        for why, labels in reasons.items():
            shown = ", ".join(labels[:4]) + (f" and {len(labels) - 4} more" if len(labels) > 4 else "")
            parts.append(f"[dim]Not placed: {shown}: {why}[/]")
        parts.append(f"[dim]{roofs}[/]")
        yield Panel(Group(*parts), title="Roofline", title_align="left")
