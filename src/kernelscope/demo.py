"""`kernelscope demo`: is there a GPU, and the bundled session for when there is not."""
from __future__ import annotations

import gzip
import json
from importlib import resources

from kernelscope.model import Session

BUNDLED = "demo_session.json.gz"  # recorded by `kernelscope demo -o` on a GPU; the banner names which


def gpu_available() -> tuple[bool, str]:
    """(True, "") when torch sees a CUDA GPU; else (False, why not) in a few words."""
    try:
        from kernelscope.collect.driver import DriverUnavailable, device_count

        if device_count() == 0:
            return False, "the CUDA driver reports no devices"
    except DriverUnavailable as e:
        return False, str(e)
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        return False, f"the demo needs torch and triton: {e}"
    if not torch.cuda.is_available():
        return False, "PyTorch sees no CUDA GPU"
    return True, ""


def bundled_session() -> tuple[Session, str]:
    """The session recorded on a real GPU that ships with kernelscope, and a label for it."""
    raw = resources.files("kernelscope").joinpath("data", BUNDLED).read_bytes()
    session = Session.from_dict(json.loads(gzip.decompress(raw)))
    device = session.device.name if session.device else "an unknown GPU"
    return session, f"{device} on {session.created_utc[:10]}"
