// bench/stream_ceilings.cu — what the memory system gives the segment family's access patterns,
// measured once on the lent GPU (bench/NOTES-segment.md, v6). Not part of the build: it needs
// the CUDA runtime, so the device scripts compile it there:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/stream_ceilings.cu -o /tmp/stream_ceilings
// f32 rows of D = 64 (268 MB a tensor) and D = 1024 (4.3 GB), N = 2^20 rows:
//   copy / read / write  plain streams (float4, grid-stride), bytes read plus bytes written;
//   gather (MODE 0)      out[j] = x[perm[j]]: the forward reduction's row gather;
//   rw (MODE 1)          dx[perm[j]] = x[perm[j]] == y[j / 105] ? dy : 0: the max/min backward;
//   phased               memset(dx) then a read-mostly pass that writes only the matching
//                        packs (about 1 in 105): the backward split into write-only and
//                        read-mostly streams;
// each gather and rw by registers (U rows in flight a lane), cp.async (K stages a lane) and TMA
// bulk copies (K stages a warp), with perm random ("rand") or the identity ("seq").
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>
#include <cuda_runtime.h>

static int sms;
#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__);                     \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

__global__ void copy_k(const float4 *__restrict__ a, float4 *__restrict__ b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    b[i] = a[i];
}
__global__ void read_k(const float4 *__restrict__ a, size_t n, float *sink) {
  float s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 v = a[i];
    s += v.x + v.y + v.z + v.w;
  }
  if (s == 1234.5f)
    *sink = s;
}
__global__ void write_k(float4 *__restrict__ b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    b[i] = make_float4(1, 2, 3, 4);
}

__device__ __forceinline__ float4 ldcs(const float4 *p) {
  float4 r;
  asm volatile("ld.global.cs.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
               : "l"(p));
  return r;
}
__device__ __forceinline__ void stcs(float4 *p, float4 v) {
  asm volatile("st.global.cs.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
}

// The rows of positions j0 .. j0 + U - 1 (their indices and this lane's CPL float4 of each),
// every load issued before any is used.
template <int G, int CPL, int U>
__device__ __forceinline__ void load_rows(const float4 *__restrict__ x,
                                          const int *__restrict__ perm, int N, long j0, int lane,
                                          int (&row)[U], float4 (&v)[U][CPL]) {
#pragma unroll
  for (int u = 0; u < U; ++u)
    row[u] = j0 + u < N ? perm[j0 + u] : 0;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int k = 0; k < CPL; ++k)
      v[u][k] = ldcs(x + (long)row[u] * G * CPL + k * G + lane);
}

// Registers: a group of G lanes per position, CPL float4 a lane, U positions at a time.
// MODE 0 gather (write out[j]), 1 rw (write dx[perm[j]] from a y/dy compare).
template <int G, int CPL, int U, int MODE>
__global__ void __launch_bounds__(256)
    reg_k(const float4 *__restrict__ x, const int *__restrict__ perm, int N, int seg,
          const float4 *__restrict__ y, const float4 *__restrict__ dy, float4 *__restrict__ out) {
  constexpr int R4 = G * CPL; // float4 a row
  const int lane = threadIdx.x % G;
  const long groups = (long)gridDim.x * (blockDim.x / G);
  for (long j0 = ((long)blockIdx.x * blockDim.x + threadIdx.x) / G * U; j0 < N; j0 += groups * U) {
    int row[U];
    float4 v[U][CPL];
    load_rows<G, CPL, U>(x, perm, N, j0, lane, row, v);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (j0 + u >= N)
        break;
#pragma unroll
      for (int k = 0; k < CPL; ++k) {
        if (MODE == 0) {
          stcs(out + (j0 + u) * R4 + k * G + lane, v[u][k]);
        } else {
          const int s = (int)((j0 + u) / seg);
          const float4 yy = y[(long)s * R4 + k * G + lane];
          float4 r = make_float4(0, 0, 0, 0);
          if (v[u][k].x == yy.x || v[u][k].y == yy.y || v[u][k].z == yy.z || v[u][k].w == yy.w)
            r = dy[(long)s * R4 + k * G + lane];
          stcs(out + (long)row[u] * R4 + k * G + lane, r);
        }
      }
    }
  }
}

// cp.async: each lane copies its own 16-byte pieces K positions ahead into its own slots.
template <int G, int CPL, int K, int MODE>
__global__ void __launch_bounds__(256)
    cpa_k(const float4 *__restrict__ x, const int *__restrict__ perm, int N, int seg,
          const float4 *__restrict__ y, const float4 *__restrict__ dy, float4 *__restrict__ out) {
  constexpr int R4 = G * CPL;
  extern __shared__ float4 sm[];
  float4 *mine = sm + threadIdx.x * K * CPL;
  const int lane = threadIdx.x % G;
  const long group = ((long)blockIdx.x * blockDim.x + threadIdx.x) / G;
  const long groups = (long)gridDim.x * (blockDim.x / G);
  // Positions of this group: group, group + groups, ...
  const long count = group < N ? (N - 1 - group) / groups + 1 : 0;
  auto issue = [&](long it) {
    if (it < count) {
      const long j = group + it * groups;
      const int row = perm[j];
#pragma unroll
      for (int k = 0; k < CPL; ++k) {
        unsigned d = (unsigned)__cvta_generic_to_shared(mine + (it % K) * CPL + k);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d),
                     "l"(x + (long)row * R4 + k * G + lane)
                     : "memory");
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int p = 0; p < K - 1; ++p)
    issue(p);
  for (long it = 0; it < count; ++it) {
    issue(it + K - 1);
    asm volatile("cp.async.wait_group %0;" ::"n"(K - 1) : "memory");
    const long j = group + it * groups;
    const int row = MODE == 1 ? perm[j] : 0;
#pragma unroll
    for (int k = 0; k < CPL; ++k) {
      const float4 v = mine[(it % K) * CPL + k];
      if (MODE == 0) {
        stcs(out + j * R4 + k * G + lane, v);
      } else {
        const int s = (int)(j / seg);
        const float4 yy = y[(long)s * R4 + k * G + lane];
        float4 r = make_float4(0, 0, 0, 0);
        if (v.x == yy.x || v.y == yy.y || v.z == yy.z || v.w == yy.w)
          r = dy[(long)s * R4 + k * G + lane];
        stcs(out + (long)row * R4 + k * G + lane, r);
      }
    }
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
}

// TMA bulk copies: each warp owns K stages of RPS rows (ROWB bytes each) and one mbarrier a
// stage; lane 0 issues, every lane waits on the stage's parity, reads its float4s, stores.
__device__ __forceinline__ unsigned smaddr(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
template <int ROWB, int RPS, int K, int MODE>
__global__ void __launch_bounds__(128)
    tma_k(const float4 *__restrict__ x, const int *__restrict__ perm, int N, int seg,
          const float4 *__restrict__ y, const float4 *__restrict__ dy, float4 *__restrict__ out) {
  constexpr int R4 = ROWB / 16;
  constexpr int PER_LANE = R4 * RPS / 32; // float4 a lane a step
  extern __shared__ __align__(128) unsigned char smraw[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wpb = blockDim.x / 32;
  unsigned char *stages = smraw + (size_t)warp * K * ROWB * RPS;
  unsigned long long *bars =
      reinterpret_cast<unsigned long long *>(smraw + (size_t)wpb * K * ROWB * RPS) + warp * K;
  if (lane == 0)
    for (int s = 0; s < K; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smaddr(bars + s)));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncwarp();
  const long gw = (long)blockIdx.x * wpb + warp;
  const long nw = (long)gridDim.x * wpb;
  const long steps_total = (N + RPS - 1) / RPS;
  const long count = gw < steps_total ? (steps_total - 1 - gw) / nw + 1 : 0;
  auto issue = [&](long it) {
    if (lane != 0 || it >= count)
      return;
    const long step = gw + it * nw;
    const int st = (int)(it % K);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smaddr(bars + st)),
                 "r"(ROWB * RPS)
                 : "memory");
    for (int r = 0; r < RPS; ++r) {
      const long j = step * RPS + r;
      const int row = perm[j < N ? j : N - 1];
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                   "%2, [%3];" ::"r"(smaddr(stages + (size_t)(st * RPS + r) * ROWB)),
                   "l"(x + (long)row * R4), "r"(ROWB), "r"(smaddr(bars + st))
                   : "memory");
    }
  };
  for (int p = 0; p < K - 1; ++p)
    issue(p);
  for (long it = 0; it < count; ++it) {
    issue(it + K - 1);
    const int st = (int)(it % K);
    const unsigned phase = (unsigned)((it / K) & 1);
    unsigned ok = 0;
    while (!ok)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 "
                   "%0, 1, 0, p; }"
                   : "=r"(ok)
                   : "r"(smaddr(bars + st)), "r"(phase)
                   : "memory");
    const long step = gw + it * nw;
    const float4 *sv = reinterpret_cast<const float4 *>(stages + (size_t)st * RPS * ROWB);
#pragma unroll
    for (int q = 0; q < PER_LANE; ++q) {
      const int e = q * 32 + lane; // float4 index within the step
      const int r = e / R4, c = e % R4;
      const long j = step * RPS + r;
      if (j >= N)
        continue;
      const float4 v = sv[e];
      if (MODE == 0) {
        stcs(out + j * R4 + c, v);
      } else {
        const int row = perm[j];
        const int s = (int)(j / seg);
        const float4 yy = y[(long)s * R4 + c];
        float4 o = make_float4(0, 0, 0, 0);
        if (v.x == yy.x || v.y == yy.y || v.z == yy.z || v.w == yy.w)
          o = dy[(long)s * R4 + c];
        stcs(out + (long)row * R4 + c, o);
      }
    }
    __syncwarp();
  }
}

// y[s][c] = max over the positions of segment s (j / seg == s) of x[perm[j]][c].
__global__ void seg_max_k(const float *__restrict__ x, const int *__restrict__ perm, int N, int D,
                          int seg, float *__restrict__ y) {
  const long t = blockIdx.x * (long)blockDim.x + threadIdx.x;
  const long S = (N + seg - 1) / seg;
  if (t >= S * D)
    return;
  const long s = t / D, c = t % D;
  float m = -INFINITY;
  for (long j = s * seg; j < min((long)N, (s + 1) * seg); ++j)
    m = fmaxf(m, x[(long)perm[j] * D + c]);
  y[t] = m;
}

// Read-mostly mark: dx was zeroed; write a pack only where an element matches y.
template <int G, int CPL, int U>
__global__ void __launch_bounds__(256)
    sparse_k(const float4 *__restrict__ x, const int *__restrict__ perm, int N, int seg,
             const float4 *__restrict__ y, const float4 *__restrict__ dy,
             float4 *__restrict__ out) {
  constexpr int R4 = G * CPL;
  const int lane = threadIdx.x % G;
  const long groups = (long)gridDim.x * (blockDim.x / G);
  for (long j0 = ((long)blockIdx.x * blockDim.x + threadIdx.x) / G * U; j0 < N; j0 += groups * U) {
    int row[U];
    float4 v[U][CPL];
    load_rows<G, CPL, U>(x, perm, N, j0, lane, row, v);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (j0 + u >= N)
        break;
      const int s = (int)((j0 + u) / seg);
#pragma unroll
      for (int k = 0; k < CPL; ++k) {
        const float4 yy = y[(long)s * R4 + k * G + lane];
        const bool mx = v[u][k].x == yy.x, my = v[u][k].y == yy.y, mz = v[u][k].z == yy.z,
                   mw = v[u][k].w == yy.w;
        if (mx || my || mz || mw) {
          const float4 g = dy[(long)s * R4 + k * G + lane];
          out[(long)row[u] * R4 + k * G + lane] =
              make_float4(mx ? g.x : 0.f, my ? g.y : 0.f, mz ? g.z : 0.f, mw ? g.w : 0.f);
        }
      }
    }
  }
}

struct Bufs {
  float4 *x, *out, *y, *dy;
  int *perm_rand, *perm_id;
  float *sink;
};

template <class F> float time_ms(F f, int inner, int iters = 7) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int w = 0; w < 2; ++w)
    f();
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventRecord(a));
    for (int k = 0; k < inner; ++k)
      f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / inner);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Every row kernel takes (x, perm, N, seg, y, dy, out).
typedef void (*row_kernel)(const float4 *, const int *, int, int, const float4 *, const float4 *,
                           float4 *);

// A full grid of `kernel` (every block the SMs hold at once, grid-stride loops do the rest):
// its blocks and the blocks an SM holds.
static int full_grid(row_kernel kernel, int threads, int smem, int *per_sm) {
  if (smem > 0)
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kernel, threads, smem));
  return sms * *per_sm;
}

static void run_rows(const char *name, row_kernel kernel, int threads, int smem, Bufs &B,
                     const int *perm, int N, int seg, double bytes, int inner) {
  int per_sm = 0;
  const int blocks = full_grid(kernel, threads, smem, &per_sm);
  float ms = time_ms(
      [&] { kernel<<<blocks, threads, smem>>>(B.x, perm, N, seg, B.y, B.dy, B.out); }, inner);
  printf("%-34s %8.4f ms %7.0f GB/s  (%d blocks/SM, %d B smem)\n", name, ms, bytes / ms / 1e6,
         per_sm, smem);
}

template <int G, int CPL, int U, int MODE>
void run_reg(const char *name, Bufs &B, const int *perm, int N, int seg, double bytes, int inner) {
  run_rows(name, reg_k<G, CPL, U, MODE>, 256, 0, B, perm, N, seg, bytes, inner);
}

template <int G, int CPL, int K, int MODE>
void run_cpa(const char *name, Bufs &B, const int *perm, int N, int seg, double bytes, int inner) {
  run_rows(name, cpa_k<G, CPL, K, MODE>, 256, 256 * K * CPL * 16, B, perm, N, seg, bytes, inner);
}

template <int ROWB, int RPS, int K, int MODE>
void run_tma(const char *name, Bufs &B, const int *perm, int N, int seg, double bytes, int inner) {
  run_rows(name, tma_k<ROWB, RPS, K, MODE>, 128, 4 * K * ROWB * RPS + 4 * K * 8, B, perm, N, seg,
           bytes, inner);
}

template <int G, int CPL, int U>
void run_sparse(const char *name, float4 *x, const int *perm, int N, int seg, float4 *y, float4 *dy,
                float4 *out, size_t out_bytes, double bytes, int inner) {
  auto k = sparse_k<G, CPL, U>;
  int per_sm = 0;
  const int blocks = full_grid(k, 256, 0, &per_sm);
  float ms = time_ms(
      [&] {
        CK(cudaMemsetAsync(out, 0, out_bytes));
        k<<<blocks, 256>>>(x, perm, N, seg, y, dy, out);
      },
      inner);
  float msk = time_ms([&] { k<<<blocks, 256>>>(x, perm, N, seg, y, dy, out); }, inner);
  float msm = time_ms([&] { CK(cudaMemsetAsync(out, 0, out_bytes)); }, inner);
  printf("%-34s %8.4f ms %7.0f GB/s  (memset %.4f + mark %.4f; %d blocks/SM)\n", name, ms,
         bytes / ms / 1e6, msm, msk, per_sm);
}

// Checks a gather result against the host permutation on a few rows.
void check_gather(Bufs &B, const std::vector<int> &perm, int N, int R4, const char *what) {
  std::vector<float4> o(4 * R4), xin(4 * R4);
  int bad = 0;
  for (int t = 0; t < 4; ++t) {
    const int j = (int)((long)N * t / 4 + 7) % N;
    CK(cudaMemcpy(&o[t * R4], B.out + (long)j * R4, R4 * 16, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&xin[t * R4], B.x + (long)perm[j] * R4, R4 * 16, cudaMemcpyDeviceToHost));
    for (int c = 0; c < R4; ++c)
      bad += o[t * R4 + c].x != xin[t * R4 + c].x || o[t * R4 + c].w != xin[t * R4 + c].w;
  }
  if (bad)
    printf("  !! %s: %d mismatches\n", what, bad);
}

int main() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  sms = p.multiProcessorCount;
  printf("%s, %d SMs, L2 %d MB\n", p.name, sms, p.l2CacheSize >> 20);
  const int N = 1 << 20;
  Bufs B;
  const size_t big = (size_t)N * 1024 * 4;
  CK(cudaMalloc(&B.x, big));
  CK(cudaMalloc(&B.out, big));
  CK(cudaMalloc(&B.y, 10000ull * 1024 * 4));
  CK(cudaMalloc(&B.dy, 10000ull * 1024 * 4));
  CK(cudaMalloc(&B.perm_rand, N * 4));
  CK(cudaMalloc(&B.perm_id, N * 4));
  CK(cudaMalloc(&B.sink, 4));
  {
    std::vector<float> h(big / 4);
    std::mt19937 g(1);
    for (size_t i = 0; i < h.size(); ++i)
      h[i] = (float)(g() % 100000) * 1e-3f + 1.0f;
    CK(cudaMemcpy(B.x, h.data(), big, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B.y, h.data(), 10000ull * 1024 * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B.dy, h.data() + 7, 10000ull * 1024 * 4, cudaMemcpyHostToDevice));
  }
  std::vector<int> pr(N), pi(N);
  std::iota(pi.begin(), pi.end(), 0);
  pr = pi;
  std::shuffle(pr.begin(), pr.end(), std::mt19937(2));
  CK(cudaMemcpy(B.perm_rand, pr.data(), N * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(B.perm_id, pi.data(), N * 4, cudaMemcpyHostToDevice));

  for (int D : {64, 1024}) {
    const size_t n4 = (size_t)N * D / 4;
    const double b = (double)N * D * 4;
    const int inner = D == 64 ? 20 : 3;
    printf("\n== D = %d (%.0f MB a tensor)\n", D, b / 1e6);
    float ms = time_ms([&] { copy_k<<<sms * 8, 256>>>(B.x, B.out, n4); }, inner);
    printf("%-34s %8.4f ms %7.0f GB/s\n", "copy", ms, 2 * b / ms / 1e6);
    ms = time_ms([&] { read_k<<<sms * 8, 256>>>(B.x, n4, B.sink); }, inner);
    printf("%-34s %8.4f ms %7.0f GB/s\n", "read", ms, b / ms / 1e6);
    ms = time_ms([&] { write_k<<<sms * 8, 256>>>(B.out, n4); }, inner);
    printf("%-34s %8.4f ms %7.0f GB/s\n", "write", ms, b / ms / 1e6);
    for (int pass = 0; pass < 2; ++pass) {
      const int *perm = pass == 0 ? B.perm_rand : B.perm_id;
      const char *pn = pass == 0 ? "rand" : "seq";
      const int seg = 105; // positions a segment (S = 10^4)
      char name[64];
#define R(KIND, ...)                                                                               \
  snprintf(name, sizeof name, "%s %s " #__VA_ARGS__, #KIND, pn);                                   \
  run_##KIND<__VA_ARGS__>(name, B, perm, N, seg, 2 * b, inner)
      if (D == 64) {
        R(reg, 16, 1, 4, 0);
        check_gather(B, pass == 0 ? pr : pi, N, 16, "reg");
        R(reg, 16, 1, 8, 0);
        R(reg, 16, 1, 16, 0);
        R(cpa, 16, 1, 4, 0);
        R(cpa, 16, 1, 8, 0);
        check_gather(B, pass == 0 ? pr : pi, N, 16, "cpa");
        R(tma, 256, 2, 8, 0);
        R(tma, 256, 2, 16, 0);
        check_gather(B, pass == 0 ? pr : pi, N, 16, "tma");
        R(tma, 256, 4, 8, 0);
        R(reg, 16, 1, 4, 1);
        R(reg, 16, 1, 8, 1);
        R(cpa, 16, 1, 8, 1);
        R(tma, 256, 2, 16, 1);
        R(tma, 256, 4, 8, 1);
      } else {
        R(reg, 32, 8, 1, 0);
        R(reg, 32, 8, 2, 0);
        check_gather(B, pass == 0 ? pr : pi, N, 256, "reg");
        R(reg, 32, 8, 4, 0);
        R(cpa, 32, 8, 2, 0);
        R(cpa, 32, 8, 3, 0);
        R(tma, 4096, 1, 2, 0);
        R(tma, 4096, 1, 4, 0);
        check_gather(B, pass == 0 ? pr : pi, N, 256, "tma");
        R(tma, 4096, 1, 8, 0);
        R(reg, 32, 8, 1, 1);
        R(reg, 32, 8, 2, 1);
        R(reg, 32, 8, 4, 1);
        R(cpa, 32, 8, 3, 1);
        R(tma, 4096, 1, 4, 1);
        R(tma, 4096, 1, 8, 1);
      }
    }
  }

  printf("\n== phased: memset(dx) then read-mostly mark (y = true segment max, 105 positions a "
         "segment)\n");
  for (int D : {64, 1024}) {
    const int seg = 105;
    const long S = (N + seg - 1) / seg;
    for (int pass = 0; pass < 2; ++pass) {
      const int *perm = pass == 0 ? B.perm_rand : B.perm_id;
      seg_max_k<<<(unsigned)((S * D + 255) / 256), 256>>>((const float *)B.x, perm, N, D, seg,
                                                          (float *)B.y);
      CK(cudaDeviceSynchronize());
      const double b = (double)N * D * 4;
      const int inner = D == 64 ? 20 : 3;
      char name[64];
      snprintf(name, sizeof name, "phased %s D=%d", pass == 0 ? "rand" : "seq", D);
      if (D == 64) {
        run_sparse<16, 1, 4>(name, B.x, perm, N, seg, B.y, B.dy, B.out, (size_t)b, 2 * b, inner);
        run_sparse<16, 1, 8>(name, B.x, perm, N, seg, B.y, B.dy, B.out, (size_t)b, 2 * b, inner);
        run_reg<16, 1, 4, 1>("  rw same y (compare)", B, perm, N, seg, 2 * b, inner);
      } else {
        run_sparse<32, 8, 1>(name, B.x, perm, N, seg, B.y, B.dy, B.out, (size_t)b, 2 * b, inner);
        run_sparse<32, 8, 2>(name, B.x, perm, N, seg, B.y, B.dy, B.out, (size_t)b, 2 * b, inner);
        run_reg<32, 8, 1, 1>("  rw same y (compare)", B, perm, N, seg, 2 * b, inner);
      }
    }
  }
  return 0;
}
