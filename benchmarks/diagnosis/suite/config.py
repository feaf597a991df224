"""The defect suite in one table: per case, what is planted, which kernelscope rule should
name it, how it is built and at what size.

A case is a kernel with one planted defect ("defect") and the same computation with the
defect removed ("fixed"), or a well-tuned kernel ("control") that no rule should flag
much. The case name is also the name of the kernelscope.region its workload opens, so
`kernelscope run --counters --region CASE` profiles only its kernels.

``expected_rules``: kernelscope rule ids (analyze/rules/*.py) that should fire on the
defect and not on the fixed version. Empty means no rule covers the category yet
("none yet"); the calibration table shows the hole. ``note`` says why, or which
non-rule part of the analysis (bound classification, timeline) touches it today.

``half``: "tuning" (the issue-14 cases the rules were calibrated on: TUNING_CASES, also CASES) or
"check" (CHECK_CASES, issue 35: each defect again at another size, dtype, launch shape or mechanism,
written before the rules change and never tuned on). Reports score the halves apart.

Sizes: ``full`` are for an H100 (each timed kernel or sequence runs roughly 50 µs to a
few ms), ``tiny`` for the Triton interpreter on a CPU (correctness tests only).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFECT, FIXED, CONTROL = "defect", "fixed", "control"
TRITON, CUDA, TORCH = "triton", "cuda", "torch"
TUNING, CHECK = "tuning", "check"
HALVES = (TUNING, CHECK)


@dataclass(frozen=True)
class CaseSpec:
    name: str  # also the kernelscope.region name
    category: str  # the planted defect, in words
    kind: str  # TRITON | CUDA (nvcc-built library, GPU only) | TORCH (library kernels)
    variants: tuple[str, ...]  # (DEFECT, FIXED) or (CONTROL,)
    expected_rules: tuple[str, ...]  # kernelscope rule ids that name the defect; () = none yet
    note: str
    full: dict[str, Any] = field(default_factory=dict)
    tiny: dict[str, Any] = field(default_factory=dict)
    flush_l2: bool = True  # flush L2 before each timed repeat (off where the sequence itself is the point)
    # issue-14 criteria this case is left out of, with the reason (a flaw of the suite the measurements
    # showed, to fix on the next GPU run); the table shows the reason and scores() skips them
    excluded: tuple[tuple[str, str], ...] = ()
    # "tuning": the cases the rules were calibrated on (issue 14); "check": variants of each defect in other
    # sizes, dtypes and launch shapes, written before the issue-35 rule changes and never tuned on (issue 35)
    half: str = TUNING

    @property
    def expected_text(self) -> str:
        if self.variants == (CONTROL,):
            return "(control: no finding over 20%)"
        return ", ".join(self.expected_rules) if self.expected_rules else "none yet"


TUNING_CASES: tuple[CaseSpec, ...] = (
    CaseSpec("uncoalesced", "uncoalesced global access (column-order walk of a row-major array)", TRITON,
             (DEFECT, FIXED), ("uncoalesced-global",),
             "neighbouring lanes touch addresses n_cols floats apart; fixed walks in memory order",
             full={"rows": 8192, "cols": 4096, "block": 1024}, tiny={"rows": 16, "cols": 24, "block": 64}),
    CaseSpec("bank_conflicts", "shared-memory bank conflicts (32x32 transpose tile, unpadded)", CUDA,
             (DEFECT, FIXED), ("shared-bank-conflicts",), "fixed pads the tile to [32][33]",
             full={"width": 8192}, tiny={"width": 64}),
    CaseSpec("local_memory", "dynamically indexed local array (local memory)", CUDA, (DEFECT, FIXED), ("local-memory",),
             "local-memory reads the local sector counters (collected by the counter pass from now on), else the "
             "L1/TEX bytes no global load or store explains; fixed applies the rotation to the global load index",
             full={"k": 32, "n": 1 << 21, "shift": 5}, tiny={"k": 32, "n": 256, "shift": 5}),
    CaseSpec("divergence", "thread divergence (even/odd lanes take different 512-FMA paths)", CUDA,
             (DEFECT, FIXED), ("thread-divergence",), "thread-divergence reads active threads per instruction "
             "(collected by the counter pass from now on, else the value ncu's ThreadDivergence rule attached); fixed "
             "maps even and odd elements to different warps",
             full={"n": 1 << 22, "iters": 512}, tiny={"n": 256, "iters": 8}),
    CaseSpec("tail_effect", "tail effect (1.1 waves of long blocks)", TRITON, (DEFECT, FIXED), ("tail-effect",),
             "defect: ceil(1.1 x blocks/SM x SMs) programs of 8 rows each; fixed: one row per program",
             full={"row": 4096, "iters": 256, "rows_per_prog": 8, "waves": 1.1, "num_warps": 32},
             tiny={"row": 64, "iters": 4, "rows_per_prog": 8, "programs": 3, "num_warps": 1}),
    CaseSpec("small_grid", "grid smaller than the GPU (8 blocks)", TRITON, (DEFECT, FIXED), ("small-grid",),
             "small-grid (idle SMs); tail-effect no longer fires on grids under one wave; fixed: one row per "
             "program",
             full={"row": 4096, "iters": 128, "rows": 2048, "programs": 8, "num_warps": 32},
             tiny={"row": 64, "iters": 4, "rows": 16, "programs": 8, "num_warps": 1}),
    CaseSpec("occupancy_smem", "occupancy limited by shared memory (buffer sized for the worst case)", CUDA,
             (DEFECT, FIXED), ("occupancy-limit",),
             "same kernel; defect launches with 100 KiB dynamic shared memory per 128-thread block, fixed with "
             "the 1 KiB its table uses",
             full={"n": 1 << 20, "table": 256, "reps": 8, "defect_smem": 100 * 1024},
             tiny={"n": 256, "table": 256, "reps": 1, "defect_smem": 100 * 1024}),
    CaseSpec("occupancy_regs", "occupancy limited by registers (a free register budget inflated by a cold path)", CUDA,
             (DEFECT, FIXED), ("occupancy-limit",),
             "one kernel body (a chain over a table in shared memory, plus a never-taken path that holds the table "
             "in 192 registers) compiled twice: defect with __launch_bounds__(128) (199 registers, 2 blocks/SM), "
             "fixed with __launch_bounds__(128, 16) (32 registers, 16 blocks/SM; the cold path spills, unexecuted)",
             full={"n": 1 << 20, "reps": 10}, tiny={"n": 256, "reps": 1}),
    CaseSpec("fma_matmul", "fp16 matmul on the FMA pipes instead of the tensor cores", TRITON, (DEFECT, FIXED),
             ("fma-instead-of-tensor",), "fma-instead-of-tensor: compute-bound, no MMA, operands re-read from "
             "cache; fixed uses tl.dot",
             full={"m": 2048, "n": 2048, "k": 2048, "defect_tile": (64, 64, 0, 4), "fixed_tile": (128, 128, 32, 8)},
             tiny={"m": 64, "n": 64, "k": 64, "defect_tile": (32, 32, 0, 4), "fixed_tile": (32, 32, 16, 4)}),
    CaseSpec("scalar_loads", "memory-bound with scalar (4-byte) instead of vector (16-byte) loads", TRITON,
             (DEFECT, FIXED), ("far-from-bandwidth",),
             "defect multiplies the index by a runtime stride of 1 that Triton may not specialize, so it cannot "
             "prove contiguity; fixed indexes directly",
             full={"n": 1 << 26, "block": 1024}, tiny={"n": 1000, "block": 128},
             excluded=(("planted_is_top", "no measurable defect: on the H100 the 4-byte loads reach the same DRAM "
                        "bandwidth (1.0% real gain), so far-from-bandwidth is right to stay silent"),
                       ("gain_within_15_points", "no measurable defect (1.0% real gain)"),
                       ("gain_within_20_points", "no measurable defect (1.0% real gain)"))),
    CaseSpec("launch_bound", "launch-bound (1,000 tiny kernels instead of one)", TRITON, (DEFECT, FIXED),
             ("launch-bound",), "launch-bound: the bound classification's launch-bound timeline, as a finding",
             full={"chunks": 1000, "chunk": 4096, "block": 1024}, tiny={"chunks": 4, "chunk": 128, "block": 64},
             flush_l2=False),
    CaseSpec("host_gaps", "host gaps (torch.cuda.synchronize inside the loop)", TRITON, (DEFECT, FIXED), ("host-gaps",),
             "host-gaps: host-wait gaps before a quarter or more of the launches",
             full={"n": 1 << 22, "steps": 20, "block": 1024}, tiny={"n": 512, "steps": 3, "block": 64},
             flush_l2=False),
    CaseSpec("control_gemm", "control: cuBLAS fp16 GEMM (torch.matmul)", TORCH, (CONTROL,), (),
             "well tuned: no finding should predict more than 20%", full={"m": 4096, "n": 4096, "k": 4096},
             tiny={"m": 32, "n": 32, "k": 32}),
    CaseSpec("control_sdpa", "control: flash attention (scaled_dot_product_attention)", TORCH, (CONTROL,), (),
             "well tuned: no finding should predict more than 20%",
             full={"batch": 4, "heads": 16, "seq": 2048, "head_dim": 128},
             tiny={"batch": 1, "heads": 2, "seq": 16, "head_dim": 16}),
    CaseSpec("control_add", "control: bandwidth-bound elementwise add (torch)", TORCH, (CONTROL,), (),
             "well tuned: no finding should predict more than 20%", full={"n": 1 << 26}, tiny={"n": 1000}),
)


# The check half (issue 35): each defect again at another size, dtype or launch shape (often another kernel),
# with its fixed twin, plus two controls. Written before the rules change and never tuned on: a rule change
# that helps the tuning half but not these cases is fitted to the tuning half.
CHECK_CASES: tuple[CaseSpec, ...] = (
    CaseSpec("uncoalesced_bf16_transpose", "uncoalesced global access (bf16 transpose gathered down x's columns)",
             TRITON, (DEFECT, FIXED), ("uncoalesced-global",),
             "y = x^T, 4096 x 16384 bf16 (2-byte elements, 2-D pattern): the defect writes y in memory order and "
             "gathers each run from a column of x (lanes 32 KiB apart); fixed moves 64 x 64 tiles (coalesced "
             "reads and writes, through shared memory)",
             full={"rows": 4096, "cols": 16384, "br": 64, "bc": 64},
             tiny={"rows": 32, "cols": 64, "br": 16, "bc": 16}, half=CHECK),
    CaseSpec("bank_conflicts_wide_tile", "shared-memory bank conflicts (64x64 tile, 64x8 threads, unpadded)", CUDA,
             (DEFECT, FIXED), ("shared-bank-conflicts",),
             "rectangular 4096 x 16384 fp32 transpose, 64 x 64 tile, 512-thread blocks (tuning: square, 32 x 32, "
             "256 threads); fixed pads the tile to [64][65]",
             full={"rows": 4096, "cols": 16384}, tiny={"rows": 64, "cols": 128}, half=CHECK),
    CaseSpec("local_memory_k16", "dynamically indexed local array (16 entries, 128-thread blocks)", CUDA,
             (DEFECT, FIXED), ("local-memory",),
             "the rotation of local_memory with a 16-float array, 4 M elements, 128-thread blocks (tuning: 32 "
             "floats, 2 M, 256 threads); fixed rotates the global load index",
             full={"n": 1 << 22, "shift": 3}, tiny={"n": 256, "shift": 3}, half=CHECK),
    CaseSpec("divergence_lane4", "thread divergence (four paths by element % 4, 384 FMAs each)", CUDA,
             (DEFECT, FIXED), ("thread-divergence",),
             "4-way divergence (tuning: 2-way), 128-thread blocks, 384-FMA paths; fixed maps each residue "
             "class to its own warp",
             full={"n": 1 << 22, "iters": 384}, tiny={"n": 256, "iters": 8}, half=CHECK),
    CaseSpec("tail_effect_w8", "tail effect (1.25 waves of long 8-warp blocks)", TRITON, (DEFECT, FIXED),
             ("tail-effect",),
             "fma_rows at 1.25 waves (the last wave a quarter full), 8 warps, 2048-float rows, 16 rows a program "
             "(tuning: 1.1 waves, 32 warps); fixed: one row per program",
             full={"row": 2048, "iters": 192, "rows_per_prog": 16, "waves": 1.25, "num_warps": 8},
             tiny={"row": 32, "iters": 4, "rows_per_prog": 4, "programs": 3, "num_warps": 1}, half=CHECK),
    CaseSpec("tail_effect_w4", "tail effect (2.2 waves of 4-warp blocks)", TRITON, (DEFECT, FIXED),
             ("tail-effect",),
             "fma_rows at 2.2 waves (three waves, the last a fifth full), 4 warps, 1024-float rows, 4 rows a "
             "program; fixed: one row per program",
             full={"row": 1024, "iters": 256, "rows_per_prog": 4, "waves": 2.2, "num_warps": 4},
             tiny={"row": 16, "iters": 4, "rows_per_prog": 4, "programs": 5, "num_warps": 1}, half=CHECK),
    CaseSpec("small_grid_rmsnorm", "grid smaller than the GPU (32 blocks of an fp16 RMS norm)", TRITON,
             (DEFECT, FIXED), ("small-grid",),
             "a memory-bound fp16 row RMS norm (16384 rows of 4096) in 32 programs of 512 rows, 8 warps (tuning: "
             "8 programs of a compute-bound fp32 kernel); fixed: one row per program",
             full={"rows": 16384, "row": 4096, "programs": 32, "num_warps": 8},
             tiny={"rows": 64, "row": 32, "programs": 32, "num_warps": 1}, half=CHECK),
    CaseSpec("occupancy_smem_256", "occupancy limited by shared memory (256-thread blocks, 150 KiB each)", CUDA,
             (DEFECT, FIXED), ("occupancy-limit",),
             "the smem_table_chain kernel in 256-thread blocks with 150 KiB of dynamic shared memory (1 block, "
             "8 warps an SM; tuning: 128-thread blocks of 100 KiB, 2 an SM), a 512-entry table; fixed: the 2 KiB "
             "the table uses (8 blocks, 64 warps)",
             full={"n": 1 << 21, "table": 512, "reps": 4, "threads": 256, "defect_smem": 150 * 1024},
             tiny={"n": 256, "table": 512, "reps": 1, "threads": 256, "defect_smem": 150 * 1024}, half=CHECK),
    CaseSpec("occupancy_regs_hot", "occupancy limited by registers (a hot per-thread weight table in registers)",
             CUDA, (DEFECT, FIXED), ("occupancy-limit",),
             "a latency-bound chain of dependent loads (each warp chases a permutation of 1 M entries, 512 hops); "
             "defect keeps 64 weights per thread in registers on the executed path (~80 registers, 24 warps an SM; "
             "tuning: an unexecuted path under a free register budget), fixed reads them from shared memory "
             "(64 warps)",
             full={"threads": 1 << 20, "rows": 1 << 20, "hops": 512}, tiny={"threads": 256, "rows": 64, "hops": 64},
             half=CHECK),
    CaseSpec("fma_matmul_fp32", "fp32 matmul on the FMA pipes (TF32 tensor cores would serve it)", TRITON,
             (DEFECT, FIXED), ("fma-instead-of-tensor",),
             "2048 x 3072 x 2048 fp32 (tuning: fp16, square), rank-1 updates from operands loaded from global "
             "memory, 32 x 64 tiles, 2 warps; fixed: tl.dot (TF32), 128 x 128 x 32",
             full={"m": 2048, "n": 3072, "k": 2048, "dtype": "float32", "defect_tile": (32, 64, 0, 2),
                   "fixed_tile": (128, 128, 32, 8)},
             tiny={"m": 32, "n": 64, "k": 32, "dtype": "float32", "defect_tile": (16, 32, 0, 2),
                   "fixed_tile": (16, 32, 16, 4)}, half=CHECK),
    CaseSpec("fma_matmul_fp16_rect", "fp16 matmul on the FMA pipes, tall-skinny tiles", TRITON, (DEFECT, FIXED),
             ("fma-instead-of-tensor",),
             "3072 x 2048 x 2048 fp16, 128 x 32 tiles of 4 warps (tuning: 2048 cube, 64 x 64); fixed: tl.dot, "
             "128 x 128 x 64",
             full={"m": 3072, "n": 2048, "k": 2048, "dtype": "float16", "defect_tile": (128, 32, 0, 4),
                   "fixed_tile": (128, 128, 64, 8)},
             tiny={"m": 64, "n": 32, "k": 32, "dtype": "float16", "defect_tile": (32, 16, 0, 4),
                   "fixed_tile": (32, 32, 16, 4)}, half=CHECK),
    CaseSpec("launch_bound_bf16", "launch-bound (256 launches of a tiny bf16 kernel instead of one)", TRITON,
             (DEFECT, FIXED), ("launch-bound",),
             "256 launches of y = 0.5x + 1 on 32768 bf16 each, 2048-element blocks (tuning: 1000 launches of 4096 "
             "fp32); fixed: one launch over the 8 M elements",
             full={"chunks": 256, "chunk": 32768, "block": 2048}, tiny={"chunks": 3, "chunk": 96, "block": 64},
             flush_l2=False, half=CHECK),
    CaseSpec("control_gemm_bf16", "control: cuBLAS bf16 GEMM at tensor-core speed (8192 cube)", TORCH, (CONTROL,), (),
             "well tuned: no finding should predict more than 20%", full={"m": 8192, "n": 8192, "k": 8192},
             tiny={"m": 32, "n": 48, "k": 64}, half=CHECK),
    CaseSpec("control_softmax", "control: torch softmax over fp16 rows (a tuned reduction)", TORCH, (CONTROL,), (),
             "well tuned: no finding should predict more than 20%", full={"rows": 32768, "cols": 2048},
             tiny={"rows": 8, "cols": 64}, half=CHECK),
)

ALL_CASES: tuple[CaseSpec, ...] = TUNING_CASES + CHECK_CASES
# CASES is the tuning half: the recorded sessions in tests/data/diagnosis and the rule tests cover it.
CASES = TUNING_CASES
CASE_BY_NAME: dict[str, CaseSpec] = {c.name: c for c in ALL_CASES}


def cases_of(half: str | None = None) -> tuple[CaseSpec, ...]:
    """The cases of one half ("tuning" or "check"), or all of them (None)."""
    if half is None:
        return ALL_CASES
    if half not in HALVES:
        raise ValueError(f"no half {half!r}; halves: {', '.join(HALVES)}")
    return tuple(c for c in ALL_CASES if c.half == half)


def case(name: str) -> CaseSpec:
    try:
        return CASE_BY_NAME[name]
    except KeyError:
        raise KeyError(f"no case {name!r}; cases: {', '.join(CASE_BY_NAME)}") from None
