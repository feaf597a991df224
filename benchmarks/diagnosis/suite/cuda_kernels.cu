// The suite's CUDA C++ kernels: defects Triton cannot express (bank conflicts, dynamically
// indexed local arrays, divergent lanes, a register budget, shared memory sized
// for the worst case). Built by cuda_build.py with nvcc into a shared library that Python
// calls through ctypes on PyTorch's current stream (no pybind, no ninja).
// Every launcher returns cudaGetLastError() so Python can raise on a bad launch.
// A line that carries a planted defect ends in `// planted: CASE`: the source-line score
// (benchmarks/diagnosis/source_score.py) reads the planted lines from these markers.
#include <cuda_runtime.h>
#include <stdint.h>

#define LAUNCHER extern "C" int

// ---- shared-memory bank conflicts: 32x32 tile transpose, unpadded (defect) or padded (fixed)
template <int PAD>
__global__ void transpose_tile(const float* __restrict__ in, float* __restrict__ out, int w) {
  __shared__ float tile[32][32 + PAD];
  int x = blockIdx.x * 32 + threadIdx.x;
  for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(blockIdx.y * 32 + threadIdx.y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  // column read of the tile: all 32 lanes hit one bank without the padding
  for (int j = 0; j < 32; j += 8) out[(size_t)(blockIdx.x * 32 + threadIdx.y + j) * w + x] = tile[threadIdx.x][threadIdx.y + j];  // planted: bank_conflicts
}

LAUNCHER transpose(uintptr_t in, uintptr_t out, int w, int padded, void* stream) {
  dim3 grid(w / 32, w / 32), block(32, 8);
  cudaStream_t s = (cudaStream_t)stream;
  if (padded) transpose_tile<1><<<grid, block, 0, s>>>((const float*)in, (float*)out, w);
  else transpose_tile<0><<<grid, block, 0, s>>>((const float*)in, (float*)out, w);
  return (int)cudaGetLastError();
}

// ---- local memory: y[i] = sum_j x[(j + shift) % K][i] * w[j]
// defect: the rows are loaded in order into a[] and read back rotated by a runtime shift, so
// a[] is indexed dynamically and lives in local memory; fixed: the rotation is applied to the
// global load's row index, a[] is indexed by the unrolled j only and stays in registers.
// Same multiply-adds in the same order: bit-identical results.
#define LOCAL_K 32
template <bool DYNAMIC>
__global__ void rotated_dot(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                            int n, int shift) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a[LOCAL_K];
#pragma unroll
  for (int j = 0; j < LOCAL_K; ++j) a[j] = x[(size_t)(DYNAMIC ? j : (j + shift) % LOCAL_K) * n + i];
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < LOCAL_K; ++j) acc = fmaf(DYNAMIC ? a[(j + shift) % LOCAL_K] : a[j], w[j], acc);  // planted: local_memory
  y[i] = acc;
}

LAUNCHER local_array(uintptr_t x, uintptr_t w, uintptr_t y, int n, int shift, int dynamic, void* stream) {
  int threads = 256, blocks = (n + threads - 1) / threads;
  cudaStream_t s = (cudaStream_t)stream;
  if (dynamic) rotated_dot<true><<<blocks, threads, 0, s>>>((const float*)x, (const float*)w, (float*)y, n, shift);
  else rotated_dot<false><<<blocks, threads, 0, s>>>((const float*)x, (const float*)w, (float*)y, n, shift);
  return (int)cudaGetLastError();
}

// ---- thread divergence: element e runs path A (even) or B (odd), ITERS dependent FMAs each.
// defect: thread t takes element t, so even and odd lanes of a warp diverge and both paths run;
// fixed: within each 64 elements, warp 0 takes the even ones and warp 1 the odd ones.
template <bool WARP_UNIFORM>
__global__ void parity_paths(const float* __restrict__ x, float* __restrict__ y, int n, int iters) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int e = WARP_UNIFORM ? (t / 64) * 64 + 2 * (t % 32) + (t / 32) % 2 : t;
  if (e >= n) return;
  float a = x[e];
  if (e & 1) {
    for (int k = 0; k < iters; ++k) a = fmaf(a, 1.001f, -0.001f);  // planted: divergence
  } else {
    for (int k = 0; k < iters; ++k) a = fmaf(a, 0.999f, 0.001f);  // planted: divergence
  }
  y[e] = a;
}

LAUNCHER divergence(uintptr_t x, uintptr_t y, int n, int iters, int warp_uniform, void* stream) {
  int threads = 256, blocks = (n + threads - 1) / threads;  // n is a multiple of 64
  cudaStream_t s = (cudaStream_t)stream;
  if (warp_uniform) parity_paths<true><<<blocks, threads, 0, s>>>((const float*)x, (float*)y, n, iters);
  else parity_paths<false><<<blocks, threads, 0, s>>>((const float*)x, (float*)y, n, iters);
  return (int)cudaGetLastError();
}

// ---- occupancy limited by shared memory: y[i] = chain of fmaf(a, c[k], 0.001) over a table c
// staged in dynamic shared memory, repeated `reps` times. One dependent chain per thread, so
// speed follows the number of resident warps. The launcher's smem_bytes is the only difference
// between defect (buffer sized for the worst case) and fixed (sized for the table).
__global__ void smem_table_chain(const float* __restrict__ x, const float* __restrict__ table, float* __restrict__ y,
                                 int n, int table_len, int reps) {
  extern __shared__ float c[];
  for (int k = threadIdx.x; k < table_len; k += blockDim.x) c[k] = table[k];
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i];
  for (int r = 0; r < reps; ++r)
    for (int k = 0; k < table_len; ++k) a = fmaf(a, c[k], 0.001f);
  y[i] = a;
}

LAUNCHER smem_chain(uintptr_t x, uintptr_t table, uintptr_t y, int n, int table_len, int reps, int smem_bytes,
                    void* stream) {
  if (smem_bytes < table_len * (int)sizeof(float)) return (int)cudaErrorInvalidValue;
  cudaError_t e = cudaFuncSetAttribute(smem_table_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) return (int)e;
  int threads = 128, blocks = (n + threads - 1) / threads;
  smem_table_chain<<<blocks, threads, smem_bytes, (cudaStream_t)stream>>>((const float*)x, (const float*)table,
                                                                          (float*)y, n, table_len, reps);
  return (int)cudaGetLastError();
}

// ---- occupancy limited by registers: the chain of smem_table_chain over a 192-entry table staged
// in shared memory, in one kernel body compiled twice that differs only in its register budget.
// The body also holds a path the suite never takes (`exact` = 0 at run time: a per-thread copy of the
// table in 192 registers, as a rarely used fallback path would have). ptxas allocates registers for the
// kernel's worst path, so with a free budget (defect: __launch_bounds__(128)) every thread gets ~200
// registers and 2 blocks of 4 warps fit per SM; with __launch_bounds__(128, 16) (fixed) the budget is
// 32 registers, the cold path spills to local memory (never executed), and 16 blocks (64 warps) fit.
// The executed instructions are the same; only the occupancy differs.
#define REG_TABLE 192
template <int MIN_BLOCKS>
__global__ void __launch_bounds__(128, MIN_BLOCKS)
reg_budget_chain(const float* __restrict__ x, const float* __restrict__ table, float* __restrict__ y, int n,
                 int reps, int exact) {
  __shared__ float c[REG_TABLE];
  for (int k = threadIdx.x; k < REG_TABLE; k += blockDim.x) c[k] = table[k];
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i];
  if (exact) {  // cold path (never taken by the suite): the table held in registers of every thread
    float r[REG_TABLE];
#pragma unroll
    for (int k = 0; k < REG_TABLE; ++k) r[k] = table[k];
    for (int rep = 0; rep < reps; ++rep) {
#pragma unroll
      for (int k = 0; k < REG_TABLE; ++k) a = fmaf(a, r[k], 0.001f);
    }
  } else {
    for (int rep = 0; rep < reps; ++rep)
      for (int k = 0; k < REG_TABLE; ++k) a = fmaf(a, c[k], 0.001f);
  }
  y[i] = a;
}

LAUNCHER reg_chain(uintptr_t x, uintptr_t table, uintptr_t y, int n, int reps, int register_bound, void* stream) {
  int threads = 128, blocks = (n + threads - 1) / threads;
  cudaStream_t s = (cudaStream_t)stream;
  if (register_bound)
    reg_budget_chain<1><<<blocks, threads, 0, s>>>((const float*)x, (const float*)table, (float*)y, n, reps, 0);
  else
    reg_budget_chain<16><<<blocks, threads, 0, s>>>((const float*)x, (const float*)table, (float*)y, n, reps, 0);
  return (int)cudaGetLastError();
}

LAUNCHER reg_table_len() { return REG_TABLE; }
LAUNCHER local_k() { return LOCAL_K; }

// ======================================================================= check half (issue 35)
// Variants of the defects above that the rules were not tuned on: other sizes, tiles, block
// shapes and mechanisms. Kernel names share no substring with the tuning kernels' names.

// ---- bank conflicts, 64x64 tile, 64x8 threads, rectangular matrix: out (cols x rows) = in (rows x cols)^T.
// The column read tile[threadIdx.x][j] puts the 32 lanes of a warp 64 floats apart (one bank) without the
// padding; PAD = 1 spreads them over the 32 banks.
template <int PAD>
__global__ void wide_tile_transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[64][64 + PAD];
  int c = blockIdx.x * 64 + threadIdx.x;
  int r0 = blockIdx.y * 64;
  for (int j = threadIdx.y; j < 64; j += 8) tile[j][threadIdx.x] = in[(size_t)(r0 + j) * cols + c];
  __syncthreads();
  int r = r0 + threadIdx.x;
  int c0 = blockIdx.x * 64;
  for (int j = threadIdx.y; j < 64; j += 8) out[(size_t)(c0 + j) * rows + r] = tile[threadIdx.x][j];  // planted: bank_conflicts_wide_tile
}

LAUNCHER transpose_wide(uintptr_t in, uintptr_t out, int rows, int cols, int padded, void* stream) {
  if (rows % 64 || cols % 64) return (int)cudaErrorInvalidValue;
  dim3 grid(cols / 64, rows / 64), block(64, 8);
  cudaStream_t s = (cudaStream_t)stream;
  if (padded) wide_tile_transpose<1><<<grid, block, 0, s>>>((const float*)in, (float*)out, rows, cols);
  else wide_tile_transpose<0><<<grid, block, 0, s>>>((const float*)in, (float*)out, rows, cols);
  return (int)cudaGetLastError();
}

// ---- local memory, a 16-entry array, 128-thread blocks: y[i] = sum_j x[(j + shift) % 16][i] * w[j]
// (the rotation of rotated_dot at another array size; defect: a[] read back at a runtime index).
#define WINDOW_K 16
template <bool DYNAMIC>
__global__ void window_dot(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int n,
                           int shift) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a[WINDOW_K];
#pragma unroll
  for (int j = 0; j < WINDOW_K; ++j) a[j] = x[(size_t)(DYNAMIC ? j : (j + shift) % WINDOW_K) * n + i];
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < WINDOW_K; ++j) acc = fmaf(DYNAMIC ? a[(j + shift) % WINDOW_K] : a[j], w[j], acc);  // planted: local_memory_k16
  y[i] = acc;
}

LAUNCHER window_array(uintptr_t x, uintptr_t w, uintptr_t y, int n, int shift, int dynamic, void* stream) {
  int threads = 128, blocks = (n + threads - 1) / threads;
  cudaStream_t s = (cudaStream_t)stream;
  if (dynamic) window_dot<true><<<blocks, threads, 0, s>>>((const float*)x, (const float*)w, (float*)y, n, shift);
  else window_dot<false><<<blocks, threads, 0, s>>>((const float*)x, (const float*)w, (float*)y, n, shift);
  return (int)cudaGetLastError();
}

// ---- thread divergence by lane % 4: element e runs one of four ITERS-FMA paths chosen by e % 4.
// defect: thread t takes element t, so every warp runs all four paths one after another;
// fixed (128-thread blocks): within each 128 elements, warp w takes the 32 elements with e % 4 == w.
template <bool WARP_UNIFORM>
__global__ void quad_paths(const float* __restrict__ x, float* __restrict__ y, int n, int iters) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int e = WARP_UNIFORM ? (t / 128) * 128 + 4 * (t % 32) + (t / 32) % 4 : t;
  if (e >= n) return;
  float a = x[e];
  switch (e & 3) {
    case 0:
      for (int k = 0; k < iters; ++k) a = fmaf(a, 0.999f, 0.001f);  // planted: divergence_lane4
      break;
    case 1:
      for (int k = 0; k < iters; ++k) a = fmaf(a, 1.001f, -0.001f);  // planted: divergence_lane4
      break;
    case 2:
      for (int k = 0; k < iters; ++k) a = fmaf(a, 0.998f, 0.002f);  // planted: divergence_lane4
      break;
    default:
      for (int k = 0; k < iters; ++k) a = fmaf(a, 1.002f, -0.002f);  // planted: divergence_lane4
      break;
  }
  y[e] = a;
}

LAUNCHER divergence4(uintptr_t x, uintptr_t y, int n, int iters, int warp_uniform, void* stream) {
  if (n % 128) return (int)cudaErrorInvalidValue;
  int threads = 128, blocks = n / threads;
  cudaStream_t s = (cudaStream_t)stream;
  if (warp_uniform) quad_paths<true><<<blocks, threads, 0, s>>>((const float*)x, (float*)y, n, iters);
  else quad_paths<false><<<blocks, threads, 0, s>>>((const float*)x, (float*)y, n, iters);
  return (int)cudaGetLastError();
}

// ---- occupancy limited by shared memory at another block size: smem_table_chain launched with
// `threads` per block (the check case: 256) and `smem_bytes` of dynamic shared memory.
LAUNCHER smem_chain_threads(uintptr_t x, uintptr_t table, uintptr_t y, int n, int table_len, int reps,
                            int smem_bytes, int threads, void* stream) {
  if (smem_bytes < table_len * (int)sizeof(float) || threads < 32 || threads > 1024) return (int)cudaErrorInvalidValue;
  cudaError_t e = cudaFuncSetAttribute(smem_table_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) return (int)e;
  int blocks = (n + threads - 1) / threads;
  smem_table_chain<<<blocks, threads, smem_bytes, (cudaStream_t)stream>>>((const float*)x, (const float*)table,
                                                                          (float*)y, n, table_len, reps);
  return (int)cudaGetLastError();
}

// ---- occupancy limited by registers, another mechanism: a hot per-thread copy of a weight table.
// Each warp follows a chain of dependent loads through `next` (a permutation of `rows` entries, L2-resident;
// all lanes of a warp load the same entry), acc += (row & 255) * w[h % 64] at hop h. Latency-bound: the speed
// follows the number of resident warps. defect: the 64 weights are loaded once into a per-thread array held in
// registers (compile-time indices, ~80 registers: 3 blocks of 256 threads per SM); fixed: the same weights read
// from shared memory (~25 registers, 8 blocks per SM). Same loads of `next`, same FMAs in the same order.
#define CHASE_W 64
template <bool IN_REGISTERS>
__global__ void weighted_chase(const int* __restrict__ next, const float* __restrict__ w, float* __restrict__ y,
                               int rows, int hops) {
  __shared__ float ws[CHASE_W];
  for (int k = threadIdx.x; k < CHASE_W; k += blockDim.x) ws[k] = w[k];
  __syncthreads();
  float wr[CHASE_W];
  if (IN_REGISTERS) {
#pragma unroll
    for (int k = 0; k < CHASE_W; ++k) wr[k] = w[k];
  }
  // volatile: the fixed variant really reads shared memory at every hop (no hoisting of the 64 loads
  // out of the hop loop into registers, which would plant the defect in the fix)
  const volatile float* wsv = ws;
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int row = (t / 32) % rows;
  float acc = 0.0f;
  for (int h0 = 0; h0 < hops; h0 += CHASE_W) {
#pragma unroll
    for (int j = 0; j < CHASE_W; ++j) {
      int nxt = next[row];
      acc = fmaf((float)(row & 255), IN_REGISTERS ? wr[j] : wsv[j], acc);
      row = nxt;
    }
  }
  y[t] = acc;
}

LAUNCHER chase(uintptr_t next, uintptr_t w, uintptr_t y, int threads_total, int rows, int hops, int in_registers,
               void* stream) {
  int threads = 256;
  if (threads_total % threads || hops % CHASE_W) return (int)cudaErrorInvalidValue;
  int blocks = threads_total / threads;
  cudaStream_t s = (cudaStream_t)stream;
  if (in_registers)
    weighted_chase<true><<<blocks, threads, 0, s>>>((const int*)next, (const float*)w, (float*)y, rows, hops);
  else
    weighted_chase<false><<<blocks, threads, 0, s>>>((const int*)next, (const float*)w, (float*)y, rows, hops);
  return (int)cudaGetLastError();
}

LAUNCHER window_k() { return WINDOW_K; }
LAUNCHER chase_w() { return CHASE_W; }
