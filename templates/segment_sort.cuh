// jitops/segment_sort.cuh — a stable LSD radix sort of row indices by segment id, which
// turns unsorted ids into the segment-ordered row list (keys + perm) the reduction walks.
//
// Stability is the point: rows of one segment keep their row order, so each segment is later
// reduced in row order and the result is bit-identical from run to run. Each pass sorts by
// `bits` (at most 8) bits starting at `shift`:
//   upsweep   — each tile of SORT_TILE rows counts its digits into table[digit][tile];
//   scan      — one block turns the table into exclusive start positions (digit-major, so
//               a digit's rows from earlier tiles come first);
//   downsweep — each tile ranks its rows stably within their digit (each warp ranks its own
//               contiguous rows with warp matches, then one scan over the warps) and
//               scatters keys and row indices to their positions.
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
constexpr int SCAN_ITEMS = 16;

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
  // Per warp: its running count of each digit while it ranks, then the first position of
  // its rows of each digit.
  __shared__ int warp_digits[SORT_WARPS][SORT_RADIX_MAX];
  const int radix = 1 << bits, mask = radix - 1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const unsigned lanes_below = (1u << lane) - 1u;

  // Warp w owns the tile's rows [w*512, (w+1)*512); its item k at lane l is row k*32 + l of
  // them. So a warp ranks its rows alone, in row order, and warps come in row order too:
  // the position of a row among its digit's rows is its row order (stability), with two
  // block barriers per tile.
  const i64 base = (i64)blockIdx.x * SORT_TILE + (i64)warp * (SORT_ITEMS * 32) + lane;
  int key[SORT_ITEMS], val[SORT_ITEMS], rank[SORT_ITEMS];
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    const i64 j = base + (i64)k * 32;
    key[k] = -1;
    val[k] = 0;
    if (j < N) {
      key[k] = sort_key<I, FIRST>(ids, id_stride, keys_in, j, S);
      val[k] = FIRST ? (int)j : vals_in[j];
    }
  }
  for (int d = lane; d < radix; d += 32)
    warp_digits[warp][d] = 0;
  __syncwarp();
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    const int d = key[k] >= 0 ? (key[k] >> shift) & mask : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, d);
    const int before = d >= 0 ? warp_digits[warp][d] : 0;
    rank[k] = before + __popc(peers & lanes_below);
    __syncwarp();
    if (d >= 0 && (peers & lanes_below) == 0)
      warp_digits[warp][d] = before + __popc(peers);
    __syncwarp();
  }
  __syncthreads();
  for (int d = tid; d < radix; d += SORT_THREADS) {
    int run = table[(i64)d * gridDim.x + blockIdx.x];
#pragma unroll
    for (int w = 0; w < SORT_WARPS; ++w) {
      const int c = warp_digits[w][d];
      warp_digits[w][d] = run;
      run += c;
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    if (key[k] >= 0) {
      const int pos = warp_digits[warp][(key[k] >> shift) & mask] + rank[k];
      keys_out[pos] = key[k];
      vals_out[pos] = val[k];
    }
  }
}

} // namespace segment
} // namespace jitops
