"""Text from a profiled program or a session file, made safe to print.

Kernel, region, command and device names, NVIDIA's rule messages and every other
string in a session come from whatever program was profiled, or from a file someone
sent. Printed as they are, Rich would apply markup in them (``[link=...]``) and the
terminal would obey their control sequences (``\\x1b[31m``). Here control characters
become visible escapes and markup is escaped, so they print literally. A string longer
than DISPLAY_CHARS is shown by its start and end around a stated count of what was left
out: laying out a cell of millions of characters takes Rich minutes. Only the terminal
copy is shortened; the session, its file and the JSON outputs keep the whole string.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
from operator import attrgetter
from typing import Any, TypeVar

from rich.markup import escape

from kernelscope.model import Session
from kernelscope.model.escape import visible  # noqa: F401  (the one escaping path; renderers import it from here)
from kernelscope.model.launch_table import collector_paused

T = TypeVar("T")
_SCALARS = frozenset({int, float, bool, type(None)})
# The longest string shown whole on the terminal: several times a long demangled template kernel name (the
# H100 fixtures' longest is 5,082 characters), and short enough that Rich lays out a cell of it in milliseconds.
DISPLAY_CHARS = 16_384


def plain(s: str) -> str:
    """A string for Rich markup contexts (table cells, console.print): controls visible, markup escaped, and one
    longer than DISPLAY_CHARS shortened in the middle (``shortened``)."""
    return escape(visible(shortened(s)))


def was_shortened(s: str) -> bool:
    """Whether ``s`` (a display copy, plain or escaped) is a string that ``shortened`` cut: its length then
    counts the display copy, not the string."""
    return len(s) > DISPLAY_CHARS // 2 and _CUT.search(s) is not None


_CUT = re.compile(r"…\\?\[[\d,]+ more characters, blake2b [0-9a-f]{8}\]…")


def shortened(s: str, limit: int = DISPLAY_CHARS) -> str:
    """``s`` itself when it has at most ``limit`` characters; else its first and last characters around
    ``…[N more characters, blake2b XXXXXXXX]…``, about ``limit`` characters in all. N counts what was left out;
    the digest (the first 8 hex digits of BLAKE2b of the left-out characters, UTF-8) tells apart two long names
    that differ only there, so they stay two rows wherever the shortened copy is grouped by name. Square
    brackets, as short kernel names (model/names) drop what is in parentheses and angle brackets."""
    if len(s) <= limit:
        return s
    keep = max(limit - 60, 2) // 2
    middle = s[keep:len(s) - keep]
    digest = hashlib.blake2b(middle.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return f"{s[:keep]}…[{len(middle):,} more characters, blake2b {digest}]…{s[len(s) - keep:]}"


@collector_paused()
def display_copy(obj: T) -> T:
    """A copy of session data with every string (and string key) made plain, for the terminal renderers:
    done once where the data enters the view, so no panel can forget it.

    Parts with nothing to make plain (numbers, clean names) are shared with ``obj`` rather than copied: a
    session of a million launches holds hundreds of thousands of copies and memsets. Renderers only read them.

    Panels put these strings into console markup as they are; a panel that builds a Text from one
    uses ``Text.from_markup`` (a plain ``Text`` would show the escaping backslashes). A forgotten
    case shows a backslash, never applied markup. JSON outputs use the original data.
    """
    return _copy(obj)  # type: ignore[no-any-return]


def _copy(v: Any, _plain: dict[str, str] = {}) -> Any:  # noqa: B006 (the cache: names and units repeat)
    if isinstance(v, str):
        got = _plain.get(v)
        if got is None:
            got = plain(v)
            if len(_plain) < 65536:
                _plain[v] = got
        return got
    if isinstance(v, (int, float, bool)) or v is None:
        return v
    if isinstance(v, list):
        return [_copy(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_copy(x) for x in v)
    if isinstance(v, dict):
        return {(_copy(k) if isinstance(k, str) else k): _copy(x) for k, x in v.items()}
    if isinstance(v, Session) and v.__dict__.get("_launches_table") is not None:
        # Launches held as columns: copy their strings once per shape, not once per launch.
        new = dataclasses.replace(v, **{f.name: _copy(getattr(v, f.name)) for f in dataclasses.fields(v)
                                        if f.init and f.name not in ("launches", "regions")}, launches=[], regions=[])
        new.set_launch_table(v.launch_table().map_text(_copy))
        new.regions = [_copy(r) for r in v.regions]  # every field, rank too
        return new
    layout = _layout(type(v))
    return v if layout is None else _copy_dataclass(v, layout)


def _copy_dataclass(v: Any, layout: Any) -> Any:
    init, later, values_of = layout
    if not later:
        values = values_of(v)
        for x in values:  # numbers, null and strings printed as they are: the copy would equal it in every part
            t = type(x)
            if not (t is str and _copy(x) == x) and t not in _SCALARS:
                break
        else:
            return v  # the copy would equal it: shared (renderers read session data, never change it)
    changes = {name: _copy(getattr(v, name)) for name in init}
    new = type(v)(**changes)  # dataclasses.replace(v, **changes), every init field given
    for name in later:  # fields set after construction (not init=True) are carried over
        object.__setattr__(new, name, _copy(getattr(v, name)))
    return new


def _layout(cls: type, _known: dict[type, Any] = {}) -> Any:  # noqa: B006
    """A dataclass's init fields, its other fields and a getter of the init fields' values as a tuple (None: not
    a dataclass instance's class): read once per class, as a class's fields do not change."""
    got = _known.get(cls, False)
    if got is False:
        if dataclasses.is_dataclass(cls):
            fields = dataclasses.fields(cls)
            init = tuple(f.name for f in fields if f.init)
            got = (init, tuple(f.name for f in fields if not f.init),
                   attrgetter(*init) if len(init) > 1 else (lambda v, names=init: tuple(getattr(v, n) for n in names)))
        else:
            got = None
        _known[cls] = got
    return got  # type: ignore[no-any-return]
