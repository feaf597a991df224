"""`kernelscope export` of sessions with operators (user traces recorded on an H200 with record_shapes and
with_stack, then imported): each kernel event names the aten op, shapes and Python line behind it, host syncs are
drawn on a host track with theirs, and what the session does not keep (operator spans, launch calls, flows) is said
in otherData.host, never drawn at a made-up time."""
from __future__ import annotations

import io
import json

from conftest import DATA
from kernelscope.collect.trace.kineto_import import import_traces
from kernelscope.model import Session
from kernelscope.render.chrome_trace import PID_HOST, TID_HOST_SYNCS, session_to_chrome_trace

USER = DATA / "user_traces"


def _imported(name: str) -> Session:
    return import_traces([USER / f"{name}.pt.trace.json.gz"]).joined.session


def _doc(s: Session) -> dict:
    buf = io.BytesIO()
    trace = session_to_chrome_trace(s)
    trace.write_json(buf)
    text = buf.getvalue().decode()
    assert text == json.dumps(trace.to_dict())  # rows written from columns: the same text as the event dicts
    return json.loads(text)


def test_each_kernel_event_names_the_operator_shapes_and_python_line_that_launched_it():
    s = _imported("manual_attention_defect")
    doc = _doc(s)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels
    for e in kernels:
        op = s.operators.of_launch(e["args"]["correlation_id"])
        assert e["args"]["operator"] == op.name and e["args"]["python_line"] == op.python_line
        assert e["args"].get("input_shapes") == (op.shapes_text or None)
    softmax = next(e for e in kernels if e["args"]["operator"] == "aten::_softmax")
    assert softmax["args"]["outer_operator"] == "aten::softmax"
    assert softmax["args"]["input_shapes"].startswith("f16[4,16,2048,2048]")
    assert softmax["args"]["python_line"] == "record.py:173 forward"
    host = doc["otherData"]["host"]
    assert host["operators"].startswith(f"{len(kernels)} of {len(kernels)} kernel events name their aten operator")
    assert "no flow" in host["launch_flows"]
    assert not [e for e in doc["traceEvents"] if e["ph"] in ("s", "f", "t")]  # no launch time: no flow drawn


def test_host_syncs_are_drawn_on_a_host_track_with_the_op_and_line_behind_them():
    s = _imported("item_check_per_layer_defect")
    doc = _doc(s)
    syncs = [e for e in doc["traceEvents"] if e.get("cat") == "host-sync"]
    assert len(syncs) == len(s.host_syncs) and {(e["pid"], e["tid"]) for e in syncs} == {(PID_HOST, TID_HOST_SYNCS)}
    assert [(round(e["ts"] * 1000), round(e["dur"] * 1000)) for e in syncs] == \
        [(h.cpu_start_ns, h.cpu_duration_ns) for h in s.host_syncs]
    item = [e for e in syncs if e["args"]["kind"] == "stream"]
    assert len(item) == 72 and all(e["args"]["operator"] == "aten::_local_scalar_dense" and
                                   e["args"]["outer_operator"] == "aten::item" and
                                   e["args"]["python_line"] == "record.py:62 step" for e in item)
    assert doc["otherData"]["host"]["runtime_calls"].startswith(f"{len(s.host_syncs)} host sync(s) drawn")


def test_a_session_without_operators_says_so_and_draws_none():
    s = Session.load(DATA / "session_h100_mixed.json.gz")
    assert s.operators is None and not s.host_syncs
    doc = _doc(s)
    assert doc["otherData"]["host"]["operators"].startswith("none in the session")
    assert doc["otherData"]["host"]["runtime_calls"].startswith("no host sync in the session")
    assert not [e for e in doc["traceEvents"] if "operator" in e.get("args", {}) or e.get("cat") == "host-sync"]


def test_a_trace_without_shapes_and_stacks_says_what_it_did_not_record():
    s = import_traces([DATA / "trace_h100_mixed.json.gz"]).joined.session
    doc = _doc(s)
    assert doc["otherData"]["host"]["operators"].endswith(
        "the trace did not record input shapes (record_shapes=True) and Python stacks (with_stack=True)")
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and "operator" in e["args"]]
    assert kernels and not any("input_shapes" in e["args"] or "python_line" in e["args"] for e in kernels)
