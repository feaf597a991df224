"""The one escaping path for text from a file or a profiled program: every string that came from outside
(kernel, region, device and file names, JSON keys in a load error, paths in a note) is passed through
``visible`` before it reaches a terminal, a log or a page.

Which characters are escaped is decided by their Unicode category (``unicodedata``), not by a list: controls
(Cc: C0 but tab and newline, DEL, C1; 0x9b is a one-byte CSI on some terminals) become ``\\x1b``; format
characters (Cf: bidi overrides, embeddings, isolates and marks, zero-width spaces and joiners, the byte-order
mark, the tag characters, invisible operators, Arabic number signs, Egyptian hieroglyph and musical-symbol
format controls, ...), line and paragraph separators (Zl, Zp) and lone surrogates (Cs: a JSON string may hold
"\\udc9b", which stdout's surrogateescape would write as the byte 0x9b) become ``\\u202e`` or ``\\U0001d173``.
Two names that differ only by such a character print differently. Every other character, printable non-ASCII
text included, is kept. Standard library only: the model's load errors use it, and render/text.py builds the
Rich-markup escaping on it.
"""
from __future__ import annotations

import re
import unicodedata
from itertools import compress

ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_KEPT = "\t\n"  # controls that lay text out rather than hide or rewrite it
_CACHE_MAX = 1 << 16  # characters decided and remembered (a string may hold 1.1M distinct ones)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0xA0:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _candidates() -> re.Pattern[str]:
    """Every escaped character of the Basic Multilingual Plane, by category (65,536 look-ups, milliseconds), and
    every character above it (emoji, ...; few in a name, each decided by ``_Replacements``): one character class,
    which re scans in C at the speed of a short one."""
    bmp = compress(range(0x10000), map(ESCAPED_CATEGORIES.__contains__,
                                       map(unicodedata.category, map(chr, range(0x10000)))))
    runs: list[list[int]] = []
    for code in bmp:
        if chr(code) in _KEPT:
            continue
        if runs and runs[-1][1] == code - 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    ranges = "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in runs)
    return re.compile(f"[{ranges}\\U00010000-\\U0010ffff]")


class _Replacements(dict):
    """A candidate character -> its escape, or itself where its category is not escaped; filled on first sight,
    up to _CACHE_MAX characters (past that, each is decided again, as exactly)."""

    def __missing__(self, ch: str) -> str:
        out = _escape(ch) if unicodedata.category(ch) in ESCAPED_CATEGORIES else ch
        if len(self) < _CACHE_MAX:
            self[ch] = out
        return out


_REPLACEMENTS = _Replacements()
_pattern: re.Pattern[str] | None = None  # built on the first string that needs it: most runs never do


def visible(s: str) -> str:
    """``s`` with control and invisible characters shown as escapes: ``"\\x1b[31m"`` prints as ``\\x1b[31m``,
    never as red; U+202E prints as ``\\u202e``, never reversing the text after it; U+1D173 as ``\\U0001d173``."""
    if s.isprintable():  # the common case, in C: every escaped category (Cc, Cf, Cs, Zl, Zp) is non-printable
        return s
    global _pattern
    if _pattern is None:
        _pattern = _candidates()
    return _pattern.sub(lambda m: _REPLACEMENTS[m.group()], s)
