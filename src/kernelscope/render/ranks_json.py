"""`show --json`: the `ranks` and `collectives` lists of a session (one rank for a one-process session).

collectives: in time order per process group, each with `name`, `process_group`, `bytes`,
`straggler_rank` and `ranks`: {"<rank>": {`start_ns`, `end_ns`, `wait_ns`}}, plus the index in its
group, the nccl-tests operation and bandwidths (with their formulas).
"""
from __future__ import annotations

from typing import Any

from kernelscope.analyze.collectives import ALGBW_FORMULA, BUSBW_FORMULA, WAIT_FORMULA, WARMUP_RULE, CollectiveRow
from kernelscope.analyze.ranks import IMBALANCE_FORMULA, OVERLAP_FORMULA, RanksReport


def _collective(row: CollectiveRow) -> dict[str, Any]:
    return {
        "name": row.name, "process_group": row.process_group, "index": row.index, "operation": row.operation,
        "bytes": row.bytes, **({"bytes_missing_reason": row.bytes_missing_reason} if row.bytes is None else {}),
        "straggler_rank": row.straggler_rank,
        "ranks": {str(t.rank): {"start_ns": t.start_ns, "end_ns": t.end_ns, "wait_ns": t.wait_ns} for t in row.ranks},
        "spread_ns": row.spread_ns, "transfer_ns": row.transfer_ns,
        "algbw_gb_s": None if row.algbw_gb_s is None else round(row.algbw_gb_s, 3),
        "busbw_gb_s": None if row.busbw_gb_s is None else round(row.busbw_gb_s, 3),
        **({"bandwidth_missing_reason": row.bandwidth_missing_reason} if row.busbw_gb_s is None else {}),
    }


def ranks_json(report: RanksReport) -> dict[str, Any]:
    """The keys `show --json` gains: ranks, collectives, and how they were derived."""
    c, s = report.collectives, report.summary
    run = c.run_straggler
    return {
        "ranks": [{**r.info.to_dict(), "kernels": r.kernels, "span_ns": r.span_ns, "compute_ns": r.compute_ns,
                   "communication_ns": r.communication_ns, "idle_ns": r.idle_ns, "overlap_ns": r.overlap_ns,
                   "overlap_pct": None if r.overlap_pct is None else round(r.overlap_pct, 3),
                   "wait_ns": r.wait_ns, "collectives": r.collectives} for r in s.ranks],
        "collectives": [_collective(row) for row in c.rows],
        "ranks_summary": {
            "compute_imbalance_pct": None if s.compute_imbalance_pct is None else round(s.compute_imbalance_pct, 3),
            "straggler_rank": None if run is None else run.rank,
            "straggler": None if run is None else {"rank": run.rank, "collectives": run.collectives,
                                                   "caused_wait_ns": run.caused_wait_ns, "sentence": run.sentence,
                                                   "warmup_collectives": run.warmup_collectives,
                                                   "warmup_wait_ns": run.warmup_wait_ns},
            "stragglers": [{"rank": x.rank, "collectives": x.collectives, "caused_wait_ns": x.caused_wait_ns,
                            "warmup_collectives": x.warmup_collectives, "warmup_wait_ns": x.warmup_wait_ns}
                           for x in c.stragglers],
            "straggler_rule": WARMUP_RULE,
            "collectives_missing_reason": c.missing_reason,
            "notes": list(s.notes),
            "formulas": {"wait_ns": WAIT_FORMULA, "algbw_gb_s": ALGBW_FORMULA, "busbw_gb_s": BUSBW_FORMULA,
                         "overlap_pct": OVERLAP_FORMULA, "compute_imbalance_pct": IMBALANCE_FORMULA},
        },
    }
