"""The split-tile sum of the Gluon W4A16 kernel through distributed shared memory (``gluon_w4a16(..., cluster=S)``).

Why: where S programs share a column tile, the stream-K sum (:func:`gluon_store._finish`) is four dependent L2
trips (the partials' store, the fence, the counter, the last program's loads) at the end of a launch
(docs/decisions/0002 has the measurements). Here a tile's S programs are one thread-block cluster: programs 1..S-1
send their partials into program 0's shared memory with asynchronous remote stores (``st.async``) that count their
bytes on an mbarrier there; program 0 waits for the bytes, adds the partials in program order (the stream-K sum's
order, so the bits are the same) and stores C. No partial buffer, no counter, no memory fence.

Gluon 3.6 exposes neither clusters nor distributed shared memory (its cross-CTA ``convert_layout`` fails to lower:
``nvvm.mapa`` is given a shared-memory pointer), so:

* the kernel is compiled for one CTA and launched with a cluster dimension (:func:`launch_in_clusters`), through
  Triton's own launcher with the cluster size in the place of ``num_ctas``;
* the receive region is dynamic shared memory past what Triton allocates: the launch asks for ``extra`` bytes more,
  and the PTX below finds the region at ``global_smem + %dynamic_smem_size - extra`` (``global_smem`` is the
  symbol of Triton's dynamic shared memory), its mbarrier in the last 16 bytes;
* the cluster barrier (``barrier.cluster``) makes program 0's mbarrier initialisation visible before any partner's
  store counts on it; it counts every thread of the cluster, so the producer's partition is a full warpgroup
  (Triton would otherwise pad it with warps that never run the partition's code and never arrive).
"""
from __future__ import annotations

from typing import Any

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

BARRIER_BYTES = 16  # the receive region's last bytes: one mbarrier (8 bytes), 16-byte aligned

# the receive region's end: global_smem + %dynamic_smem_size (into register a; each snippet starts with it)
_END = "mov.u32 a, global_smem; mov.u32 d, %dynamic_smem_size; add.u32 a, a, d; "
_BAR = _END + f"sub.u32 a, a, {BARRIER_BYTES}; "
# thread 0: one arrival (its own, with the bytes to expect), then the fence that publishes the initialisation
_INIT = gl.constexpr("{ .reg .pred p; .reg .b32 t, a, d; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; " + _BAR
                     + "@p mbarrier.init.shared::cta.b64 [a], 1; @p mbarrier.arrive.expect_tx.shared::cta.b64 _, [a], "
                     "$1; @p fence.mbarrier_init.release.cluster; } // dummy $0")
# an asynchronous remote store that counts its 4 bytes on program 0's mbarrier: no fence, no arrival
_STORE = gl.constexpr("{ .reg .b32 a, b, d; " + _END + f"sub.u32 b, a, {BARRIER_BYTES}; add.u32 a, a, $2; "
                      "mapa.shared::cluster.u32 a, a, 0; mapa.shared::cluster.u32 b, b, 0; "
                      "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [a], $1, [b]; mov.u32 $0, 0; }")
# labels inside braces are local to the block (as CUTLASS's cluster barrier wait writes it)
_WAIT = gl.constexpr("{ .reg .pred p; .reg .b32 a, d; " + _BAR + "WAIT: mbarrier.try_wait.parity.acquire.cluster"
                     ".shared::cta.b64 p, [a], 0; @!p bra WAIT; } // dummy $0")
_LOAD = gl.constexpr("{ .reg .b32 a, d; " + _END + "add.u32 a, a, $1; ld.shared.f32 $0, [a]; }")
_BARRIER_BYTES = gl.constexpr(BARRIER_BYTES)


def extra_bytes(cluster: int, block_n: int, block_m: int) -> int:
    """Dynamic shared memory a program needs past Triton's: S - 1 partial slots of (block_n, block_m) fp32 and the
    mbarrier."""
    return (cluster - 1) * block_n * block_m * 4 + BARRIER_BYTES


@gluon.jit
def _cluster_init(CLUSTER: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
    """Program 0's receive mbarrier (every program initialises one; only program 0's is used): thread 0 initialises
    it for its own arrival, which expects the CLUSTER - 1 partners' partial slots, and fences the initialisation for
    the cluster (the cluster barrier then publishes it)."""
    nbytes = gl.program_id(0) * 0 + (CLUSTER - 1) * BLOCK_N * BLOCK_M * 4  # a register operand for the PTX
    gl.inline_asm_elementwise(_INIT, "=r,r", [nbytes], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _cluster_arrive():
    """Every thread of every program arrives once on the cluster barrier, as its partition starts (relaxed: the
    initialisation's own fence orders it)."""
    gl.inline_asm_elementwise("barrier.cluster.arrive.relaxed.aligned; // dummy $0", "=r", [], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _cluster_wait():
    """Until every thread of the cluster has arrived: program 0 runs and its mbarrier is initialised."""
    gl.inline_asm_elementwise("barrier.cluster.wait.acquire.aligned; // dummy $0", "=r", [], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _cluster_send(acc, offs, rank, CLUSTER: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
    """Program ``rank`` > 0 of the tile's cluster: once the cluster barrier has passed (program 0 runs, its mbarrier
    is initialised), each element of its partial into slot rank - 1 of program 0's receive region (``offs``: the
    element's index in a (BLOCK_N, BLOCK_M) slot), each store counting its bytes on program 0's mbarrier."""
    SLOT: gl.constexpr = BLOCK_N * BLOCK_M * 4
    EXTRA: gl.constexpr = (CLUSTER - 1) * SLOT + _BARRIER_BYTES
    _cluster_wait()
    gl.inline_asm_elementwise(_STORE, "=r,f,r", [acc, offs * 4 + ((rank - 1) * SLOT - EXTRA)], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _cluster_total(acc, offs, CLUSTER: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
    """Program 0 of the tile's cluster: once the partners' bytes have all landed (acquire: they are visible),
    its own partial plus the received ones in program order, from zero, as the stream-K sum adds them (same bits)."""
    SLOT: gl.constexpr = BLOCK_N * BLOCK_M * 4
    EXTRA: gl.constexpr = (CLUSTER - 1) * SLOT + _BARRIER_BYTES
    gl.inline_asm_elementwise(_WAIT, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
    total = gl.zeros_like(acc) + acc
    for j in gl.static_range(CLUSTER - 1):
        total = total + gl.inline_asm_elementwise(_LOAD, "=f,r", [offs * 4 + (j * SLOT - EXTRA)], dtype=gl.float32,
                                                  is_pure=False, pack=1)
    return total


def launch_in_clusters(fn: Any, programs: int, cluster: int, extra: int, args: tuple, kwargs: dict) -> None:
    """Launch the jitted ``fn`` on ``programs`` CTAs in clusters of ``cluster`` along x, with ``extra`` bytes of
    dynamic shared memory past the kernel's own: Triton's launcher, given the cluster size where it reads
    ``num_ctas`` (it then launches ``grid x num_ctas`` CTAs in clusters of ``num_ctas``). The arguments are bound
    and looked up in ``fn``'s cache as its own launch does (compiled there on first use)."""
    from triton import knobs
    from triton.runtime import driver
    from triton.runtime.jit import compute_cache_key

    device = driver.active.get_current_device()
    stream = driver.active.get_current_stream(device)
    # the keys JITFunction.run adds before it binds, so that the cache key is the one its launches use
    kwargs = dict(kwargs, debug=kwargs.get("debug", fn.debug) or knobs.runtime.debug,
                  instrumentation_mode=knobs.compilation.instrumentation_mode)
    kernel_cache, key_cache, _, _, binder = fn.device_caches[device]
    bound, specialization, options = binder(*args, **kwargs)
    kernel = kernel_cache.get(compute_cache_key(key_cache, specialization, options))
    if kernel is None:
        kernel = fn.warmup(*args, grid=(programs, ), **kwargs)
    shared = -(-kernel.metadata.shared // 16) * 16 + extra
    function = _functions.get((kernel.hash, device, shared))
    if function is None:
        # Triton loads the kernel with its own shared memory; past 48 KiB a launch needs the opt-in size
        function = driver.active.utils.load_binary(kernel.name, kernel.kernel, max(shared, 49153), device)[1]
        _functions[(kernel.hash, device, shared)] = function
    values = bound.values()
    kernel.run(programs // cluster, 1, 1, stream, function, (kernel.metadata.num_warps, cluster, shared),
               kernel.launch_metadata((programs, 1, 1), stream, *values),
               knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *values)


_functions: dict[tuple, Any] = {}  # (kernel hash, device, dynamic shared memory) -> the function loaded for it
