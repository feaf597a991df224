"""Host side of the Gluon W4A16 decode kernel (:mod:`gluon_kernel`): what it supports, its stream-K split, its
argument checks (each error one sentence, a ValueError) and the launcher of thread-block clusters. Importing this
module needs torch only (the tuner's launch space reads it on any machine)."""
from __future__ import annotations

from typing import Any

import torch

from .format import group_rows

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
