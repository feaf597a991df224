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
    droppable: bool = False  # left out, rather than moved, when the table does not fit (it repeats others)


def cell_width(value: Any) -> int:
    """Cells the widest line of a cell takes: str as console markup, or a Text."""
    text = value if isinstance(value, Text) else Text.from_markup(str(value))
    return max((cell_len(line) for line in text.plain.splitlines()), default=0)


def _need(col: Column, cells: Sequence[Any]) -> int:
    """The fewest cells the column can have without cutting: all of a number, or a wrapping column's minimum."""
    widest = max([cell_len(col.header), *(cell_width(c) for c in cells)])
    return min(widest, col.min_width) if col.wrap else widest


def fit_tables(width: int, columns: Sequence[Column], rows: Sequence[Sequence[Any]], keys: int = 1,
               padding: int = 1, skip_empty: bool = False, **table_kw: Any) -> list[Table]:
    """Tables of ``rows`` that fit ``width`` cells with no cell shortened.

    The first ``keys`` columns (what a row is) begin every table. When all columns do not fit,
    the droppable ones are left out first; then the others follow in order and, when one does
    not fit beside those already placed, it and the rest go to the next table. Wrapping columns
    (names, prose) are counted at their minimum: Rich narrows them to fit and wraps their text.
    ``table_kw`` goes to every Table (box=None unless given); the title only to the first.
    With ``skip_empty`` a further table leaves out the rows with nothing in its columns.
    """
    table_kw.setdefault("box", None)
    boxed = table_kw["box"] is not None
    per_col = 2 * padding + (1 if boxed else 0)
    need = [_need(c, [r[i] for r in rows]) + per_col for i, c in enumerate(columns)]
    base = (1 if boxed else 0) + sum(need[:keys])
    shown = list(range(keys, len(columns)))
    for i in reversed(shown[:]):
        if base + sum(need[j] for j in shown) <= width:
            break
        if columns[i].droppable:
            shown.remove(i)
    groups: list[list[int]] = []
    current: list[int] = []
    used = base
    for i in shown:
        if current and used + need[i] > width:
            groups.append(current)
            current, used = [], base
        current.append(i)
        used += need[i]
    if current or not groups:
        groups.append(current)
    title = table_kw.pop("title", None)
    if len(groups) > 1:
        table_kw["expand"] = False  # spread over the width, a split table's columns would not line up
    tables = []
    for n, group in enumerate(groups):
        t = Table(padding=(0, padding), title=title if n == 0 else None, **table_kw)
        for i in (*range(keys), *group):
            c = columns[i]
            t.add_column(Text(c.header), justify=c.justify, no_wrap=not c.wrap, overflow="fold",  # type: ignore[arg-type]
                         style=c.style, min_width=min(c.min_width, need[i] - per_col) if c.wrap else None)
        for r in rows:
            if n and skip_empty and not any(cell_width(r[i]) for i in group):
                continue
            t.add_row(*(r[i] for i in (*range(keys), *group)))
        tables.append(t)
    return tables


def fitted_panel(body: RenderableType | Sequence[RenderableType], title: str, width: int,
                 said: str | None = None, **panel_kw: Any) -> Panel:
    """A Panel titled ``title``; when the title does not fit the border, the parts after its first
    " · " open the body instead (a kernel name in a title is never shortened), unless they are
    ``said``, what the body opens with already. A subtitle too long for the border closes the body."""
    parts = list(body) if isinstance(body, (list, tuple)) else [body]
    room = width - 6  # the corners, one rule cell each side and a space either side of the title
    if cell_len(title) > room and " · " in title:
        head, rest = title.split(" · ", 1)
        if rest != said:
            parts.insert(0, Text.from_markup(rest, style="bold", overflow="fold"))
        title = head
    sub = panel_kw.get("subtitle")
    if isinstance(sub, str) and cell_len(sub) > room:
        parts.append(Text.from_markup(panel_kw.pop("subtitle"), style="dim"))
        panel_kw.pop("subtitle_align", None)
    panel_kw.setdefault("title_align", "left")
    return Panel(Group(*parts), title=title, **panel_kw)
