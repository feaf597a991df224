"""Benchmark harness: CUDA-event timing, the environment a run saw, and a plain JSON results file.

Generic over what is measured: the attention sweep (bench/attention.py) is one
user; a GEMM sweep reuses timing, environment and results as they are.
torch is imported only when something is timed.
"""
from kernelscope.bench.results import SCHEMA, SCHEMA_VERSION, STATUSES, BenchResults, BenchRow, ResultsFileError
from kernelscope.collect.timing import Timing, summarize, time_cuda, time_wall

__all__ = ["SCHEMA", "SCHEMA_VERSION", "STATUSES", "BenchResults", "BenchRow", "ResultsFileError", "Timing",
           "summarize", "time_cuda", "time_wall"]
