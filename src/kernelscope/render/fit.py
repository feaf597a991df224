"""Fitting panels to the terminal without cutting a number.

Rich shortens a cell that does not fit ("524,2…"), and at 80 columns (its width when
output is piped) many tables do not fit. Here a number column keeps its full width
(no_wrap, never shortened); names and prose may wrap (a long name folds onto the next
line); columns that do not fit next to the others move to a further table that repeats
the row's key columns; a panel title too long for the border moves its tail into the body.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class Column:
    header: str
    justify: str = "right"
    wrap: bool = False  # prose or a name: may wrap at spaces and fold a long word; numbers never wrap
    min_width: int = 12  # a wrapping column narrower than this moves to the next table instead
    style: str | None = None


def cell_width(value: Any) -> int:
    """Cells the widest line of a cell takes: str as console markup, or a Text."""
    text = value if isinstance(value, Text) else Text.from_markup(str(value))
    return max((cell_len(line) for line in text.plain.splitlines()), default=0)


def _natural(col: Column, cells: Sequence[Any]) -> int:
    widths = [cell_width(c) for c in cells]
    head = max((cell_len(w) for w in col.header.split()), default=0) if col.wrap else cell_len(col.header)
    return max([head, *widths])


def fit_tables(width: int, columns: Sequence[Column], rows: Sequence[Sequence[Any]], keys: int = 1,
               padding: int = 1, **table_kw: Any) -> list[Table]:
    """Tables of ``rows`` that fit ``width`` cells with no cell shortened.

    The first ``keys`` columns (what a row is) begin every table; the others follow in order
    and, when one does not fit beside those already placed, it and the rest go to the next
    table. A wrapping key column is held to at most 2/5 of the width so numbers have room.
    ``table_kw`` goes to every Table (box=None unless given); the title only to the first.
    """
    table_kw.setdefault("box", None)
    per_col = 2 * padding + (1 if table_kw["box"] is not None else 0)
    edge = 1 if table_kw["box"] is not None else 0
    natural = [_natural(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    key_w = []
    for c, n in zip(columns[:keys], natural[:keys]):
        key_w.append(min(n, max(c.min_width, (2 * width) // 5)) if c.wrap else n)
    base = edge + sum(w + per_col for w in key_w)
    groups: list[list[int]] = []
    current: list[int] = []
    used = base
    for i in range(keys, len(columns)):
        need = (min(natural[i], columns[i].min_width) if columns[i].wrap else natural[i]) + per_col
        if current and used + need > width:
            groups.append(current)
            current, used = [], base
        current.append(i)
        used += need
    if current or not groups:
        groups.append(current)
    title = table_kw.pop("title", None)
    tables = []
    for n, group in enumerate(groups):
        t = Table(padding=(0, padding), title=title if n == 0 else None, **table_kw)
        for i in (*range(keys), *group):
            c = columns[i]
            fixed = key_w[i] if i < keys and c.wrap else None
            t.add_column(c.header, justify=c.justify, no_wrap=not c.wrap, overflow="fold", style=c.style,  # type: ignore[arg-type]
                         max_width=fixed)
        for r in rows:
            t.add_row(*(r[i] for i in (*range(keys), *group)))
        tables.append(t)
    return tables


def fitted_panel(body: RenderableType | Sequence[RenderableType], title: str, width: int,
                 **panel_kw: Any) -> Panel:
    """A Panel titled ``title``; when the title does not fit the border, the parts after its first
    " · " open the body instead (a kernel name in a title is never shortened)."""
    parts = list(body) if isinstance(body, (list, tuple)) else [body]
    room = width - 6  # the corners, one rule cell each side and a space either side of the title
    if cell_len(title) > room and " · " in title:
        head, rest = title.split(" · ", 1)
        parts.insert(0, Text(rest, style="bold", overflow="fold"))
        title = head
    panel_kw.setdefault("title_align", "left")
    return Panel(Group(*parts), title=title, **panel_kw)
