"""`kernelscope top` against the scripted fake NVML: --once, --json, the live loop
(on a pseudo-terminal: 'q' and Ctrl-C leave cleanly), and one-sentence errors."""
from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import HANG_S, ROOT, default_signals, run_cli
from kernelscope.cli import top
from kernelscope.model import DeviceReading, Metric, Sample
from kernelscope.render.show import make_console
from kernelscope.render.top_view import History, TopView
from test_nvml_sampler import H100_READING, FakeNvml, NVMLError_DriverNotLoaded, NVMLError_NotSupported


def _args(**kw) -> argparse.Namespace:
    base = dict(once=True, json=False, interval=50.0, iterations=None, width=100, no_color=True)
    return argparse.Namespace(**{**base, **kw})


def test_once_json_reports_every_gpu_with_provenance_and_processes(capsys):
    fake = FakeNvml(gpus=2, processes=[(1234, 2 * 2**30), (4242, None)])
    assert top.main(_args(json=True), nvml=fake) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["driver_version"]["value"] == "580.159.04" and doc["gpm_window_ms"] == 260.0  # GPM's minimum window + 10
    assert [d["index"] for d in doc["devices"]] == [0, 1]
    d = doc["devices"][0]
    assert d["name"]["value"] == "NVIDIA H100 80GB HBM3"
    m = d["metrics"]
    assert m["gpu_utilization_pct"] == {"value": 97, "unit": "%", "source": "nvml",
                                        "raw_name": "nvmlDeviceGetUtilizationRates.gpu"}
    assert m["sm_activity_pct"]["value"] == 88.5 and m["sm_activity_pct"]["source"] == "gpm"  # 2nd GPM sample
    assert m["power_w"]["value"] == pytest.approx(512.345) and m["power_limit_w"]["value"] == pytest.approx(700.0)
    assert d["throttle_reason_names"] == ["sw_power_cap"]
    procs = {p["pid"]: p for p in d["processes"]}
    assert procs[1234]["used_memory"]["value"] == 2 * 2**30 and procs[1234]["name"]["value"] == "python3"
    assert procs[4242]["name"]["missing_reason"] == "NVML: Not Found"
    assert procs[4242]["used_memory"]["value"] is None and procs[4242]["used_memory"]["missing_reason"]
    assert fake.initialised == 0 and fake.gpm_live == 0  # NVML shut down, GPM buffers freed


def test_once_json_says_na_and_why_for_refused_fields_and_no_gpm(capsys):
    fake = FakeNvml([dict(H100_READING, temp=NVMLError_NotSupported)], gpm=False)
    assert top.main(_args(json=True), nvml=fake) == 0
    m = json.loads(capsys.readouterr().out)["devices"][0]["metrics"]
    assert m["temperature_c"]["value"] is None and m["temperature_c"]["missing_reason"] == "NVML: Not Supported"
    assert "not supported on this GPU" in m["tensor_activity_pct"]["missing_reason"]
    assert m["pcie_tx_bytes_per_s"]["value"] == 1000 * 1024  # legacy counter when GPM is absent
    assert m["sm_clock_mhz"]["value"] == 1980


def test_once_text_draws_bars_values_and_processes(capsys):
    fake = FakeNvml(processes=[(1234, 2 * 2**30)])
    assert top.main(_args(width=100), nvml=fake) == 0
    out = capsys.readouterr().out
    assert "GPU 0 · NVIDIA H100 80GB HBM3" in out and "driver 580.159.04" in out
    assert "97 %" in out and "1980 MHz / 1980 MHz" in out and "512 W / 700 W" in out and "48 °C" in out
    assert "█" * 19 + "░" in out  # 97 % of a 20-cell bar
    assert "sw_power_cap" in out and "1234" in out and "python3" in out and "2.0 GiB" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_history_sparkline_follows_the_readings():
    readings = [dict(H100_READING, util=type(H100_READING["util"])(gpu=g, memory=0)) for g in (0, 50, 100)]
    fake = FakeNvml(readings)
    from kernelscope.collect.nvml.sampler import Monitor

    mon = Monitor(fake)
    mon.open()
    hist = History()
    for _ in range(3):
        rs = mon.read()
        hist.add(rs)
    mon.close()
    assert hist.get(0, "gpu_utilization_pct") == [0.0, 50.0, 100.0]
    buf = io.StringIO()
    make_console(width=100, file=buf, color=False).print(TopView(rs, hist))
    assert "▁▅█" in buf.getvalue()


def test_missing_name_and_process_list_are_na_with_reason():
    sample = Sample(wall_time_ns=0, device_index=0, metrics={
        "gpu_utilization_pct": Metric.missing("nvmlDeviceGetUtilizationRates.gpu", "NVML: GPU is lost", "nvml", "%")})
    r = DeviceReading(index=3, name=Metric.missing("nvmlDeviceGetName", "NVML: Unknown Error", "nvml"), sample=sample,
                      processes_missing_reason="NVML: Insufficient Permissions")
    buf = io.StringIO()
    make_console(width=100, file=buf, color=False).print(TopView([r]))
    out = buf.getvalue()
    assert "GPU 3 · N/A" in out and "processes: N/A: NVML: Insufficient Permissions" in out
    row = next(line for line in out.splitlines() if "GPU util" in line)
    assert "N/A" in row and "NVML: GPU is lost" in row


def test_no_driver_is_one_sentence_and_nonzero(capsys):
    with pytest.raises(SystemExit) as e:
        top.main(_args(json=True), nvml=FakeNvml(init_error=NVMLError_DriverNotLoaded))
    assert e.value.code != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("kernelscope: error: NVML could not start (Driver Not Loaded)") and err.count("\n") == 0


def test_no_gpu_is_one_sentence_and_nonzero(capsys):
    with pytest.raises(SystemExit) as e:
        top.main(_args(), nvml=FakeNvml(gpus=0))
    assert e.value.code != 0 and "NVML sees no NVIDIA GPU" in capsys.readouterr().err


def test_bad_interval_is_rejected(capsys):
    with pytest.raises(SystemExit) as e:
        top.main(_args(interval=5.0), nvml=FakeNvml())
    assert e.value.code == 2 and "--interval" in capsys.readouterr().err


def _cli(code: str) -> list[str]:
    """Run `kernelscope top` in a child whose pynvml is the scripted fake."""
    boot = ("import sys; sys.path[:0] = [{t!r}, {s!r}]; import test_nvml_sampler as f; "
            "sys.modules['pynvml'] = f.FakeNvml(processes=[(1234, 2**30)]); from kernelscope.cli import main; "
            ).format(t=str(ROOT / "tests"), s=str(ROOT / "src"))
    return [sys.executable, "-c", boot + code]


@pytest.mark.parametrize("driver", [True, False])
def test_without_nvidia_ml_py_the_cli_says_so(driver, monkeypatch):
    """Where the driver's NVML library is, the binding is what is missing; where it is not, installing the binding
    would not help, and top says there is no driver instead (issue 36)."""
    from kernelscope.collect.nvml import api

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml fails, as where it is not installed
    monkeypatch.setattr(api, "driver_library", lambda: driver)
    p = run_cli("top", "--once")
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    if driver:
        assert "nvidia-ml-py is not installed" in p.stderr
    else:
        assert "no NVIDIA driver here" in p.stderr and "install" not in p.stderr


def test_once_json_through_the_command_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(processes=[(1234, 2**30)]))
    p = run_cli("top", "--once", "--json", "--interval", "50")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["devices"][0]["metrics"]["sm_clock_mhz"]["value"] == 1980


def _pty_run(argv: list[str], action) -> tuple[int, str]:
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                            preexec_fn=default_signals)  # Ctrl-C interrupts it even where pytest runs in the background
    os.close(slave)
    out = b""
    acted, started = False, time.monotonic()
    while proc.poll() is None and time.monotonic() - started < HANG_S:  # past HANG_S it is stuck: wait() fails
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
        if not acted and b"GPU 0" in out and out.count(b"GPU util") >= 3:  # three refreshes drawn
            action(proc, master)
            acted = True
    try:
        rc = proc.wait(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return rc, out.decode(errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
@pytest.mark.parametrize("how", ["q", "ctrl-c"])
def test_live_dashboard_refreshes_and_leaves_cleanly(how):
    def act(proc, master):
        if how == "q":
            os.write(master, b"q")
        else:
            proc.send_signal(signal.SIGINT)

    rc, out = _pty_run(_cli("sys.exit(main(['top', '--interval', '100', '--width', '100']))"), act)
    assert rc == 0, out[-2000:]
    assert "q or Ctrl-C to quit" in out and "Traceback" not in out and "interrupted" not in out
