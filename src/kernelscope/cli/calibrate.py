"""`kernelscope calibrate`: measure this GPU's ceilings (copy bandwidth, fp16/bf16 matmul,
fp32 FMA) once and cache them; every "% of measured peak" and roofline uses them."""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys

from kernelscope.cli.common import add_style_args, fail, positive


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure this GPU's ceilings (bandwidth, matmul, FMA) and cache them")
    p.add_argument("--force", action="store_true", help="measure again even if this GPU has cached ceilings")
    p.add_argument("--json", action="store_true", help="print the ceilings as JSON")
    p.add_argument("--device", type=int, default=0, metavar="N", help="CUDA device ordinal (default 0)")
    p.add_argument("--repeats", type=positive, default=20, metavar="N", help="timed repeats per ceiling (default 20)")
    add_style_args(p)
    p.set_defaults(func=main)


def ceilings_for_session(session):
    """The cached measured ceilings of the session's GPU, or Ceilings.none() saying why there are none."""
    from kernelscope.analyze.roofline import NO_CALIBRATION, Ceilings
    from kernelscope.collect.calibrate.ceilings import cache_path, cached, key_for_device

    key, why = key_for_device(session.device)
    if key is None:
        return Ceilings.none(f"no measured ceilings can be matched: {why}")
    cal = cached(key)
    if cal is None:
        return Ceilings.none(f"{NO_CALIBRATION} ({key.device_name}, driver {key.driver_version}, "
                             f"{key.sm_clock_max_mhz} MHz)")
    note = " (clocks were flagged while measuring)" if cal.clock_check.get("status") == "flagged" else ""
    return Ceilings.from_metrics(cal.ceilings, f"measured by kernelscope calibrate on {cal.measured_utc[:10]}, "
                                 f"{cache_path(key)}{note}")


def add_ceilings_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ceilings", metavar="FILE", help="measured ceilings from this file (written by kernelscope "
                   "calibrate, e.g. on the GPU the session ran on) instead of this machine's cache")


def ceilings_mismatch(cal, session) -> str | None:
    """Why a calibration's GPU is not the session's, in words; None when name, driver and SM clock agree."""
    from kernelscope.collect.calibrate.ceilings import key_for_device

    device = session.device.name if session.device is not None else None
    if device is None:
        return f"the ceilings were measured on {cal.key.device_name}, and the session recorded no device"
    if device != cal.key.device_name:
        return f"the ceilings were measured on {cal.key.device_name}, but the session ran on {device}"
    key, _ = key_for_device(session.device)
    differs = [] if key is None else [
        f"{what} {mine} vs the session's {theirs}" for what, mine, theirs in (
            ("driver", cal.key.driver_version, key.driver_version),
            ("SM clock max (MHz)", cal.key.sm_clock_max_mhz, key.sm_clock_max_mhz)) if mine != theirs]
    if differs:
        return f"the ceilings were measured on the same GPU model with {'; '.join(differs)}"
    return None


def ceilings_for(session, path: str | None):
    """``--ceilings FILE`` when given (bad file: one sentence, exit 2), else the cached ceilings of the
    session's GPU. A file from another GPU is used, with a warning on stderr and in its source."""
    if path is None:
        return ceilings_for_session(session)
    from kernelscope.analyze.roofline import Ceilings
    from kernelscope.collect.calibrate.ceilings import CalibrationFileError, load_calibration

    try:
        cal = load_calibration(path)
    except CalibrationFileError as e:
        fail(str(e))
    note = " (clocks were flagged while measuring)" if cal.clock_check.get("status") == "flagged" else ""
    other = ceilings_mismatch(cal, session)
    if other:
        print(f"kernelscope: warning: {other}; the roofs and % of peak are that calibration's.", file=sys.stderr)
        note += f"; NOTE: {other}"
    return Ceilings.from_metrics(cal.ceilings, f"measured by kernelscope calibrate on {cal.measured_utc[:10]} on "
                                 f"{cal.key.device_name}, {path}{note}")


def _print(cal, path, was_cached: bool, as_json: bool, width: int | None = None, no_color: bool = False) -> None:
    if as_json:
        json.dump({**cal.to_dict(), "path": str(path), "cached": was_cached}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    from kernelscope.render.show import make_console
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


def write_roofline(session, path: str, ceilings=None) -> None:
    """`show --roofline-png FILE`: the roofline of the session as a PNG, or one sentence why not."""
    from kernelscope.analyze.analysis import analyze_session

    try:
        from kernelscope.render.roofline_plot import write_roofline_png
        import matplotlib  # noqa: F401
    except ImportError:
        fail("--roofline-png needs matplotlib (pip install 'kernelscope[plot]')")
    a = analyze_session(session, ceilings if ceilings is not None else ceilings_for_session(session))
    device = session.device.name if session.device else "unknown device"
    title = f"roofline — {device}, {session.created_utc[:10] or 'date unknown'}"
    try:
        out = write_roofline_png(tuple(k.roofline for k in a.kernels) + a.regions, a.ceilings, path, title)
    except OSError as e:
        fail(f"cannot write {path} ({e.strerror})")
    print(f"kernelscope: roofline written to {out}.", file=sys.stderr)
