"""Nsight Compute: the sections kernelscope collects, the extra metrics it asks
for, and one table from raw ncu metric names to model names, with fallbacks
across ncu versions and architectures (first candidate present wins)."""
from __future__ import annotations

from dataclasses import dataclass

# Only what the panels need: far cheaper than --set full.
# The MemoryWorkloadAnalysis_Tables section alone costs many replay passes
# (docs/decisions/0007, benchmarks/results/RESULTS.md), so the
# few table values the panels use are asked for as metrics instead; and no
# panel uses InstructionStats.
SECTIONS: tuple[str, ...] = (
    "SpeedOfLight", "LaunchStats", "Occupancy", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis",
    "SchedulerStats", "WarpStateStats",
)
# Added by `run --counters --source`: per-instruction counters and warp samples, mapped to source lines
# (with the source text imported into the report).
SOURCE_SECTIONS: tuple[str, ...] = ("SourceCounters", "WarpStateStats")

# Metrics the sections do not carry. Per architecture, since ncu refuses the
# whole run when asked for a metric the chip lacks (checked with
# `ncu --query-metrics --chip gh100` for sm_90).
_COMMON_EXTRA = (
    "dram__bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum",
    "smsp__inst_executed.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed",
    "sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_imma.sum",
    "sm__inst_executed_pipe_tensor_op_dmma.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_st.sum",
    "sm__sass_data_bytes_mem_shared.sum",
    # local memory (rule local-memory) and active threads per instruction (rule thread-divergence)
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
    "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",
)
# Math ops executed in the tensor path, one counter per source precision: ncu counts 2 per multiply-add, so
# they are FLOPs (summed by analyze/roofline.counter_flops; checked against a cuBLAS GEMM's 2*m*n*k in
# benchmarks/diagnosis/RESULTS.md). Only the names the chip has, as `ncu --query-metrics --chip gh100`
# (ncu 2025.3.1) lists them: gh100 has no per-destination fp16 or fp8 counters and no
# bf16/tf32 totals, so each precision is its one counter here.
TENSOR_OPS: dict[str, tuple[str, ...]] = {
    "sm_90": ("sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
              "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum",
              "sm__ops_path_tensor_src_fp64.sum"),
}

# ncu's peak FP32 FMA and dense TF32 tensor rates per cycle, as the roofline sections of `--set full` name them
# on gh100 (ncu 2025.3.1): fma-instead-of-tensor's gain without a calibration (an imported report) is their ratio.
PEAK_RATES: dict[str, tuple[str, ...]] = {
    "sm_90": ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
              "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained"),
}

EXTRA_METRICS: dict[str, tuple[str, ...]] = {
    "sm_80": _COMMON_EXTRA, "sm_86": _COMMON_EXTRA, "sm_87": _COMMON_EXTRA, "sm_89": _COMMON_EXTRA,
    # FMA-pipe instructions, fp16 ones apart (rule fma-instead-of-tensor); names as
    # `ncu --query-metrics --chip gh100` (ncu 2025.3.1) lists them
    "sm_90": _COMMON_EXTRA + ("sm__inst_executed_pipe_tensor_op_gmma.sum", "sm__inst_executed_pipe_fma.sum",
                              "sm__inst_executed_pipe_fma_type_fp16.sum") + TENSOR_OPS["sm_90"] + PEAK_RATES["sm_90"],
}


SECTOR_BYTES = 32  # an L1/L2/DRAM sector
# SASS instruction counts per opcode (InstructionStats, and SourceCounters in --set detailed): an instanced
# metric; the reader keeps each instance as OPCODE_METRIC[OPCODE] beside the total.
OPCODE_METRIC = "sass__inst_executed_per_opcode"

# Where a raw metric comes from, in ncu 2025.3.1's section files (`ncu --list-sets`, each set's `--list-metrics`):
# the option that adds it to a report, named in a not-evaluated reason.
FULL = "`--set full`"
TABLES = f"`--section MemoryWorkloadAnalysis_Tables` (in {FULL})"
WARP_STATE = f"`--section WarpStateStats` (in {FULL})"
INSTRUCTION_STATS = f"`--section InstructionStats` (in {FULL}) or `--section SourceCounters` (in `--set detailed`)"
COMPUTE = "`--section ComputeWorkloadAnalysis` (in `--set detailed`)"
MEMORY = "`--section MemoryWorkloadAnalysis` (in `--set detailed`)"
ROOFLINE = "`--section SpeedOfLight_HierarchicalTensorRooflineChart` (in `--set full` or `--set roofline`)"


@dataclass(frozen=True)
class Derivation:
    """A model value computed from raw ncu metrics, when none of the field's own names is in the report.

    ``how``: "sum" (of ``parts``), "sectors" (sum of ``parts`` x 32 bytes), "ratio" (parts[0] / parts[1]),
    "opcodes" (the SASS instructions of the opcodes in ``parts``, from OPCODE_METRIC). ``optional`` parts are
    added when present (per-op counters an ncu version or chip lacks)."""

    formula: str
    how: str
    parts: tuple[str, ...]
    optional: tuple[str, ...] = ()


@dataclass(frozen=True)
class NcuField:
    model_name: str
    candidates: tuple[str, ...]  # raw ncu names, preferred first (the sets and versions that carry each)
    unit: str  # the unit kernelscope shows; ncu's own unit is kept on the raw metric
    label: str
    derivations: tuple[Derivation, ...] = ()  # tried in order when no candidate is present
    adds: str = ""  # the ncu option that adds it to a report


def _f(model: str, label: str, unit: str, *candidates: str, derive: tuple[Derivation, ...] = (),
       adds: str = "") -> NcuField:
    return NcuField(model, tuple(candidates), unit, label, derive, adds)


def _sectors(what: str, *parts: str, optional: tuple[str, ...] = ()) -> Derivation:
    return Derivation(f"{what} = ({' + '.join(parts + optional)}) x {SECTOR_BYTES} bytes", "sectors", parts, optional)


def _opcodes(what: str, *opcodes: str) -> Derivation:
    return Derivation(f"{what} = SASS instructions executed with opcode {' + '.join(opcodes)} ({OPCODE_METRIC})",
                      "opcodes", opcodes)


def _ratio(what: str, num: str, den: str) -> Derivation:
    return Derivation(f"{what} = {num} / {den}", "ratio", (num, den))


# The L1/TEX t-stage sector counters per pipe and operation: their sum is l1tex__t_sectors.sum (within 0.3% on the
# defect suite's H200 reports, tests/data/ncu_sets); --set full carries them (MemoryWorkloadAnalysis_Tables).
_L1_SECTORS = tuple(f"l1tex__t_sectors_pipe_lsu_mem_{m}.sum" for m in (
    "global_op_ld", "global_op_st", "local_op_ld", "local_op_st"))
_L1_SECTORS_MORE = tuple(f"l1tex__t_sectors_pipe_{m}.sum" for m in (
    "lsu_mem_global_op_atom", "lsu_mem_global_op_red", "tex_mem_texture", "tex_mem_surface_op_ld",
    "tex_mem_surface_op_st", "tex_mem_surface_op_atom", "tex_mem_surface_op_red", "lsu_mem_dshared_op_ld",
    "lsu_mem_dshared_op_st", "lsu_mem_dshared_op_atom", "lsu_mem_dshared_op_redas"))
# Opcodes the FMA pipe (fmaheavy + fmalite) executes: their count is 0.77-1.02 of sm__inst_executed_pipe_fma.sum
# on the defect suite (1.00 on the FMA-bound kernels): an estimate, named as one.
FMA_PIPE_OPCODES = ("FFMA", "FMUL", "FADD", "FFMA32I", "FMUL32I", "FADD32I", "IMAD", "IMAD32I", "HFMA2", "HMUL2",
                    "HADD2", "HFMA2.MMA")

NCU_FIELDS: tuple[NcuField, ...] = (
    # launch and occupancy
    _f("duration_ns", "Duration", "ns", "gpu__time_duration.sum"),
    _f("registers_per_thread", "Registers per thread", "register/thread", "launch__registers_per_thread"),
    _f("shared_memory_static_bytes", "Static shared memory", "byte/block", "launch__shared_mem_per_block_static"),
    _f("shared_memory_dynamic_bytes", "Dynamic shared memory", "byte/block", "launch__shared_mem_per_block_dynamic"),
    _f("shared_memory_config_bytes", "Shared memory carveout", "byte", "launch__shared_mem_config_size"),
    _f("achieved_occupancy_pct", "Achieved occupancy", "%", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    _f("ncu_theoretical_occupancy_pct", "Theoretical occupancy (ncu)", "%", "sm__maximum_warps_per_active_cycle_pct"),
    _f("waves_per_sm", "Waves per SM", "", "launch__waves_per_multiprocessor"),
    # speed of light
    _f("sm_throughput_pct", "Compute (SM) throughput", "%", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    _f("memory_throughput_pct", "Memory throughput", "%", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    # memory hierarchy
    _f("dram_throughput_pct", "DRAM throughput", "%", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
       "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    _f("dram_bytes", "DRAM bytes", "byte", "dram__bytes.sum",
       derive=(Derivation("dram_bytes = dram__bytes_read.sum + dram__bytes_write.sum", "sum",
                          ("dram__bytes_read.sum", "dram__bytes_write.sum")),
               _sectors("dram_bytes", "dram__sectors_read.sum", "dram__sectors_write.sum")), adds=MEMORY),
    _f("dram_bytes_read", "DRAM bytes read", "byte", "dram__bytes_read.sum",
       derive=(_sectors("dram_bytes_read", "dram__sectors_read.sum"),), adds=MEMORY),
    _f("dram_bytes_write", "DRAM bytes written", "byte", "dram__bytes_write.sum",
       derive=(_sectors("dram_bytes_write", "dram__sectors_write.sum"),), adds=MEMORY),
    _f("l2_throughput_pct", "L2 throughput", "%", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
       "lts__t_sectors.avg.pct_of_peak_sustained_elapsed"),
    _f("l2_hit_rate_pct", "L2 hit rate", "%", "lts__t_sector_hit_rate.pct"),
    _f("l2_bytes", "L2 bytes", "byte", "lts__t_bytes.sum", derive=(_sectors("l2_bytes", "lts__t_sectors.sum"),),
       adds=MEMORY),
    _f("l1_throughput_pct", "L1/TEX throughput", "%", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    _f("l1_hit_rate_pct", "L1/TEX hit rate", "%", "l1tex__t_sector_hit_rate.pct"),
    _f("l1_bytes", "L1/TEX bytes", "byte", "l1tex__t_bytes.sum",
       derive=(_sectors("l1_bytes", "l1tex__t_sectors.sum"),
               _sectors("l1_bytes", *_L1_SECTORS, optional=_L1_SECTORS_MORE)), adds=TABLES),
    _f("shared_throughput_pct", "Shared memory throughput", "%",
       "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"),
    _f("shared_bytes", "Shared memory bytes", "byte", "sm__sass_data_bytes_mem_shared.sum", adds=TABLES),
    # local memory: per-thread arrays indexed at run time, and spilled registers
    _f("local_sectors", "Local-memory sectors (loads + stores)", "sector",
       derive=(Derivation("local_sectors = l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum + "
                          "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum", "sum",
                          ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
                           "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum")),
               Derivation("local_sectors = memory_l2_theoretical_sectors_local (SourceCounters: the sectors the "
                          "local loads and stores address)", "sum", ("memory_l2_theoretical_sectors_local",))),
       adds=TABLES),
    _f("local_spill_requests", "Local-memory requests from register spills", "request",
       "derived__local_spilling_requests", adds=MEMORY),
    # memory transactions
    _f("global_load_requests", "Global load requests", "", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", adds=TABLES),
    _f("global_load_sectors", "Global load sectors", "sector", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", adds=TABLES),
    _f("global_store_requests", "Global store requests", "", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", adds=TABLES),
    _f("global_store_sectors", "Global store sectors", "sector", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", adds=TABLES),
    _f("global_load_sectors_per_request", "Sectors per load request", "sector/request",
       "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio", adds=TABLES),
    _f("global_store_sectors_per_request", "Sectors per store request", "sector/request",
       "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio", adds=TABLES),
    _f("global_load_bytes_per_sector", "Bytes used per load sector", "byte/sector",
       "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", adds=TABLES),
    _f("global_store_bytes_per_sector", "Bytes used per store sector", "byte/sector",
       "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio", adds=TABLES),
    _f("global_load_bytes_requested", "Global load bytes requested", "byte", "sm__sass_data_bytes_mem_global_op_ld.sum"),
    _f("global_store_bytes_requested", "Global store bytes requested", "byte", "sm__sass_data_bytes_mem_global_op_st.sum"),
    _f("shared_load_bank_conflicts", "Shared load bank conflicts", "", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", adds=TABLES),
    _f("shared_store_bank_conflicts", "Shared store bank conflicts", "", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", adds=TABLES),
    _f("shared_load_wavefronts", "Shared load wavefronts", "", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", adds=TABLES),
    _f("shared_store_wavefronts", "Shared store wavefronts", "", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", adds=TABLES),
    _f("shared_load_instructions", "Shared load instructions", "inst", "smsp__inst_executed_op_shared_ld.sum",
       "smsp__sass_inst_executed_op_shared_ld.sum", adds=TABLES),
    _f("shared_store_instructions", "Shared store instructions", "inst", "smsp__inst_executed_op_shared_st.sum",
       "smsp__sass_inst_executed_op_shared_st.sum", adds=TABLES),
    # tensor cores
    # --set basic has the tensor pipe's share of elapsed cycles only (SpeedOfLight's breakdown)
    _f("tensor_pipe_pct", "Tensor pipe utilization", "%", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
       "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
       "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
       "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
       "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
       adds=COMPUTE),
    # the .sum counts come only with --metrics; every set from detailed up counts SASS opcodes
    _f("mma_hmma_instructions", "HMMA instructions (mma.sync fp16/bf16/tf32)", "inst",
       "sm__inst_executed_pipe_tensor_op_hmma.sum", "smsp__inst_executed_pipe_tensor_op_hmma.sum",
       derive=(_opcodes("mma_hmma_instructions", "HMMA"),), adds=INSTRUCTION_STATS),
    _f("mma_gmma_instructions", "GMMA instructions (wgmma, Hopper)", "inst", "sm__inst_executed_pipe_tensor_op_gmma.sum",
       "smsp__inst_executed_pipe_tensor_op_gmma.sum",
       derive=(_opcodes("mma_gmma_instructions", "HGMMA", "QGMMA", "IGMMA", "BGMMA"),), adds=INSTRUCTION_STATS),
    _f("mma_imma_instructions", "IMMA instructions (integer)", "inst", "sm__inst_executed_pipe_tensor_op_imma.sum",
       "smsp__inst_executed_pipe_tensor_op_imma.sum", derive=(_opcodes("mma_imma_instructions", "IMMA", "BMMA"),),
       adds=INSTRUCTION_STATS),
    _f("mma_dmma_instructions", "DMMA instructions (fp64)", "inst", "sm__inst_executed_pipe_tensor_op_dmma.sum",
       "smsp__inst_executed_pipe_tensor_op_dmma.sum", derive=(_opcodes("mma_dmma_instructions", "DMMA"),),
       adds=INSTRUCTION_STATS),
    _f("fma_pipe_instructions", "FMA-pipe instructions", "inst", "sm__inst_executed_pipe_fma.sum",
       "smsp__inst_executed_pipe_fma.sum",
       derive=(Derivation("fma_pipe_instructions ~ SASS instructions executed with the FMA pipe's opcodes "
                          f"{'+'.join(FMA_PIPE_OPCODES)} ({OPCODE_METRIC}; an estimate: 0.77-1.02 of "
                          "sm__inst_executed_pipe_fma.sum on the defect suite)", "opcodes", FMA_PIPE_OPCODES),),
       adds=f"`--metrics sm__inst_executed_pipe_fma.sum`, or {INSTRUCTION_STATS} for an estimate"),
    # ncu's own peak rates per cycle (roofline sections): their ratio is the FMA-to-tensor speed ratio of the chip
    _f("fp32_fma_peak_inst_per_cycle", "Peak FP32 FMA thread instructions per cycle (ncu)", "inst/cycle",
       "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", adds=ROOFLINE),
    # TF32, the slowest tensor precision, dense, on the chip's MMA instruction for it (wgmma on Hopper, mma.sync
    # before): the aggregate sm__ops_path_tensor_src_tf32_dst_fp32 peak is the sparse rate (2x hgmma's dense one
    # on the H200 reports)
    _f("tensor_tf32_peak_ops_per_cycle", "Peak TF32 tensor ops per cycle, dense (ncu)", "op/cycle",
       "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained",
       "sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained", adds=ROOFLINE),
    _f("tensor_fp16_peak_ops_per_cycle", "Peak FP16 tensor ops per cycle (ncu)", "op/cycle",
       "sm__ops_path_tensor_src_fp16.sum.peak_sustained", adds=ROOFLINE),
    # warp state and scheduler
    _f("warp_cycles_per_issued_instruction", "Warp cycles per issued instruction", "cycle",
       "smsp__average_warp_latency_per_inst_issued.ratio"),
    _f("issue_slots_busy_pct", "Issue slots busy", "%", "smsp__issue_active.avg.pct_of_peak_sustained_active",
       "sm__issue_active.avg.pct_of_peak_sustained_elapsed", adds="`--section SchedulerStats` (in `--set full`)"),
    _f("eligible_warps_per_scheduler", "Eligible warps per scheduler", "warp", "smsp__warps_eligible.avg.per_cycle_active"),
    _f("active_warps_per_scheduler", "Active warps per scheduler", "warp", "smsp__warps_active.avg.per_cycle_active"),
    _f("instructions_executed", "Executed instructions", "inst", "smsp__inst_executed.sum", "sm__inst_executed.sum",
       "inst_executed", adds=INSTRUCTION_STATS),
    # active threads per executed warp instruction (32: converged); SourceCounters counts both per instruction
    _f("threads_per_instruction", "Active threads per executed instruction", "thread/inst",
       "smsp__thread_inst_executed_per_inst_executed.ratio",
       derive=(_ratio("threads_per_instruction", "smsp__thread_inst_executed.sum", "smsp__inst_executed.sum"),
               _ratio("threads_per_instruction", "thread_inst_executed", "inst_executed")), adds=WARP_STATE),
    _f("threads_per_instruction_pred_on", "Not-predicated-off threads per executed instruction", "thread/inst",
       "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",
       derive=(_ratio("threads_per_instruction_pred_on", "smsp__thread_inst_executed_pred_on.sum",
                      "smsp__inst_executed.sum"),
               _ratio("threads_per_instruction_pred_on", "thread_inst_executed_true", "inst_executed")),
       adds=WARP_STATE),
)

# Warp stall reasons: raw metric = STALL_METRIC.format(reason). The meaning of
# each, in a few words, is drawn next to the bar.
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
STALL_REASONS: tuple[tuple[str, str], ...] = (
    ("long_scoreboard", "waiting on an L1TEX result (global, local, texture memory)"),
    ("short_scoreboard", "waiting on an MIO result (shared memory, special math)"),
    ("barrier", "waiting at __syncthreads for the rest of the block"),
    ("membar", "waiting on a memory fence"),
    ("mio_throttle", "MIO queue full (shared memory, special math instructions)"),
    ("lg_throttle", "local/global memory instruction queue full"),
    ("tex_throttle", "texture/L1TEX queue full"),
    ("math_pipe_throttle", "the math pipe it needs is busy"),
    ("wait", "fixed-latency dependency"),
    ("not_selected", "eligible, but another warp was issued"),
    ("selected", "issuing (not a stall)"),
    ("dispatch_stall", "dispatcher could not issue"),
    ("drain", "after EXIT, waiting for memory writes to drain"),
    ("no_instruction", "instruction cache miss or branch target not fetched"),
    ("imc_miss", "waiting on the immediate constant cache"),
    ("branch_resolving", "waiting for a branch target to resolve"),
    ("sleeping", "all threads sleeping (nanosleep, yield)"),
    ("misc", "miscellaneous"),
    ("gmma", "waiting on wgmma (Hopper tensor-core) resources"),
)

# The same reasons in SourceCounters' warp sampling (--set detailed carries it, WarpStateStats is only in full):
# samples stalled on a reason / samples issuing (selected) is that reason's cycles per issued instruction, sampled
# (within ~10% of WarpStateStats' ratios on the H200 reports in tests/data/ncu_sets).
PCSAMP_METRIC = "smsp__pcsamp_warps_issue_stalled_{}"
_PCSAMP_NAME = {"no_instruction": "no_instructions"}  # sampling's own spelling; gmma has no sampled reason


def _stall_field(reason: str) -> NcuField:
    sampled = () if reason == "gmma" else (_ratio(
        f"stall_{reason} (sampled) = warp samples stalled on {reason} / warp samples issuing",
        PCSAMP_METRIC.format(_PCSAMP_NAME.get(reason, reason)), PCSAMP_METRIC.format("selected")),)
    return _f(f"stall_{reason}", f"Stall: {reason}", "cycle", STALL_METRIC.format(reason), derive=sampled,
              adds=f"`--section WarpStateStats` (in {FULL}), or `--section SourceCounters` for sampled stalls")


STALL_FIELDS: tuple[NcuField, ...] = tuple(_stall_field(r) for r, _ in STALL_REASONS)

# Device attributes as ncu records them in every result -> Device attribute names.
NCU_DEVICE_ATTRIBUTES: tuple[tuple[str, str, str], ...] = (
    ("device__attribute_multiprocessor_count", "sm_count", "SM"),
    ("device__attribute_warp_size", "warp_size", "thread"),
    ("device__attribute_max_threads_per_multiprocessor", "max_threads_per_sm", "thread"),
    ("device__attribute_max_blocks_per_multiprocessor", "max_blocks_per_sm", "block"),
    ("device__attribute_max_registers_per_multiprocessor", "max_registers_per_sm", "register"),
    ("device__attribute_max_shared_memory_per_multiprocessor", "max_shared_memory_per_sm_bytes", "byte"),
    ("device__attribute_max_shared_memory_per_block_optin", "max_shared_memory_per_block_optin_bytes", "byte"),
    ("device__attribute_reserved_shared_memory_per_block", "reserved_shared_memory_per_block_bytes", "byte"),
    ("device__attribute_l2_cache_size", "l2_cache_bytes", "byte"),
    ("device__attribute_total_memory", "total_memory_bytes", "byte"),
    ("device__attribute_clock_rate", "sm_clock_max_khz", "kHz"),
    ("device__attribute_memory_clock_rate", "memory_clock_max_khz", "kHz"),
    ("device__attribute_global_memory_bus_width", "memory_bus_width_bits", "bit"),
)

# Derived fallbacks when a ratio metric is absent: model name -> (numerator, denominator) model names.
DERIVED_RATIOS: dict[str, tuple[str, str]] = {
    "global_load_sectors_per_request": ("global_load_sectors", "global_load_requests"),
    "global_store_sectors_per_request": ("global_store_sectors", "global_store_requests"),
}


def opcode_metric(opcode: str) -> str:
    """The raw name the reader keeps one opcode's instance of OPCODE_METRIC under."""
    return f"{OPCODE_METRIC}[{opcode}]"


def derivation_parts() -> set[str]:
    """Every raw name a derivation of the tables reads (the reader keeps them)."""
    return {p for f in NCU_FIELDS + STALL_FIELDS for d in f.derivations if d.how != "opcodes"
            for p in d.parts + d.optional}
