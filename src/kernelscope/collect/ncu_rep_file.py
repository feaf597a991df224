"""Whether an .ncu-rep file is whole: walks its block structure without interpreting results.

`ncu_report` reads as many results as it can from a file cut short (a copy that
stopped, a full disk) and says nothing, so a truncated report would pass for a
complete one with kernels missing. The file is a magic ``NVR\\0``, a
length-prefixed file header, then blocks: a little-endian uint32 length, a
protobuf block header whose field 2 counts the results in the block and whose
field 5 is the payload size, then the payload. A whole file ends exactly where
its last block does.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

MAGIC = b"NVR\x00"
_NUM_RESULTS, _PAYLOAD_SIZE = 2, 5  # block header fields


@dataclass(frozen=True)
class ReportLayout:
    """What the block walk found: whole or not, and how many results the whole blocks hold."""

    known_format: bool  # False: not a layout this walk knows; then nothing is claimed
    complete: bool
    complete_results: int  # results in blocks that lie wholly inside the file
    file_bytes: int
    ends_early_at: int | None = None  # offset of the block the file ends inside


def _varint(b: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError("varint runs past the header")
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def _header_fields(b: bytes) -> dict[int, int]:
    """The varint fields of a protobuf message (first occurrence each); other wire types are skipped."""
    out: dict[int, int] = {}
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        field_no, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
            out.setdefault(field_no, v)
        elif wire == 2:
            n, i = _varint(b, i)
            i += n
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            raise ValueError(f"unknown protobuf wire type {wire}")
        if i > len(b):
            raise ValueError("field runs past the header")
    return out


def report_layout(path: str | os.PathLike[str]) -> ReportLayout:
    data = open(path, "rb").read()
    size = len(data)
    if data[:4] != MAGIC or size < 8:
        return ReportLayout(False, False, 0, size)
    i = 8 + struct.unpack("<I", data[4:8])[0]
    results = 0
    while i < size:
        if i + 4 > size:
            return ReportLayout(True, False, results, size, i)
        n = struct.unpack("<I", data[i:i + 4])[0]
        if i + 4 + n > size:
            return ReportLayout(True, False, results, size, i)
        try:
            header = _header_fields(data[i + 4:i + 4 + n])
        except ValueError:
            return ReportLayout(False, False, results, size)
        end = i + 4 + n + header.get(_PAYLOAD_SIZE, 0)
        if end > size:
            return ReportLayout(True, False, results, size, i)
        results += header.get(_NUM_RESULTS, 0)
        i = end
    return ReportLayout(True, True, results, size)
