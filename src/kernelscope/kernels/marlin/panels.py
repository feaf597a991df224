"""The Marlin demo's panels (Rich): the data-packing panel of `kernelscope demo` and `kernelscope learn marlin`
(real weights through Marlin's INT4 format, byte by byte: quantize, pack, place and unpack, composed by
PackingPanel) and the walkthrough of `learn marlin` (one recorded launch of the W4A16 kernel, phase by phase).

They draw the plain data of panel_data.py, which explain.py and walkthrough.py build from real packed data and a
recorded session; every number comes from there. Rich is imported here, outside render/, because these panels are
part of the demo (docs/decisions/0009-marlin-demo-panels.md); nothing here imports torch.
"""
from __future__ import annotations

import math

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.kernels.marlin.panel_data import PackedWord, PackingExample, Phase, UnpackTrace, Walkthrough
from kernelscope.model import Metric
from kernelscope.render.fit import Column, fit_tables
from kernelscope.render.fmt import duration, size_bytes


# -- the data-packing panel (panel 6)
def _hex32(x: int) -> str:
    return f"0x{x & 0xFFFFFFFF:08x}"


def _half(x: float) -> str:
    if math.isnan(x):
        return "—"
    return f"{x:g}" if x != int(x) or abs(x) >= 1e5 else f"{int(x)}"


def _signed(v: int) -> str:
    return f"{v:+d}"


def _tables(width: int, columns: tuple[str, ...], rows: list[tuple[str, ...]], left: tuple[str, ...] = (),
            prose: tuple[str, ...] = ()) -> list[Table]:
    """Numbers right-aligned and never cut, the named text columns left, prose columns wrapping; what does
    not fit the width goes to a further table that repeats the first column."""
    cols = [Column(c, "left" if c in left or c in prose else "right", wrap=c in prose) for c in columns]
    # cells hold brackets (B[0, 4]) that are not markup
    return fit_tables(width, cols, [tuple(Text(c) for c in r) for r in rows], header_style="bold")


class QuantizeView:
    """Step 1: fp16 weight -> scale of its group -> w / scale -> q = round + 8."""

    def __init__(self, word: PackedWord) -> None:
        self.word = word

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows = []
        for slot in self.word.nibbles:
            v = slot.value
            rows.append((str(slot.nibble), str(v.k), str(v.n), f"{v.weight:+.6f}", f"0x{v.weight_bits:04x}",
                         f"{v.scale:.6f}", f"{v.ratio:+.4f}", str(v.q), _signed(v.signed),
                         f"{v.signed * v.scale:+.6f}"))
        yield Text("1. fp16 -> int4: scale = max|w| · 2/15 over the group; q = round(w / scale) + 8, "
                   "clamped to 0..15", style="bold")
        yield from _tables(options.max_width, ("nibble", "k", "n", "fp16 w", "bits", "scale", "w / scale", "q",
                                               "q - 8", "(q-8)·scale"), rows)


class PackView:
    """Step 2: eight nibbles -> four bytes -> one int32, and the lane's four words."""

    def __init__(self, example: PackingExample) -> None:
        self.example = example

    def _nibble_rows(self, word: PackedWord) -> Table:
        t = Table(box=None, padding=(0, 1), show_header=False)
        t.add_column("", style="bold", no_wrap=True)
        for _ in range(8):
            t.add_column("", justify="center", no_wrap=True)
        order = list(reversed(word.nibbles))  # most significant first, as the word is written
        t.add_row("nibble", *[str(s.nibble) for s in order])
        t.add_row("q (hex)", *[f"{s.value.q:x}" for s in order])
        t.add_row("bits", *[f"{s.value.q:04b}" for s in order])
        t.add_row("byte", *[str(s.byte) if s.nibble % 2 else "" for s in order])
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        ex = self.example
        w = ex.words[0]
        yield Text("\n2. int4 -> nibbles -> bytes -> int32 word: nibble i holds bits 4i..4i+3, low nibble first",
                   style="bold")
        yield self._nibble_rows(w)
        mem = " ".join(f"{b:02x}" for b in w.word_bytes)
        yield Text(f"word = {_hex32(w.word)} = {w.word_int32:,} as int32; in memory (little-endian): {mem}")
        rows = []
        for x in ex.words:
            ks = sorted({s.value.k for s in x.nibbles})
            ns = sorted({s.value.n for s in x.nibbles})
            rows.append((str(x.tile), f"B[{x.b_row}, {x.b_col}]", f"{x.byte_offset:,}", _hex32(x.word),
                         " ".join(f"{b:02x}" for b in x.word_bytes), " ".join(str(s.value.q) for s in x.nibbles),
                         ",".join(map(str, ks)), ",".join(map(str, ns))))
        yield Text(f"lane {w.lane}'s four words, one per 16x16 tile of the chunk (B is int32 "
                   f"{ex.b_shape[0]} x {ex.b_shape[1]}):")
        yield from _tables(options.max_width, ("tile", "B[row, col]", "byte offset", "word", "bytes in memory",
                                               "q by nibble 0..7", "k rows", "n cols"), rows,
                           left=("k rows", "n cols"))


class PlacementView:
    """Step 3: which lane owns which cell of a 16x16 tile, and which thread loads the words."""

    def __init__(self, example: PackingExample) -> None:
        self.example = example

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        ex = self.example
        w = ex.words[0]
        mine = {(s.tile_row, s.tile_col): s.nibble for s in w.nibbles}
        t = Table(box=None, padding=(0, 0), show_header=True, header_style="bold")
        t.add_column("k\\n", justify="right", no_wrap=True)
        for col in range(len(ex.lane_of_cell[0])):
            t.add_column(str(col), justify="right", no_wrap=True, min_width=3)
        for row, lanes in enumerate(ex.lane_of_cell):
            cells = [f"n{mine[(row, c)]}" if (row, c) in mine else str(lane) for c, lane in enumerate(lanes)]
            t.add_row(str(row), *[f" {c}" for c in cells])
        tt = ex.thread_tile
        last = ex.words[-1]
        yield Text("\n3. Placement: the Marlin permutation puts in each lane's word exactly its mma.m16n8k16 "
                   "B fragments", style="bold")
        yield Text(f"Lane owning each cell of a 16x16 tile (k rows x n columns); lane {w.lane}'s cells show the "
                   f"nibble of its word that holds them:")
        yield t
        yield Text(
            f"A 16x64 chunk is 4 such tiles along n. Lane {w.lane} holds the same 8 cells of each tile in words "
            f"{w.b_col}..{last.b_col} of B row {w.b_row} (bytes {w.byte_offset:,}..{last.byte_offset + 3:,}): "
            f"one 16-byte load. In {tt.why}, thread {w.thread} (warp {w.warp}, lane {w.lane}) copies these 16 "
            f"bytes to shared memory with cp.async (its copy {w.fetch} of the stage) and reads the same 16 bytes "
            f"back into its registers.")


class UnpackView:
    """Step 4: the in-register unpack of one word, with the fp16 value of both halves."""

    def __init__(self, trace: UnpackTrace) -> None:
        self.trace = trace

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        tr = self.trace
        w = tr.word
        yield Text(f"\n4. Unpack in registers (Marlin's dequant), word w = {_hex32(w.word)}: "
                   f"no integer convert, just masks and fp16 arithmetic", style="bold")
        yield from _tables(options.max_width, ("constant", "bits", "fp16 each half", "why"),
                           [(k.name, _hex32(k.bits), _half(k.half_value), k.meaning) for k in tr.constants],
                           left=("constant",), prose=("why",))
        yield from _tables(options.max_width, ("operation", "result", "low half", "high half", "nibbles", "goes to"),
                           [(s.operation, _hex32(s.result_bits), _half(s.low_half), _half(s.high_half),
                             f"{s.low_nibble}, {s.high_nibble}", s.fragment) for s in tr.steps],
                           left=("operation",), prose=("goes to",))
        q = " ".join(str(x.value.q) for x in w.nibbles)
        got = " ".join(f"{i}:{_signed(v)}" for i, v in enumerate(tr.signed_by_nibble))
        yield Text(f"signed values by nibble {got}  (q = {q}, so each is q - 8, low and high nibbles alike); "
                   f"with groups, Marlin then multiplies each fragment by its scale.")


class PackingPanel:
    def __init__(self, example: PackingExample) -> None:
        self.example = example

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        ex = self.example
        head = Text.assemble(
            ("Weights: ", "bold"), ex.source, f" · {ex.license}\n",
            f"w (n, k) = ({ex.n}, {ex.k}) fp16 -> q (k, n) -> B int32 ({ex.b_shape[0]}, {ex.b_shape[1]}), "
            f"groupsize {ex.groupsize}. Followed here: {ex.lane_choice}.",
        )
        body = Group(head, QuantizeView(ex.words[0]), PackView(ex), PlacementView(ex), UnpackView(ex.unpack))
        yield Panel(body, title="Data packing · Marlin INT4 (real weights)", title_align="left")


# -- the walkthrough of one launch, phase by phase
def _unit(unit: str, value: float) -> str:
    """'program' -> 'programs' for counts other than one; 'register/thread' -> 'registers/thread'."""
    if not unit or value == 1:
        return unit
    head, sep, tail = unit.partition("/")
    words = head.split(" ")
    words[-1] = words[-1] if words[-1].endswith("s") else words[-1] + "s"
    return " ".join(words) + sep + tail


def figure_value(m: Metric) -> str:
    """A figure's value in its unit; N/A with the reason when it was not measured."""
    if m.is_missing:
        return f"N/A: {m.missing_reason}"
    v, unit = m.value, m.unit
    if isinstance(v, str):
        return v
    if unit in ("byte", "byte/block"):
        return f"{int(v):,} B" + (f" ({size_bytes(v)})" if v >= 1024 else "")
    if unit == "ns":
        return duration(v)
    if unit == "byte/s":
        return f"{float(v) / 1e9:,.1f} GB/s"
    if unit == "FLOP/s":
        return f"{float(v) / 1e12:,.2f} TFLOP/s"
    if unit == "FLOP/byte":
        return f"{float(v):.2f} FLOP/B"
    if unit == "%":
        return f"{float(v):.1f}%"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.2f} {_unit(unit, v)}".rstrip()
    return f"{int(v):,} {_unit(unit, v)}".rstrip()


_COLLECTOR = {"instrument": "in-kernel instrumentation", "ncu": "the counter pass (ncu)"}


def figure_source(m: Metric) -> str:
    if m.is_missing:
        return "" if m.source == "derived" else f"would come from {_COLLECTOR.get(m.source, m.source)}"
    if m.source == "derived" and m.formula:
        return m.formula
    if m.source == "user":
        return "launch parameter"
    return f"{m.source}: {m.raw_name}"


class PhaseView:
    def __init__(self, number: int, phase: Phase) -> None:
        self.number, self.phase = number, phase

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        values = [figure_value(f.metric) for f in self.phase.figures]
        longest_word = max((len(w) for v in values for w in v.split()), default=1)  # a number with its unit
        label_w = max([24, *(len(f.label) for f in self.phase.figures)])
        room = options.max_width - 4 - label_w - 6  # the panel's border and the three columns' padding
        value_w = max(min(longest_word, 24), min(max(map(len, values), default=1), room * 2 // 5))
        t = Table(box=None, padding=(0, 1), show_header=False, expand=True)
        t.add_column("", style="bold", no_wrap=True, min_width=24)
        t.add_column("", overflow="fold", width=value_w)
        t.add_column("", style="dim", overflow="fold", ratio=1)
        for f in self.phase.figures:
            t.add_row(Text(f.label), Text(figure_value(f.metric)), Text(figure_source(f.metric)))
        body = Group(Text(self.phase.what), t)
        yield Panel(body, title=f"{self.number}. {self.phase.title}", title_align="left")


class WalkthroughView:
    def __init__(self, walk: Walkthrough, banner: str | None = None) -> None:
        self.walk, self.banner = walk, banner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        w = self.walk
        if self.banner:
            yield Text(self.banner)
        yield Text.assemble(("Walkthrough · ", "bold"), (w.kernel, "bold"),
                            f" on {w.device}, recorded {w.recorded}\n{w.problem}")
        for i, p in enumerate(w.phases, 1):
            yield PhaseView(i, p)


class NeedsGpuNote:
    """Which parts of what was shown came from a GPU run, for a reader without one."""

    def __init__(self, walk: Walkthrough) -> None:
        self.walk = walk

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = [Text("Needs a GPU (shown above from the recording):", style="bold")]
        lines += [Text(f"  - {x}") for x in self.walk.needs_gpu]
        lines.append(Text("Works here without one: quantizing and packing real weights, the placement of every "
                          "nibble, the in-register unpack, and the bytes, FLOPs and intensity arithmetic."))
        yield Group(*lines)
