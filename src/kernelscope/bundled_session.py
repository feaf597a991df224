"""The session recorded on a real GPU that ships with kernelscope, for `kernelscope demo` without a GPU."""
from __future__ import annotations

import gzip
import json
from importlib import resources

from kernelscope.model import Session

BUNDLED = "demo_session.json.gz"  # recorded by `kernelscope demo -o` on a GPU; the banner names which


def bundled_session() -> tuple[Session, str]:
    """The session recorded on a real GPU that ships with kernelscope, and a label for it."""
    raw = resources.files("kernelscope").joinpath("data", BUNDLED).read_bytes()
    session = Session.from_dict(json.loads(gzip.decompress(raw)))
    device = session.device.name if session.device else "an unknown GPU"
    return session, f"{device} on {session.created_utc[:10]}"
