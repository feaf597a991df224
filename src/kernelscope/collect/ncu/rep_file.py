"""The container of an .ncu-rep file: whether it is whole, and the protobuf pieces to read its headers.

`ncu_report` reads as many results as it can from a file cut short (a copy that
stopped, a full disk) and says nothing, so a truncated report would pass for a
complete one with kernels missing. The container is documented in the Nsight
Compute Customization Guide, "Report File Format" (version 7): the magic
``NVR\0``, a little-endian uint32 size and a FileHeader proto, then blocks of
(uint32 size, BlockHeader proto, payload); a BlockHeader counts the payload's
sources (field 1) and results (field 2) and gives the payload size (field 5).
A whole file ends exactly where its last block does. Only varints and
length-delimited fields are decoded: no protobuf dependency.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

MAGIC = b"NVR\x00"
SESSION_DETAILS, PAYLOAD_SIZE, NUM_SOURCES, NUM_RESULTS = 3, 5, 1, 2  # BlockHeader fields


class Malformed(Exception):
    """A header that does not decode as the documented layout."""


def varint(b: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise Malformed("truncated varint")
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def fields(b: bytes) -> dict[int, list]:
    """Top-level fields of one proto message: number -> values (ints or bytes)."""
    out: dict[int, list] = {}
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(b, i)
        elif wire == 1:
            value, i = b[i:i + 8], i + 8
        elif wire == 5:
            value, i = b[i:i + 4], i + 4
        elif wire == 2:
            n, i = varint(b, i)
            value, i = b[i:i + n], i + n
        else:
            raise Malformed(f"wire type {wire}")
        if i > len(b):
            raise Malformed("field runs past its message")
        out.setdefault(number, []).append(value)
    return out


def u32(data: bytes, i: int) -> int:
    if i + 4 > len(data):
        raise Malformed("truncated size")
    return struct.unpack_from("<I", data, i)[0]


def _int(header: dict[int, list], number: int) -> int:
    v = header.get(number, [0])[0]
    if not isinstance(v, int):
        raise Malformed(f"field {number} is not a number")
    return v


@dataclass(frozen=True)
class ReportLayout:
    """What the block walk found: whole or not, and how many results the whole blocks hold."""

    known_format: bool  # False: not a layout this walk knows; then nothing is claimed
    complete: bool
    complete_results: int  # results in blocks that lie wholly inside the file
    file_bytes: int
    ends_early_at: int | None = None  # offset of the block the file ends inside


def report_layout(path: str | os.PathLike[str]) -> ReportLayout:
    with open(path, "rb") as f:
        data = f.read()
    size = len(data)
    if data[:4] != MAGIC or size < 8:
        return ReportLayout(False, False, 0, size)
    i = 8 + u32(data, 4)
    results = 0
    while i < size:
        if i + 4 > size or i + 4 + u32(data, i) > size:
            return ReportLayout(True, False, results, size, i)
        n = u32(data, i)
        try:
            header = fields(data[i + 4:i + 4 + n])
            end = i + 4 + n + _int(header, PAYLOAD_SIZE)
            block_results = _int(header, NUM_RESULTS)
        except Malformed:
            return ReportLayout(False, False, results, size)
        if end > size:
            return ReportLayout(True, False, results, size, i)
        results += block_results
        i = end
    return ReportLayout(True, True, results, size)
