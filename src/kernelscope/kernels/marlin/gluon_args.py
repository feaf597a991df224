"""Host side of the Gluon W4A16 decode kernel (:mod:`gluon_hopper`): what it supports, its stream-K split and its
argument checks, without importing Gluon (each error is one sentence, a ValueError)."""
from __future__ import annotations

from typing import Any

import torch

from .format import group_rows
from .layout_gluon import WORDS

PACK_K = 128  # rows of k per block, as in gemm.py
BLOCK_N = 64  # output columns per program
MAX_M = 64  # tokens: one 64-token tile (a 128-token tile spilled and measured slower: docs/decisions/0001)


def block_m_for(m: int) -> int:
    """BLOCK_M, the token side of the swapped product, for m tokens: the smallest power of two >= m, at least 8
    (TMA zero-fills the rows past m)."""
    return max(8, 1 << (m - 1).bit_length())


def device_supported(device: Any) -> bool:
    """Whether ``device`` runs the Gluon decode kernel (sm_90: its warpgroup MMAs and TMA copies are Hopper's)."""
    dev = torch.device(device)
    return dev.type == "cuda" and torch.cuda.get_device_capability(dev)[0] == 9


def kernel_kwargs(launch: dict[str, Any]) -> dict[str, Any]:
    """A tuner launch (``w4a16_matmul`` keywords, :func:`tune_space.gluon_launch`) as ``gluon_w4a16`` keywords."""
    return dict(programs=launch["programs"], stages=launch["num_stages"], maxnreg=launch["maxnreg"],
                sync_mma=launch.get("sync_mma", False), pdl=launch.get("pdl", False), cluster=launch.get("cluster", 1))


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


MAX_CLUSTER = 8  # the portable thread-block cluster size


def check_cluster(cluster: int, programs: int, tiles: int, kb: int) -> None:
    """``cluster`` S > 1 needs each column tile's k blocks split evenly over S programs, one cluster a tile (one
    sentence, ValueError)."""
    if not 1 <= cluster <= MAX_CLUSTER:
        raise ValueError(f"gluon_w4a16: cluster must be between 1 and {MAX_CLUSTER}, got {cluster}.")
    if cluster > 1 and (programs != tiles * cluster or kb % cluster):
        raise ValueError(f"gluon_w4a16: cluster={cluster} needs programs = {tiles} tiles x {cluster} and the {kb} k "
                         f"blocks of a tile divisible by {cluster}, got programs={programs}.")


def check_args(a: torch.Tensor, words: torch.Tensor, s: torch.Tensor, groupsize: int, n: int, programs: int,
               stages: int, out: torch.Tensor | None) -> tuple[bool, int]:
    """Validate :func:`gluon_w4a16`'s arguments past :func:`supported` (one sentence each, ValueError); returns
    (whether ``words`` is Bk, the rows of k per scale group)."""
    m, k = a.shape
    if k % PACK_K or k == 0:
        raise ValueError(f"gluon_w4a16: k={k} must be a positive multiple of {PACK_K}.")
    units = n // BLOCK_N * (k // PACK_K)
    if not 1 <= programs <= units:
        raise ValueError(f"gluon_w4a16: programs must be between 1 and the {units} (column tile, k block) units, "
                         f"got {programs}.")
    if stages < 2:  # one stage would serialise each copy with its MMA
        raise ValueError(f"gluon_w4a16: stages must be at least 2, got {stages}.")
    bk_shape, bg_shape = (k // 8, n), (k // PACK_K * n, WORDS)
    if words.dtype != torch.int32 or words.device != a.device or tuple(words.shape) not in (bk_shape, bg_shape):
        raise ValueError(f"gluon_w4a16: words must be int32 on {a.device}, of shape {bk_shape} (to_kernel_layout) "
                         f"or {bg_shape} (to_gluon_layout), got {words.dtype} {tuple(words.shape)} on {words.device}.")
    rows = group_rows(k, groupsize)
    if s.dtype != torch.float16 or tuple(s.shape) != (k // rows, n) or not s.is_contiguous():
        raise ValueError(f"gluon_w4a16: s must be a contiguous float16 tensor of shape {(k // rows, n)}.")
    if out is not None and (out.dtype != torch.float16 or tuple(out.shape) != (m, n) or not out.is_contiguous()
                            or out.device != a.device):
        raise ValueError(f"gluon_w4a16: out must be a contiguous float16 tensor of shape {(m, n)} on {a.device}.")
    return tuple(words.shape) == bk_shape, rows
