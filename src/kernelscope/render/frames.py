"""A session and its report as pandas DataFrames, for notebooks: one row per kernel, per launch, per
counter-pass launch (one column per raw ncu metric name) and per collective. pandas is an optional extra
(`pip install 'kernelscope[pandas]'`); it is imported here only, when a frame is asked for.

Values are the collectors' own (a missing one is NaN, its reason in ``df.attrs["missing"]``); units
are in ``df.attrs["units"]``, keyed by column."""
from __future__ import annotations

from typing import Any

PANDAS_MISSING = "DataFrames need pandas, which this Python does not have: pip install 'kernelscope[pandas]'"
# Until sessions hold ranks and collectives (issue of ranks/collectives): the columns a collective row will have.
COLLECTIVE_COLUMNS = ("rank", "host", "device_index", "collective", "kernel", "start_ns", "duration_ns", "bytes",
                      "group")


def _pd():
    try:
        import pandas
    except ImportError:
        raise ImportError(PANDAS_MISSING) from None
    return pandas


def _frame(rows: list[dict[str, Any]], columns: list[str], units: dict[str, str], missing: dict[str, str]):
    df = _pd().DataFrame(rows, columns=columns)
    df.attrs["units"] = {k: v for k, v in units.items() if k in df.columns}
    df.attrs["missing"] = missing
    return df


def kernels_df(report):
    """One row per kernel of the session (analyze.report.Report: every kernel is in report.analysis)."""
    rows = []
    for a in report.analysis.kernels:
        k = a.kernel
        c = k.configs[0]
        occ = c.occupancy
        row = {"kernel": k.name, "short_name": k.short_name, "label": k.label, "launches": k.launches,
               "total_ns": k.total_ns, "mean_ns": k.mean_ns, "median_ns": k.median_ns, "min_ns": k.min_ns,
               "max_ns": k.max_ns, "share_of_kernel_time": k.share_of_kernel_time, "configs": len(k.configs),
               "grid": c.config.grid, "block": c.config.block, "registers_per_thread": c.config.registers_per_thread,
               "shared_memory_per_block_bytes": c.config.shared_memory_per_block_bytes,
               "theoretical_occupancy_pct": occ.theoretical_occupancy_pct if occ else None,
               "waves_per_sm": c.waves_per_sm, "bound": a.bound.bound, "limiter": a.bound.limiter,
               "verdict": a.verdict, "profiled_launches": a.profiled_launches, "regions": k.regions}
        for label, m in a.throughput + a.pct_of_peak:
            row[f"{label} ({m.unit})"] = None if m.is_missing else m.value
        rows.append(row)
    columns = list(rows[0]) if rows else ["kernel", "launches", "total_ns"]
    return _frame(rows, columns, {"total_ns": "ns", "mean_ns": "ns", "median_ns": "ns", "min_ns": "ns",
                                  "max_ns": "ns", "shared_memory_per_block_bytes": "byte"}, {})


LAUNCH_COLUMNS = ("launch", "kernel", "start_ns", "duration_ns", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                  "block_z", "stream", "device_index", "correlation_id", "regions", "counter_pass", "instrumented",
                  "scoped")


def _metric_column(key: str) -> str:
    """A launch metric's column: its key, or metric:key where the key is also a launch field (the counter pass's
    own duration_ns is not the trace pass's)."""
    return f"metric:{key}" if key in LAUNCH_COLUMNS else key


def launches_df(session):
    """One row per launch, in session order: configuration, timing and every model metric by its key."""
    keys: dict[str, str] = {}
    for x in session.launches:
        for key, m in x.metrics.items():
            keys.setdefault(_metric_column(key), m.unit)
    rows, missing = [], {}
    for i, x in enumerate(session.launches):
        row = {"launch": i, "kernel": x.kernel, "start_ns": x.start_ns, "duration_ns": x.duration_ns,
               "grid_x": x.grid[0], "grid_y": x.grid[1], "grid_z": x.grid[2], "block_x": x.block[0],
               "block_y": x.block[1], "block_z": x.block[2], "stream": x.stream, "device_index": x.device_index,
               "correlation_id": x.correlation_id, "regions": tuple(x.regions), "counter_pass": bool(x.counters),
               "instrumented": x.block_records is not None, "scoped": x.scopes is not None}
        for key, m in x.metrics.items():
            row[_metric_column(key)] = m.value
            if m.is_missing:
                missing.setdefault(_metric_column(key), str(m.missing_reason))
        rows.append(row)
    return _frame(rows, list(LAUNCH_COLUMNS) + sorted(keys), {"start_ns": "ns", "duration_ns": "ns", **keys}, missing)


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
    return _frame(rows, ["launch", "kernel", "occurrence"] + sorted(names), names, missing)


def collectives_df(session):
    """Collectives per rank. Sessions do not record ranks or collectives yet: empty, with the columns a row
    will have, so notebook code can be written against it now."""
    return _frame([], list(COLLECTIVE_COLUMNS), {"start_ns": "ns", "duration_ns": "ns", "bytes": "byte"}, {})
