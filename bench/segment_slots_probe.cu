// Deterministic narrow segment sums by per-segment row slots (a probe; the library does not
// use it): a memset of a count a segment; a rank pass, c = atomicAdd(&count[id], 1) and the row
// index into slot c of its segment (K slots); a reduce pass, a thread a segment, its <= K row
// indices sorted and its rows added in row order, checked bit for bit against a host sum in row
// order. Against: a memset and f32 atomicAdd a thread an element (index_add_'s kernel).
// N = 2^20, S = 10^6 and 524288 uniform int64 ids, D = 1, 2, 3, 4, 8; CUDA events, median of 9
// samples of 10 calls. Numbers: bench/NOTES-segment.md, "Two more designs for narrow rows".
//   nvcc -O3 -arch=sm_90 -o segment_slots_probe bench/segment_slots_probe.cu
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));                             \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

constexpr int K = 8;
constexpr int ROWS = 4; // rows in flight a thread

__global__ void rank_pass(const long long *__restrict__ ids, int N, int S, unsigned *counts,
                          unsigned *slots, unsigned *overflow) {
  const int base = blockIdx.x * blockDim.x * ROWS + threadIdx.x;
  long long id[ROWS];
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    int r = base + j * blockDim.x;
    id[j] = r < N ? ids[r] : -1;
  }
  unsigned c[ROWS];
#pragma unroll
  for (int j = 0; j < ROWS; ++j)
    c[j] = (id[j] >= 0 && id[j] < S) ? atomicAdd(&counts[id[j]], 1u) : ~0u;
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    if (c[j] < K)
      slots[id[j] * K + c[j]] = base + j * blockDim.x;
    else if (c[j] != ~0u)
      atomicAdd(overflow, 1u);
  }
}

__device__ __forceinline__ void cas(unsigned &a, unsigned &b) {
  unsigned lo = min(a, b), hi = max(a, b);
  a = lo;
  b = hi;
}

template <int D>
__global__ void reduce_pass(const float *__restrict__ x, int S, const unsigned *__restrict__ counts,
                            const unsigned *__restrict__ slots, float *out) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= S)
    return;
  const unsigned c = min(counts[s], (unsigned)K);
  unsigned r[K];
  uint4 lo = make_uint4(~0u, ~0u, ~0u, ~0u), hi = lo;
  if (c > 0)
    lo = reinterpret_cast<const uint4 *>(slots)[(size_t)s * 2];
  if (c > 4)
    hi = reinterpret_cast<const uint4 *>(slots)[(size_t)s * 2 + 1];
  r[0] = lo.x, r[1] = c > 1 ? lo.y : ~0u, r[2] = c > 2 ? lo.z : ~0u, r[3] = c > 3 ? lo.w : ~0u;
  r[4] = c > 4 ? hi.x : ~0u, r[5] = c > 5 ? hi.y : ~0u, r[6] = c > 6 ? hi.z : ~0u,
  r[7] = c > 7 ? hi.w : ~0u;
  if (c > 1) {
    cas(r[0], r[1]), cas(r[2], r[3]), cas(r[4], r[5]), cas(r[6], r[7]);
    cas(r[0], r[2]), cas(r[1], r[3]), cas(r[4], r[6]), cas(r[5], r[7]);
    cas(r[1], r[2]), cas(r[5], r[6]), cas(r[0], r[4]), cas(r[3], r[7]);
    cas(r[1], r[5]), cas(r[2], r[6]);
    cas(r[1], r[4]), cas(r[3], r[6]);
    cas(r[2], r[4]), cas(r[3], r[5]);
    cas(r[3], r[4]);
  }
  float v[K][D];
#pragma unroll
  for (int j = 0; j < K; ++j)
#pragma unroll
    for (int e = 0; e < D; ++e)
      v[j][e] = j < (int)c ? x[(size_t)r[j] * D + e] : 0.0f;
  float acc[D];
#pragma unroll
  for (int e = 0; e < D; ++e) {
    acc[e] = c > 0 ? v[0][e] : 0.0f;
#pragma unroll
    for (int j = 1; j < K; ++j)
      if (j < (int)c)
        acc[e] += v[j][e];
    out[(size_t)s * D + e] = acc[e];
  }
}

template <int D>
__global__ void atomic_pass(const float *__restrict__ x, const long long *__restrict__ ids, int N,
                            int S, float *out) {
  const long long n = (long long)N * D;
  const long long base = (long long)blockIdx.x * blockDim.x * ROWS + threadIdx.x;
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    long long i = base + j * blockDim.x;
    if (i < n) {
      long long id = ids[i / D];
      if (id >= 0 && id < S)
        atomicAdd(&out[id * D + i % D], x[i]);
    }
  }
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    cudaEventCreate(&a);
    cudaEventCreate(&b);
  }
  template <class F> float median_us(F f, int samples = 9, int calls = 10) {
    std::vector<float> t;
    f();
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < samples; ++i) {
      cudaEventRecord(a);
      for (int k = 0; k < calls; ++k)
        f();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      t.push_back(ms * 1000.0f / calls);
    }
    std::sort(t.begin(), t.end());
    return t[samples / 2];
  }
};

template <int D> void run(int N, int S, const std::vector<long long> &hids, const long long *ids) {
  std::mt19937 rng(7 + D);
  std::normal_distribution<float> nd;
  std::vector<float> hx((size_t)N * D);
  for (float &v : hx)
    v = nd(rng);
  float *x, *out, *ref;
  unsigned *counts, *slots, *overflow;
  CK(cudaMalloc(&x, hx.size() * 4));
  CK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&out, (size_t)S * D * 4));
  CK(cudaMalloc(&ref, (size_t)S * D * 4));
  CK(cudaMalloc(&counts, (size_t)S * 4));
  CK(cudaMalloc(&slots, (size_t)S * K * 4));
  CK(cudaMalloc(&overflow, 4));
  const int rank_blocks = (N + 256 * ROWS - 1) / (256 * ROWS);
  const int reduce_blocks = (S + 255) / 256;
  const int atomic_blocks = (int)(((long long)N * D + 256 * ROWS - 1) / (256 * ROWS));
  auto slots_call = [&] {
    cudaMemsetAsync(counts, 0, (size_t)S * 4);
    cudaMemsetAsync(overflow, 0, 4);
    rank_pass<<<rank_blocks, 256>>>(ids, N, S, counts, slots, overflow);
    reduce_pass<D><<<reduce_blocks, 256>>>(x, S, counts, slots, out);
  };
  auto atomic_call = [&] {
    cudaMemsetAsync(ref, 0, (size_t)S * D * 4);
    atomic_pass<D><<<atomic_blocks, 256>>>(x, ids, N, S, ref);
  };
  Timer tm;
  float t_slots = tm.median_us(slots_call);
  float t_memset = tm.median_us([&] { cudaMemsetAsync(counts, 0, (size_t)S * 4); });
  float t_rank = tm.median_us([&] {
    cudaMemsetAsync(counts, 0, (size_t)S * 4);
    rank_pass<<<rank_blocks, 256>>>(ids, N, S, counts, slots, overflow);
  }) - t_memset;
  slots_call();
  CK(cudaDeviceSynchronize());
  float t_reduce =
      tm.median_us([&] { reduce_pass<D><<<reduce_blocks, 256>>>(x, S, counts, slots, out); });
  float t_atomic = tm.median_us(atomic_call);
  // check: bit for bit against a host sum in row order
  slots_call();
  CK(cudaDeviceSynchronize());
  unsigned ovf;
  CK(cudaMemcpy(&ovf, overflow, 4, cudaMemcpyDeviceToHost));
  std::vector<float> hout((size_t)S * D), want((size_t)S * D, 0.0f);
  std::vector<int> seen(S, 0);
  CK(cudaMemcpy(hout.data(), out, hout.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<int> cnt(S, 0);
  for (int r = 0; r < N; ++r)
    cnt[hids[r]]++;
  for (int r = 0; r < N; ++r) {
    long long s = hids[r];
    for (int e = 0; e < D; ++e)
      want[s * D + e] = seen[s] ? want[s * D + e] + hx[(size_t)r * D + e] : hx[(size_t)r * D + e];
    seen[s] = 1;
  }
  long long bad = 0, skipped = 0;
  for (int s = 0; s < S; ++s) {
    if (cnt[s] > K) {
      skipped++;
      continue;
    }
    for (int e = 0; e < D; ++e)
      if (memcmp(&hout[(size_t)s * D + e], &want[(size_t)s * D + e], 4) != 0)
        bad++;
  }
  printf("D=%d S=%d N=%d: slots %.1f us (memset %.1f, rank %.1f, reduce %.1f) | memset+float "
         "atomics %.1f us | overflow rows %u, segments > K %lld, mismatches %lld\n",
         D, S, N, t_slots, t_memset, t_rank, t_reduce, t_atomic, ovf, skipped, bad);
  cudaFree(x), cudaFree(out), cudaFree(ref), cudaFree(counts), cudaFree(slots), cudaFree(overflow);
}

int main() {
  const int N = 1 << 20;
  for (int S : {1000000, 524288}) {
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<long long> u(0, S - 1);
    std::vector<long long> hids(N);
    for (long long &v : hids)
      v = u(rng);
    long long *ids;
    CK(cudaMalloc(&ids, N * 8));
    CK(cudaMemcpy(ids, hids.data(), N * 8, cudaMemcpyHostToDevice));
    run<1>(N, S, hids, ids);
    run<2>(N, S, hids, ids);
    run<3>(N, S, hids, ids);
    run<4>(N, S, hids, ids);
    run<8>(N, S, hids, ids);
    cudaFree(ids);
  }
  return 0;
}
