"""kernelscope doctor: each check on what it probes, faked where this machine lacks the GPU, and the command."""
from __future__ import annotations

import sys
import types

import pytest

from conftest import draw, run_cli
from kernelscope.collect import doctor
from kernelscope.collect.doctor import LIMITED, MISSING, OK, Check, counter_permission
from kernelscope.model import Device
from kernelscope.model.device import attribute
from kernelscope.render.doctor import DoctorView


def _text(checks) -> str:
    return draw(DoctorView(checks))


def test_doctor_runs_here_and_names_the_fix_for_what_is_missing():
    from kernelscope.collect.driver import gpu_available

    r = run_cli("doctor", "--no-color", "--width", "120")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "kernelscope doctor: what works on this machine"
    for name in ("GPU and driver", "PyTorch", "Triton", "CUPTI (PyTorch profiler)", "Nsight Compute (ncu)",
                 "Counter permission", "NVML", "GPM", "Proton (Triton)"):
        assert any(name in ln for ln in lines), name
    if not gpu_available()[0]:
        gpu = next(ln for ln in lines if "GPU and driver" in ln and "needed for" in ln)
        assert gpu.startswith("missing ")
        assert "To fix:" in r.stdout and "install the NVIDIA driver" in r.stdout


def _fake_device() -> Device:
    return Device(0, "NVIDIA H100 80GB HBM3", (9, 0),
                  {"cuda_driver_api_version": attribute(13000, "", "cuDriverGetVersion")})


def test_gpu_check_reads_the_driver(monkeypatch):
    from kernelscope.collect import driver

    monkeypatch.setattr(driver, "device_count", lambda: 2)
    monkeypatch.setattr(driver, "query_device", lambda i=0: _fake_device())
    c = doctor.probe_gpu()
    assert c.status == OK and c.found == "NVIDIA H100 80GB HBM3 (+1 more), sm_90, CUDA driver API 13.0"
    monkeypatch.setattr(driver, "device_count", lambda: 0)
    c = doctor.probe_gpu()
    assert c.status == MISSING and c.fix == doctor.FIX_DRIVER


def _fake_torch(version: str, cuda: str | None, available: bool, activities=("CPU", "CUDA")):
    acts = types.SimpleNamespace(CPU="CPU", CUDA="CUDA")
    prof = types.SimpleNamespace(ProfilerActivity=acts, supported_activities=lambda: list(activities))
    return types.SimpleNamespace(__version__=version, version=types.SimpleNamespace(cuda=cuda),
                                 cuda=types.SimpleNamespace(is_available=lambda: available), profiler=prof)


@pytest.mark.parametrize(
    "cuda,available,status", [("12.8", True, OK), ("12.8", False, LIMITED), (None, False, LIMITED)]
)
def test_torch_check_tells_a_cpu_build_from_a_cuda_one(monkeypatch, cuda, available, status):
    monkeypatch.setattr(doctor, "_module", lambda name: (_fake_torch("2.11.0", cuda, available), ""))
    c = doctor.probe_torch()
    assert c.status == status and c.found.startswith("torch 2.11.0")
    assert (c.fix == "") == (status == OK)


def test_cupti_check_needs_the_cuda_activity_and_a_gpu(monkeypatch):
    fake = _fake_torch("2.11.0", "12.8", True)
    monkeypatch.setitem(sys.modules, "torch.profiler", fake.profiler)
    monkeypatch.setattr(doctor, "_module", lambda name: (fake, ""))
    assert doctor.probe_cupti().status == OK
    cpu_only = _fake_torch("2.13.0", None, False, activities=("CPU",))
    monkeypatch.setitem(sys.modules, "torch.profiler", cpu_only.profiler)
    monkeypatch.setattr(doctor, "_module", lambda name: (cpu_only, ""))
    c = doctor.probe_cupti()
    assert c.status == MISSING and "no CUDA profiling" in c.found and c.fix == doctor.FIX_TORCH
    monkeypatch.setattr(doctor, "_module", lambda name: (None, "ModuleNotFoundError: torch"))
    assert doctor.probe_cupti().status == MISSING


PARAMS = "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: {v}\nEnableMSI: 1\n"


def test_counter_permission_from_the_driver_setting_and_the_user():
    assert counter_permission(PARAMS.format(v=0), euid=1000).status == OK
    assert counter_permission(PARAMS.format(v=1), euid=0).status == OK
    c = counter_permission(PARAMS.format(v=1), euid=1000)
    assert c.status == MISSING and "NVreg_RestrictProfilingToAdminUsers=0" in c.fix
    assert counter_permission("EnableMSI: 1\n", euid=1000).status == LIMITED
    assert counter_permission(None, euid=0).status == MISSING


class _FakeNvml:
    class NVMLError(Exception):
        pass

    def __init__(self, gpm: bool) -> None:
        self.gpm, self.calls = gpm, []

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("handle", i)

    def nvmlGpmQueryDeviceSupport(self, h):
        return types.SimpleNamespace(isSupportedDevice=int(self.gpm))


def test_nvml_and_gpm_checks_from_nvml_itself():
    n = _FakeNvml(gpm=True)
    nvml, gpm = doctor.probe_nvml(n)
    assert (nvml.status, nvml.found) == (OK, "driver 580.159.04") and gpm.status == OK
    assert n.calls == ["init", "shutdown"]
    _, gpm = doctor.probe_nvml(_FakeNvml(gpm=False))
    assert gpm.status == LIMITED and "Hopper or later" in gpm.found


def test_a_gpu_machine_renders_every_check_ok_and_no_fix(monkeypatch):
    """The GPU case, with the probes replaced: what the user sees when everything is there."""
    found = {
        "probe_gpu": "NVIDIA H100 80GB HBM3, sm_90, CUDA driver API 13.0",
        "probe_torch": "torch 2.11.0 (CUDA 12.8)",
    }
    for name in doctor.PROBES:
        label = name.removeprefix("probe_")
        monkeypatch.setattr(doctor, name, lambda label=label, name=name: Check(label, OK, found.get(name, "fine")))
    monkeypatch.setattr(doctor, "probe_ncu", lambda: Check("Nsight Compute (ncu)", MISSING, "not on PATH",
                                                           doctor.FIX_NCU, "the counter pass"))
    out = _text(doctor.run_checks())
    lines = [ln.rstrip() for ln in out.splitlines()]
    assert lines[1].split()[:2] == ["ok", "gpu"] and lines[1].endswith(
        "NVIDIA H100 80GB HBM3, sm_90, CUDA driver API 13.0"
    )
    assert any(
        ln.split()[:4] == ["missing", "Nsight", "Compute", "(ncu)"] and ln.endswith("needed for the counter pass")
        for ln in lines
    )
    fix = lines[lines.index("To fix:") + 1]
    assert fix.startswith("Nsight Compute (ncu)") and "sudo apt-get install nsight-compute" in fix
    assert lines[-1].startswith(f"{len(doctor.PROBES) - 1} of {len(doctor.PROBES)} checks ok.")


def test_a_probe_that_breaks_is_reported_not_raised(monkeypatch):
    def broken():
        raise RuntimeError("boom")

    monkeypatch.setattr(doctor, "PROBES", ("probe_triton",))
    monkeypatch.setattr(doctor, "probe_triton", broken)
    (c,) = doctor.run_checks()
    assert c.status == MISSING and "RuntimeError: boom" in c.found


@pytest.mark.parametrize("gpu", [True, False])
def test_missing_torch_is_fixed_with_the_build_this_machine_can_use(monkeypatch, gpu):
    """Issue 36: no GPU, no CUDA build (plain `pip install torch` pulls a multi-GB one on Linux)."""
    from kernelscope.collect import driver

    monkeypatch.setattr(doctor, "_module", lambda name: (None, "ModuleNotFoundError: torch"))
    monkeypatch.setattr(driver, "driver_gpu", lambda: (True, "") if gpu else (False, "no driver"))
    c = doctor.probe_torch()
    assert c.status == MISSING and c.fix.startswith("pip install torch")
    assert ("--index-url https://download.pytorch.org/whl/cpu" in c.fix) == (not gpu)


def test_doctor_says_only_true_things_about_what_each_command_needs():
    """demo and learn run without Triton (a recorded launch), demo without torch; top reads NVML (issue 36)."""
    triton = doctor.probe_triton()
    torch = doctor.probe_torch()
    for name in ("bench", "profile", "tune"):
        assert name in triton.needed_for
    assert "demo and learn show a recorded launch without it" in triton.needed_for
    assert "without it demo shows a recorded session" in torch.needed_for
    text = _text([Check("NVML", MISSING, "not here", doctor.FIX_NVML, "live GPU stats")])
    assert "top needs NVML" in text and "export and top read" not in text
