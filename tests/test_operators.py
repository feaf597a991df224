"""Operators behind kernels and host syncs, read from traces users record (tests/data/user_traces, recorded on an
H200 by benchmarks/user_traces/record.py with record_shapes=True and with_stack=True)."""
from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from kernelscope.collect.trace.kineto import parse_trace
from kernelscope.collect.trace.kineto_import import import_traces
from kernelscope.model import Session

DATA = Path(__file__).parent / "data"
USER = DATA / "user_traces"


def _session(name: str) -> Session:
    return import_traces([USER / f"{name}.pt.trace.json.gz"]).joined.session


def test_each_kernel_of_hand_written_attention_names_its_op_shapes_module_and_python_line():
    s = _session("manual_attention_defect")
    table, ops = s.launch_table(), s.operators
    assert ops.shapes and ops.stacks
    linked = [ops.of_launch(c) for c in table.correlation_id]
    assert all(op is not None for op in linked)  # every kernel has its operator
    softmax = [op for op in linked if op.name == "aten::_softmax"]
    assert softmax and softmax[0].outer == "aten::softmax"
    assert softmax[0].input_dims[0] == (4, 16, 2048, 2048) and softmax[0].input_types[0] == "c10::Half"
    assert softmax[0].module.startswith("ManualAttention") and softmax[0].python_line == "record.py:173 forward"
    assert softmax[0].shapes_text.startswith("f16[4,16,2048,2048]")
    assert {op.name for op in linked} >= {"aten::addmm", "aten::bmm", "aten::masked_fill_", "aten::_softmax"}


def test_a_sync_from_item_names_the_op_and_the_users_line():
    s = _session("item_check_per_layer_defect")
    streams = [h for h in s.host_syncs if h.kind == "stream"]
    assert len(streams) == 72  # 24 layers x 3 steps
    op = s.operators.of_sync(streams[0].cpu_start_ns)
    assert (op.name, op.outer, op.python_line) == ("aten::_local_scalar_dense", "aten::item", "record.py:62 step")
    assert op.calls == 72


def test_torch_cuda_synchronize_has_no_aten_op_and_is_named_by_its_python_call():
    s = _session("sync_per_layer_defect")
    names = {s.operators.of_sync(h.cpu_start_ns).name for h in s.host_syncs}
    assert names == {"torch.cuda.synchronize"}


def test_operators_survive_the_session_file_and_older_files_load_without_them(tmp_path):
    s = _session("tolist_in_loop_defect")
    s.save(tmp_path / "s.json")
    back = Session.load(tmp_path / "s.json")
    assert back.operators == s.operators and back.host_syncs == s.host_syncs
    doc = json.loads((tmp_path / "s.json").read_text())
    doc.pop("operators")
    (tmp_path / "old.json").write_text(json.dumps(doc))
    assert Session.load(tmp_path / "old.json").operators is None
    doc["operators"] = {"ops": [{"name": "aten::mm"}], "launch_correlation": [1, 2], "launch_op": [0, 5]}
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    bad = Session.load(tmp_path / "bad.json")
    assert bad.operators is None and any("operators" in x for x in bad.skipped_on_load)


def test_the_whole_document_parser_links_the_same_operators():
    path = USER / "hf_llama_eager_defect.pt.trace.json.gz"
    whole = parse_trace(json.loads(gzip.open(path).read()))
    assert whole.operators == _session("hf_llama_eager_defect").operators


def test_import_says_what_a_trace_without_shapes_and_stacks_is_missing():
    notes = import_traces([DATA / "trace_h100_mixed.json.gz"]).notes
    assert notes == ["the trace records operators but not input shapes (record_shapes=True) and Python stacks "
                     "(with_stack=True): kernels are shown without them"]
    assert not import_traces([USER / "sync_per_layer_fixed.pt.trace.json.gz"]).notes


def test_show_json_and_the_frames_carry_each_operator_with_its_inputs_line_and_rate(tmp_path):
    pytest.importorskip("pandas")
    from kernelscope.analyze.report import build_report
    from kernelscope.render.frames import launches_df, operators_df
    from kernelscope.render.json_view import show_json

    s = _session("manual_attention_defect")
    report = build_report(s)
    rows = show_json(report)["operators"]["rows"]
    top = rows[0]
    assert (top["operator"], top["inputs"], top["python_line"]) == (
        "aten::_softmax", "f16[4,16,2048,2048]", "record.py:173 forward")
    # softmax: its input read and its output written once, per call, over the kernels' time
    assert top["bytes"] == 2 * 4 * 16 * 2048 * 2048 * 2 * top["calls"]
    assert top["bytes_per_s"]["value"] == pytest.approx(top["bytes"] / (top["kernel_ns"] * 1e-9))
    assert "no measured ceilings" in top["pct_of_bandwidth_ceiling"]["missing_reason"]
    bmm = next(r for r in rows if r["operator"] == "aten::bmm" and r["inputs"].startswith("f16[64,2048,64]"))
    assert bmm["flops"] == 2 * 64 * 2048 * 64 * 2048 * bmm["calls"]
    df = operators_df(report)
    assert list(df["operator"][:1]) == ["aten::_softmax"] and df.attrs["units"]["flop_per_s"] == "FLOP/s"
    launches = launches_df(s)
    assert set(launches["python_line"].dropna()) >= {"record.py:173 forward"}


def test_show_draws_the_operators_table_only_for_a_session_with_operators():
    from rich.console import Console

    from kernelscope.analyze.report import build_report
    from kernelscope.render.show import ShowView

    from kernelscope.render.text import display_copy

    def text(s):
        c = Console(width=140, record=True, file=io.StringIO())
        c.print(ShowView(display_copy(build_report(s))))
        return c.export_text()

    drawn = text(_session("manual_attention_defect"))
    assert "Operators by kernel time" in drawn and "record.py:173" in drawn and "f16[4,16,2048,2048]" in drawn
    assert "attention at record.py:173 forward computed as separate ops" in drawn
    assert "launched by aten::_softmax (aten::softmax) f16[4,16,2048,2048] at record.py:173 forward · 6 launches" \
        in drawn  # the kernel's panel
    bare = text(import_traces([DATA / "trace_h100_mixed.json.gz"]).joined.session)  # ops, no shapes or stacks
    assert "The trace did not record input shapes (record_shapes=True) or Python stacks" in bare
    assert "Operators by kernel time" not in text(Session.load(DATA / "session_h100_mixed.json.gz"))


def test_the_trace_pass_records_shapes_and_stacks_unless_told_less(monkeypatch):
    from kernelscope.collect.trace.recorder import OPERATORS_ENV, operator_options

    monkeypatch.delenv(OPERATORS_ENV, raising=False)
    assert operator_options() == {"record_shapes": True, "with_stack": True}
    monkeypatch.setenv(OPERATORS_ENV, "shapes")
    assert operator_options() == {"record_shapes": True}
    monkeypatch.setenv(OPERATORS_ENV, "off")
    assert operator_options() == {}


def test_run_refuses_an_unknown_operators_level_in_one_sentence(tmp_path):
    from conftest import one_sentence_error, run_cli

    assert "--operators takes stacks, shapes, off" in one_sentence_error(
        run_cli("run", "--operators", "all", "-o", str(tmp_path / "x.json"), "--", "python", "-c", "1"))
    assert not (tmp_path / "x.json").exists()


def test_malformed_op_events_are_passed_over_and_the_rest_still_link():
    from kernelscope.collect.trace.kineto_ops import OperatorEvents

    ev = OperatorEvents()
    good = {"cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
            "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}}
    for bad in ({"cat": "cpu_op", "name": "aten::x", "ts": 1e300, "dur": 1.0},  # past int64
                {"cat": "cpu_op", "name": "aten::y", "ts": 12.0, "dur": -3.0},  # negative duration
                {"cat": "cpu_op", "name": 7, "ts": 11.0, "dur": 1.0},  # a name that is not text
                {"cat": "cpu_op", "name": "aten::z", "ts": "soon"}, good):
        ev.add(bad)
    ops = ev.operators([(5, (1, 1, 12_000))], [])
    op = ops.of_launch(5)
    assert (op.name, op.input_dims, op.calls) == ("aten::mm", ((2, 3), (3, 4)), 1) and len(ops.ops) == 1


def test_the_html_report_lists_the_operators_with_their_lines_escaped():
    from kernelscope.analyze.report import build_report
    from kernelscope.render.html import render_html

    page = render_html(build_report(_session("manual_attention_defect")))
    assert 'id="operators"' in page and "record.py:173 forward" in page and "f16[4,16,2048,2048]" in page
    assert "Model FLOPs per step 279 GFLOP" in page
    assert 'id="operators"' not in render_html(build_report(Session.load(DATA / "session_h100_mixed.json.gz")))


def test_model_flops_per_step_count_the_window_and_say_why_utilisation_is_missing():
    from kernelscope.analyze.report import build_report
    from kernelscope.render.json_view import show_json

    m = show_json(build_report(_session("manual_attention_defect")))["operators"]["model_flops"]
    b, h, s, d, dim = 4, 16, 2048, 64, 1024
    matmuls = 2 * (2 * b * s * dim * 3 * dim + 2 * b * s * dim * dim + 2 * (2 * b * h * s * s * d))  # 2 layers
    scores = b * h * s * s
    assert matmuls <= m["flops_per_step"]["value"] <= matmuls + 2 * 8 * scores  # + the ops on the scores
    assert m["counted_launches"] > 0 and "no measured ceilings" in m["utilisation_pct"]["missing_reason"]


def test_the_users_frame_skips_torch_libraries_builtins_and_kernelscopes_own():
    from kernelscope.collect.trace.kineto_ops import is_user_frame

    assert is_user_frame("train.py(12): step") and is_user_frame("models/llama.py(88): forward")
    for frame in ("torch/nn/modules/module.py(1775): _call_impl", "<built-in method item of Tensor object>",
                  "triton/runtime/jit.py(700): run", "kernelscope/collect/trace/recorder.py(99): _profiler_step",
                  "runpy.py(88): _run_code", "/usr/lib/python3.12/site-packages/x/y.py(3): f", "nn.Module: Linear_0"):
        assert not is_user_frame(frame), frame


def test_a_graph_replay_recorded_without_stacks_is_still_known_as_a_graph(tmp_path):
    """Shapes only (no python_function events): the graph's kernels have no op around their launch call, and are
    known by the cudaGraphLaunch call that made them; launch-bound stays silent."""
    from kernelscope.analyze.report import build_report

    doc = json.loads(gzip.open(USER / "graphed_decode_control.pt.trace.json.gz").read())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "python_function"]
    path = tmp_path / "graph.pt.trace.json"
    path.write_text(json.dumps(doc))
    s = import_traces([path]).joined.session
    names = {s.operators.of_launch(c).name for c in s.launch_table().correlation_id if s.operators.of_launch(c)}
    assert "cudaGraphLaunch" in names and not s.operators.stacks
    assert "launch-bound" not in {f.rule for f in build_report(s).verdict.findings}


def test_each_kind_of_sync_is_named_in_the_users_words():
    from kernelscope.analyze.operator_rules import sync_cause
    from kernelscope.model.operators import Operator

    cases = {("aten::_local_scalar_dense", "aten::item"): ".item()",
             ("aten::_local_scalar_dense", "aten::is_nonzero"): "a tensor used as a Python bool (if t:, while t:)",
             ("aten::nonzero", "aten::index"): "boolean-mask indexing x[mask] (nonzero)",
             ("aten::nonzero", "aten::masked_select"): "torch.masked_select (nonzero)",
             ("aten::_unique2", "aten::unique"): "torch.unique",
             ("aten::copy_", "aten::to"): "a device-to-host copy: .cpu(), .tolist(), .numpy() or .to('cpu')",
             ("torch.cuda.streams.synchronize", None): "Stream.synchronize() / Event.synchronize()",
             ("aten::weird_op", None): "aten::weird_op"}
    for (name, outer), said in cases.items():
        assert sync_cause(Operator(name, outer)) == said
