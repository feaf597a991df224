"""Session header: device, command, outcome, and what was collected or not, and why."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.panel import Panel
from rich.table import Table

from kernelscope.model import Session
from kernelscope.render.fmt import size_bytes

_STATUS_STYLE = {"ok": "green", "partial": "yellow", "not-run": "dim", "failed": "red"}


class SessionHeader:
    def __init__(self, session: Session) -> None:
        self.session = session

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        s = self.session
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold", no_wrap=True)
        t.add_column(overflow="fold")
        d = s.device
        if d is None:
            t.add_row("Device", "N/A (no CUDA device was recorded)")
        else:
            parts = [f"{d.name} ({d.arch})"]
            for key, fmt in (("sm_count", "{} SMs"), ("total_memory_bytes", None), ("l2_cache_bytes", None)):
                v = d.value(key)
                if v is None:
                    continue
                if fmt:
                    parts.append(fmt.format(v))
                else:
                    parts.append(f"{size_bytes(v)} {'memory' if key == 'total_memory_bytes' else 'L2'}")
            t.add_row("Device", " · ".join(parts))
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
                t.add_row("", " · ".join(clocks))
        t.add_row("Command", " ".join(s.command) or "(Python API)")
        outcome = s.outcome if s.exit_code is None else f"{s.outcome}, exit code {s.exit_code}"
        t.add_row("Recorded", f"{s.created_utc or 'N/A'} · {outcome}")
        for name, st in sorted(s.collectors.items()):
            style = _STATUS_STYLE.get(st.status, "")
            text = f"[{style}]{st.status}[/]"
            if st.reason:
                text += f": {st.reason}"
            t.add_row(f"  {name}", text)
        yield Panel(t, title="kernelscope session", title_align="left")
