"""`kernelscope learn marlin`: one recorded launch of the W4A16 kernel, phase by phase."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.model import Metric
from kernelscope.model.packing import Phase, Walkthrough
from kernelscope.render.fmt import duration, size_bytes


def _unit(unit: str, value: float) -> str:
    """'program' -> 'programs' for counts other than one; 'register/thread' -> 'registers/thread'."""
    if not unit or value == 1:
        return unit
    head, sep, tail = unit.partition("/")
    words = head.split(" ")
    words[-1] = words[-1] if words[-1].endswith("s") else words[-1] + "s"
    return " ".join(words) + sep + tail


def figure_value(m: Metric) -> str:
    """A figure's value in its unit; N/A with the reason when it was not measured."""
    if m.is_missing:
        return f"N/A: {m.missing_reason}"
    v, unit = m.value, m.unit
    if isinstance(v, str):
        return v
    if unit in ("byte", "byte/block"):
        return f"{int(v):,} B" + (f" ({size_bytes(v)})" if v >= 1024 else "")
    if unit == "ns":
        return duration(v)
    if unit == "byte/s":
        return f"{float(v) / 1e9:,.1f} GB/s"
    if unit == "FLOP/s":
        return f"{float(v) / 1e12:,.2f} TFLOP/s"
    if unit == "FLOP/byte":
        return f"{float(v):.2f} FLOP/B"
    if unit == "%":
        return f"{float(v):.1f}%"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.2f} {_unit(unit, v)}".rstrip()
    return f"{int(v):,} {_unit(unit, v)}".rstrip()


_COLLECTOR = {"instrument": "in-kernel instrumentation", "ncu": "the counter pass (ncu)"}


def figure_source(m: Metric) -> str:
    if m.is_missing:
        return "" if m.source == "derived" else f"would come from {_COLLECTOR.get(m.source, m.source)}"
    if m.source == "derived" and m.formula:
        return m.formula
    if m.source == "user":
        return "launch parameter"
    return f"{m.source}: {m.raw_name}"


class PhaseView:
    def __init__(self, number: int, phase: Phase) -> None:
        self.number, self.phase = number, phase

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        values = [figure_value(f.metric) for f in self.phase.figures]
        longest_word = max((len(w) for v in values for w in v.split()), default=1)  # a number with its unit
        label_w = max([24, *(len(f.label) for f in self.phase.figures)])
        room = options.max_width - 4 - label_w - 6  # the panel's border and the three columns' padding
        value_w = max(min(longest_word, 24), min(max(map(len, values), default=1), room * 2 // 5))
        t = Table(box=None, padding=(0, 1), show_header=False, expand=True)
        t.add_column("", style="bold", no_wrap=True, min_width=24)
        t.add_column("", overflow="fold", width=value_w)
        t.add_column("", style="dim", overflow="fold", ratio=1)
        for f in self.phase.figures:
            t.add_row(Text(f.label), Text(figure_value(f.metric)), Text(figure_source(f.metric)))
        body = Group(Text(self.phase.what), t)
        yield Panel(body, title=f"{self.number}. {self.phase.title}", title_align="left")


class WalkthroughView:
    def __init__(self, walk: Walkthrough, banner: str | None = None) -> None:
        self.walk, self.banner = walk, banner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        w = self.walk
        if self.banner:
            yield Text(self.banner)
        yield Text.assemble(("Walkthrough · ", "bold"), (w.kernel, "bold"),
                            f" on {w.device}, recorded {w.recorded}\n{w.problem}")
        for i, p in enumerate(w.phases, 1):
            yield PhaseView(i, p)


class NeedsGpuNote:
    """Which parts of what was shown came from a GPU run, for a reader without one."""

    def __init__(self, walk: Walkthrough) -> None:
        self.walk = walk

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = [Text("Needs a GPU (shown above from the recording):", style="bold")]
        lines += [Text(f"  - {x}") for x in self.walk.needs_gpu]
        lines.append(Text("Works here without one: quantizing and packing real weights, the placement of every "
                          "nibble, the in-register unpack, and the bytes, FLOPs and intensity arithmetic."))
        yield Group(*lines)
