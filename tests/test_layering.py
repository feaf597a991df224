"""The import rules of DESIGN.md, read from the source with ast (no module is imported):

- the tool core (model/, collect/, analyze/, render/) never imports the bundled kernels (kernels/) or
  benchmarks (bench/);
- kernels/ may import model/, collect/ and analyze/ (and itself), never cli/, render/ or bench/;
- bench/ may import anything but cli/; model/ imports no other layer;
- (no import cycle between kernelscope modules: tests/test_architecture.py).

Imports inside functions and under TYPE_CHECKING count too: a lazy import is still a dependency.
"""
from __future__ import annotations


from test_architecture import graph_cache as GRAPH  # one import reader for both files


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _violations(layers: set[str], allowed: set[str]) -> list[str]:
    return [f"{a} imports {b}" for a, targets in sorted(GRAPH.items()) if _layer(a) in layers
            for b in sorted(targets) if _layer(b) not in allowed | {""}]


def test_the_graph_sees_the_modules_and_their_imports():
    """The checks below can fail: the reader finds known edges, lazy and relative ones included."""
    assert "kernelscope.kernels.marlin.plan" in GRAPH["kernelscope.kernels.marlin.phases"]  # relative import
    assert "kernelscope.collect.driver" in GRAPH["kernelscope.cli.bench.common"]  # inside a function
    assert "kernelscope.cli.bench.attention" in GRAPH["kernelscope.cli.bench"]  # from a package import a module


def test_the_tool_core_never_imports_the_bundled_kernels_or_benchmarks():
    core = {"model", "collect", "analyze", "render"}
    assert _violations(core, core) == []


def test_kernels_import_only_model_collect_and_analyze():
    assert _violations({"kernels"}, {"kernels", "model", "collect", "analyze"}) == []


def test_bench_never_imports_the_cli_and_model_imports_no_other_layer():
    assert _violations({"bench"}, {"bench", "kernels", "model", "collect", "analyze", "render"}) == []
    assert _violations({"model"}, {"model"}) == []
