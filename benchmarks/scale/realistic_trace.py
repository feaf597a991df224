"""A PyTorch profiler trace as the profiler writes it, of N kernels, written event by event (never held whole).

The event mix follows real torch.profiler output (the 200 k-kernel trace of issue 40): per kernel a `cpu_op`
every second kernel, the `cuda_runtime` cudaLaunchKernel call, the `kernel` with Kineto's args, and an `ac2g`
flow pair (ph "s" on the call, "f" on the kernel); every fourth kernel a cudaMemsetAsync with its `gpu_memset`
and flow pair; an annotation (`user_annotation` on the CPU, `gpu_user_annotation` on the GPU: one of five
region names) per 14 kernels, and per 2,100 kernels a ProfilerStep annotation on both sides with a
cudaStreamSynchronize at its end; `deviceProperties`, `distributedInfo` and `baseTimeNanoseconds` at the
top, `traceName` after the events. Layout: one event per 4-6 lines, indented as Kineto does. With
`--world-size W` (and `--rank R`) it is one rank's trace of a W-process job: `distributedInfo` says so, the
device is the rank's own, and the last kernel of each annotation is an NCCL all-reduce (ncclDevKernel_AllReduce
with the `Collective name`, message sizes, group and sequence args torch writes), its duration drawn per rank.
Usage: realistic_trace.py N OUT.json [--seed S] [--rank R --world-size W]
"""
from __future__ import annotations

import argparse
import json
import random

KERNELS = [  # (name, grid, block, registers, shared memory)
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     [1024, 1, 1], [128, 1, 1], 30, 0),
    ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__"
     "5x_cublas", [66, 2, 1], [384, 1, 1], 168, 213248),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
     [4096, 1, 1], [1024, 1, 1], 40, 64),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
     "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
     "float>, unsigned int, float, 4>)", [132, 1, 1], [32, 16, 1], 32, 16),
    ("ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_64x3_tn", [8, 16, 1], [256, 1, 1], 232, 73728),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::GeluCUDAKernelImpl"
     "(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()"
     "() const::{lambda(float)#1}>(at::TensorIteratorBase&, ...)::{lambda(int)#1}>(int, ...)",
     [2048, 1, 1], [128, 1, 1], 24, 0),
    ("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>, false, true, "
     "false, false, true, true, false>(Flash_fwd_params)", [16, 32, 4], [128, 1, 1], 255, 49152),
]
OPS = ["aten::add", "aten::mm", "aten::softmax", "aten::mean", "aten::linear", "aten::gelu", "aten::_flash_attention"]
PID, TID, DEV, STREAM = 2418, 2418, 0, 7
HEAD = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 84929216512,
                          "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
                          "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
                          "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
                          "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}],
    "cupti_version": 24, "cuda_runtime_version": 12040, "cuda_driver_version": 12080,
    "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1, "pg_count": 1, "pg_config": [],
                        "nccl_version": "2.21.5"},
    "record_shapes": 0, "with_stack": 0, "profile_memory": 0,
    "trace_id": "9B7F2E4D5A0C4E1B8A6D3F2E1C0B9A87", "displayTimeUnit": "ms",
    "baseTimeNanoseconds": 1764150000000000000,
}


def _x(cat: str, name: str, pid, tid, ts: float, dur: float, args: dict) -> str:
    a = ",\n      ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in args.items())
    return (f'  {{\n    "ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {json.dumps(pid)}, '
            f'"tid": {json.dumps(tid)},\n    "ts": {ts:.3f}, "dur": {dur:.3f},\n'
            f'    "args": {{\n      {a}\n    }}\n  }}')


def _flow(ph: str, corr: int, pid, tid, ts: float) -> str:
    bp = ', "bp": "e"' if ph == "f" else ""
    return (f'  {{\n    "ph": "{ph}", "id": {corr}, "pid": {json.dumps(pid)}, "tid": {json.dumps(tid)}, '
            f'"ts": {ts:.3f},\n    "cat": "ac2g", "name": "ac2g"{bp}\n  }}')


NCCL = ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", [24, 1, 1], [544, 1, 1], 96,
        103808)


def _nccl_args(seq: int, world: int) -> dict:
    return {"Collective name": "allreduce", "In msg nelems": 2099200, "Out msg nelems": 2099200,
            "Group size": world, "dtype": "Float", "In split size": "[]", "Out split size": "[]",
            "Process Group Name": "0", "Process Group Description": "default_pg",
            "Process Group Ranks": str(list(range(world))), "Seq": seq}


def events(n: int, seed: int, world: int = 1):
    rng = random.Random(seed)
    seq = 0
    TOTAL[0] = n
    STEP_START[0] = (1_000_000.0, 1_000_050.0)
    t_cpu, t_gpu = 1_000_000.0, 1_000_050.0
    corr, ext = 1, 1
    step_open = None
    for k in range(n):
        if k % 14 == 0:  # a step annotation around the next 14 kernels
            if step_open is not None:
                yield from _close_step(step_open, t_cpu, t_gpu, corr)
                corr += 1
                t_cpu += 12.0
            step_open = (k, t_cpu, t_gpu, ext)
            ext += 1
        kid = k % len(KERNELS)
        nccl = world > 1 and k % 14 == 13
        name, grid, block, regs, smem = NCCL if nccl else KERNELS[kid]
        if k % 2 == 0:
            yield _x("cpu_op", OPS[kid], PID, TID, t_cpu, 9.0, {"External id": ext, "Record function id": 0,
                                                                   "Ev Idx": k})
        if k % 4 == 0:  # a memset before the kernel
            yield _x("cuda_runtime", "cudaMemsetAsync", PID, TID, t_cpu + 0.5, 3.1,
                     {"External id": ext, "cbid": 51, "correlation": corr})
            yield _flow("s", corr, PID, TID, t_cpu + 0.5)
            d = rng.uniform(1.0, 2.0)
            yield _x("gpu_memset", "Memset (Device)", DEV, STREAM, t_gpu, d,
                     {"External id": ext, "device": DEV, "context": 1, "stream": STREAM, "correlation": corr,
                      "bytes": 4096 * (1 + kid), "memory bandwidth (GB/s)": 2.1})
            yield _flow("f", corr, DEV, STREAM, t_gpu)
            corr += 1
            t_gpu += d + 0.8
            t_cpu += 4.0
        launch = t_cpu + 1.0
        yield _x("cuda_runtime", "cudaLaunchKernel", PID, TID, launch, 4.2,
                 {"External id": ext, "cbid": 211, "correlation": corr})
        yield _flow("s", corr, PID, TID, launch)
        t_gpu = max(t_gpu, launch + 5.0)
        d = rng.uniform(2.0, 40.0) if not nccl else rng.uniform(20.0, 120.0)
        blocks = grid[0] * grid[1] * grid[2]
        kargs = {"External id": ext, "queued": 0, "device": DEV, "context": 1, "stream": STREAM,
                 "correlation": corr, "registers per thread": regs, "shared memory": smem,
                 "blocks per SM": round(blocks / 132, 6), "warps per SM": round(blocks * block[0] / 32 / 132, 6),
                 "grid": grid, "block": block, "est. achieved occupancy %": 0 if nccl else 25}
        if nccl:
            kargs.update(_nccl_args(seq, world))
            seq += 1
        yield _x("kernel", name, DEV, STREAM, t_gpu, d, kargs)
        yield _flow("f", corr, DEV, STREAM, t_gpu)
        corr += 1
        ext += 1
        t_gpu += d + 1.5
        t_cpu += 6.0
    if step_open is not None:
        yield from _close_step(step_open, t_cpu, t_gpu, corr)


REGIONS = ["embed", "attention", "mlp", "norm", "lm_head"]
STEP_KERNELS = 14 * 150  # kernels per ProfilerStep (a profiler schedule records a few steps of many kernels)


def _close_step(step_open, t_cpu: float, t_gpu: float, corr: int):
    """The annotation over the last 14 kernels (a record_function region), and at a step's end its sync and
    ProfilerStep annotation."""
    k, c0, g0, ext = step_open
    yield _x("user_annotation", REGIONS[(k // 14) % len(REGIONS)], PID, TID, c0, t_cpu - c0, {"External id": ext})
    yield _x("gpu_user_annotation", REGIONS[(k // 14) % len(REGIONS)], DEV, STREAM, g0, max(1.0, t_gpu - g0),
             {"External id": ext})
    if (k + 14) % STEP_KERNELS == 0 or k + 14 >= TOTAL[0]:
        step = k // STEP_KERNELS
        yield _x("cuda_runtime", "cudaStreamSynchronize", PID, TID, t_cpu, max(1.0, t_gpu - t_cpu),
                 {"External id": ext, "cbid": 131, "correlation": corr})
        s0 = STEP_START[0]
        yield _x("user_annotation", f"ProfilerStep#{step}", PID, TID, s0[0], t_cpu - s0[0] + 2.0, {"External id": ext})
        yield _x("gpu_user_annotation", f"ProfilerStep#{step}", DEV, STREAM, s0[1], max(1.0, t_gpu - s0[1]),
                 {"External id": ext})
        STEP_START[0] = (t_cpu + 12.0, t_gpu)


TOTAL = [0]
STEP_START = [(1_000_000.0, 1_000_050.0)]


def write(n: int, out: str, seed: int = 0, rank: int = 0, world: int = 1) -> int:
    """Write the trace (one rank's of ``world`` processes); returns its event count."""
    global DEV, PID, TID
    count = 0
    DEV = rank if world > 1 else 0
    PID = TID = 2418 + DEV  # one process per rank
    head = dict(HEAD)
    if world > 1:
        head["deviceProperties"] = [{**HEAD["deviceProperties"][0], "id": d} for d in range(world)]
        head["distributedInfo"] = {**HEAD["distributedInfo"], "rank": rank, "world_size": world, "pg_config": [
            {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": world,
             "ranks": list(range(world))}]}
    with open(out, "w") as f:
        f.write("{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items())
                + ',\n  "traceEvents": [\n')
        first = True
        buf = []
        for e in events(n, seed, world):
            buf.append(e if first else ",\n" + e)
            first = False
            count += 1
            if len(buf) >= 4096:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))
        f.write('\n  ],\n  "traceName": "/tmp/trace.json"\n}\n')
    return count


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int)
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    a = p.parse_args()
    print(write(a.n, a.out, a.seed + a.rank, a.rank, a.world_size))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
