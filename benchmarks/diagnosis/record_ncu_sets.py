"""Record the defect suite's planted kernels under Nsight Compute's standard sets and kernelscope's own
counter pass, as users record theirs (needs a GPU, ncu and nvcc; PYTHONPATH=src:.; no install):

    python benchmarks/diagnosis/record_ncu_sets.py --out OUT [--sets full,targeted,basic,detailed] [--cases a,b]

One ncu run per set over all cases in one process (suite/run_cases.py: one step of each case between
cudaProfilerStart/Stop, inside its NVTX range), so a report holds one result per kernel launch of each case.
Writes to OUT: planted_SET.ncu-rep.xz per set (tests/data/ncu_sets/ keeps them), ncu_lists.tar.xz (ncu
--list-sets, --list-sections, each set's --list-metrics, --query-metrics for the chip, the sections' files),
record.log. Clocks are never changed (--clock-control none). Score them on the CPU with
benchmarks/diagnosis/ncu_sets_score.py.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import glob
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (ROOT, ROOT / "src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

RUN_CASES = HERE / "suite" / "run_cases.py"
# The kernel-rule cases of both halves with their defect planted (timeline cases and controls need a trace pass or
# have no planted defect; scalar_loads has no measurable defect on Hopper: RESULTS.md).
CASES = ("uncoalesced", "bank_conflicts", "local_memory", "divergence", "tail_effect", "small_grid",
         "occupancy_smem", "occupancy_regs", "fma_matmul", "uncoalesced_bf16_transpose", "bank_conflicts_wide_tile",
         "local_memory_k16", "divergence_lane4", "tail_effect_w8", "tail_effect_w4", "small_grid_rmsnorm",
         "occupancy_smem_256", "occupancy_regs_hot", "fma_matmul_fp32", "fma_matmul_fp16_rect")
STANDARD_SETS = ("basic", "detailed", "full", "roofline")
T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + [p for p in e.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    e["PYTHONUNBUFFERED"] = "1"
    return e


def sh(cmd: list[str], timeout: float = 60) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env())
        return r.stdout + r.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{cmd[0]} failed: {e}\n"


def targeted_args(ncu: str, arch: str | None) -> list[str]:
    """kernelscope's counter-pass options (runner.build_command), without its kernel filter and output."""
    from kernelscope.collect.ncu.runner import NcuOptions, build_command

    argv = build_command(ncu, Path("X"), [], NcuOptions(arch=arch, launch_count=None, per_launch_config=False))
    argv = argv[1:argv.index("--")]
    i = argv.index("-o")
    return [a for j, a in enumerate(argv) if j not in (i, i + 1) and a != "-f"]


def set_args(ncu: str, name: str, arch: str | None) -> list[str]:
    if name == "targeted":
        return targeted_args(ncu, arch)
    return ["--set", name, "--clock-control", "none", "--import-source", "no"]


def dump_lists(ncu: str, work: Path, out: Path, arch: str | None, chip: str | None) -> None:
    lists = work / "lists"
    lists.mkdir(parents=True, exist_ok=True)
    (lists / "version.txt").write_text(sh([ncu, "--version"]))
    (lists / "list_sets.txt").write_text(sh([ncu, "--list-sets"]))
    (lists / "list_sections.txt").write_text(sh([ncu, "--list-sections"]))
    for s in (*STANDARD_SETS, "targeted"):
        (lists / f"metrics_{s}.txt").write_text(sh([ncu, *set_args(ncu, s, arch), "--list-metrics"]))
    if chip:
        (lists / f"query_metrics_{chip}.txt").write_text(sh([ncu, "--query-metrics", "--chip", chip], 120))
    sections = section_folder(ncu)
    with tarfile.open(out / "ncu_lists.tar.xz", "w:xz") as tar:
        tar.add(lists, arcname="lists")
        if sections is not None:
            tar.add(sections, arcname="sections")
    say(f"lists: {', '.join(sorted(p.name for p in lists.iterdir()))}; sections from "
        f"{sections or 'nowhere: no folder holding SpeedOfLight.section was found'}")


def section_folder(ncu: str) -> Path | None:
    """The folder of .section files ncu reads: the copy it makes in the user's documents (what `--list-sections`
    shows), else the install's, found beside the real binary (a CUDA toolkit's bin/ncu is a wrapper script), in
    the toolkit's nsight-compute-* folder or under /opt/nvidia; None when none holds SpeedOfLight.section."""
    real = Path(os.path.realpath(shutil.which(ncu) or ncu)).parent
    patterns = [str(Path.home() / "Documents" / "NVIDIA Nsight Compute" / "*" / "Sections"), str(real / "sections"),
                str(real.parent / "nsight-compute*" / "sections"), "/usr/local/cuda*/nsight-compute*/sections",
                "/opt/nvidia/nsight-compute/*/sections"]
    for pattern in patterns:
        for p in sorted(glob.glob(pattern), reverse=True):  # the newest version first
            if (Path(p) / "SpeedOfLight.section").is_file():
                return Path(p)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ks_ncu_sets"))
    ap.add_argument("--sets", default="full,targeted,basic,detailed")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--budget-s", type=float, default=380.0, help="start no ncu run past this many seconds")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("record_ncu_sets: error: no CUDA device.", file=sys.stderr)
        return 2
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    chip = {"sm_90": "gh100", "sm_80": "ga100", "sm_89": "ad102", "sm_86": "ga102"}.get(arch)
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    say(f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ} {torch.cuda.get_device_name()} {arch}; "
        f"{sh([ncu, '--version']).strip().splitlines()[-1]}; torch {torch.__version__}")
    dump_lists(ncu, args.work, args.out, arch, chip)
    say("warm-up without ncu (builds the CUDA library, compiles the Triton kernels)")
    r = subprocess.run([sys.executable, str(RUN_CASES), "--cases", args.cases], env=env(), capture_output=True,
                       text=True, timeout=240)
    say(f"warm-up rc={r.returncode}: " + " ".join(x.split()[1] for x in r.stdout.splitlines() if x.endswith(" ok"))
        + ("\n" + r.stderr[-2000:] if r.returncode else ""))
    rows = []
    for s in [x.strip() for x in args.sets.split(",") if x.strip()]:
        left = args.budget_s - (time.perf_counter() - T0)
        if left < 20:
            rows.append((s, "skipped: time budget", 0, 0.0))
            continue
        base = args.work / f"planted_{s}"
        cmd = [ncu, *set_args(ncu, s, arch), "--nvtx", "--profile-from-start", "off", "-f", "-o", str(base), "--",
               sys.executable, str(RUN_CASES), "--cases", args.cases]
        t = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=left, env=env())
            log, rc = p.stdout + p.stderr, str(p.returncode)
        except subprocess.TimeoutExpired as e:
            log, rc = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), \
                "timeout"
        took = time.perf_counter() - t
        (args.work / f"ncu_{s}.log").write_text(log)
        results = log.count("==PROF== Profiling")
        rep = base.with_suffix(".ncu-rep")
        size = 0
        if rep.exists():
            packed = args.out / f"planted_{s}.ncu-rep.xz"
            packed.write_bytes(lzma.compress(rep.read_bytes(), preset=9 | lzma.PRESET_EXTREME))
            size = packed.stat().st_size
        say(f"set {s}: rc={rc}, {results} results, {took:.0f} s, {size / 1024:.0f} KiB xz; ncu said: "
            + " | ".join(x for x in log.splitlines() if "==ERROR==" in x or "==WARNING==" in x)[:600])
        rows.append((s, rc, results, took, round(size / 1024)))
    print("\n| set | ncu rc | results | wall s | report KiB (xz) |\n|---|---|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(str(round(v) if isinstance(v, float) else v) for v in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
