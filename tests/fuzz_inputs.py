"""Mutated inputs for the reader fuzz suite (tests/test_fuzz_readers.py).

Each mutation starts from a real recorded file and breaks it the way files break:
cut short, bytes flipped, one field given a wrong type, a huge or non-finite
number, deep nesting, a long or hostile name, a hostile object key (terminal
escapes, bidi overrides, zero-width characters), a count far past any GPU's, a
gzip bomb; and files that are not files (FIFOs, devices, directories).
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

HOSTILE_NAME = "[bold red]PWNED[/] \x1b[31mRED\x1b[0m [link=http://x]click[/link] \x07\x9b2J <script>alert(1)</script>"
DEEP = "\x00deep\x00"  # placeholder replaced by deeply nested JSON text after encoding

# Keys and names that attack the terminal or the reader's eye: window title + erased line + a fake message,
# C0/C1 controls, a bidi override that reverses the rest, zero-width characters that make two names look alike.
HOSTILE_KEYS = ["\x1b]0;PWNED\x07\x1b[2K\rkernelscope: all good", "\x9b2J\x00\x08\x7f", "evil\u202etxt.exe",
                "ge\u200bmm\u200d\u200f\ufeff", "\u2066iso\u2069\u2028line", "[bold red]key[/]",
                # format characters a list of known ones missed (the third attack run): Cf by category, not by list
                "x\U0001d173\u0600\u06dd\U00013430\U0001bca0\u2060\x85"]
# Counts that size what the analyses build: far past any GPU (sm_count: 1e9 built a billion-entry tuple).
HUGE_COUNTS = [10**9, 1e9, 2**62, 1e30, 1e400]  # 1e400 is written as such and read back as infinity

# --kernel patterns: catastrophic backtracking, and patterns re refuses with OverflowError or RecursionError
# rather than re.error (a repetition past its limit, thousands of nested groups).
HOSTILE_REGEXES = ["(a+)+$", "(x+x+)+y", "(.*a){20}", "a{99999999999}", "(" * 1000 + ")" * 1000, "[", "(?P<x",
                   "\\", "(?<=a+)b", "x" * 100_000, HOSTILE_KEYS[0]]
KERNEL_REGEXES = st.one_of(st.sampled_from(HOSTILE_REGEXES), st.text(max_size=30).filter(lambda t: "\x00" not in t))

REPLACEMENTS = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1, 2**31, 2**63, 2**70, -(2**70), 1e308, -1e308, 1e-308, 0.5,
                     float("nan"), float("inf"), float("-inf"), "", "x", HOSTILE_NAME, "x" * 100_000, [], {},
                     [0] * 100_000,  # an enormous array of small items: a list field or the launches themselves
                     [1, 2], [None], {"value": 1}, {"a": {"b": {}}}, DEEP, *HUGE_COUNTS[:4], *HOSTILE_KEYS]),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.lists(st.integers(), max_size=4),
)


class Mutated:
    """A mutated file: its bytes, a file suffix, what was done, and whether it was cut short.

    A plain class, not a dataclass: Hypothesis prints dataclasses field by field, megabytes of them.
    """

    def __init__(self, data: bytes, suffix: str, what: str, truncated: bool = False) -> None:
        self.data, self.suffix, self.what, self.truncated = data, suffix, what, truncated

    def __repr__(self) -> str:  # the bytes would flood the report; what was done says enough to redo it
        return f"Mutated({self.what}, {len(self.data):,} bytes{', truncated' if self.truncated else ''})"


def paths(doc: Any, prefix: tuple = (), limit: int = 20000) -> list[tuple]:
    """Every path to a value in a JSON document (up to ``limit``), breadth first so short paths come first."""
    out: list[tuple] = []
    queue: list[tuple[tuple, Any]] = [(prefix, doc)]
    while queue and len(out) < limit:
        p, v = queue.pop(0)
        out.append(p)
        if isinstance(v, dict):
            queue.extend((p + (k,), x) for k, x in v.items())
        elif isinstance(v, list):
            queue.extend((p + (i,), x) for i, x in enumerate(v))
    return out


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return doc


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _delete(doc: Any, path: tuple) -> Any:
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    del parent[path[-1]]
    return doc


def encode(doc: Any, gz: bool, depth: int = 100_000) -> bytes:
    text = json.dumps(doc, allow_nan=True)
    text = text.replace(json.dumps(DEEP), "[" * depth + "]" * depth)
    data = text.encode()
    return gzip.compress(data, mtime=0) if gz else data


def _rename_key(doc: Any, path: tuple, key: str) -> Any:
    """The last key of ``path`` (an object member) renamed to ``key``, keeping its value and place."""
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    items = [(key if k == path[-1] else k, v) for k, v in parent.items()]
    parent.clear()
    parent.update(items)
    return doc


def gzip_bomb(decompressed_mib: int, head: bytes = b'{"format":"kernelscope-session","x":"') -> bytes:
    """A few KiB of gzip that inflate to ``decompressed_mib`` MiB: one member per 16 MiB of one byte,
    concatenated (readers take the members as one stream)."""
    member = gzip.compress(b"a" * (16 << 20), compresslevel=9, mtime=0)
    return gzip.compress(head, mtime=0) + member * (decompressed_mib // 16 + 1)


@st.composite
def mutated_json(draw: st.DrawFn, doc: Any, suffix: str) -> Mutated:
    """A JSON document (decoded ``doc``) mutated in one of several ways, encoded plain or gzip-compressed."""
    gz = suffix.endswith(".gz") and draw(st.booleans())
    kind = draw(st.sampled_from(["replace", "replace", "replace", "delete", "truncate", "flip", "key", "count"]))
    doc = json.loads(json.dumps(doc))  # a private copy
    if kind == "key":  # an object key turned hostile: it ends up in load-error paths and notes
        keyed = [p for p in paths(doc) if p and isinstance(p[-1], str)]
        path = keyed[draw(st.integers(0, len(keyed) - 1))]
        key = draw(st.sampled_from(HOSTILE_KEYS))
        if draw(st.booleans()):
            _set(doc, path, draw(REPLACEMENTS))  # and its value wrong, so the path is printed
        return Mutated(encode(_rename_key(doc, path, key), gz), suffix, f"key {path!r} renamed to {key!r}")
    if kind == "count":  # a number field set far past any GPU's counts, written as JSON text (1e400 too)
        numeric = [p for p in paths(doc) if p and isinstance(_get(doc, p), (int, float))
                   and not isinstance(_get(doc, p), bool)]
        if numeric:
            path = numeric[draw(st.integers(0, len(numeric) - 1))]
            value = draw(st.sampled_from(HUGE_COUNTS))
            text = encode(_set(doc, path, "\x00HUGE\x00"), False).decode()
            data = text.replace(json.dumps("\x00HUGE\x00"), repr(value) if value != 1e400 else "1e400").encode()
            return Mutated(gzip.compress(data, mtime=0) if gz else data, suffix, f"set {path!r} to {value!r}")
    if kind in ("replace", "delete"):
        by_depth: dict[int, list[tuple]] = {}
        for p in paths(doc):  # depth first, then a path of that depth: shallow fields get their share
            by_depth.setdefault(len(p), []).append(p)
        level = by_depth[draw(st.sampled_from(sorted(by_depth)))]
        path = level[draw(st.integers(0, len(level) - 1))]
        if kind == "delete" and path:
            return Mutated(encode(_delete(doc, path), gz), suffix, f"delete {path!r}")
        value = draw(REPLACEMENTS)
        return Mutated(encode(_set(doc, path, value), gz), suffix, f"set {path!r} to {str(value)[:60]!r}")
    data = encode(doc, gz)
    if kind == "truncate":
        end = len(data.rstrip()) if not gz else len(data)  # cutting trailing whitespace loses nothing
        cut = draw(st.integers(0, end - 1))
        return Mutated(data[:cut], suffix, f"truncate at {cut} of {len(data)}", truncated=True)
    return flip(draw, data, suffix)


def flip(draw: st.DrawFn, data: bytes, suffix: str) -> Mutated:
    b = bytearray(data)
    where = []
    for _ in range(draw(st.integers(1, 8))):
        i = draw(st.integers(0, len(b) - 1))
        b[i] ^= 1 << draw(st.integers(0, 7))
        where.append(i)
    return Mutated(bytes(b), suffix, f"flip bits at {where}")


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes, suffix: str, header_bytes: int = 0, text: bool = False) -> Mutated:
    """A file cut short or with flipped bits (a share of them in its first ``header_bytes``); for ``text``,
    a cut inside the trailing whitespace loses nothing and is not made."""
    if draw(st.booleans()):
        cut = draw(st.integers(0, (len(data.rstrip()) if text else len(data)) - 1))
        return Mutated(data[:cut], suffix, f"truncate at {cut} of {len(data)}", truncated=True)
    if header_bytes and draw(st.booleans()):
        b = bytearray(data)
        i = draw(st.integers(0, min(header_bytes, len(b)) - 1))
        b[i] ^= 1 << draw(st.integers(0, 7))
        return Mutated(bytes(b), suffix, f"flip a header bit at {i}")
    return flip(draw, data, suffix)


SPECIAL_FILES = ["fifo", "/dev/zero", "/dev/urandom", "/dev/null", "directory", "dangling symlink",
                 "symlink to /dev/zero", "gzip bomb"]


def special_file(kind: str, where: Path) -> Path:
    """A path in ``where`` (made once, kept) that is not a readable regular file of bounded size, or a device."""
    if kind.startswith("/dev/"):
        return Path(kind)
    p = where / kind.replace(" ", "_").replace("/", "_")
    if os.path.lexists(p):
        return p
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "directory":
        p.mkdir()
    elif kind == "dangling symlink":
        p.symlink_to(where / "nothing-here.json")
    elif kind == "symlink to /dev/zero":
        p.symlink_to("/dev/zero")
    elif kind == "gzip bomb":
        p.write_bytes(gzip_bomb(256))  # past the 64 MiB limit the fuzz suite sets
    return p
