// jitops/segment_sort.cuh — a stable LSD radix sort of the rows by segment id, which turns
// unsorted ids into the segment-ordered row list (keys + rows, or keys + values) that the
// reduction walks.
//
// Stability is the point: rows of one segment keep their row order, so each segment is later
// reduced in row order and the result is bit-identical from run to run. Keys are the ids mapped
// by radix_key (< S + 2), so only bit_width(S + 1) bits are sorted, in as few passes of at most
// 8 bits as that takes. A "onesweep" sort:
//   histogram — one kernel reads the ids once and counts the digits of every pass;
//   pass      — one launch per pass (one kernel serves them all): each block takes the next
//               tile of SORT_TILE positions, ranks its rows stably within their digit (each
//               warp ranks its own contiguous rows, matching digits with ballots), learns where
//               its rows of each digit go from its predecessors' published counts (decoupled
//               look-back: no separate upsweep and scan), reorders the tile by digit in shared
//               memory and writes it out in runs of consecutive positions.
// The first pass reads the caller's ids (any stride, int or long long) and maps them with
// radix_key; its values are the row indices, or with CARRY (rows of one column) the rows'
// values themselves, so that the reduction streams them instead of gathering. Later passes
// read the previous pass's keys and values.
#pragma once
#include "jitops/segment_common.cuh"

namespace jitops {
namespace segment {

// The sort's shape (segment_abi.h): keys are below 2^31, so at most SORT_PASSES_MAX passes.
constexpr int SORT_THREADS = JITOPS__SEGMENT_SORT_THREADS, SORT_ITEMS = JITOPS__SEGMENT_SORT_ITEMS,
              SORT_TILE = JITOPS__SEGMENT_SORT_TILE,
              SORT_PASSES_MAX = JITOPS__SEGMENT_SORT_PASSES_MAX,
              HIST_ITEMS = JITOPS__SEGMENT_HIST_ITEMS;
constexpr int SORT_WARPS = SORT_THREADS / 32;
// Predecessor tiles a look-back reads per round trip: with every tile of a small sort in flight
// at once, one at a time would make the last tile wait for hundreds of round trips.
constexpr int LOOKBACK_BATCH = 32;

// A look-back word: a count in the low 32 bits and what it counts in the top two bits — the
// tile's own rows of the digit (AGGREGATE), or those of the tile and every earlier tile
// (PREFIX). 0 means "not published yet"; the sort's scratch starts zeroed.
constexpr u64 LOOKBACK_AGGREGATE = 1ull << 62;
constexpr u64 LOOKBACK_PREFIX = 2ull << 62;

__device__ __forceinline__ int digit_of_pass(int key, int p, int bits, int mask) {
  return (key >> (p * bits)) & mask;
}

// hist[p * SORT_RADIX_MAX + d] += number of keys whose digit of pass p is d, for every pass
// (hist starts zeroed). Integer counts: their order does not matter. Behind the digit path's
// fallback flag (`fallback` given) it first zeroes the segment bounds that the chunked reduction
// starts from, which that path leaves out of its memset.
template <class I>
__global__ void __launch_bounds__(SORT_THREADS)
    segment_sort_histogram(const jitops__segment_sort_args a) {
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const i64 id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments, passes = a.passes, bits = a.bits;
  int *__restrict__ hist = a.hist;
  const int *__restrict__ fallback = a.fallback;
  int *__restrict__ seg_start = a.seg_start;
  int *__restrict__ seg_end = a.seg_end;
  __shared__ int local[SORT_PASSES_MAX * SORT_RADIX_MAX];
  const int tid = threadIdx.x, mask = (1 << bits) - 1;
  wait_for_previous_grid();
  if (!fallback_runs(fallback))
    return;
  if (fallback != nullptr)
    for (i64 s = (i64)blockIdx.x * SORT_THREADS + tid; s < S; s += (i64)gridDim.x * SORT_THREADS) {
      seg_start[s] = 0;
      seg_end[s] = 0;
    }
  for (int i = tid; i < passes * SORT_RADIX_MAX; i += SORT_THREADS)
    local[i] = 0;
  __syncthreads();
  const i64 step = (i64)gridDim.x * SORT_THREADS * HIST_ITEMS;
  for (i64 base = (i64)blockIdx.x * SORT_THREADS * HIST_ITEMS + tid; base < N; base += step) {
    int key[HIST_ITEMS];
#pragma unroll
    for (int k = 0; k < HIST_ITEMS; ++k) {
      const i64 j = base + (i64)k * SORT_THREADS;
      key[k] = j < N ? radix_key(ids[j * id_stride], S) : -1;
    }
    // The passes' loop rolled: unrolled in each of the HIST_ITEMS copies, it was a third of the
    // kernel's compile.
#pragma unroll
    for (int k = 0; k < HIST_ITEMS; ++k)
      if (key[k] >= 0)
#pragma unroll 1
        for (int p = 0; p < passes; ++p)
          atomicAdd(&local[p * SORT_RADIX_MAX + digit_of_pass(key[k], p, bits, mask)], 1);
  }
  __syncthreads();
  for (int i = tid; i < passes * SORT_RADIX_MAX; i += SORT_THREADS)
    if (local[i] != 0)
      atomicAdd(&hist[i], local[i]);
}

// The lanes whose digit equals this lane's, among the lanes in `valid`: one ballot per bit
// (a warp-level multisplit; cheaper than __match_any_sync).
__device__ __forceinline__ unsigned same_digit_lanes(int digit, unsigned valid) {
  unsigned peers = valid;
#pragma unroll
  for (int b = 0; b < SORT_RADIX_BITS; ++b) {
    const bool set = (digit >> b) & 1;
    const unsigned ones = __ballot_sync(0xffffffffu, set);
    peers &= set ? ones : ~ones;
  }
  return peers;
}

// Ranks a warp's items stably by digit ((key >> shift) & mask; item k of lane l is the warp's
// item k*32 + l): rank[k] = the number of the warp's earlier items with the same digit.
// `counts` (the warp's SORT_RADIX_MAX counters, zeroed) ends holding the warp's count of each
// digit. Items with a negative key take no part.
__device__ __forceinline__ void rank_in_warp(const int (&key)[SORT_ITEMS], int shift, int mask,
                                             int *counts, int (&rank)[SORT_ITEMS]) {
  const unsigned lanes_below = (1u << (threadIdx.x & 31)) - 1u;
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    const bool valid = key[k] >= 0;
    const int d = valid ? (key[k] >> shift) & mask : 0;
    const unsigned peers = same_digit_lanes(d, __ballot_sync(0xffffffffu, valid));
    const int before = valid ? counts[d] : 0;
    rank[k] = before + __popc(peers & lanes_below);
    __syncwarp();
    if (valid && (peers & lanes_below) == 0)
      counts[d] = before + __popc(peers);
    __syncwarp();
  }
}

// For the thread looking after digit d: each warp's count of d (warp_digits[w][d]) becomes the
// warp's start among the tile's items of d; returns the tile's count of d.
__device__ __forceinline__ int warp_starts(int (*warp_digits)[SORT_RADIX_MAX], int d) {
  int count = 0;
#pragma unroll
  for (int w = 0; w < SORT_WARPS; ++w) {
    const int c = warp_digits[w][d];
    warp_digits[w][d] = count;
    count += c;
  }
  return count;
}

// A warp's ranked items into their slots of the tile: a digit's first slot in the tile, plus
// the warp's start among the digit's items, plus the item's rank among the warp's.
template <class V>
__device__ __forceinline__ void
place_in_slots(const int (&key)[SORT_ITEMS], const V (&val)[SORT_ITEMS],
               const int (&rank)[SORT_ITEMS], int shift, int mask, const int *tile_start,
               const int *warp_start, int *tile_keys, V *tile_vals) {
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    if (key[k] >= 0) {
      const int d = (key[k] >> shift) & mask;
      const int slot = tile_start[d] + warp_start[d] + rank[k];
      tile_keys[slot] = key[k];
      tile_vals[slot] = val[k];
    }
  }
}

__device__ __forceinline__ u64 lookback_load(const u64 *p) {
  return *(const volatile u64 *)p;
}

__device__ __forceinline__ void lookback_store(u64 *p, u64 v) {
  *(volatile u64 *)p = v;
}

// Exclusive prefix sum of one value per thread over the block, in thread order; `warp_sums`
// holds a value a warp of the block. Ends with a barrier.
__device__ __forceinline__ u64 block_exclusive_sum(u64 v, u64 *warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u64 inclusive = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 y = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o)
      inclusive += y;
  }
  if (lane == 31)
    warp_sums[warp] = inclusive;
  __syncthreads();
  u64 before = 0;
  for (int w = 0; w < warp; ++w)
    before += warp_sums[w];
  __syncthreads();
  return before + inclusive - v;
}

// One stable counting pass over `bits` bits at `shift`, the first (`first`: keys from the ids,
// values the rows or the carried values) or a later one (keys and values from the previous
// pass). `hist` holds this pass's global digit counts, `lookback` its look-back words
// ([tile][SORT_RADIX_MAX], zeroed), `tile_counter` its tile counter (zeroed). Tiles are taken in
// counter order, so every tile a block waits for is held by a block that is already running (no
// deadlock, whatever the scheduling). With `lookback_clear`, the block also zeroes its tile's
// words there, for the pass after next.
template <class I, class T, bool CARRY>
__device__ __forceinline__ void
sort_pass_tile(bool first, const I *__restrict__ ids, i64 id_stride, const T *__restrict__ data,
               i64 data_stride, const int *__restrict__ keys_in, const int *__restrict__ vals_in,
               int N, int S, int shift, int bits, const int *__restrict__ hist, u64 *lookback,
               u64 *lookback_clear, int *tile_counter, int *__restrict__ keys_out,
               int *__restrict__ vals_out) {
  // Per warp: its running count of each digit while it ranks, then where its rows of each
  // digit start among the tile's rows of that digit.
  __shared__ int warp_digits[SORT_WARPS][SORT_RADIX_MAX];
  __shared__ int tile_start[SORT_RADIX_MAX]; // a digit's first slot in the reordered tile
  __shared__ int out_base[SORT_RADIX_MAX];   // output position of slot 0 for each digit
  __shared__ u64 warp_sums[SORT_WARPS];
  __shared__ int tile_keys[SORT_TILE];
  __shared__ int tile_vals[SORT_TILE];
  __shared__ int tile_index;

  const int radix = 1 << bits, mask = radix - 1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0)
    tile_index = atomicAdd(tile_counter, 1);
  for (int d = lane; d < SORT_RADIX_MAX; d += 32)
    warp_digits[warp][d] = 0;
  __syncthreads();
  const int tile = tile_index;

  // Warp w owns the tile's rows [w*512, (w+1)*512); its item k at lane l is row k*32 + l of
  // them. So a warp ranks its rows alone, in row order, and warps come in row order too: a
  // row's slot among its digit's rows is its row order (stability).
  const i64 tile_first = (i64)tile * SORT_TILE;
  const i64 base = tile_first + warp * (SORT_ITEMS * 32) + lane;
  // Which pass this is is uniform over the grid: one loop or the other, each issuing its loads
  // back to back as in a kernel of its own (one loop with the choice inside each row's load ran
  // the sort 1-1.5% slower end to end on the H100).
  int key[SORT_ITEMS], val[SORT_ITEMS], rank[SORT_ITEMS];
  if (first) {
#pragma unroll
    for (int k = 0; k < SORT_ITEMS; ++k) {
      const i64 j = base + k * 32;
      key[k] = -1;
      val[k] = 0;
      if (j < N) {
        key[k] = radix_key(ids[j * id_stride], S);
        if constexpr (CARRY)
          val[k] = __float_as_int((float)load(data + j * data_stride));
        else
          val[k] = (int)j;
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < SORT_ITEMS; ++k) {
      const i64 j = base + k * 32;
      key[k] = j < N ? keys_in[j] : -1;
      val[k] = j < N ? vals_in[j] : 0;
    }
  }
  rank_in_warp(key, shift, mask, warp_digits[warp], rank);
  __syncthreads();

  // Thread d looks after digit d: the tile's count (published at once for later tiles), each
  // warp's start within it, and (one scan for both, packed in 64 bits) the digit's start in
  // the tile and among all keys.
  int count = 0;
  u64 *mine = lookback + (i64)tile * SORT_RADIX_MAX + tid;
  if (tid < radix) {
    count = warp_starts(warp_digits, tid);
    lookback_store(mine, (tile == 0 ? LOOKBACK_PREFIX : LOOKBACK_AGGREGATE) | (u64)count);
  }
  const u64 global_count = tid < radix ? (u64)(unsigned)hist[tid] : 0;
  const u64 starts = block_exclusive_sum((global_count << 32) | (u64)count, warp_sums);
  const int in_tile = (int)(unsigned)starts;
  if (tid < radix)
    tile_start[tid] = in_tile;
  __syncthreads();

  // Reorder the tile by digit in shared memory (stable: slot order is row order within a
  // digit); later the slots go out in order, runs of one digit to consecutive positions,
  // which coalesces the scattered writes.
  place_in_slots(key, val, rank, shift, mask, tile_start, warp_digits[warp], tile_keys, tile_vals);

  // Rows of each digit in earlier tiles: walk back, LOOKBACK_BATCH tiles per round trip,
  // adding their counts up to the first tile that knows its prefix (tile 0 always does).
  if (tid < radix) {
    unsigned earlier = 0;
    for (int t = tile - 1; t >= 0;) {
      u64 w[LOOKBACK_BATCH];
#pragma unroll
      for (int i = 0; i < LOOKBACK_BATCH; ++i)
        w[i] = t - i >= 0 ? lookback_load(lookback + (i64)(t - i) * SORT_RADIX_MAX + tid)
                          : LOOKBACK_PREFIX;
      bool stop = false, found = false;
      int used = 0;
#pragma unroll
      for (int i = 0; i < LOOKBACK_BATCH; ++i) {
        if (!stop && w[i] == 0) {
          stop = true; // not published yet: read again from here
        } else if (!stop) {
          earlier += (unsigned)w[i];
          ++used;
          found = (w[i] & LOOKBACK_PREFIX) != 0;
          stop = found;
        }
      }
      if (found)
        break;
      t -= used;
    }
    if (tile > 0)
      lookback_store(mine, LOOKBACK_PREFIX | (u64)(earlier + (unsigned)count));
    out_base[tid] = (int)(starts >> 32) + (int)earlier - in_tile;
  }
  __syncthreads();

  const int items = (int)min((i64)SORT_TILE, (i64)N - tile_first);
  for (int i = tid; i < items; i += SORT_THREADS) {
    const int k = tile_keys[i];
    const int pos = out_base[(k >> shift) & mask] + i;
    keys_out[pos] = k;
    vals_out[pos] = tile_vals[i];
  }
  if (lookback_clear != nullptr)
    for (int d = tid; d < SORT_RADIX_MAX; d += SORT_THREADS)
      lookback_clear[(i64)tile * SORT_RADIX_MAX + d] = 0;
}

// A pass of the radix sort (a.pass); behind the digit path's fallback flag when `fallback` is
// given. The first pass (no keys_in: there is no previous pass) reads the ids (and with CARRY
// the data), later ones a.pass.keys_in. One kernel serves every pass, so that a cold sort
// compiles it once (0.3 s of NVRTC on two cores, the other pass kernel's compile, saved).
template <class I, class T, bool CARRY>
__global__ void __launch_bounds__(SORT_THREADS, 2)
    segment_sort_pass(const jitops__segment_sort_args a) {
  const jitops__segment_sort_pass &p = a.pass;
  wait_for_previous_grid();
  if (!fallback_runs(a.fallback))
    return;
  sort_pass_tile<I, T, CARRY>(p.keys_in == nullptr, (const I *)a.ids.ptr, a.ids.stride,
                              (const T *)a.data, a.data_stride, p.keys_in, p.vals_in, a.ids.rows,
                              a.ids.segments, p.shift, a.bits, p.hist, p.lookback, p.lookback_clear,
                              p.tile_counter, p.keys_out, p.vals_out);
}

} // namespace segment
} // namespace jitops
