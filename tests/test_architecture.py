"""The layout issue #21 asked for, held by the imports themselves (read with ast, nothing imported):
no two kernelscope modules import each other (directly or round a longer loop, function-level imports
included), and no module under render/ imports an analyze/ function: panels draw data that
analyze.report.build_report computed (importing analyze's dataclasses, constants and formulas is fine)."""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from conftest import ROOT

PKG = ROOT / "src" / "kernelscope"

# render/ modules that still call an analyze function, and why (keep this short; each is a debt)
RENDER_ANALYZE_ALLOWED = {
    ("kernelscope.render.top_view", "decode_throttle_reasons"): "top's live readings are not a session report",
    ("kernelscope.render.top_view", "limiting_reasons"): "top's live readings are not a session report",
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(mod: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    pkg = mod if MODULES[mod].name == "__init__.py" else mod.rsplit(".", 1)[0]
    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(mod: str) -> list[tuple[str, str | None]]:
    """(module, name or None) for every import anywhere in the module: top level, in functions, under
    TYPE_CHECKING. ``from a import b`` where a.b is a module counts as importing a.b."""
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(MODULES[mod].read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(mod, node)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub, None) if sub in MODULES else (base, a.name))
    return out


def graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _ in imports_of(m):
            if target in MODULES and target != m:
                g[m].add(target)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted: every import loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def _package_links(m: str) -> set[str]:
    """A package's __init__ and the modules it re-exports are one thing: an edge from a package to its own
    submodule is how a package is built, not a loop between two modules."""
    return {t for t in graph_cache[m] if t.startswith(m + ".")} if MODULES[m].name == "__init__.py" else set()


graph_cache = graph()


def test_the_cycle_detector_finds_a_planted_loop():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_function_level_and_relative_imports():
    edges = {t for t, _ in imports_of("kernelscope.cli.common")}
    assert "kernelscope.analyze.report" in edges  # imported inside report(), not at the top


KNOWN_CYCLES: list[list[str]] = []  # none left: a loop that must stay for a while is listed here with why


def test_no_two_kernelscope_modules_import_each_other():
    g = {m: targets - _package_links(m) for m, targets in graph_cache.items()}
    found = cycles(g)
    new = [c for c in found if c not in KNOWN_CYCLES]
    gone = [c for c in KNOWN_CYCLES if c not in found]
    assert new == [], f"modules import each other: {new}"
    assert gone == [], f"these loops are broken now: delete them from KNOWN_CYCLES: {gone}"


def test_cli_common_and_cli_calibrate_no_longer_import_each_other():
    assert "kernelscope.cli.calibrate" not in graph_cache["kernelscope.cli.common"]


def _is_function(module: str, name: str) -> bool:
    obj = getattr(importlib.import_module(module), name, None)
    return inspect.isfunction(obj)


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if m.startswith("kernelscope.render.")))
def test_render_modules_import_no_analyze_function(mod):
    calls = [(target, name) for target, name in imports_of(mod)
             if target.startswith("kernelscope.analyze") and name is not None and _is_function(target, name)
             and (mod, name) not in RENDER_ANALYZE_ALLOWED]
    whole = [target for target, name in imports_of(mod) if target.startswith("kernelscope.analyze") and name is None]
    assert calls == [] and whole == [], f"{mod} computes with analyze/: {calls or whole}"


def test_the_render_check_would_catch_a_panel_that_computes(tmp_path):
    """The check reads imports the way a regression would write them."""
    src = "from kernelscope.analyze.counters import counter_launches, SECTOR_BYTES, CounterViews\n"
    names = [a.name for node in ast.walk(ast.parse(src)) if isinstance(node, ast.ImportFrom) for a in node.names]
    flagged = [n for n in names if _is_function("kernelscope.analyze.counters", n)]
    assert flagged == ["counter_launches"]


def test_no_cli_module_builds_rich_tables():
    for mod in (m for m in MODULES if m.startswith("kernelscope.cli.") and not m.startswith("kernelscope.cli.bench")):
        rich = [t for t, _ in imports_of(mod) if t == "rich" or t.startswith("rich.")]
        assert rich == [], f"{mod} imports {rich}: drawing belongs in render/"


def test_no_renderer_method_takes_a_session():
    """Renderers get the Report and its views; making strings plain for the terminal happens before the report."""
    from kernelscope.render.renderers import RENDERERS, Renderer

    takes = [f"{cls.__name__}.{name}" for cls in (Renderer, *RENDERERS.values())
             for name, fn in inspect.getmembers(cls, inspect.isfunction)
             if "Session" in " ".join(map(str, fn.__annotations__.values()))]
    assert takes == []
