"""Score kernelscope's kernel rules on the defect suite's Nsight Compute reports, one per ncu set, imported as a
user imports a report (no trace pass, no calibration): per case, is the planted defect kernelscope's first
finding for the case's kernel? A case counts for a set only when the set's report holds the evidence its rule
reads (the rule is evaluated); the others are listed with the rule's not-evaluated reason.

    PYTHONPATH=src:. python benchmarks/diagnosis/ncu_sets_score.py [--reports tests/data/ncu_sets]
        [--results benchmarks/diagnosis/RESULTS.md]   # rewrites its section between the markers

Reports: tests/data/ncu_sets/planted_SET.ncu-rep.xz (benchmarks/diagnosis/record_ncu_sets.py records them).
"""
from __future__ import annotations

import argparse
import lzma
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (ROOT, ROOT / "src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from benchmarks.diagnosis.suite.config import CASE_BY_NAME  # noqa: E402
from benchmarks.diagnosis.table import Row, diagnose  # noqa: E402
from kernelscope.analyze.roofline import Ceilings  # noqa: E402
from kernelscope.collect.ncu.merge import session_from_report  # noqa: E402
from kernelscope.collect.ncu.report_reader import read_report  # noqa: E402
from kernelscope.model import Session  # noqa: E402

SETS = ("basic", "detailed", "full", "targeted")
DEFAULT_REPORTS = ROOT / "tests" / "data" / "ncu_sets"


@dataclass(frozen=True)
class CaseScore:
    set_name: str
    case: str
    expected: tuple[str, ...]
    top_rule: str | None  # "source:rule_id" of the first recommendation
    evaluated: bool  # the planted rule ran (fired or looked and found nothing)
    planted_first: bool
    not_evaluated: str | None  # the planted rule's reason when it could not run
    planted_fired: bool = False  # the planted rule found the defect (first or not)
    planted_gain_pct: float | None = None  # its estimated gain; None: not estimated (e.g. no calibration)
    error: str | None = None


def load_report_session(path: Path) -> Session:
    """A session built from the report alone, as `kernelscope import` builds it (xz-compressed or not)."""
    if path.suffix == ".xz":
        with tempfile.TemporaryDirectory() as tmp:
            plain = Path(tmp) / path.name[:-3]
            plain.write_bytes(lzma.decompress(path.read_bytes()))
            report = read_report(plain)
    else:
        report = read_report(path)
    session = Session(command=[f"import {path.name}"])
    session_from_report(session, report)
    return session


def case_session(session: Session, case: str) -> Session:
    """The launches inside the case's NVTX range (its name), alone in a session of their own."""
    out = Session(device=session.device, collectors=dict(session.collectors))
    out.launches = [x for x in session.launches if case in x.regions]
    return out


def score_set(set_name: str, session: Session, cases: list[str]) -> list[CaseScore]:
    scores = []
    for case in cases:
        spec = CASE_BY_NAME[case]
        sub = case_session(session, case)
        row = diagnose(Row(case, "defect", spec.category, spec.expected_text), sub, spec.expected_rules,
                       Ceilings.none())
        skipped = next((p.not_evaluated for p in row.planted if p.not_evaluated), None)
        evaluated = bool(row.planted) and all(p.not_evaluated is None for p in row.planted)
        top_id = row.top_rule.split(":", 1)[1] if row.top_rule and row.top_rule.startswith("kernelscope:") else None
        fired = [p for p in row.planted if p.fired]
        scores.append(CaseScore(set_name, case, spec.expected_rules, row.top_rule, evaluated,
                                bool(top_id and top_id in spec.expected_rules and not row.error), skipped,
                                bool(fired), fired[0].gain_pct if fired else None, row.error))
    return scores


def score_reports(reports: Path = DEFAULT_REPORTS, sets: tuple[str, ...] = SETS) -> dict[str, list[CaseScore]]:
    out = {}
    for s in sets:
        path = reports / f"planted_{s}.ncu-rep.xz"
        session = load_report_session(path)
        cases = list(dict.fromkeys(r for x in session.launches for r in x.regions if r in CASE_BY_NAME))
        out[s] = score_set(s, session, cases)
    return out


def summary(scores: list[CaseScore]) -> tuple[int, int, int]:
    """(planted first among evaluated cases, evaluated cases, all cases)."""
    ev = [c for c in scores if c.evaluated]
    return sum(c.planted_first for c in ev), len(ev), len(scores)


def markdown(by_set: dict[str, list[CaseScore]]) -> str:
    lines = ["| set | planted defect first (cases whose report holds the evidence) | cases not evaluated |",
             "|---|---:|---:|"]
    for s, scores in by_set.items():
        first, ev, n = summary(scores)
        lines.append(f"| {s} | {first} / {ev} | {n - ev} of {n} |")
    lines += ["", "| set | case | planted rule | first finding | evaluated | planted first |",
              "|---|---|---|---|---|---|"]
    for s, scores in by_set.items():
        for c in scores:
            why = "yes" if c.evaluated else f"no: {c.not_evaluated or c.error}"
            if c.evaluated and not c.planted_first and c.planted_fired:
                why += (f" (fired, gain {c.planted_gain_pct:.0f}%)" if c.planted_gain_pct is not None else
                        " (fired, gain not estimated: no calibration, and the report has no ncu peak rates)")
            lines.append(f"| {s} | {c.case} | {', '.join(c.expected)} | {c.top_rule or '-'} | {why} | "
                         f"{'yes' if c.planted_first else 'NO' if c.evaluated else '-'} |")
    return "\n".join(lines)


BEGIN, END = "<!-- ncu_sets_score.py: begin -->", "<!-- ncu_sets_score.py: end -->"


_RUN_HEADER = re.compile(r"^\[\s*[\d.]+s\] (\d{4}-\d\d-\d\dT.*)$")
_SET_LINE = re.compile(r"^\[\s*[\d.]+s\] set (\w+): rc=")


def recorded_on(reports: Path) -> str:
    """The device, date and ncu version of each recording (record_ncu_sets.py's first log line; record.log holds
    one log after another when a set was re-recorded) with the sets whose report comes from it (the latest)."""
    log = reports / "record.log"
    header, latest = None, {}
    for line in log.read_text().splitlines() if log.exists() else []:
        if m := _RUN_HEADER.match(line):
            header = m.group(1)
        elif (m := _SET_LINE.match(line)) and header:
            latest[m.group(1)] = header
    runs: dict[str, list[str]] = {}
    for set_name, h in latest.items():
        runs.setdefault(h, []).append(set_name)
    return "; ".join(f"{', '.join(sets)}: {h}" for h, sets in runs.items()) or "recording details not kept"


def write_results(path: Path, text: str) -> None:
    doc = path.read_text()
    if BEGIN in doc and END in doc:
        doc = doc[: doc.index(BEGIN) + len(BEGIN)] + "\n" + text + "\n" + doc[doc.index(END):]
    else:
        doc = doc.rstrip("\n") + f"\n\n{BEGIN}\n{text}\n{END}\n"
    path.write_text(doc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=Path, default=DEFAULT_REPORTS)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--results", type=Path, help="write the table into this markdown file, between its markers")
    args = ap.parse_args(argv)
    text = (f"Recorded: {recorded_on(args.reports)}. Scored with no calibration, as an imported report is.\n\n"
            + markdown(score_reports(args.reports, tuple(s for s in args.sets.split(",") if s))))
    if args.results:
        write_results(args.results, text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
