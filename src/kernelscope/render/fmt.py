"""Number formatting for panels: durations, bytes, counts; N/A with its reason."""
from __future__ import annotations

from kernelscope.model import Metric


def duration(ns: float | int | None) -> str:
    if ns is None:
        return "N/A"
    ns = float(ns)
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def size_bytes(n: int | float | None) -> str:
    if n is None:
        return "N/A"
    n = float(n)
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def count(n: int | None) -> str:
    return "N/A" if n is None else f"{n:,}"


def dim3(d: tuple[int, int, int]) -> str:
    return f"({d[0]}, {d[1]}, {d[2]})"


def dim3_compact(d: tuple[int, int, int]) -> str:
    """(2, 66, 1) -> "2×66": trailing unit dimensions dropped."""
    dims = list(d)
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return "×".join(str(x) for x in dims)


def metric_value(m: Metric | None) -> str:
    if m is None:
        return "N/A"
    if m.is_missing:
        return f"N/A ({m.missing_reason})"
    v = m.value
    if isinstance(v, float):
        text = f"{v:,.2f}"
    elif isinstance(v, int) and not isinstance(v, bool):
        text = f"{v:,}"
    else:
        text = str(v)
    return f"{text} {m.unit}".rstrip()


def truncate(s: str, width: int) -> str:
    return s if len(s) <= width else s[: max(0, width - 1)] + "…"
