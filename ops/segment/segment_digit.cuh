// jitops/segment_digit.cuh — unsorted sum and mean over many segments of about one row each:
// one pass scatters the rows into parts of PP = 2^part_log2 consecutive segments, and one block
// a part orders the part's rows by (segment, row) in shared memory and reduces them.
//
// Why: at N = 2^20 rows and S = 10^6 segments a full radix sort (three passes) and the chunked
// reduction's bookkeeping cost about 70 us on an H200 beside a gather whose floor is 136 us. The
// scatter is one read of the ids and one write of (key, row) entries, with no histogram pass and
// no look-back; the order in which its blocks fill a part varies from run to run, so the part's
// block ranks each row among its segment's rows by row index. Every segment is then reduced in
// row order, the order of the full sort, and sums are bit-identical from run to run.
//
// The fallback. A part's region of the entry list holds at most DIGIT_CAP rows; the host sizes
// the parts for uniform ids (about 1280 expected rows, far below the cap) but cannot
// see the ids. A region that overflows (skewed ids) raises `fallback`; the reduction then does
// nothing, and the full radix sort, the chunked reduction and its fixup — launched behind it on
// every call, returning at once unless the flag is up — do all of the work.
//
// scatter — a block takes SCATTER_TILE consecutive rows: counts its rows of each part in shared
//           memory (the shared atomic's result is a row's rank among them, in no fixed order),
//           reserves each part's slots in the part's region with one global atomic, stages its
//           rows by part and writes them out in runs of consecutive slots. It also counts the
//           ids >= S (the only kernel of the path that does, fallback or not).
// reduce  — block p loads part p's entries, counts each segment's rows (shared atomics again),
//           scans them into segment starts and places the rows by segment; each row's final
//           slot is its segment's start plus the number of the segment's rows with a smaller
//           row index (one-row segments, most of them, need no comparison). Then lane groups
//           split the part's ordered rows evenly (a huge segment spreads over all of them); a
//           segment inside a group's share is written at once, one crossing a share boundary
//           leaves partials that the group holding its end adds up in group order; segments
//           without rows get `empty_value`.
#pragma once
#include "jitops/segment_sort.cuh"

namespace jitops {
namespace segment {

// A part's rows at most: its region of the entry list, and what its block's shared memory
// orders. Parts at most: a scatter block counts them in shared memory.
constexpr int DIGIT_CAP = JITOPS__SEGMENT_DIGIT_CAP,
              DIGIT_PARTS_MAX = JITOPS__SEGMENT_DIGIT_PARTS_MAX;

constexpr int SCATTER_THREADS = JITOPS__SEGMENT_SCATTER_THREADS,
              SCATTER_ITEMS = JITOPS__SEGMENT_SCATTER_ITEMS,
              SCATTER_TILE = JITOPS__SEGMENT_SCATTER_TILE;
constexpr int SCATTER_PARTS_PER_THREAD = DIGIT_PARTS_MAX / SCATTER_THREADS;
static_assert(SCATTER_PARTS_PER_THREAD * SCATTER_THREADS == DIGIT_PARTS_MAX, "the parts' scan");
// The scatter's dynamic shared memory (segment_abi.h): each part's count and then first staged
// slot (one more entry: the total), its first slot in its region, and the staged entries.
constexpr int SCATTER_FIRST_WORDS = JITOPS__SEGMENT_SCATTER_FIRST_WORDS;
static_assert(sizeof(int2) == JITOPS__SEGMENT_DIGIT_ENTRY_BYTES, "an entry is {key, row}");
static_assert(JITOPS__SEGMENT_SCATTER_SHARED <= 227 * 1024, "a scatter block's shared memory");

constexpr int DIGIT_THREADS = JITOPS__SEGMENT_DIGIT_THREADS;
constexpr int DIGIT_ITEMS = DIGIT_CAP / DIGIT_THREADS;
// Segments a part at most.
constexpr int DIGIT_PART_SEGMENTS_MAX = JITOPS__SEGMENT_DIGIT_PART_SEGMENTS_MAX;
constexpr int DIGIT_SEGMENTS_PER_THREAD = DIGIT_PART_SEGMENTS_MAX / DIGIT_THREADS;
// Blocks an SM holds: three (80 registers a thread, for the reduction's rows in flight).
constexpr int DIGIT_MIN_BLOCKS = 3;

// Turns counts[0..n) into exclusive starts, in place, and writes the total to counts[n]; thread
// t takes entries [t * K, t * K + K). No barrier at the end.
template <int K>
__device__ __forceinline__ void counts_to_starts(int *counts, int n, u64 *warp_sums) {
  const int i0 = threadIdx.x * K;
  int count[K], mine = 0;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    count[i] = i0 + i < n ? counts[i0 + i] : 0;
    mine += count[i];
  }
  // Its barriers order every read above before the writes below.
  int at = (int)block_exclusive_sum((u64)mine, warp_sums);
#pragma unroll
  for (int i = 0; i < K; ++i) {
    if (i0 + i < n)
      counts[i0 + i] = at;
    at += count[i];
  }
  if (threadIdx.x == blockDim.x - 1)
    counts[n] = at;
}

// Entries are {key, row}: part key >> part_log2, segment key - part * PP within it. `fill` (a
// count a part) and `fallback` start zeroed.
template <class I>
__global__ void __launch_bounds__(SCATTER_THREADS)
    segment_digit_scatter(const jitops__segment_digit_args a) {
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const i64 id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments, part_log2 = a.part_log2, parts = a.parts;
  int *__restrict__ fill = a.part_rows;
  int2 *__restrict__ entries = (int2 *)a.entries;
  int *__restrict__ fallback = a.fallback;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ u64 warp_sums[SCATTER_THREADS / 32];
  int *first = reinterpret_cast<int *>(smem_raw);
  int *base = first + SCATTER_FIRST_WORDS;
  int2 *stage = reinterpret_cast<int2 *>(base + DIGIT_PARTS_MAX);
  const int tid = threadIdx.x;
  for (int p = tid; p < parts; p += SCATTER_THREADS)
    first[p] = 0;
  __syncthreads();

  const i64 tile_first = (i64)blockIdx.x * SCATTER_TILE;
  int key[SCATTER_ITEMS], rank[SCATTER_ITEMS];
#pragma unroll
  for (int k = 0; k < SCATTER_ITEMS; ++k) {
    const i64 j = tile_first + k * SCATTER_THREADS + tid;
    key[k] = j < N ? radix_key(ids[j * id_stride], S) : S;
  }
  int dropped = 0;
#pragma unroll
  for (int k = 0; k < SCATTER_ITEMS; ++k) {
    dropped += key[k] == S + 1;
    if (key[k] < S)
      rank[k] = atomicAdd(&first[key[k] >> part_log2], 1);
  }
  dropped = warp_sum(dropped);
  if ((tid & 31) == 0)
    add_to_counter(a.counter.count64, a.counter.count32, dropped);
  __syncthreads();

  counts_to_starts<SCATTER_PARTS_PER_THREAD>(first, parts, warp_sums);
  __syncthreads();
  // A thread a part (strided, unlike the scan), so that a thread's reservations, whose latency
  // grows with the blocks contending for each part, are at most a few and independent.
  bool over = false;
  for (int p = tid; p < parts; p += SCATTER_THREADS) {
    const int rows = first[p + 1] - first[p];
    if (rows > 0) {
      base[p] = atomicAdd(&fill[p], rows);
      over |= base[p] + rows > DIGIT_CAP;
    }
  }
  if (over)
    *fallback = 1;
  __syncthreads();

#pragma unroll
  for (int k = 0; k < SCATTER_ITEMS; ++k)
    if (key[k] < S)
      stage[first[key[k] >> part_log2] + rank[k]] =
          make_int2(key[k], (int)(tile_first + k * SCATTER_THREADS + tid));
  __syncthreads();
  // Runs of one part go to consecutive slots of its region; what does not fit is left out (the
  // fallback redoes everything).
  const int staged = first[parts];
  for (int i = tid; i < staged; i += SCATTER_THREADS) {
    const int2 e = stage[i];
    const int p = e.x >> part_log2;
    const int slot = base[p] + i - first[p];
    if (slot < DIGIT_CAP)
      entries[(i64)p * DIGIT_CAP + slot] = e;
  }
}

// The share of the part's m ordered rows that group g reduces.
__device__ __forceinline__ int share_start(int m, int g, int groups) {
  return (int)((i64)m * g / groups);
}

template <class T, int OP, int VEC, int G, int CPL>
__global__ void __launch_bounds__(DIGIT_THREADS, DIGIT_MIN_BLOCKS)
    segment_digit_reduce(const jitops__segment_digit_args a) {
  typedef acc_t<T> A;
  const T *__restrict__ data = (const T *)a.tensors.data;
  const i64 data_stride = a.tensors.data_stride, out_stride = a.tensors.out_stride;
  const int D = a.cols, S = a.ids.segments, part_log2 = a.part_log2;
  const int2 *__restrict__ entries = (const int2 *)a.entries;
  const int *__restrict__ part_rows = a.part_rows;
  const int *__restrict__ fallback = a.fallback;
  T *__restrict__ out = (T *)a.tensors.out;
  const A empty_value = fill_value<A>(a.fill);
  constexpr int COLS = G * CPL * VEC;
  constexpr int GROUPS = DIGIT_THREADS / G;
  constexpr int U = CPL * VEC >= 32 ? 1 : (32 / (CPL * VEC) > 16 ? 16 : 32 / (CPL * VEC));
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ u64 warp_sums[DIGIT_THREADS / 32];

  wait_for_previous_grid();
  if (*fallback != 0)
    return;
  const int tid = threadIdx.x;
  const int pp = 1 << part_log2, s0 = blockIdx.x << part_log2;
  const int segs = min(pp, S - s0);
  const int m = part_rows[blockIdx.x]; // at most DIGIT_CAP, else the fallback is up
  // The layout of segment_abi.h (JITOPS__SEGMENT_DIGIT_*), which the host sizes by.
  int *seg_first = reinterpret_cast<int *>(smem_raw);
  int *placed = reinterpret_cast<int *>(smem_raw + JITOPS__SEGMENT_DIGIT_PLACED(pp));
  int *srow = reinterpret_cast<int *>(smem_raw + JITOPS__SEGMENT_DIGIT_ROWS(pp));
  unsigned short *slocal =
      reinterpret_cast<unsigned short *>(smem_raw + JITOPS__SEGMENT_DIGIT_LOCALS(pp));
  A *partial = reinterpret_cast<A *>(smem_raw + JITOPS__SEGMENT_DIGIT_PARTIALS(pp));
  for (int l = tid; l <= pp; l += DIGIT_THREADS)
    seg_first[l] = 0;
  __syncthreads();

  int local[DIGIT_ITEMS], row[DIGIT_ITEMS], rank[DIGIT_ITEMS];
  const int2 *part_entries = entries + (i64)blockIdx.x * DIGIT_CAP;
#pragma unroll
  for (int k = 0; k < DIGIT_ITEMS; ++k) {
    const int i = k * DIGIT_THREADS + tid;
    const int2 e = i < m ? part_entries[i] : make_int2(-1, 0);
    local[k] = e.x < 0 ? -1 : e.x - s0;
    row[k] = e.y;
  }
#pragma unroll
  for (int k = 0; k < DIGIT_ITEMS; ++k)
    if (local[k] >= 0)
      rank[k] = atomicAdd(&seg_first[local[k]], 1);
  __syncthreads();
  counts_to_starts<DIGIT_SEGMENTS_PER_THREAD>(seg_first, pp, warp_sums);
  __syncthreads();
#pragma unroll
  for (int k = 0; k < DIGIT_ITEMS; ++k)
    if (local[k] >= 0)
      placed[seg_first[local[k]] + rank[k]] = row[k];
  __syncthreads();
  // Row order within each segment: a row's slot is its segment's start plus the segment's rows
  // with a smaller index (row indices are distinct).
#pragma unroll
  for (int k = 0; k < DIGIT_ITEMS; ++k) {
    if (local[k] < 0)
      continue;
    const int st = seg_first[local[k]], en = seg_first[local[k] + 1];
    int slot = st;
    if (en - st > 1)
      for (int j = st; j < en; ++j)
        slot += placed[j] < row[k];
    srow[slot] = row[k];
    slocal[slot] = (unsigned short)local[k];
  }
  __syncthreads();

  const int group = tid / G, lane = tid % G;
  const int lo = share_start(m, group, GROUPS), hi = share_start(m, group + 1, GROUPS);
  T *const part_out = out + (i64)s0 * out_stride;
  for (int c0 = 0; c0 < D; c0 += COLS) {
    A acc[CPL][VEC];
    // The run [a, e) of segment l: its result when the share holds all of the segment, else a
    // partial in the share's slot 0 (its first run) or 1 (its last).
    auto emit = [&](int l, int a, int e) {
      const int st = seg_first[l], en = seg_first[l + 1];
      A *slot = partial + (group * 2 + (a == lo ? 0 : 1)) * COLS;
#pragma unroll
      for (int k = 0; k < CPL; ++k) {
        const int col = c0 + (k * G + lane) * VEC;
        if (col >= D)
          continue;
        if (a == st && e == en) {
          store_result<OP, T, VEC>(part_out + (i64)l * out_stride + col, acc[k], en - st);
        } else {
#pragma unroll
          for (int v = 0; v < VEC; ++v)
            slot[(k * G + lane) * VEC + v] = acc[k][v];
        }
      }
    };
    reset_to_identity<OP>(acc);
    int run = lo < hi ? slocal[lo] : 0, run_start = lo;
    for (int j0 = lo; j0 < hi; j0 += U) {
      A v[U][CPL][VEC];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (j0 + u < hi) {
          const T *p = data + (i64)srow[j0 + u] * data_stride;
#pragma unroll
          for (int k = 0; k < CPL; ++k) {
            const int col = c0 + (k * G + lane) * VEC;
            if (col < D)
              load_pack<T, VEC>(p + col, v[u][k]);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u;
        if (j >= hi)
          break;
        const int l = slocal[j];
        if (l != run) {
          emit(run, run_start, j);
          reset_to_identity<OP>(acc);
          run = l;
          run_start = j;
        }
        combine_accesses<OP, A, CPL, VEC, G>(acc, v[u], c0, lane, D);
      }
    }
    if (lo < hi)
      emit(run, run_start, hi);
    __syncthreads();

    // A segment that crosses into this share and ends in it: add its partials, group order.
    if (lo < hi) {
      const int l = slocal[lo], st = seg_first[l], en = seg_first[l + 1];
      if (st < lo && en <= hi) {
        int g = 0;
        while (share_start(m, g + 1, GROUPS) <= st)
          ++g;
        reset_to_identity<OP>(acc);
        // The first share holds the segment's start in its last run (slot 1) unless the
        // segment starts the share; every later share holds it in its first run. Empty shares
        // (fewer rows than groups) hold nothing.
        const int first_slot = st != share_start(m, g, GROUPS) ? 1 : 0;
        for (int g0 = g; g <= group; ++g) {
          if (share_start(m, g + 1, GROUPS) == share_start(m, g, GROUPS))
            continue;
          const A *src = partial + (g * 2 + (g == g0 ? first_slot : 0)) * COLS;
#pragma unroll
          for (int k = 0; k < CPL; ++k)
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              acc[k][e] = combine<OP, A>(acc[k][e], src[(k * G + lane) * VEC + e]);
        }
#pragma unroll
        for (int k = 0; k < CPL; ++k) {
          const int col = c0 + (k * G + lane) * VEC;
          if (col < D)
            store_result<OP, T, VEC>(part_out + (i64)l * out_stride + col, acc[k], en - st);
        }
      }
    }
    __syncthreads(); // the partials are the next column tile's
  }

  // Segments without rows.
  A fill[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    fill[e] = empty_value;
  for (int l = group; l < segs; l += GROUPS)
    if (seg_first[l] == seg_first[l + 1])
      for (int col = lane * VEC; col < D; col += G * VEC)
        store_pack<T, VEC>(part_out + (i64)l * out_stride + col, fill);
}

} // namespace segment
} // namespace jitops
