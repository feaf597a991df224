"""CUDA C++ kernels instrumented with kernelscope.cuh: the buffers of one launch, read back and handed to the session.

The header (``kernelscope/include/kernelscope.cuh``, its folder printed by
``kernelscope include-dir``) records, when compiled with ``-DKS_RECORD``:

- block records: one row of four int64 per block, the layout of ``layout.py``;
- warp phase scopes, into an int64 buffer laid out as::

      value 0          capacity: records the buffer holds (written by the host)
      value 1          claimed: slots claimed, SCOPES_CHUNK per atomicAdd of a warp's recording lane
      value 2          SCOPES_MAGIC (written by the host)
      value 3          dropped: records that found no room (the kernel counts them)
      4 + 2*i, 5 + 2*i record i: [%globaltimer ns, packed]
                       packed = block id (bits 0-31) | warp in block (32-39) | %smid (40-51)
                                | scope id (52-61) | 1 for END, 0 for BEGIN (bit 62)

  A record that finds no room is counted, never written. %globaltimer is never
  zero on a running GPU, so a slot whose time is zero was never written (the
  unused rest of a warp's last claim). The header's ``#define``\\ s hold the same
  numbers (tests compare them).

On the host::

    rec = CudaScopes(grid, {0: "load", 1: "compute", 2: "store"}, block=256, scopes_per_warp=3)
    kernel(grid, block, (x, y, rec.blocks, rec.scopes))     # cupy RawKernel; or a torch extension
    rec.submit("kernel_name")    # waits, reads, validates, hands both to the session's trace pass

The reader functions are pure: they take the buffer's values (a list, a numpy
array, or the raw little-endian bytes) and need no GPU. Memory: the values as
int64 columns (16 bytes per record), one sort key per written record while
records are paired (about 56 bytes), and the scopes handed to the session
(three ints per scope in its lists); no object per record. torch and cupy are
imported only by ``CudaScopes``, for the array kind it allocates.
"""
from __future__ import annotations

import array
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from kernelscope.collect.instrument import scope_sink, sink
from kernelscope.collect.instrument.layout import buffer_values
from kernelscope.collect.instrument.reader import read_block_buffer
from kernelscope.collect.instrument.recorder import InstrumentError, grid3
from kernelscope.model import BlockRecords, PhaseScopes, WarpScopes

HEADER_NAME = "kernelscope.cuh"
ENABLE_MACRO = "KS_RECORD"
SOURCE = "kernelscope.cuh"  # BlockRecords.source and PhaseScopes.source of what the header recorded
COLLECTOR = "kernelscope.cuh warp scopes (%globaltimer per record; slots claimed 8 at a time per warp)"

HEADER_VALUES = 4
HDR_CAPACITY, HDR_CLAIMED, HDR_MAGIC, HDR_DROPPED = 0, 1, 2, 3
RECORD_VALUES = 2
SCOPES_CHUNK = 8  # slots a warp's recording lane claims with one atomicAdd
SCOPES_MAGIC = 0x4B53434F50453031  # "KSCOPE01"
MAX_SCOPE_ID = 1023
# packed value of a record: (shift, mask) of each field
BLOCK_FIELD = (0, 0xFFFFFFFF)
WARP_FIELD = (32, 0xFF)
SMID_FIELD = (40, 0xFFF)
SCOPE_FIELD = (52, 0x3FF)
END_FIELD = (62, 0x1)

ENABLE_HINT = ("compile it with -DKS_RECORD (nvcc -DKS_RECORD; NVRTC / cupy.RawModule options=('-DKS_RECORD', "
               "'-I' + include dir); torch cpp_extension extra_cuda_cflags=['-DKS_RECORD'])")


class CudaScopesError(InstrumentError):
    """The buffer cannot be read as kernelscope.cuh wrote it; the message is one sentence for the user."""


class NotInstrumentedError(CudaScopesError):
    """The kernel left the buffers untouched: it was built without KS_RECORD (or never reached the macros)."""


def include_dir() -> Path:
    """The folder holding kernelscope.cuh, for ``-I`` (nvcc, NVRTC) or ``extra_include_paths`` (cpp_extension)."""
    return Path(__file__).resolve().parents[2] / "include"


def compile_options(record: bool = True) -> tuple[str, ...]:
    """NVRTC / nvcc options that find the header and, with ``record``, turn the recorders on."""
    return (f"-I{include_dir()}",) + ((f"-D{ENABLE_MACRO}",) if record else ())


def _field(packed: int, f: tuple[int, int]) -> int:
    return (packed >> f[0]) & f[1]


def buffer_ints(buffer: Any) -> array.array:
    """The buffer's values as int64 columns (8 bytes each): from a list or tuple, anything with ``tolist()`` (numpy,
    a CPU tensor), or the raw bytes (little-endian int64, as the GPU wrote them). A value outside int64 is refused:
    the GPU cannot have written it."""
    a = array.array("q")
    if isinstance(buffer, (bytes, bytearray, memoryview)):
        raw = bytes(buffer)
        if len(raw) % 8:
            raise CudaScopesError(f"a buffer of {len(raw):,} bytes is not whole int64 values")
        a.frombytes(raw)
        if sys.byteorder != "little":
            a.byteswap()
        return a
    if str(getattr(buffer, "dtype", "")) in ("int64", "torch.int64") and hasattr(buffer, "tobytes"):
        a.frombytes(buffer.tobytes())  # a numpy array: its bytes, without a Python int per value
        return a
    if hasattr(buffer, "tolist"):
        buffer = buffer.tolist()
    try:
        a.extend(int(v) for v in buffer)
    except OverflowError:
        raise CudaScopesError("a buffer value lies outside int64: it is not a buffer the GPU wrote") from None
    except (TypeError, ValueError):
        raise CudaScopesError(f"a {type(buffer).__name__} is not a buffer of int64 values") from None
    return a


def scope_names(names: Mapping[int, str] | Sequence[str]) -> dict[int, str]:
    """Scope id -> name, from ``{0: "load", 1: "mma"}`` or ``["load", "mma"]`` (ids 0, 1, ...)."""
    pairs = list(names.items()) if isinstance(names, Mapping) else list(enumerate(names))
    out: dict[int, str] = {}
    for sid, name in pairs:
        if isinstance(sid, bool) or not isinstance(sid, int) or not 0 <= sid <= MAX_SCOPE_ID:
            raise CudaScopesError(f"scope id {sid!r} is not a whole number from 0 to {MAX_SCOPE_ID}, the ids "
                                  "KS_SCOPE_BEGIN can record")
        if not isinstance(name, str) or not name.strip():
            raise CudaScopesError(f"scope id {sid} needs a name (a non-empty string), not {name!r}")
        out[sid] = name
    return out


def scope_capacity(grid: Any, block: Any, scopes_per_warp: int) -> int:
    """Slots one launch claims when every warp of every block passes ``scopes_per_warp`` scopes: two records
    each, rounded up to whole claims of SCOPES_CHUNK."""
    g, b = grid3(grid), grid3(block)
    warps = -(-(b[0] * b[1] * b[2]) // 32)
    return g[0] * g[1] * g[2] * warps * -(-(scopes_per_warp * 2) // SCOPES_CHUNK) * SCOPES_CHUNK


@dataclass(frozen=True)
class ScopeHeader:
    capacity: int  # records the buffer holds
    claimed: int  # slots the kernel claimed (whole chunks)
    dropped: int  # records that found no room

    @property
    def written_slots(self) -> int:
        """Slots that may hold a record: the claimed ones inside the buffer."""
        return min(self.claimed, self.capacity)

    @property
    def untouched(self) -> bool:
        return self.claimed == 0 and self.dropped == 0


def read_scope_header(values: Sequence[int]) -> ScopeHeader:
    """The header of a scope buffer; raises CudaScopesError when it is not one the host side prepared."""
    if len(values) < HEADER_VALUES:
        raise CudaScopesError(f"a scope buffer starts with {HEADER_VALUES} header values; this one holds "
                              f"{len(values)}")
    if values[HDR_MAGIC] != SCOPES_MAGIC:
        raise CudaScopesError("the buffer's header lacks kernelscope's mark: allocate it with CudaScopes (or write "
                              "capacity, 0, KS_SCOPES_MAGIC, 0 into its first four values) before the launch")
    capacity, claimed, dropped = values[HDR_CAPACITY], values[HDR_CLAIMED], values[HDR_DROPPED]
    room = (len(values) - HEADER_VALUES) // RECORD_VALUES
    if not 0 <= capacity <= room:
        raise CudaScopesError(f"the header says the buffer holds {capacity:,} records but it has room for {room:,}: "
                              "the kernel could have written past its end")
    if claimed < 0 or dropped < 0:
        raise CudaScopesError(f"the header's counters are negative (claimed {claimed:,}, dropped {dropped:,}): the "
                              "buffer was overwritten")
    return ScopeHeader(capacity, claimed, dropped)


@dataclass
class _Pairing:
    """Scopes paired per warp, and what would not pair."""

    intervals: dict[tuple[int, int], list[tuple[int, int, int]]] = field(default_factory=dict)  # (scope, start, end)
    smids: dict[tuple[int, int], set[int]] = field(default_factory=dict)
    unended: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # scope->warps
    unbegun: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    block_first: dict[int, int] = field(default_factory=dict)  # block -> time of its first record
    records: int = 0  # written records read


_LOW64 = (1 << 64) - 1
_T_BIAS = 1 << 63  # int64 times made non-negative, so they order inside one sort key


def _sorted_records(values: Sequence[int], header: ScopeHeader) -> tuple[list[int], int]:
    """The written records as one int each, ordered by (block, warp, time, slot): warp key << 128 | biased time
    << 64 | slot. One int per record (about 56 bytes while the records are paired) instead of an object; and
    the count of records past the slots the kernel claimed."""
    cap, claimed = header.capacity, min(header.claimed, header.capacity)
    times = values[HEADER_VALUES:HEADER_VALUES + RECORD_VALUES * cap:RECORD_VALUES]
    packed = values[HEADER_VALUES + 1:HEADER_VALUES + RECORD_VALUES * cap:RECORD_VALUES]
    stray = sum(1 for slot in range(claimed, cap) if times[slot] or packed[slot])
    keys = sorted(((((p & 0xFFFFFFFF) << 8 | (p >> 32) & 0xFF) << 128) | ((t + _T_BIAS) << 64) | slot)
                  for slot, t, p in zip(range(claimed), times, packed) if t)
    return keys, stray


def _pair(values: Sequence[int], keys: list[int]) -> _Pairing:
    """Per warp, in time order (slot order between equal times: one lane's claims are in program order): each END
    closes the latest open BEGIN of the same scope id."""
    p = _Pairing(records=len(keys))
    k, n = 0, len(keys)
    while k < n:
        warp_key = keys[k] >> 128
        key = (warp_key >> 8, warp_key & 0xFF)
        open_: dict[int, list[int]] = defaultdict(list)
        got: list[tuple[int, int, int]] = []
        sms: set[int] = set()
        p.block_first[key[0]] = min(p.block_first.get(key[0], 1 << 64), ((keys[k] >> 64) & _LOW64) - _T_BIAS)
        while k < n and keys[k] >> 128 == warp_key:
            t = ((keys[k] >> 64) & _LOW64) - _T_BIAS
            packed = values[HEADER_VALUES + RECORD_VALUES * (keys[k] & _LOW64) + 1]
            k += 1
            scope = _field(packed, SCOPE_FIELD)
            sms.add(_field(packed, SMID_FIELD))
            if not _field(packed, END_FIELD):
                open_[scope].append(t)
            elif open_[scope]:
                got.append((scope, open_[scope].pop(), t))
            else:
                p.unbegun[scope].append(key)
        for scope, starts in open_.items():
            if starts:
                p.unended[scope] += [key] * len(starts)
        p.intervals[key] = sorted(got, key=lambda v: (v[1], v[2]))
        p.smids[key] = sms
    return p


def _warps_text(warps: list[tuple[int, int]], limit: int = 4) -> str:
    head = ", ".join(f"block {b} warp {w}" for b, w in warps[:limit])
    return head + (f" and {len(warps) - limit:,} more" if len(warps) > limit else "")


def _scope_problems(p: _Pairing, names: dict[int, str], header: ScopeHeader, written: int, stray: int) -> list[str]:
    out: list[str] = []
    if header.dropped:
        out.append(f"the scope buffer was too small: {header.dropped:,} of {written + header.dropped:,} records were "
                   f"dropped (it holds {header.capacity:,} slots, claimed {SCOPES_CHUNK} at a time per warp; the "
                   "records made after it filled are missing, so the timeline ends early); allocate room for "
                   f"{header.claimed:,} or more")
    cause = " (their ends may be among the dropped records)" if header.dropped else ""
    for scope, warps in sorted(p.unended.items()):
        out.append(f"{len(warps):,} '{names.get(scope, f'scope {scope}')}' scope(s) began and never ended "
                   f"({_warps_text(warps)}): left out, not drawn as complete{cause}")
    for scope, warps in sorted(p.unbegun.items()):
        out.append(f"{len(warps):,} '{names.get(scope, f'scope {scope}')}' scope(s) ended without a begin "
                   f"({_warps_text(warps)}): left out")
    if stray:
        out.append(f"{stray:,} record(s) lie past the {header.claimed:,} slots the kernel claimed: the buffer was not "
                   "zeroed before the launch, or holds another launch's records; they were left out")
    split = [k for k, sms in sorted(p.smids.items()) if len(sms) > 1]
    if split:
        out.append(f"{len(split):,} warp(s) recorded more than one SM ({_warps_text(split)}): the buffer mixes "
                   "launches")
    unnamed = sorted({sc for ivs in p.intervals.values() for sc, _, _ in ivs} - set(names))
    if unnamed:
        out.append(f"scope id(s) {', '.join(str(v) for v in unnamed)} were recorded but given no name: shown as "
                   "'scope <id>'")
    return out


def read_scope_buffer(buffer: Any, names: Mapping[int, str] | Sequence[str]) -> PhaseScopes:
    """A scope buffer (values, numpy array or bytes) -> PhaseScopes in %globaltimer ns.

    Per warp, scope times count from its block's first record; ``block_offset_ns`` is that record's time minus the
    launch's first. What could not be read as complete scopes (dropped records, scopes that never ended) is one
    sentence each in ``problems``. Raises NotInstrumentedError when the kernel claimed no
    slot at all, CudaScopesError when the buffer is not a kernelscope scope buffer.
    """
    values = buffer_ints(buffer)
    header = read_scope_header(values)
    named = scope_names(names)
    keys, stray = _sorted_records(values, header)
    if header.untouched and not stray:
        raise NotInstrumentedError("no warp recorded a phase scope (the buffer is as the host left it): the kernel "
                                   f"was built without {ENABLE_MACRO} or never reached KS_SCOPE_BEGIN with this "
                                   f"buffer; {ENABLE_HINT}")
    p = _pair(values, keys)
    del keys
    ids = sorted(set(named) | {sc for ivs in p.intervals.values() for sc, _, _ in ivs})
    index = {sid: i for i, sid in enumerate(ids)}
    out = PhaseScopes(names=[named.get(sid, f"scope {sid}") for sid in ids], clock="globaltimer", source=SOURCE,
                      problems=_scope_problems(p, named, header, p.records, stray))
    block_first = p.block_first
    low = min(block_first.values(), default=0)
    for (block, warp), ivs in sorted(p.intervals.items()):
        if not ivs:  # nothing complete to draw; its problems say why
            continue
        base = block_first[block]
        out.warps.append(WarpScopes(block_id=block, warp=warp, smid=min(p.smids[(block, warp)]),
                                    scope=[index[sc] for sc, _, _ in ivs], start_ns=[s - base for _, s, _ in ivs],
                                    end_ns=[e - base for _, _, e in ivs], block_offset_ns=base - low))
    return out


def read_cuda_blocks(buffer: Any, grid: Any) -> BlockRecords:
    """A block record buffer the header wrote -> BlockRecords (source kernelscope.cuh); raises NotInstrumentedError
    when no block wrote its row."""
    values = buffer_ints(buffer)
    if not any(values):
        raise NotInstrumentedError(f"no block wrote its record (the buffer is all zero): the kernel was built without "
                                   f"{ENABLE_MACRO} or never reached KS_BLOCK_END with this buffer; {ENABLE_HINT}")
    return read_block_buffer(values, grid3(grid), source=SOURCE)


@dataclass
class CudaRecords:
    """What one instrumented launch recorded: block records (None when not asked for) and phase scopes."""

    blocks: BlockRecords | None
    scopes: PhaseScopes


class CudaScopes:
    """The buffers of one launch of a kernel instrumented with kernelscope.cuh, and their way to the session.

    ``names``: scope id -> name. The scope buffer holds ``capacity`` records, or, without it, two per scope for
    ``scopes_per_warp`` scopes in every warp of ``block``. ``blocks=False`` skips the block buffer (``.blocks`` is
    then a one-value placeholder); ``array`` is "torch" (on ``device``) or "cupy" (on cupy's current device).
    ``enabled=False`` gives placeholders and submits nothing, so the same call site runs plain.
    """

    def __init__(self, grid: Any, names: Mapping[int, str] | Sequence[str], *, block: Any = None,
                 scopes_per_warp: int | None = None, capacity: int | None = None, blocks: bool = True,
                 array: str = "torch", device: Any = "cuda", enabled: bool = True) -> None:
        self.grid = grid3(grid)
        self.names = scope_names(names)
        self.enabled = bool(enabled)
        self.record_blocks = bool(blocks) and self.enabled
        if capacity is None:
            if block is None or scopes_per_warp is None:
                raise CudaScopesError("give the scope buffer's capacity (records), or block= and scopes_per_warp= "
                                      "to size it for every warp")
            capacity = scope_capacity(self.grid, block, int(scopes_per_warp))
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise CudaScopesError(f"the scope buffer's capacity is a positive number of records, not {capacity!r}")
        self.capacity = capacity if self.enabled else 0
        if array not in ("torch", "cupy"):
            raise CudaScopesError(f"array is 'torch' or 'cupy', not {array!r}")
        self.array = array
        header = [self.capacity, 0, SCOPES_MAGIC, 0]
        n_scopes = HEADER_VALUES + RECORD_VALUES * self.capacity
        self.blocks = self._zeros(buffer_values(self.grid) if self.record_blocks else 1, device)
        self.scopes = self._zeros(n_scopes, device)
        self._write_header(header)
        self._sync()  # the fills must not fall inside the launch's host time window
        self.host_start_ns = time.time_ns()

    def _zeros(self, n: int, device: Any) -> Any:
        if self.array == "cupy":
            import cupy

            return cupy.zeros(n, dtype=cupy.int64)
        import torch

        return torch.zeros(n, dtype=torch.int64, device=device)

    def _write_header(self, header: list[int]) -> None:
        if self.array == "cupy":
            import cupy

            self.scopes[:HEADER_VALUES] = cupy.asarray(header, dtype=cupy.int64)
        else:
            import torch

            self.scopes[:HEADER_VALUES] = torch.tensor(header, dtype=torch.int64)

    def _sync(self) -> None:
        if self.array == "cupy":
            import cupy

            cupy.cuda.get_current_stream().synchronize()
            return
        import torch

        if self.scopes.is_cuda:
            torch.cuda.synchronize(self.scopes.device)

    def _host(self, buf: Any) -> Any:
        return buf.get() if self.array == "cupy" else buf.cpu().numpy()

    def read(self) -> CudaRecords | None:
        """Wait for the launch, read both buffers back and validate them (None when disabled)."""
        if not self.enabled:
            return None
        self._sync()
        scope_values = buffer_ints(self._host(self.scopes))
        block_values = buffer_ints(self._host(self.blocks)) if self.record_blocks else None
        scopes_written = not read_scope_header(scope_values).untouched
        blocks_written = block_values is not None and any(block_values)
        if not scopes_written and not blocks_written:
            what = "no block record and no phase scope" if block_values is not None else "no phase scope"
            raise NotInstrumentedError(f"the kernel wrote {what} (its buffers are as the host left them): it was "
                                       f"built without {ENABLE_MACRO}; {ENABLE_HINT}")
        if not scopes_written:
            raise CudaScopesError("the kernel wrote block records but no phase scope: it never reached "
                                  "KS_SCOPE_BEGIN with this buffer (KS_SCOPES_INIT takes the .scopes buffer)")
        if block_values is not None and not blocks_written:
            raise CudaScopesError("the kernel recorded phase scopes but no block wrote its record: it never reached "
                                  "KS_BLOCK_END with the .blocks buffer (or pass blocks=False)")
        blocks = read_block_buffer(block_values, self.grid, source=SOURCE) if block_values is not None else None
        return CudaRecords(blocks, read_scope_buffer(scope_values, self.names))

    def submit(self, kernel: str) -> CudaRecords | None:
        """Read the records and hand them to the session: attached to the launch of ``kernel`` (its name as the trace
        shows it, or the short name) that ran while the buffers were armed, when the trace pass ends."""
        rec = self.read()
        if rec is None:
            return None
        end = time.time_ns()
        if rec.blocks is not None:
            sink.submit(sink.Submission(kernel, self.grid, rec.blocks, self.host_start_ns, end))
        dropped = next((p for p in rec.scopes.problems if p.startswith("the scope buffer was too small")), None)
        scope_sink.submit(scope_sink.ScopeSubmission(kernel, rec.scopes, self.host_start_ns, end, dropped,
                                                     collector=COLLECTOR))
        return rec
