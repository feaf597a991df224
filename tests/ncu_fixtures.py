"""Recorded Nsight Compute reports for tests (stored xz-compressed)."""
from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from conftest import DATA


def report_file(name: str, tmp_path: Path) -> Path:
    """Decompress tests/data/NAME.ncu-rep.xz into tmp_path; skip without the ncu_report reader."""
    pytest.importorskip("ncu_report", reason="the ncu-report package reads .ncu-rep files (pip install ncu-report)")
    out = tmp_path / f"{name}.ncu-rep"
    out.write_bytes(lzma.decompress((DATA / f"{name}.ncu-rep.xz").read_bytes()))
    return out
