// jitops/segment_tiles.cuh — unsorted sum and mean of rows of one column over few segments,
// without a global sort.
//
// A global radix sort costs a few launches and a chain of look-backs per pass; with one
// column there is almost nothing else to do, so the sort would be the whole cost. Instead:
//   segment_tile_sums    — each block sorts its own tile of SORT_TILE rows by segment in
//                          shared memory (stable LSD passes, as in segment_sort.cuh), adds
//                          each segment's rows of the tile in row order, and writes the tile's
//                          row of a dense table: sums[tile][s], 0 for segments the tile lacks
//                          (and counts[tile][s] for mean);
//   segment_tile_combine — adds each segment's tile sums in tile order (a fixed split into
//                          SPLITS contiguous ranges of tiles, combined in order) and finishes.
// Every order is fixed by the positions, so results are bit-identical from run to run. The
// table holds tiles x S cells: the host takes this path only for few segments.
#pragma once
#include "jitops/segment_sort.cuh"

namespace jitops {
namespace segment {

constexpr int TILE_SLOTS = SORT_TILE / SORT_THREADS;           // slots a thread adds up, in order
constexpr int COMBINE_SPLITS = JITOPS__SEGMENT_COMBINE_SPLITS; // warps of a combine block

template <class T, class I, bool COUNTS>
__global__ void __launch_bounds__(SORT_THREADS, 2)
    segment_tile_sums(const jitops__segment_tiles_args a) {
  const T *__restrict__ data = (const T *)a.tensors.data;
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const i64 data_stride = a.tensors.data_stride, id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments, passes = a.passes, bits = a.bits;
  float *__restrict__ sums = a.sums;
  int *__restrict__ counts = a.counts;
  __shared__ int warp_digits[SORT_WARPS][SORT_RADIX_MAX];
  __shared__ int tile_start[SORT_RADIX_MAX];
  __shared__ u64 warp_sums[SORT_WARPS];
  __shared__ int tile_keys[SORT_TILE];
  __shared__ float tile_vals[SORT_TILE];
  __shared__ float head_sum[SORT_THREADS]; // the sum of the run piece a thread's slots open with
  __shared__ int head_len[SORT_THREADS];   // its length

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int radix = 1 << bits, mask = radix - 1;
  const i64 tile_first = (i64)blockIdx.x * SORT_TILE;
  const int items = (int)min((i64)SORT_TILE, (i64)N - tile_first);

  // Warp w holds the tile's slots [w*512, (w+1)*512), item k of lane l being slot k*32 + l of
  // them: first the rows themselves, then the previous pass's order.
  int key[SORT_ITEMS], rank[SORT_ITEMS];
  float val[SORT_ITEMS];
  int too_large = 0;
#pragma unroll
  for (int k = 0; k < SORT_ITEMS; ++k) {
    const int slot = warp * (SORT_ITEMS * 32) + k * 32 + lane;
    key[k] = -1;
    val[k] = 0.0f;
    if (slot < items) {
      const i64 j = tile_first + slot;
      const I id = ids[j * id_stride];
      too_large += id >= (I)S;
      key[k] = radix_key(id, S);
      val[k] = (float)load(data + j * data_stride);
    }
  }
  too_large = warp_sum(too_large);
  if (lane == 0)
    add_to_counter(a.counter.count64, a.counter.count32, too_large);

  for (int pass = 0; pass < passes; ++pass) {
    const int shift = pass * bits;
    if (pass > 0) {
#pragma unroll
      for (int k = 0; k < SORT_ITEMS; ++k) {
        const int slot = warp * (SORT_ITEMS * 32) + k * 32 + lane;
        key[k] = slot < items ? tile_keys[slot] : -1;
        val[k] = slot < items ? tile_vals[slot] : 0.0f;
      }
    }
    for (int d = lane; d < SORT_RADIX_MAX; d += 32)
      warp_digits[warp][d] = 0;
    __syncthreads(); // the previous pass's slots are read and its counters used
    rank_in_warp(key, shift, mask, warp_digits[warp], rank);
    __syncthreads();
    const int count = tid < radix ? warp_starts(warp_digits, tid) : 0;
    const int start = (int)block_exclusive_sum((u64)count, warp_sums);
    if (tid < radix)
      tile_start[tid] = start;
    __syncthreads();
    place_in_slots(key, val, rank, shift, mask, tile_start, warp_digits[warp], tile_keys,
                   tile_vals);
    __syncthreads();
  }

  // The tile's row of the tables starts at "absent"; the sums below overwrite it after the
  // barrier.
  float *sum_row = sums + (i64)blockIdx.x * S;
  int *count_row = COUNTS ? counts + (i64)blockIdx.x * S : nullptr;
  for (int s = tid; s < S; s += SORT_THREADS) {
    sum_row[s] = 0.0f;
    if (COUNTS)
      count_row[s] = 0;
  }

  // Thread i adds up slots [i*TILE_SLOTS, (i+1)*TILE_SLOTS) run by run. The piece its slots
  // open with is published for the thread whose run it continues.
  const int lo = tid * TILE_SLOTS, hi = min(lo + TILE_SLOTS, items);
  {
    float h = 0.0f;
    int n = 0;
    if (lo < hi) {
      const int k0 = tile_keys[lo];
      h = tile_vals[lo];
      n = 1;
      while (lo + n < hi && tile_keys[lo + n] == k0) {
        h += tile_vals[lo + n];
        ++n;
      }
    }
    head_sum[tid] = h;
    head_len[tid] = n;
  }
  __syncthreads();

  // Each run is finished by the thread holding its first slot: its own piece, then the
  // opening pieces of the following threads, in slot order, as long as the run goes on.
  for (int r = lo; r < hi;) {
    const int k = tile_keys[r];
    float total = tile_vals[r];
    int e = r + 1;
    while (e < hi && tile_keys[e] == k) {
      total += tile_vals[e];
      ++e;
    }
    int length = e - r;
    const bool starts = r == 0 || tile_keys[r - 1] != k;
    if (starts && e == hi) {
      for (int t = tid + 1; t * TILE_SLOTS < items && tile_keys[t * TILE_SLOTS] == k; ++t) {
        total += head_sum[t];
        length += head_len[t];
        if (head_len[t] < TILE_SLOTS)
          break; // the run ends inside thread t's slots
      }
    }
    if (starts && k < S) {
      sum_row[k] = total;
      if (COUNTS)
        count_row[k] = length;
    }
    r = e;
  }
}

// out[s] = the tile sums of segment s added in tile order (mean: divided by the row count; an
// empty segment gives 0). A block takes 32 segments; warp w adds tiles [w*tiles/SPLITS,
// (w+1)*tiles/SPLITS) of them, and the SPLITS partial sums are added in order.
template <class T, bool MEAN>
__global__ void __launch_bounds__(32 * COMBINE_SPLITS)
    segment_tile_combine(const jitops__segment_tiles_args a) {
  const float *__restrict__ sums = a.sums;
  const int *__restrict__ counts = a.counts;
  const int tiles = a.tiles, S = a.ids.segments;
  T *__restrict__ out = (T *)a.tensors.out;
  const i64 out_stride = a.tensors.out_stride;
  __shared__ float part_sum[COMBINE_SPLITS][32];
  __shared__ int part_count[COMBINE_SPLITS][32];
  constexpr int U = 8; // loads in flight
  const int lane = threadIdx.x & 31, split = threadIdx.x >> 5;
  const i64 s = (i64)blockIdx.x * 32 + lane;
  const int t0 = (int)((i64)tiles * split / COMBINE_SPLITS);
  const int t1 = (int)((i64)tiles * (split + 1) / COMBINE_SPLITS);
  float acc = 0.0f;
  int n = 0;
  if (s < S) {
    for (int t = t0; t < t1; t += U) {
      float v[U];
      int c[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        v[u] = 0.0f;
        c[u] = 0;
        if (t + u < t1) {
          v[u] = sums[(i64)(t + u) * S + s];
          if (MEAN)
            c[u] = counts[(i64)(t + u) * S + s];
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (t + u < t1) {
          acc += v[u];
          n += c[u];
        }
      }
    }
  }
  part_sum[split][lane] = acc;
  part_count[split][lane] = n;
  __syncthreads();
  if (split == 0 && s < S) {
    float total = part_sum[0][lane];
    int rows = part_count[0][lane];
#pragma unroll
    for (int w = 1; w < COMBINE_SPLITS; ++w) {
      total += part_sum[w][lane];
      rows += part_count[w][lane];
    }
    if (MEAN)
      total = rows > 0 ? total / (float)rows : 0.0f;
    store(out + s * out_stride, total);
  }
}

} // namespace segment
} // namespace jitops
