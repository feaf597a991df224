"""Panel 1, Kernel configuration: grid, block, registers, shared memory, occupancy.

Each row says where its value came from: the collector, a named formula, or
N/A with the reason.
"""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.kernel_table import WAVES_FORMULA, ConfigSummary, KernelSummary
from kernelscope.model import Metric
from kernelscope.render.fmt import count, dim3, duration, plural, size_bytes, waves
from kernelscope.render.fit import fitted_panel
from kernelscope.render.text import was_shortened

OPERATOR_LINES = 3  # the operators that launched a kernel, most time first, named in its panel
LIMITER_LABELS = {"warps": "warps", "registers": "registers", "shared_memory": "shared memory",
                  "blocks": "blocks/SM cap"}


def _src(m: Metric | None) -> str:
    if m is None:
        return "N/A"
    return m.source if m.raw_name == "" else f"{m.source}: {m.raw_name}"


def _na(m: Metric | None, fallback: str) -> str:
    return f"N/A: {m.missing_reason}" if m is not None and m.is_missing else f"N/A: {fallback}"


class KernelConfigPanel:
    def __init__(self, kernel: KernelSummary, max_configs: int = 2, operators: tuple = ()) -> None:
        self.kernel = kernel
        self.max_configs = max_configs
        self.operators = operators  # analyze.operators.OperatorRow: the aten ops that launched it

    def _config_table(self, c: ConfigSummary) -> Table:
        t = Table(show_header=True, header_style="bold", box=None, padding=(0, 1), expand=True)
        t.add_column("", style="bold", no_wrap=True, min_width=20)
        t.add_column("Value", overflow="fold", ratio=5)
        t.add_column("Source", style="dim", overflow="fold", ratio=6)
        cfg, m = c.config, c.metrics
        t.add_row("Grid", f"{dim3(cfg.grid)} = {plural(cfg.blocks, 'block')}", c.grid_source)
        warps = -(-cfg.threads_per_block // 32)
        t.add_row("Block", f"{dim3(cfg.block)} = {plural(cfg.threads_per_block, 'thread')}, {plural(warps, 'warp')}",
                  c.block_source)
        t.add_row("Threads", f"{cfg.blocks * cfg.threads_per_block:,}", "derived: grid blocks × threads per block")
        regs = m.get("registers_per_thread")
        t.add_row("Registers / thread", count(cfg.registers_per_thread) if cfg.registers_per_thread is not None
                  else _na(regs, "not recorded"), _src(regs))
        smem = m.get("shared_memory_per_block_bytes")
        if cfg.shared_memory_per_block_bytes is not None:
            v = cfg.shared_memory_per_block_bytes
            human = f" ({size_bytes(v)})" if v >= 1024 else ""
            t.add_row("Shared mem / block", f"{v:,} B{human}, static + dynamic", _src(smem))
        else:
            t.add_row("Shared mem / block", _na(smem, "not recorded"), _src(smem))
        static = m.get("shared_memory_static_bytes")
        dynamic = m.get("shared_memory_dynamic_bytes")
        if static is not None and not static.is_missing and dynamic is not None and not dynamic.is_missing:
            t.add_row("  static / dynamic", f"{static.value:,} B / {dynamic.value:,} B", _src(static))
        else:
            t.add_row("  static / dynamic", _na(static, "not recorded"), "")
        occ = c.occupancy
        if occ is None:
            t.add_row("Theoretical occupancy", f"N/A: {c.occupancy_missing_reason}", "")
        else:
            t.add_row("Theoretical occupancy",
                      Text(f"{occ.theoretical_occupancy_pct:.1f}%", style="bold") + Text(
                          f"  {plural(occ.active_blocks_per_sm, 'block')}/SM = {occ.active_warps_per_sm} of "
                          f"{occ.max_warps_per_sm} warps"),
                      f"derived: occupancy calculator ({occ.arch})" + (f"; {occ.caveat}" if occ.caveat else ""))
            t.add_row("  limited by", " + ".join(LIMITER_LABELS[x] for x in occ.limiters), "")
            t.add_row("  blocks/SM allowed by",
                      " · ".join(f"{LIMITER_LABELS[k]} {v}" for k, v in occ.blocks_limit.items()),
                      f"smem/block allocated {occ.shared_memory_allocated_per_block_bytes:,} B of "
                      f"{occ.shared_memory_config_bytes:,} B carveout")
        if c.waves_per_sm is not None:
            t.add_row("Waves", waves(c.waves_per_sm), f"derived: {WAVES_FORMULA}")
        else:
            t.add_row("Waves", "N/A: needs theoretical occupancy and the SM count", "")
        ach = m.get("achieved_occupancy_pct")
        if ach is not None and not ach.is_missing:
            t.add_row("Achieved occupancy", f"{float(ach.value):.1f}%", _src(ach))
        else:
            t.add_row("Achieved occupancy", _na(ach, "needs the counter pass (ncu)"), "")
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        k = self.kernel
        head = Text.assemble(
            (f"{k.launches} launch{'es' if k.launches != 1 else ''}", "bold"),
            f" · total {duration(k.total_ns)} · mean {duration(k.mean_ns)} "
            f"(min {duration(k.min_ns)}, max {duration(k.max_ns)}) · "
            f"{100 * k.share_of_kernel_time:.1f}% of kernel time",
        )
        limit = 3 * max(40, options.max_width - 4)  # templated C++ names run to thousands of characters
        if len(k.name) <= limit:
            name = k.name
        elif was_shortened(k.name):  # its length is the display copy's: no count of what is left out
            name = f"{k.name[:limit]} … (show --json has the full name)"
        else:
            name = f"{k.name[:limit]} … ({len(k.name) - limit:,} more characters: show --json has the full name)"
        parts: list = [Text.from_markup(name, style="dim", overflow="fold"), head]
        if k.regions:
            parts.append(Text.from_markup("regions: " + ", ".join(k.regions)))
        for r in self.operators[:OPERATOR_LINES]:
            where = f" at {r.python_line}" if r.python_line else ""
            parts.append(Text.from_markup(f"launched by {r.label} {r.shapes}{where} · "
                                          f"{plural(r.launches, 'launch', 'launches')}"))
        if len(self.operators) > OPERATOR_LINES:
            more = len(self.operators) - OPERATOR_LINES
            parts.append(Text(f"… and {more} more operators (show --json)", style="dim"))
        shown = k.configs[: self.max_configs]
        for i, c in enumerate(shown):
            if len(k.configs) > 1:
                parts.append(Text(f"\nConfiguration {i + 1} of {len(k.configs)}: "
                                  f"{plural(c.launches, 'launch', 'launches')}, {duration(c.total_ns)}", style="bold"))
            parts.append(self._config_table(c))
        if len(k.configs) > len(shown):
            parts.append(Text(f"… {len(k.configs) - len(shown)} more configurations (see --json)", style="dim"))
        yield fitted_panel(parts, f"Kernel configuration · {k.label}", options.max_width, said=name)
