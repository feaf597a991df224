"""`kernelscope calibrate`: measure this GPU's ceilings (copy bandwidth, fp16/bf16 matmul,
fp32 FMA) once and cache them; every "% of measured peak" and roofline uses them."""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys

from kernelscope.cli.common import add_style_args, fail, positive
from kernelscope.collect.calibrate.lookup import ceilings_for_session  # noqa: F401  (its older home)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure this GPU's ceilings (bandwidth, matmul, FMA) and cache them")
    p.add_argument("--force", action="store_true", help="measure again even if this GPU has cached ceilings")
    p.add_argument("--json", action="store_true", help="print the ceilings as JSON")
    p.add_argument("--device", type=int, default=0, metavar="N", help="CUDA device ordinal (default 0)")
    p.add_argument("--repeats", type=positive, default=20, metavar="N", help="timed repeats per ceiling (default 20)")
    add_style_args(p)
    p.set_defaults(func=main)


def _print(cal, path, was_cached: bool, as_json: bool, width: int | None = None, no_color: bool = False) -> None:
    if as_json:
        json.dump({**cal.to_dict(), "path": str(path), "cached": was_cached}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    from kernelscope.render.console import make_console
    from kernelscope.render.fmt import si

    console = make_console(width=width, color=False if no_color else None)
    how = "cached; --force measures again" if was_cached else "measured now"
    console.print(f"Measured ceilings of {cal.key.device_name} (driver {cal.key.driver_version}, SM clock max "
                  f"{cal.key.sm_clock_max_mhz} MHz), {cal.measured_utc} ({how}):")
    for name, m in cal.ceilings.items():
        console.print(f"  {name:28} {si(float(m.value), m.unit):>16}   {m.raw_name}: {m.formula}")
    status = cal.clock_check.get("status", "unknown")
    flags = "; ".join(cal.clock_check.get("flags") or [])
    console.print(f"  clocks while measuring: {status}{(': ' + flags) if flags else ''}")
    console.print(f"  saved in {path}")


def main(args: argparse.Namespace) -> int:
    from kernelscope.collect.calibrate import ceilings as cal_mod
    if args.repeats < 1:
        fail("--repeats must be at least 1")
    ok, why = cal_mod.gpu_available()
    if not ok:
        fail(f"cannot calibrate: {why}")
    from kernelscope.analyze.gpu_stats import clock_hygiene
    from kernelscope.collect import driver
    from kernelscope.collect.nvml import snapshot as nvml
    from kernelscope.collect.nvml.sampler import GpuSampler

    try:
        device = driver.query_device(args.device)
    except driver.DriverUnavailable as e:
        fail(f"cannot read CUDA device {args.device} ({e})")
    metrics, _ = nvml.snapshot(device.value("pci_bus_id_string"), args.device)
    device.attributes.update(metrics)
    key, why = cal_mod.key_for_device(device)
    if key is None:
        fail(f"cannot calibrate: {why}")
    path = cal_mod.cache_path(key)
    existing = cal_mod.cached(key)
    if existing is not None and not args.force:
        _print(existing, path, True, args.json, args.width, args.no_color)
        return 0
    sampler = GpuSampler([(args.device, device.value("pci_bus_id_string"))], interval_ms=50)
    sampler_reason = sampler.start()
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    ceilings, method = cal_mod.measure(args.device, repeats=args.repeats)
    sampler.stop()
    hygiene = clock_hygiene(sampler.samples)
    clock_check = {"status": hygiene.status, "samples": hygiene.samples, "flags": list(hygiene.flags),
                   "sm_clock_min_mhz": hygiene.sm_clock_min_mhz, "sm_clock_mean_mhz": hygiene.sm_clock_mean_mhz,
                   "sm_clock_max_mhz": hygiene.sm_clock_max_mhz, "sampler": sampler_reason or "ok"}
    cal = cal_mod.Calibration(key, started, ceilings, method, clock_check, {"python": sys.version.split()[0]})
    cal_mod.save_calibration(cal, path)
    if hygiene.status == "flagged":
        print(f"kernelscope: warning: the clocks were held back while measuring ({'; '.join(hygiene.flags)}); the "
              "ceilings may be low: run kernelscope calibrate --force again on an idle, cool GPU.", file=sys.stderr)
    _print(cal, path, False, args.json, args.width, args.no_color)
    return 0
