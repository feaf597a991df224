"""The benchmark harness's name for :mod:`kernelscope.collect.graph_timing` (the W4A16 tuner times with it too)."""
from kernelscope.collect.graph_timing import (  # noqa: F401
    CUPTI_FORMULA, GRAPH_FORMULA, MAX_COPIES, MAX_WARMUP_REPLAYS, WARMUP_MS, calls_in_graph, copies_for_cold_l2,
    is_gpu_work, kernel_time_per_range, per_call_times, time_cuda_graph, time_cupti_kernels, warmup_replays,
)
