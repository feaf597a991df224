"""Plain data for the Marlin demo's data-packing panel and kernel walkthrough.

Builders (explain.py, walkthrough.py) fill these from real packed data and a recorded session; panels.py draws
them. No third-party imports, so drawing never needs torch.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernelscope.model.metric import Metric


@dataclass(frozen=True)
class QuantizedValue:
    """One weight on its way from fp16 to a 4-bit value."""

    k: int  # row of the transposed weight (input feature)
    n: int  # column (output feature)
    weight: float  # the fp16 value, exactly
    weight_bits: int  # its 16-bit pattern
    scale: float  # fp16 scale of its group
    ratio: float  # weight / scale, rounded to fp16 as the packer does
    q: int  # 0..15 = round(ratio) + 8, clamped
    signed: int  # q - 8, the value the GPU multiplies with


@dataclass(frozen=True)
class NibbleSlot:
    """Where one 4-bit value sits in its int32 word and which MMA fragment cell it feeds."""

    nibble: int  # 0..7, low first
    first_bit: int  # 4 * nibble
    byte: int  # byte of the word in memory order (little-endian)
    tile_row: int  # k row inside the 16x16 tile
    tile_col: int  # n column inside the 16x16 tile
    value: QuantizedValue


@dataclass(frozen=True)
class PackedWord:
    """One int32 of Marlin's B, where it lies and which thread loads it."""

    b_row: int  # row of B: k rows 16 * b_row .. + 15
    b_col: int  # int32 column in that row
    chunk: int  # 16x64 chunk along n (b_col // 128)
    tile: int  # 16x16 tile inside the chunk (0..3)
    lane: int  # lane whose fragments it holds
    warp: int  # warp of the Marlin thread block that loads it
    thread: int  # 32 * warp + lane
    fetch: int  # which of the thread's 16-byte copies of a pipeline stage
    byte_offset: int  # offset in B, bytes
    word: int  # unsigned 32-bit value
    word_bytes: tuple[int, ...]  # the 4 bytes in memory order
    nibbles: tuple[NibbleSlot, ...]  # 8, nibble 0 first

    @property
    def word_int32(self) -> int:
        return self.word - (1 << 32) if self.word >= 1 << 31 else self.word


@dataclass(frozen=True)
class RegisterConstant:
    """A constant of the in-register unpack, with the fp16 value it encodes."""

    name: str
    bits: int  # 32-bit pattern
    half_value: float  # value of each 16-bit half as fp16
    meaning: str


@dataclass(frozen=True)
class RegisterStep:
    """One instruction of the unpack, its 32-bit result and the two fp16 halves."""

    operation: str  # e.g. "lo = (w & LO) | EX"
    result_bits: int
    low_half: float  # fp16 value of bits 0..15
    high_half: float  # fp16 value of bits 16..31
    low_nibble: int  # nibble index whose value the low half carries
    high_nibble: int
    fragment: str  # which MMA fragment register receives it, "" for intermediate steps


@dataclass(frozen=True)
class UnpackTrace:
    word: PackedWord
    constants: tuple[RegisterConstant, ...]
    steps: tuple[RegisterStep, ...]
    signed_by_nibble: tuple[int, ...]  # 8 values, nibble 0 first, as the steps computed them


@dataclass(frozen=True)
class ThreadTile:
    """The Marlin launch shape used to say which warp loads a word."""

    threads: int
    tile_k: int
    tile_n: int
    why: str


@dataclass(frozen=True)
class PackingExample:
    """Real weights followed byte by byte: quantize, pack, place, unpack."""

    source: str  # model, tensor and file the weights came from
    license: str
    k: int
    n: int
    groupsize: int
    b_shape: tuple[int, int]
    thread_tile: ThreadTile
    lane_choice: str  # why this lane was picked
    words: tuple[PackedWord, ...]  # one lane's 16-byte load: a word per tile of the chunk
    unpack: UnpackTrace  # of words[0]
    lane_of_cell: tuple[tuple[int, ...], ...]  # 16x16: lane that owns each (row, col) of a tile


# -- the walkthrough of one launch -------------------------------------------

@dataclass(frozen=True)
class Figure:
    """A number of the walkthrough: measured, derived with its formula, or N/A with why."""

    label: str
    metric: Metric


@dataclass(frozen=True)
class Phase:
    title: str
    what: str  # what the kernel does in this phase, in a sentence or two
    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class Walkthrough:
    kernel: str
    device: str
    recorded: str  # when the session was recorded (UTC)
    problem: str  # e.g. "C[16, 8192] = A[16, 8192] @ W[8192, 8192], int4 weights, groupsize 128"
    phases: tuple[Phase, ...]
    needs_gpu: tuple[str, ...]  # what in this walkthrough came from running on a GPU

    def figure(self, label: str) -> Metric:
        """The metric of the figure with this label (KeyError if there is none)."""
        for p in self.phases:
            for f in p.figures:
                if f.label == label:
                    return f.metric
        raise KeyError(label)
