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

EXTRA_METRICS: dict[str, tuple[str, ...]] = {
    "sm_80": _COMMON_EXTRA, "sm_86": _COMMON_EXTRA, "sm_87": _COMMON_EXTRA, "sm_89": _COMMON_EXTRA,
    # FMA-pipe instructions, fp16 ones apart (rule fma-instead-of-tensor); names as
    # `ncu --query-metrics --chip gh100` (ncu 2025.3.1) lists them
    "sm_90": _COMMON_EXTRA + ("sm__inst_executed_pipe_tensor_op_gmma.sum", "sm__inst_executed_pipe_fma.sum",
                              "sm__inst_executed_pipe_fma_type_fp16.sum") + TENSOR_OPS["sm_90"],
}


@dataclass(frozen=True)
class NcuField:
    model_name: str
    candidates: tuple[str, ...]  # raw ncu names, preferred first
    unit: str  # the unit kernelscope shows; ncu's own unit is kept on the raw metric
    label: str


def _f(model: str, label: str, unit: str, *candidates: str) -> NcuField:
    return NcuField(model, tuple(candidates), unit, label)


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
    _f("dram_bytes", "DRAM bytes", "byte", "dram__bytes.sum"),
    _f("dram_bytes_read", "DRAM bytes read", "byte", "dram__bytes_read.sum"),
    _f("dram_bytes_write", "DRAM bytes written", "byte", "dram__bytes_write.sum"),
    _f("l2_throughput_pct", "L2 throughput", "%", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
       "lts__t_sectors.avg.pct_of_peak_sustained_elapsed"),
    _f("l2_hit_rate_pct", "L2 hit rate", "%", "lts__t_sector_hit_rate.pct"),
    _f("l2_bytes", "L2 bytes", "byte", "lts__t_bytes.sum"),
    _f("l1_throughput_pct", "L1/TEX throughput", "%", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    _f("l1_hit_rate_pct", "L1/TEX hit rate", "%", "l1tex__t_sector_hit_rate.pct"),
    _f("l1_bytes", "L1/TEX bytes", "byte", "l1tex__t_bytes.sum"),
    _f("shared_throughput_pct", "Shared memory throughput", "%",
       "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"),
    _f("shared_bytes", "Shared memory bytes", "byte", "sm__sass_data_bytes_mem_shared.sum"),
    # memory transactions
    _f("global_load_requests", "Global load requests", "", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
    _f("global_load_sectors", "Global load sectors", "sector", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
    _f("global_store_requests", "Global store requests", "", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
    _f("global_store_sectors", "Global store sectors", "sector", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
    _f("global_load_sectors_per_request", "Sectors per load request", "sector/request",
       "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"),
    _f("global_store_sectors_per_request", "Sectors per store request", "sector/request",
       "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio"),
    _f("global_load_bytes_per_sector", "Bytes used per load sector", "byte/sector",
       "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"),
    _f("global_store_bytes_per_sector", "Bytes used per store sector", "byte/sector",
       "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"),
    _f("global_load_bytes_requested", "Global load bytes requested", "byte", "sm__sass_data_bytes_mem_global_op_ld.sum"),
    _f("global_store_bytes_requested", "Global store bytes requested", "byte", "sm__sass_data_bytes_mem_global_op_st.sum"),
    _f("shared_load_bank_conflicts", "Shared load bank conflicts", "", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
    _f("shared_store_bank_conflicts", "Shared store bank conflicts", "", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
    _f("shared_load_wavefronts", "Shared load wavefronts", "", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
    _f("shared_store_wavefronts", "Shared store wavefronts", "", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
    _f("shared_load_instructions", "Shared load instructions", "inst", "smsp__inst_executed_op_shared_ld.sum",
       "smsp__sass_inst_executed_op_shared_ld.sum"),
    _f("shared_store_instructions", "Shared store instructions", "inst", "smsp__inst_executed_op_shared_st.sum",
       "smsp__sass_inst_executed_op_shared_st.sum"),
    # tensor cores
    _f("tensor_pipe_pct", "Tensor pipe utilization", "%", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
       "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
       "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active"),
    _f("mma_hmma_instructions", "HMMA instructions (mma.sync fp16/bf16/tf32)", "inst", "sm__inst_executed_pipe_tensor_op_hmma.sum"),
    _f("mma_gmma_instructions", "GMMA instructions (wgmma, Hopper)", "inst", "sm__inst_executed_pipe_tensor_op_gmma.sum"),
    _f("mma_imma_instructions", "IMMA instructions (integer)", "inst", "sm__inst_executed_pipe_tensor_op_imma.sum"),
    _f("mma_dmma_instructions", "DMMA instructions (fp64)", "inst", "sm__inst_executed_pipe_tensor_op_dmma.sum"),
    # warp state and scheduler
    _f("warp_cycles_per_issued_instruction", "Warp cycles per issued instruction", "cycle",
       "smsp__average_warp_latency_per_inst_issued.ratio"),
    _f("issue_slots_busy_pct", "Issue slots busy", "%", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    _f("eligible_warps_per_scheduler", "Eligible warps per scheduler", "warp", "smsp__warps_eligible.avg.per_cycle_active"),
    _f("active_warps_per_scheduler", "Active warps per scheduler", "warp", "smsp__warps_active.avg.per_cycle_active"),
    _f("instructions_executed", "Executed instructions", "inst", "smsp__inst_executed.sum"),
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
