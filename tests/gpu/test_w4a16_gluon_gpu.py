"""The Gluon W4A16 kernel against the fp32 reference on a Hopper GPU (pytest -m gpu on the GPU machine).

The Triton kernel's weights (Bk), both MMAs (warpgroup, mma.sync), 1 and 13 tokens, groups of 128 and one
group per column, grids of whole tiles and of shared (stream-K) tiles, down to one unit a program; every launch
runs twice, so a launch must leave its tile counters at zero."""
from __future__ import annotations

import itertools

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


# n = 768: 12 column tiles; k = 1920: 15 blocks (180 units), 2048: 16 (192 units)
@pytest.fixture(scope="module", params=[(128, 1920), (128, 2048), (-1, 2048)],
                ids=["group128-k1920", "group128-k2048", "per-column-k2048"])
def weights(request):
    if not _hopper():
        pytest.skip("needs an sm_90 (Hopper) GPU")
    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import to_kernel_layout

    gs, k = request.param
    n = 768
    wt = make_weights(k, n, gs, "cuda", 7)
    bk, sk = to_kernel_layout(wt.B, wt.s, gs)
    return gs, k, n, wt, bk, sk


# programs: one a tile (None), a divisor of the tiles (whole tiles), 5, 36 and 100 (shared tiles), one a unit (0)
@pytest.mark.parametrize("m,programs,sync", list(itertools.product((1, 13), (None, 4, 5, 36, 100, 0), (False, True))))
def test_matches_the_reference(weights, m, programs, sync):
    from kernelscope.kernels.marlin import reference_matmul
    from kernelscope.kernels.marlin.gluon_kernel import gluon_w4a16

    gs, k, n, wt, words, sk = weights
    if programs == 0:
        programs = n // 64 * (k // 128)
    a = torch.randn((m, k), device="cuda", generator=torch.Generator("cuda").manual_seed(m)).half()
    ref = reference_matmul(a, wt.B, wt.s, gs)
    for _ in range(2):
        got = gluon_w4a16(a, words, sk, gs, n, programs=programs, sync_mma=sync).float()
        err = ((got - ref).norm() / ref.norm()).item()
        assert err < 1e-2, (m, programs, sync, err)


# 17-64 tokens: a 32- or 64-token tile (TMA zero-fills the rows past m; the store masks them), the tuner's registers
@pytest.mark.parametrize("m,programs", list(itertools.product((17, 32, 40, 64), (None, 5, 36, 0))))
def test_matches_the_reference_up_to_64_tokens(weights, m, programs):
    from kernelscope.kernels.marlin import reference_matmul
    from kernelscope.kernels.marlin.gluon_kernel import gluon_w4a16

    gs, k, n, wt, words, sk = weights
    if programs == 0:
        programs = n // 64 * (k // 128)
    a = torch.randn((m, k), device="cuda", generator=torch.Generator("cuda").manual_seed(m)).half()
    ref = reference_matmul(a, wt.B, wt.s, gs)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    for _ in range(2):
        got = gluon_w4a16(a, words, sk, gs, n, programs=programs, max_registers=128, out=out).float()
        err = ((got - ref).norm() / ref.norm()).item()
        assert err < 1e-2, (m, programs, err)


def test_more_than_64_tokens_are_refused():
    if not _hopper():
        pytest.skip("needs an sm_90 (Hopper) GPU")
    from kernelscope.kernels.marlin.gluon_kernel import gluon_w4a16

    a = torch.zeros((65, 256), dtype=torch.float16, device="cuda")
    with pytest.raises(ValueError, match=r"^gluon_w4a16: the Gluon W4A16 kernel takes fp16 a of shape \(m, k\) with "
                                         r"1 <= m <= 64\.$"):
        gluon_w4a16(a, torch.zeros((32, 256), dtype=torch.int32, device="cuda"),
                    torch.zeros((2, 256), dtype=torch.float16, device="cuda"), 128, 256)


def test_w4a16_matmul_runs_the_gluon_kernel_on_the_same_weights(weights):
    """A Gluon LaunchConfig in w4a16_matmul: the Triton kernel's weights (Bk), the tuner's launch."""
    from kernelscope.kernels.marlin import reference_matmul, w4a16_matmul
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    gs, k, n, wt, words, sk = weights
    a = torch.randn((5, k), device="cuda").half()
    ref = reference_matmul(a, wt.B, wt.s, gs)
    launch = gluon_launch(k, n, torch.cuda.get_device_properties(0).multi_processor_count, 5)
    assert launch.sync_mma  # m = 5 at 12 tiles: two programs an SM
    got = w4a16_matmul(a, words, sk, gs, config=launch).float()
    assert ((got - ref).norm() / ref.norm()).item() < 1e-2


def test_first_use_tuning_tries_the_gluon_kernel(tmp_path, monkeypatch):
    """On sm_90 at m <= 64 the tuner times Gluon launches beside the Triton ones, and a Gluon winner runs."""
    if not _hopper():
        pytest.skip("needs an sm_90 (Hopper) GPU")
    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import LaunchConfig, reference_matmul, to_kernel_layout, w4a16_matmul
    from kernelscope.kernels.marlin.autotune import tune_shape

    k, n, gs = 2048, 1024, 128
    wt = make_weights(k, n, gs, "cuda", 3)
    bk, sk = to_kernel_layout(wt.B, wt.s, gs)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m in (1, 40):
        got = tune_shape(m, k, n, gs, bk, sk, sm_count=sms, tma=True, deadline_s=1e9, limit=4, gluon=True)
        kinds = [t["launch"]["kernel"] for t in got.tried]
        assert "gluon" in kinds and all(t["status"] == "ok" for t in got.tried), got.tried
        gluon = next(LaunchConfig.from_dict(t["launch"]) for t in got.tried if t["launch"]["kernel"] == "gluon")
        a = torch.randn((m, k), device="cuda").half()
        ref = reference_matmul(a, wt.B, wt.s, gs)
        assert ((w4a16_matmul(a, bk, sk, gs, config=gluon).float() - ref).norm() / ref.norm()).item() < 1e-2


def _square_chain() -> tuple:
    """A square 2048 layer to apply 12 times (4 tokens): the input, the weights (Bk) with scales divided by the
    layer's gain so that the chain's values stay in fp16 range, and the 12 outputs; skips without a Hopper GPU."""
    if not _hopper():
        pytest.skip("needs an sm_90 (Hopper) GPU")
    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import reference_matmul, to_kernel_layout

    k = n = 2048
    wt = make_weights(k, n, 128, "cuda", 11)
    x = torch.randn((4, k), device="cuda", generator=torch.Generator("cuda").manual_seed(4)).half()
    gain = (reference_matmul(x, wt.B, wt.s, 128).norm() / x.float().norm()).item()
    bk, sk = to_kernel_layout(wt.B, (wt.s.float() / gain).half(), 128)
    return x, bk, sk, [torch.empty((4, n), dtype=torch.float16, device="cuda") for _ in range(12)]


def _assert_replays_give(chain, outs: list, plain: list) -> None:
    """``chain`` captured in a CUDA graph: three replays, outputs zeroed before each, give ``plain`` bit for bit."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        chain()
    for _ in range(3):
        for o in outs:
            o.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert all(torch.equal(o, p) for o, p in zip(outs, plain))


@pytest.mark.parametrize("programs,sync", [(None, True), (16, False), (36, False), (100, True)],
                         ids=["whole-tiles-sync", "whole-tiles", "shared-tiles", "shared-tiles-sync"])
def test_programmatic_dependent_launches_chain_exactly(programs, sync):
    """Each launch reads the output of the launch just before it (a square layer applied 12 times), so an activation
    copy or a store that ran before griddepcontrol.wait would change the result. PDL launches, eager and captured
    in a CUDA graph, must give bit for bit what plain launches give (the same arithmetic in the same order), and
    the shared tiles' counters and partials must survive launches that overlap."""
    from kernelscope.kernels.marlin.gluon_kernel import gluon_w4a16

    x, bk, sk, outs = _square_chain()
    n = x.shape[1]

    def chain(pdl: bool) -> None:
        a = x
        for out in outs:
            a = gluon_w4a16(a, bk, sk, 128, n, programs=programs, sync_mma=sync, pdl=pdl, out=out)

    chain(False)
    plain = [o.clone() for o in outs]
    assert torch.isfinite(plain[-1]).all() and plain[-1].float().norm() > 0
    for o in outs:
        o.zero_()
    chain(True)
    assert all(torch.equal(o, p) for o, p in zip(outs, plain))
    for o in outs:
        o.zero_()
    _assert_replays_give(lambda: chain(True), outs, plain)


@pytest.mark.parametrize("programs", [None, 36, 100])
def test_block_records_cover_every_program(weights, programs):
    """records=...: one row a program (the block recorder's: program, SM below %nsmid, start <= end), and the
    launch's result is the unrecorded one's."""
    from kernelscope.collect.instrument.layout import ROW_VALUES, SM_BITS
    from kernelscope.kernels.marlin.gluon_kernel import gluon_w4a16

    gs, k, n, wt, words, sk = weights
    grid = n // 64 if programs is None else programs
    a = torch.randn((3, k), device="cuda").half()
    plain = gluon_w4a16(a, words, sk, gs, n, programs=programs)
    rec = torch.full((grid * ROW_VALUES, ), -1, dtype=torch.int64, device="cuda")
    recorded = gluon_w4a16(a, words, sk, gs, n, programs=programs, records=rec)
    assert torch.equal(recorded, plain)
    rows = rec.view(grid, ROW_VALUES).tolist()
    assert [r[0] for r in rows] == list(range(grid))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    nsm = {r[1] >> SM_BITS for r in rows}
    assert len(nsm) == 1 and nsm.pop() >= sms
    assert all(0 <= r[1] & 0xFFFFFFFF < r[1] >> SM_BITS for r in rows)
    assert all(0 < r[2] <= r[3] for r in rows)


@pytest.mark.parametrize("programs", [None, 100])
def test_a_block_recorder_gets_every_gluon_program(weights, programs):
    """w4a16_matmul(config=a Gluon launch, recorder=BlockRecorder): the kernel writes the block recorder's rows, so the
    reader finds every program once, on a valid SM, within its start and end, and the result is unchanged."""
    from kernelscope.collect.instrument.recorder import BlockRecorder
    from kernelscope.kernels.marlin import LaunchConfig, w4a16_matmul

    gs, k, n, wt, words, sk = weights
    grid = (n // 64 if programs is None else programs, 1, 1)
    a = torch.randn((2, k), device="cuda").half()
    plain = w4a16_matmul(a, words, sk, gs, config=LaunchConfig.gluon(programs))
    rec = BlockRecorder(grid)
    got = w4a16_matmul(a, words, sk, gs, config=LaunchConfig.gluon(programs), recorder=rec)
    assert torch.equal(got, plain)
    r = rec.read()
    assert r.problems == [] and sorted(r.block_id) == list(range(grid[0]))
    assert r.nsmid is not None and all(0 <= sm < r.nsmid for sm in r.smid)
    assert all(0 < s0 <= s1 for s0, s1 in zip(r.start_ns, r.end_ns))
    with pytest.raises(ValueError, match="sized for grid"):
        w4a16_matmul(a, words, sk, gs, config=LaunchConfig.gluon(grid[0] + 1), recorder=rec)


@pytest.mark.parametrize("m,sync", [(1, True), (13, False), (5, True), (16, False), (40, False), (64, False)])
def test_clusters_sum_shared_tiles_to_the_same_bits(weights, m, sync):
    """cluster_size=S: each column tile's S programs are one thread-block cluster and program 0 adds the others'
    partials from its shared memory. Same grid, same partials, same order of the sum: the result
    must be the stream-K kernel's bit for bit, eager, twice (each launch initialises its mbarriers), and replayed
    from a CUDA graph, for every cluster size that divides the tile's k blocks."""
    from kernelscope.kernels.marlin.gluon_kernel import gluon_w4a16

    gs, k, n, wt, words, sk = weights
    tiles, kb = n // 64, k // 128
    a = torch.randn((m, k), device="cuda", generator=torch.Generator("cuda").manual_seed(m)).half()
    sizes = [s for s in (2, 3, 4, 5, 8) if kb % s == 0]
    assert sizes
    for s in sizes:
        want = gluon_w4a16(a, words, sk, gs, n, programs=tiles * s, sync_mma=sync)
        for _ in range(2):
            got = gluon_w4a16(a, words, sk, gs, n, programs=tiles * s, sync_mma=sync, cluster_size=s)
            assert torch.equal(got, want), (s, (got.float() - want.float()).abs().max().item())
        out = torch.zeros_like(want)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            gluon_w4a16(a, words, sk, gs, n, programs=tiles * s, sync_mma=sync, cluster_size=s, out=out)
        for _ in range(2):
            out.zero_()
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(out, want), s


def test_clusters_chain_exactly_as_programmatic_dependent_launches():
    """PDL launches in clusters, each reading the launch before's output, eager and in a CUDA graph: the plain
    stream-K launches' bits (an activation copy before griddepcontrol.wait, or a partial sent early, would change
    them)."""
    from kernelscope.kernels.marlin.gluon_kernel import gluon_w4a16

    x, bk, sk, outs = _square_chain()
    n = x.shape[1]
    programs = n // 64 * 4

    def chain(**kw) -> None:
        a = x
        for out in outs:
            a = gluon_w4a16(a, bk, sk, 128, n, programs=programs, sync_mma=True, out=out, **kw)

    chain()
    plain = [o.clone() for o in outs]
    assert torch.isfinite(plain[-1]).all() and plain[-1].float().norm() > 0
    for o in outs:
        o.zero_()
    chain(pdl=True, cluster_size=4)
    assert all(torch.equal(o, p) for o, p in zip(outs, plain))
    _assert_replays_give(lambda: chain(pdl=True, cluster_size=4), outs, plain)
