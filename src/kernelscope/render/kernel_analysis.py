"""Panel 10, Profiling summary: duration and spread, throughput, % of peak, roofline
position, bottleneck, and ranked recommendations with their evidence, per kernel."""
from __future__ import annotations

from collections import defaultdict

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.bound import UNKNOWN, Bound
from kernelscope.analyze.analysis import KernelAnalysis
from kernelscope.analyze.recommend import Recommendation
from kernelscope.analyze.vendor_rules import AGREE, DIFFER, KERNELSCOPE_ONLY, NO_NVIDIA_RULE, RuleComparison
from kernelscope.model import Metric
from kernelscope.render.fmt import duration, number, plural, si
from kernelscope.render.counter_panels import plain
from kernelscope.render.fit import fitted_panel
from kernelscope.render.verdict import IN_VERDICT_NOTE, IN_VERDICT_TITLE, in_verdict_lines

def rate_cell(m: Metric, with_reason: bool = True) -> str:
    if m.is_missing:
        return f"N/A ({m.missing_reason})" if with_reason else "N/A"
    if m.unit == "%":
        return f"{float(m.value):.1f}%"
    return si(float(m.value), m.unit)


def duration_text(k: KernelAnalysis) -> str:
    """The Duration line: median over the launches and their spread, with where the times came from."""
    d = k.durations
    spread = ("one launch: no spread" if d.spread_ns is None else
              f"min {duration(d.min_ns)}, max {duration(d.max_ns)}, IQR {duration(d.q3_ns - d.q1_ns)}")
    launches = f"{d.launches} launch{'es' if d.launches > 1 else ''}"
    return f"median {duration(d.median_ns)} over {launches} ({spread}; {d.source})"


def throughput_parts(k: KernelAnalysis, formula: str = "({})") -> list[str]:
    """Each throughput as "label value (formula)", or N/A with its reason unless the missing list says it."""
    known = {why for _, why in k.missing}
    out = []
    for label, m in k.throughput:
        if m.is_missing:
            out.append(f"{label} N/A" + ("" if m.missing_reason in known else f" ({m.missing_reason})"))
        else:
            out.append(f"{label} {rate_cell(m)}" + (" " + formula.format(m.formula) if m.formula else ""))
    return out


def pct_of_peak_text(k: KernelAnalysis, known: set, note: str = "({})", sep: str = "; ") -> str:
    """ncu's own % of peak, then the % of the measured ceilings (after ``sep``), or N/A."""
    ncu = [(label, m) for label, m in k.pct_of_peak if "(ncu)" in label]
    if all(m.is_missing for _, m in ncu):
        peaks = "N/A (no counters)" if ncu and ncu[0][1].missing_reason in known else "N/A"
    else:
        peaks = " · ".join(f"{label.replace(' (ncu)', '')} {rate_cell(m, False)}" for label, m in ncu)
        peaks += " " + note.format("ncu's own % of peak")
    measured = [(label, m) for label, m in k.pct_of_peak if "(ncu)" not in label]
    if all(m.is_missing for _, m in measured):
        return peaks + " · measured ceilings N/A"
    return peaks + sep + " · ".join(f"{label} {rate_cell(m, False)}" for label, m in measured)


def roofline_text(k: KernelAnalysis, known: set) -> str:
    """Intensity, FLOP rate and % of the roof on its side, or N/A (with the reason unless listed already)."""
    p = k.roofline
    if p.intensity.is_missing:
        return "N/A" + ("" if p.intensity.missing_reason in known else f" ({p.intensity.missing_reason})")
    roof = f"{float(p.intensity.value):.3g} FLOP/byte · {rate_cell(p.flop_rate, False)}"
    return roof + (f" · {float(p.pct_of_roof.value):.0f}% of the {p.side} roof" if not p.pct_of_roof.is_missing
                   else " · roof N/A")


def bound_text(b: Bound) -> str:
    head = b.bound if not b.limiter or b.bound == UNKNOWN else f"{b.bound} ({b.limiter})"
    text = f"[bold]{head}[/]: {b.reason}" + (f" [dim](basis: {b.basis})[/]" if b.basis else "")
    if b.inside is not None:
        text += f"; inside the kernel: {b.inside.bound}, {b.inside.reason}"
    return text


def _ncu_pct(pct: float | None, kind: str | None) -> str:
    return "no estimate" if pct is None else f"{pct:.0f}% ({kind or 'no type'})"


def evidence_text(r: Recommendation) -> str:
    parts = [f"{name} = {number(value)}" for name, value in r.finding.evidence]
    text = "; ".join(parts) if parts else "(NVIDIA's rule result; its metrics are in the report)"
    if r.ncu_estimates:
        ests = ", ".join(f"{rule}{' (' + title + ')' if title else ''} " + _ncu_pct(pct, kind)
                         for rule, title, pct, kind in r.ncu_estimates)
        text += f"; same cause per NVIDIA's rules: {ests}"
    if r.merged:
        text += f"; also covers kernelscope's {', '.join(r.merged)}"
    if r.vendor_pct is not None:
        text += (f"; NVIDIA's own estimate {r.vendor_pct:.0f}%" if r.gain_pct is not None else
                 f"; NVIDIA's estimate {r.vendor_pct:.0f}% is not confirmed by kernelscope on the same evidence")
    return text


def gain_cell(r: Recommendation) -> str:
    if r.gain_pct is not None:
        return f"{r.gain_pct:.1f}%"
    if r.local_pct is not None:
        return f"({r.local_pct:.0f}% local)"
    if r.vendor_pct is not None:
        return f"(ncu {r.vendor_pct:.0f}%)"  # NVIDIA's estimate, not a kernel gain: the basis line says why
    return "—"


def no_recommendation_text(rules_run: int, in_verdict: bool = False) -> str:
    """Why a kernel has no recommendation of its own: no rule could run on its data, or those that ran found nothing
    (``in_verdict``: beyond the verdict's findings shown above it)."""
    head = "none beyond the verdict's above" if in_verdict else "none"
    if rules_run == 0:
        return f"{head}: no kernelscope kernel rule could run on this kernel's data (the reasons are below)."
    return (f"{head}: the {plural(rules_run, 'kernelscope kernel rule')} that could run on the data collected found "
            "nothing.")


class RecommendationsTable:
    def __init__(self, recs: tuple[Recommendation, ...], limit: int = 5, show_kernel: bool = False) -> None:
        self.recs, self.limit, self.show_kernel = recs, limit, show_kernel

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        t = Table(box=None, padding=(0, 1), expand=True, show_header=True)
        t.add_column("#", justify="right", no_wrap=True)
        t.add_column("Gain", justify="right", no_wrap=True)
        t.add_column("Source", no_wrap=True)
        if self.show_kernel:
            t.add_column("Kernel", max_width=24, overflow="fold")  # a long name folds, never loses its end
        t.add_column("Finding and evidence", overflow="fold", ratio=1)
        for i, r in enumerate(self.recs[: self.limit], 1):
            src = "kernelscope" if r.source == "kernelscope" else "ncu rule"
            title = r.finding.title or r.finding.rule_title or r.finding.rule
            sentences = 3 if r.source == "kernelscope" else 1
            body = (f"[bold]{title}[/]: {plain(r.finding.message, sentences=sentences)}\n"
                    f"[dim]evidence: {evidence_text(r)}[/]")
            cells = [str(i), gain_cell(r), src] + ([r.short_name] if self.show_kernel else []) + [body]
            t.add_row(*cells)
        yield t
        if len(self.recs) > self.limit:
            yield (f"[dim]… and {plural(len(self.recs) - self.limit, 'more finding')} with smaller or no estimated "
                   "gain[/]")
        bases = dict.fromkeys(f"{r.finding.rule}: {r.gain_basis}" if r.source == "kernelscope" else r.gain_basis
                              for r in self.recs[: self.limit]
                              if r.gain_pct is not None or r.local_pct is not None or r.vendor_pct is not None)
        if bases:
            yield "[dim]Gain estimates: " + " · ".join(bases) + "[/]"


class SummaryPanel:
    """Panel 10: the kernel's numbers, the verdict's findings that name it (``in_verdict``: (place, finding) from
    SessionVerdict.for_kernel), then its own rules' detail."""

    def __init__(self, k: KernelAnalysis, limit: int = 5, in_verdict: tuple = ()) -> None:
        self.k, self.limit, self.in_verdict = k, limit, in_verdict

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        k = self.k
        g = Table.grid(padding=(0, 2))
        g.add_column(style="bold", no_wrap=True)
        g.add_column(overflow="fold")
        if k.verdict:
            g.add_row("Verdict", f"[bold]{k.verdict}[/]")  # the view's copy is already plain text
        g.add_row("Duration", duration_text(k))
        g.add_row("Throughput", " · ".join(throughput_parts(k, "[dim]({})[/]")))
        known = {why for _, why in k.missing}  # reasons the missing list already gives
        g.add_row("% of peak", pct_of_peak_text(k, known, "[dim]({})[/]", "\n"))
        g.add_row("Roofline", roofline_text(k, known))
        g.add_row("Bottleneck", bound_text(k.bound))
        recs = k.recommendations
        parts: list = [g]
        if self.in_verdict:
            parts.append(f"[bold]{IN_VERDICT_TITLE}[/] [dim]({IN_VERDICT_NOTE})[/]")
            v = Table.grid(padding=(0, 1))
            v.add_column(overflow="fold")
            for i, f in self.in_verdict:
                first, *rest = in_verdict_lines(i, f)
                v.add_row(f"[bold]{first}[/]" + "".join(f"\n[dim]{line}[/]" for line in rest))
            parts.append(v)
        if recs.recommendations:
            parts.append("[bold]Recommendations[/] [dim](best estimated gain first; gain = share of this kernel's "
                         "time a fix could save)[/]")
            parts.append(RecommendationsTable(recs.recommendations, self.limit))
        else:
            parts.append(f"[bold]Recommendations[/]: {no_recommendation_text(recs.rules_run, bool(self.in_verdict))}")
        parts.append(VendorComparisonList(k.nvidia_comparison, self.limit))
        parts.append(MissingList(k))
        yield fitted_panel(parts, f"Profiling summary · {k.kernel.label}", options.max_width)


def comparison_line(c: RuleComparison) -> Text:
    """One cause: kernelscope's conclusion, NVIDIA's findings, and why they differ (text from the report is
    plain Text, never markup)."""
    ours = c.kernelscope + ("" if c.kernelscope_gain_pct is None else f" ({c.kernelscope_gain_pct:.0f}%)")
    theirs = ", ".join(f"{rule}" + ("" if pct is None else f" {pct:.0f}% {kind or ''}".rstrip())
                       for rule, _, pct, kind in c.nvidia) or "no finding"
    return Text.assemble((c.cause, "bold"), f": kernelscope {ours}; NVIDIA {theirs}. ",
                         (plain(c.explanation), "dim"))


def worth_showing(c: RuleComparison) -> bool:
    """A disagreement a reader acts on: kernelscope could not run, NVIDIA estimates a share of the kernel's time
    (a "local" estimate is of one unit's work), or only kernelscope names a cause NVIDIA has rules for."""
    if c.agreement == KERNELSCOPE_ONLY:
        return c.explanation != NO_NVIDIA_RULE
    return c.kernelscope == "not evaluated" or c.agreement == DIFFER or any(
        kind == "global" for _, _, _, kind in c.nvidia)


class VendorComparisonList:
    """Where NVIDIA's rules and kernelscope's disagree on a cause the kernel's findings name, and why (causes only
    NVIDIA judges are ranked in the recommendations with their basis)."""

    def __init__(self, rows: tuple[RuleComparison, ...], limit: int = 5) -> None:
        self.rows = [c for c in rows if c.agreement != AGREE and c.kernelscope != "no rule" and worth_showing(c)]
        self.limit = limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.rows:
            return
        yield "[bold]NVIDIA's rules beside kernelscope's[/] [dim](where they differ)[/]"
        for c in self.rows[: self.limit]:
            yield Text.assemble("· ", comparison_line(c))
        if len(self.rows) > self.limit:
            yield f"[dim]… and {plural(len(self.rows) - self.limit, 'more cause')}[/]"


class MissingList:
    """What could not be shown or evaluated, each reason once."""

    def __init__(self, k: KernelAnalysis) -> None:
        self.k = k

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        by_reason: dict[str, list[str]] = defaultdict(list)
        for what, why in self.k.missing:
            by_reason[why].append(what)
        for n in self.k.recommendations.not_evaluated:
            by_reason[n.reason].append(f"rule {n.rule}")
        if not by_reason:
            return
        t = Table.grid(padding=(0, 1))
        t.add_column(no_wrap=True)
        t.add_column(overflow="fold")
        for why, whats in by_reason.items():
            t.add_row("·", f"{', '.join(whats)}: {why}")
        yield "[dim]Not shown or not evaluated:[/]"
        yield t
