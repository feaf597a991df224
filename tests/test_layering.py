"""The layering of docs/design.md, read from the source with ast (no module is imported). Each rule and each
exception on that page is one check here:

- the tool core: model/ and analyze/ import only model/ and the standard library; collect/ imports model/ and the
  vendor libraries; render/ imports model/, analyze/ and Rich, matplotlib, pandas; none imports kernels/, bench/ or
  cli/; two exceptions, each one import of plain data (:data:`CORE_EXCEPTIONS`), which must still exist;
- cli/ imports Rich only in cli/bench/ and torch only in cli/tune.py;
- kernels/ imports kernels/, model/, collect/ and analyze/, and torch and triton; the one exception is the Marlin
  demo's panels (kernels/marlin/panels.py, :data:`MARLIN_PANELS`), which draw with Rich and render/'s helpers and
  import no torch (docs/decisions/0009-marlin-demo-panels.md);
- Rich only in render/, cli/bench/ and the Marlin demo's panels; matplotlib only in render/ and bench/plots/;
- bench/ imports anything but cli/, and matplotlib only in bench/plots/;
- the top-level modules import only the core and no third-party library; __main__ imports only cli/;
- no module imports another module's private name (``from kernelscope.x import _name``), except the few listed
  in :data:`PENDING_PRIVATE_IMPORTS`, each in a module whose owner is changing it, which must still exist;
- (no import cycle between kernelscope modules, no analyze function called from render/:
  tests/test_architecture.py).

Imports inside functions and under TYPE_CHECKING count too: a lazy import is still a dependency.
"""
from __future__ import annotations

import sys

from test_architecture import MODULES, imports_of
from test_architecture import graph_cache as GRAPH  # one import reader for both files

CORE = {"model", "collect", "analyze", "render"}
VENDOR = {"torch", "triton", "pynvml", "ncu_report", "numpy", "cupy"}  # cupy: CUDA C++ scope buffers
DRAWING = {"rich", "matplotlib", "pandas"}
# (importer, imported) across core layers that docs/design.md names, and why
CORE_EXCEPTIONS = {
    ("kernelscope.collect.calibrate.lookup", "kernelscope.analyze.roofline"):
        "a cached calibration becomes analyze.roofline.Ceilings, the roofline analysis's input type",
    ("kernelscope.render.doctor", "kernelscope.collect.doctor"):
        "the doctor panel draws collect.doctor.Check records and their status constants",
}

# (importer, module, private name) still imported across modules: each is to become a public name, and leaves this
# list when it does (an entry that no longer exists fails, so the list never allows more than the code has).
PENDING_PRIVATE_IMPORTS: set[tuple[str, str, str]] = set()
# The Marlin demo's panels: the one module outside render/ and cli/bench/ that draws with Rich, and the plain data
# it draws (docs/decisions/0009-marlin-demo-panels.md).
MARLIN_PANELS = "kernelscope.kernels.marlin.panels"
MARLIN_PANEL_DATA = "kernelscope.kernels.marlin.panel_data"


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _is_top_level(module: str) -> bool:
    """kernelscope/__init__.py and the modules beside it, but not __main__ (the entry point, which runs cli/)."""
    return module == "kernelscope" or (module.count(".") == 1 and MODULES[module].name != "__init__.py"
                                        and module != "kernelscope.__main__")


def _violations(layers: set[str], allowed: set[str]) -> list[str]:
    """Imports of other kernelscope layers from ``layers`` outside ``allowed`` (a package's own __init__, layer "",
    is allowed: it re-exports), less the named exceptions."""
    return [f"{a} imports {b}" for a, targets in sorted(GRAPH.items()) if _layer(a) in layers
            for b in sorted(targets) if _layer(b) not in allowed | {""} and (a, b) not in CORE_EXCEPTIONS]


def _third_party(module: str) -> set[str]:
    tops = {target.split(".")[0] for target, _ in imports_of(module)}
    return {t for t in tops if t not in sys.stdlib_module_names and t not in ("kernelscope", "__future__")}


def _third_party_by_module(layer: str) -> dict[str, set[str]]:
    return {m: tp for m in sorted(MODULES) if _layer(m) == layer for tp in [_third_party(m)] if tp}


def test_the_graph_sees_the_modules_and_their_imports():
    """The checks below can fail: the reader finds known edges, lazy and relative ones included, and the
    third-party imports of modules known to have them."""
    assert "kernelscope.kernels.marlin.plan" in GRAPH["kernelscope.kernels.marlin.phases"]  # relative import
    assert "kernelscope.collect.driver" in GRAPH["kernelscope.cli.bench.common"]  # inside a function
    assert "kernelscope.cli.bench.attention" in GRAPH["kernelscope.cli.bench"]  # from a package import a module
    assert "pynvml" in _third_party("kernelscope.collect.nvml.api")  # inside a function
    assert "rich" in _third_party("kernelscope.render.doctor")


def test_model_and_analyze_import_only_model_and_the_standard_library():
    assert _violations({"model"}, {"model"}) == []
    assert _violations({"analyze"}, {"analyze", "model"}) == []
    assert _third_party_by_module("model") == {}
    assert _third_party_by_module("analyze") == {}


def test_collect_imports_model_and_vendor_libraries_only():
    assert _violations({"collect"}, {"collect", "model"}) == []
    assert {m: tp - VENDOR for m, tp in _third_party_by_module("collect").items() if tp - VENDOR} == {}


def test_render_imports_model_analyze_and_drawing_libraries_only():
    assert _violations({"render"}, {"render", "model", "analyze"}) == []
    assert {m: tp - DRAWING for m, tp in _third_party_by_module("render").items() if tp - DRAWING} == {}


def test_the_core_exceptions_are_the_ones_named_and_still_needed():
    """Each exception of docs/design.md is an import that exists; one that no longer does leaves the list (and the
    page), so the list never allows more than the code needs."""
    for importer, imported in CORE_EXCEPTIONS:
        assert imported in GRAPH[importer], f"{importer} no longer imports {imported}: drop the exception"


def test_the_tool_core_never_imports_the_bundled_kernels_the_benchmarks_or_the_cli():
    assert _violations(CORE, CORE) == []


def test_the_cli_imports_rich_only_in_bench_and_torch_only_in_tune():
    allowed = {"rich": lambda m: m.startswith("kernelscope.cli.bench"), "torch": lambda m: m == "kernelscope.cli.tune"}
    for module, tp in _third_party_by_module("cli").items():
        assert all(lib in allowed and allowed[lib](module) for lib in tp), f"{module} imports {sorted(tp)}"


def test_kernels_import_only_model_collect_analyze_torch_and_triton():
    found = _violations({"kernels"}, {"kernels", "model", "collect", "analyze"})
    assert [v for v in found if not v.startswith(f"{MARLIN_PANELS} imports kernelscope.render.")] == []
    assert {m: tp - {"torch", "triton"} for m, tp in _third_party_by_module("kernels").items()
            if tp - {"torch", "triton"} and m != MARLIN_PANELS} == {}


def test_the_marlin_demo_panels_draw_with_rich_and_render_helpers_and_never_import_torch():
    """The exception of docs/design.md, exactly: Rich and render/ (its fitting and formatting helpers), the demo's
    plain data, model/; no torch, so the panels draw on a machine without it."""
    assert _third_party(MARLIN_PANELS) == {"rich"}
    assert {_layer(t) for t in GRAPH[MARLIN_PANELS]} == {"kernels", "model", "render"}
    assert {t for t in GRAPH[MARLIN_PANELS] if _layer(t) == "kernels"} == {MARLIN_PANEL_DATA}
    assert _third_party(MARLIN_PANEL_DATA) == set() and {_layer(t) for t in GRAPH[MARLIN_PANEL_DATA]} <= {"model"}


def test_rich_only_in_render_the_bench_cli_and_the_marlin_panels_and_matplotlib_only_in_render_and_bench_plots():
    for module in MODULES:
        tp = _third_party(module)
        if "rich" in tp:
            assert _layer(module) == "render" or module.startswith("kernelscope.cli.bench") \
                or module == MARLIN_PANELS, module
        if "matplotlib" in tp:
            assert _layer(module) == "render" or module.startswith("kernelscope.bench.plots"), module


def test_bench_never_imports_the_cli_and_matplotlib_only_in_its_plots():
    assert _violations({"bench"}, {"bench", "kernels", "model", "collect", "analyze", "render"}) == []
    for module, tp in _third_party_by_module("bench").items():
        assert tp <= {"torch", "triton", "matplotlib"}, f"{module} imports {sorted(tp)}"
        assert "matplotlib" not in tp or module.startswith("kernelscope.bench.plots"), module


def test_the_top_level_modules_import_only_the_core_and_main_only_the_cli():
    for module in (m for m in MODULES if _is_top_level(m)):
        layers = {_layer(t) for t in GRAPH[module]} - {""}
        if module == "kernelscope":  # the package: its own top-level modules too
            layers -= {_layer(m) for m in MODULES if _is_top_level(m)}
        assert layers <= CORE, f"{module} imports {sorted(layers - CORE)}"
        assert _third_party(module) == set(), module
    assert {_layer(t) for t in GRAPH["kernelscope.__main__"]} == {"cli"}


def _private_imports() -> set[tuple[str, str, str]]:
    """(importer, module, name) for every import of a name starting with one underscore (not a dunder such as
    ``__version__``) from another kernelscope module."""
    return {(m, target, name) for m in MODULES for target, name in imports_of(m)
            if name is not None and name.startswith("_") and not name.startswith("__")
            and target.split(".")[0] == "kernelscope" and target != m}


def test_no_module_imports_another_modules_private_name():
    """Renderers share what they both draw through public names (the HTML report imports no terminal panel's
    private helper), and so does every other layer."""
    found = _private_imports()
    assert sorted(found - PENDING_PRIVATE_IMPORTS) == []
    assert sorted(PENDING_PRIVATE_IMPORTS - found) == [], "made public: drop these from PENDING_PRIVATE_IMPORTS"
