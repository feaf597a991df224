"""kernelscope's own rules, one module per family; each registers itself in RULES."""
from kernelscope.analyze.rules import compute, launch, memory, occupancy, stalls, tensor  # noqa: F401  (registration)
from kernelscope.analyze.rules.base import RULES, NotEvaluated, Rule, RuleContext

__all__ = ["RULES", "NotEvaluated", "Rule", "RuleContext"]
