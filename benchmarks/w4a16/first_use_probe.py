"""How long the first calls of the Gluon W4A16 kernel take in a fresh process (compile and one-time setup).

    PYTHONPATH=src TRITON_CACHE_DIR=/tmp/tc python3 benchmarks/w4a16/first_use_probe.py 1

Why: first-use tuning has 3 s a shape and stops when the next candidate, expected to take 1.5x the slowest so far,
would pass it (autotune.tune_shape). The first candidate in a process also pays Triton's one-time setup, so this
script times the process's imports and CUDA start, then the first call of each Gluon candidate at 5120x5120
(``tune_space.gluon_candidates``) for m tokens (argv[1], default 1). Run it with an empty, then a filled Triton cache.
"""
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

from kernelscope.bench.w4a16_impls import make_weights  # noqa: E402
from kernelscope.kernels.marlin import to_kernel_layout  # noqa: E402
from kernelscope.kernels.marlin.matmul import w4a16_matmul  # noqa: E402
from kernelscope.kernels.marlin.tune_space import gluon_candidates  # noqa: E402

torch.zeros(1, device="cuda")
torch.cuda.synchronize()
print(f"imports + cuda init {time.perf_counter() - t0:.2f} s")
wt = make_weights(5120, 5120, 128, "cuda", 0)
bk, sk = to_kernel_layout(wt.B, wt.s, 128)
m = int(sys.argv[1]) if len(sys.argv) > 1 else 1
a = torch.randn((m, 5120), device="cuda").half()
for launch in gluon_candidates(m, 5120, 5120, torch.cuda.get_device_properties(0).multi_processor_count):
    t = time.perf_counter()
    w4a16_matmul(a, bk, sk, 128, **launch)
    torch.cuda.synchronize()
    print(f"first call {launch}: {time.perf_counter() - t:.2f} s")
