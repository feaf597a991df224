"""HTML built from nodes whose text is escaped by default: a string from a session (kernel, region,
command, device, rule message) can only ever become text, never markup. ``Markup`` marks the few
strings kernelscope writes itself as already HTML."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Iterable, Union

from kernelscope.model.escape import visible
from kernelscope.render.text import shortened


class Markup(str):
    """A string that is already HTML (built by these helpers); everything else is escaped, also when
    added to one: Markup + str escapes the str."""

    def __add__(self, other: object) -> "Markup":
        return Markup(str.__add__(self, other if isinstance(other, Markup) else esc(other)))

    def __radd__(self, other: object) -> "Markup":
        return Markup((other if isinstance(other, Markup) else esc(other)) + str(self))


Node = Union[str, int, float, Markup, None, Iterable["Node"]]


def esc(text: object) -> str:
    """Text as HTML; control, zero-width and bidi characters (U+202E would reverse the text after it) made
    visible first by the one escaping path, model/escape.visible; a text longer than DISPLAY_CHARS shortened
    in the middle as the terminal shortens it (render/text.shortened), so a page never holds a name of
    millions of characters once per place that shows it."""
    return html.escape(visible(shortened(str(text))), quote=True)


def render(node: Node) -> Markup:
    if node is None:
        return Markup("")
    if isinstance(node, Markup):
        return node
    if isinstance(node, (str, int, float)):
        return Markup(esc(node))
    return Markup("".join(render(x) for x in node))


def el(tag: str, *children: Node, **attrs: object) -> Markup:
    """<tag attrs>children</tag>; attribute names with a trailing _ lose it (class_), _ inside becomes -."""
    parts = [tag]
    for k, v in attrs.items():
        if v is None or v is False:
            continue
        name = k.rstrip("_").replace("_", "-")
        parts.append(name if v is True else f'{name}="{esc(v)}"')
    return Markup(f"<{' '.join(parts)}>{render(children)}</{tag}>")


LONG_WORD = 20  # characters without a space, a letter among them: an identifier (a kernel, region, file or
# metric name), which may break anywhere
NUMBER_CHARS = 32  # a cell of a number column longer than this is text (a sentence, a list): it may wrap
_TAG = re.compile(r"<[^>]*>")


def text_of(node: Node) -> str:
    """The text a reader sees of a node (markup tags dropped, entities read)."""
    return html.unescape(_TAG.sub("", render(node)))


def is_identifier(text: str) -> bool:
    """A word of LONG_WORD characters or more with a letter in it: a name with no place to break, so it may
    break anywhere (a long number is not one: it is never broken)."""
    return any(len(w) >= LONG_WORD and any(c.isalpha() for c in w) for w in text.split())


_NUMBER_START = re.compile(r"\s*([-+−~≈<>(]?\d|N/A|—|–|$)")  # 1.3 ms, +4%, (12), N/A, — or an empty cell


def _cell_class(node: Node, number: bool) -> str | None:
    """'n' (right-aligned, never wrapped) for a number; 'id' (broken anywhere, with a minimum width) for a cell
    with a long identifier; None for text, which wraps at its spaces (also text in a number column)."""
    text = text_of(node)
    if is_identifier(text):
        return "id"
    return "n" if number and len(text) <= NUMBER_CHARS and _NUMBER_START.match(text) else None


@dataclass(frozen=True)
class Cell:
    """A table cell that spans ``colspan`` columns; laid out as text."""

    content: Node
    colspan: int = 1


def _row(cells: Iterable[Node], num_from: int, text_cols: set[int]) -> Markup:
    out, i = [], 0
    for c in cells:
        if isinstance(c, Cell):
            out.append(el("td", c.content, colspan=c.colspan if c.colspan > 1 else None,
                          class_=_cell_class(c.content, False)))
            i += c.colspan
            continue
        out.append(el("td", c, class_=_cell_class(c, i >= num_from and i not in text_cols)))
        i += 1
    return el("tr", *out)


def table(head: Iterable[Node], rows: Iterable[Iterable[Node]], class_: str = "t", caption: Node = None,
          num_from: int = 1, text_cols: Iterable[int] = ()) -> Markup:
    """A table; columns from ``num_from`` on, but for ``text_cols``, are right-aligned numbers. A cell of a
    number column that holds text (a long identifier, a sentence) is laid out as text."""
    head = list(head)
    text = set(text_cols)
    cells = [_row(r, num_from, text) for r in rows]
    return el("table", el("caption", caption) if caption is not None else None,
              el("thead", el("tr", *(el("th", h) for h in head))) if head else None,
              el("tbody", *cells), class_=class_)


def kv(rows: Iterable[tuple[Node, Node]]) -> Markup:
    """Label / value rows, as the terminal's grids."""
    return el("table", el("tbody", *(el("tr", el("th", k, class_=_cell_class(k, False)),
                                        el("td", v, class_=_cell_class(v, False))) for k, v in rows)), class_="kv")


def section(title: Node, *body: Node, id_: str | None = None, class_: str = "panel") -> Markup:
    return el("section", el("h2", title), *body, class_=class_, id=id_)


def note(*text: Node) -> Markup:
    return el("p", *text, class_="note")


CSS = """
:root{--fg:#1d2330;--dim:#667085;--line:#d0d5dd;--bg:#fff;--panel:#f8f9fb;--accent:#2f6fde;--warn:#b54708}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--fg);background:var(--bg)}main{max-width:1200px;margin:0 auto;padding:16px 20px 60px}
h1{font-size:20px;margin:8px 0 12px}h2{font-size:16px;margin:0 0 8px}h3{font-size:14px;margin:12px 0 6px}
h1,h2,h3,p,li,summary,caption{overflow-wrap:anywhere}
.panel{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:12px 14px;margin:12px 0;
overflow-x:auto}.kernel{border-left:4px solid var(--accent);padding-left:12px;margin:24px 0}
table{border-collapse:collapse;margin:4px 0;max-width:100%}caption{text-align:left;font-weight:600;padding:4px 0}
.t th,.t td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top}
.t th{background:#eef1f6}
.t td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.kv th{text-align:left;padding:2px 14px 2px 0;white-space:nowrap;vertical-align:top}
.kv td{padding:2px 0}
td.id,th.id{overflow-wrap:anywhere;white-space:normal;min-width:12em}
.kv th.id{min-width:10em;width:30%}
.st-ok{color:#2b8a3e}.st-partial{color:#b54708}.st-failed{color:#c92a2a}
.name{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;overflow-wrap:anywhere;color:var(--dim)}
.note{color:var(--dim);font-size:12px;margin:4px 0;overflow-wrap:anywhere}.warn{color:var(--warn);font-weight:600}
.na{color:var(--dim)}svg{display:block;margin:6px 0;max-width:100%;height:auto}svg text{font:11px system-ui,sans-serif}
.plots{display:grid;grid-template-columns:max-content minmax(0,600px) max-content;gap:2px 10px;
  align-items:center;margin:4px 0}.plots svg{width:100%;margin:0}
nav{display:flex;flex-wrap:wrap;gap:2px 14px}nav a{overflow-wrap:anywhere;min-width:0}
details>summary{cursor:pointer;color:var(--accent)}code{font-size:12px}
"""


def scoped_css(scope: str) -> str:
    """CSS with every rule limited to elements under ``scope`` (a notebook cell must not restyle the notebook);
    :root, * and body become the scope element itself."""
    out = []
    for rule in CSS.replace("\n", "").split("}"):
        if "{" not in rule:
            continue
        selectors, decls = rule.split("{", 1)
        scoped = [scope if s.strip() in (":root", "body") else f"{scope} {s.strip()}" for s in selectors.split(",")]
        out.append(f"{','.join(scoped)}{{{decls}}}")
    return "\n".join(out)
