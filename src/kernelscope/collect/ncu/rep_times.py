"""When an Nsight Compute report was captured, read from the .ncu-rep file itself.

NVIDIA's `ncu_report` module exposes no creation time, but the report holds two:
`ReportSessionDetails.CreationTime` (field 2, once per report: when ncu started the
session) and `ProfileResult.CreationTime` (field 14, per kernel result), both in
seconds since the Unix epoch. The container is documented in the Nsight Compute
Customization Guide, "Report File Format" (version 7): the magic `NVR\\0`, a
little-endian uint32 size and a FileHeader proto, then blocks of (uint32 size,
BlockHeader proto, payload); a BlockHeader counts the payload's sources (field 1)
and results (field 2), may carry the session details (field 3) and gives the
payload size (field 5); each payload entry is a uint32 size and a proto, sources
first. Field numbers are those of NVIDIA's .proto files (extras/FileFormat).
Only varints and length-delimited fields are decoded here: enough to find two
integers without a protobuf dependency.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path

from kernelscope.collect.ncu.rep_file import (MAGIC, NUM_RESULTS, NUM_SOURCES, PAYLOAD_SIZE, SESSION_DETAILS, Malformed,
                                             fields, u32)

_SESSION_CREATION_TIME = 2  # ReportSessionDetails.CreationTime
_RESULT_CREATION_TIME = 14  # ProfileResult.CreationTime


@dataclass(frozen=True)
class ReportTimes:
    """Capture times from one report, as UTC ISO 8601 strings; None with a reason when absent."""

    session_created_utc: str | None  # ReportSessionDetails.CreationTime
    result_created_utc: tuple[str, ...]  # ProfileResult.CreationTime, in file order
    missing_reason: str | None = None


def _utc(seconds: int) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc).isoformat(timespec="seconds")


def read_report_times(path: str | Path) -> ReportTimes:
    """The capture times in the report at ``path``; never raises for a damaged or foreign file."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        return ReportTimes(None, (), f"the report could not be read ({e.strerror})")
    if not data.startswith(MAGIC):
        return ReportTimes(None, (), "not an uncompressed version-7 .ncu-rep file (no NVR header)")
    session: int | None = None
    results: list[int] = []
    try:
        i = 8 + u32(data, 4)
        while i < len(data):
            size = u32(data, i)
            header = fields(data[i + 4:i + 4 + size])
            i += 4 + size
            payload_size = int(header.get(PAYLOAD_SIZE, [0])[0])
            if session is None and SESSION_DETAILS in header:
                created = fields(header[SESSION_DETAILS][0]).get(_SESSION_CREATION_TIME)
                session = int(created[0]) if created else None
            sources, n_results = int(header.get(NUM_SOURCES, [0])[0]), int(header.get(NUM_RESULTS, [0])[0])
            j, end = i, i + payload_size
            for k in range(sources + n_results):
                n = u32(data, j)
                if k >= sources:
                    created = fields(data[j + 4:j + 4 + n]).get(_RESULT_CREATION_TIME)
                    if created:
                        results.append(int(created[0]))
                j += 4 + n
            if j > end or end > len(data):
                raise Malformed("payload runs past its block")
            i = end
    except (Malformed, TypeError, ValueError) as e:  # a field of an unexpected type counts as malformed
        return ReportTimes(None, (), f"the report's layout was not understood ({e})")
    if session is None and not results:
        return ReportTimes(None, (), "the report records no creation time")
    return ReportTimes(None if session is None else _utc(session), tuple(_utc(t) for t in results),
                       None if session is not None else "the report has no session creation time")
