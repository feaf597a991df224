"""Numbers out of range in a PyTorch profiler trace (a time of -1e30 µs, a correlation id of 1e400 or of 5,000
digits, a process group's size of 1e400, a base time past int64): each costs its event (or its part), counted
among the trace's problems; the rest of the trace is imported, its time origin taken from events whose times pass,
and the session saves and loads. Time ~5 s in all; memory ~50 MiB."""
from __future__ import annotations

import copy
import gzip
import json

import pytest

from conftest import DATA
from kernelscope.collect.trace.kineto import parse_trace
from kernelscope.collect.trace.kineto_import import import_traces
from kernelscope.model import Session

_DOC = json.loads(gzip.decompress((DATA / "ranks" / "job2_rank0.pt.trace.json.gz").read_bytes()))
_KERNELS = sum(e.get("cat") == "kernel" for e in _DOC["traceEvents"])


def _first(doc, cat: str) -> dict:
    return next(e for e in doc["traceEvents"] if e.get("cat") == cat)


def _set(path: tuple, value: str):
    """A mutation writing ``value`` (JSON text, e.g. 1e400 or 5,000 digits) at ``path`` of the first event of a
    category (("kernel", "args", "correlation")) or of the document (("", "baseTimeNanoseconds"))."""
    def mutate(doc) -> str:
        where = _first(doc, path[0]) if path[0] else doc
        for k in path[1:-1]:
            where = where[k]
        where[path[-1]] = "@@here@@"
        return json.dumps(doc).replace('"@@here@@"', value)
    return mutate


CASES = {  # what: (mutation, kernels kept, problems, same time origin as the clean trace)
    "cpu_op ts -1e30": (_set(("cpu_op", "ts"), "-1e30"), _KERNELS, [], True),
    "kernel ts -1e30": (_set(("kernel", "ts"), "-1e30"), _KERNELS - 1, ["1 malformed kernel event(s) left out"],
                        True),
    "kernel correlation 1e400": (_set(("kernel", "args", "correlation"), "1e400"), _KERNELS - 1,
                                 ["1 malformed kernel event(s) left out"], True),
    "kernel correlation of 5,000 digits": (_set(("kernel", "args", "correlation"), "9" * 5000), _KERNELS - 1,
                                           ["1 malformed kernel event(s) left out"], True),
    "pg_size 1e400": (lambda doc: json.dumps(doc).replace('"pg_size": ', '"pg_size": 1e400, "was": ', 1), _KERNELS,
                      [], True),
    "baseTimeNanoseconds 1e300": (_set(("", "baseTimeNanoseconds"), "1e300"), _KERNELS,
                                  ["1 malformed baseTimeNanoseconds event(s) left out"], False),
}


@pytest.mark.parametrize("what", sorted(CASES))
def test_one_number_out_of_range_costs_its_event_not_the_trace(what, tmp_path):
    mutate, kernels, problems, same_origin = CASES[what]
    clean = tmp_path / "clean.pt.trace.json"
    clean.write_text(json.dumps(_DOC))
    text = mutate(copy.deepcopy(_DOC))
    assert text != json.dumps(_DOC)
    p = tmp_path / "bad.pt.trace.json"
    p.write_text(text)
    session = import_traces([p]).joined.session
    origin = import_traces([clean]).joined.session.time_origin_ns
    status = session.collectors["trace"]
    assert len(session.launch_table()) == kernels
    assert [r for r in (status.reason or "").removeprefix("rank 0: ").split("; ") if r] == problems
    assert (session.time_origin_ns == origin) == same_origin and abs(session.time_origin_ns) < 2 ** 63
    if what == "pg_size 1e400":
        assert [g for g in session.ranks[0].process_groups if "was" in g] == []  # that group left out
    session.save(tmp_path / "s.json")
    assert len(Session.load(tmp_path / "s.json").launch_table()) == kernels
    if "5,000" not in what:  # the whole-document parser agrees (json.loads reads 1e400 as infinity)
        whole = parse_trace(json.loads(text))
        assert len(whole.table) == kernels and whole.problems == problems
