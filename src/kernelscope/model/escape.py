"""The one escaping path for text from a file or a profiled program: every string that came from outside
(kernel, region, device and file names, JSON keys in a load error, paths in a note) is passed through
``visible`` before it reaches a terminal, a log or a page.

Control characters become visible escapes (``\\x1b``), and so do the characters that change how text looks
without being seen: bidi overrides, embeddings, isolates and marks (U+202E reverses what follows), zero-width
spaces and joiners, the byte-order mark, line and paragraph separators. Two names that differ only by such a
character print differently. Standard library only: the model's load errors use it, and render/text.py builds
the Rich-markup escaping on it.
"""
from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, and the C1 controls (0x9b is a one-byte CSI on some terminals).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Invisible or reordering characters: soft hyphen, Arabic letter mark, Mongolian vowel separator, zero-width
# space / non-joiner / joiner, LRM / RLM, line and paragraph separators, bidi embeddings and overrides, word
# joiner and invisible operators, bidi isolates, deprecated format characters, BOM, interlinear annotation,
# the tag characters, and lone surrogates (a JSON string may hold "\udc9b": UTF-8 cannot encode one, and
# stdout's surrogateescape writes it as the byte 0x9b, a one-byte CSI).
_INVISIBLE = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
                        "\U000e0000-\U000e007f\ud800-\udfff]")


def visible(s: str) -> str:
    """``s`` with control and invisible characters shown as escapes: ``"\\x1b[31m"`` prints as ``\\x1b[31m``,
    never as red; U+202E prints as ``\\u202e``, never reversing the text after it."""
    if s.isprintable():  # the common case, in C: every character escaped below is non-printable (Cc, Cf, Zl, Zp)
        return s
    s = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) <= 0xFFFF
                          else f"\\U{ord(m.group()):08x}", s)
