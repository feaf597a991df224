"""HTML built from nodes whose text is escaped by default: a string from a session (kernel, region,
command, device, rule message) can only ever become text, never markup. ``Markup`` marks the few
strings kernelscope writes itself as already HTML."""
from __future__ import annotations

import html
from typing import Iterable, Union

from kernelscope.model.escape import visible


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
    visible first by the one escaping path, model/escape.visible."""
    return html.escape(visible(str(text)), quote=True)


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


def table(head: Iterable[Node], rows: Iterable[Iterable[Node]], class_: str = "t", caption: Node = None,
          num_from: int = 1) -> Markup:
    """A table; columns from ``num_from`` on are right-aligned numbers."""
    head = list(head)
    cells = [el("tr", *(el("td", c, class_="n" if i >= num_from else None) for i, c in enumerate(r))) for r in rows]
    return el("table", el("caption", caption) if caption is not None else None,
              el("thead", el("tr", *(el("th", h) for h in head))) if head else None,
              el("tbody", *cells), class_=class_)


def kv(rows: Iterable[tuple[Node, Node]]) -> Markup:
    """Label / value rows, as the terminal's grids."""
    return el("table", el("tbody", *(el("tr", el("th", k), el("td", v)) for k, v in rows)), class_="kv")


def section(title: Node, *body: Node, id_: str | None = None, class_: str = "panel") -> Markup:
    return el("section", el("h2", title), *body, class_=class_, id=id_)


def note(*text: Node) -> Markup:
    return el("p", *text, class_="note")


CSS = """
:root{--fg:#1d2330;--dim:#667085;--line:#d0d5dd;--bg:#fff;--panel:#f8f9fb;--accent:#2f6fde;--warn:#b54708}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--fg);background:var(--bg)}main{max-width:1200px;margin:0 auto;padding:16px 20px 60px}
h1{font-size:20px;margin:8px 0 12px}h2{font-size:16px;margin:0 0 8px}h3{font-size:14px;margin:12px 0 6px}
.panel{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:12px 14px;margin:12px 0;
overflow-x:auto}.kernel{border-left:4px solid var(--accent);padding-left:12px;margin:24px 0}
table{border-collapse:collapse;margin:4px 0}caption{text-align:left;font-weight:600;padding:4px 0}
.t th,.t td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top;
  overflow-wrap:anywhere}
.t th{background:#eef1f6;white-space:nowrap;overflow-wrap:normal}
.t td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.kv th{text-align:left;padding:2px 14px 2px 0;white-space:nowrap;vertical-align:top}
.kv td{padding:2px 0;overflow-wrap:anywhere}
h2{overflow-wrap:anywhere}.st-ok{color:#2b8a3e}.st-partial{color:#b54708}.st-failed{color:#c92a2a}
.name{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;word-break:break-all;color:var(--dim)}
.note{color:var(--dim);font-size:12px;margin:4px 0}.warn{color:var(--warn);font-weight:600}
.na{color:var(--dim)}svg{display:block;margin:6px 0;max-width:100%;height:auto}svg text{font:11px system-ui,sans-serif}
nav a{margin-right:12px}details>summary{cursor:pointer;color:var(--accent)}code{font-size:12px}
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
