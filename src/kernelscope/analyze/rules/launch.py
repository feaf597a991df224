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
    synced = sum(1 for w in ctx.sync_waits_ns or () if w > 0)
    if synced:  # the same note as host-gaps and the verdict's sync finding: a graph cannot hold a synchronize
        evidence.append(("launches after a synchronize call (trace pass: CUDA runtime calls)", synced))
        msg += (f" The host also synchronized before {synced:,} of its launches: remove those synchronizations first "
                "(a CUDA graph cannot hold them).")
    return finding(launch_bound, "Timeline", msg, gain, evidence)


def _host_wait(gap_ns: int, sync_ns: int) -> int:
    """The part of one gap the host caused, classed as the wall-time breakdown classes it (analyze/breakdown.py), so
    a kernel's note and the verdict never disagree: a gap in which a synchronize returned, whole and however short
    (analyze/host_syncs.py: the GPU ran dry and the next launch had not been issued), or a gap longer than
    thresholds.HOST_STALL_GAP_NS without one (the host did other work); else 0 (launch overhead). Whole is an upper
    bound of what removing the synchronize gives back: a loop that then launches ahead may still leave launch
    overhead."""
    if sync_ns > 0:
        return gap_ns
    return gap_ns if gap_ns > th.HOST_STALL_GAP_NS else 0


@rule("host-gaps", "Host gaps: the GPU waits on the host between launches",
      "mean over the kernel's launches of the host wait before it / (median duration + idle gap before it) x 100: "
      "the share of a launch cycle the GPU waits on the host. A host wait is a gap in which a synchronize call "
      "returned (trace pass: CUDA runtime calls), however short, or a gap longer than the host-stall threshold "
      "(thresholds.HOST_STALL_GAP_NS), as the wall-time breakdown classes them; other gaps count 0")
def host_gaps(ctx: RuleContext) -> Outcome:
    gaps = ctx.gaps_before_ns
    if not gaps:
        return NotEvaluated(host_gaps.rule_id, "no timeline gaps before the kernel's launches (one launch, or no "
                            "trace pass)")
    syncs = ctx.sync_waits_ns if ctx.sync_waits_ns is not None else (0,) * len(gaps)
    if ctx.sync_waits_ns is None:  # _host_wait(g, 0) inline: a run's kernel may have a million gaps
        long_gap = th.HOST_STALL_GAP_NS
        waits = [g if g > long_gap else 0 for g in gaps]
        after_sync = 0
    else:
        waits = [_host_wait(g, s) for g, s in zip(gaps, syncs)]
        after_sync = sum(1 for g, s in zip(gaps, syncs) if s > 0 and g > 0)
    n_waits = len(waits) - waits.count(0)
    if n_waits / len(gaps) < th.HOST_GAP_MIN_LAUNCH_SHARE or n_waits < th.HOST_GAP_MIN_WAITS:
        return None
    dur = ctx.median_duration_ns
    if dur is None:
        return NotEvaluated(host_gaps.rule_id, "the kernel's launches have no recorded duration")
    gain = 100.0 * sum(w / (dur + g) for w, g in zip(waits, gaps) if dur + g > 0) / len(gaps)
    evidence: list[tuple[str, Any]] = [
        (f"gaps over {th.HOST_STALL_GAP_NS / 1e6:g} ms, or after a synchronize, before its launches (timeline)",
         n_waits),
        ("gaps before its launches (timeline)", len(gaps)), ("host-wait time (timeline, ns)", sum(waits)),
        ("median duration (trace pass, ns)", dur), ("all idle gaps before its launches (timeline, ns)", sum(gaps))]
    if ctx.sync_waits_ns is not None:
        evidence += [("launches after a synchronize call (trace pass: CUDA runtime calls)", after_sync),
                     ("host time blocked in those calls (trace pass, ns)",
                      sum(s for g, s in zip(gaps, syncs) if s > 0 and g > 0))]
    if after_sync >= n_waits / 2:
        msg = (f"Before {after_sync} of its {len(gaps)} launches the host had called a synchronize (the GPU ran "
               f"dry, then waited for the next launch): {sum(waits) / 1e6:.2f} ms of host wait in all. Remove the "
               "synchronization from the loop (.item(), .cpu(), torch.cuda.synchronize), or move what needs it off "
               "the critical path (pinned memory and non_blocking copies, another stream).")
    else:
        msg = (f"Before {n_waits} of its {len(gaps)} launches the GPU sat idle over {th.HOST_STALL_GAP_NS / 1e6:g} ms "
               f"({sum(waits) / 1e6:.2f} ms in all): the host stopped feeding it (Python or input work between "
               "launches, or a synchronize the trace did not record). Move the host work off the critical path "
               "(a DataLoader with workers, a background thread, pinned memory and non_blocking copies).")
    return finding(host_gaps, "Timeline", msg, gain, evidence)
