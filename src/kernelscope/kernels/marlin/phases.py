"""The phases of one W4A16 launch (launch, loads, unpack, MMA, write-back,
pipelining, measured time): bytes and FLOPs computed from the shapes, each
derived figure with its formula, each missing one with its reason."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from kernelscope.model import Launch, Metric, Session
from kernelscope.model.names import short_kernel_name
from kernelscope.kernels.marlin.panel_data import Figure, Phase
from .plan import FLUSH_REGION, GemmPlan
from .unpack_ptx import instruction_count


def _d(value: object, unit: str, raw: str, formula: str) -> Metric:
    return Metric(value, unit, "derived", raw, formula=formula)


def _user(value: object, unit: str, raw: str) -> Metric:
    """A launch parameter the caller chose (w4a16_matmul's keyword arguments)."""
    return Metric(value, unit, "user", raw)


def _launch_metric(x: Launch, key: str, unit: str) -> Metric:
    return x.metrics.get(key) or Metric.missing(key, "not recorded for this launch", "cupti", unit)


def _device_metric(session: Session, key: str, unit: str) -> Metric:
    m = session.device.attributes.get(key) if session.device else None
    return m or Metric.missing(key, "not recorded for this device", "device-spec", unit)


@dataclass(frozen=True)
class _Bytes:
    """Bytes of each operand, computed from the shapes."""

    a: int
    bk: int
    scales: int
    c_kernel: int  # what the kernel itself writes: fp32 partials with split_k > 1, else fp16 C

    @classmethod
    def of(cls, p: GemmPlan) -> "_Bytes":
        c = p.split_k * p.m * p.n * 4 if p.split_k > 1 else p.m * p.n * 2
        if p.split_k > 1 and p.fused_split_sum:
            c += p.m * p.n * 2  # the fp32 partials (rows of C that exist), then fp16 C by the last program
        return cls(a=p.m * p.k * 2, bk=p.k * p.n // 2, scales=p.groups * p.n * 2, c_kernel=c)

    @property
    def total(self) -> int:
        return self.a + self.bk + self.scales + self.c_kernel


def _occupancy(session: Session, x: Launch) -> tuple[Metric, int | None]:
    from kernelscope.analyze.occupancy import OccupancyInputError, arch_for_device, theoretical_occupancy
    from kernelscope.analyze.arch import UnknownArchError

    regs, smem = x.value("registers_per_thread"), x.value("shared_memory_per_block_bytes")
    raw = "active blocks per SM"
    if session.device is None or not isinstance(regs, int) or not isinstance(smem, int):
        return Metric.missing(raw, "needs the device, registers and shared memory of the launch", "derived"), None
    try:
        occ = theoretical_occupancy(arch_for_device(session.device), x.threads_per_block, regs, smem)
    except (UnknownArchError, OccupancyInputError) as e:
        return Metric.missing(raw, str(e), "derived"), None
    return _d(occ.active_blocks_per_sm, "program/SM", raw,
              f"occupancy calculator ({occ.arch}): limited by {' + '.join(occ.limiters)}"), occ.active_blocks_per_sm


def _launch_phase(session: Session, p: GemmPlan, x: Launch) -> Phase:
    blocks = x.blocks
    sms = _device_metric(session, "sm_count", "SM")
    active, per_sm = _occupancy(session, x)
    figs = [
        Figure("grid (recorded)", Metric(" x ".join(map(str, x.grid)), "", "cupti", "grid")),
        Figure("programs", _d(blocks, "program", "grid blocks",
                              f"ceil(m / BLOCK_M) x ceil(n / BLOCK_N) x split_k = {p.m_tiles} x {p.n_tiles} x "
                              f"{p.split_k}, the recorded grid")),
        Figure("threads per program (recorded)", Metric(x.threads_per_block, "thread", "cupti", "block")),
        Figure("warps per program", _d(x.threads_per_block // 32, "warp", "warps", "threads / 32")),
        Figure("registers per thread", _launch_metric(x, "registers_per_thread", "register/thread")),
        Figure("shared memory per program", _launch_metric(x, "shared_memory_per_block_bytes", "byte")),
        Figure("tile BLOCK_M x BLOCK_N x BLOCK_K", _user(f"{p.block_m} x {p.block_n} x {p.block_k}", "", "tile")),
        Figure("split_k", _user(p.split_k, "", "split_k")),
        Figure("SMs", sms),
        Figure("resident programs per SM", active),
    ]
    if per_sm and not sms.is_missing:
        figs.append(Figure("waves", _d(blocks / (per_sm * int(sms.value)), "", "waves",
                                       "programs / (resident programs per SM x SMs)")))
    what = (f"{blocks:,} programs of {x.threads_per_block} threads: each computes a {p.block_m} x {p.block_n} "
            f"tile of C over {p.k_split:,} of the {p.k:,} k rows (split_k = {p.split_k}).")
    return Phase("Launch configuration", what, tuple(figs))


def _load_phase(p: GemmPlan, b: _Bytes, compiled: dict | None) -> Phase:
    rows = min(p.block_m, p.m)
    a_tile, bk_tile = rows * p.block_k * 2, p.block_k // 8 * p.block_n * 4
    s_tile = p.block_n * 2 if p.groups > 1 else 0
    pid, pid_k = min(1, p.grid[0] - 1), min(1, p.split_k - 1)  # a program off the origin: offsets show strides
    pid_m, pid_n = p.program_tile(pid)
    k0, n0, m0 = pid_k * p.k_split, pid_n * p.block_n, pid_m * p.block_m
    at = (f"program {pid}, pid_k {pid_k} (C rows {m0}..{m0 + rows - 1}, columns {n0}..{n0 + p.block_n - 1}), "
          "first iteration")
    figs = [
        Figure("A tile per iteration", _d(a_tile, "byte", "A tile", "min(BLOCK_M, m) x BLOCK_K x 2 B (fp16)")),
        Figure("Bk tile per iteration",
               _d(bk_tile, "byte", "Bk tile", "BLOCK_K / 8 x BLOCK_N x 4 B (int32, 8 weights)")),
        Figure("scales per iteration", _d(s_tile, "byte", "scale row",
                                          "BLOCK_N x 2 B (fp16), one group per iteration" if s_tile else
                                          "0: one group, its scales are applied once at the end")),
        Figure("A addresses", _d(f"{rows} rows x {p.block_k * 2} B at byte {m0 * p.k * 2 + k0 * 2:,} + "
                                 f"row x {p.k * 2:,}", "", "A offsets", at)),
        Figure("Bk addresses", _d(f"{p.block_k // 8} rows x {p.block_n * 4} B at byte "
                                  f"{k0 // 8 * p.n * 4 + n0 * 4:,} + row x {p.n * 4:,}", "", "Bk offsets", at)),
        Figure("A read by all programs", _d(p.n_tiles * b.a, "byte", "A requested",
                                            "ceil(n / BLOCK_N) x m x k x 2 B: every column tile reads all of A")),
        Figure("Bk read by all programs", _d(p.m_tiles * b.bk, "byte", "Bk requested",
                                             "ceil(m / BLOCK_M) x k x n / 2 B: each weight read once per row tile")),
        Figure("stage buffers (estimate)",
               _d(a_tile * p.num_stages, "byte", "stage buffers", f"A tile x num_stages ({p.num_stages}); the weights "
                  "skip shared memory") if p.prefetch else
               _d((a_tile + bk_tile) * p.num_stages, "byte", "stage buffers",
                  f"(A tile + Bk tile) x num_stages ({p.num_stages})")),
    ]
    shared = (compiled or {}).get("shared_bytes")
    figs.append(Figure("shared memory the compiler allocated",
                       _d(shared, "byte", "metadata.shared", "Triton's compiled kernel metadata") if shared is not None
                       else Metric.missing("metadata.shared", "recorded only when kernelscope learn marlin runs the "
                                           "kernel itself", "derived", "byte")))
    stage = a_tile if p.prefetch else a_tile + bk_tile
    if isinstance(shared, int) and stage * p.num_stages > shared:  # the estimate must not stand unexplained
        figs.append(Figure("estimate vs compiler", _d(
            f"{stage * p.num_stages - shared:,} B more than allocated: room for {shared // stage} of the "
            f"{p.num_stages} stages' tiles (Triton's pipeliner sets the buffers it keeps)", "",
            "stage buffers - metadata.shared", "estimate - allocated; floor(allocated / one stage's tiles)")))
    if p.tma:
        what = ("Per iteration each program has the tensor memory accelerator (TMA) copy its A tile and Bk tile "
                f"into shared memory, one bulk copy per tile, {p.num_stages} stages deep (rows of A past m are "
                "zero-filled, not read), and loads a row of scales. ")
    elif p.prefetch:
        what = ("Per iteration each program loads an A tile (staged through shared memory by Triton, "
                f"{p.num_stages} stages deep), a row of scales, and a Bk tile straight into registers, "
                f"{p.prefetch} iteration(s) ahead of its unpack, so its DRAM latency overlaps the work before it. ")
    else:
        what = ("Per iteration each program loads an A tile and a Bk tile (and a row of scales); Triton stages "
                f"them through shared memory, {p.num_stages} stages deep. ")
    what += "Offsets are in bytes from each tensor's start."
    return Phase("Global -> shared memory loads", what, tuple(figs))


def _unpack_phase(p: GemmPlan) -> Phase:
    figs = (
        Figure("words per program per iteration", _d(p.block_k // 8 * p.block_n, "word", "words",
                                                     "BLOCK_K / 8 x BLOCK_N")),
        Figure("weights unpacked per thread per iteration",
               _d(p.block_k * p.block_n // p.threads, "weight", "weights per thread", "BLOCK_K x BLOCK_N / threads")),
        Figure("weights unpacked per launch", _d(p.m_tiles * p.k * p.n, "weight", "weights",
                                                 "ceil(m / BLOCK_M) x k x n")),
    )
    if p.pair_layout:
        layout = ("Word (16b + j, c) of Bk holds rows 128b + 32i + 2j (nibble i) and 128b + 32i + 2j + 1 (nibble "
                  "i + 4) of column c, i = 0..3 (to_kernel_layout converts Marlin's B once, so Triton loads it "
                  "densely). ")
        per_word = ("In registers, PTX lop3 drops nibbles i and i + 4 into the mantissas of the two fp16 1024s of "
                    "one register and one f16x2 subtract (or multiply-add for the upper nibble of a byte) gives "
                    f"q - 8 for both: {instruction_count()} PTX instructions per word of 8 weights (counted in "
                    "kernels/marlin/unpack_ptx.py). Each register then holds two neighbouring k of slice i, as the "
                    "MMA's register operand does, so the unpacked block goes to the tensor cores with no shuffle")
    else:  # the layout of sessions recorded before the pair layout
        layout = "Word (r, c) of Bk holds q[8r .. 8r + 7, c] (to_kernel_layout converts Marlin's B once). "
        per_word = ("In registers, PTX lop3 drops two nibbles at a time into the mantissas of fp16 1024 and one "
                    "f16x2 subtract (or multiply-add) gives q - 8 for both")
    what = layout + (per_word if p.dequant_asm else "In registers: shift by 4i, mask 0xF, subtract 8, convert to fp16")
    if p.groups == 1:
        what += "; the scale is applied to the sums at the end."
    elif p.pair_layout:
        what += "; the group's scale multiplies the block's fp32 sum after the MMA (a block is one group)."
    else:
        what += ", then a multiply by the group's scale."
    return Phase("Unpack in registers", what, figs)


def _mma_phase(p: GemmPlan, compiled: dict | None) -> Phase:
    mma = (compiled or {}).get("mma_instructions")
    if mma:
        text = ", ".join(f"{op} x{n}" for op, n in sorted(mma.items()))
        instr = _d(text, "", "PTX opcodes", "opcode counts in the kernel's PTX (static, not executions)")
    else:
        instr = Metric.missing("PTX opcodes", "recorded only when kernelscope learn marlin runs the kernel itself",
                               "derived")
    figs = (
        Figure("tl.dot per iteration",
               _d(f"[{p.block_n} x {p.block_k}] @ [{p.block_k} x {p.block_m}]", "", "dot shape",
                  "unpacked weight tile (transposed) @ A tile (transposed), fp32 accumulator: n is the MMA's M "
                  "side") if p.swap_ab else
               _d(f"[{p.block_m} x {p.block_k}] @ [{p.block_k} x {p.block_n}]", "", "dot shape",
                  "A tile @ unpacked weight tile, fp32 accumulator")),
        Figure("FLOPs per dot", _d(2 * p.block_m * p.block_n * p.block_k, "FLOP", "dot FLOPs",
                                   "2 x BLOCK_M x BLOCK_N x BLOCK_K")),
        Figure("useful FLOPs", _d(2 * p.m * p.n * p.k, "FLOP", "FLOPs", "2 x m x n x k")),
        Figure("MMA FLOPs executed", _d(2 * p.m_tiles * p.block_m * p.n * p.k, "FLOP", "MMA FLOPs",
                                        "2 x ceil(m / BLOCK_M) x BLOCK_M x n x k: rows padded to BLOCK_M")),
        Figure("MMA instructions", instr),
        Figure("tensor pipe utilization", Metric.missing("sm__pipe_tensor_op_hmma_cycles_active", "needs the "
                                                         "counter pass (ncu)", "ncu", "%")),
    )
    return Phase("Tensor-core MMA", "tl.dot multiplies the A tile by the unpacked fp16 tile on the tensor cores, "
                 "accumulating in fp32 registers" + (": one dot per block of k, so Triton issues its MMAs back to "
                                                     "back and waits once" if p.pair_layout else "") + ".", figs)


def _writeback_phase(p: GemmPlan, b: _Bytes, epilogues: tuple[tuple[Launch, ...], ...]) -> Phase:
    figs = [
        Figure("accumulator per thread", _d(p.block_m * p.block_n // p.threads, "fp32 register", "acc",
                                            "BLOCK_M x BLOCK_N / threads")),
        Figure("C written by the kernel", _d(b.c_kernel, "byte", "C bytes",
                                             "split_k x m x n x 4 B (fp32 partial sums) + m x n x 2 B (fp16 C)"
                                             if p.split_k > 1 and p.fused_split_sum else
                                             "split_k x m x n x 4 B (fp32 partial sums)" if p.split_k > 1 else
                                             "m x n x 2 B (fp16)")),
    ]
    if p.split_k > 1 and not p.fused_split_sum:
        names = sorted({short_kernel_name(y.kernel) for e in epilogues for y in e})
        per_call = [sum(y.duration_ns for y in e) for e in epilogues if e]
        figs.append(Figure("epilogue kernels", Metric(", ".join(names) or "none recorded", "", "cupti", "kernel")))
        figs.append(Figure("epilogue time per call", _d(statistics.median(per_call), "ns", "epilogue duration",
                                                        f"median over {len(per_call)} calls of the CUPTI durations "
                                                        "of the kernels between two GEMM launches") if per_call else
                           Metric.missing("epilogue duration", "no kernel followed the GEMM launches", "cupti", "ns")))
    scaled = ("Each block's sum was scaled by its group's scales as it was added. " if p.groups > 1 and p.pair_layout
              else "The scales were applied during the unpack. " if p.groups > 1 else
              "Each program multiplies its fp32 tile by the column scales (one group). ")
    if p.split_k > 1 and p.fused_split_sum:
        tail = ("With split_k > 1 each program stores its fp32 partial sums and counts itself in on its tile's "
                "counter; the last to arrive adds the split_k partials in split order (deterministic), writes "
                "fp16 C and resets the counter: one launch per call.")
    elif p.split_k > 1:
        tail = ("With split_k > 1 each program stores its fp32 partial sums; torch then adds the split_k "
                "partials and casts to fp16 in separate kernels.")
    else:
        tail = "Each program converts its fp32 tile to fp16 and stores it."
    what = scaled + tail
    return Phase("Accumulate and write back", what, tuple(figs))


def _pipeline_phase(p: GemmPlan) -> Phase:
    a_tile, bk_tile = min(p.block_m, p.m) * p.block_k * 2, p.block_k // 8 * p.block_n * 4
    figs = (
        Figure("k iterations per program", _d(p.iterations, "iteration", "iterations", "k / split_k / BLOCK_K")),
        Figure("num_stages", _user(p.num_stages, "", "num_stages")),
        Figure("loads in flight per program", _d((p.num_stages - 1) * (a_tile + bk_tile), "byte", "prefetch",
                                                 "(num_stages - 1) x (A tile + Bk tile)")),
        Figure("time per phase", Metric.missing("phase timers", "this recording has no phase scopes (Proton "
                                                "instrumentation of scopes the kernel declares); the W4A16 kernel "
                                                "declares none", "instrument", "ns")),
    )
    return Phase("Pipelining", "While the tensor cores work on iteration i, the loads of the next "
                 f"{p.num_stages - 1} iterations are already in flight.", figs)


def _measured_phase(session: Session, p: GemmPlan, b: _Bytes, launches: tuple[Launch, ...],
                    epilogues: tuple[tuple[Launch, ...], ...], copy: Metric) -> Phase:
    durations = [x.duration_ns for x in launches]
    median = statistics.median(durations)
    flops = 2 * p.m * p.n * p.k
    figs = [
        Figure("kernel duration", _d(median, "ns", "duration", f"median of {len(durations)} CUPTI kernel durations "
                                     f"(min {min(durations):,} ns, max {max(durations):,} ns)")),
        Figure("bytes the kernel must move", _d(b.total, "byte", "compulsory bytes",
                                                "A (m·k·2) + Bk (k·n/2) + scales (k/groupsize·n·2) + C written")),
        Figure("arithmetic intensity", _d(flops / b.total, "FLOP/byte", "intensity",
                                          "2·m·n·k / bytes the kernel must move")),
        Figure("achieved bandwidth", _d(b.total / (median * 1e-9), "byte/s", "bandwidth",
                                        "bytes the kernel must move / kernel duration")),
        Figure("achieved FLOP rate", _d(flops / (median * 1e-9), "FLOP/s", "FLOP rate", "2·m·n·k / kernel duration")),
        Figure("device-to-device copy bandwidth", copy),
    ]
    if copy.is_missing:
        figs.append(Figure("% of copy bandwidth",
                           Metric.missing("% of copy", copy.missing_reason or "", "derived", "%")))
    else:
        bw = b.total / (median * 1e-9)
        figs.append(Figure("% of copy bandwidth", _d(100 * bw / float(copy.value), "%", "% of copy",
                                                     "achieved bandwidth / device-to-device copy bandwidth")))
    calls = [x.duration_ns + sum(y.duration_ns for y in e) for x, e in zip(launches, epilogues)]
    if p.split_k > 1 and not p.fused_split_sum and calls:
        figs.append(Figure("GPU time per call", _d(statistics.median(calls), "ns", "call time",
                                                   "median of kernel + epilogue durations")))
    l2 = _device_metric(session, "l2_cache_bytes", "byte")
    flushed = any(r.name == FLUSH_REGION for r in session.regions)
    what = (f"The weights are {b.bk / 2**20:.1f} MiB" + (f" and the L2 {int(l2.value) / 2**20:.0f} MiB" if not
            l2.is_missing else "") + ("; a buffer larger than L2 was overwritten before each call (region "
                                      f"{FLUSH_REGION}), so each call read them from DRAM." if flushed else
                                      "; no L2 flush was recorded, so part may have come from L2."))
    return Phase("The launch as measured", what, tuple(figs))


def gemm_phases(session: Session, p: GemmPlan, launches: tuple[Launch, ...],
                epilogues: tuple[tuple[Launch, ...], ...], copy: Metric, compiled: dict | None) -> tuple[Phase, ...]:
    b = _Bytes.of(p)
    return (
        _launch_phase(session, p, launches[0]),
        _load_phase(p, b, compiled),
        _unpack_phase(p),
        _mma_phase(p, compiled),
        _writeback_phase(p, b, epilogues),
        _pipeline_phase(p),
        _measured_phase(session, p, b, launches, epilogues, copy),
    )
