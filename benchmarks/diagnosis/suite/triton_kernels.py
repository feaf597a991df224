"""The suite's Triton kernels. Each defect and its fix share one kernel body where they can,
so the only difference between them is the planted defect. They run in the Triton
interpreter (TRITON_INTERPRET=1) for the CPU correctness tests.

A line that carries a planted defect ends in `# planted: CASE [CASE ...]`: the source-line
score (benchmarks/diagnosis/source_score.py) reads the planted lines from these markers."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def scale_copy_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr, COLUMN_ORDER: tl.constexpr):
    """y = 2x + 1 over an (n_rows, n_cols) row-major array.

    COLUMN_ORDER (the defect): program elements are taken down the columns, so neighbouring
    lanes touch addresses n_cols floats apart and each 32-byte sector serves one lane."""
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = e < n_rows * n_cols
    if COLUMN_ORDER:
        off = (e % n_rows) * n_cols + e // n_rows
    else:
        off = e
    x = tl.load(x_ptr + off, mask=mask)  # planted: uncoalesced
    tl.store(y_ptr + off, x * 2.0 + 1.0, mask=mask)  # planted: uncoalesced


@triton.jit(do_not_specialize=["stride"])
def strided_scale_kernel(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
    """y = 2x + 1 at index i * stride. Called with stride = 1, which Triton is told not to
    specialize on: it cannot prove the accesses contiguous and issues 4-byte loads (the defect)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i * stride, mask=mask)
    tl.store(y_ptr + i * stride, x * 2.0 + 1.0, mask=mask)


@triton.jit
def fma_rows_kernel(x_ptr, y_ptr, n_rows, rows_per_prog, ROW: tl.constexpr, ITERS: tl.constexpr):
    """Each program runs `rows_per_prog` consecutive rows of ROW floats through a chain of
    ITERS fused multiply-adds (compute-bound, every block as long as its rows). The tail-effect
    and small-grid cases change only the grid and rows per program."""
    cols = tl.arange(0, ROW)
    for i in range(rows_per_prog):
        r = tl.program_id(0) * rows_per_prog + i
        mask = (cols < ROW) & (r < n_rows)
        a = tl.load(x_ptr + r * ROW + cols, mask=mask, other=0.0)
        for _ in range(ITERS):
            a = a * 0.999 + 0.001
        tl.store(y_ptr + r * ROW + cols, a, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  USE_DOT: tl.constexpr):
    """C = A @ B, fp16 in, fp32 accumulation, fp16 out; M, N, K multiples of the tile.

    Without USE_DOT (the defect) the tile is accumulated as K rank-1 updates (a column of A
    times a row of B), which runs on the FMA pipes: Triton does not turn an outer product into
    an MMA (it does turn a broadcast multiply + sum over K into one, so that form would not
    plant the defect). With USE_DOT, tl.dot on BK-wide slices runs on the tensor cores."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if USE_DOT:
        rk = tl.arange(0, BK)
        for k0 in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc)
    else:
        for k in range(0, K):
            a = tl.load(a_ptr + rm * K + k).to(tl.float32)
            b = tl.load(b_ptr + k * N + rn).to(tl.float32)
            acc += a[:, None] * b[None, :]  # planted: fma_matmul
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def add_one_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = x + 1: the tiny kernel of the launch-bound case."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=mask) + 1.0, mask=mask)


# ---------------------------------------------------------------- check half (issue 35): not tuned on

@triton.jit
def transpose_kernel(x_ptr, y_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr, GATHER: tl.constexpr):
    """y (C x R, row-major) = x (R x C, row-major) transposed; any dtype; R, C multiples of BR, BC.

    GATHER (the defect): each program writes BR*BC consecutive elements of y and gathers them
    from a column of x, so neighbouring lanes read addresses C elements apart. Fixed: a BR x BC
    tile is read along x's rows and written along y's rows (Triton moves it through shared memory)."""
    if GATHER:
        e = tl.program_id(0) * (BR * BC) + tl.arange(0, BR * BC)
        mask = e < R * C
        v = tl.load(x_ptr + (e % R) * C + e // R, mask=mask)  # planted: uncoalesced_bf16_transpose
        tl.store(y_ptr + e, v, mask=mask)
    else:
        rr = tl.program_id(0) * BR + tl.arange(0, BR)
        cc = tl.program_id(1) * BC + tl.arange(0, BC)
        v = tl.load(x_ptr + rr[:, None] * C + cc[None, :])
        tl.store(y_ptr + cc[None, :] * R + rr[:, None], v)


@triton.jit
def rms_rows_kernel(x_ptr, y_ptr, n_rows, rows_per_prog, ROW: tl.constexpr):
    """y = x / sqrt(mean(x^2) + 1e-6) per row of ROW elements (fp32 math, stored in y's dtype).
    Each program normalizes `rows_per_prog` consecutive rows; the small-grid check case changes
    only the grid and the rows per program."""
    cols = tl.arange(0, ROW)
    for i in range(rows_per_prog):
        r = tl.program_id(0) * rows_per_prog + i
        mask = (cols < ROW) & (r < n_rows)
        x = tl.load(x_ptr + r * ROW + cols, mask=mask, other=0.0).to(tl.float32)
        inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / ROW + 1e-6)
        tl.store(y_ptr + r * ROW + cols, (x * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_any_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      USE_DOT: tl.constexpr):
    """C = A @ B for fp32 or fp16/bf16 operands, fp32 accumulation, C in its own dtype; M, N, K
    multiples of the tile. Without USE_DOT (the defect) rank-1 updates from operands loaded
    straight from global memory run on the FMA pipes; with USE_DOT, tl.dot runs on the tensor
    cores (fp32 operands as TF32, Triton's default input precision)."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if USE_DOT:
        rk = tl.arange(0, BK)
        for k0 in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc)
    else:
        for k in range(0, K):
            a = tl.load(a_ptr + rm * K + k).to(tl.float32)
            b = tl.load(b_ptr + k * N + rn).to(tl.float32)
            acc += a[:, None] * b[None, :]  # planted: fma_matmul_fp32 fma_matmul_fp16_rect
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def axpb_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = 0.5 x + 1 in y's dtype (fp32 math): the tiny kernel of the second launch-bound case."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask).to(tl.float32)
    tl.store(y_ptr + i, (x * 0.5 + 1.0).to(y_ptr.dtype.element_ty), mask=mask)
