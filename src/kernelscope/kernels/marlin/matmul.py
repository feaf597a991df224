"""``w4a16_matmul``: checks the inputs of the W4A16 GEMM (:mod:`gemm`) and launches it, or with
``kernel="gluon"`` the Hopper decode kernel (:mod:`gluon_hopper`) on the same weights.

Split-k partials are added inside the launch, using per-tile counters.
"""
from __future__ import annotations

import os
from typing import Any

import torch

from .format import check_shape, describe, group_rows
from .gemm import PACK_K, _kernel
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


def _pow2_at_least(x: int, lo: int, hi: int) -> int:
    """Smallest power of two >= x, kept within [lo, hi]."""
    p = lo
    while p < x and p < hi:
        p *= 2
    return p


def _check(a: torch.Tensor, B: torch.Tensor, s: torch.Tensor, groupsize: int,
           out: torch.Tensor | None, split_k: int, block_k: int) -> tuple[int, int, int]:
    """Validate the inputs of :func:`w4a16_matmul`; return (m, k, n)."""
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
    if block_k != PACK_K:
        raise ValueError(f"{where}: block_k must be {PACK_K} (one block of the kernel layout), got {block_k}.")
    if split_k < 1 or k % (split_k * block_k):
        raise ValueError(f"{where}: k={k} must be a multiple of split_k * BLOCK_K = {split_k} * {block_k}.")
    return m, k, n


def _check_triton_launch(a: torch.Tensor, block_m: int, block_n: int, group_m: int, prefetch: int, tma: bool,
                         programs: int | None, sync_mma: bool, pdl: bool, cluster: int) -> None:
    """w4a16_matmul's checks of a Triton-kernel launch (one sentence each, ValueError)."""
    if programs is not None or sync_mma or pdl or cluster != 1:
        raise ValueError("w4a16_matmul: programs, sync_mma, pdl and cluster are arguments of the Gluon kernel "
                         "(kernel='gluon').")
    if prefetch not in (0, 1, 2):
        raise ValueError(f"w4a16_matmul: prefetch must be 0, 1 or 2 slices, got {prefetch}.")
    if block_m not in (16, 32, 64, 128, 256) or block_n not in (16, 32, 64, 128, 256) or group_m < 1:
        raise ValueError(f"w4a16_matmul: block_m and block_n must be one of 16..256 "
                         f"(powers of two) and group_m >= 1, got {block_m}, {block_n} and {group_m}.")
    if tma and a.is_cuda and not tma_supported(a.device):
        raise ValueError("w4a16_matmul: tma needs a GPU with the tensor memory accelerator (sm_90 or later).")
    if tma and prefetch:
        raise ValueError(f"w4a16_matmul: tma loads go through shared memory, so prefetch must be 0, got {prefetch}.")


def _gluon(a: torch.Tensor, B: torch.Tensor, s: torch.Tensor, groupsize: int, out: torch.Tensor | None, kernel: str,
           programs: int | None, num_stages: int, maxnreg: int | None, sync_mma: bool, pdl: bool, cluster: int,
           triton_only: bool, recorder: Any) -> torch.Tensor:
    """w4a16_matmul's ``kernel="gluon"``: the Gluon decode kernel on the same weights; a block recorder gets its
    programs' rows (gluon_record writes the recorder's layout)."""
    if kernel != "gluon":
        raise ValueError(f"w4a16_matmul: kernel must be 'triton' or 'gluon', got {kernel!r}.")
    if triton_only:
        raise ValueError("w4a16_matmul: the Gluon kernel takes programs, num_stages, maxnreg, sync_mma, pdl, "
                         "cluster and recorder only (no split_k, tma, prefetch or workspace).")
    from kernelscope.collect.instrument.layout import ROW_VALUES

    from .gluon_args import BLOCK_N
    from .gluon_hopper import gluon_w4a16

    n = B.shape[1]
    grid = (programs if programs is not None else n // BLOCK_N, 1, 1)  # gluon_w4a16's default: one a column tile
    record = recorder is not None and recorder.enabled
    if record and tuple(recorder.grid) != grid:
        raise ValueError(f"w4a16_matmul: the recorder was sized for grid {tuple(recorder.grid)}, this launch has "
                         f"{grid}.")
    return gluon_w4a16(a, B, s, groupsize, n, programs=programs, stages=num_stages, maxnreg=maxnreg, out=out,
                       sync_mma=sync_mma, pdl=pdl, records=recorder.buffer if record else None,
                       record_values=ROW_VALUES, cluster=cluster)


def w4a16_matmul(
    a: torch.Tensor,
    B: torch.Tensor,
    s: torch.Tensor,
    groupsize: int,
    *,
    out: torch.Tensor | None = None,
    split_k: int = 1,
    block_m: int | None = None,
    block_n: int = 128,
    block_k: int = PACK_K,
    group_m: int = 8,
    num_warps: int = 4,
    num_stages: int = 3,
    swap_ab: bool = False,
    dequant_asm: bool | None = None,
    prefetch: int = 0,
    maxnreg: int | None = None,
    tma: bool = False,
    _skip_split_sum: bool = False,
    workspace: torch.Tensor | None = None,
    recorder: Any = None,
    kernel: str = "triton",
    programs: int | None = None,
    sync_mma: bool = False,
    pdl: bool = False,
    cluster: int = 1,
) -> torch.Tensor:
    """``a @ dequant(B, s)`` in fp16, with ``(B, s)`` from :func:`to_kernel_layout`.

    a is fp16 ``(m, k)`` for any m >= 1.  ``split_k > 1`` splits k across
    programs (more parallelism for small m); the fp32 partial sums are added
    inside the same launch, in split order, so results are deterministic.
    ``swap_ab`` computes the transposed product (n on the MMA's M side).
    ``dequant_asm`` unpacks with PTX two weights per instruction (default: on a
    GPU; the interpreter runs the plain Triton unpack); ``prefetch`` (0, 1 or 2)
    is how many k slices of weights are loaded into registers ahead of the one unpacked.
    ``maxnreg`` caps registers per thread (more programs per SM, maybe spills).
    ``tma`` loads weight and activation tiles with the Hopper tensor memory
    accelerator (one bulk copy per tile instead of per-thread copies; sm_90+,
    no prefetch).
    ``workspace``: zeroed int32 per-tile counters for split-k, at least one per
    output tile, owned by the caller (e.g. one per stream); the kernel leaves it
    zeroed. Without it a per-device buffer is kept here, for one stream at a time.
    ``recorder``: a ``collect.instrument.recorder.BlockRecorder`` sized for this
    launch's grid, ``(ceil(m / block_m) * ceil(n / block_n), split_k, 1)``: every
    program writes the SM it ran on and its start and end time (GPU only).
    ``_skip_split_sum``: measurement only, the result is WRONG: the split-k partials are stored but never
    added, to time what the in-launch sum costs (docs/decisions/0001).
    ``out``, if given, receives the result.  Block sizes are powers of two;
    BLOCK_K must divide 128 so that a slice of k never straddles two scale groups.
    ``kernel="gluon"``: the Gluon decode kernel (:func:`gluon_hopper.gluon_w4a16`, sm_90, m <= 64) on the same
    weights, with ``programs`` (its stream-K grid), ``num_stages``, ``maxnreg`` and ``sync_mma`` (mma.sync instead
    of the warpgroup MMA), ``pdl`` (a programmatic dependent launch: see :func:`gluon_hopper.gluon_w4a16`),
    ``cluster`` (each column tile's programs one thread-block cluster: see :func:`gluon_hopper.gluon_w4a16`) and
    ``recorder`` (sized for its grid, ``(programs, 1, 1)``); the Triton kernel's tile arguments do not apply to it.
    :func:`configs.choose_launch` and :func:`autotune.launch_for` pick these for a device and shape.
    """
    m, k, n = _check(a, B, s, groupsize, out, split_k, block_k)
    if kernel != "triton":
        triton_only = split_k != 1 or tma or prefetch or workspace is not None
        return _gluon(a, B, s, groupsize, out, kernel, programs, num_stages, maxnreg, sync_mma, pdl, cluster,
                      triton_only or _skip_split_sum, recorder)
    if block_m is None:
        block_m = _pow2_at_least(m, 16, 64)
    _check_triton_launch(a, block_m, block_n, group_m, prefetch, tma, programs, sync_mma, pdl, cluster)
    if out is None:
        out = torch.empty((m, n), dtype=torch.float16, device=a.device)
    a_arg, b_arg = a, B
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        if a.stride(1) != 1 or (a.stride(0) * a.element_size()) % 16:
            a = a.contiguous()
        a_arg = TensorDescriptor.from_tensor(a, [block_m, block_k])
        b_arg = TensorDescriptor.from_tensor(B, [block_k // 8, block_n])
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
    record = recorder is not None and recorder.enabled
    if record and tuple(recorder.grid) != grid:
        raise ValueError(f"w4a16_matmul: the recorder was sized for grid {tuple(recorder.grid)}, this launch has "
                         f"{grid}.")
    _kernel()[grid[:2]](
        a_arg, b_arg, s, out, parts, counters, recorder.buffer if record else out,
        m, n, k // split_k,
        a.stride(0), a.stride(1),
        B.stride(0), B.stride(1),
        s.stride(0), s.stride(1),
        out.stride(0), out.stride(1),
        SPLIT_K=split_k,
        GROUP_K=group_rows(k, groupsize),
        PER_CHANNEL=k // group_rows(k, groupsize) == 1,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, SWAP_AB=bool(swap_ab),
        DEQUANT_ASM=bool(a.device.type == "cuda" if dequant_asm is None else dequant_asm),
        PREFETCH=int(prefetch), RAGGED_M=m % block_m != 0, TMA=bool(tma),
        RECORD=record, SKIP_SUM=bool(_skip_split_sum),
        num_warps=num_warps, num_stages=num_stages, **({"maxnreg": maxnreg} if maxnreg else {}),
    )
    return out
