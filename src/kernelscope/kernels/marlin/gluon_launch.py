"""Host side of the Gluon W4A16 decode kernel (:mod:`gluon_kernel`): what it supports, its stream-K split, its
argument checks (each error one sentence, a ValueError) and its launch (:func:`gluon_w4a16`). Importing this module
needs torch only; Gluon is imported at the first launch."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from .format import group_rows
from .split_counters import tile_counters

PACK_K = 128  # rows of k per block, as in gemm.py
BLOCK_N = 64  # output columns per program
MAX_M = 64  # tokens: one 64-token tile
WORDS = 16  # int32 words per column of a 128-deep block of k (8 nibbles a word)
MAX_CLUSTER = 8  # the portable thread-block cluster size
BARRIER_BYTES = 16  # the cluster receive region's last bytes: one mbarrier (8 bytes), 16-byte aligned


def block_m_for(m: int) -> int:
    """BLOCK_M, the token side of the swapped product, for m tokens: the smallest power of two >= m, at least 8
    (TMA zero-fills the rows past m)."""
    return max(8, 1 << (m - 1).bit_length())


def device_supported(device: Any) -> bool:
    """Whether ``device`` runs the Gluon decode kernel (sm_90: its warpgroup MMAs and TMA copies are Hopper's)."""
    dev = torch.device(device)
    return dev.type == "cuda" and torch.cuda.get_device_capability(dev)[0] == 9


def supported(a: torch.Tensor, n: int) -> str | None:
    """None when the Gluon kernel runs ``a (m, k) @ W (k, n)``, else why not (one sentence)."""
    if not device_supported(a.device):
        return "the Gluon W4A16 kernel is written for sm_90 (Hopper) GPUs"
    if a.dtype != torch.float16 or a.dim() != 2 or not 1 <= a.shape[0] <= MAX_M:
        return f"the Gluon W4A16 kernel takes fp16 a of shape (m, k) with 1 <= m <= {MAX_M}"
    if n % BLOCK_N:
        return f"the Gluon W4A16 kernel takes n a multiple of {BLOCK_N}"
    return None


def work_split(k: int, n: int, programs: int) -> tuple[int, int, bool, int]:
    """The stream-K split of a (k, n) layer over ``programs``: (k-blocks a tile KB, units U = tiles x KB, whether
    some tile is shared by programs, partial slots a tile). Each program takes U / programs consecutive units;
    a tile is shared unless the programs divide the tiles. A tile's programs each cover >= U // programs of its KB
    units except the first and last, hence at most KB // (U // programs) + 2 slots."""
    tiles, kb = n // BLOCK_N, k // PACK_K
    units = tiles * kb
    partials = tiles % programs != 0
    return kb, units, partials, min(programs, kb // (units // programs) + 2) if partials else 1


def check_cluster(cluster: int, programs: int, tiles: int, kb: int) -> None:
    """``cluster`` S > 1 needs each column tile's k blocks split evenly over S programs, one cluster a tile (one
    sentence, ValueError)."""
    if not 1 <= cluster <= MAX_CLUSTER:
        raise ValueError(f"gluon_w4a16: cluster must be between 1 and {MAX_CLUSTER}, got {cluster}.")
    if cluster > 1 and (programs != tiles * cluster or kb % cluster):
        raise ValueError(f"gluon_w4a16: cluster={cluster} needs programs = {tiles} tiles x {cluster} and the {kb} k "
                         f"blocks of a tile divisible by {cluster}, got programs={programs}.")


def check_args(a: torch.Tensor, words: torch.Tensor, s: torch.Tensor, groupsize: int, n: int, programs: int,
               stages: int, out: torch.Tensor | None) -> int:
    """Validate :func:`gluon_w4a16`'s arguments past :func:`supported` (one sentence each, ValueError); returns
    the rows of k per scale group."""
    m, k = a.shape
    if k % PACK_K or k == 0:
        raise ValueError(f"gluon_w4a16: k={k} must be a positive multiple of {PACK_K}.")
    units = n // BLOCK_N * (k // PACK_K)
    if not 1 <= programs <= units:
        raise ValueError(f"gluon_w4a16: programs must be between 1 and the {units} (column tile, k block) units, "
                         f"got {programs}.")
    if stages < 2:  # one stage would serialise each copy with its MMA
        raise ValueError(f"gluon_w4a16: stages must be at least 2, got {stages}.")
    if words.dtype != torch.int32 or words.device != a.device or tuple(words.shape) != (k // 8, n):
        raise ValueError(f"gluon_w4a16: words must be int32 on {a.device}, of shape {(k // 8, n)} (to_kernel_layout), "
                         f"got {words.dtype} {tuple(words.shape)} on {words.device}.")
    rows = group_rows(k, groupsize)
    if s.dtype != torch.float16 or tuple(s.shape) != (k // rows, n) or not s.is_contiguous():
        raise ValueError(f"gluon_w4a16: s must be a contiguous float16 tensor of shape {(k // rows, n)}.")
    if out is not None and (out.dtype != torch.float16 or tuple(out.shape) != (m, n) or not out.is_contiguous()
                            or out.device != a.device):
        raise ValueError(f"gluon_w4a16: out must be a contiguous float16 tensor of shape {(m, n)} on {a.device}.")
    return rows


def extra_bytes(cluster: int, block_n: int, block_m: int) -> int:
    """Dynamic shared memory a program needs past Triton's in a cluster launch: S - 1 partial slots of
    (block_n, block_m) fp32 and the mbarrier."""
    return (cluster - 1) * block_n * block_m * 4 + BARRIER_BYTES


def launch_in_clusters(fn: Any, programs: int, cluster: int, extra: int, args: tuple, kwargs: dict) -> None:
    """Launch the jitted ``fn`` on ``programs`` CTAs in clusters of ``cluster`` along x, with ``extra`` bytes of
    dynamic shared memory past the kernel's own: Triton's launcher, given the cluster size where it reads
    ``num_ctas`` (it then launches ``grid x num_ctas`` CTAs in clusters of ``num_ctas``). The arguments are bound
    and looked up in ``fn``'s cache as its own launch does (compiled there on first use)."""
    from triton import knobs
    from triton.runtime import driver
    from triton.runtime.jit import compute_cache_key

    device = driver.active.get_current_device()
    stream = driver.active.get_current_stream(device)
    # the keys JITFunction.run adds before it binds, so that the cache key is the one its launches use
    kwargs = dict(kwargs, debug=kwargs.get("debug", fn.debug) or knobs.runtime.debug,
                  instrumentation_mode=knobs.compilation.instrumentation_mode)
    kernel_cache, key_cache, _, _, binder = fn.device_caches[device]
    bound, specialization, options = binder(*args, **kwargs)
    kernel = kernel_cache.get(compute_cache_key(key_cache, specialization, options))
    if kernel is None:
        kernel = fn.warmup(*args, grid=(programs, ), **kwargs)
    shared = -(-kernel.metadata.shared // 16) * 16 + extra
    function = _functions.get((kernel.hash, device, shared))
    if function is None:
        # Triton loads the kernel with its own shared memory; past 48 KiB a launch needs the opt-in size
        function = driver.active.utils.load_binary(kernel.name, kernel.kernel, max(shared, 49153), device)[1]
        _functions[(kernel.hash, device, shared)] = function
    values = bound.values()
    kernel.run(programs // cluster, 1, 1, stream, function, (kernel.metadata.num_warps, cluster, shared),
               kernel.launch_metadata((programs, 1, 1), stream, *values),
               knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *values)


_functions: dict[tuple, Any] = {}  # (kernel hash, device, dynamic shared memory) -> the function loaded for it


@lru_cache(maxsize=None)
def _gluon() -> tuple[Any, Any, Any, int]:
    """Gluon's language and tensor descriptor, the jitted kernel and the block recorder's row width, imported on the
    first launch (not per call: a decode launch is a few microseconds)."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from kernelscope.collect.instrument.layout import ROW_VALUES

    from .gluon_kernel import _w4a16_gluon

    return gl, TensorDescriptor, _w4a16_gluon, ROW_VALUES


def gluon_w4a16(a: torch.Tensor, words: torch.Tensor, s: torch.Tensor, groupsize: int, n: int, *,
                programs: int | None = None, stages: int = 4, max_registers: int | None = 96,
                out: torch.Tensor | None = None, sync_mma: bool = False, pdl: bool = False,
                records: torch.Tensor | None = None, cluster_size: int = 1) -> torch.Tensor:
    """fp16 ``a (m, k) @ dequant(words, s)`` -> (m, n), with ``(words, s)`` from :func:`gemm.to_kernel_layout` (the
    Triton kernel's weights). ``programs``: the grid, each program an even share of the (column tile, k block)
    units (stream-K, :func:`work_split`); None: one program a column tile. ``max_registers`` caps each thread's
    registers at launch (None: the compiler's choice). A program is 8 warps: Triton pads the producer warp's
    partition to a warpgroup for its register reallocation, so two programs fit an SM at 96 registers (three at 80,
    four at 64). ``sync_mma``: multiply with mma.sync instead of the warpgroup MMA. ``pdl``: launch as a
    programmatic dependent launch, so that the launch starts while the one before it on the stream ends and copies
    its first blocks of weights meanwhile; only for weights and scales that the launch just before does not write
    (a model's forward; not right after packing them). ``records``: an int64 tensor of at least ``programs`` x 4
    values on the device, into which each program writes the block recorder's row. ``cluster_size``: S > 1 launches
    each column tile's S programs as one thread-block cluster and sums their partials through distributed shared
    memory; ``programs`` must then be the tiles x S and S must divide the k blocks."""
    why = supported(a, n)
    if why:
        raise ValueError(f"gluon_w4a16: {why}.")
    gl, TensorDescriptor, kernel, ROW_VALUES = _gluon()
    m, k = a.shape
    tiles = n // BLOCK_N
    programs = tiles if programs is None else programs
    rows = check_args(a, words, s, groupsize, n, programs, stages, out)
    if records is not None and (records.dtype != torch.int64 or records.device != a.device
                                or records.numel() < programs * ROW_VALUES):
        raise ValueError(f"gluon_w4a16: records must be an int64 tensor on {a.device} of at least "
                         f"{programs * ROW_VALUES} values.")
    kb, units, partials, slots = work_split(k, n, programs)
    check_cluster(cluster_size, programs, tiles, kb)
    block_m = block_m_for(m)
    a = a.contiguous()
    if out is None:
        out = torch.empty((m, n), dtype=torch.float16, device=a.device)
    per_channel = rows == k
    w_desc = TensorDescriptor.from_tensor(words, [WORDS, BLOCK_N], gl.NVMMASharedLayout(128, 32, rank=2))
    a_desc = TensorDescriptor.from_tensor(a, [block_m, PACK_K],
                                          gl.NVMMASharedLayout.get_default_for([block_m, PACK_K], gl.float16))
    s_desc = TensorDescriptor.from_tensor(s.view(-1), [BLOCK_N], gl.NVMMASharedLayout(0, 16, rank=1))
    if partials and cluster_size == 1:
        parts = torch.empty(tiles * slots * BLOCK_N * block_m, dtype=torch.float32, device=a.device)
        counters = tile_counters(a.device, tiles)
    else:
        parts = counters = out  # never read: the PARTIALS branch is compiled out
    args = (w_desc, a_desc, s_desc, out, s, parts, counters, m, n, kb, units, programs, slots,
            out if records is None else records)
    kwargs = dict(GROUP_BLOCKS=1 if per_channel else rows // PACK_K, PER_CHANNEL=per_channel, PARTIALS=partials,
                  STAGES=stages, BLOCK_M=block_m, SYNC_MMA=sync_mma, PDL=pdl, RECORD=records is not None,
                  CLUSTER=cluster_size, num_warps=4, launch_pdl=pdl,
                  **({"maxnreg": max_registers} if max_registers else {}))
    if cluster_size > 1:
        launch_in_clusters(kernel, programs, cluster_size, extra_bytes(cluster_size, BLOCK_N, block_m), args,
                           kwargs)
    else:
        kernel[(programs, )](*args, **kwargs)
    return out
