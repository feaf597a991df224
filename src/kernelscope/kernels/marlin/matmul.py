"""Runs one W4A16 launch: :func:`run` checks the inputs and runs a :class:`LaunchConfig`, the Triton kernel
(:mod:`gemm`) or the Gluon decode kernel (:mod:`gluon_kernel`) on the same weights. The public entry, which also
decides the launch, is :func:`launch.w4a16_matmul`."""
from __future__ import annotations

import os
from typing import Any

import torch

from .format import check_shape, describe, group_rows
from .gemm import GROUP_M, PACK_K, triton_kernel
from .gluon_host import BLOCK_N as GLUON_BLOCK_N
from .launch_config import LaunchConfig
from .split_counters import tile_counters


def _cdiv(x: int, y: int) -> int:
    """Ceiling division (triton.cdiv without importing triton)."""
    return -(-x // y)


def tma_supported(device: Any) -> bool:
    """Whether ``device`` has the tensor memory accelerator (CUDA, sm_90 and later)."""
    dev = torch.device(device)
    return dev.type == "cuda" and torch.cuda.get_device_capability(dev)[0] >= 9


def launch_grid(m: int, n: int, block_m: int, block_n: int, split_k: int = 1) -> tuple[int, int, int]:
    """The kernel's grid: one program per output tile and k split (what a block recorder is sized for)."""
    return (_cdiv(m, block_m) * _cdiv(n, block_n), split_k, 1)


def check_inputs(a: torch.Tensor, B: torch.Tensor, s: torch.Tensor, groupsize: int,
                 out: torch.Tensor | None) -> tuple[int, int, int]:
    """Validate the inputs of a W4A16 call (one sentence each, ValueError); return (m, k, n)."""
    where = "w4a16_matmul"
    if not isinstance(a, torch.Tensor) or a.dtype != torch.float16 or a.dim() != 2 or a.shape[0] < 1:
        desc = describe(a)
        raise ValueError(
            f"{where}: a must be a 2-D float16 tensor of shape (m, k) with m >= 1, got {desc}."
        )
    m, k = a.shape
    if not isinstance(B, torch.Tensor) or B.dtype != torch.int32 or B.dim() != 2:
        desc = describe(B)
        raise ValueError(f"{where}: B must be a 2-D int32 tensor of shape (k // 8, n), got {desc}.")
    if B.shape[0] * 16 == k and isinstance(s, torch.Tensor) and B.shape[1] == 2 * s.shape[-1]:
        raise ValueError(f"{where}: B has Marlin's shape (k // 16, 2 * n); convert it once with "
                         "to_kernel_layout(B, s, groupsize).")
    if B.shape[0] * 8 != k:
        raise ValueError(f"{where}: B must have k // 8 = {k // 8} rows for a with k={k}, got {B.shape[0]}.")
    n = B.shape[1]
    check_shape(k, n, groupsize, where)
    rows = k // group_rows(k, groupsize)
    if not isinstance(s, torch.Tensor) or s.dtype != torch.float16 or tuple(s.shape) != (rows, n):
        desc = describe(s)
        raise ValueError(f"{where}: s must be a float16 tensor of shape {(rows, n)}, got {desc}.")
    if a.device != B.device or a.device != s.device:
        raise ValueError(
            f"{where}: a, B and s must be on one device, got {a.device}, {B.device}, {s.device}."
        )
    if a.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(
            f"{where}: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 before the first call."
        )
    bad_out = out is not None and (
        out.dtype != torch.float16 or tuple(out.shape) != (m, n) or out.device != a.device
    )
    if bad_out:
        raise ValueError(f"{where}: out must be a float16 tensor of shape {(m, n)} on {a.device}.")
    return m, k, n


def _check_triton_launch(a: torch.Tensor, k: int, config: LaunchConfig) -> None:
    """w4a16_matmul's checks of a Triton-kernel launch (one sentence each, ValueError)."""
    if k % (config.split_k * PACK_K):
        raise ValueError(f"w4a16_matmul: k={k} must be a multiple of split_k * {PACK_K} = {config.split_k} * "
                         f"{PACK_K}.")
    if config.tma and a.is_cuda and not tma_supported(a.device):
        raise ValueError("w4a16_matmul: tma needs a GPU with the tensor memory accelerator (sm_90 or later).")


def _check_recorder(recorder: Any, grid: tuple[int, int, int]) -> bool:
    """Whether the launch records its programs; the recorder must be sized for its grid (ValueError)."""
    record = recorder is not None and recorder.enabled
    if record and tuple(recorder.grid) != grid:
        raise ValueError(f"w4a16_matmul: the recorder was sized for grid {tuple(recorder.grid)}, this launch has "
                         f"{grid}.")
    return record


def _gluon(a: torch.Tensor, B: torch.Tensor, s: torch.Tensor, groupsize: int, out: torch.Tensor | None,
           config: LaunchConfig, recorder: Any) -> torch.Tensor:
    """The Gluon decode kernel on the same weights; a block recorder gets its programs' rows."""
    from .gluon_kernel import gluon_w4a16

    n = B.shape[1]
    grid = (config.programs if config.programs is not None else n // GLUON_BLOCK_N, 1, 1)  # None: one a column tile
    record = _check_recorder(recorder, grid)
    return gluon_w4a16(a, B, s, groupsize, n, programs=config.programs, stages=config.num_stages,
                       max_registers=config.max_registers, out=out, sync_mma=config.sync_mma, pdl=config.pdl,
                       records=recorder.buffer if record else None, cluster_size=config.cluster_size)


def run(a: torch.Tensor, B: torch.Tensor, s: torch.Tensor, groupsize: int, config: LaunchConfig, *,
        out: torch.Tensor | None = None, workspace: torch.Tensor | None = None, recorder: Any = None) -> torch.Tensor:
    """``a @ dequant(B, s)`` in fp16 by the launch ``config``, with ``(B, s)`` from :func:`to_kernel_layout`; the
    arguments as :func:`launch.w4a16_matmul`'s."""
    m, k, n = check_inputs(a, B, s, groupsize, out)
    return run_checked(a, B, s, groupsize, config, (m, k, n), out=out, workspace=workspace, recorder=recorder)


def run_checked(a: torch.Tensor, B: torch.Tensor, s: torch.Tensor, groupsize: int, config: LaunchConfig,
                shape: tuple[int, int, int], *, out: torch.Tensor | None = None, workspace: torch.Tensor | None = None,
                recorder: Any = None) -> torch.Tensor:
    """:func:`run` on inputs :func:`check_inputs` accepted, ``shape`` its (m, k, n)."""
    m, k, n = shape
    if not isinstance(config, LaunchConfig):
        raise ValueError(f"w4a16_matmul: config must be a LaunchConfig, got {type(config).__name__}.")
    if config.kernel == "gluon":
        if workspace is not None:
            raise ValueError("w4a16_matmul: workspace is the Triton kernel's (split-k counters); the Gluon kernel "
                             "keeps its own.")
        return _gluon(a, B, s, groupsize, out, config, recorder)
    _check_triton_launch(a, k, config)
    block_m, block_n, split_k = config.block_m, config.block_n, config.split_k
    if out is None:
        out = torch.empty((m, n), dtype=torch.float16, device=a.device)
    a_arg, b_arg = a, B
    if config.tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        if a.stride(1) != 1 or (a.stride(0) * a.element_size()) % 16:
            a = a.contiguous()
        a_arg = TensorDescriptor.from_tensor(a, [block_m, PACK_K])
        b_arg = TensorDescriptor.from_tensor(B, [PACK_K // 8, block_n])
    grid = launch_grid(m, n, block_m, block_n, split_k)
    tiles = grid[0]
    if split_k > 1:
        parts = torch.empty(tiles * split_k * block_m * block_n, dtype=torch.float32, device=a.device)
        if workspace is None:
            counters = tile_counters(a.device, tiles)
        elif workspace.dtype != torch.int32 or workspace.numel() < tiles or workspace.device != a.device:
            raise ValueError(f"w4a16_matmul: workspace must be an int32 tensor of at least {tiles} zeroed "
                             f"counters on {a.device}, got {describe(workspace)}.")
        else:
            counters = workspace
    else:
        parts = counters = out  # never read: the SPLIT_K == 1 branch is compiled out
    record = _check_recorder(recorder, grid)
    triton_kernel()[grid[:2]](
        a_arg, b_arg, s, out, parts, counters, recorder.buffer if record else out,
        m, n, k // split_k,
        a.stride(0), a.stride(1),
        B.stride(0), B.stride(1),
        s.stride(0), s.stride(1),
        out.stride(0), out.stride(1),
        SPLIT_K=split_k,
        GROUP_K=group_rows(k, groupsize),
        PER_CHANNEL=k // group_rows(k, groupsize) == 1,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=PACK_K, GROUP_M=GROUP_M,
        DEQUANT_ASM=a.device.type == "cuda", RAGGED_M=m % block_m != 0, TMA=bool(config.tma), RECORD=record,
        num_warps=config.num_warps, num_stages=config.num_stages,
        **({"maxnreg": config.max_registers} if config.max_registers else {}),
    )
    return out
