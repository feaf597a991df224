"""Launch rules, from the timeline: kernels too short for their launches, and the host
stopping the GPU (a synchronize or host work between launches)."""
from __future__ import annotations

from typing import Any

from kernelscope.analyze import thresholds as th
from kernelscope.analyze.bound import LAUNCH
from kernelscope.analyze.rules.base import NotEvaluated, Outcome, RuleContext, finding, rule


@rule("launch-bound", "Launch-bound: the kernel runs shorter than its launch",
      "median idle gap before a launch / (that gap + median kernel duration) x 100: the share of each launch "
      "cycle the GPU waits for the CPU")
def launch_bound(ctx: RuleContext) -> Outcome:
    b = ctx.bound
    if b.bound != LAUNCH:
        return None
    ev = dict(b.evidence)
    dur, gap = ev.get("median duration (trace pass)"), ev.get("median idle gap before launch")
    if not isinstance(dur, (int, float)) or not isinstance(gap, (int, float)) or dur + gap <= 0:
        return NotEvaluated(launch_bound.rule_id, "the launch-bound classification carries no duration and gap")
    launches = ctx.kernel.launches
    if launches < th.LAUNCH_BOUND_MIN_LAUNCHES:
        return None
    gain = 100.0 * gap / (gap + dur)
    evidence: list[tuple[str, Any]] = [("median duration (trace pass, ns)", dur),
                                       ("median idle gap before launch (timeline, ns)", gap),
                                       ("launches (trace pass)", launches)]
    msg = (f"{launches:,} launches of a kernel that runs a median {dur / 1e3:.1f} µs, with the GPU idle a median "
           f"{gap / 1e3:.1f} µs before each: the CPU cannot launch it as fast as the GPU runs it. Do more work per "
           "launch (one kernel over the whole batch, fuse neighbours), or replay the sequence as a CUDA graph "
           "(torch.cuda.graphs, torch.compile mode='reduce-overhead').")
    return finding(launch_bound, "Timeline", msg, gain, evidence)


@rule("host-gaps", "Host gaps: the GPU waits on the host between launches",
      "host-wait gaps before the kernel's launches / (its GPU time + every idle gap before its launches) x 100")
def host_gaps(ctx: RuleContext) -> Outcome:
    gaps = ctx.gaps_before_ns
    if not gaps:
        return NotEvaluated(host_gaps.rule_id, "no timeline gaps before the kernel's launches (one launch, or no "
                            "trace pass)")
    waits = [g for g in gaps if g >= th.HOST_WAIT_GAP_NS]
    share_of_launches = len(waits) / len(gaps)
    if share_of_launches < th.HOST_GAP_MIN_LAUNCH_SHARE or len(waits) < th.HOST_GAP_MIN_WAITS:
        return None
    busy = ctx.kernel.total_ns
    gain = 100.0 * sum(waits) / (busy + sum(gaps))
    evidence: list[tuple[str, Any]] = [
        (f"gaps of {th.HOST_WAIT_GAP_NS / 1e3:.0f} µs or more before its launches (timeline)", len(waits)),
        ("gaps before its launches (timeline)", len(gaps)), ("host-wait time (timeline, ns)", sum(waits)),
        ("kernel GPU time (trace pass, ns)", busy), ("all idle gaps before its launches (timeline, ns)", sum(gaps))]
    msg = (f"Before {len(waits)} of its {len(gaps)} launches the GPU sat idle {th.HOST_WAIT_GAP_NS / 1e3:.0f} µs or "
           f"more ({sum(waits) / 1e6:.2f} ms in all): the host stopped feeding it (a synchronize, .item(), .cpu() or "
           "Python work between launches). Remove the synchronization from the loop, or move the host work off the "
           "critical path (pinned memory and non_blocking copies, another stream).")
    return finding(host_gaps, "Timeline", msg, gain, evidence)
