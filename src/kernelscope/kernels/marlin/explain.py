"""Build the data-packing panel from real weights: every number comes from the data.

The weights are quantized and packed by :mod:`format` (bit-exact with Marlin);
this module only reads the packed words back and says where each bit went.
Each nibble is checked against ``q`` at the coordinates that
:func:`layout.fragment_coords` gives, so the panel cannot drift from the format.
"""
from __future__ import annotations

import ast
import io
import struct
import zipfile
from dataclasses import dataclass
from importlib import resources

import torch

from kernelscope.kernels.marlin.panel_data import (
    NibbleSlot, PackedWord, PackingExample, QuantizedValue, RegisterConstant, RegisterStep, ThreadTile, UnpackTrace,
)

from .format import ZERO, group_rows, pack, quantize, unpack
from .layout import CHUNK, LANES, NIBBLES, TILE, TILES_PER_CHUNK, fragment_coords

REAL_LAYER = "real_layer_minilm.npz"
WORDS_PER_CHUNK = CHUNK // NIBBLES  # 128 int32 per 16x64 chunk
NIBBLE_BITS = 4
NIBBLE_MASK = (1 << NIBBLE_BITS) - 1

#: Marlin's launch shape for m <= 16 (marlin_cuda.cpp picks thread_k = thread_n = 128
#: with 256 threads); used only to say which warp of a block loads a word.
MARLIN_SMALL_M_TILE = ThreadTile(threads=256, tile_k=128, tile_n=128,
                                 why="Marlin's thread-block tile for m <= 16: 128 (k) x 128 (n), 256 threads")


@dataclass(frozen=True)
class RealLayer:
    weight: torch.Tensor  # (n, k) fp16, an nn.Linear weight
    source: str
    license: str


def _read_npy(raw: bytes) -> object:
    """One array of an .npy file: fp16 as a torch tensor, int64 as a list, text as str.

    Read by hand (the format is a magic string, a header dict, raw data) so that
    the panel needs no numpy: GPU installs of torch often come without it.
    """
    if raw[:6] != b"\x93NUMPY":
        raise ValueError("not an .npy array")
    size_bytes = 2 if raw[6] == 1 else 4
    header_len = int.from_bytes(raw[8:8 + size_bytes], "little")
    start = 8 + size_bytes + header_len
    header = ast.literal_eval(raw[8 + size_bytes:start].decode("latin1"))
    descr, shape, data = header["descr"], tuple(header["shape"]), raw[start:]
    if header["fortran_order"]:
        raise ValueError("Fortran-ordered arrays are not supported")
    if descr == "<f2":
        return torch.frombuffer(bytearray(data), dtype=torch.float16).reshape(shape)
    if descr == "<i8":
        return list(struct.unpack(f"<{len(data) // 8}q", data))
    if descr.startswith("<U") and shape == ():
        return data.decode("utf-32-le").rstrip("\x00")
    raise ValueError(f"unsupported .npy dtype {descr}")


def read_npz(raw: bytes) -> dict[str, object]:
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        return {name.removesuffix(".npy"): _read_npy(z.read(name)) for name in z.namelist()}


def load_real_layer() -> RealLayer:
    """The slice of a real model's weight bundled with kernelscope (see docs/marlin.md)."""
    d = read_npz(resources.files("kernelscope").joinpath("data", REAL_LAYER).read_bytes())
    weight = d["weight"]
    n, k = weight.shape
    r0, c0 = (int(x) for x in d["offset"])
    full = tuple(int(x) for x in d["full_shape"])
    source = (f"{d['model']} · {d['tensor']}[{r0}:{r0 + n}, {c0}:{c0 + k}] of {full} "
              f"(fp32 -> fp16) · {str(d['source']).split(':')[0]}")
    return RealLayer(weight=weight, source=source, license=str(d["license"]))


def loader_thread(b_row: int, chunk: int, lane: int, tile: ThreadTile = MARLIN_SMALL_M_TILE) -> tuple[int, int, int]:
    """(warp, thread, fetch) of the Marlin thread that copies a lane's 16 bytes to shared memory.

    In Marlin every thread copies 16-byte pieces of a B stage with ``cp.async`` to
    shared index ``threads * fetch + threadIdx`` and later reads the same index
    back into registers (``b_sh_wr = b_sh_rd = threadIdx.x``). A stage row of 16 k
    rows holds ``tile_n / 64`` chunks of 32 pieces, so the piece of (row, chunk,
    lane) is number ``row * 32 * chunks + 32 * chunk + lane`` within the stage.
    """
    rows, chunks = tile.tile_k // TILE, tile.tile_n // (TILE * TILES_PER_CHUNK)
    piece = (b_row % rows) * LANES * chunks + LANES * (chunk % chunks) + lane
    thread = piece % tile.threads
    return thread // LANES, thread, piece // tile.threads


def _fp16(bits16: int) -> float:
    return struct.unpack("<e", struct.pack("<H", bits16 & 0xFFFF))[0]


def _bits16(x: float) -> int:
    """fp16 bit pattern of x, rounded to nearest even (IEEE), as the GPU's fp16 ops round."""
    return struct.unpack("<H", struct.pack("<e", x))[0]


def _round16(x: float) -> float:
    return _fp16(_bits16(x))


def _pair(bits16: int) -> int:
    return bits16 | bits16 << 16


def _lanes(x: int) -> tuple[float, float]:
    return _fp16(x), _fp16(x >> 16)


def _join(lo: float, hi: float) -> int:
    return _bits16(lo) | _bits16(hi) << 16


def register_constants() -> dict[str, RegisterConstant]:
    """The magic numbers of the fp16 unpack, each computed from what it must do.

    fp16 1024 has an exponent that makes the 10 mantissa bits count in units of
    1, so OR-ing a nibble into the low mantissa bits yields 1024 + v, and into
    bits 4..7 yields 1024 + 16 v. Subtracting 1024 + 8, or scaling by 1/16 and
    adding -(64 + 8), leaves v - 8: the signed value, with no integer convert.
    """
    base = 1 << 10  # 2**mantissa bits: the fp16 whose ulp is 1
    shift = 1 << NIBBLE_BITS
    items = [
        ("LO", _pair(NIBBLE_MASK), float("nan"), "keeps nibble 0 of each 16-bit half"),
        ("HI", _pair(NIBBLE_MASK << NIBBLE_BITS), float("nan"), "keeps nibble 1 of each 16-bit half"),
        ("EX", _pair(_bits16(base)), float(base), f"fp16 {base}: OR-ing v into the mantissa gives {base} + v"),
        ("SUB", _pair(_bits16(base + ZERO)), float(base + ZERO), f"{base} + v - ({base} + {ZERO}) = v - {ZERO}"),
        ("MUL", _pair(_bits16(1 / shift)), 1 / shift, f"({base} + {shift}v) / {shift} = {base // shift} + v"),
        ("ADD", _pair(_bits16(-(base / shift + ZERO))), -(base / shift + ZERO),
         f"{base // shift} + v - {base // shift + ZERO} = v - {ZERO}"),
    ]
    return {name: RegisterConstant(name, bits, value, meaning) for name, bits, value, meaning in items}


def _fragment(word: PackedWord, lo: int, hi: int) -> str:
    a, b = word.nibbles[lo].value, word.nibbles[hi].value
    mma = lo >> 1 & 1  # bit 1 of the nibble: the left or right 8 columns (one m16n8k16 each)
    reg = lo & 1  # bit 0: rows 0..7 or 8..15 of the tile
    return f"frag_b{mma}[{reg}] of lane {word.lane}: k {a.k}, {b.k} · n {a.n}"


def unpack_in_registers(word: PackedWord) -> UnpackTrace:
    """Marlin's dequantization of one word, instruction by instruction, in exact fp16."""
    c = register_constants()
    steps: list[RegisterStep] = []
    signed: dict[int, int] = {}

    def step(op: str, bits: int, lo_nib: int, frag: str = "", as_halves: bool = True) -> None:
        low, high = _lanes(bits) if as_halves else (float("nan"), float("nan"))
        steps.append(RegisterStep(op, bits & 0xFFFFFFFF, float(low), float(high), lo_nib, lo_nib + 4, frag))
        if frag:
            signed[lo_nib], signed[lo_nib + 4] = int(low), int(high)

    for shifted, src in ((0, "w"), (8, "w >> 8")):
        # Arithmetic shift, as on an int register; only bits 0..7 and 16..23 survive the masks.
        w = (word.word_int32 >> shifted) & 0xFFFFFFFF
        first = shifted // NIBBLE_BITS  # nibble 0 or 2 lands in the low bits
        if shifted:
            step("w >> 8", w, first, as_halves=False)  # an integer: its halves are not fp16 values
        lo = (w & c["LO"].bits) | c["EX"].bits
        step(f"lo = ({src} & LO) | EX", lo, first)
        sub = _lanes(c["SUB"].bits)
        lo_vals = _lanes(lo)
        step("lo - SUB  (hsub2)", _join(_round16(lo_vals[0] - sub[0]), _round16(lo_vals[1] - sub[1])), first,
             _fragment(word, first, first + 4))
        hi = (w & c["HI"].bits) | c["EX"].bits
        step(f"hi = ({src} & HI) | EX", hi, first + 1)
        mul, add = _lanes(c["MUL"].bits), _lanes(c["ADD"].bits)
        hi_vals = _lanes(hi)
        fma = [_round16(v * m + a) for v, m, a in zip(hi_vals, mul, add)]  # fused: one rounding
        step("hi * MUL + ADD  (hfma2)", _join(fma[0], fma[1]), first + 1, _fragment(word, first + 1, first + 5))
    order = tuple(signed[i] for i in range(NIBBLES))
    return UnpackTrace(word=word, constants=tuple(c.values()), steps=tuple(steps), signed_by_nibble=order)


def _word(B: torch.Tensor, q: torch.Tensor, weight: torch.Tensor, scales: torch.Tensor, groupsize: int,
          b_row: int, chunk: int, lane: int, tile: int, thread_tile: ThreadTile) -> PackedWord:
    b_col = WORDS_PER_CHUNK * chunk + TILES_PER_CHUNK * lane + tile
    word = int(B[b_row, b_col]) & 0xFFFFFFFF
    rows = group_rows(q.shape[0], groupsize)
    slots = []
    for i in range(NIBBLES):
        v = (word >> NIBBLE_BITS * i) & NIBBLE_MASK
        row, col = fragment_coords(lane, i)
        kk, nn = TILE * b_row + row, TILE * (TILES_PER_CHUNK * chunk + tile) + col
        if v != int(q[kk, nn]):
            raise AssertionError(f"nibble {i} of B[{b_row}, {b_col}] is {v}, but q[{kk}, {nn}] = {int(q[kk, nn])}")
        w, s = weight[nn, kk], scales[kk // rows, nn]
        ratio = (w.float() / s.float()).half() if float(s) else torch.tensor(0.0)
        value = QuantizedValue(k=kk, n=nn, weight=float(w), weight_bits=_bits16(float(w)), scale=float(s),
                               ratio=float(ratio), q=v, signed=v - ZERO)
        slots.append(NibbleSlot(nibble=i, first_bit=NIBBLE_BITS * i, byte=i // 2, tile_row=row, tile_col=col,
                                value=value))
    warp, thread, fetch = loader_thread(b_row, chunk, lane, thread_tile)
    return PackedWord(b_row=b_row, b_col=b_col, chunk=chunk, tile=tile, lane=lane, warp=warp, thread=thread,
                      fetch=fetch, byte_offset=4 * (b_row * B.shape[1] + b_col), word=word,
                      word_bytes=tuple((word >> 8 * j) & 0xFF for j in range(4)), nibbles=tuple(slots))


def _pick_lane(B: torch.Tensor, b_row: int, chunk: int) -> tuple[int, str]:
    """The first lane whose first word has a low nibble >= 8: there the sign of the low nibble matters.

    Read as a two's-complement int4 such a nibble would be negative (v - 16);
    Marlin stores v = value + 8, so it decodes to v - 8 >= 0.
    """
    for lane in range(LANES):
        low = int(B[b_row, WORDS_PER_CHUNK * chunk + TILES_PER_CHUNK * lane]) & NIBBLE_MASK
        if low >= ZERO:
            return lane, (f"lane {lane}, the first lane whose first word has a low nibble >= {ZERO}: "
                          f"{low} decodes to {low} - {ZERO} = {low - ZERO:+d}, not to {low - 16:+d} "
                          f"as a two's-complement int4 would")
    return 0, f"lane 0: no lane of this chunk has a low nibble >= {ZERO} in its first word"


def packing_example(weight: torch.Tensor, groupsize: int = 128, *, b_row: int = 0, chunk: int = 0,
                    lane: int | None = None, source: str = "", license: str = "",
                    thread_tile: ThreadTile = MARLIN_SMALL_M_TILE) -> PackingExample:
    """Quantize and pack ``weight (n, k)`` and follow one lane's 16-byte load through it."""
    q, scales = quantize(weight, groupsize)
    B, s = pack(q, scales, groupsize)
    q_back, scales_back = unpack(B, s, groupsize)
    if not (torch.equal(q_back, q) and torch.equal(scales_back, scales)):
        raise AssertionError("pack/unpack did not round-trip on this weight")
    if not (0 <= b_row < B.shape[0] and 0 <= chunk < B.shape[1] // WORDS_PER_CHUNK):
        raise ValueError(f"b_row must be in 0..{B.shape[0] - 1} and chunk in 0..{B.shape[1] // WORDS_PER_CHUNK - 1}.")
    if lane is None:
        lane, why = _pick_lane(B, b_row, chunk)
    elif 0 <= lane < LANES:
        why = f"lane {lane}: chosen by the caller"
    else:
        raise ValueError(f"lane must be in 0..{LANES - 1}, got {lane}.")
    words = tuple(_word(B, q, weight, scales, groupsize, b_row, chunk, lane, t, thread_tile)
                  for t in range(TILES_PER_CHUNK))
    trace = unpack_in_registers(words[0])
    expected = tuple(x.value.signed for x in words[0].nibbles)
    if trace.signed_by_nibble != expected:
        raise AssertionError(f"register unpack gave {trace.signed_by_nibble}, expected q - 8 = {expected}")
    owner = [[-1] * TILE for _ in range(TILE)]
    for ln in range(LANES):
        for i in range(NIBBLES):
            r, col = fragment_coords(ln, i)
            owner[r][col] = ln
    k, n = q.shape
    return PackingExample(source=source, license=license, k=k, n=n, groupsize=groupsize, b_shape=tuple(B.shape),
                          thread_tile=thread_tile, lane_choice=why, words=words, unpack=trace,
                          lane_of_cell=tuple(tuple(r) for r in owner))


def real_layer_example(groupsize: int = 128, **kwargs) -> PackingExample:
    """:func:`packing_example` on the bundled slice of a real model's weight."""
    layer = load_real_layer()
    return packing_example(layer.weight, groupsize, source=layer.source, license=layer.license, **kwargs)
