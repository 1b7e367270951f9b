// bench/scan_tile_bound.cu — what bounds a single-pass scan whose tiles stage in shared memory
// (bench/NOTES-scan.md, "Wide tiles staged by cp.async" and "L2 prefetch ahead of the wide
// tiles"), measured on the lent GPU. Not part of the build: it needs the CUDA runtime, so it is
// compiled where it runs (or here, and the binary carried):
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/scan_tile_bound.cu -o /tmp/scan_tile_bound
//   /tmp/scan_tile_bound [N]   (f32 elements, default 2^27)
// Copies through the scan's tiles (8 warps of 32 positions a lane, staged by cp.async, six
// blocks an SM), adding the scan's ordering costs one at a time: a ticket, two block barriers,
// a wait for the predecessor tile's loads, and a fully chained pass; beside cudaMemcpy and a
// plain vector copy. Then `ordered` tiles (16-byte cp.async): waiting on the predecessor or
// walking a decoupled look-back of flags (no states, no scan), with more bytes held in
// registers beside the staging, and with the inputs of a later tile prefetched into L2.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e) {                                                                                       \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                                               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

constexpr int WARPS = 8, ITEMS = 32, CHUNK = 32 * ITEMS, TILE = WARPS * CHUNK,
              SLOTS = CHUNK + ITEMS;

__device__ __forceinline__ unsigned saddr(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp4(float *d, const float *s) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(saddr(d)), "l"(s) : "memory");
}
__device__ __forceinline__ void cp16(void *d, const void *s) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr(d)), "l"(s) : "memory");
}
__device__ __forceinline__ void wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

__global__ void vec_copy(const float4 *x, float4 *y, long n4) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4;
       i += (long)gridDim.x * blockDim.x)
    y[i] = x[i];
}

// MODE bits: 1 ticket, 2 wait predecessor's flag (published after the load; chained), 4 16-byte
// copies, 8 publish after the predecessor's (a fully chained pass), 16 two block barriers
template <int MODE>
__global__ void __launch_bounds__(256, 6)
    staged(const float *x, float *y, unsigned *ticket, volatile unsigned *flags) {
  __shared__ __align__(16) float st[WARPS * SLOTS];
  __shared__ long s_tile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long tile = blockIdx.x;
  if (MODE & 1) {
    if (threadIdx.x == 0)
      s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    tile = s_tile;
  }
  const long base = tile * TILE + warp * CHUNK;
  float *s = st + warp * SLOTS;
  if (MODE & 4) {
    // lane-striped 16-byte chunks: chunk c = lane + 32j at smem float offset 4c (no padding)
#pragma unroll
    for (int j = 0; j < ITEMS / 4; ++j)
      cp16(s + 4 * (lane + 32 * j), x + base + 4 * (lane + 32 * j));
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)
      cp4(s + lane + 33 * j, x + base + lane + 32 * j);
  }
  wait_all();
  __syncwarp();
  float acc = 0; // a blocked read, as the scan's reduce does
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    acc += s[(MODE & 4) ? lane * ITEMS + i : lane * 33 + i];
  if (MODE & 16)
    __syncthreads();
  if (MODE & 2) {
    if (threadIdx.x == 0) {
      if (!(MODE & 8)) {
        __threadfence();
        flags[tile] = 1;
      }
      if (tile > 0)
        while (flags[tile - 1] == 0) {
        }
      if (MODE & 8) {
        __threadfence();
        flags[tile] = 1;
      }
    }
    __syncthreads();
  } else if (MODE & 16) {
    __syncthreads();
  }
  if (acc == 12345.f)
    s[lane] = 0; // keep the reads
  __syncwarp();
  if (MODE & 4) {
#pragma unroll
    for (int j = 0; j < ITEMS / 4; ++j)
      reinterpret_cast<float4 *>(y + base)[lane + 32 * j] =
          reinterpret_cast<float4 *>(s)[lane + 32 * j];
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)
      y[base + lane + 32 * j] = s[lane + 33 * j];
  }
}

// Ordered tiles: the staging above by 16-byte cp.async, plus REGV 16-byte vectors a thread held
// in registers (more bytes in flight a block). WAIT 0: none; 1: wait for the predecessor's flag,
// published after the loads; 2: a decoupled look-back of flags only (aggregate 1, inclusive 2),
// a warp reading a window of 32 predecessors per round trip. PF: the inputs of the tile PFD
// tickets ahead prefetched into L2, 1 by one bulk prefetch, 2 by a line a thread, 3 the same
// with evict_last.
template <int REGV, int MINB, int WAIT, int PF = 0, int PFD = 0, bool CS = false>
__global__ void __launch_bounds__(256, MINB)
    ordered(const float *x, float *y, unsigned *ticket, volatile unsigned *flags, long ntiles) {
  constexpr long HT = TILE + 256 * REGV * 4;
  __shared__ __align__(16) float st[WARPS * SLOTS];
  __shared__ long s_tile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0)
    s_tile = atomicAdd(ticket, 1u);
  __syncthreads();
  const long tile = s_tile;
  const long base = tile * HT + warp * CHUNK;
  if (PF && tile + PFD < ntiles) {
    const float *ahead = x + (tile + PFD) * HT;
    if (PF == 1) {
      if (threadIdx.x == 0)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ahead),
                     "r"((unsigned)(HT * 4))
                     : "memory");
    } else if (PF == 2) {
      for (int i = threadIdx.x; i < HT / 32; i += 256)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(ahead + 32 * i) : "memory");
    } else {
      for (int i = threadIdx.x; i < HT / 32; i += 256)
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(ahead + 32 * i) : "memory");
    }
  }
  float *s = st + warp * SLOTS;
#pragma unroll
  for (int j = 0; j < ITEMS / 4; ++j)
    cp16(s + 4 * (lane + 32 * j), x + base + 4 * (lane + 32 * j));
  const float4 *xr = reinterpret_cast<const float4 *>(x + tile * HT + TILE);
  float4 r[REGV > 0 ? REGV : 1];
#pragma unroll
  for (int j = 0; j < REGV; ++j)
    r[j] = xr[threadIdx.x + 256 * j];
  wait_all();
  __syncwarp();
  float acc = 0; // every byte in hand before the tile publishes, as a scan's reduce needs
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    acc += s[lane * ITEMS + i];
#pragma unroll
  for (int j = 0; j < REGV; ++j)
    acc += r[j].x + r[j].y + r[j].z + r[j].w;
  if (WAIT == 1) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      flags[tile] = 1;
      if (tile > 0)
        while (flags[tile - 1] == 0) {
        }
    }
    __syncthreads();
  } else if (WAIT == 2) {
    __syncthreads();
    if (warp == 0) {
      if (lane == 0) {
        __threadfence();
        flags[tile] = tile == 0 ? 2u : 1u;
      }
      for (long w = tile - 1 - lane; tile > 0; w -= 32) {
        unsigned f = w >= 0 ? flags[w] : 2u;
        while (__any_sync(~0u, f == 0))
          f = w >= 0 ? flags[w] : 2u;
        if (__any_sync(~0u, f == 2))
          break;
      }
      __syncwarp();
      if (lane == 0 && tile > 0) {
        __threadfence();
        flags[tile] = 2u;
      }
    }
    __syncthreads();
  }
  if (acc == 12345.f)
    s[lane] = 0;
  __syncwarp();
#pragma unroll
  for (int j = 0; j < ITEMS / 4; ++j) {
    float4 *to = reinterpret_cast<float4 *>(y + base) + lane + 32 * j;
    const float4 v = reinterpret_cast<float4 *>(s)[lane + 32 * j];
    if (CS)
      __stcs(to, v);
    else
      *to = v;
  }
  float4 *yr = reinterpret_cast<float4 *>(y + tile * HT + TILE);
#pragma unroll
  for (int j = 0; j < REGV; ++j)
    yr[threadIdx.x + 256 * j] = r[j];
}

template <class F>
float timeit(F f, cudaEvent_t a, cudaEvent_t b, unsigned *ticket, unsigned *flags, size_t nflags) {
  for (int w = 0; w < 3; ++w) {
    CK(cudaMemsetAsync(ticket, 0, 16));
    CK(cudaMemsetAsync(flags, 0, nflags * 4));
    f();
  }
  float best = 1e9, tot = 0;
  const int R = 20;
  for (int r = 0; r < R; ++r) {
    CK(cudaMemsetAsync(ticket, 0, 16));
    CK(cudaMemsetAsync(flags, 0, nflags * 4));
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    tot += ms;
    if (ms < best)
      best = ms;
  }
  CK(cudaGetLastError());
  return tot / R;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : (1l << 27);
  n = n / TILE * TILE;
  const long tiles = n / TILE;
  float *x, *y;
  unsigned *ticket, *flags;
  CK(cudaMalloc(&x, n * 4));
  CK(cudaMalloc(&y, n * 4));
  CK(cudaMalloc(&ticket, 16));
  CK(cudaMalloc(&flags, tiles * 4));
  CK(cudaMemset(x, 0, n * 4));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  int occ;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, staged<0>, 256, 0));
  const double gb = 2.0 * n * 4 / 1e9;
  auto report = [&](const char *name, float ms) {
    printf("%-44s %8.4f ms  %7.1f GB/s\n", name, ms, gb / ms * 1e3);
  };
  report("cudaMemcpyAsync D2D",
         timeit([&] { CK(cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice)); }, a, b, ticket,
                flags, tiles));
  report("float4 grid-stride copy",
         timeit([&] { vec_copy<<<132 * 16, 256>>>((const float4 *)x, (float4 *)y, n / 4); }, a, b,
                ticket, flags, tiles));
#define RUN(M, name)                                                                               \
  report(name, timeit([&] { staged<M><<<tiles, 256>>>(x, y, ticket, flags); }, a, b, ticket,       \
                      flags, tiles))
  RUN(0, "staged 4B, blockIdx tiles");
  RUN(4, "staged 16B, blockIdx tiles");
  RUN(1, "staged 4B + ticket");
  RUN(16 | 1, "staged 4B + ticket + 2 barriers");
  RUN(2 | 1, "staged 4B + ticket + wait pred loaded");
  RUN(2 | 8 | 1, "staged 4B + ticket + chained (pred done)");
  RUN(4 | 1, "staged 16B + ticket");
  RUN(4 | 2 | 1, "staged 16B + ticket + wait pred loaded");
#define ORDERED(R, B, W, P, D, name) ORDERED_CS(R, B, W, P, D, false, name)
#define ORDERED_CS(R, B, W, P, D, C, name)                                                         \
  do {                                                                                             \
    const long ht = TILE + 256l * R * 4, nt = n / ht;                                              \
    int blocks;                                                                                    \
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, ordered<R, B, W, P, D, C>, 256, 0)); \
    const float ms =                                                                               \
        timeit([&] { ordered<R, B, W, P, D, C><<<nt, 256>>>(x, y, ticket, flags, nt); }, a, b,     \
               ticket, flags, tiles);                                                              \
    printf("%-44s %8.4f ms  %7.1f GB/s  (%d blocks/SM)\n", name, ms,                               \
           2.0 * nt * ht * 4 / 1e9 / ms * 1e3, blocks);                                            \
  } while (0)
  ORDERED(0, 6, 0, 0, 0, "ordered, no wait");
  ORDERED(0, 6, 1, 0, 0, "ordered + wait pred loaded");
  ORDERED(0, 6, 2, 0, 0, "ordered + look-back");
  ORDERED(4, 6, 1, 0, 0, "+ 4 vectors in registers, wait pred");
  ORDERED(4, 6, 2, 0, 0, "+ 4 vectors in registers, look-back");
  ORDERED(8, 5, 2, 0, 0, "+ 8 vectors, 5 blocks/SM, look-back");
  ORDERED(12, 4, 2, 0, 0, "+ 12 vectors, 4 blocks/SM, look-back");
  ORDERED(0, 6, 1, 1, 66, "wait pred, L2 prefetch 66 ahead");
  ORDERED(0, 6, 1, 1, 132, "wait pred, L2 prefetch 132 ahead");
  ORDERED(0, 6, 2, 1, 33, "look-back, L2 prefetch 33 ahead");
  ORDERED(0, 6, 2, 1, 66, "look-back, L2 prefetch 66 ahead");
  ORDERED(0, 6, 2, 1, 99, "look-back, L2 prefetch 99 ahead");
  ORDERED(0, 6, 2, 1, 132, "look-back, L2 prefetch 132 ahead");
  ORDERED(0, 6, 2, 1, 264, "look-back, L2 prefetch 264 ahead");
  ORDERED(0, 6, 2, 1, 792, "look-back, L2 prefetch 792 ahead");
  ORDERED(0, 6, 2, 2, 66, "look-back, prefetch a line a thread, 66");
  ORDERED(0, 6, 2, 3, 66, "look-back, the same, evict_last, 66");
  ORDERED(4, 6, 2, 1, 66, "look-back, 4 vectors + L2 prefetch 66");
  ORDERED_CS(0, 6, 2, 0, 0, true, "look-back, streaming stores");
  ORDERED_CS(0, 6, 2, 1, 66, true, "look-back, prefetch 66, streaming stores");
  ORDERED_CS(0, 6, 2, 1, 132, true, "look-back, prefetch 132, streaming stores");
  ORDERED_CS(0, 6, 2, 1, 264, true, "look-back, prefetch 264, streaming stores");
  printf("occupancy staged: %d blocks/SM, tiles %ld\n", occ, tiles);
  return 0;
}
