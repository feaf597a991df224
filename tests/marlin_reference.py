"""Marlin reference vectors made by IST-DASLab/marlin (tests/data/marlin_reference, stored xz-compressed)."""
from __future__ import annotations

import io
import json
import lzma

from conftest import DATA

REFERENCE_DIR = DATA / "marlin_reference"
CASES: list[dict] = json.loads((REFERENCE_DIR / "cases.json").read_text())


def case_id(case: dict) -> str:
    return case["file"].removesuffix(".npz.xz")


def load_arrays(case: dict) -> dict:
    """The case's arrays as numpy arrays, keyed by the names in the README."""
    import numpy as np

    raw = lzma.decompress((REFERENCE_DIR / case["file"]).read_bytes())
    with np.load(io.BytesIO(raw)) as data:
        return {name: data[name].copy() for name in data.files}


def find_case(k: int, n: int, groupsize: int) -> dict:
    return next(c for c in CASES if (c["k"], c["n"], c["groupsize"]) == (k, n, groupsize))

