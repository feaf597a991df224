"""Build cuda_kernels.cu with nvcc into a shared library and call it through ctypes.

The same route as scripts/record.sh counters (nvcc on the GPU machine), without
torch.utils.cpp_extension: no ninja, no pybind, no torch headers, a 2-second build.
The library is cached by the hash of the source, the GPU architecture and nvcc's
version, so the many processes of a calibration run build it once. Launches go on
PyTorch's current stream, so CUDA events and the profilers see them in order.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

SOURCE = Path(__file__).with_name("cuda_kernels.cu")
CACHE_ENV = "KS_DIAG_BUILD_DIR"  # where built libraries are kept (default: the temp directory)
NO_LINEINFO_ENV = "KS_DIAG_NO_LINEINFO"  # "1": build without -lineinfo (SASS with no source lines)


class CudaBuildError(RuntimeError):
    """nvcc is missing or the source did not compile; one sentence with the reason."""


def find_nvcc() -> str:
    for cand in (shutil.which("nvcc"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.isfile(cand):
            return cand
    raise CudaBuildError("nvcc was not found on PATH or in $CUDA_HOME/bin; the CUDA C++ cases need the CUDA toolkit")


def build_library(arch: str) -> Path:
    """Compile (or reuse) the library for ``arch`` (e.g. "sm_90"); its path."""
    nvcc = find_nvcc()
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    lineinfo = os.environ.get(NO_LINEINFO_ENV) != "1"
    flags = ["-lineinfo"] if lineinfo else []
    key = hashlib.sha256(SOURCE.read_bytes() + arch.encode() + version.encode() + " ".join(flags).encode()
                         ).hexdigest()[:16]
    out_dir = Path(os.environ.get(CACHE_ENV) or Path(tempfile.gettempdir()) / "ks_diag_build")
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / f"libks_diag_{arch}_{key}.so"
    if lib.exists():
        return lib
    tmp = out_dir / f".{lib.name}.{os.getpid()}.tmp"
    # -lineinfo maps SASS to source lines for the counter pass's source view; it does not change the code.
    # KS_DIAG_NO_LINEINFO=1 leaves it out, to record a kernel whose report has SASS but no source lines.
    cmd = [nvcc, "-O3", *flags, f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", "-o", str(tmp), str(SOURCE)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise CudaBuildError(f"nvcc failed ({' | '.join(tail)})")
    os.replace(tmp, lib)  # atomic: a concurrent process sees the whole library or none
    return lib


@lru_cache(maxsize=None)
def load_library(arch: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build_library(arch)))
    P, I, V = ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p  # noqa: E741
    sigs = {"transpose": [P, P, I, I, V], "local_array": [P, P, P, I, I, I, V], "divergence": [P, P, I, I, I, V],
            "smem_chain": [P, P, P, I, I, I, I, V], "reg_chain": [P, P, P, I, I, I, V],
            "reg_table_len": [], "local_k": [],
            # check half (issue 35)
            "transpose_wide": [P, P, I, I, I, V], "window_array": [P, P, P, I, I, I, V],
            "divergence4": [P, P, I, I, I, V], "smem_chain_threads": [P, P, P, I, I, I, I, I, V],
            "chase": [P, P, P, I, I, I, I, V], "window_k": [], "chase_w": []}
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    return lib


def arch_of_current_device() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def call(name: str, *args) -> None:
    """Launch through the library's ``name`` on the current stream; raise on a CUDA error."""
    import torch

    lib = load_library(arch_of_current_device())
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    err = getattr(lib, name)(*args, stream)
    if err != 0:
        raise RuntimeError(f"CUDA launcher {name} failed with cudaError {err}")


def constant(name: str) -> int:
    return int(getattr(load_library(arch_of_current_device()), name)())
