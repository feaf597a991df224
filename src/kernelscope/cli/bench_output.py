"""Printing a benchmark's summary: optional first lines, the titled tables, and
the note about rows measured while the GPU was throttled (marked !)."""
from __future__ import annotations

from typing import Any, Iterable


def print_tables(results, tables: Iterable[tuple[str, Any]], width: int | None, color: bool | None,
                 file: Any = None, preface: Iterable[str] = ()) -> None:
    from kernelscope.bench.results import clock_flag_note
    from kernelscope.render.show import make_console

    console = make_console(width=width, file=file, color=color)
    for line in preface:
        console.print(line)
    for title, table in tables:
        console.print(title)
        console.print(table)
    note = clock_flag_note(results)
    if note:
        console.print(note)
