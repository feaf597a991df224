"""export --chrome of many block records: each SM's blocks get slot tracks in n log n, however many overlap."""
from __future__ import annotations

import json
from collections import Counter
import random
import resource
import subprocess
import sys

import pytest

from conftest import DATA, ROOT
from kernelscope.model import BlockRecords, Session
from kernelscope.render.chrome_trace import _block_slots, assign_lanes


def test_block_slots_are_the_lanes_assign_lanes_gives():
    rnd = random.Random(46)
    for _ in range(300):
        n = rnd.randint(1, 60)
        rows = [(k, 0, s, s + rnd.choice([0, 1, 5, 50, 400])) for k, s in
                enumerate(sorted(rnd.randint(1, 500) for _ in range(n)))]
        rnd.shuffle(rows)
        slot = [0] * n
        _block_slots(rows, list(range(n)), slot)
        assert slot == assign_lanes([(r[2], r[3]) for r in rows], nest=False)


def session_with_block_rows(n: int, path) -> None:
    """The recorded pipeline session, its instrumented launch holding ``n`` rows of a 4-block grid, all on SM 0
    and all running at once (as a damaged or hostile buffer can say)."""
    s = Session.load(DATA / "cuda_scopes" / "session_h100_pipeline.json.gz")
    t = s.launch_table()
    i, x = next(iter(t.detailed(having="block_records")))
    t.details[i].block_records = BlockRecords(
        grid=(4, 1, 1), block_id=[k % 4 for k in range(n)], smid=[0] * n,
        start_ns=[1_000_000 + k for k in range(n)], end_ns=[2_000_000_000] * n, source=x.block_records.source,
        buffer_rows=n)
    t._detailed.clear()
    s.set_launch_table(t)
    s.save(path)


def _limit_cpu() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (300, 300))


@pytest.mark.slow
def test_export_of_100k_overlapping_block_rows_finishes(tmp_path):
    """100,000 rows on one SM, all at once: a slot each. The first-free-lane scan was quadratic (20,000 rows:
    76 s; 100,000: about half an hour of CPU); with heaps about 15 s and 400 MB on the 2-core dev box. The
    child gets 300 s of CPU (a bound on work, not a wall-clock limit), which the quadratic scan exceeds."""
    path = tmp_path / "s.json"
    session_with_block_rows(100_000, path)
    r = subprocess.run([sys.executable, "-m", "kernelscope", "export", "--chrome", str(path), "-o",
                        str(tmp_path / "t.json")], capture_output=True, text=True, preexec_fn=_limit_cpu,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-500:]
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    pid = Counter(e["pid"] for e in events if e.get("cat") == "block").most_common(1)[0][0]
    blocks = [e for e in events if e.get("cat") == "block" and e["pid"] == pid]
    assert len(blocks) == 100_000 and len({e["tid"] for e in blocks}) == 100_000  # one slot each
