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


def plural(n: int, word: str, words: str | None = None) -> str:
    """"1 block", "2 blocks", "1,024 blocks": the count with its noun in the right number."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def waves(x: float) -> str:
    """A wave count: two decimals, or two significant digits below 0.1, so a grid far smaller than one wave
    does not read '0.00 waves'."""
    return f"{x:.2f}" if x == 0 or x >= 0.1 else f"{x:.2g}"


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


def truncate(s: str, width: int) -> str:
    return s if len(s) <= width else s[: max(0, width - 1)] + "…"


def bar(pct: float, width: int = 20) -> str:
    """A horizontal bar for a percentage, eighth-block resolution."""
    pct = max(0.0, min(100.0, pct))
    eighths = round(pct / 100.0 * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")).ljust(width, "·")


def metric_cell(m: Metric | None, kind: str = "") -> str:
    """A Metric as a short cell: bytes humanised, % with one decimal, N/A with its reason."""
    if m is None:
        return "N/A"
    if m.is_missing:
        return f"N/A ({m.missing_reason})"
    v = m.value
    if kind == "bytes" or m.unit == "byte":
        return size_bytes(float(v))
    if m.unit == "%":
        return f"{float(v):.1f}%"
    unit = "" if m.unit in ("inst", "sector", "byte/block", "register/thread") else m.unit  # the column says it
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        v = int(v)  # ncu reports counters as doubles
    if isinstance(v, float):
        return f"{v:,.2f} {unit}".rstrip()
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,} {unit}".rstrip()
    return f"{v} {unit}".rstrip()


def short_cell(m: Metric | None, kind: str = "") -> str:
    """metric_cell without the reason, for narrow table cells (the panel lists reasons once)."""
    return "N/A" if m is None or m.is_missing else metric_cell(m, kind)


_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str) -> str:
    """1.23e12, "FLOP/s" -> "1.23 TFLOP/s" (decimal prefixes, as rates are quoted)."""
    unit = {"byte/s": "B/s", "byte": "B"}.get(unit, unit)
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def number(value: object) -> str:
    """An evidence value: integers with thousands separators (ncu's whole doubles too), floats to 4 digits."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)  # ncu reports counters as doubles
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
