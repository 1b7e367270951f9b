// jitops/segment_sort.cuh — a stable LSD radix sort of row indices by segment id, which
// turns unsorted ids into the segment-ordered row list (keys + perm) the reduction walks.
//
// Stability is the point: rows of one segment keep their row order, so each segment is later
// reduced in row order and the result is bit-identical from run to run. Each pass sorts by
// `bits` (at most 8) bits starting at `shift`:
//   upsweep   — each tile of SORT_TILE rows counts its digits into table[digit][tile];
//   scan      — one block turns the table into exclusive start positions (digit-major, so
//               a digit's rows from earlier tiles come first);
//   downsweep — each tile ranks its rows stably within their digit (warp match + per-warp
//               counts, in row order) and scatters keys and row indices to their positions.
// The first pass reads the caller's ids (any stride, int or long long) and maps them with
// radix_key; later passes read the previous pass's keys and values.
#pragma once
#include "jitops/segment_common.cuh"

namespace jitops {
namespace segment {

constexpr int SORT_THREADS = 256;
constexpr int SORT_ITEMS = 16;
constexpr int SORT_TILE = SORT_THREADS * SORT_ITEMS;
constexpr int SORT_WARPS = SORT_THREADS / 32;
constexpr int SORT_RADIX_MAX = 256;
constexpr int SCAN_THREADS = 1024;
constexpr int SCAN_ITEMS = 4;

template <class I, bool FIRST>
__device__ __forceinline__ int sort_key(const I *ids, i64 id_stride, const int *keys, i64 j,
                                        int S) {
  if constexpr (FIRST)
    return radix_key(ids[j * id_stride], S);
  else
    return keys[j];
}

template <class I, bool FIRST>
__global__ void __launch_bounds__(SORT_THREADS)
    segment_sort_upsweep(const I *__restrict__ ids, i64 id_stride, const int *__restrict__ keys,
                         int N, int S, int shift, int bits, int *__restrict__ table) {
  __shared__ int hist[SORT_RADIX_MAX];
  const int radix = 1 << bits, mask = radix - 1;
  const int tid = threadIdx.x, lane = tid & 31;
  for (int d = tid; d < radix; d += SORT_THREADS)
    hist[d] = 0;
  __syncthreads();

  const i64 base = (i64)blockIdx.x * SORT_TILE + tid;
  int digit[SORT_ITEMS];
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    const i64 j = base + (i64)k * SORT_THREADS;
    digit[k] = j < N ? (sort_key<I, FIRST>(ids, id_stride, keys, j, S) >> shift) & mask : -1;
  }
  // Lanes holding the same digit add once, through their lowest lane: far fewer shared
  // atomics when digits repeat (sorted-looking or few-segment ids).
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    const unsigned peers = __match_any_sync(0xffffffffu, digit[k]);
    if (digit[k] >= 0 && lane == __ffs(peers) - 1)
      atomicAdd(&hist[digit[k]], __popc(peers));
  }
  __syncthreads();
  for (int d = tid; d < radix; d += SORT_THREADS)
    table[(i64)d * gridDim.x + blockIdx.x] = hist[d];
}

// Exclusive prefix sum of n ints in place, by a single block. The radix table holds
// radix x tiles entries (32 Ki for a million rows), which one block scans in microseconds.
template <int UNUSED = 0>
__global__ void __launch_bounds__(SCAN_THREADS)
    segment_scan_exclusive(int *__restrict__ data, i64 n) {
  __shared__ int warp_total[SCAN_THREADS / 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int carry = 0;
  for (i64 base = 0; base < n; base += SCAN_THREADS * SCAN_ITEMS) {
    int v[SCAN_ITEMS];
    int sum = 0;
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; ++k) {
      const i64 i = base + (i64)tid * SCAN_ITEMS + k;
      v[k] = i < n ? data[i] : 0;
      sum += v[k];
    }
    int inclusive = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, inclusive, o);
      if (lane >= o)
        inclusive += y;
    }
    if (lane == 31)
      warp_total[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
      int w = warp_total[lane];
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o)
          w += y;
      }
      warp_total[lane] = w;
    }
    __syncthreads();
    int prefix = carry + (warp > 0 ? warp_total[warp - 1] : 0) + inclusive - sum;
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; ++k) {
      const i64 i = base + (i64)tid * SCAN_ITEMS + k;
      if (i < n)
        data[i] = prefix;
      prefix += v[k];
    }
    carry += warp_total[SCAN_THREADS / 32 - 1];
    __syncthreads(); // warp_total is rewritten by the next tile
  }
}

template <class I, bool FIRST>
__global__ void __launch_bounds__(SORT_THREADS)
    segment_sort_downsweep(const I *__restrict__ ids, i64 id_stride,
                           const int *__restrict__ keys_in, const int *__restrict__ vals_in, int N,
                           int S, int shift, int bits, const int *__restrict__ table,
                           int *__restrict__ keys_out, int *__restrict__ vals_out) {
  __shared__ int next[SORT_RADIX_MAX];                   // next free position of each digit
  __shared__ int warp_start[SORT_WARPS][SORT_RADIX_MAX]; // per round: counts, then starts
  const int radix = 1 << bits, mask = radix - 1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const unsigned lanes_below = (1u << lane) - 1u;
  for (int d = tid; d < radix; d += SORT_THREADS)
    next[d] = table[(i64)d * gridDim.x + blockIdx.x];

  // All loads first: one memory latency per tile instead of one per round.
  const i64 base = (i64)blockIdx.x * SORT_TILE + tid;
  int key[SORT_ITEMS], val[SORT_ITEMS];
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    const i64 j = base + (i64)k * SORT_THREADS;
    key[k] = -1;
    val[k] = 0;
    if (j < N) {
      key[k] = sort_key<I, FIRST>(ids, id_stride, keys_in, j, S);
      val[k] = FIRST ? (int)j : vals_in[j];
    }
  }

  // Round k places rows [tile + k*256, tile + (k+1)*256): warps in order, lanes in order,
  // so each row's position among its digit's rows is its row order (stability). Unrolled, so
  // that key[k] and val[k] stay in registers.
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    for (int q = tid; q < SORT_WARPS * radix; q += SORT_THREADS)
      warp_start[q / radix][q % radix] = 0;
    __syncthreads();
    const int d = key[k] >= 0 ? (key[k] >> shift) & mask : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, d);
    const int rank = __popc(peers & lanes_below);
    if (d >= 0 && rank == 0)
      warp_start[warp][d] = __popc(peers);
    __syncthreads();
    for (int dd = tid; dd < radix; dd += SORT_THREADS) {
      int run = next[dd];
#pragma unroll
      for (int w = 0; w < SORT_WARPS; ++w) {
        const int c = warp_start[w][dd];
        warp_start[w][dd] = run;
        run += c;
      }
      next[dd] = run;
    }
    __syncthreads();
    if (d >= 0) {
      const int pos = warp_start[warp][d] + rank;
      keys_out[pos] = key[k];
      vals_out[pos] = val[k];
    }
    __syncthreads(); // warp_start is cleared by the next round
  }
}

} // namespace segment
} // namespace jitops
