"""One rule type for kernelscope's own rules, kernel and program alike, and the one registry of them.

A rule is a small function with a scope:

- ``kernel``: ``check(RuleContext)`` returns a Finding (its gain ``kernel_gain_pct``, a share of the kernel's time),
  a NotEvaluated, or None when it looked and found nothing; analyze/recommend.py runs them on each kernel, with
  NVIDIA's rule results (model.VendorRuleResult, imported data) turned into the same Finding.
- ``program``: ``check(ProgramContext)`` returns a list of Finding (gains shares of the window's wall time)
  and NotEvaluated; analyze/verdict.py runs them once per session.

The verdict ranks program and kernel findings in one list of Finding (scope "program" or "kernel"), each with its
gain as a share of wall time; a kernel's panels show the findings of that list that name it (``kernels``).

Each rule declares what it reads (``inputs``, in words), how its gain is estimated (``gain_formula``), and its
relations to other rules, which the ranking reads from here and nowhere else:

- ``needs``: rules whose fix must be done first for this one's to work (a CUDA graph cannot hold a loop that syncs
  with the host): its finding is listed right after theirs, whatever its gain;
- ``symptom``: 0 for a cause; 1 or more for a generic symptom (higher: more generic): on equal gains it ranks after
  causes; from EXPLAINED up, a specific finding on the same kernel explains it, and the verdict folds it into that
  finding (the dominant stall is why a kernel waits, not a fix of its own);
- ``replaces``: generic rules this one says more precisely on the same evidence (syncs named by operator and line
  replace the generic sync finding): where this one fires, their findings are left out.

To add a rule: write its function in the module of its family (analyze/rules/<family>.py for a kernel rule,
analyze/program_rules.py for a program rule) and decorate it with ``rules.base.rule`` or
``program_rules.program_rule``; both register it here. Nothing else lists rules.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kernelscope.model.vendor_rule import VendorRuleResult

KERNEL, PROGRAM = "kernel", "program"
KERNEL_TIME = "kernels"  # analyze/breakdown.KERNELS, the category whose time a kernel finding gives back (breakdown
#                          reads the rules: it cannot be imported here)
EXPLAINED = 2  # a symptom this generic is folded into a specific finding on the same kernel (module docstring)


@dataclass(frozen=True)
class Rule:
    rule_id: str
    title: str
    scope: str  # KERNEL | PROGRAM
    inputs: str  # the data it reads, in words
    gain_formula: str  # how its gain is estimated, in words ("" where each finding states its own)
    check: Callable[[Any], Any]
    needs: tuple[str, ...] = ()  # rules whose fix must come first (module docstring)
    symptom: int = 0  # 0: a cause; 1+: a generic symptom a specific finding explains (module docstring)
    replaces: tuple[str, ...] = ()  # generic rules this one states more precisely (module docstring)


@dataclass(frozen=True)
class Finding:
    """What a rule found, with its evidence, fix and gain: a program rule's finding (gain a share of the window's wall
    time), or a kernel rule's or NVIDIA's rule's (gain a share of the kernel's time, ``kernel_gain_pct``; the
    verdict gives it a share of wall time when it ranks it against the program findings)."""

    rule: str  # rule id (a registered Rule's) or NVIDIA's rule name
    category: str  # the breakdown category whose time it would give back (analyze/breakdown.CATEGORIES)
    title: str
    message: str
    gain_pct: float | None  # % of the window's wall time; None: a kernel finding the verdict has not ranked
    gain_formula: str
    evidence: tuple[tuple[str, Any], ...]  # (what, value): the numbers that made the rule fire
    fix: str
    kernel: str | None = None  # the kernel it names, when it names one (short name or label, as shown)
    rank: int | None = None
    kernels: tuple[str, ...] = ()  # full names of every kernel it is about: their panels show it
    scope: str = PROGRAM  # PROGRAM | KERNEL: the rule's scope
    source: str = "kernelscope"  # "kernelscope" | "ncu-rule" (NVIDIA's rule, imported from the ncu report)
    kernel_gain_pct: float | None = None  # kernel findings: % of the kernel's own time
    explains: tuple[str, ...] = ()  # generic findings (rule ids) folded into this one
    estimate_type: str | None = None  # kernel findings: "global" (of the kernel's time) | "local" (of one unit's
    #                                   work, NVIDIA's) | None (no estimate)
    section: str = ""  # kernel findings: the report section (NVIDIA's) or the analysis topic (kernelscope's)
    severity: str = "optimization"  # "optimization" | "warning" | "error" | "info"
    rule_title: str = ""  # the rule's own name (``title`` may be more specific: the stall it names)


@dataclass(frozen=True)
class NotEvaluated:
    """A rule that could not run, and the data it lacked."""

    rule: str
    reason: str


def vendor_finding(v: VendorRuleResult) -> Finding:
    """NVIDIA's rule result, as imported from its report, as a kernel Finding: its estimate (% of the kernel's time,
    or of one unit's work where ``local``) is the kernel gain it claims; its fix is its message."""
    return Finding(v.rule_id, KERNEL_TIME, v.title, v.message, None, "Nsight Compute's estimated speedup", v.evidence,
                   v.message, scope=KERNEL, source=v.source, kernel_gain_pct=v.speedup_pct,
                   estimate_type=v.speedup_type, section=v.section, severity=v.severity, rule_title=v.name)


REGISTRY: dict[str, list[Rule]] = {KERNEL: [], PROGRAM: []}


def register(r: Rule) -> Rule:
    if any(x.rule_id == r.rule_id for x in REGISTRY[r.scope]):
        raise ValueError(f"rule {r.rule_id!r} is registered twice")
    REGISTRY[r.scope].append(r)
    return r


def rule_by_id(rule_id: str) -> Rule | None:
    return next((r for rs in REGISTRY.values() for r in rs if r.rule_id == rule_id), None)


def prerequisites() -> dict[str, tuple[str, ...]]:
    """Rule -> the rules whose fix must come first (their ``needs``)."""
    return {r.rule_id: r.needs for rs in REGISTRY.values() for r in rs if r.needs}


def replaced_by() -> dict[str, set[str]]:
    """Rule -> the rules that state it more precisely (their ``replaces``)."""
    out: dict[str, set[str]] = {}
    for rs in REGISTRY.values():
        for r in rs:
            for generic in r.replaces:
                out.setdefault(generic, set()).add(r.rule_id)
    return out


def symptoms() -> dict[str, int]:
    """Rule -> how generic a symptom it is (rules that are causes left out)."""
    return {r.rule_id: r.symptom for rs in REGISTRY.values() for r in rs if r.symptom}


def explained() -> frozenset[str]:
    """The symptoms a specific finding on the same kernel explains (``symptom`` >= EXPLAINED)."""
    return frozenset(r for r, s in symptoms().items() if s >= EXPLAINED)
