"""Operators behind kernels and host syncs, read from traces users record (tests/data/user_traces, recorded on an
H200 by benchmarks/user_traces/record.py with record_shapes=True and with_stack=True)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

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
    assert any("missing input shapes (record_shapes=True) and Python stacks (with_stack=True)" in n for n in notes)
    assert not import_traces([USER / "sync_per_layer_fixed.pt.trace.json.gz"]).notes
