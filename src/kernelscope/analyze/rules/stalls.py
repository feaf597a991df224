"""Stall rule: the dominant reason warps wait, with its usual fix."""
from __future__ import annotations

from typing import Any

from kernelscope.analyze import thresholds as th
from kernelscope.analyze.rules.base import (NO_COUNTERS, NotEvaluated, Outcome, RuleContext, finding, headroom_pct,
                                           lacks, rule, value)
from kernelscope.analyze.rule import EXPLAINED
from kernelscope.analyze.warp_state import STALL_MEANING, warp_state


@rule("dominant-stall", "Dominant warp stall reason",
      "min(the reason's share of stall cycles x idle issue slots % (100 - issue slots busy %), "
      "100 - busiest unit % of peak)", symptom=EXPLAINED)
def dominant_stall(ctx: RuleContext) -> Outcome:
    x = ctx.launch
    if x is None:
        return NotEvaluated(dominant_stall.rule_id, NO_COUNTERS)
    view = warp_state(x)
    waiting = [s for s in view.stalls if s.reason not in th.STALL_NOT_WAITING]
    total = sum(float(s.cycles_per_issue.value) for s in waiting)
    if not waiting or total <= 0:
        return NotEvaluated(dominant_stall.rule_id, "the report has no warp stall reasons: "
                            + lacks(x, "stall_long_scoreboard"))
    top = waiting[0]
    share = float(top.cycles_per_issue.value) / total
    if share < th.STALL_DOMINANT_SHARE:
        return None
    evidence: list[tuple[str, Any]] = [(top.cycles_per_issue.raw_name, float(top.cycles_per_issue.value)),
                                       ("sum of waiting stall reasons per issue (derived)", total)]
    busy = value(x, "issue_slots_busy_pct")
    gain = None
    if busy is not None:
        evidence.append((busy[1], busy[0]))
        gain = share * (100.0 - busy[0])
        head = headroom_pct(x, ctx.ceilings)  # hiding latency better cannot take a unit past its peak
        if head is not None:
            gain = min(gain, head[0])
            evidence += head[1]
    name = top.reason.replace("_", " ")
    msg = (f"{100 * share:.0f}% of the cycles warps spend waiting are '{name}' "
           f"({float(top.cycles_per_issue.value):.1f} cycles per issued instruction): "
           f"{STALL_MEANING.get(top.reason, top.reason)}.")
    return finding(dominant_stall, "Warp state", msg, gain, evidence, title=f"Warps wait on '{name}' (dominant stall)")
