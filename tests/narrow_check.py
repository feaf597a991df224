"""Catch what a narrow terminal does to numbers: Rich cutting a cell (ellipsis or crop) and
folding a number across two lines. Used by tests/test_narrow.py.

Rich cuts text in one place, Text.truncate, and breaks it into lines in one place, Text.wrap;
`watch_rich()` wraps both while a renderable is printed and records every cut and every
line break that falls inside a number. The text checks below look at the printed output."""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.text import Text

# A number as kernelscope prints one: 1,234 / 12.5 / -0.4% / +1.2e+09 / 0x0f3c / 2×64 / 1.5x, with
# the brackets and punctuation that may surround it.
NUMBER = re.compile(r"[(\[]?[-+]?(0x[0-9A-Fa-f_]+|\d[\d,]*(\.\d+)?([eE][-+]?\d+)?(×\d+)*)(%|x)?[)\],;:.]?")
GLUED_ELLIPSIS = re.compile(r"[0-9A-Za-z_,.%)\]>]…")  # an ellipsis right after a cut word: a truncation


def is_number(token: str) -> bool:
    return NUMBER.fullmatch(token) is not None


@dataclass
class Watch:
    cuts: list[str] = field(default_factory=list)  # text Rich shortened to fit, with the width it had
    splits: list[str] = field(default_factory=list)  # numbers Rich broke across two lines


@contextlib.contextmanager
def watch_rich():
    """Record Rich's truncations and the numbers it folds while the block runs."""
    w = Watch()
    truncate, wrap = Text.truncate, Text.wrap

    def watched_truncate(self, max_width, *, overflow=None, pad=False):
        plain = self.plain.rstrip()
        if (overflow or self.overflow) != "ignore" and cell_len(plain) > max_width:
            w.cuts.append(f"{plain!r} cut to {max_width} cells")
        return truncate(self, max_width, overflow=overflow, pad=pad)

    def watched_wrap(self, console, width, **kw):
        lines = wrap(self, console, width, **kw)
        source = self.plain
        for a, b in zip(lines, lines[1:]):
            left, right = a.plain.rstrip(), b.plain.lstrip()
            if not left or not right or left[-1].isspace():
                continue
            tail, head = left.split()[-1], right.split()[0]
            if tail + head in source and is_number(tail + head):
                w.splits.append(f"{tail + head!r} folded as {tail!r} / {head!r}")
        return lines

    Text.truncate, Text.wrap = watched_truncate, watched_wrap
    try:
        yield w
    finally:
        Text.truncate, Text.wrap = truncate, wrap


def text_problems(text: str, width: int) -> list[str]:
    """Lines wider than the terminal and ellipses glued to a cut word or number."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if cell_len(line) > width:
            out.append(f"line {i} is {cell_len(line)} cells wide: {line!r}")
        if GLUED_ELLIPSIS.search(line):
            out.append(f"line {i} has a cut word: {line.strip()!r}")
    return out
