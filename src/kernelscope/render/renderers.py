"""Every output of a session report, behind one interface and chosen by name: the terminal view,
`show --json`, the Chrome / Perfetto trace, the roofline PNG (and, in time, an HTML report).

A renderer takes an analyze.report.Report and returns text or bytes; it computes no analysis of its
own and receives no Session. The terminal's report is built from a copy of the session with the profiled
program's strings made plain (render.text.display_copy, called by the CLI before build_report), so the
kernel selection, short names and labels are those of the plain strings; the other renderers get the report
of the session as stored (JSON keeps strings raw, the HTML page escapes them itself).
"""
from __future__ import annotations

import io
import json
from typing import Any, Protocol

from kernelscope.analyze.report import Report


class Renderer(Protocol):
    name: str
    all_kernels: bool  # without --kernel: report every kernel (True) or the top N by time (False)

    def render(self, report: Report) -> str | bytes: ...


class _Raw:
    all_kernels = False


class TerminalRenderer:
    """The Rich view of `show`, as the text (with ANSI styles when the console has colour) it prints."""

    name = "terminal"
    all_kernels = False

    def __init__(self, width: int | None = None, color: bool | None = None, banner: str | None = None,
                 all_kernels_in_table: bool = False, timeline_limit: int | None = None,
                 block: int | None = None, brief: bool = False, whole_run: bool = False) -> None:
        self.width, self.color, self.banner, self.brief, self.whole_run = width, color, banner, brief, whole_run
        self.all_kernels_in_table, self.timeline_limit, self.block = all_kernels_in_table, timeline_limit, block

    def render(self, report: Report) -> str:
        from kernelscope.render.console import make_console
        from kernelscope.render.show import COLLECTIVES_ROWS, TABLE_LIMIT, ShowView

        console = make_console(width=self.width, color=self.color)  # the terminal's width and colour, as printed
        limit = len(report.summary.kernels) if self.all_kernels_in_table else TABLE_LIMIT
        with console.capture() as out:
            console.print(ShowView(report, table_limit=limit, banner=self.banner,
                                   timeline_limit=self.timeline_limit, block=self.block, brief=self.brief,
                                   collectives_limit=None if self.all_kernels_in_table else COLLECTIVES_ROWS,
                                   whole_run=self.whole_run))
        return out.get()


class JsonRenderer(_Raw):
    """`show --json`: the kernels of the report (every kernel unless --kernel), each with its analysis."""

    name = "json"
    all_kernels = True

    def __init__(self, timeline_limit: int | None = None) -> None:
        self.timeline_limit = timeline_limit

    def document(self, report: Report) -> dict[str, Any]:
        from kernelscope.render.json_view import ranks_json, show_json

        doc = show_json(report, self.timeline_limit)
        if report.ranks is not None:  # ranks, collectives (analyze/collectives; one rank for a one-process session)
            doc.update(ranks_json(report.ranks))
        if report.memory is not None:  # run --memory: allocated / reserved over time, the peak and what was live
            from kernelscope.render.json_view import memory_json

            doc["memory"] = memory_json(report.memory)
        if report.source_lines:  # run --source / an imported report with SourceCounters: the hot lines
            from kernelscope.render.source_view import source_lines_json

            doc["source_lines"] = source_lines_json(list(report.source_lines), sass=False)
        return doc

    def render(self, report: Report) -> str:
        return json.dumps(self.document(report), indent=1, default=str) + "\n"


class ChromeRenderer(_Raw):
    """The session as a Chrome / Perfetto trace (Trace Event Format JSON)."""

    name = "chrome"

    def trace(self, report: Report):
        from kernelscope.render.chrome_trace import session_to_chrome_trace

        return session_to_chrome_trace(report.session, report.ranks)

    def render(self, report: Report) -> bytes:
        buf = io.BytesIO()
        self.trace(report).write_json(buf)
        return buf.getvalue()


class RooflinePngRenderer(_Raw):
    """The roofline of every kernel and declared region as a PNG (needs matplotlib)."""

    name = "roofline-png"

    def title(self, report: Report) -> str:
        s = report.session
        device = s.device.name if s.device else "unknown device"
        return f"roofline — {device}, {s.created_utc[:10] or 'date unknown'}"

    def render(self, report: Report) -> bytes:
        from kernelscope.render.roofline_plot import roofline_png_bytes

        a = report.analysis
        return roofline_png_bytes(tuple(k.roofline for k in a.kernels) + a.regions, a.ceilings, self.title(report))


class HtmlRenderer(_Raw):
    """`kernelscope report`: one self-contained HTML page (it escapes the session's strings itself)."""

    name = "html"

    def render(self, report: Report) -> str:
        from kernelscope.render.html import render_html

        return render_html(report)


RENDERERS: dict[str, type] = {r.name: r for r in (TerminalRenderer, JsonRenderer, ChromeRenderer,
                                                    RooflinePngRenderer, HtmlRenderer)}


def get_renderer(name: str, **options: Any) -> Renderer:
    """The renderer called ``name``, made with ``options``; ValueError naming the known ones otherwise."""
    try:
        cls = RENDERERS[name]
    except KeyError:
        raise ValueError(f"no renderer {name!r}; known: {', '.join(sorted(RENDERERS))}") from None
    return cls(**options)
