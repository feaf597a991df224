"""The PTX that unpacks one int32 word of 8 nibbles into fp16 q - 8 (the GPU path of the W4A16 kernel).

A module of its own, without torch or triton, so the walkthrough can count its instructions.
"""
from __future__ import annotations

# One int32 word -> its 8 nibbles as fp16 q - 8, two per instruction (Hopper/Ampere PTX).
# lop3 (a & b) | c (LUT 0xEA) drops a nibble pair into the mantissas of fp16 1024 (0x6400):
# the low nibble of each 16-bit half gives 1024 + q, exactly q - 8 after subtracting 1032
# (0x6408); the next nibble gives 1024 + 16 q, exactly q - 8 after * 1/16 (0x2C00) - 72
# (0xD480); f16x2 arithmetic takes no immediates, hence the constant registers.
# Output i is one f16x2 register holding nibble i (low half) and nibble i + 4 (high half),
# the pair of neighbouring k that the kernel layout puts there, as an MMA operand register
# holds it; the word >> 8 gives nibbles 2, 6 and 3, 7.
UNPACK_PTX = """{
.reg .b32 w2, c1032, c16th, cm72;
mov.b32 c1032, 0x64086408;
mov.b32 c16th, 0x2c002c00;
mov.b32 cm72, 0xd480d480;
lop3.b32 $0, $4, 0x000f000f, 0x64006400, 0xea;
lop3.b32 $1, $4, 0x00f000f0, 0x64006400, 0xea;
shr.b32 w2, $4, 8;
lop3.b32 $2, w2, 0x000f000f, 0x64006400, 0xea;
lop3.b32 $3, w2, 0x00f000f0, 0x64006400, 0xea;
sub.f16x2 $0, $0, c1032;
fma.rn.f16x2 $1, $1, c16th, cm72;
sub.f16x2 $2, $2, c1032;
fma.rn.f16x2 $3, $3, c16th, cm72;
}"""


def instruction_count(ptx: str = UNPACK_PTX) -> int:
    """PTX instructions in the unpack of one word: statements, without register declarations."""
    return sum(1 for line in ptx.splitlines() if line.strip().endswith(";") and not line.strip().startswith(".reg"))
