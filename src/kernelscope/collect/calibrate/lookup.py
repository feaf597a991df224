"""Which measured ceilings a session's analysis uses: the ones cached for its GPU by
`kernelscope calibrate`, or a calibration file the user names. Returns analyze.roofline.Ceilings
(plain data), or Ceilings.none() saying why there are none; never prints."""
from __future__ import annotations

from pathlib import Path

from kernelscope.analyze.roofline import NO_CALIBRATION, Ceilings
from kernelscope.collect.calibrate.ceilings import (Calibration, cache_path, cached_or_why, key_for_device,
                                                    load_calibration)
from kernelscope.model import Session


def _flagged(cal: Calibration) -> str:
    return " (clocks were flagged while measuring)" if cal.clock_check.get("status") == "flagged" else ""


def ceilings_for_session(session: Session) -> Ceilings:
    """The cached measured ceilings of the session's GPU, or Ceilings.none() saying why there are none."""
    key, why = key_for_device(session.device)
    if key is None:
        return Ceilings.none(f"no measured ceilings can be matched: {why}")
    cal, unusable = cached_or_why(key)
    if unusable is not None:  # a damaged cache file counts as none, saying why
        return Ceilings.none(f"no usable measured ceilings for this GPU: {unusable}; run kernelscope calibrate "
                             "--force on it")
    if cal is None:
        return Ceilings.none(f"{NO_CALIBRATION} ({key.device_name}, driver {key.driver_version}, "
                             f"{key.sm_clock_max_mhz} MHz)")
    return Ceilings.from_metrics(cal.ceilings, f"measured by kernelscope calibrate on {cal.measured_utc[:10]}, "
                                 f"{cache_path(key)}{_flagged(cal)}")


def ceilings_mismatch(cal: Calibration, session: Session) -> str | None:
    """Why a calibration's GPU is not the session's, in words; None when name, driver and SM clock agree."""
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


def ceilings_from_file(session: Session, path: str | Path) -> tuple[Ceilings, str | None]:
    """The ceilings in a calibration file, and a warning when they were measured on another GPU than the
    session's (the warning is also in their source). Raises CalibrationFileError for a bad file."""
    cal = load_calibration(path)
    note = _flagged(cal)
    other = ceilings_mismatch(cal, session)
    if other:
        note += f"; NOTE: {other}"
    return Ceilings.from_metrics(cal.ceilings, f"measured by kernelscope calibrate on {cal.measured_utc[:10]} on "
                                 f"{cal.key.device_name}, {path}{note}"), other


def ceilings_for(session: Session, path: str | Path | None) -> tuple[Ceilings, str | None]:
    """``--ceilings FILE`` when given, else the cached ceilings of the session's GPU; with any warning."""
    if path is None:
        return ceilings_for_session(session), None
    return ceilings_from_file(session, path)
