// ks_blocks.cuh: kernelscope's block recorder for CUDA C++ kernels.
//
// Each thread block writes one row of four int64 into a caller-provided,
// zero-initialised buffer, at row = linear block id
// (blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y):
//
//     [block_id, smid | nsmid << 32, start_ns, end_ns]      times: %globaltimer
//
// the same layout as the Triton recorder (src/kernelscope/collect/instrument/
// layout.py), so kernelscope.collect.instrument.reader.read_block_buffer reads
// it (source="cuda-ks_blocks"). Recording is compiled out unless KS_BLOCKS is
// defined (nvcc -DKS_BLOCKS). Not yet compiled or run: it is checked on a GPU
// machine together with the Triton recorder.
//
//     __global__ void k(..., long long* ks_records) {
//         KS_BLOCK_BEGIN();
//         ...                            // the kernel's work
//         KS_BLOCK_END(ks_records);      // a point every thread of the block reaches
//     }
//
// The host allocates gridDim.x * gridDim.y * gridDim.z * 4 int64, zeroes it
// (cudaMemset) before the launch, and copies it back after.
#pragma once

#ifdef KS_BLOCKS

__device__ __forceinline__ unsigned long long ks_globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));  // volatile: never merged or hoisted
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

#define KS_BLOCK_BEGIN() const unsigned long long ks_block_start_ = ks_globaltimer()

// The barrier makes the end time the moment the whole block is done; thread 0 writes the row.
#define KS_BLOCK_END(records)                                                                          \
    do {                                                                                               \
        __syncthreads();                                                                               \
        if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {                                \
            const unsigned long long ks_end_ = ks_globaltimer();                                       \
            const long long ks_block_ = (long long)blockIdx.x + (long long)blockIdx.y * gridDim.x      \
                                        + (long long)blockIdx.z * gridDim.x * gridDim.y;               \
            long long* ks_row_ = (records) + ks_block_ * 4;                                            \
            ks_row_[0] = ks_block_;                                                                    \
            ks_row_[1] = (long long)ks_smid() | ((long long)ks_nsmid() << 32);                         \
            ks_row_[2] = (long long)ks_block_start_;                                                   \
            ks_row_[3] = (long long)ks_end_;                                                           \
        }                                                                                              \
    } while (0)

#else

#define KS_BLOCK_BEGIN() ((void)0)
#define KS_BLOCK_END(records) ((void)(records))

#endif
