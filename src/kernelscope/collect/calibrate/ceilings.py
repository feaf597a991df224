"""Measured ceilings of one GPU, and their cache.

`kernelscope calibrate` measures, with random data, warm-up and the median of
repeats timed by CUDA events:
- copy bandwidth: a device-to-device copy of a buffer far larger than L2,
  counting the bytes read plus the bytes written;
- dense fp16 and bf16 matmul rates through cuBLAS (torch.matmul), 2 n^3 FLOPs;
- the fp32 FMA rate of a small Triton kernel (collect/calibrate/fma.py).
The result is cached as JSON per device name, driver version and maximum SM
clock (~/.cache/kernelscope, or $KERNELSCOPE_CACHE_DIR), since each of those
changes the ceilings. torch and triton are imported only to measure.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from kernelscope.model import Device, Metric, MetricMap
from kernelscope.model.files import InputFileError, read_input, write_atomic
from kernelscope.model.metric import metrics_from_dict, metrics_to_dict

CACHE_ENV = "KERNELSCOPE_CACHE_DIR"
FORMAT_NAME = "kernelscope-ceilings"
FORMAT_VERSION = 1
COPY_FORMULA = "2 x buffer bytes (read + written) / median copy time"
MATMUL_FORMULA = "2 x n^3 / median matmul time"
FMA_FORMULA = "2 x elements x iterations x chains / median kernel time"
# Bounds of a ceiling's value in byte/s or FLOP/s. One per second is far below any GPU, and 1e24 is a
# hundred million times an H100's dense matmul rate; inside them every quotient and product the roofline
# forms with realistic work stays far from float overflow and underflow (see ceiling_value_problem).
CEILING_MIN = 1.0
CEILING_MAX = 1e24


class CalibrationFileError(Exception):
    """A ceilings file that cannot be read; the message is one sentence."""


@dataclass(frozen=True)
class CeilingKey:
    device_name: str
    driver_version: str
    sm_clock_max_mhz: int

    def file_name(self) -> str:
        slug = _slug(self.device_name, 80)  # a name over 255 bytes is refused by the file system
        return f"ceilings-{slug}-{_slug(self.driver_version, 40)}-{self.sm_clock_max_mhz}MHz.json"

    def to_dict(self) -> dict[str, Any]:
        return {"device_name": self.device_name, "driver_version": self.driver_version,
                "sm_clock_max_mhz": self.sm_clock_max_mhz}


def _slug(text: str, most: int) -> str:
    """``text`` as file-name characters; a longer one is cut and told apart by a hash of the whole."""
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")
    if len(slug) <= most:
        return slug
    return f"{slug[:most - 17]}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def key_for_device(device: Device | None) -> tuple[CeilingKey | None, str | None]:
    """The cache key of a recorded device, or why there is none."""
    if device is None:
        return None, "the session recorded no device"
    driver = device.value("driver_version")
    clock = device.value("sm_clock_max_mhz")
    if clock is None and isinstance(device.value("sm_clock_max_khz"), int):
        clock = device.value("sm_clock_max_khz") // 1000
    if not driver and device.value("cuda_driver_api_version"):
        driver = f"cuda-api-{device.value('cuda_driver_api_version')}"  # NVML absent: the CUDA driver's own version
    if not driver:
        return None, "the session did not record the driver version, and measured ceilings are kept per driver"
    if not isinstance(clock, (int, float)):
        return None, "the session did not record the maximum SM clock, and measured ceilings are kept per clock"
    return CeilingKey(device.name, str(driver), int(clock)), None


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelscope"


def cache_path(key: CeilingKey) -> Path:
    return cache_dir() / key.file_name()


@dataclass
class Calibration:
    key: CeilingKey
    measured_utc: str
    ceilings: MetricMap
    method: dict[str, Any] = field(default_factory=dict)  # sizes, repeats, warm-up
    clock_check: dict[str, Any] = field(default_factory=dict)  # what the clocks did while measuring
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "key": self.key.to_dict(),
                "measured_utc": self.measured_utc, "ceilings": metrics_to_dict(self.ceilings),
                "method": self.method, "clock_check": self.clock_check, "environment": self.environment}


def save_calibration(cal: Calibration, path: Path | None = None) -> Path:
    """Write atomically (temp file + rename) to ``path`` or the cache."""
    path = Path(path) if path is not None else cache_path(cal.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, json.dumps(cal.to_dict(), indent=1).encode())


def load_calibration(path: Path) -> Calibration:
    try:
        doc = json.loads(read_input(path))  # a regular file of bounded size: a FIFO or /dev/zero is refused
    except FileNotFoundError:
        raise CalibrationFileError(f"{path}: no such ceilings file") from None
    except InputFileError as e:
        raise CalibrationFileError(str(e) if not e.damaged else
                                   f"{path} is not a kernelscope ceilings file: it is damaged or not JSON") from None
    except RecursionError:
        raise CalibrationFileError(f"{path} is not a kernelscope ceilings file: its JSON nests too deeply") from None
    except (OSError, ValueError):
        raise CalibrationFileError(f"{path} is not a kernelscope ceilings file: it is damaged or not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME or doc.get("version") != FORMAT_VERSION:
        raise CalibrationFileError(f"{path} is not a version-{FORMAT_VERSION} kernelscope ceilings file")
    if not isinstance(doc.get("ceilings"), dict):
        raise CalibrationFileError(f'{path} is a damaged ceilings file: its "ceilings" is not an object of '
                                   "named ceilings")
    bad = next((name for name, m in doc["ceilings"].items() if not isinstance(m, dict)), None)
    if bad is not None:
        shown = bad if len(bad) <= 80 else bad[:77] + "..."
        raise CalibrationFileError(f'{path} is a damaged ceilings file: its ceiling "{shown}" is not an object')
    try:
        k = doc["key"]
        cal = Calibration(CeilingKey(str(k["device_name"]), str(k["driver_version"]), int(k["sm_clock_max_mhz"])),
                          str(doc.get("measured_utc", "")), metrics_from_dict(doc["ceilings"]),
                          dict(doc.get("method") or {}), dict(doc.get("clock_check") or {}),
                          dict(doc.get("environment") or {}))
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise CalibrationFileError(f"{path} is a damaged ceilings file ({type(e).__name__}: {e})") from None
    for name, metric in cal.ceilings.items():
        why = ceiling_value_problem(metric.value)
        if why is not None:
            shown = name if len(name) <= 80 else name[:77] + "..."
            raise CalibrationFileError(f'{path} is a damaged ceilings file: the value of ceiling "{shown}" {why}')
    return cal


def ceiling_value_problem(value: object) -> str | None:
    """Why ``value`` cannot be a measured ceiling (a rate in byte/s or FLOP/s), or None when it can.

    A ceiling is a finite number from CEILING_MIN to CEILING_MAX, or absent (None, its Metric names why).
    Analyses divide by ceilings and multiply them by arithmetic intensity, and the roofline chart takes
    their logarithm: zero, a negative, NaN or inf would crash those or print NaN/Infinity in JSON, and a
    value near the float limits (1e-300) would overflow a quotient to inf. Inside these bounds every
    derived value of realistic work stays far from the float range's ends."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"is {type(value).__name__}, not a number"
    if not math.isfinite(value):
        return f"is {value}, not a finite number"
    if not CEILING_MIN <= value <= CEILING_MAX:
        return f"is {value:g}, not between {CEILING_MIN:g} and {CEILING_MAX:g} per second"
    return None


def cached_or_why(key: CeilingKey) -> tuple[Calibration | None, str | None]:
    """The cached calibration for this key, or None with why it cannot be used (None, None when there is none)."""
    path = cache_path(key)
    try:
        if not path.exists():
            return None, None
        return load_calibration(path), None
    except CalibrationFileError as e:
        return None, str(e)
    except OSError as e:  # e.g. a cache path the file system refuses
        return None, f"the cached ceilings file {path} cannot be read ({e.strerror or e})"


def cached(key: CeilingKey) -> Calibration | None:
    """The cached calibration for this key; None when there is none or it cannot be read."""
    return cached_or_why(key)[0]


# -- pure helpers (tested without a GPU) ------------------------------------------------

def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("no timed repeats")
    return float(statistics.median(xs))


def copy_bytes_counted(buffer_bytes: int) -> int:
    """A device-to-device copy reads the buffer and writes it once: both count."""
    return 2 * buffer_bytes


def matmul_flops(n: int) -> int:
    return 2 * n ** 3


def rate_metric(name: str, amount: float, times_ms: Sequence[float], unit: str, formula: str) -> Metric:
    """amount / median time, as a derived Metric that names its formula."""
    return Metric(amount / (median(times_ms) * 1e-3), unit, "derived", name, formula=formula)


# -- measuring (needs a CUDA GPU) ----------------------------------------------------------

def gpu_available() -> tuple[bool, str]:
    """collect/driver's one GPU check, saying what calibrate needed the GPU for."""
    from kernelscope.collect.driver import gpu_available as driver_gpu_available

    ok, why = driver_gpu_available()
    return (True, "") if ok else (False, f"{why}, and calibrate measures the GPU it runs on with torch (cuBLAS)")


def _time_ms(torch: Any, fn: Callable[[], Any], warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


def _copy_times(torch: Any, dev: Any, gen: Any, nbytes: int, warmup: int, repeats: int) -> list[float]:
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=dev, generator=gen)
    dst = torch.empty_like(src)
    return _time_ms(torch, lambda: dst.copy_(src), warmup, repeats)


def _matmul_times(torch: Any, dev: Any, gen: Any, dtype: Any, n: int, warmup: int, repeats: int) -> list[float]:
    a = torch.randn(n, n, dtype=dtype, device=dev, generator=gen)
    b = torch.randn(n, n, dtype=dtype, device=dev, generator=gen)
    c = torch.empty_like(a)
    return _time_ms(torch, lambda: torch.matmul(a, b, out=c), warmup, repeats)


def measure(device_index: int = 0, repeats: int = 20, warmup: int = 5, copy_buffer_bytes: int = 1 << 30,
            matmul_n: int = 8192, fma_iterations: int = 4096) -> tuple[MetricMap, dict[str, Any]]:
    """Measure every ceiling on one GPU; returns the metrics and how they were measured."""
    import torch

    from kernelscope.collect.calibrate import fma as calibrate_fma
    torch.cuda.set_device(device_index)
    dev = torch.device("cuda", device_index)
    gen = torch.Generator(device=dev).manual_seed(0)
    out: MetricMap = {}
    t = _copy_times(torch, dev, gen, copy_buffer_bytes, warmup, repeats)
    out["copy_bandwidth_bytes_per_s"] = rate_metric("device-to-device copy (torch copy_)",
                                                    copy_bytes_counted(copy_buffer_bytes), t, "byte/s", COPY_FORMULA)
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        t = _matmul_times(torch, dev, gen, dtype, matmul_n, warmup, repeats)
        out[f"matmul_{name}_flop_per_s"] = rate_metric(f"torch.matmul {name} {matmul_n}^3 (cuBLAS)",
                                                       matmul_flops(matmul_n), t, "FLOP/s", MATMUL_FORMULA)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    elements = sms * 16 * 1024  # 16 blocks of 1024 elements per SM: every SM busy, several blocks each
    buf = torch.empty(elements, dtype=torch.float32, device=dev)
    t = _time_ms(torch, lambda: calibrate_fma.launch(buf, 0.999, 0.001, fma_iterations), warmup, repeats)
    out["fma_fp32_flop_per_s"] = rate_metric("Triton fp32 FMA kernel (kernelscope)", calibrate_fma.fma_flops(
        elements, fma_iterations), t, "FLOP/s", FMA_FORMULA)
    method = {"repeats": repeats, "warmup": warmup, "timer": "CUDA events, one pair per repeat", "statistic": "median",
              "copy_buffer_bytes": copy_buffer_bytes, "matmul_n": matmul_n, "fma_elements": elements,
              "fma_iterations": fma_iterations, "fma_chains": calibrate_fma.CHAINS, "data": "random (seed 0)",
              "torch": torch.__version__}
    return out, method
