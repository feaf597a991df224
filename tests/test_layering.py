"""The import rules of DESIGN.md, read from the source with ast (no module is imported):

- the tool core (model/, collect/, analyze/, render/) never imports the bundled kernels (kernels/) or
  benchmarks (bench/);
- kernels/ may import model/, collect/ and analyze/ (and itself), never cli/, render/ or bench/;
- bench/ may import anything but cli/; model/ imports no other layer;
- no import cycle between kernelscope modules (an import of a module's own parent package does not
  count: Python runs a package before its modules anyway).

Imports inside functions and under TYPE_CHECKING count too: a lazy import is still a dependency.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "kernelscope"

# Cycles another change is removing (#21 parts 1-2: cli/calibrate stops importing cli/common's renderer).
# Listed here so this test guards every other module meanwhile; delete the entry once it is gone.
PENDING_CYCLES = [{"kernelscope.cli.calibrate", "kernelscope.cli.common"}]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """The kernelscope modules ``name`` imports, anywhere in the file (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in MODULES)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


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


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan), edges to ancestors dropped."""
    edges = {a: {b for b in bs if not a.startswith(b + ".")} for a, bs in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges)))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_the_cycle_finder_finds_a_planted_cycle():
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "p.q": {"p"}, "p": {"p.q"}}
    assert _cycles(planted) == [{"a", "b", "c"}]


def test_no_import_cycles_between_kernelscope_modules():
    cycles = [sorted(c) for c in _cycles(GRAPH) if c not in PENDING_CYCLES]
    assert cycles == []
