"""Probe: record a raw PyTorch-profiler trace of the mixed workload (dev aid)."""
import json, runpy, sys, ctypes
import torch
from torch.profiler import profile, ProfilerActivity
out = sys.argv[1]
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    runpy.run_path("tests/workloads/mixed.py", run_name="__main__")
    torch.cuda.synchronize()
p.export_chrome_trace(out)
props = torch.cuda.get_device_properties(0)
print({k: getattr(props, k) for k in dir(props) if not k.startswith("_")})
