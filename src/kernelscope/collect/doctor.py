"""`kernelscope doctor`'s probes: what of kernelscope works on this machine, and how to fix what does not.

Each probe looks at one thing kernelscope needs (the GPU and its driver, torch, Triton, CUPTI,
Nsight Compute and counter permission, NVML and GPM, Proton) and returns a Check: what it
found, read from the thing itself (a version, a path, a device name), and, when it is missing
or limited, the one command that fixes it. Probes never raise: a probe that fails says why.
"""
from __future__ import annotations

import importlib
import os
import subprocess
from dataclasses import dataclass
from typing import Any, Callable

OK, LIMITED, MISSING = "ok", "limited", "missing"

FIX_DRIVER = ("install the NVIDIA driver on a machine with an NVIDIA GPU "
              "(https://www.nvidia.com/Download/index.aspx); without one, `kernelscope demo` shows a recorded session")
FIX_TORCH = "pip install torch (the CUDA build: https://pytorch.org/get-started/locally/)"
FIX_TRITON = "pip install triton"
FIX_NCU = "sudo apt-get install nsight-compute (or https://developer.nvidia.com/nsight-compute), then put ncu on PATH"
FIX_NCU_REPORT = "pip install 'kernelscope[counters]'"
FIX_PERMISSION = ("echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee "
                  "/etc/modprobe.d/kernelscope-counters.conf && reboot (or run kernelscope as root)")
FIX_NVML = "pip install 'kernelscope[nvml]'"
NVIDIA_PARAMS = "/proc/driver/nvidia/params"
NCU_VERSION_TIMEOUT_S = 30


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # OK | LIMITED | MISSING
    found: str  # what the probe found: version, path, device; or why it is missing
    fix: str = ""  # the one command (or step) that fixes it; empty when OK
    needed_for: str = ""  # what of kernelscope uses it


def _module(name: str) -> tuple[Any | None, str]:
    try:
        return importlib.import_module(name), ""
    except Exception as e:  # ImportError, or a broken install raising anything
        return None, f"{type(e).__name__}: {e}"


def probe_gpu() -> Check:
    """The CUDA driver (libcuda) and its first device."""
    from kernelscope.collect.driver import DriverUnavailable, device_count, query_device

    need = "every collector"
    try:
        n = device_count()
        if n == 0:
            return Check("GPU and driver", MISSING, "the CUDA driver reports no devices", FIX_DRIVER, need)
        dev = query_device(0)
    except DriverUnavailable as e:
        return Check("GPU and driver", MISSING, str(e), FIX_DRIVER, need)
    api = dev.value("cuda_driver_api_version")
    cuda = f", CUDA driver API {api // 1000}.{api % 1000 // 10}" if isinstance(api, int) else ""
    more = f" (+{n - 1} more)" if n > 1 else ""
    cc = ".".join(map(str, dev.compute_capability))
    return Check("GPU and driver", OK, f"{dev.name}{more}, sm_{cc.replace('.', '')}{cuda}", "", need)


def probe_torch() -> Check:
    need = "the trace pass (kernelscope run), learn, and demo's own run (without it demo shows a recorded session)"
    torch, err = _module("torch")
    if torch is None:
        from kernelscope.collect.driver import torch_install

        return Check("PyTorch", MISSING, f"cannot import torch ({err})", torch_install(), need)
    cuda = getattr(torch.version, "cuda", None)
    if not cuda:
        return Check("PyTorch", LIMITED, f"torch {torch.__version__}, a CPU-only build", FIX_TORCH, need)
    if not torch.cuda.is_available():
        return Check("PyTorch", LIMITED, f"torch {torch.__version__} (CUDA {cuda}) sees no CUDA GPU", FIX_DRIVER, need)
    return Check("PyTorch", OK, f"torch {torch.__version__} (CUDA {cuda})", "", need)


def probe_triton() -> Check:
    need = ("running the built-in kernels on a GPU (bench, profile, tune; demo and learn show a recorded launch "
            "without it)")
    triton, err = _module("triton")
    if triton is None:
        return Check("Triton", MISSING, f"cannot import triton ({err})", FIX_TRITON, need)
    return Check("Triton", OK, f"triton {triton.__version__}", "", need)


def probe_cupti() -> Check:
    """CUPTI as the trace pass uses it: through the PyTorch profiler's CUDA activity."""
    need = "kernel names, launch configurations and times (trace pass)"
    torch, err = _module("torch")
    if torch is None:
        return Check("CUPTI (PyTorch profiler)", MISSING, "torch is not installed", FIX_TORCH, need)
    try:
        from torch.profiler import ProfilerActivity, supported_activities

        cuda = ProfilerActivity.CUDA in supported_activities()
    except Exception as e:
        return Check("CUPTI (PyTorch profiler)", MISSING, f"the profiler cannot be queried ({e})", FIX_TORCH, need)
    if not cuda:
        return Check("CUPTI (PyTorch profiler)", MISSING, "this torch build has no CUDA profiling (Kineto/CUPTI)",
                     FIX_TORCH, need)
    if not torch.cuda.is_available():
        return Check("CUPTI (PyTorch profiler)", LIMITED, "built in, but there is no GPU to trace", FIX_DRIVER, need)
    return Check("CUPTI (PyTorch profiler)", OK, "torch.profiler records CUDA activity", "", need)


def probe_ncu() -> Check:
    from kernelscope.collect.ncu.runner import NcuRunError, find_ncu

    need = "the counter pass (run --counters, profile)"
    try:
        ncu = find_ncu()
    except NcuRunError as e:
        return Check("Nsight Compute (ncu)", MISSING, str(e), FIX_NCU, need)
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=NCU_VERSION_TIMEOUT_S)
        version = next((ln.strip() for ln in reversed(out.stdout.splitlines()) if "ersion" in ln), "")
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("Nsight Compute (ncu)", MISSING, f"{ncu} does not run ({e})", FIX_NCU, need)
    return Check("Nsight Compute (ncu)", OK, f"{ncu}" + (f" ({version})" if version else ""), "", need)


def probe_ncu_report() -> Check:
    from kernelscope.collect.ncu.report_reader import NcuReportError, load_module

    need = "reading .ncu-rep reports (counter pass, import)"
    try:
        mod = load_module()
    except (NcuReportError, ImportError) as e:
        return Check("ncu_report (Python)", MISSING, str(e), FIX_NCU_REPORT, need)
    return Check("ncu_report (Python)", OK, os.path.dirname(getattr(mod, "__file__", "") or "") or "importable", "",
                 need)


def counter_permission(params_text: str | None, euid: int) -> Check:
    """Counter access from the driver's RmProfilingAdminOnly setting and who we are."""
    need = "hardware counters (counter pass)"
    if params_text is None:
        return Check("Counter permission", MISSING, f"{NVIDIA_PARAMS} is not there: no NVIDIA driver loaded",
                     FIX_DRIVER, need)
    value = next((ln.split(":", 1)[1].strip() for ln in params_text.splitlines()
                  if ln.split(":", 1)[0].strip() == "RmProfilingAdminOnly"), None)
    if value is None:
        return Check("Counter permission", LIMITED, f"{NVIDIA_PARAMS} does not say (no RmProfilingAdminOnly); "
                     "ncu will tell (ERR_NVGPUCTRPERM)", FIX_PERMISSION, need)
    if value == "0":
        return Check("Counter permission", OK, "open to all users (RmProfilingAdminOnly: 0)", "", need)
    if euid == 0:
        return Check("Counter permission", OK, "admin only (RmProfilingAdminOnly: 1), and this is root", "", need)
    return Check("Counter permission", MISSING, "admin only (RmProfilingAdminOnly: 1) and this user is not root",
                 FIX_PERMISSION, need)


def probe_counter_permission() -> Check:
    try:
        with open(NVIDIA_PARAMS) as f:
            text: str | None = f.read()
    except OSError:
        text = None
    return counter_permission(text, os.geteuid() if hasattr(os, "geteuid") else -1)


def probe_nvml(nvml: Any | None = None) -> list[Check]:
    """NVML (driver version, live GPU stats) and GPM (SM and tensor activity, Hopper and later)."""
    from kernelscope.collect.nvml import api

    need, gpm_need = "live GPU stats (utilization, clocks, power)", "SM / tensor / DRAM activity in live stats"
    try:
        n = api.load(nvml)
        api.start(n)
    except api.NvmlUnavailable as e:
        fix = FIX_NVML if "not installed" in str(e) else FIX_DRIVER
        return [Check("NVML", MISSING, str(e), fix, need),
                Check("GPM", MISSING, "needs NVML", fix, gpm_need)]
    try:
        version, err = api.call(n, n.nvmlSystemGetDriverVersion)
        if isinstance(version, bytes):
            version = version.decode(errors="replace")
        nvml_check = Check("NVML", OK, f"driver {version}" if err is None else f"started; driver version: {err}",
                           "", need)
        h, err = api.call(n, lambda: n.nvmlDeviceGetHandleByIndex(0))
        if err is not None:
            return [nvml_check, Check("GPM", MISSING, f"no device to ask: {err}", FIX_DRIVER, gpm_need)]
        reason = api.GpmReader(n, h).reason
        gpm = (Check("GPM", OK, "supported on device 0", "", gpm_need) if reason is None
               else Check("GPM", LIMITED, reason, "", gpm_need))
        return [nvml_check, gpm]
    finally:
        api.stop(n)


def probe_proton() -> Check:
    need = "phase scopes inside Triton kernels (instrumentation)"
    proton, err = _module("triton.profiler")
    if proton is None:
        return Check("Proton (Triton)", MISSING, f"cannot import triton.profiler ({err})", FIX_TRITON, need)
    lang, err = _module("triton.profiler.language")
    if lang is None:
        return Check("Proton (Triton)", LIMITED, f"no triton.profiler.language ({err})",
                     "pip install -U triton", need)
    return Check("Proton (Triton)", OK, "triton.profiler and its language module import", "", need)


# In the order doctor shows them. Names, looked up when run, so a test can replace one probe.
PROBES = ("probe_gpu", "probe_torch", "probe_triton", "probe_cupti", "probe_ncu", "probe_ncu_report",
          "probe_counter_permission", "probe_nvml", "probe_proton")


def run_checks() -> list[Check]:
    checks: list[Check] = []
    for name in PROBES:
        probe: Callable[[], Check | list[Check]] = globals()[name]
        try:
            got = probe()
        except Exception as e:  # a probe's own bug must not cost the others
            got = Check(name.removeprefix("probe_"), MISSING, f"the check failed: {type(e).__name__}: {e}", "", "")
        checks.extend(got if isinstance(got, list) else [got])
    return checks
