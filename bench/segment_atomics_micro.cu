// The atomic pass of a segment reduction over narrow rows with one thread a row (the old global
// table's layout), by atomic kind: u32 max on order-preserving codes, f32 add, u64 fixed-point
// add; D = 1..8 columns, S = 10^5 and 10^6 uniform int64 ids, N = 2^20 and 2^24 rows; the best of
// 10 runs, and the memset of the table. Numbers: bench/NOTES-segment.md, "Narrow rows".
//   nvcc -O3 -arch=sm_90 -o segment_atomics_micro bench/segment_atomics_micro.cu
#include <cstdio>
#include <cstdint>
#include <vector>
#include <random>
#include <cuda_runtime.h>

__device__ __forceinline__ unsigned enc(float v) {
  unsigned u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

template <int MODE, int D>
__global__ void pass(const float *__restrict__ x, const long long *__restrict__ ids, int N, int S,
                     void *table, int k) {
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < N; r += gridDim.x * blockDim.x) {
    long long id = ids[r];
    float v[D];
#pragma unroll
    for (int e = 0; e < D; ++e)
      v[e] = x[(long long)r * D + e];
#pragma unroll
    for (int e = 0; e < D; ++e) {
      if (MODE == 0)
        atomicMax((unsigned *)table + id * D + e, enc(v[e]));
      if (MODE == 1)
        atomicAdd((float *)table + id * D + e, v[e]);
      if (MODE == 2)
        atomicAdd((unsigned long long *)table + id * D + e,
                  (unsigned long long)__double2ll_rn(ldexp((double)v[e], k)));
    }
  }
}

template <int D> void run(int N, int S, float *x, long long *ids, void *table) {
  const char *names[3] = {"u32 max", "f32 add", "u64 fixed add"};
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int mode = 0; mode < 3; ++mode) {
    for (int grid : {1024, 4096}) {
      size_t bytes = (size_t)S * D * (mode == 2 ? 8 : 4);
      float best = 1e9, bestm = 1e9;
      for (int it = 0; it < 10; ++it) {
        cudaEventRecord(a);
        cudaMemsetAsync(table, 0, bytes);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float m;
        cudaEventElapsedTime(&m, a, b);
        if (m < bestm)
          bestm = m;
        cudaEventRecord(a);
        if (mode == 0)
          pass<0, D><<<grid, 256>>>(x, ids, N, S, table, 40);
        if (mode == 1)
          pass<1, D><<<grid, 256>>>(x, ids, N, S, table, 40);
        if (mode == 2)
          pass<2, D><<<grid, 256>>>(x, ids, N, S, table, 40);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float t;
        cudaEventElapsedTime(&t, a, b);
        if (t < best)
          best = t;
      }
      printf("N=%d D=%d S=%d grid=%d %-14s pass %.1f us  memset %.1f us\n", N, D, S, grid,
             names[mode], best * 1e3, bestm * 1e3);
    }
  }
}

int main() {
  for (int logn : {20, 24}) {
    int N = 1 << logn;
    std::vector<float> hx((size_t)N * 8);
    std::mt19937 g(1);
    std::normal_distribution<float> nd;
    for (auto &v : hx)
      v = nd(g);
    float *x;
    long long *ids;
    void *table;
    cudaMalloc(&x, hx.size() * 4);
    cudaMalloc(&ids, (size_t)N * 8);
    cudaMalloc(&table, (size_t)1000000 * 8 * 8);
    cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice);
    for (int S : {100000, 1000000}) {
      std::vector<long long> hi(N);
      std::uniform_int_distribution<long long> ud(0, S - 1);
      for (auto &v : hi)
        v = ud(g);
      cudaMemcpy(ids, hi.data(), (size_t)N * 8, cudaMemcpyHostToDevice);
      run<1>(N, S, x, ids, table);
      run<2>(N, S, x, ids, table);
      run<3>(N, S, x, ids, table);
      run<4>(N, S, x, ids, table);
      run<8>(N, S, x, ids, table);
    }
    cudaFree(x);
    cudaFree(ids);
    cudaFree(table);
  }
  printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
