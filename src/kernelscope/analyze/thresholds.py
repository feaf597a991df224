"""Every threshold the bound classification, the timeline and the rules use, in one place.

Each is a judgement, not a measurement; the comment says why it sits where it
does. Changing one here changes every panel and test that depends on it.
"""
from __future__ import annotations

# -- bound classification (analyze/bound.py) ---------------------------------------------

# A unit at or above this % of its peak (ncu's speed-of-light %) is what bounds the kernel.
# Same cut as ncu's own SOLBottleneck rule, as the H100 recordings show: transpose_smem at
# 59.1% memory got "Latency Issue", copy_coalesced at 63.3% got "High Memory Throughput".
SOL_BOUND_PCT = 60.0

# Below SOL_BOUND_PCT on every unit, a kernel with fewer warps than this % of the SM's
# maximum (theoretical or achieved) is called occupancy-limited rather than latency-bound:
# with under half the warps the scheduler has little to switch to while one waits.
OCCUPANCY_LIMITED_PCT = 50.0

# A kernel this short (median) can be launch-bound: a PyTorch eager launch costs the CPU
# several microseconds, so kernels much shorter than ~10 µs can run faster than they are fed.
LAUNCH_BOUND_MAX_MEDIAN_NS = 10_000

# ... and it is launch-bound when the GPU sat idle before its launches (median gap, gaps
# up to HOST_STALL_GAP_NS with no synchronize in them) at least this many times its own median duration.
LAUNCH_BOUND_GAP_RATIO = 1.0

# -- timeline gaps (analyze/timeline.py) -----------------------------------------------------

# A rank's wait at a collective under this is not marked as a barrier on the timeline or in the Collectives
# panel (launch jitter, not a straggler). In the recorded 2x H200 run (tests/data/ranks) the collectives with
# no planted delay before them spread 0.07-1.8 µs (one all-gather 13.8 µs), the planted delay's 2.8-3.0 ms.
BARRIER_MARK_MIN_NS = 1_000

# Gaps up to this are the GPU switching between queued kernels, not idling: the H100
# recordings show 0.9-1.4 µs between back-to-back kernels of one stream.
BACK_TO_BACK_GAP_NS = 2_000

# Gaps from BACK_TO_BACK_GAP_NS up to this are launch overhead (the CPU was launching the
# next kernel); longer ones mean the host did other work (Python, synchronize, data prep):
# a few eager launches' worth of CPU time is tens of microseconds.
HOST_WAIT_GAP_NS = 50_000

# -- rules (analyze/rules/) ------------------------------------------------------------------

# Uncoalesced: flag a global load/store kind using at most half of each 32-byte sector.
UNCOALESCED_MAX_BYTES_PER_SECTOR = 16.0
# ... and only when that kind moves at least this share of the kernel's global sectors
# (a reduction's few scattered stores are not worth a finding).
UNCOALESCED_MIN_SECTOR_SHARE = 0.10

# Bank conflicts: flag when at least this share of shared-memory wavefronts are extra
# wavefronts caused by conflicts (1 - 1/N for an N-way conflict: 2-way is 0.5) ...
BANK_CONFLICT_MIN_SHARE = 0.25
# ... over at least this many shared instructions (ncu counts a few conflicts even in
# conflict-free kernels: the H100 reduce_kernel shows 11 over 73,856 loads).
BANK_CONFLICT_MIN_INSTRUCTIONS = 1_000

# Register spills: any local-memory spill request is worth naming.
SPILL_MIN_REQUESTS = 1

# Occupancy: suggest lifting it when theoretical occupancy is at or under this %, and
# only when no unit is at SOL_BOUND_PCT (a kernel at a ceiling does not need more warps).
OCCUPANCY_FINDING_MAX_PCT = 50.0

# Tail effect: flag when this share of the block slots of the launch's waves stay empty,
# (ceil(waves) - waves) / ceil(waves); 62 waves leave 1.5% empty, 0.48 waves 52%.
TAIL_MIN_IDLE_SHARE = 0.20

# Stalls: a reason with at least this share of all stall cycles is "dominant".
STALL_DOMINANT_SHARE = 0.40
# Reasons that are not waiting: "selected" is issuing, "not_selected" had a ready warp.
STALL_NOT_WAITING = ("selected", "not_selected")

# A kernel does its math with MMA instructions when its warps issue at least this many each:
# a matmul tile needs K / k_step MMAs per warp (a 64-deep tile of m16n8k16 is 4 per 16x8
# output tile), while the H100 recordings show 1-3 tensor-pipe instructions per warp on plain
# elementwise Triton kernels and 128-8,192 on GEMMs and attention.
MATMUL_MIN_MMA_PER_WARP = 16

# Tensor pipe: a kernel whose MMA instructions are at least this share of its executed
# warp instructions is a matmul (the H100 reduce_kernel shows 1.0% MMA instructions and is
# no matmul; the recorded GEMMs show 3.2% to 11%) ...
MATMUL_MIN_MMA_SHARE = 0.02
# ... and its tensor pipe is under-used below this % of peak.
LOW_TENSOR_PIPE_PCT = 50.0

# Memory-bound kernels far from the bandwidth ceiling: DRAM the busiest level, yet under
# this % of the ceiling (the measured copy bandwidth when calibrated, else ncu's DRAM peak).
FAR_FROM_BANDWIDTH_PCT = 80.0

# Tail effect and sub-wave grids are not findings on kernels shorter than this: a kernel of a
# few microseconds is bound by its launch (LAUNCH_BOUND_MAX_MEDIAN_NS), not by how its blocks
# fill the SMs.
SHORT_KERNEL_NS = LAUNCH_BOUND_MAX_MEDIAN_NS

# Launch-bound as a finding needs this many launches: the median gap of a kernel launched once
# or twice is the first call of a function, not a loop that launches faster than the GPU runs.
LAUNCH_BOUND_MIN_LAUNCHES = 10

# Sub-wave grid: flag when at least this share of the SMs get no block at all.
SMALL_GRID_MIN_IDLE_SM_SHARE = 0.20

# Local memory: flag when L1 traffic that no global load or store explains (local loads and
# stores, when the per-op local counters were not collected) is at least this share of all
# L1/TEX traffic; a few local accesses (a spill at a call boundary) are not worth a finding.
LOCAL_MIN_TRAFFIC_SHARE = 0.10

# Thread divergence: flag when the average active threads per executed warp instruction is
# at or under this many of the 32 (a quarter of the lanes idle).
DIVERGENCE_MAX_ACTIVE_THREADS = 24.0

# Math on the FMA pipes that the tensor cores could do: the kernel issues no MMA (see
# MATMUL_MIN_MMA_PER_WARP), its tensor pipe is under this % busy ...
FMA_MATMUL_MAX_TENSOR_PIPE_PCT = 1.0
# ... and it reads its operands from cache at least this many times per byte from DRAM
# (a GEMM tile re-reads each operand once per tile of the other; an elementwise or
# fixed-FMA-chain kernel reads each byte about once: the H100 recordings show 1-3).
FMA_MATMUL_MIN_OPERAND_REUSE = 8.0

# Host gaps: host waits (after a synchronize, or over HOST_STALL_GAP_NS) before at least this share of a
# kernel's launches are a pattern of the loop (a synchronize each step), not the few gaps
# between the workload's own phases.
HOST_GAP_MIN_LAUNCH_SHARE = 0.25
# ... and at least this many of them: a kernel launched once per step of a 3-step run has a
# host wait before each launch, which says how the run was driven, not that a loop stalls.
HOST_GAP_MIN_WAITS = 10

# The verdict line names a first fix only when its estimated gain is at least this % of the
# kernel's time (below it, the diagnosis suite's bound for "no defect" kernels: nothing worth chasing).
VERDICT_MIN_GAIN_PCT = 5.0

# -- diff (analyze/diff.py) ------------------------------------------------------------------

# Run-to-run spread: the interquartile range from this many launches up, max - min below
# (quartiles of two or three values say little more than their range).
SPREAD_IQR_MIN_LAUNCHES = 4

# A finding of A that B still reports with less than this % of B's wall time to give back counts as gone: the fix
# left nothing worth doing (a sync-in-loop at 0.1% after `nonzero` left the loop, holdout_sync_nonzero); below
# what the fix could still be measured by: the median step-time IQR of the suite's timing runs is 1.8% of a step
# (program_timings.json step_ms_all, H100, 2026-11-26), so a 1% gain left could not be told from noise.
FINDING_GONE_BELOW_PCT = 1.0

# A kernel that is not compute-bound is still a SIMT matmul when at least this share of its warp instructions issue
# on the FMA pipe (with the operand reuse above): a matmul reading its operands from global memory issues about one
# FMA per two loads plus address arithmetic (a third of its instructions), a copy or stencil almost none.
FMA_MATMUL_MIN_FMA_SHARE = 0.2
# ... and at least this many FMA-pipe thread instructions per DRAM byte: a matmul's inner loop reuses each operand
# byte for many multiply-adds, while a transpose or stencil whose FMA pipe is busy with index arithmetic (IMAD runs
# there too) does a few per byte. The H100 check-half recordings: SIMT matmuls 153 and 1,034; a bf16 transpose 2.5,
# elementwise and norm kernels 0.6-36.
FMA_MATMUL_MIN_FMA_PER_DRAM_BYTE = 64.0

# -- wall-time breakdown (analyze/breakdown.py) -------------------------------------------------

# A GPU-idle gap longer than this, with no host sync behind it, is the host doing other work (input preparation,
# preprocessing): shorter ones are the host's per-op cost between launches (Python, the framework's dispatch and the
# launch itself; under the profiler 50-500 µs is common). In the whole-program recordings (tests/data/diagnosis/
# programs) the input-stall programs' gaps are 19-126 ms, the eager decode loop's and the sync loop's 50-1,900 µs
# (median 70-120).
HOST_STALL_GAP_NS = 1_000_000

# A program finding speaks of a loop, so the window must hold enough of one (analyze/breakdown.too_short): with steps
# marked, at least MIN_STEPS_TO_JUDGE whole steady steps; without, the rank's most-launched kernel must have run at
# least MIN_REPEATS_TO_JUDGE times. The kernel suite's recordings (4 launches: a warm-up and 3 timed) and a 5-launch
# script are one-offs whose gaps say how a harness drove them, not how a loop feeds the GPU; the shortest recorded
# loops judged (tests/data) repeat their kernels 16 to 3,000 times.
MIN_STEPS_TO_JUDGE = 2
MIN_REPEATS_TO_JUDGE = 10
