"""Session header: device, command, outcome, and what was collected or not, and why."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.panel import Panel
from rich.table import Table

from kernelscope.model import Session
from kernelscope.render.fmt import size_bytes
from kernelscope.model import collectors as collector

_STATUS_STYLE = {"ok": "green", "partial": "yellow", "not-run": "dim", "failed": "red"}


COMMAND_CHARS = 2000  # a command drawn longer is cut: ten million arguments took minutes to lay out


def command_text(command: list[str], most: int = COMMAND_CHARS) -> str:
    """The command line as drawn: whole arguments up to ``most`` characters, then how many were left out."""
    out: list[str] = []
    used = 0
    for i, arg in enumerate(command):
        if used + len(arg) > most:
            if not out:  # one argument longer than the bound: its start (no dangling markup-escape backslash)
                out.append(arg[:most].rstrip("\\"))
                i += 1
            left = len(command) - i
            if left:
                out.append(f"… ({left:,} more argument{'s' if left != 1 else ''})")
            else:
                out.append(f"… ({len(arg) - most:,} more characters)")
            break
        out.append(arg)
        used += len(arg) + 1
    return " ".join(out)


def header_rows(s: Session) -> list[tuple[str, str]]:
    """(label, text) of the header above the collectors: device, clocks, command, when recorded or captured."""
    rows: list[tuple[str, str]] = []
    d = s.device
    if d is None:
        rows.append(("Device", "N/A (no CUDA device was recorded)"))
    else:
        parts = [f"{d.name} ({d.arch})"]
        if d.value("sm_count") is not None:
            parts.append(f"{d.value('sm_count')} SMs")
        rows.append(("Device", " · ".join(parts)))
        # the sizes on a line of their own: a narrow terminal wrapped "60.0 / MiB L2" at the end of the first
        sizes = [f"{size_bytes(v)} {what}" for key, what in (("total_memory_bytes", "memory (CUDA)"),
                                                              ("l2_cache_bytes", "L2"))
                 if (v := d.value(key)) is not None]
        if sizes:
            rows.append(("", " · ".join(sizes)))
        clocks = []
        sm_max = d.value("sm_clock_max_mhz") or (d.value("sm_clock_max_khz") or 0) // 1000 or None
        sm_now = d.value("sm_clock_mhz")
        if sm_max and sm_now is not None:
            clocks.append(f"SM {sm_now} / {sm_max} MHz max")
        elif sm_max:
            clocks.append(f"SM clock max {sm_max} MHz")
        drv = d.value("driver_version")
        if drv:
            clocks.append(f"driver {drv}")
        if clocks:
            rows.append(("", " · ".join(clocks)))
    rows.append(("Command", command_text(s.command) or "(Python API)"))
    outcome = s.outcome if s.exit_code is None else f"{s.outcome}, exit code {s.exit_code}"
    counters = s.collectors.get(collector.COUNTERS)
    details = counters.details if counters is not None else {}
    if details.get("imported"):
        # Built from a report alone: created_utc is when it was imported; ncu captured it earlier.
        captured = details.get("report_created_utc")
        text = captured if captured else f"N/A: {details.get('report_created_missing') or 'not recorded'}"
        span = details.get("results_created_utc")
        if isinstance(span, list) and len(span) == 2:  # ISO times: keep hh:mm:ss
            first, last = (str(x)[11:19] for x in span)
            text += f" · kernel results {first}" + ("" if first == last else f" to {last}")
        rows.append(("Captured (ncu report)", text))
        rows.append(("Imported", f"{s.created_utc or 'N/A'} · {outcome}"))
    else:
        rows.append(("Recorded", f"{s.created_utc or 'N/A'} · {outcome}"))
    return rows


def collector_rows(s: Session) -> list[tuple[str, str, str]]:
    """(collector, status, what follows it): each renderer styles the status its own way."""
    out = []
    for name, st in sorted(s.collectors.items()):
        text = f": {st.reason}" if st.reason else ""
        if name == collector.COUNTERS and "ranks_profiled" in st.details:  # under torchrun (rank_counters.py)
            ranks = st.details["ranks_profiled"]  # free-form details from a file: a list if it is one
            profiled = (", ".join(map(str, ranks)) if isinstance(ranks, list) else str(ranks)) or "none"
            text += f" · ranks profiled: {profiled} · NCCL kernels never profiled (they deadlock under replay)"
        out.append((name, st.status, text))
    return out


class SessionHeader:
    def __init__(self, session: Session) -> None:
        self.session = session

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold", no_wrap=True)
        t.add_column(overflow="fold")
        for label, text in header_rows(self.session):
            t.add_row(label, text)
        for name, status, text in collector_rows(self.session):
            style = _STATUS_STYLE.get(status, "")
            t.add_row(f"  {name}", (f"[{style}]{status}[/]" if style else status) + text)
        yield Panel(t, title="kernelscope session", title_align="left")
