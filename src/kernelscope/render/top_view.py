"""What `kernelscope top` draws: one panel per GPU with bars, short histories and processes."""
from __future__ import annotations

from collections import deque
from typing import Callable, Sequence

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.gpu_stats import decode_throttle_reasons, limiting_reasons
from kernelscope.model import DeviceReading, Metric
from kernelscope.render.fmt import size_bytes
from kernelscope.render.gpu_stats import sparkline, value_text

HISTORY_LEN = 40  # readings kept per field for the history sparkline

# (label, field, ceiling field or None for 0..100 %)
ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("GPU util", "gpu_utilization_pct", None),
    ("memory busy", "memory_utilization_pct", None),
    ("SM activity", "sm_activity_pct", None),
    ("SM occupancy", "sm_occupancy_pct", None),
    ("tensor", "tensor_activity_pct", None),
    ("DRAM BW", "dram_bandwidth_util_pct", None),
    ("memory", "memory_used_bytes", "memory_total_bytes"),
    ("SM clock", "sm_clock_mhz", "sm_clock_max_mhz"),
    ("mem clock", "memory_clock_mhz", "memory_clock_max_mhz"),
    ("power", "power_w", "power_limit_w"),
    ("temperature", "temperature_c", None),
)
_NO_BAR = {"temperature_c"}


class History:
    """The last HISTORY_LEN values of each field of each GPU (None where NVML gave none)."""

    def __init__(self) -> None:
        self.series: dict[tuple[int, str], deque[float | None]] = {}

    def add(self, readings: Sequence[DeviceReading]) -> None:
        for r in readings:
            for _, key, _ in ROWS:
                v = r.sample.value(key)
                self.series.setdefault((r.index, key), deque(maxlen=HISTORY_LEN)).append(
                    float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None)

    def get(self, index: int, key: str) -> list[float | None]:
        return list(self.series.get((index, key), ()))


def bar(frac: float, width: int) -> str:
    filled = round(min(1.0, max(0.0, frac)) * width)
    return "█" * filled + "░" * (width - filled)


def _num(m: Metric | None) -> float | None:
    if m is None or m.is_missing or isinstance(m.value, bool) or not isinstance(m.value, (int, float)):
        return None
    return float(m.value)


class DevicePanel:
    def __init__(self, reading: DeviceReading, history: History | None, bar_width: int = 20) -> None:
        self.r, self.history, self.bar_width = reading, history, bar_width
        self._last_reason: str | None = None

    def _row(self, t: Table, label: str, key: str, ceiling_key: str | None) -> None:
        m = self.r.sample.metrics.get(key)
        if m is None:
            return
        if m.is_missing:
            # the reason wraps rather than being cut; a reason just given is not repeated
            why = "(the same reason)" if m.missing_reason == self._last_reason else m.missing_reason or ""
            self._last_reason = m.missing_reason
            t.add_row(label, "", "N/A", Text(why, style="dim", overflow="fold", no_wrap=False))
            return
        v = _num(m)
        top = _num(self.r.sample.metrics.get(ceiling_key)) if ceiling_key else (100.0 if m.unit == "%" else None)
        shown = value_text(v, m.unit)
        if top:
            shown += f" / {value_text(top, m.unit)}" if m.unit != "%" else ""
        b = bar(v / top, self.bar_width) if top and key not in _NO_BAR and v is not None else ""
        hist = self.history.get(self.r.index, key) if self.history else []
        lo, hi = (0.0, top) if top else (min((h for h in hist if h is not None), default=0.0),
                                          max((h for h in hist if h is not None), default=1.0))
        t.add_row(label, b, shown, sparkline(hist, lo, hi) if len(hist) > 1 else "")

    def _extra(self) -> list[Text]:
        s = self.r.sample
        out = []
        tx, rx = s.metrics.get("pcie_tx_bytes_per_s"), s.metrics.get("pcie_rx_bytes_per_s")
        if tx is not None and rx is not None:
            if tx.is_missing and rx.is_missing:
                out.append(Text(f"PCIe         N/A: {tx.missing_reason}", style="dim"))
            else:
                out.append(Text(f"PCIe         TX {value_text(_num(tx), 'B/s')} · RX {value_text(_num(rx), 'B/s')}"))
        mask = s.metrics.get("throttle_reasons")
        if mask is not None and mask.is_missing:
            out.append(Text(f"clock events N/A: {mask.missing_reason}", style="dim"))
        elif mask is not None and isinstance(mask.value, int):
            names = decode_throttle_reasons(mask.value)
            held = limiting_reasons(mask.value)
            text = ", ".join(names) if names else "none"
            out.append(Text(f"clock events {text}", style="bold yellow" if held else ""))
        return out

    def _processes(self) -> Table | Text:
        if self.r.processes_missing_reason:
            return Text(f"processes: N/A: {self.r.processes_missing_reason}", style="dim")
        if not self.r.processes:
            return Text("processes: none", style="dim")
        t = Table(box=None, header_style="bold", padding=(0, 1), show_edge=False)
        t.add_column("PID", justify="right", no_wrap=True)
        t.add_column("Process", overflow="fold")
        t.add_column("GPU memory", justify="right", no_wrap=True)
        for p in sorted(self.r.processes, key=lambda p: -(_num(p.used_memory) or 0)):
            name = str(p.name.value) if not p.name.is_missing else f"N/A: {p.name.missing_reason}"
            mem = (
                size_bytes(_num(p.used_memory))
                if not p.used_memory.is_missing
                else f"N/A: {p.used_memory.missing_reason}"
            )
            t.add_row(str(p.pid), name, mem)
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        t = Table.grid(padding=(0, 1), expand=True)
        t.add_column(style="bold", no_wrap=True, width=12)
        t.add_column(no_wrap=True, width=self.bar_width)
        t.add_column(no_wrap=True, justify="right", width=21)
        t.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
        self._last_reason = None
        for label, key, ceiling in ROWS:
            self._row(t, label, key, ceiling)
        name = self.r.name.value if not self.r.name.is_missing else "N/A"
        yield Panel(Group(t, *self._extra(), self._processes()), title=f"GPU {self.r.index} · {name}",
                    title_align="left")


class TopView:
    def __init__(self, readings: Sequence[DeviceReading], history: History | None = None, driver: str | None = None,
                 footer: str | None = None, unreadable: Sequence[str] = ()) -> None:
        self.readings, self.history, self.driver, self.footer = readings, history, driver, footer
        self.unreadable = unreadable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        head = f"kernelscope top · {len(self.readings)} GPU(s)"
        if self.driver:
            head += f" · driver {self.driver}"
        yield Text(head, style="bold")
        for r in self.readings:
            yield DevicePanel(r, self.history)
        for line in self.unreadable:
            yield Text(line, style="yellow")
        if self.footer:
            yield Text(self.footer, style="dim")


def snapshot_view(readings: Sequence[DeviceReading], driver: str | None, unreadable: Sequence[str] = ()) -> TopView:
    """`top --once`: one reading of every GPU, its strings (process and device names) made plain text."""
    from kernelscope.render.text import display_copy

    return TopView(display_copy(readings), None, driver, unreadable=unreadable)


def live_dashboard(console: Console, read: Callable[[], Sequence[DeviceReading]], driver: str | None, footer: str,
                   unreadable: Callable[[], Sequence[str]], iterations: int | None,
                   wait: Callable[[], bool]) -> None:
    """`top`: read, draw in place, wait; until ``iterations`` refreshes or ``wait`` says quit (True)."""
    from rich.live import Live

    from kernelscope.render.text import display_copy

    history = History()
    done = 0
    with Live(console=console, auto_refresh=False, transient=False) as live:
        while True:
            readings = read()
            history.add(readings)
            live.update(TopView(display_copy(readings), history, driver, footer, unreadable()), refresh=True)
            done += 1
            if iterations is not None and done >= iterations:
                break
            if wait():
                break
