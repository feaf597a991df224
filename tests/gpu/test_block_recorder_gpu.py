"""Block recorder on a real GPU (pytest -m gpu): every program of the instrumented matmul
records its SM and times once, within the launch the trace pass timed; the overhead is
measured; the session renders and exports without the GPU. First run on an H100
80GB HBM3 on 2026-11-22: both passed (its recorded session is tests/data/session_h100_instrumented.json.gz)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.gpu


def _example():
    sys.path.insert(0, str(ROOT / "tests" / "workloads"))
    import instrumented_example

    return instrumented_example


def test_every_block_recorded_once_within_the_launch(tmp_path):
    import kernelscope
    from kernelscope.analyze.sm_layout import instrumentation_overhead, measured_layout
    from kernelscope.analyze.kernel_table import select_kernels, summarize
    from kernelscope.collect.instrument.sink import attach_pending
    from kernelscope.model import Session
    from kernelscope.render.chrome_trace import session_to_chrome_trace
    from kernelscope.render.show import make_console
    from kernelscope.analyze.sm_layout import sm_layout_data
    from kernelscope.render.sm_layout import SMLayoutPanel

    ex = _example()
    with kernelscope.profile() as s:
        assert ex.main(size=4096, reps=3) == 0
    attach_pending(s)  # a no-op once the trace pass attaches records itself
    assert s.collectors["instrument"].status == "ok", s.collectors["instrument"]
    sm_count = s.device.value("sm_count")
    mine = [x for x in s.launches if x.kernel.endswith(ex.KERNEL)]
    recorded = [x for x in mine if x.block_records is not None]
    assert len(recorded) == 4 and len(mine) == 4 + 5  # warm-up + 3 instrumented; warm-up + 3 plain + 1 check
    for x in recorded:
        r = x.block_records
        assert r.problems == [] and len(r) == x.blocks == 32 * 32
        assert r.nsmid is not None and r.nsmid >= sm_count
        m = measured_layout(x, sm_count)
        assert all(c.ok for c in m.checks), [c for c in m.checks if not c.ok]
        assert len(m.sms) <= sm_count
        offset = s.time_origin_ns + x.start_ns - min(r.start_ns)  # session clock minus %globaltimer at first block
        print(f"launch {x.correlation_id}: span {m.span_ns} ns / trace {x.duration_ns} ns, "
              f"{len(m.sms)} SMs, waves {m.waves}, timer step {m.timer_step_ns} ns, clock offset {offset} ns")
    o = instrumentation_overhead(s, recorded[0])
    assert not o.is_missing, o.missing_reason
    print(f"overhead {o.value:+.2f}% ({o.raw_name})")
    path = s.save(tmp_path / "inst.json.gz")
    back = Session.load(path)
    summary = summarize(back)
    k = select_kernels(summary, ex.KERNEL, 1)[0]
    buf = io.StringIO()
    make_console(width=120, file=buf, color=False).print(
        SMLayoutPanel(sm_layout_data(back, k, summary.sm_count), k.label))
    assert "measured" in buf.getvalue() and "✗" not in buf.getvalue()
    trace = session_to_chrome_trace(back)
    assert sum(1 for e in trace.events if e.get("cat") == "block") == 4 * 32 * 32


def test_cli_run_then_show_and_export(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = tmp_path / "inst.json"
    r = subprocess.run([sys.executable, "-m", "kernelscope", "run", "-o", str(out), "--", sys.executable,
                        str(ROOT / "tests" / "workloads" / "instrumented_example.py")], capture_output=True,
                       text=True, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    from kernelscope.model import Session

    s = Session.load(out)
    assert "instrument" in s.collectors, (
        "the trace pass did not attach block records: collect/trace/recorder.py must call "
        "kernelscope.collect.instrument.sink.attach_pending(session)"
    )
    show = subprocess.run([sys.executable, "-m", "kernelscope", "show", str(out), "--kernel", "matmul_blocks_kernel",
                           "--width", "120", "--no-color"], capture_output=True, text=True, env=env)
    assert show.returncode == 0 and "Block → SM layout · matmul_blocks_kernel · measured" in show.stdout
    trace = tmp_path / "inst.trace.json"
    exp = subprocess.run([sys.executable, "-m", "kernelscope", "export", str(out), "--chrome", str(trace)],
                         capture_output=True, text=True, env=env)
    assert exp.returncode == 0
    assert any(e.get("cat") == "block" for e in json.loads(trace.read_text())["traceEvents"])
