"""`kernelscope doctor` on screen: one line per check, then each distinct fix once, with the checks it fixes."""
from __future__ import annotations

from typing import Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from kernelscope.collect.doctor import LIMITED, MISSING, OK, Check

STYLE = {OK: "green", LIMITED: "yellow", MISSING: "red"}


class DoctorView:
    def __init__(self, checks: Sequence[Check]) -> None:
        self.checks = tuple(checks)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text("kernelscope doctor: what works on this machine", style="bold")
        t = Table(show_header=False, box=None, pad_edge=False, padding=(0, 1))
        t.add_column("status", no_wrap=True)
        t.add_column("check", no_wrap=True)
        t.add_column("found", overflow="fold")
        for c in self.checks:
            found = c.found if c.status == OK or not c.needed_for else f"{c.found} · needed for {c.needed_for}"
            t.add_row(Text(c.status, style=STYLE.get(c.status, "")), c.name, Text(found))
        yield t
        fixes: dict[str, list[str]] = {}  # one fix can mend several checks (the driver, torch's CUDA build)
        for c in self.checks:
            if c.status != OK and c.fix:
                fixes.setdefault(c.fix, []).append(c.name)
        if fixes:
            yield Text("To fix:", style="bold")
            f = Table(show_header=False, box=None, pad_edge=False, padding=(0, 1))
            f.add_column("checks", overflow="fold", max_width=28)
            f.add_column("fix", overflow="fold")
            for fix, names in fixes.items():
                f.add_row(", ".join(names), Text(fix))
            yield f
        ready = sum(c.status == OK for c in self.checks)
        yield Text(f"{ready} of {len(self.checks)} checks ok. show, diff, export and report read recorded sessions "
                   "and need none of these; top needs NVML.")
