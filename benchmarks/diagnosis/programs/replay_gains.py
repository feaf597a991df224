"""Replayed gains against measured ones on the whole-program suite (CPU only, recorded sessions).

For each program with a defect and its fixed twin (tests/data/diagnosis/programs, program_timings.json) it
replays the defect's window (analyze/replay.py) with the edit that stands for its fix, and sets the replayed gain
beside two measured ones: the real gain (1 - fixed / defect median step time of the plain processes, unprofiled)
and the session gain (1 - fixed / defect wall time per step of the recorded, profiled windows, the program the
replay sees). It also lists, per recorded session, how far the unedited replay is from the measured wall time.

    PYTHONPATH=src python benchmarks/diagnosis/programs/replay_gains.py [--out benchmarks/diagnosis/REPLAY.md]

Edits per planted rule (a rule with no edit yet is listed as such): sync-in-loop: RemoveSyncs (the last
synchronize of each step kept); launch-bound: ShrinkLaunchOverhead (a CUDA graph replay's per-launch cost);
host-input-stall: RemoveHostWork; tensor-cores-unused: the FP32 FMA matmul kernels (program_rules.FMA_MATMUL_NAMES)
shortened by the datasheet TF32 / FP32 rate ratio the rule uses (program_rules.TF32_OVER_FP32_RATE).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "src"))

from kernelscope.analyze import breakdown as bd  # noqa: E402
from kernelscope.analyze import program_rules as pr  # noqa: E402
from kernelscope.analyze import replay as rp  # noqa: E402
from kernelscope.model import Session  # noqa: E402

SESSIONS = ROOT / "tests" / "data" / "diagnosis" / "programs"


def fix_edits(rule: str, session: Session) -> tuple | None:
    """The edits that stand for the planted rule's fix (module docstring); None: no edit models it yet."""
    if rule in pr.REPLAYED_FIXES:  # the rules whose findings' gains are replayed: the same edits
        return pr.REPLAYED_FIXES[rule]()
    if rule == "host-input-stall":
        return (rp.RemoveHostWork(),)
    if rule == "tensor-cores-unused" and session.device is not None:
        cc = tuple(session.device.compute_capability)
        ratio = pr.TF32_OVER_FP32_RATE.get(cc)  # type: ignore[arg-type]
        if ratio is not None:
            return (rp.SetKernelDuration(pr.FMA_MATMUL_NAMES.pattern, scale=1 / ratio,
                                         source=pr.TF32_SOURCE.format(*cc)),)
    return None


def per_step_ns(session: Session) -> float:
    b = bd.breakdown(session)[0]
    return max(r.wall_ns / max(1, r.steps) for r in b.ranks)


def rows() -> tuple[list[dict], list[dict]]:
    timings = json.loads((SESSIONS / "program_timings.json").read_text())
    pairs, reproduction = [], []
    for name, p in timings["programs"].items():
        for variant, file in p["sessions"].items():
            s = Session.load(SESSIONS / file)
            base = rp.replay(rp.build_graph(s))
            reproduction.append({"session": file, "ranks": [(r.rank, r.measured_wall_ns, r.replayed_wall_ns,
                                                             r.error_pct) for r in base.ranks]})
        if "defect" not in p["variants"] or p.get("real_gain_pct") is None:
            continue
        defect = Session.load(SESSIONS / p["sessions"]["defect"])
        fixed = Session.load(SESSIONS / p["sessions"]["fixed"])
        session_gain = 100 * (1 - per_step_ns(fixed) / per_step_ns(defect))
        edits = fix_edits(p["expected_rule"], defect)
        row = {"program": name, "half": p["half"], "rule": p["expected_rule"], "nproc": p["nproc"],
               "real_gain_pct": p["real_gain_pct"], "session_gain_pct": session_gain, "replayed_gain_pct": None,
               "edits": None, "bound_by": None}
        if edits is not None:
            g = rp.replayed_gain(rp.build_graph(defect), edits)
            row.update(replayed_gain_pct=g.gain_pct, edits="; ".join(g.fixed.edits),
                       bound_by=", ".join(f"{k} {100 * ns / g.fixed.wall_ns:.0f}%" for k, ns in g.fixed.bound_by[:2]))
        pairs.append(row)
    return pairs, reproduction


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def markdown(pairs: list[dict], reproduction: list[dict], device: str, date: str) -> str:
    out = ["# Replayed gains against measured ones (whole-program suite)", "",
           f"Sessions recorded on {device}, {date}; replayed on the CPU by "
           "`benchmarks/diagnosis/programs/replay_gains.py` (analyze/replay.py). Real gain: the plain processes' "
           "median step times (unprofiled); session gain: the recorded windows' wall time per step (profiled, what "
           "the replay sees). |d| is replayed - real in points.", "",
           "| program | half | rule | real % | session % | replayed % | abs(d) real | abs(d) session | "
           "bound after the fix |", "|---|---|---|---|---|---|---|---|---|"]
    for r in pairs:
        rep = r["replayed_gain_pct"]
        d_real = None if rep is None else abs(rep - r["real_gain_pct"])
        d_sess = None if rep is None else abs(rep - r["session_gain_pct"])
        out.append(f"| {r['program']} | {r['half']} | {r['rule']} | {_pct(r['real_gain_pct'])} | "
                   f"{_pct(r['session_gain_pct'])} | {_pct(rep) if rep is not None else 'no edit yet'} | "
                   f"{_pct(d_real)} | {_pct(d_sess)} | {r['bound_by'] or '-'} |")
    replayed = [r for r in pairs if r["replayed_gain_pct"] is not None]
    for half in ("check", "holdout"):
        rs = [r for r in replayed if r["half"] == half]
        if rs:
            near = sum(abs(r["replayed_gain_pct"] - r["real_gain_pct"]) <= 15 for r in rs)
            out.append(f"\n{half} half: {near} of {len(rs)} replayed gains within 15 points of the real gain.")
    worst = max((abs(e) for x in reproduction for *_, e in x["ranks"]), default=0.0)
    out += ["", f"Unedited replay against the measured window wall time: {len(reproduction)} sessions, largest error "
            f"{worst:.3f}%.", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="write the table here (markdown) instead of printing it")
    args = ap.parse_args(argv)
    timings = json.loads((SESSIONS / "program_timings.json").read_text())
    pairs, reproduction = rows()
    text = markdown(pairs, reproduction, timings["device"], timings["date"][:10])
    if args.out is None:
        print(text)
    else:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
