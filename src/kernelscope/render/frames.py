"""A session and its report as pandas DataFrames, for notebooks: one row per kernel, per launch, per
counter-pass launch (one column per raw ncu metric name) and per collective. pandas is an optional extra
(`pip install 'kernelscope[pandas]'`); it is imported here only, when a frame is asked for.

Columns are snake_case with the unit in the name where it has one (``total_ns``, ``sm_ncu_pct``), a share is
a percentage (``_pct``), never a bare 0-1 fraction. Values are the collectors' own; a missing one is NaN in a
number column and None in any other, never both, its reason in ``df.attrs["missing"]``. Every column that holds
a number has its unit in ``df.attrs["units"]`` (an index or id says so)."""
from __future__ import annotations

import re
from typing import Any

PANDAS_MISSING = "DataFrames need pandas, which this Python does not have: pip install 'kernelscope[pandas]'"
COLLECTIVE_COLUMNS = ("process_group", "index", "collective", "operation", "rank", "host", "device_index", "kernel",
                      "start_ns", "end_ns", "duration_ns", "wait_ns", "last_to_arrive", "spread_ns", "bytes",
                      "algbw_gb_s", "busbw_gb_s")
MEMORY_COLUMNS = ("event", "t_ns", "action", "address", "size_bytes", "allocated_bytes", "reserved_bytes", "frame",
                  "stack")


def _pd():
    try:
        import pandas
    except ImportError:
        raise ImportError(PANDAS_MISSING) from None
    return pandas


def column_name(label: str, unit: str = "") -> str:
    """A column for a labelled value: snake_case words, then the unit ('SM (ncu)', '%' -> sm_ncu_pct;
    'compute', 'FLOP/s' -> compute_flop_per_s)."""
    unit_word = {"%": "pct", "ns": "ns", "byte": "bytes"}.get(unit, unit.replace("/", " per "))
    words = re.findall(r"[a-z0-9]+", f"{label} {unit_word}".lower())
    return "_".join(words)


def _frame(rows: list[dict[str, Any]], columns: list[str], units: dict[str, str], missing: dict[str, str]):
    pd = _pd()
    df = pd.DataFrame(rows, columns=columns)
    for c in df.columns:  # one marker for a missing value per column: NaN among numbers, None among the rest
        if df[c].dtype == object:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    df.attrs["units"] = {k: v for k, v in units.items() if k in df.columns}
    df.attrs["missing"] = missing
    return df


def kernels_df(report):
    """One row per kernel of the session (analyze.report.Report: every kernel is in report.analysis)."""
    rows, units, missing = [], dict(KERNEL_UNITS), {}
    for a in report.analysis.kernels:
        k = a.kernel
        c = k.configs[0]
        occ = c.occupancy
        row = {"kernel": k.name, "short_name": k.short_name, "label": k.label, "launches": k.launches,
               "total_ns": k.total_ns, "mean_ns": k.mean_ns, "median_ns": k.median_ns, "min_ns": k.min_ns,
               "max_ns": k.max_ns, "share_of_kernel_time_pct": 100.0 * k.share_of_kernel_time,
               "configs": len(k.configs), "grid": c.config.grid, "block": c.config.block,
               "registers_per_thread": c.config.registers_per_thread,
               "shared_memory_per_block_bytes": c.config.shared_memory_per_block_bytes,
               "theoretical_occupancy_pct": occ.theoretical_occupancy_pct if occ else None,
               "waves_per_sm": c.waves_per_sm, "bound": a.bound.bound, "limiter": a.bound.limiter,
               "verdict": a.verdict, "profiled_launches": a.profiled_launches, "regions": k.regions}
        for label, m in a.throughput + a.pct_of_peak:
            col = column_name(label, m.unit)
            row[col] = None if m.is_missing else m.value
            units[col] = m.unit
            if m.is_missing:
                missing.setdefault(col, str(m.missing_reason))
        rows.append(row)
    columns = list(rows[0]) if rows else ["kernel", "launches", "total_ns"]
    return _frame(rows, columns, units, missing)


KERNEL_UNITS = {"launches": "launch", "total_ns": "ns", "mean_ns": "ns", "median_ns": "ns", "min_ns": "ns",
                "max_ns": "ns", "share_of_kernel_time_pct": "% of all kernel time", "configs": "configuration",
                "grid": "block (x, y, z)", "block": "thread (x, y, z)", "registers_per_thread": "register/thread",
                "shared_memory_per_block_bytes": "byte/block", "theoretical_occupancy_pct": "%",
                "waves_per_sm": "wave", "profiled_launches": "launch"}


LAUNCH_COLUMNS = ("launch", "kernel", "rank", "start_ns", "duration_ns", "grid_x", "grid_y", "grid_z", "block_x",
                  "block_y", "block_z", "stream", "device_index", "correlation_id", "regions", "counter_pass",
                  "instrumented", "scoped")
LAUNCH_UNITS = {"launch": "index", "rank": "index", "start_ns": "ns", "duration_ns": "ns", "grid_x": "block",
                "grid_y": "block", "grid_z": "block", "block_x": "thread", "block_y": "thread", "block_z": "thread",
                "stream": "id", "device_index": "index", "correlation_id": "id"}


def _metric_column(key: str) -> str:
    """A launch metric's column: its key, or metric_<key> where the key is also a launch field (the counter
    pass's own duration_ns is not the trace pass's)."""
    return f"metric_{key}" if key in LAUNCH_COLUMNS else key


def launches_df(session):
    """One row per launch, in session order: configuration, timing and every model metric by its key."""
    keys: dict[str, str] = {}
    for x in session.launches:
        for key, m in x.metrics.items():
            keys.setdefault(_metric_column(key), m.unit)
    rows, missing = [], {}
    for i, x in enumerate(session.launches):
        row = {"launch": i, "kernel": x.kernel, "rank": x.rank, "start_ns": x.start_ns, "duration_ns": x.duration_ns,
               "grid_x": x.grid[0], "grid_y": x.grid[1], "grid_z": x.grid[2], "block_x": x.block[0],
               "block_y": x.block[1], "block_z": x.block[2], "stream": x.stream, "device_index": x.device_index,
               "correlation_id": x.correlation_id, "regions": tuple(x.regions), "counter_pass": bool(x.counters),
               "instrumented": x.block_records is not None, "scoped": x.scopes is not None}
        for key, m in x.metrics.items():
            row[_metric_column(key)] = m.value
            if m.is_missing:
                missing.setdefault(_metric_column(key), str(m.missing_reason))
        op = session.operators.of_launch(x.correlation_id) if session.operators is not None else None
        row.update({"operator": None if op is None else op.name, "operator_inputs": None if op is None else
                    op.shapes_text or None, "python_line": None if op is None else op.python_line})
        rows.append(row)
    if session.operators is None:
        for c in ("operator", "operator_inputs", "python_line"):
            missing[c] = "the session has no operators (a trace with CPU ops, record_shapes and with_stack)"
    if not any(x.rank is not None for x in session.launches):  # a one-process session: a rank of None says why
        missing["rank"] = "a one-process session: its launches carry no rank"
    columns = list(LAUNCH_COLUMNS) + ["operator", "operator_inputs", "python_line"] + sorted(keys)
    return _frame(rows, columns, {**LAUNCH_UNITS, **keys}, missing)


OPERATOR_UNITS = {"kernel_ns": "ns", "flops": "FLOP", "bytes": "byte", "flop_per_s": "FLOP/s",
                  "byte_per_s": "byte/s", "pct_of_compute_ceiling": "%", "pct_of_bandwidth_ceiling": "%"}


def operators_df(report):
    """One row per operator configuration (analyze.operators), most kernel time first."""
    ops = report.operators
    rows, missing = [], {}
    for r in ops.rows if ops is not None else ():
        row = {"operator": r.name, "outer": r.outer, "inputs": r.shapes or None, "python_line": r.python_line,
               "modules": r.modules, "calls": r.calls, "launches": r.launches, "kernel_ns": r.kernel_ns,
               "kernels": r.kernels, "formula": r.formula, "flops": r.flops, "bytes": r.bytes}
        for col, m in (("flop_per_s", r.flops_per_s), ("byte_per_s", r.bytes_per_s),
                       ("pct_of_compute_ceiling", r.pct_of_compute_ceiling),
                       ("pct_of_bandwidth_ceiling", r.pct_of_bandwidth_ceiling)):
            row[col] = None if m.is_missing else float(m.value)
            if m.is_missing:
                missing.setdefault(col, str(m.missing_reason))
        rows.append(row)
    if ops is not None and ops.missing_reason:
        missing["operator"] = ops.missing_reason
    columns = ["operator", "outer", "inputs", "python_line", "modules", "calls", "launches", "kernel_ns", "kernels",
               "formula", "flops", "bytes", "flop_per_s", "byte_per_s", "pct_of_compute_ceiling",
               "pct_of_bandwidth_ceiling"]
    return _frame(rows, columns, OPERATOR_UNITS, missing)


def counters_df(session):
    """One row per launch the counter pass (ncu) measured; one column per raw ncu metric name, as ncu names it."""
    names: dict[str, str] = {}
    rows, missing = [], {}
    occurrence: dict[str, int] = {}
    for i, x in enumerate(session.launches):
        if not x.counters:
            continue
        n = occurrence[x.kernel] = occurrence.get(x.kernel, -1) + 1
        row: dict[str, Any] = {"launch": i, "kernel": x.kernel, "occurrence": n}
        for raw, m in x.counters.items():
            names.setdefault(raw, m.unit)
            row[raw] = m.value
            if m.is_missing:
                missing.setdefault(raw, str(m.missing_reason))
        rows.append(row)
    return _frame(rows, ["launch", "kernel", "occurrence"] + sorted(names),
                  {"launch": "index", "occurrence": "index", **names}, missing)


def collectives_df(session, ranks_report):
    """One row per collective and rank (analyze.ranks.RanksReport: collectives matched across ranks): when the rank
    arrived (its NCCL kernel's start), ended and waited for the last one; the message bytes and nccl-tests'
    bandwidths of the collective, repeated on each of its ranks' rows."""
    info = {r.rank: r for r in session.ranks}
    rows, missing = [], {}
    c = ranks_report.collectives if ranks_report is not None else None
    if c is None or c.missing_reason:
        missing["collective"] = c.missing_reason if c is not None else "the report has no ranks"
    for row in (c.rows if c is not None else ()):
        if row.bytes_missing_reason:
            missing.setdefault("bytes", row.bytes_missing_reason)
        if row.bandwidth_missing_reason:
            missing.setdefault("busbw_gb_s", row.bandwidth_missing_reason)
        for t in row.ranks:
            r = info.get(t.rank)
            rows.append({"process_group": row.process_group, "index": row.index, "collective": row.name,
                         "operation": row.operation, "rank": t.rank, "host": r.host if r else None,
                         "device_index": r.device_index if r else None, "kernel": t.kernel, "start_ns": t.start_ns,
                         "end_ns": t.end_ns, "duration_ns": t.end_ns - t.start_ns, "wait_ns": t.wait_ns,
                         "last_to_arrive": t.rank == row.straggler_rank, "spread_ns": row.spread_ns,
                         "bytes": row.bytes, "algbw_gb_s": row.algbw_gb_s, "busbw_gb_s": row.busbw_gb_s})
    units = {"index": "index", "rank": "index", "device_index": "index", "start_ns": "ns", "end_ns": "ns",
             "duration_ns": "ns", "wait_ns": "ns", "spread_ns": "ns", "bytes": "byte", "algbw_gb_s": "GB/s",
             "busbw_gb_s": "GB/s"}
    return _frame(rows, list(COLLECTIVE_COLUMNS), units, missing)


def memory_df(history, series, reason: str | None = None):
    """One row per caching-allocator event of ``run --memory`` (model.memory.MemoryHistory), with the bytes
    allocated and reserved just after it (analyze.memory.AllocatorSeries) and its innermost Python frame.
    ``history`` None: an empty frame, ``reason`` in attrs["missing"]."""
    rows = []
    if history is not None:
        for i, (t, code, addr, size, sid) in enumerate(zip(history.t_ns, history.action, history.address,
                                                            history.size, history.stack)):
            frames = tuple(history.stacks[sid]) if sid >= 0 else ()
            rows.append({"event": i, "t_ns": t, "action": history.actions[code], "address": addr, "size_bytes": size,
                         "allocated_bytes": series.allocated_bytes[i], "reserved_bytes": series.reserved_bytes[i],
                         "frame": frames[0] if frames else None, "stack": frames})
    missing = {"memory": reason} if reason else {}
    if series is not None and series.problems:
        missing["allocated_bytes"] = "; ".join(series.problems)
    return _frame(rows, list(MEMORY_COLUMNS), {"event": "index", "t_ns": "ns", "address": "address",
                                               "size_bytes": "byte", "allocated_bytes": "byte",
                                               "reserved_bytes": "byte"}, missing)
