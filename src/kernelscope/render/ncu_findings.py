"""NVIDIA's own guided-analysis findings from the report, largest estimated speedup first."""
from __future__ import annotations

import re

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table

from kernelscope.model import Finding
from kernelscope.render.fit import fitted_panel

_SECTION = re.compile(r"@section:[^:@]*:([^@]*)@")
_URL = re.compile(r"@url:([^:@]*):([^@]*)@")


def plain(message: str, sentences: int | None = None) -> str:
    """ncu's rule markup (@section:Id:Label@, @url:Text:Link@) as plain text, optionally its first sentences."""
    text = _URL.sub(r"\1 (\2)", _SECTION.sub(r"\1", message))
    if sentences is not None:
        parts = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)
        text = " ".join(parts[:sentences]) + (" …" if len(parts) > sentences else "")
    return text


class NcuFindingsPanel:
    def __init__(self, findings: list[Finding], title: str, limit: int = 5) -> None:
        self.findings, self.title, self.limit = findings, title, limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # ncu's notes about optional metrics it lacked are about the report, not the kernel
        shown = sorted((f for f in self.findings if f.severity in ("optimization", "warning", "error")
                        and not f.message.startswith("The optional metric")),
                       key=lambda f: -(f.speedup_pct or 0.0))[: self.limit]
        if not shown:
            return
        t = Table(box=None, padding=(0, 1), expand=True, show_header=True)
        t.add_column("Est. speedup", justify="right", no_wrap=True)
        t.add_column("Rule", no_wrap=True, style="bold")
        t.add_column("Finding", overflow="fold")
        for f in shown:
            speed = f"{f.speedup_pct:.1f}% ({f.speedup_type})" if f.speedup_pct is not None else "—"
            t.add_row(speed, f.name or f.rule_id, plain(f.message, sentences=2))
        yield fitted_panel(
            t,
            f"Nsight Compute rules · {self.title}",
            options.max_width,
            subtitle="NVIDIA's guided analysis as recorded in the report (full text: show --json)",
            subtitle_align="left",
        )
