"""Score kernelscope's hot lines on the defect suite's recorded source-counter reports (record_source.sh).

    PYTHONPATH=src:. python benchmarks/diagnosis/source_score.py [DIR] [--ceilings FILE] [--json] [--write-results]

DIR holds CASE_VARIANT.ncu-rep.xz (default tests/data/source). Each report is imported as `kernelscope import`
does and analysed with the H100 calibration (tests/data/diagnosis/ceilings.json). The planted lines come from the
case definition: the lines of the suite's kernel source that end in a `planted: CASE` marker comment
(suite/triton_kernels.py, suite/cuda_kernels.cu), read from the source text the report itself holds (the kernel
as it was run), so no line number is typed here.

Per defect report: **hit** when a planted line is the hottest line (most warp samples) or one of the lines the
case's expected finding names (its evidence "<metric> at <file:line>").
Per fixed twin: **pass** when its hottest line is not the defect's hottest line (the hot line moved), or the
rule's per-line count (analyze/source_lines.RULE_COUNTS: excess global sectors, excess shared wavefronts, local
sectors, FFMA/HFMA2/DFMA instructions, idle lane slots) on the planted lines is 0, the ideal.
"""
from __future__ import annotations

import argparse
import json
import lzma
import re
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for _p in (ROOT, ROOT / "src"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from benchmarks.diagnosis.suite.config import CASE_BY_NAME, DEFECT, FIXED  # noqa: E402
from kernelscope.analyze.source_lines import RULE_COUNTS, rank_lines, rule_count  # noqa: E402
from kernelscope.model import Session  # noqa: E402
from kernelscope.model.source_lines import SourceLines  # noqa: E402

DEFAULT_DIR = ROOT / "tests" / "data" / "source"
DEFAULT_CEILINGS = ROOT / "tests" / "data" / "diagnosis" / "ceilings.json"
MARKER = re.compile(r"(?:#|//)\s*planted:\s*([\w ]+?)\s*$")
TARGET_HIT_PCT = 90.0  # issue 39: the planted line is the hottest or a named line in at least 90% of the cases
_AT = re.compile(r" at (.+:\d+)$")


@dataclass
class Row:
    case: str
    variant: str
    rule_id: str | None
    planted: list[str] = field(default_factory=list)  # file:line of the planted lines
    hottest: str | None = None  # file:line with the most warp samples
    hottest_share: float | None = None
    named: list[str] = field(default_factory=list)  # file:line the expected finding names
    fired: bool = False
    rule_count_planted: float | None = None  # the rule's per-line count summed over the planted lines
    ok: bool | None = None  # hit (defect) or pass (fixed); None: could not be scored
    why: str = ""  # how it scored, or why it could not
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def planted_lines(texts: dict[str, str], case: str) -> set[tuple[str, int]]:
    """(path, line) of every line of the report's source texts whose marker names ``case``."""
    out = set()
    for path, text in texts.items():
        for n, line in enumerate(text.splitlines(), 1):
            m = MARKER.search(line)
            if m and case in m.group(1).split():
                out.add((path, n))
    return out


def _short(loc: str | None) -> str | None:
    return None if loc is None else loc.rsplit("/", 1)[-1]


def load_report(path: Path, work: Path) -> tuple[Session, dict[str, str], Any]:
    """(session as `kernelscope import` builds it, the report's source texts by path, the report's capture times)."""
    import ncu_report

    from kernelscope.collect.ncu.merge import session_from_report
    from kernelscope.collect.ncu.report_reader import read_report
    from kernelscope.collect.ncu.source_lines import source_texts
    from kernelscope.collect.trace.api import new_session

    rep = work / path.name.removesuffix(".xz")
    rep.write_bytes(lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes())
    parsed = read_report(rep)
    session = new_session(["ncu-report", str(rep)])
    session_from_report(session, parsed)
    ctx = ncu_report.load_report(str(rep))
    texts: dict[str, str] = {}
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            texts.update({path: raw.decode("utf-8", "replace")
                          for path, raw in source_texts(rng.action_by_idx(a)).items()})
    return session, texts, parsed.times


def _named(session: Session, ceilings, rule_id: str) -> tuple[bool, list[str]]:
    from kernelscope.analyze.analysis import analyze_session

    x = session.detailed_launches()[0]
    a = analyze_session(session, ceilings).kernel(x.kernel)
    for r in a.recommendations.recommendations if a is not None else []:
        if r.source == "kernelscope" and r.finding.rule == rule_id:
            return True, [m.group(1) for name, _ in r.finding.evidence if (m := _AT.search(str(name)))]
    return False, []


def _located(src: SourceLines, planted: set[tuple[str, int]]) -> list:
    """The session's lines at the planted (path, line) pairs (the session keeps a path's last MAX_PATH characters)."""
    from kernelscope.model.source_lines import MAX_PATH

    paths = {f.path: i for i, f in enumerate(src.files)}
    want = {(paths[p[-MAX_PATH:]], n) for p, n in planted if p[-MAX_PATH:] in paths}
    return [ln for ln in src.lines if (ln.file, ln.line) in want]


def score_one(case: str, variant: str, session: Session, texts: dict[str, str], ceilings,
              defect_hottest: str | None = None) -> Row:
    spec = CASE_BY_NAME[case]
    rule_id = next((r for r in spec.expected_rules if r in RULE_COUNTS), None)
    row = Row(case, variant, rule_id)
    launches = session.detailed_launches()
    if not launches or launches[0].source_lines is None:
        row.error = "the report has no per-line counters"
        return row
    x = launches[0]
    src = x.source_lines
    planted = planted_lines(texts, case)
    row.planted = sorted(f"{_short(p)}:{n}" for p, n in planted)
    if not planted:
        row.error = "no planted marker in the report's source text"
        return row
    kl = rank_lines(x.kernel, 0, src)
    if kl.hot and kl.hot[0].samples:
        row.hottest, row.hottest_share = kl.hot[0].location, kl.hot[0].sample_share
    lines = _located(src, planted)
    row.rule_count_planted = sum(rule_count(ln, rule_id) for ln in lines) if rule_id else None
    row.fired, named = _named(session, ceilings, rule_id) if rule_id else (False, [])
    row.named = named
    planted_locs = {src.location(ln) for ln in lines}
    if variant == DEFECT:
        top = row.hottest in planted_locs
        by_name = bool(planted_locs & set(named))
        row.ok = top or by_name
        row.why = ("hottest" if top else "") + (" + " if top and by_name else "") + ("named" if by_name else "")
        row.why = row.why or "missed"
    else:
        moved = defect_hottest is not None and row.hottest is not None and _short(row.hottest) != _short(
            defect_hottest)
        ideal = row.rule_count_planted == 0
        row.ok = moved or ideal
        row.why = " + ".join(w for w, b in (("hot line moved", moved), ("planted lines at ideal", ideal)) if b) or (
            "neither")
    return row


def score_dir(directory: Path, ceilings_path: Path = DEFAULT_CEILINGS) -> tuple[list[Row], dict[str, Any]]:
    """Rows for every CASE_VARIANT report in ``directory`` (defect then fixed, per case), and the recording's facts
    (device, dates) read from the reports."""
    from kernelscope.analyze.roofline import Ceilings
    from kernelscope.collect.calibrate.ceilings import load_calibration

    cal = load_calibration(ceilings_path)
    ceilings = Ceilings.from_metrics(cal.ceilings, ceilings_path.name)
    rows: list[Row] = []
    facts: dict[str, Any] = {"devices": set(), "dates": set()}
    with tempfile.TemporaryDirectory() as work:
        for case in CASE_BY_NAME:
            hottest = None
            for variant in (DEFECT, FIXED):
                path = directory / f"{case}_{variant}.ncu-rep.xz"
                if not path.exists():
                    continue
                session, texts, times = load_report(path, Path(work))
                if session.device is not None:
                    facts["devices"].add(session.device.name)
                if times is not None and times.session_created_utc:
                    facts["dates"].add(times.session_created_utc[:10])
                row = score_one(case, variant, session, texts, ceilings, hottest)
                if variant == DEFECT:
                    hottest = row.hottest
                rows.append(row)
    return rows, {k: sorted(v) for k, v in facts.items()}


def summary(rows: list[Row]) -> dict[str, Any]:
    d = [r for r in rows if r.variant == DEFECT]
    f = [r for r in rows if r.variant == FIXED]
    hits, passes = sum(bool(r.ok) for r in d), sum(bool(r.ok) for r in f)
    return {"defect_cases": len(d), "planted_line_found": hits,
            "planted_line_hottest": sum(r.ok is True and r.why.startswith("hottest") for r in d),
            "planted_line_found_pct": 100.0 * hits / len(d) if d else None,
            "fixed_twins": len(f), "fixed_twin_pass": passes,
            "fixed_twin_pass_pct": 100.0 * passes / len(f) if f else None}


def table_md(rows: list[Row], facts: dict[str, Any]) -> str:
    s = summary(rows)
    out = [f"Recorded on {', '.join(facts.get('devices') or ['N/A'])}, "
           f"{', '.join(facts.get('dates') or ['date N/A'])} (record_source.sh); scored by source_score.py.", "",
           f"Planted line is the hottest line or a line the finding names: **{s['planted_line_found']} of "
           f"{s['defect_cases']}** defect cases ({s['planted_line_found_pct']:.0f}%; target {TARGET_HIT_PCT:.0f}%; "
           f"the hottest line by samples alone: {s['planted_line_hottest']} of {s['defect_cases']}). "
           f"Fixed twin's hot line moves or its planted lines fall to the ideal: **{s['fixed_twin_pass']} of "
           f"{s['fixed_twins']}**.", "",
           "| case | variant | rule | planted | hottest (share of samples) | finding names | rule count on planted "
           "lines | result |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        hot = "N/A" if r.hottest is None else f"{_short(r.hottest)} ({100 * (r.hottest_share or 0):.0f}%)"
        named = ", ".join(_short(n) or "" for n in r.named) if r.named else ("(fired, no lines)" if r.fired
                                                                             else "(did not fire)")
        cnt = "N/A" if r.rule_count_planted is None else f"{r.rule_count_planted:,.0f}"
        res = r.error or (("yes" if r.ok else "NO") + f" ({r.why})")
        out.append(f"| {r.case} | {r.variant} | {r.rule_id or '-'} | {', '.join(r.planted)} | {hot} | {named} | "
                   f"{cnt} | {res} |")
    return "\n".join(out) + "\n"


RESULTS = ROOT / "benchmarks" / "diagnosis" / "RESULTS.md"
BEGIN, END = "<!-- source_score.py: begin -->", "<!-- source_score.py: end -->"


def write_results(table: str, path: Path = RESULTS) -> None:
    """Put ``table`` between the BEGIN and END markers of RESULTS.md (added at the end the first time)."""
    text = path.read_text()
    block = f"{BEGIN}\n{table}{END}\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default=str(DEFAULT_DIR))
    ap.add_argument("--ceilings", default=str(DEFAULT_CEILINGS))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write-results", action="store_true", help="put the table in benchmarks/diagnosis/RESULTS.md")
    args = ap.parse_args(argv)
    rows, facts = score_dir(Path(args.dir), Path(args.ceilings))
    if args.write_results:
        write_results(table_md(rows, facts))
    if args.json:
        print(json.dumps({"facts": facts, "summary": summary(rows), "rows": [r.to_dict() for r in rows]}, indent=1))
    else:
        print(table_md(rows, facts), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
