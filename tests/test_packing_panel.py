"""The data-packing panel on the bundled real layer: every number checked by independent arithmetic."""
from __future__ import annotations

import io
import struct

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("numpy")

from conftest import assert_snapshot  # noqa: E402
from kernelscope.kernels.marlin import pack, quantize  # noqa: E402
from kernelscope.kernels.marlin.explain import (  # noqa: E402
    load_real_layer, packing_example, real_layer_example, unpack_in_registers,
)
from kernelscope.kernels.marlin.layout import fragment_coords  # noqa: E402
from kernelscope.kernels.marlin.panels import PackingPanel  # noqa: E402
from kernelscope.render.show import make_console  # noqa: E402



@pytest.fixture(scope="module")
def layer():
    return load_real_layer()


@pytest.fixture(scope="module")
def packed(layer):
    q, scales = quantize(layer.weight, 128)
    B, s = pack(q, scales, 128)
    return q, scales, B


def _half(bits16: int) -> float:
    return struct.unpack("<e", struct.pack("<H", bits16))[0]


def test_the_bundled_layer_is_a_real_weight_slice(layer):
    w = layer.weight
    assert w.dtype == torch.float16 and tuple(w.shape) == (256, 256)
    assert "all-MiniLM-L6-v2" in layer.source and "intermediate.dense.weight" in layer.source
    assert layer.license == "Apache-2.0"
    # trained weights, not a constant or a ramp: many distinct values of both signs
    assert len(set(w.flatten().tolist())) > 10_000 and float(w.min()) < 0 < float(w.max())


def test_every_word_decodes_to_q_by_bit_arithmetic(packed):
    q, _, B = packed
    ex = real_layer_example()
    for word in ex.words:
        assert word.word == int(B[word.b_row, word.b_col]) & 0xFFFFFFFF
        assert word.word == sum(b << (8 * j) for j, b in enumerate(word.word_bytes))
        for i in range(8):
            nibble = (word.word >> (4 * i)) & 0xF
            from_byte = (word.word_bytes[i // 2] >> (4 * (i % 2))) & 0xF
            row, col = fragment_coords(word.lane, i)
            k, n = 16 * word.b_row + row, 64 * word.chunk + 16 * word.tile + col
            assert nibble == from_byte == word.nibbles[i].value.q == int(q[k, n])


def test_fp16_to_q_follows_the_quantizer(layer, packed):
    q, scales, _ = packed
    for word in real_layer_example().words:
        for slot in word.nibbles:
            v = slot.value
            assert v.weight == float(layer.weight[v.n, v.k])
            assert _half(v.weight_bits) == v.weight
            assert v.scale == float(scales[v.k // 128, v.n])
            assert v.q == min(15, max(0, round(v.ratio) + 8)) == int(q[v.k, v.n])
            assert v.signed == v.q - 8


def test_register_unpack_gives_q_minus_8_for_low_and_high_nibbles(packed):
    ex = real_layer_example()
    w0 = ex.words[0]
    low = w0.nibbles[0].value.q
    assert low >= 8, "the default example must have a low nibble whose sign matters"
    first = next(s for s in ex.unpack.steps if s.fragment)
    assert (first.low_nibble, first.high_nibble) == (0, 4)
    assert first.low_half == low - 8 and first.low_half != low - 16  # offset-binary, not two's complement
    assert first.high_half == w0.nibbles[4].value.q - 8
    # every word of every lane of the chunk, both halves of every fragment register
    for lane in range(32):
        for word in packing_example(load_real_layer().weight, lane=lane).words:
            trace = unpack_in_registers(word)
            assert trace.signed_by_nibble == tuple(s.value.q - 8 for s in word.nibbles)
            for s in trace.steps:
                if s.fragment:
                    assert s.low_half == word.nibbles[s.low_nibble].value.q - 8
                    assert s.high_half == word.nibbles[s.high_nibble].value.q - 8


def test_register_constants_and_steps_are_exact_fp16():
    ex = real_layer_example()
    c = {k.name: k for k in ex.unpack.constants}
    assert _half(c["EX"].bits & 0xFFFF) == 1024.0 and c["EX"].bits >> 16 == c["EX"].bits & 0xFFFF
    assert _half(c["SUB"].bits & 0xFFFF) == 1032.0
    assert _half(c["MUL"].bits & 0xFFFF) == 1 / 16 and _half(c["ADD"].bits & 0xFFFF) == -72.0
    w = ex.words[0].word
    lo = ex.unpack.steps[0]
    assert lo.result_bits == (w & 0x000F000F) | c["EX"].bits
    assert (lo.low_half, lo.high_half) == (1024 + (w & 0xF), 1024 + ((w >> 16) & 0xF))
    for s in ex.unpack.steps:  # each shown half is the fp16 value of the bits shown
        if s.low_half == s.low_half:  # not NaN (the integer shift step has no fp16 halves)
            assert _half(s.result_bits & 0xFFFF) == s.low_half and _half(s.result_bits >> 16) == s.high_half


def _marlin_reader(n: int, int4_index: int, threads: int = 256, tile_n: int = 128) -> tuple[int, int]:
    """(thread, fetch) reading B's 16-byte piece, by Marlin's own index formulas (slice 0, 0)."""
    b_gl_stride = 16 * n // 32  # int4 per B row
    b_sh_stride = 32 * (tile_n // 16) // 4
    b_gl_rd_delta_i = b_gl_stride * (threads // b_sh_stride)
    for fetch in range(4):
        for t in range(threads):
            if b_gl_stride * (t // b_sh_stride) + t % b_sh_stride + b_gl_rd_delta_i * fetch == int4_index:
                return t, fetch
    raise AssertionError("no thread reads this piece")


@pytest.mark.parametrize("b_row,chunk,lane", [(0, 0, None), (5, 1, 7), (3, 0, 31)])
def test_placement_agrees_with_fragment_coords_and_marlin_threads(layer, packed, b_row, chunk, lane):
    _, _, B = packed
    ex = packing_example(layer.weight, b_row=b_row, chunk=chunk, lane=lane)
    for t, word in enumerate(ex.words):
        assert word.tile == t and word.b_col == 128 * chunk + 4 * word.lane + t
        assert word.byte_offset == 4 * (b_row * B.shape[1] + word.b_col)
        for i, slot in enumerate(word.nibbles):
            assert (slot.tile_row, slot.tile_col) == fragment_coords(word.lane, i)
            assert ex.lane_of_cell[slot.tile_row][slot.tile_col] == word.lane
        thread, fetch = _marlin_reader(ex.n, word.byte_offset // 16)
        assert (word.thread, word.fetch) == (thread, fetch)
        assert (word.warp, word.lane) == (thread // 32, thread % 32)
    assert len({w.byte_offset // 16 for w in ex.words}) == 1  # one 16-byte load


def test_lane_of_cell_covers_each_cell_once():
    ex = real_layer_example()
    cells = [(r, c) for r in range(16) for c in range(16)]
    owners = {cell: ex.lane_of_cell[cell[0]][cell[1]] for cell in cells}
    for lane in range(32):
        mine = {fragment_coords(lane, i) for i in range(8)}
        assert {cell for cell, ln in owners.items() if ln == lane} == mine


def test_bad_lane_is_one_sentence(layer):
    with pytest.raises(ValueError, match=r"lane must be in 0\.\.31, got 40\."):
        packing_example(layer.weight, lane=40)


def test_panel_snapshot_at_120_columns():
    buf = io.StringIO()
    make_console(width=120, file=buf, color=False).print(PackingPanel(real_layer_example()))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 120
    ex = real_layer_example()
    assert f"0x{ex.words[0].word:08x}" in text and "frag_b0[0] of lane" in text
    assert_snapshot("packing_real_layer.w120.txt", text)
