"""Read an Nsight Compute report (.ncu-rep) with NVIDIA's own `ncu_report` module.

`ncu_report` comes from the `ncu-report` package on PyPI (reads reports on a
machine without a GPU) or from an Nsight Compute install (extras/python).
Every value is kept with ncu's raw metric name and unit; nothing is rescaled.
"""
from __future__ import annotations

import glob
import importlib.machinery
import importlib.util
import os
import pickle
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelscope.collect.child_python import isolated_code
from kernelscope.collect.ncu.rep_file import report_layout
from kernelscope.collect.ncu.rep_times import ReportTimes, read_report_times
from kernelscope.collect.ncu.fields import (EXTRA_METRICS, NCU_FIELDS, OPCODE_METRIC, STALL_METRIC, STALL_REASONS,
                                           derivation_parts, opcode_metric)
from kernelscope.collect.ncu.source_lines import read_source_lines
from kernelscope.model import VendorRuleResult, Metric
from kernelscope.model.source_lines import SourceLines

_SEVERITY = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}  # ncu_report MsgType_*
_SPEEDUP = {0: "unknown", 1: "local", 2: "global"}  # ncu_report SpeedupType_*


class NcuReportError(Exception):
    """A report that cannot be read; one sentence for the user."""


@dataclass
class NcuKernelResult:
    index: int
    name: str  # demangled
    function: str  # ncu's "function" name base, as used by --kernel-name
    mangled: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    metrics: dict[str, Metric] = field(default_factory=dict)  # raw ncu name -> Metric
    findings: list[VendorRuleResult] = field(default_factory=list)
    nvtx_ranges: list[str] = field(default_factory=list)
    labels: dict[str, tuple[str, str]] = field(default_factory=dict)  # raw name -> (section name, label)
    source_lines: SourceLines | None = None  # per-line counters (SourceCounters section); None: not recorded


@dataclass
class NcuReport:
    path: str
    kernels: list[NcuKernelResult]
    partial_note: str | None = None  # read with partial=True from a file that ends early: what was left out
    # When ncu captured it (read from the file: ncu_report has no accessor); None: not read.
    times: ReportTimes | None = None


@dataclass(frozen=True)
class ReaderLocation:
    """Where NVIDIA's module was found: the PyPI package's directory, or an Nsight Compute install's
    extras/python directory holding ncu_report.py."""
    path: Path
    is_package: bool


def _site_dirs() -> list[Path]:
    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
            *(site.getsitepackages() if hasattr(site, "getsitepackages") else [])]  # absent in old virtualenvs
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [Path(d) for d in dict.fromkeys(dirs)]


def _install_dirs() -> list[Path]:
    roots = []
    ncu = shutil.which("ncu")
    if ncu:
        roots.append(Path(os.path.realpath(ncu)).parent.parent / "extras" / "python")
        roots.append(Path(os.path.realpath(ncu)).parent / "extras" / "python")
    roots += [Path(p) for p in sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"), reverse=True)]
    roots += [Path(p) for p in sorted(glob.glob("/usr/local/cuda*/nsight-compute*/extras/python"), reverse=True)]
    return roots


def locate_reader() -> ReaderLocation:
    """The ncu_report to use, by path: the ncu-report package in this Python's site-packages, else an
    Nsight Compute install (the one `ncu` on PATH belongs to first). Never a search of sys.path, which
    may start with the working directory."""
    for d in _site_dirs():
        if (d / "ncu_report" / "__init__.py").is_file():
            return ReaderLocation(d / "ncu_report", True)
    for root in _install_dirs():
        if (root / "ncu_report.py").is_file():
            return ReaderLocation(root, False)
    raise NcuReportError("the ncu_report module is not available: pip install ncu-report (or 'kernelscope[counters]')")


def _load_file(name: str, path: Path, package_dir: Path | None = None) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=None if package_dir is None else [str(package_dir)])
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def load_module(location: ReaderLocation | None = None) -> ModuleType:
    """Import ncu_report from the file locate_reader found (or ``location``), never from sys.path."""
    if "ncu_report" in sys.modules:
        return sys.modules["ncu_report"]
    where = location or locate_reader()
    try:
        if where.is_package:
            return _load_file("ncu_report", where.path / "__init__.py", where.path)
        # Nsight Compute's extras: ncu_report.py imports its extension as the top-level `_ncu_report`,
        # so the extension is loaded from the same folder first.
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            ext = where.path / f"_ncu_report{suffix}"
            if ext.is_file() and "_ncu_report" not in sys.modules:
                _load_file("_ncu_report", ext)
                break
        return _load_file("ncu_report", where.path / "ncu_report.py")
    except ImportError as e:
        raise NcuReportError(f"the ncu_report module in {where.path} cannot be loaded ({e})") from None


def _metric(m: Any) -> Metric | None:
    if not m.has_value():
        return None
    v = m.value()
    if v is None:
        return None
    return Metric(value=v, unit=m.unit() or "", source="ncu", raw_name=m.name())


def _opcode_counts(m: Any) -> dict[str, Metric]:
    """One raw metric per instance of the per-opcode instruction count (its correlation id is the opcode)."""
    out: dict[str, Metric] = {}
    try:
        ids = m.correlation_ids()
        for i in range(m.num_instances()):
            op = str(ids.as_string(i))
            if op:
                out[opcode_metric(op)] = Metric(value=m.as_double(i), unit=m.unit() or "", source="ncu",
                                                raw_name=opcode_metric(op))
    except (AttributeError, TypeError, ValueError):  # a reader without instance access: the total stays
        return {}
    return out


def _wanted(arch_names: set[str]) -> set[str]:
    names = {c for f in NCU_FIELDS for c in f.candidates} | derivation_parts() | {OPCODE_METRIC}
    names |= {STALL_METRIC.format(r) for r, _ in STALL_REASONS}
    for extra in EXTRA_METRICS.values():
        names |= set(extra)
    return names | arch_names


def _findings(action: Any) -> list[VendorRuleResult]:
    out = []
    for r in action.rule_results_as_dicts():
        msg = r.get("rule_message") or {}
        if not msg.get("message"):
            continue
        speed = r.get("speedup_estimation") or {}
        evidence = tuple((fm.get("name", ""), fm.get("value")) for fm in r.get("focus_metrics") or [])
        out.append(VendorRuleResult(
            source="ncu-rule", rule_id=str(r.get("rule_identifier", "")), name=str(r.get("name", "")),
            section=str(r.get("section_identifier", "")), severity=_SEVERITY.get(msg.get("type"), "info"),
            title=str(msg.get("title", "")), message=str(msg["message"]),
            speedup_type=_SPEEDUP.get(speed.get("type")) if speed else None,
            speedup_pct=float(speed["speedup"]) if speed.get("speedup") is not None else None,
            evidence=evidence,
        ))
    return out


def _nvtx(action: Any) -> list[str]:
    """Names of the NVTX push/pop ranges open around the launch, outermost first."""
    state = action.nvtx_state()
    if state is None:
        return []
    names: list[str] = []
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        i = 0
        while (rng := domain.push_pop_range(i)) is not None:  # index = order on the range stack
            names.append(str(rng.name()))
            i += 1
    return names


def read_report(path: str | os.PathLike[str], partial: bool = False) -> NcuReport:
    """Every kernel result of the report. A file that ends early is refused, saying how many results
    could be read; with ``partial`` the results in its whole blocks are kept and the loss is noted."""
    path = Path(path)
    if not path.is_file():
        raise NcuReportError(f"{path}: no such report file")
    try:
        layout = report_layout(path)
    except OSError as e:
        raise NcuReportError(f"{path} cannot be read ({e.strerror or e})") from None
    truncated = layout.known_format and not layout.complete
    cut = (f"{path} ends early: it is cut off at byte {layout.file_bytes:,}, inside a block that starts at byte "
           f"{layout.ends_early_at or 0:,}")
    kernels, error = _read_isolated(path)
    if error is not None:
        raise NcuReportError(f"{cut}, and no kernel result could be read" if truncated and not kernels else error)
    note = None
    if truncated:
        whole = min(layout.complete_results, len(kernels))
        if not partial or whole == 0:
            raise NcuReportError(f"{cut}; {_results(len(kernels))} read, {whole} of them whole"
                                 + (" (import --partial keeps the whole ones)" if whole else ""))
        note = (f"{path} ends early: kept the {_results(whole, 'whole ')}, left out "
                f"{len(kernels) - whole} cut off and any that followed")
        kernels = kernels[:whole]
    if not kernels:
        raise NcuReportError(f"{path} holds no kernel results")
    return NcuReport(path=str(path), kernels=kernels, partial_note=note, times=read_report_times(path))


def _read_isolated(path: Path) -> tuple[list[NcuKernelResult], str | None]:
    """The kernel results, read by NVIDIA's module in a child process: on a damaged file that module can
    crash the process (seen: SIGSEGV in Nsight Compute 2025.3.1's extras on bit-flipped reports), and a
    crash must cost the child, not the user's command. Returns (results, one-sentence error or None)."""
    proc = subprocess.run(reader_command(path, locate_reader()), capture_output=True)
    if proc.returncode < 0:
        return [], (f"{path} is damaged: NVIDIA's report reader crashed on it "
                    f"(signal {signal.Signals(-proc.returncode).name})")
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        return [], lines[-1] if lines else f"{path} could not be read (the reader exited {proc.returncode})"
    try:
        return pickle.loads(proc.stdout), None
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError):
        return [], f"{path} could not be read (the reader's answer was damaged)"


def reader_command(path: Path, reader: ReaderLocation) -> list[str]:
    """The child's command line: an isolated Python (collect/child_python.py) that loads ncu_report from
    ``reader`` and reads ``path``."""
    return isolated_code("from kernelscope.collect.ncu.report_reader import child_main\nchild_main()\n",
                         str(path), str(reader.path), "package" if reader.is_package else "module")


def _read_in_this_process(path: Path, reader: ReaderLocation | None = None) -> list[NcuKernelResult]:
    mod = load_module(reader)
    try:
        ctx = mod.load_report(str(path))
    except Exception as e:  # the module raises plain exceptions for damaged files
        raise NcuReportError(f"{path} is not a readable Nsight Compute report ({e})") from None
    if ctx is None or ctx.num_ranges() == 0:
        raise NcuReportError(f"{path} is damaged or holds no profiling results")
    kernels: list[NcuKernelResult] = []
    try:
        for r in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(r)
            for i in range(rng.num_actions()):
                kernels.append(_read_action(rng.action_by_idx(i), len(kernels)))
    except NcuReportError:
        raise
    except Exception as e:  # a damaged result inside a readable file
        raise NcuReportError(f"{path} is damaged: result {len(kernels) + 1} cannot be read ({e})") from None
    return kernels


def child_main() -> None:
    """The child of _read_isolated: results pickled to stdout, or one sentence on stderr and exit 2."""
    try:
        reader = ReaderLocation(Path(sys.argv[2]), sys.argv[3] == "package")
        kernels = _read_in_this_process(Path(sys.argv[1]), reader)
    except NcuReportError as e:
        print(str(e), file=sys.stderr)
        raise SystemExit(2)
    sys.stdout.buffer.write(pickle.dumps(kernels))


def _results(n: int, adjective: str = "") -> str:
    return f"{n} {adjective}kernel result{'' if n == 1 else 's'}"


def _read_action(a: Any, index: int) -> NcuKernelResult:
    labels: dict[str, tuple[str, str]] = {}
    # Older ncu_report modules (Nsight Compute's own extras before 2026) have no sections():
    # then only the metrics kernelscope maps are kept; the .ncu-rep itself keeps the rest.
    for s in (a.sections() if hasattr(a, "sections") else []):
        for group in (s.header_metrics(), s.body_metrics()):
            for m in group or []:
                labels[m.name()] = (s.name(), m.label())
    wanted = _wanted(set(labels))
    metrics: dict[str, Metric] = {}
    for name in a.metric_names():
        if name in wanted or name.startswith(("launch__", "device__attribute_")):
            m = _metric(a.metric_by_name(name))
            if m is not None:
                metrics[name] = m
    if OPCODE_METRIC in metrics:
        metrics.update(_opcode_counts(a.metric_by_name(OPCODE_METRIC)))

    def dim(prefix: str) -> tuple[int, int, int]:
        return tuple(int(metrics[f"{prefix}_{c}"].value) if f"{prefix}_{c}" in metrics else 1
                     for c in "xyz")  # type: ignore[return-value]

    return NcuKernelResult(
        index=index, name=a.name(a.NameBase_DEMANGLED), function=a.name(a.NameBase_FUNCTION),
        mangled=a.name(a.NameBase_MANGLED), grid=dim("launch__grid_dim"), block=dim("launch__block_dim"),
        metrics=metrics, findings=_findings(a), nvtx_ranges=_nvtx(a), labels=labels,
        source_lines=read_source_lines(a),
    )
