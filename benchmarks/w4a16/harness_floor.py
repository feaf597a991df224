"""The time the benchmark's harness reports for a launch that does almost nothing.

    PYTHONPATH=src python3 benchmarks/w4a16/harness_floor.py

`kernelscope bench w4a16` times each call between two CUDA events, with L2 flushed before it
(collect/timing.py). A one-element fill timed the same way shows what that costs before any kernel work:
the event pair and the launch gap, which every implementation's time includes.
"""
from __future__ import annotations

import torch

from kernelscope.collect.timing import time_cuda


def main() -> None:
    x = torch.zeros(1, device="cuda")
    for flush in (True, False):
        t = time_cuda(lambda: x.fill_(1.0), warmup=10, repeats=100, flush_l2=flush)
        print(f"one-element fill, L2 flush {'on ' if flush else 'off'}: median {t.median_ms * 1e3:.2f} us "
              f"(min {t.min_ms * 1e3:.2f}, max {t.max_ms * 1e3:.2f}) over {t.repeats} calls, "
              f"{torch.cuda.get_device_name()}")


if __name__ == "__main__":
    main()
