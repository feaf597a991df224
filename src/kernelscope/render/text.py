"""Text from a profiled program or a session file, made safe to print.

Kernel, region, command and device names, NVIDIA's rule messages and every other
string in a session come from whatever program was profiled, or from a file someone
sent. Printed as they are, Rich would apply markup in them (``[link=...]``) and the
terminal would obey their control sequences (``\\x1b[31m``). Here control characters
become visible escapes and markup is escaped, so they print literally.
"""
from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from rich.markup import escape

from kernelscope.model import Session
from kernelscope.model.escape import visible  # noqa: F401  (the one escaping path; renderers import it from here)

T = TypeVar("T")


def plain(s: str) -> str:
    """A string for Rich markup contexts (table cells, console.print): controls visible, markup escaped."""
    return escape(visible(s))


def display_copy(obj: T) -> T:
    """A copy of session data with every string (and string key) made plain, for the terminal renderers:
    done once where the data enters the view, so no panel can forget it.

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
        names = {r.name: "" for r in v.regions}
        names = {n: _copy(n) for n in names}  # regions repeat a few names: copy each name once
        new.regions = [dataclasses.replace(r, name=names[r.name]) for r in v.regions]  # every field, rank too
        return new
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        changes = {f.name: _copy(getattr(v, f.name)) for f in dataclasses.fields(v) if f.init}
        new = dataclasses.replace(v, **changes)
        for f in dataclasses.fields(v):  # fields set after construction (not init=True) are carried over
            if not f.init:
                object.__setattr__(new, f.name, _copy(getattr(v, f.name)))
        return new
    return v
