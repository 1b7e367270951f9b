// jitops/segment_digit.cuh — unsorted sum and mean over many segments of about one row each: one
// radix pass by the top digit of the ids puts the rows into buckets of P = 2^top_shift
// consecutive segments, and one block a part of a bucket orders its rows by segment in shared
// memory and reduces them.
//
// Why: at N = 2^20 rows and S = 10^6 segments the full sort (three passes) and the chunked
// reduction's bookkeeping (segment bounds, partials, the fixup) cost about 70 us on an H200
// beside a gather whose floor is 136 us. The top pass is stable, so a bucket holds its rows in
// row order; a block that sorts its part's rows by segment, stably, sees each segment's rows in
// row order — the order of the full sort — and keeps the rest of the bookkeeping in shared
// memory. Sums are bit-identical from run to run.
//
// The gate. A bucket must fit a block's shared memory (at most DIGIT_CAP rows), which the host
// cannot know: it sizes the buckets for uniform ids, and every kernel after the histogram reads
// the top digit's counts and decides for itself (digit_overflow). When some bucket is too large
// (skewed ids), the lower passes run before the top pass, which makes it the last pass of the
// full sort; the chunked reduction and its fixup then do the work, and this kernel only zeroes
// the segment bounds they start from. Otherwise those three kernels return at once.
//
// A block (bucket b, part q) owns the PP segments from s0 = b * P + q * PP:
//   count  — each warp walks its share of the bucket's positions (consecutive, in order) and
//            counts its rows of each of the part's segments (one counter a warp and segment);
//   layout — each segment's first slot (a scan over the segments), and each warp's first slot
//            within each segment (its rows come after those of the warps before it);
//   place  — the warps walk their shares again and put each row in its slot: rows of a segment
//            end in row order (warps in position order, lanes ranked within a warp);
//   reduce — lane groups split the part's ordered rows evenly (a huge segment spreads over all
//            of them); a segment inside a group's share is written at once, one crossing a share
//            boundary leaves partials that the group holding its end adds up in group order;
//            segments without rows get `empty_value`.
#pragma once
#include "jitops/segment_sort.cuh"

namespace jitops {
namespace segment {

constexpr int DIGIT_THREADS = 256;
static_assert(DIGIT_THREADS == SORT_RADIX_MAX, "a thread a digit count of the top pass");
constexpr int DIGIT_WARPS = DIGIT_THREADS / 32;
// Segments a block at most (the host's SEG_DIGIT_PART_SEGMENTS_MAX); slots fit 16 bits.
constexpr int DIGIT_PART_SEGMENTS_MAX = 1024;
constexpr int DIGIT_SEGMENTS_PER_THREAD = DIGIT_PART_SEGMENTS_MAX / DIGIT_THREADS;
// A bucket's rows at most (the host's SEG_DIGIT_CAP), and so the chunks of 32 positions a warp's
// share of them holds at most.
constexpr int DIGIT_CAP = 6144;
constexpr int DIGIT_SHARE_CHUNKS = DIGIT_CAP / (DIGIT_WARPS * 32);

// Blocks an SM holds: three, with 65 KB of shared memory each at 1024 segments a part.
constexpr int DIGIT_MIN_BLOCKS = 3;

__device__ constexpr int digit_align(int bytes) {
  return (bytes + 15) & ~15;
}

// The block's dynamic shared memory, at byte offsets: the warps' cursors (16-bit, a warp and
// segment), the segments' first slots, the ordered rows and their segments (16-bit), the lane
// groups' partials. The host mirrors it (seg_digit_shared_bytes).
template <class A, int G, int COLS> struct digit_shared {
  static constexpr int GROUPS = DIGIT_THREADS / G;
  static __device__ constexpr int seg_first(int pp) {
    return digit_align(DIGIT_WARPS * pp * 2);
  }
  static __device__ constexpr int rows(int pp) {
    return seg_first(pp) + digit_align((pp + 1) * 4);
  }
  static __device__ constexpr int locals(int pp) {
    return rows(pp) + digit_align(DIGIT_CAP * 4);
  }
  static __device__ constexpr int partials(int pp) {
    return locals(pp) + digit_align(DIGIT_CAP * 2);
  }
};

// A warp's share of the bucket's positions [first, first + count): a contiguous run of 32-position
// chunks, walked in order, every key and row loaded at once (one round trip, kept in registers
// for both walks). Past the end, key -1.
struct warp_share {
  int key[DIGIT_SHARE_CHUNKS], row[DIGIT_SHARE_CHUNKS];
  int chunks; // this warp's chunks (warp-uniform)

  __device__ __forceinline__ void load(const int *keys, const int *rows, int first, int count) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int all = (count + 31) >> 5;
    const int c0 = (int)((i64)all * warp / DIGIT_WARPS);
    chunks = (int)((i64)all * (warp + 1) / DIGIT_WARPS) - c0;
#pragma unroll
    for (int i = 0; i < DIGIT_SHARE_CHUNKS; ++i) {
      const int p = (c0 + i) * 32 + lane;
      const bool in = i < chunks && p < count;
      key[i] = in ? keys[first + p] : -1;
      row[i] = in ? rows[first + p] : 0;
    }
  }

  // f(key, row) for every chunk of the share, in order, on every lane.
  template <class F> __device__ __forceinline__ void walk(F &&f) const {
#pragma unroll
    for (int i = 0; i < DIGIT_SHARE_CHUNKS; ++i)
      if (i < chunks)
        f(key[i], row[i]);
  }
};

// The lanes holding the same part segment as this one (l >= 0), or none (l < 0).
__device__ __forceinline__ unsigned same_segment_lanes(int l) {
  const unsigned peers = __match_any_sync(0xffffffffu, l);
  return l >= 0 ? peers : 0u;
}

// Segment slots and cursors: thread t owns segments [t * K, t * K + K). Turns the warps' counts
// (cursor[w][l]) into each warp's first slot and writes seg_first[0..pp]. Ends with a barrier.
__device__ __forceinline__ void lay_out_segments(unsigned short *cursor, int *seg_first, int pp,
                                                 u64 *warp_sums) {
  const int l0 = threadIdx.x * DIGIT_SEGMENTS_PER_THREAD;
  int rows_of[DIGIT_SEGMENTS_PER_THREAD], mine = 0;
#pragma unroll
  for (int i = 0; i < DIGIT_SEGMENTS_PER_THREAD; ++i) {
    const int l = l0 + i;
    int running = 0;
    if (l < pp)
#pragma unroll
      for (int w = 0; w < DIGIT_WARPS; ++w) {
        const int c = cursor[w * pp + l];
        cursor[w * pp + l] = (unsigned short)running;
        running += c;
      }
    rows_of[i] = running;
    mine += running;
  }
  int at = (int)block_exclusive_sum((u64)mine, warp_sums);
#pragma unroll
  for (int i = 0; i < DIGIT_SEGMENTS_PER_THREAD; ++i) {
    const int l = l0 + i;
    if (l < pp) {
      seg_first[l] = at;
#pragma unroll
      for (int w = 0; w < DIGIT_WARPS; ++w)
        cursor[w * pp + l] = (unsigned short)(cursor[w * pp + l] + at);
    }
    at += rows_of[i];
  }
  if (threadIdx.x == DIGIT_THREADS - 1)
    seg_first[pp] = at;
  __syncthreads();
}

// The share of the part's m ordered rows that group g reduces.
__device__ __forceinline__ int share_start(int m, int g, int groups) {
  return (int)((i64)m * g / groups);
}

template <class T, int OP, int VEC, int G, int CPL>
__global__ void __launch_bounds__(DIGIT_THREADS, DIGIT_MIN_BLOCKS)
    segment_digit_reduce(const T *__restrict__ data, i64 data_stride, int D,
                         const int *__restrict__ keys, const int *__restrict__ rows, int N, int S,
                         const int *__restrict__ top_hist, int top_shift, int parts_log2,
                         T *__restrict__ out, i64 out_stride, int *__restrict__ seg_start,
                         int *__restrict__ seg_end, unsigned long long *counter64,
                         unsigned *counter32, acc_t<T> empty_value) {
  typedef acc_t<T> A;
  constexpr int COLS = G * CPL * VEC;
  constexpr int GROUPS = DIGIT_THREADS / G;
  constexpr int U = CPL * VEC >= 32 ? 1 : (32 / (CPL * VEC) > 16 ? 16 : 32 / (CPL * VEC));
  typedef digit_shared<A, G, COLS> layout;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ int bucket_first, bucket_rows;
  __shared__ u64 warp_sums[SORT_WARPS];

  wait_for_previous_grid();
  if (digit_overflow(top_hist, DIGIT_CAP)) {
    // The full sort runs instead: the chunked reduction needs zeroed bounds.
    for (i64 i = (i64)blockIdx.x * DIGIT_THREADS + threadIdx.x; i < S;
         i += (i64)gridDim.x * DIGIT_THREADS) {
      seg_start[i] = 0;
      seg_end[i] = 0;
    }
    return;
  }
  const int tid = threadIdx.x;
  const int b = blockIdx.x >> parts_log2, q = blockIdx.x & ((1 << parts_log2) - 1);
  const int pp = (1 << top_shift) >> parts_log2;
  const int s0 = (b << top_shift) + q * pp;
  const int segs = max(0, min(pp, S - s0));
  {
    const int c = top_hist[tid]; // DIGIT_THREADS == SORT_RADIX_MAX
    const int before = (int)block_exclusive_sum((u64)c, warp_sums);
    if (tid == b) {
      bucket_first = before;
      bucket_rows = c;
    }
  }
  unsigned short *cursor = reinterpret_cast<unsigned short *>(smem_raw);
  int *seg_first = reinterpret_cast<int *>(smem_raw + layout::seg_first(pp));
  int *srow = reinterpret_cast<int *>(smem_raw + layout::rows(pp));
  unsigned short *slocal = reinterpret_cast<unsigned short *>(smem_raw + layout::locals(pp));
  A *partial = reinterpret_cast<A *>(smem_raw + layout::partials(pp));
  for (int i = tid; i < DIGIT_WARPS * pp; i += DIGIT_THREADS)
    cursor[i] = 0;
  __syncthreads();
  const int first = bucket_first, count = bucket_rows;
  const int warp = tid >> 5;
  const unsigned lanes_below = (1u << (tid & 31)) - 1u;

  // Ids >= S sort last as key S + 1: the first part of the bucket holding that key counts them.
  const bool counts_dropped = q == 0 && b == ((S + 1) >> top_shift);
  int dropped = 0;
  warp_share share;
  share.load(keys, rows, first, count);
  share.walk([&](int key, int) {
    dropped += counts_dropped && key == S + 1;
    const int l = key >= s0 && key - s0 < segs ? key - s0 : -1;
    const unsigned peers = same_segment_lanes(l);
    // A shared atomic on the 16-bit count's word (counts stay below 2^16: no carry), where a
    // plain update would need a __syncwarp a chunk for the next chunk's leader of l.
    if (l >= 0 && (peers & lanes_below) == 0) {
      const int at = warp * pp + l;
      atomicAdd(reinterpret_cast<unsigned *>(cursor) + (at >> 1), (unsigned)__popc(peers)
                                                                      << ((at & 1) * 16));
    }
  });
  dropped = warp_sum(dropped);
  if ((tid & 31) == 0)
    add_to_counter(counter64, counter32, dropped);
  __syncthreads();
  lay_out_segments(cursor, seg_first, pp, warp_sums);
  share.walk([&](int key, int row) {
    const int l = key >= s0 && key - s0 < segs ? key - s0 : -1;
    const unsigned peers = same_segment_lanes(l);
    if (l >= 0) {
      const int slot = cursor[warp * pp + l] + __popc(peers & lanes_below);
      srow[slot] = row;
      slocal[slot] = (unsigned short)l;
    }
    __syncwarp();
    if (l >= 0 && (peers & lanes_below) == 0)
      cursor[warp * pp + l] = (unsigned short)(cursor[warp * pp + l] + __popc(peers));
    __syncwarp();
  });
  __syncthreads();

  const int m = seg_first[pp];
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
          A r[VEC];
#pragma unroll
          for (int v = 0; v < VEC; ++v)
            r[v] = finish<OP, A>(acc[k][v], en - st);
          store_pack<T, VEC>(part_out + (i64)l * out_stride + col, r);
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
#pragma unroll
        for (int k = 0; k < CPL; ++k)
          if (c0 + (k * G + lane) * VEC < D)
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              acc[k][e] = combine<OP, A>(acc[k][e], v[u][k][e]);
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
          if (col < D) {
            A r[VEC];
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              r[e] = finish<OP, A>(acc[k][e], en - st);
            store_pack<T, VEC>(part_out + (i64)l * out_stride + col, r);
          }
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
