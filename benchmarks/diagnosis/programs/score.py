"""Score kernelscope's verdict on the whole-program suite (CPU only). For each recorded session it runs
`kernelscope show SESSION --json`, reads ``verdict.findings`` (best first; each with rule, category, title,
kernel, gain_pct, gain_formula, evidence, fix) and checks, against program_timings.json from measure.py:

- defect: the planted rule is the first finding; its estimated gain is within 20 points of the real gain;
  straggler runs: the first finding names the straggler rank;
- fixed: the planted rule is absent or under 5%;
- control: no finding above 20%.

    PYTHONPATH=src python benchmarks/diagnosis/programs/score.py OUT/sessions.tar.gz OUT/program_timings.json \
        [--out DIR] [--results benchmarks/diagnosis/RESULTS.md]

A session whose JSON has no verdict (or no findings list) is reported as "no verdict", never guessed at.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

GAIN_TOLERANCE_POINTS = 20.0
FIXED_MAX_PCT = 5.0
CONTROL_MAX_PCT = 20.0


def findings_of(show_json: dict | None) -> list[dict] | None:
    """The verdict's findings, best first; None when the JSON carries no verdict."""
    if not isinstance(show_json, dict):
        return None
    verdict = show_json.get("verdict")
    if not isinstance(verdict, dict) or not isinstance(verdict.get("findings"), list):
        return None
    return [f for f in verdict["findings"] if isinstance(f, dict)]


def not_evaluated_of(show_json: dict | None) -> dict[str, str]:
    """rule -> the reason the verdict gives for not evaluating it."""
    verdict = show_json.get("verdict") if isinstance(show_json, dict) else None
    items = verdict.get("not_evaluated") if isinstance(verdict, dict) else None
    return {str(i.get("rule")): str(i.get("reason", "")) for i in items or [] if isinstance(i, dict)}


def _gain(f: dict) -> float | None:
    g = f.get("gain_pct")
    return float(g) if isinstance(g, (int, float)) else None


def _names_rank(f: dict, rank: int) -> bool:
    if f.get("rank") == rank:
        return True
    text = " ".join(str(f.get(k, "")) for k in ("title", "evidence", "kernel")).lower()
    return f"rank {rank}" in text or f"rank{rank}" in text or f"gpu{rank}" in text


def score_case(variant: str, expected_rule: str | None, findings: list[dict] | None,
               real_gain_pct: float | None = None, straggler_rank: int | None = None) -> dict:
    """One session's score (pure). Keys: status ("no verdict" | "scored"), and per variant the checks
    (True/False, or None when it cannot be judged), the first finding and the planted finding's gain."""
    if findings is None:
        return {"variant": variant, "status": "no verdict"}
    first = findings[0] if findings else None
    out: dict = {"variant": variant, "status": "scored",
                 "first_rule": first.get("rule") if first else None,
                 "first_gain_pct": _gain(first) if first else None}
    if variant == "control":
        worst = max((g for g in map(_gain, findings) if g is not None), default=None)
        out["max_gain_pct"] = worst
        out["control_clean"] = worst is None or worst <= CONTROL_MAX_PCT
        return out
    planted = next((f for f in findings if f.get("rule") == expected_rule), None)
    est = _gain(planted) if planted else None
    out["planted_gain_pct"] = est
    if variant == "defect":
        out["planted_first"] = first is not None and first.get("rule") == expected_rule
        if real_gain_pct is None or est is None:
            out["gain_within"] = False if (real_gain_pct is not None and planted is None) else None
        else:
            out["gain_within"] = abs(est - real_gain_pct) <= GAIN_TOLERANCE_POINTS
        if straggler_rank is not None:
            out["names_straggler"] = bool(out["planted_first"]) and _names_rank(first, straggler_rank)
        return out
    out["fixed_clean"] = planted is None or (est is not None and est < FIXED_MAX_PCT)
    return out


def totals(rows: list[dict]) -> dict:
    """Counts of each check over the rows that could be judged: {check: [passed, judged]}. An excluded program
    (config.Program.excluded) counts for no check but the fixed twin's."""
    t: dict[str, list[int]] = {}
    for r in rows:
        for key in ("planted_first", "gain_within", "fixed_clean", "control_clean", "names_straggler"):
            if r.get("excluded") and key != "fixed_clean":
                continue
            if r.get(key) is not None:
                c = t.setdefault(key, [0, 0])
                c[0] += bool(r[key])
                c[1] += 1
    t["no_verdict"] = [sum(r.get("status") == "no verdict" for r in rows), len(rows)]
    return t


def show_json(session: Path) -> tuple[dict | None, str | None]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        p = subprocess.run([sys.executable, "-m", "kernelscope", "show", str(session), "--json"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, "kernelscope show timed out"
    if p.returncode != 0:
        return None, f"kernelscope show exit {p.returncode}: {p.stderr.strip()[-300:]}"
    try:
        return json.loads(p.stdout), None
    except json.JSONDecodeError as e:
        return None, f"kernelscope show --json printed no JSON ({e})"


def sessions_dir(path: Path, tmp: Path) -> Path:
    if path.is_dir():
        return path / "sessions" if (path / "sessions").is_dir() else path
    with tarfile.open(path) as tar:
        tar.extractall(tmp, filter="data")
    return tmp / "sessions" if (tmp / "sessions").is_dir() else tmp


def _program_info(name: str) -> tuple[str, str | None]:
    """(half, excluded reason) of a program in config.PROGRAMS ("name@N" for a world size N)."""
    sys.path.insert(0, str(HERE))
    try:
        from config import BY_NAME
    finally:
        sys.path.pop(0)
    p = BY_NAME.get(name.split("@")[0])
    return (p.half, p.excluded) if p is not None else ("?", None)


def score_all(sessions: Path, timings: dict) -> list[dict]:
    rows = []
    for name, e in timings.get("programs", {}).items():
        half, excluded = _program_info(name)
        for variant, fname in (e.get("sessions") or {}).items():
            row = {"name": name, "half": half, "category": e.get("category"), "expected_rule": e.get("expected_rule"),
                   "real_gain_pct": e.get("real_gain_pct"), **({"excluded": excluded} if excluded else {})}
            path = sessions / fname if fname else None
            if path is None or not path.exists():
                rows.append({**row, "variant": variant, "status": "no session"})
                continue
            data, err = show_json(path)
            if err:
                rows.append({**row, "variant": variant, "status": err})
                continue
            straggler = e["nproc"] - 1 if e.get("category") == "straggler-rank" else None
            scored = score_case(variant, e.get("expected_rule"), findings_of(data), e.get("real_gain_pct"), straggler)
            reason = not_evaluated_of(data).get(str(e.get("expected_rule")))
            if reason is not None:
                scored["planted_not_evaluated"] = reason
                if variant == "fixed":
                    scored["fixed_clean"] = None  # cannot be judged
            rows.append({**row, **scored})
    return rows


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def markdown(rows: list[dict], t: dict, device: str = "") -> str:
    cols = ("name", "half", "variant", "expected_rule", "status", "first_rule", "planted_gain_pct", "real_gain_pct",
            "planted_first", "gain_within", "fixed_clean", "control_clean", "max_gain_pct", "names_straggler",
            "excluded")
    lines = [f"Whole-program suite{', ' + device if device else ''}", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in cols) + " |" for r in rows]
    for half in sorted({r.get("half") for r in rows}):
        ht = totals([r for r in rows if r.get("half") == half])
        lines += ["", f"Totals, {half} half (passed / judged): "
                  + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in ht.items())]
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- score.py: begin -->", "<!-- score.py: end -->"


def write_results(table: str, path: Path) -> None:
    """Put ``table`` between the BEGIN and END markers of ``path`` (added at the end the first time)."""
    text = path.read_text() if path.exists() else ""
    block = f"{BEGIN}\n{table.rstrip()}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sessions", type=Path, help="sessions.tar.gz from measure.py, or a directory of sessions")
    ap.add_argument("timings", type=Path, help="program_timings.json from measure.py")
    ap.add_argument("--out", type=Path, help="write score.json and score.md here")
    ap.add_argument("--results", type=Path, help="put the table in this file, between its score.py markers "
                    "(benchmarks/diagnosis/RESULTS.md)")
    a = ap.parse_args(argv)
    for p in (a.sessions, a.timings):
        if not p.exists():
            print(f"{p} does not exist", file=sys.stderr)
            return 2
    timings = json.loads(a.timings.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        rows = score_all(sessions_dir(a.sessions, Path(tmp)), timings)
    t = totals(rows)
    md = markdown(rows, t, f"{timings.get('device', '')} {timings.get('date', '')}".strip())
    print(md)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        by_half = {h: totals([r for r in rows if r.get("half") == h]) for h in sorted({r.get("half") for r in rows})}
        (a.out / "score.json").write_text(json.dumps({"device": timings.get("device"), "date": timings.get("date"),
                                                      "recorded": timings.get("recorded"), "rows": rows,
                                                      "totals": t, "totals_by_half": by_half}, indent=1))
        (a.out / "score.md").write_text(md)
    if a.results:
        write_results(md, a.results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
