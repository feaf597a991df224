"""The PTX that unpacks one int32 word of 8 nibbles into fp16 q - 8 (the GPU path of the W4A16 kernel).

A module of its own, without torch or triton, so the walkthrough can count its instructions.
"""
from __future__ import annotations

# One int32 word -> its 8 nibbles as fp16 q - 8, two per instruction (Hopper/Ampere PTX).
# lop3 (a & b) | c (LUT 0xEA) drops a nibble pair into the mantissas of fp16 1024 (0x6400):
# the low nibble of each 16-bit half gives 1024 + q, exactly q - 8 after subtracting 1032
# (0x6408); the next nibble gives 1024 + 16 q, exactly q - 8 after * 1/16 (0x2C00) - 72
# (0xD480); f16x2 arithmetic takes no immediates, hence the constant registers.
# Halves: (nibble 0, 4), (1, 5), then the word >> 8 gives (2, 6), (3, 7).
UNPACK_PTX = """{
.reg .b32 t0, t1, t2, t3, w2, c1032, c16th, cm72;
mov.b32 c1032, 0x64086408;
mov.b32 c16th, 0x2c002c00;
mov.b32 cm72, 0xd480d480;
lop3.b32 t0, $8, 0x000f000f, 0x64006400, 0xea;
lop3.b32 t1, $8, 0x00f000f0, 0x64006400, 0xea;
shr.b32 w2, $8, 8;
lop3.b32 t2, w2, 0x000f000f, 0x64006400, 0xea;
lop3.b32 t3, w2, 0x00f000f0, 0x64006400, 0xea;
sub.f16x2 t0, t0, c1032;
fma.rn.f16x2 t1, t1, c16th, cm72;
sub.f16x2 t2, t2, c1032;
fma.rn.f16x2 t3, t3, c16th, cm72;
mov.b32 {$0, $4}, t0;
mov.b32 {$1, $5}, t1;
mov.b32 {$2, $6}, t2;
mov.b32 {$3, $7}, t3;
}"""


def instruction_count(ptx: str = UNPACK_PTX) -> int:
    """PTX instructions in the unpack of one word: statements, without register declarations."""
    return sum(1 for line in ptx.splitlines() if line.strip().endswith(";") and not line.strip().startswith(".reg"))
