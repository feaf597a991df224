"""export --chrome of many block records: each SM's blocks get slot tracks in n log n, however many overlap."""
from __future__ import annotations

import io
import json
import random
from collections import Counter
import resource
import subprocess
import sys

import pytest

from conftest import DATA, ROOT
from kernelscope.model import BlockRecords, Session
from kernelscope.render.chrome_trace import assign_lanes, session_to_chrome_trace


def _with_blocks(rows: list[tuple[int, int, int, int]]) -> tuple[Session, int]:
    """The sweep fixture with (block id, SM, start, end) records on its 128-block launch, at a measured offset."""
    s = Session.load(DATA / "session_h100_sweep.json.gz")
    i, x = next((i, x) for i, x in enumerate(s.launches) if x.grid == (128, 1, 1))
    b, sm, st, en = (list(c) for c in zip(*rows))
    x.block_records = BlockRecords(grid=(8, 4, 4), block_id=b, smid=sm, start_ns=st, end_ns=en, clock_offset_ns=7)
    return s, i


def _blocks_and_tracks(trace) -> tuple[list[dict], dict[int, str]]:
    events = trace.events
    blocks = [e for e in events if e.get("cat") == "block"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == blocks[0]["pid"]}
    return blocks, names


def test_each_sms_blocks_take_the_lanes_assign_lanes_gives_and_the_text_is_json_dumps():
    rnd = random.Random(46)
    rows = [(rnd.randrange(128), rnd.randrange(3), s, s + rnd.choice([0, 1, 5, 50, 400]))
            for s in (rnd.randint(1, 500) for _ in range(400))]
    s, i = _with_blocks(rows)
    trace = session_to_chrome_trace(s)
    blocks, names = _blocks_and_tracks(trace)
    assert len(blocks) == len(rows)
    for sm in range(3):
        mine = [e for e in blocks if e["args"]["smid"] == sm]
        spans = [(e["args"]["start_ns_raw"], e["args"]["end_ns_raw"]) for e in mine]
        assert [e["args"]["slot"] for e in mine] == assign_lanes(spans, nest=False)
        assert all(names[e["tid"]] == f"SM {sm} · slot {e['args']['slot']}" for e in mine)
    e = blocks[0]
    assert e["ts"] == (e["args"]["start_ns_raw"] + 7) / 1000 and e["args"]["block_xyz"] == \
        [e["args"]["block_id"] % 8, e["args"]["block_id"] // 8 % 4, e["args"]["block_id"] // 32]
    buf = io.BytesIO()
    trace.write_json(buf)  # the rows written from columns: the same text as the event dicts
    assert buf.getvalue().decode() == json.dumps(trace.to_dict())


def test_an_sm_with_more_than_1000_blocks_at_once_shares_no_track_with_the_next_sm():
    rows = [(k % 128, 0, 100 + k, 1_000_000) for k in range(1001)] + [(5, 1, 200, 300)]
    trace = session_to_chrome_trace(_with_blocks(rows)[0])
    blocks, names = _blocks_and_tracks(trace)
    tracks = Counter((e["args"]["smid"], e["args"]["slot"]) for e in blocks)
    assert len(tracks) == 1002  # 1,001 slots on SM 0 and one on SM 1
    tid_of = {(e["args"]["smid"], e["args"]["slot"]): e["tid"] for e in blocks}
    assert len(set(tid_of.values())) == 1002  # SM 0 slot 1000 and SM 1 slot 0 were both tid 1000
    assert all(names[t] == f"SM {sm} · slot {lane}" for (sm, lane), t in tid_of.items())


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
