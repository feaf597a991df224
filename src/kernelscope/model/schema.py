"""Checks a session document against its schema before the model is built from it.

A session file is shared and kept, so anything in it may be wrong. `check_session`
walks the decoded JSON with a declarative schema (types, ranges, required fields)
and names the field path of each problem, e.g. ``launches[0].metrics.queued_ns``.
A problem inside an element of a list or map (one launch, one metric, one sample)
drops that element and is reported as skipped, so `show` still draws the rest;
a problem anywhere else makes the file unreadable, with one sentence saying why.
One list or map names its first SKIPPED_KEPT problems and counts the rest in one
more line (``more_skipped``), so a file of millions of bad items costs a few lines
in memory and on the terminal; ``skipped_count`` adds up what such lines say.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Any, Callable, Iterable, Sequence

from kernelscope.model.escape import visible


INT64 = 2**63 - 1
Path = str
SKIPPED_KEPT = 10  # problems named for one list or map (with the parts inside it); the rest are counted


class Invalid(Exception):
    """One field is not what the schema expects: ``path``, expected, and what was found."""

    def __init__(self, path: Path, expected: str, value: Any = None, found: str | None = None) -> None:
        self.path, self.expected = path or "(top level)", expected
        self.found = found if found is not None else _describe(value)
        super().__init__(f"{self.path}: expected {self.expected}, found {self.found}")


def _describe(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"the boolean {str(v).lower()}"
    if isinstance(v, (int, float)):
        return f"the number {v!r}" if len(repr(v)) <= 24 else "a number of {} digits".format(len(repr(v)))
    if isinstance(v, str):
        return "a string" if len(v) > 40 else f"the string {v!r}"
    if isinstance(v, list):
        return f"a list of {len(v)} items"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _join(path: Path, key: str | int) -> Path:
    """The field path of a member: a key from the file is escaped here (model/escape.visible), so the path is
    safe wherever the message goes (a terminal, a notebook's traceback, a log)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = visible(key)
    return f"{path}.{key}" if path else key


Spec = Callable[[Any, Path, list[str]], Any]  # (value, path, problems) -> cleaned value, or raises Invalid

_MORE = re.compile(r"… and ([0-9,]+) more damaged parts ")


def more_skipped(count: int, path: Path) -> str:
    """The line that stands for ``count`` problems under ``path`` left unnamed."""
    return f"… and {count:,} more damaged parts of {path} skipped"


def skipped_count(problems: Iterable[str]) -> int:
    """How many damaged parts these lines report: one a line, and a ``more_skipped`` line its count. Every other
    line starts with "skipped", so a name from the file cannot pass for a count."""
    total = 0
    for line in problems:
        m = _MORE.match(line)
        total += int(m.group(1).replace(",", "")) if m else 1
    return total


class _Counted(list):  # type: ignore[type-arg]
    """Where the problems of a list or map go once it has named SKIPPED_KEPT: counted, not kept."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def append(self, line: str) -> None:
        self.count += skipped_count((line,))


def _skip(problems: list[str], path: Path, e: Invalid) -> None:
    if isinstance(problems, _Counted):
        problems.count += 1  # the message is never read: not formatted
    else:
        problems.append(f"skipped {path} ({e})")


def _kept(keys: Sequence[Any], values: Sequence[Any], path: Path, spec_of: Callable[[Any], Spec],
          problems: list[str], kind: type | None) -> list[tuple[Any, Any]]:
    """(key, checked value) of the members that pass (key: an index or a name); one that does not is left out,
    named in ``problems`` while this part has added fewer than SKIPPED_KEPT lines there (its own and its members'),
    else counted in one ``more_skipped`` line at the end. ``kind``: a type every passing value has; once the
    problems are only counted, values of another type are counted without being checked, at C speed."""
    out = []
    begin = len(problems)
    sink = problems
    counted = problems if isinstance(problems, _Counted) else None

    def one(i: int) -> None:
        p = _join(path, keys[i])
        try:
            out.append((keys[i], spec_of(keys[i])(values[i], p, sink)))
        except Invalid as e:
            _skip(sink, p, e)

    i, n = 0, len(values)
    while i < n:
        if counted is None and len(problems) - begin >= SKIPPED_KEPT:
            counted = sink = _Counted()
        if counted is not None and kind is not None:
            fit = list(compress(range(i, n), map(isinstance, values[i:], repeat(kind))))
            counted.count += n - i - len(fit)
            for j in fit:
                one(j)
            break
        one(i)
        i += 1
    if counted is not None and counted is not problems and counted.count:
        problems.append(more_skipped(counted.count, path))
    return out


def number(lo: float | None = None, hi: float | None = None, integer: bool = False) -> Spec:
    what = "an integer" if integer else "a number"
    if lo is not None and hi is not None:
        what += f" from {lo:g} to {hi:g}"
    elif lo is not None:
        what += f" >= {lo:g}"

    def check(v: Any, path: Path, problems: list[str]) -> Any:
        ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok_type:
            raise Invalid(path, what, v)
        if isinstance(v, float) and not math.isfinite(v):
            raise Invalid(path, what, found=f"the non-finite number {v!r}")
        if abs(v) > INT64 or (lo is not None and v < lo) or (hi is not None and v > hi):
            raise Invalid(path, what, v)
        return v
    check.column = _number_column(lo, hi, integer)  # type: ignore[attr-defined]
    return check


def string(v: Any, path: Path, problems: list[str]) -> Any:
    if not isinstance(v, str):
        raise Invalid(path, "a string", v)
    return v


string.column = lambda col: set(map(type, col)) <= {str}  # type: ignore[attr-defined]
string.kind = str  # type: ignore[attr-defined]  (what every value it passes is: see _kept)


def short_string(max_len: int) -> Spec:
    """A string of at most ``max_len`` characters: for labels drawn in titles and ticks, where a huge one
    would stall the layout."""
    def check(v: Any, path: Path, problems: list[str]) -> Any:
        if not isinstance(v, str) or len(v) > max_len:
            raise Invalid(path, f"a string of at most {max_len} characters", v)
        return v
    return check


def boolean(v: Any, path: Path, problems: list[str]) -> Any:
    if not isinstance(v, bool):
        raise Invalid(path, "true or false", v)
    return v


def one_of(*choices: str) -> Spec:
    def check(v: Any, path: Path, problems: list[str]) -> Any:
        if v not in choices:
            raise Invalid(path, "one of " + ", ".join(repr(c) for c in choices), v)
        return v
    allowed = set(choices)
    check.column = lambda col: set(map(type, col)) <= {str} and set(col) <= allowed  # type: ignore[attr-defined]
    return check


def optional(spec: Spec) -> Spec:
    """None or the spec."""
    def check(v: Any, path: Path, problems: list[str]) -> Any:
        return None if v is None else spec(v, path, problems)
    inner = getattr(spec, "column", None)
    if inner is not None:
        check.column = lambda col: inner([v for v in col if v is not None])  # type: ignore[attr-defined]
    return check


def _number_column(lo: float | None, hi: float | None, integer: bool) -> Callable[[list[Any]], bool]:
    """A whole column of values accepted by number(lo, hi, integer), at C speed: exact int (and float) types,
    finite, within the bounds. False means "check value by value", not that a value is bad."""
    low = -INT64 if lo is None else max(lo, -INT64)
    high = INT64 if hi is None else min(hi, INT64)
    types = {int} if integer else {int, float}

    def column(col: list[Any]) -> bool:
        if not col:
            return True
        got = set(map(type, col))
        if not got <= types:
            return False
        if float in got and not all(map(math.isfinite, (v for v in col if type(v) is float))):
            return False
        return bool(min(col) >= low and max(col) <= high)
    return column


def either(*specs: Spec, expected: str) -> Spec:
    def check(v: Any, path: Path, problems: list[str]) -> Any:
        for s in specs:
            try:
                return s(v, path, problems)
            except Invalid:
                continue
        raise Invalid(path, expected, v)
    return check


def any_json(max_depth: int = 32) -> Spec:
    """Free-form data (environment, details): any JSON value with finite numbers, bounded depth."""
    def walk(v: Any, path: Path, depth: int) -> None:
        if depth > max_depth:
            raise Invalid(path, f"data nested at most {max_depth} levels deep", found="deeper nesting")
        if isinstance(v, float) and not math.isfinite(v):
            raise Invalid(path, "a finite number", found=f"the non-finite number {v!r}")
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, _join(path, str(k)), depth + 1)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, _join(path, i), depth + 1)

    def check(v: Any, path: Path, problems: list[str]) -> Any:
        walk(v, path, 0)
        return v
    return check


def list_of(item: Spec, drop: bool = False, max_items: int | None = None) -> Spec:
    """A list; with ``drop``, a bad item is left out and reported instead of failing the whole file."""
    item_columns = getattr(item, "columns", None)
    item_column = getattr(item, "column", None)
    kind = getattr(item, "kind", None)

    def column(col: list[Any]) -> bool:  # a column of such lists: every item of every list passes
        if set(map(type, col)) - {list}:
            return False
        if max_items is not None and any(len(x) > max_items for x in col):
            return False
        flat = [y for x in col for y in x]
        if not flat:
            return True
        if item_columns is not None:
            return item_columns(flat) is not None
        return item_column is not None and bool(item_column(flat))

    def check(v: Any, path: Path, problems: list[str]) -> Any:
        if not isinstance(v, list):
            raise Invalid(path, "a list", v)
        if max_items is not None and len(v) > max_items:
            raise Invalid(path, f"at most {max_items} items", v)
        if item_column is not None and item_columns is None and len(v) > 1 and item_column(v):
            return v  # a column of plain values (block rows, scope times) every one of which passes, checked at C speed
        by_column = getattr(item, "columns", None)
        if by_column is not None and len(v) > 1:
            out = by_column(v)
            if out is not None:  # every item passed, as the item spec would have found one by one
                return out
        if drop:
            return [x for _, x in _kept(range(len(v)), v, path, lambda _: item, problems, kind)]
        return [item(x, _join(path, i), problems) for i, x in enumerate(v)]
    check.column = column  # type: ignore[attr-defined]
    check.kind = list  # type: ignore[attr-defined]
    return check


def map_of(value: Callable[[str], Spec], drop: bool = True) -> Spec:
    """An object whose keys are names; ``value(key)`` is the spec for that key's value."""
    def check(v: Any, path: Path, problems: list[str]) -> Any:
        if not isinstance(v, dict):
            raise Invalid(path, "an object", v)
        if drop:
            return dict(_kept(list(v), list(v.values()), path, value, problems, None))
        return {k: value(k)(x, _join(path, k), problems) for k, x in v.items()}
    # a column of empty objects passes whatever the values' specs (the one case checked without them)
    check.column = lambda col: set(map(type, col)) <= {dict} and not any(col)  # type: ignore[attr-defined]
    check.kind = dict  # type: ignore[attr-defined]
    return check


@dataclass(frozen=True)
class F:
    """A field of an object: its spec and whether it must be present."""

    spec: Spec
    required: bool = False


def obj(fields: dict[str, F], rule: Callable[[dict[str, Any]], tuple[str, str] | None] | None = None) -> Spec:
    """An object with these fields (others are kept as they are); ``rule`` checks fields against each other
    and returns (field, expected) when they disagree."""
    def check(v: Any, path: Path, problems: list[str]) -> Any:
        if not isinstance(v, dict):
            raise Invalid(path, "an object", v)
        out = dict(v)
        for name, f in fields.items():
            if name not in v:
                if f.required:
                    raise Invalid(_join(path, name), "a value", found="nothing (the field is missing)")
                continue
            out[name] = f.spec(v[name], f"{path}.{shown[name]}" if path else shown[name], problems)
        if rule is not None:
            bad = rule(out)
            if bad is not None:
                raise Invalid(_join(path, bad[0]), bad[1], out.get(bad[0]))
        return out

    shown = {name: visible(name) for name in fields}  # _join's text of each field's name, once
    by_column = _by_column(fields, rule)
    check.kind = dict  # type: ignore[attr-defined]
    check.columns = by_column  # type: ignore[attr-defined]
    check.column = lambda col: by_column(col) is not None  # type: ignore[attr-defined]
    return check


def _by_column(fields: dict[str, F], rule: Callable[[dict[str, Any]], tuple[str, str] | None] | None
               ) -> Callable[[list[Any]], list[dict[str, Any]] | None]:
    """For objects whose every field has a whole-column check: a check of a list of them field by field over
    the whole list, returning what ``obj``'s check returns item by item (None: some item needs the check one by
    one, which names what is wrong). Such fields' checks change nothing, so each object comes out as a copy of
    itself."""
    columns = {name: getattr(f.spec, "column", None) for name, f in fields.items()}
    required = {name for name, f in fields.items() if f.required}

    def by_column(items: list[Any]) -> list[dict[str, Any]] | None:
        if not items:
            return []
        if set(map(type, items)) != {dict}:
            return None
        for name, column in columns.items():
            if name in required:
                try:
                    col = [x[name] for x in items]
                except KeyError:
                    return None
            else:
                col = [x[name] for x in items if name in x]
            if column is None:  # a field without a whole-column check: only where no item has it
                if col:
                    return None
            elif not column(col):
                return None
        out = list(map(dict, items))
        if rule is not None and any(rule(x) is not None for x in out):
            return None
        return out
    return by_column


def fallback(spec: Spec, default: Any) -> Spec:
    """A part the session can do without (the device, instrumentation of one launch): when it is bad,
    report it as skipped and use ``default``."""
    def check(v: Any, path: Path, problems: list[str]) -> Any:
        try:
            return spec(v, path, problems)
        except Invalid as e:
            _skip(problems, path, e)
            return default
    if getattr(spec, "column", None) is not None:
        check.column = spec.column  # type: ignore[attr-defined]  (where every value passes, none falls back)
    return check
