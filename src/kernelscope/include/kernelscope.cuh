// kernelscope.cuh: in-kernel recording for CUDA C++ kernels, read by kernelscope.
//
// Two recorders, both compiled to nothing unless KS_RECORD is defined
// (nvcc -DKS_RECORD, NVRTC option "-DKS_RECORD"), so a plain build pays nothing:
//
// 1. The block recorder: each thread block writes the SM it ran on and its start
//    and end time (%globaltimer, ns) into one row of four int64, at
//    row = linear block id (blockIdx.x + blockIdx.y*gridDim.x + blockIdx.z*gridDim.x*gridDim.y):
//
//        [block_id, smid | nsmid << 32, start_ns, end_ns]
//
//    the layout of kernelscope/collect/instrument/layout.py. The host zeroes the
//    buffer (grid blocks * 4 int64) before the launch.
//
// 2. Warp phase scopes: KS_SCOPE_BEGIN(id) / KS_SCOPE_END(id) have the first
//    active lane of the warp write one record of two int64. That lane claims
//    KS_SCOPES_CHUNK slots at a time with one atomicAdd on the buffer's counter
//    (one atomic per warp for four scopes, not one per record: a counter that every
//    record hit would serialise the GPU's warps on one address). The buffer (int64):
//
//        [0] capacity: records the buffer holds           (the host writes it)
//        [1] claimed: slots claimed, KS_SCOPES_CHUNK per claim (the kernel's counter)
//        [2] KS_SCOPES_MAGIC                               (the host writes it)
//        [3] dropped: records that found no room           (the kernel's counter)
//        [4 + 2*i, 5 + 2*i]  record i:
//            value 0: %globaltimer, ns (never zero on a running GPU: zero = never written)
//            value 1: block id (bits 0-31) | warp in block (bits 32-39) | %smid (bits 40-51)
//                     | scope id (bits 52-61) | 1 for END, 0 for BEGIN (bit 62)
//
//    A record whose slot is at or past the capacity is never written, only
//    counted in [3]. Slots of a claim a warp did not use stay zero. Scope ids are
//    0..1023; the warp is threadIdx's linear index / 32. KS_SCOPES_INIT reads the
//    thread's block, warp, lane and SM once and declares the locals that hold
//    them and the warp's claim, so the scope macros must be used in the function
//    (scope) that calls KS_SCOPES_INIT: a record then reads only the clock.
//    kernelscope's Python side
//    (kernelscope.collect.instrument.cuda_scopes) holds the same numbers and reads
//    the buffer.
//
//     extern "C" __global__ void k(float* x, long long* ks_blocks, long long* ks_scopes) {
//         KS_BLOCK_BEGIN();
//         KS_SCOPES_INIT(ks_scopes);
//         KS_SCOPE_BEGIN(0);  ...load...   KS_SCOPE_END(0);
//         KS_SCOPE_BEGIN(1);  ...math...   KS_SCOPE_END(1);
//         KS_BLOCK_END(ks_blocks);         // a point every thread of the block reaches
//     }
//
// No #include: it compiles under nvcc, NVRTC (cupy.RawModule) and
// torch.utils.cpp_extension alike.
#pragma once

// The layout, for host code too.
#define KS_BLOCK_ROW_VALUES 4
#define KS_SCOPES_HEADER_VALUES 4
#define KS_SCOPES_RECORD_VALUES 2
#define KS_SCOPES_MAGIC 0x4B53434F50453031LL  // "KSCOPE01"
#define KS_SCOPES_MAX_ID 1023
#define KS_SCOPES_CHUNK 8  // slots a warp claims at once

#if defined(KS_RECORD) && (defined(__CUDACC__) || defined(__CUDACC_RTC__))

__device__ __forceinline__ unsigned long long ks_globaltimer() {
    unsigned long long t;
    // volatile and "memory": never merged, and the compiler keeps the kernel's loads and stores on their side
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : : "memory");
    return t;
}

__device__ __forceinline__ unsigned int ks_smid() {
    unsigned int v;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(v));
    return v;
}

__device__ __forceinline__ unsigned int ks_nsmid() {  // %smid need not be contiguous: keep its bound
    unsigned int v;
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(v));
    return v;
}

__device__ __forceinline__ unsigned long long ks_block_id() {
    return (unsigned long long)blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x
           + (unsigned long long)blockIdx.z * gridDim.x * gridDim.y;
}

// The packed value's fixed part for the calling thread's warp: block id (bits 0-31), warp in block (32-39),
// %smid (40-51; a block runs on one SM from start to end).
__device__ __forceinline__ unsigned long long ks_scope_tag() {
    const unsigned int tid = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
    return (ks_block_id() & 0xFFFFFFFFULL) | ((unsigned long long)((tid >> 5) & 0xFF) << 32)
           | ((unsigned long long)(ks_smid() & 0xFFF) << 40);
}

// The thread's lane: warps are cut from the linear thread index, 32 at a time.
__device__ __forceinline__ unsigned int ks_lane() {
    return (threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y) & 31u;
}

// One record of a warp's scope. END reads the clock before any claim; BEGIN
// reads it only after (the read sits behind a branch on the claim's result),
// so an atomic's latency falls outside the interval the two records bound.
// next/stop: the recording lane's current claim; limit: the end of its room
// (the capacity, read once per claim).
__device__ __forceinline__ void ks_scope_record(long long* buf, unsigned long long tag, unsigned int lane,
                                                unsigned long long& next, unsigned long long& stop,
                                                unsigned long long& limit, unsigned int id, unsigned int end) {
    if (lane != (unsigned int)(__ffs(__activemask()) - 1)) return;  // one lane per warp: the first active one
    unsigned long long t = end ? ks_globaltimer() : 0ULL;
    if (next == stop) {
        next = atomicAdd((unsigned long long*)(buf + 1), (unsigned long long)KS_SCOPES_CHUNK);
        stop = next + KS_SCOPES_CHUNK;
        const unsigned long long capacity = (unsigned long long)buf[0];
        limit = capacity < stop ? capacity : stop;
    }
    const unsigned long long slot = next++;
    if (slot >= limit) {  // full: counted, never written past the end
        atomicAdd((unsigned long long*)(buf + 3), 1ULL);
        return;
    }
    if (!end) t = ks_globaltimer();
    long long* rec = buf + KS_SCOPES_HEADER_VALUES + KS_SCOPES_RECORD_VALUES * slot;
    rec[0] = (long long)t;
    rec[1] = (long long)(tag | ((unsigned long long)(id & KS_SCOPES_MAX_ID) << 52)
                         | ((unsigned long long)(end ? 1 : 0) << 62));
}

#define KS_SCOPES_INIT(buf)                                                                            \
    long long* const ks_scopes_buffer_ = (buf);                                                        \
    const unsigned long long ks_scopes_tag_ = ks_scope_tag();                                          \
    const unsigned int ks_scopes_lane_ = ks_lane();                                                    \
    unsigned long long ks_scopes_next_ = 0, ks_scopes_stop_ = 0, ks_scopes_limit_ = 0
#define KS_SCOPE_RECORD_(id, end)                                                                      \
    ks_scope_record(ks_scopes_buffer_, ks_scopes_tag_, ks_scopes_lane_, ks_scopes_next_, ks_scopes_stop_, \
                    ks_scopes_limit_, (unsigned int)(id), (end))
#define KS_SCOPE_BEGIN(id) KS_SCOPE_RECORD_(id, 0u)
#define KS_SCOPE_END(id) KS_SCOPE_RECORD_(id, 1u)

#define KS_BLOCK_BEGIN() const unsigned long long ks_block_start_ = ks_globaltimer()

// The barrier makes the end time the moment the whole block is done; thread 0 writes the row.
#define KS_BLOCK_END(records)                                                                          \
    do {                                                                                               \
        __syncthreads();                                                                               \
        if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {                                \
            const unsigned long long ks_end_ = ks_globaltimer();                                       \
            const unsigned long long ks_block_ = ks_block_id();                                        \
            long long* ks_row_ = (records) + ks_block_ * KS_BLOCK_ROW_VALUES;                          \
            ks_row_[0] = (long long)ks_block_;                                                         \
            ks_row_[1] = (long long)ks_smid() | ((long long)ks_nsmid() << 32);                         \
            ks_row_[2] = (long long)ks_block_start_;                                                   \
            ks_row_[3] = (long long)ks_end_;                                                           \
        }                                                                                              \
    } while (0)

#else  // not recording: every macro is a no-op the compiler removes

#define KS_SCOPES_INIT(buf) ((void)(buf))
#define KS_SCOPE_BEGIN(id) ((void)0)
#define KS_SCOPE_END(id) ((void)0)
#define KS_BLOCK_BEGIN() ((void)0)
#define KS_BLOCK_END(records) ((void)(records))

#endif
