// Kernels with known memory behaviour, to check the counter pass on a CUDA C++
// program (not Python): a coalesced copy, a strided (uncoalesced) copy, a naive
// shared-memory transpose with bank conflicts, a padded one without, and a
// WMMA fp16 matmul that uses the tensor cores.
// Build: nvcc -O3 -arch=sm_90 -o access_patterns access_patterns.cu
#include <cstdio>
#include <cstdlib>
#include <cuda_fp16.h>
#include <mma.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void copy_coalesced(const float* __restrict__ in, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

__global__ void copy_strided(const float* __restrict__ in, float* __restrict__ out, int n, int stride) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  long j = (long)i * stride % n;  // neighbouring threads touch addresses `stride` floats apart
  if (i < n) out[j] = in[j];
}

template <int PAD>
__global__ void transpose_smem(const float* __restrict__ in, float* __restrict__ out, int w) {
  __shared__ float tile[32][32 + PAD];
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  tile[threadIdx.y][threadIdx.x] = in[y * w + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
  out[y * w + x] = tile[threadIdx.x][threadIdx.y];  // column read: 32-way conflict without padding
}

__global__ void wmma_gemm(const half* a, const half* b, float* c, int n) {
  using namespace nvcuda;
  int warp_m = (blockIdx.x * blockDim.x + threadIdx.x) / 32 % (n / 16);
  int warp_n = (blockIdx.x * blockDim.x + threadIdx.x) / 32 / (n / 16);
  if (warp_n >= n / 16) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  for (int k = 0; k < n; k += 16) {
    wmma::load_matrix_sync(fa, a + warp_m * 16 * n + k, n);
    wmma::load_matrix_sync(fb, b + k * n + warp_n * 16, n);
    wmma::mma_sync(fc, fa, fb, fc);
  }
  wmma::store_matrix_sync(c + warp_m * 16 * n + warp_n * 16, fc, n, wmma::mem_row_major);
}

int main() {
  const int n = 1 << 24, w = 4096, m = 1024;
  float *in, *out; half *a, *b; float* c;
  CHECK(cudaMalloc(&in, n * sizeof(float))); CHECK(cudaMalloc(&out, n * sizeof(float)));
  CHECK(cudaMalloc(&a, m * m * sizeof(half))); CHECK(cudaMalloc(&b, m * m * sizeof(half)));
  CHECK(cudaMalloc(&c, m * m * sizeof(float)));
  CHECK(cudaMemset(in, 1, n * sizeof(float))); CHECK(cudaMemset(a, 0x3c, m * m * sizeof(half)));
  CHECK(cudaMemset(b, 0x3c, m * m * sizeof(half)));
  copy_coalesced<<<n / 256, 256>>>(in, out, n);
  copy_strided<<<n / 256, 256>>>(in, out, n, 32);
  transpose_smem<0><<<dim3(w / 32, w / 32), dim3(32, 32)>>>(in, out, w);
  transpose_smem<1><<<dim3(w / 32, w / 32), dim3(32, 32)>>>(in, out, w);
  wmma_gemm<<<(m / 16) * (m / 16) * 32 / 128, 128>>>(a, b, c, m);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  printf("access_patterns: done\n");
  return 0;
}
