// jitops/segment_reduce.cuh — the forward reduction over rows grouped by segment.
//
// Positions 0..N-1 are rows in segment order: for sorted ids, the rows themselves (key =
// clamp_id(id)); for unsorted ids, the radix sort's output (keys[j], and row perm[j] or, for
// rows of one column, the value itself). Segment s occupies positions [seg_start[s],
// seg_end[s]), which the chunked reduction records as it passes the segment's ends.
//
// Work is split into fixed chunks of CH positions, not into segments, so one huge segment
// and a million tiny ones cost the same per row. A group of G lanes owns a chunk; each lane
// owns VEC x CPL columns per column tile and walks the chunk's rows in order:
//   - a segment that starts and ends inside the chunk is finished and written directly;
//   - a segment that crosses the chunk's start or end leaves a partial in slot 0 (the
//     chunk's first run) or slot 1 (its last run) of partials[chunk];
// and the empty segments between two consecutive keys (at most FILL_MAX of them) are written
// by the chunk holding the second key (the first key of all is -1, the one after the last S);
// then segment_reduce_fixup combines each crossing segment's partials in chunk order and
// writes the remaining empty segments (those whose bounds nobody recorded: long gaps). Every
// order is fixed by the positions, never by scheduling.
#pragma once
#include "jitops/segment_common.cuh"

namespace jitops {
namespace segment {

// Empty segments a chunk writes itself per gap between consecutive keys. Short gaps are what
// many segments of about one row leave (S = 10^6 over 2^20 rows: a third of the segments);
// longer ones stay with the fixup, so that no chunk writes many more rows than it reads.
constexpr int FILL_MAX = 8;

template <class I, bool SORTED>
__device__ __forceinline__ int key_at(const I *ids, i64 id_stride, const int *keys, i64 j, int S) {
  if constexpr (SORTED)
    return clamp_id(ids[j * id_stride], S);
  else
    return keys[j];
}

template <class I, bool SORTED>
__device__ int lower_bound_key(const I *ids, i64 id_stride, const int *keys, int N, int S,
                               int target) {
  int lo = 0, hi = N;
  while (lo < hi) {
    const int mid = lo + ((hi - lo) >> 1);
    if (key_at<I, SORTED>(ids, id_stride, keys, mid, S) < target)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// a.counts[s] = the first position of sorted ids whose id is >= s, for s in [0, S]: the row
// counts of the mean's backward, as differences. A binary search per segment keeps the work
// even however the rows are spread (a million empty segments cost what full ones do). On an
// unsorted array (a broken `sorted` promise) the offsets stay monotonic and within [0, N].
template <class I>
__global__ void __launch_bounds__(THREADS) segment_offsets(const jitops__segment_gather_args a) {
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const int N = a.ids.rows, S = a.ids.segments;
  int *__restrict__ offsets = a.counts;
  const i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (s > S)
    return;
  offsets[s] = lower_bound_key<I, true>(ids, a.ids.stride, nullptr, N, S, (int)s);
}

// Counts ids >= S when there is nothing else to do (an empty output).
template <class I>
__global__ void __launch_bounds__(THREADS)
    segment_count_too_large(const jitops__segment_count_args a) {
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const i64 id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments;
  int local = 0;
  for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < N; j += (i64)gridDim.x * blockDim.x)
    local += ids[j * id_stride] >= (I)S;
  local = warp_sum(local);
  if ((threadIdx.x & 31) == 0)
    add_to_counter(a.counter.count64, a.counter.count32, local);
}

// Keys and rows of the U positions from j0 (those below hi) that lane `lane` of a group of G
// fetches: j0 + lane + G * r. Rows are the sort's perm (or the carried values), or for sorted
// ids the positions themselves; past hi, key -1 and row 0.
template <class I, bool SORTED, int G, int U, int R>
__device__ __forceinline__ void fetch_batch(const I *ids, i64 id_stride, const int *keys,
                                            const int *perm, int j0, int hi, int lane, int S,
                                            int (&key)[R], int (&row)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int u = lane + G * r, j = j0 + u;
    const bool in = u < U && j < hi;
    key[r] = in ? key_at<I, SORTED>(ids, id_stride, keys, j, S) : -1;
    row[r] = in ? (SORTED ? j : perm[j]) : 0;
  }
}

// Blocks of the chunked reduction an SM should hold: narrow rows (<= 4 accumulated values a
// lane, 4-byte accumulators) fit in 80 registers, and three blocks keep more rows in flight than
// two (the host sizes the chunks for this many).
template <class T, int VEC, int CPL> struct reduce_min_blocks {
  static constexpr int value =
      sizeof(acc_t<T>) == 4 && CPL * VEC <= JITOPS__SEGMENT_REDUCE_NARROW_ELEMENTS
          ? JITOPS__SEGMENT_REDUCE_NARROW_BLOCKS
          : 1;
};

// The chunked reduction. Besides the results and partials it records where each segment
// starts and ends (seg_start/seg_end, zeroed before: an untouched segment is empty) — the
// run that begins a segment writes its start, the run that ends it its end, so no search is
// needed — and counts the dropped ids that are too large (key S + 1 after the radix sort, S
// for sorted ids) into the caller's counter. With CARRY (one column, unsorted ids) `perm`
// holds the rows' values themselves (float bits), which the sort carried along. Empty segments
// of short gaps get `empty_value`, and bounds [0, 1) that tell the fixup they are done.
template <class T, class I, int OP, int VEC, int G, int CPL, bool SORTED, bool CARRY>
__global__ void __launch_bounds__(THREADS, (reduce_min_blocks<T, VEC, CPL>::value))
    segment_reduce_chunks(const jitops__segment_reduce_args a) {
  const T *__restrict__ data = (const T *)a.tensors.data;
  const i64 data_stride = a.tensors.data_stride, id_stride = a.ids.stride,
            out_stride = a.tensors.out_stride;
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const int *__restrict__ keys = a.keys;
  const int *__restrict__ perm = a.perm;
  const int N = a.ids.rows, S = a.ids.segments, D = a.cols, CH = a.chunk_rows, nchunks = a.chunks;
  T *__restrict__ out = (T *)a.tensors.out;
  acc_t<T> *__restrict__ partials = (acc_t<T> *)a.partials;
  int *__restrict__ seg_start = a.seg_start;
  int *__restrict__ seg_end = a.seg_end;
  const int *__restrict__ fallback = a.fallback;
  const acc_t<T> empty_value = fill_value<acc_t<T>>(a.fill);
  wait_for_previous_grid();
  if (!fallback_runs(fallback))
    return;
  typedef acc_t<T> A;
  // Rows in flight per lane: enough independent loads to cover memory latency, within about
  // 32 loaded values per lane.
  constexpr int U = CPL * VEC >= 32 ? 1 : (32 / (CPL * VEC) > 16 ? 16 : 32 / (CPL * VEC));
  constexpr int R = (U + G - 1) / G; // batch positions a lane fetches
  constexpr int COLS = G * CPL * VEC;
  const i64 chunk = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
  const int lane = threadIdx.x % G;
  if (chunk >= nchunks)
    return;
  const unsigned mask = group_mask<G>();
  const int lo = (int)(chunk * CH);
  const int hi = (int)min((i64)N, chunk * CH + CH);
  const int too_large = SORTED ? S : S + 1;
  int dropped = 0;

  for (int c0 = 0; c0 < D; c0 += COLS) {
    A acc[CPL][VEC];
    // Writes the run [a, b) of segment s: its result if the segment lies inside the chunk,
    // else a partial for the fixup; and the segment's bounds where the run holds them.
    auto emit = [&](int s, int a, int b) {
      const bool book = c0 == 0 && lane == 0;
      if (s == too_large && book)
        dropped += b - a;
      if (s < 0 || s >= S)
        return;
      const bool starts =
          a > lo || lo == 0 || key_at<I, SORTED>(ids, id_stride, keys, lo - 1, S) != s;
      const bool ends = b < hi || hi == N || key_at<I, SORTED>(ids, id_stride, keys, hi, S) != s;
      if (book && starts)
        seg_start[s] = a;
      if (book && ends)
        seg_end[s] = b;
#pragma unroll
      for (int k = 0; k < CPL; ++k) {
        const int col = c0 + (k * G + lane) * VEC;
        if (col >= D)
          continue;
        if (starts && ends) {
          store_result<OP, T, VEC>(out + (i64)s * out_stride + col, acc[k], b - a);
        } else {
          A *p = partials + (chunk * 2 + (a == lo ? 0 : 1)) * D + col;
          pack<A, VEC> r;
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            r.v[e] = acc[k][e];
          *reinterpret_cast<pack<A, VEC> *>(p) = r;
        }
      }
    };

    // The empty segments strictly between keys a < b (in segment order), if few.
    auto fill_gap = [&](int a, int b) {
      const int from = max(a + 1, 0), to = min(b, S);
      if (to <= from || to - from > FILL_MAX)
        return;
      A r[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        r[e] = empty_value;
      for (int s = from; s < to; ++s) {
        if (c0 == 0 && lane == 0) {
          seg_start[s] = 0;
          seg_end[s] = 1;
        }
#pragma unroll
        for (int k = 0; k < CPL; ++k) {
          const int col = c0 + (k * G + lane) * VEC;
          if (col < D)
            store_pack<T, VEC>(out + (i64)s * out_stride + col, r);
        }
      }
    };

    reset_to_identity<OP>(acc);
    int run_key = key_at<I, SORTED>(ids, id_stride, keys, lo, S), run_start = lo;
    fill_gap(lo == 0 ? -1 : key_at<I, SORTED>(ids, id_stride, keys, lo - 1, S), run_key);
    // Keys and rows (or carried values) of a batch. After a sort, batches of several rows
    // shared by several lanes fetch the next batch's while this one is reduced, lane l holding
    // positions j0 + l + G * r (two registers a lane) that the group reads by shuffles, and
    // every data load of a batch goes out at once: key, row and data were three dependent
    // loads (H100, N = 2^20, D = 64, S = 10^6: sum 0.339 -> 0.305 ms). Sorted ids (a row is
    // its position) and the rest (one row a batch, or a lone lane) fetch their own at the
    // start of the batch: for sorted ids fetching ahead measured 3-7% slower.
    constexpr bool AHEAD = !SORTED && U > 1 && G > 1;
    constexpr int F = AHEAD ? R : U; // positions a lane fetches
    int next_key[F], next_row[F];
    if constexpr (AHEAD)
      fetch_batch<I, SORTED, G, U, R>(ids, id_stride, keys, perm, lo, hi, lane, S, next_key,
                                      next_row);
    for (int j0 = lo; j0 < hi; j0 += U) {
      int batch_key[F], batch_row[F];
      if constexpr (AHEAD) {
#pragma unroll
        for (int r = 0; r < F; ++r) {
          batch_key[r] = next_key[r];
          batch_row[r] = next_row[r];
        }
      } else {
        fetch_batch<I, SORTED, 1, U, U>(ids, id_stride, keys, perm, j0, hi, 0, S, batch_key,
                                        batch_row);
      }
      auto key_of = [&](int u) {
        return AHEAD ? __shfl_sync(mask, batch_key[u / G], u % G, G) : batch_key[u];
      };
      A v[U][CPL][VEC];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u;
        const int row = AHEAD ? __shfl_sync(mask, batch_row[u / G], u % G, G) : batch_row[u];
        // Fetched ahead, every position's load goes out at once; otherwise only valid rows'.
        if (j < hi && (AHEAD || (key_of(u) >= 0 && key_of(u) < S))) {
          if constexpr (CARRY) {
            v[u][0][0] = __int_as_float(row);
          } else {
            const T *p = data + (i64)row * data_stride;
#pragma unroll
            for (int k = 0; k < CPL; ++k) {
              const int col = c0 + (k * G + lane) * VEC;
              if (col < D)
                load_pack<T, VEC>(p + col, v[u][k]);
            }
          }
        }
      }
      if constexpr (AHEAD)
        fetch_batch<I, SORTED, G, U, R>(ids, id_stride, keys, perm, j0 + U, hi, lane, S, next_key,
                                        next_row);
      // Positions u whose key leaves a gap after the one before (empty segments between them):
      // filled after the batch by one rolled loop, which reads the two keys again (they were
      // just loaded), rather than by a copy of the fill at every unrolled position (that copy
      // was half the kernel's compile time).
      unsigned gaps = 0;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u;
        if (j >= hi)
          break;
        const int key = key_of(u);
        if (key != run_key) {
          emit(run_key, run_start, j);
          if (key > run_key + 1)
            gaps |= 1u << u;
          reset_to_identity<OP>(acc);
          run_key = key;
          run_start = j;
        }
        if (run_key >= 0 && run_key < S)
          combine_accesses<OP, A, CPL, VEC, G>(acc, v[u], c0, lane, D);
      }
#pragma unroll 1
      for (; gaps != 0; gaps &= gaps - 1) {
        const int j = j0 + __ffs(gaps) - 1; // > lo: the chunk's first key starts its first run
        fill_gap(key_at<I, SORTED>(ids, id_stride, keys, j - 1, S),
                 key_at<I, SORTED>(ids, id_stride, keys, j, S));
      }
    }
    emit(run_key, run_start, hi);
    if (hi == N)
      fill_gap(run_key, S);
  }
  add_to_counter(a.counter.count64, a.counter.count32, dropped);
}

// The partials of segment [st, en): row lane `rl` of `RL` combines partials rl, rl + RL, ...
// of it into acc (columns c0 + (k*G + cl)*VEC), in order.
template <class T, int OP, int VEC, int G, int CPL, int U>
__device__ __forceinline__ void combine_partials(const acc_t<T> *__restrict__ partials, int D,
                                                 int CH, int st, int en, int c0, int rl, int RL,
                                                 int cl, acc_t<T> (&acc)[CPL][VEC]) {
  typedef acc_t<T> A;
  const int first = st / CH;
  const int count = (en - 1) / CH - first + 1;
  // The first chunk holds this segment in slot 0 only if the segment starts it.
  const int first_slot = st == first * CH ? 0 : 1;
  for (int p0 = rl; p0 < count; p0 += RL * U) {
    A v[U][CPL][VEC];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int p = p0 + u * RL;
      if (p < count) {
        const A *row = partials + ((i64)(first + p) * 2 + (p == 0 ? first_slot : 0)) * D;
#pragma unroll
        for (int k = 0; k < CPL; ++k) {
          const int col = c0 + (k * G + cl) * VEC;
          if (col < D) {
            const pack<A, VEC> r = *reinterpret_cast<const pack<A, VEC> *>(row + col);
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              v[u][k][e] = r.v[e];
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (p0 + u * RL < count)
        combine_accesses<OP, A, CPL, VEC, G>(acc, v[u], c0, cl, D);
  }
}

template <class T, int VEC, int G, int CPL>
__device__ __forceinline__ void store_columns(T *o, int D, int c0, int cl,
                                              const acc_t<T> (&acc)[CPL][VEC]) {
#pragma unroll
  for (int k = 0; k < CPL; ++k) {
    const int col = c0 + (k * G + cl) * VEC;
    if (col < D)
      store_pack<T, VEC>(o + col, acc[k]);
  }
}

// The fixup of one warp's 32 consecutive segments from `first_segment`: `todo` and `is_long`
// say this lane's segment's case (see segment_reduce_fixup).
template <class T, int OP, int VEC, int G, int CPL>
__device__ __forceinline__ void
fixup_segments(const int *__restrict__ seg_start, const int *__restrict__ seg_end, int D, int CH,
               const acc_t<T> *__restrict__ partials, T *__restrict__ out, i64 out_stride,
               acc_t<T> empty_value, i64 first_segment, bool todo, bool is_long) {
  typedef acc_t<T> A;
  constexpr int GROUPS = 32 / G;
  constexpr int COLS = G * CPL * VEC;
  constexpr int U = CPL * VEC >= 16 ? 1 : 16 / (CPL * VEC) > 4 ? 4 : 16 / (CPL * VEC);
  const int lane = threadIdx.x & 31, group = lane / G, cl = lane % G;
  const unsigned shorts = __ballot_sync(0xffffffffu, todo && !is_long);
  unsigned longs = __ballot_sync(0xffffffffu, is_long);

  // Group g takes the short segments g, g + GROUPS, ... of the list, all groups in the same
  // iteration (a lane-by-lane walk of the list would run the groups one after another).
  const int shorts_count = __popc(shorts);
  for (int n = group; n < shorts_count; n += GROUPS) {
    unsigned m = shorts;
    for (int i = 0; i < n; ++i)
      m &= m - 1;
    const i64 s = first_segment + (__ffs(m) - 1);
    const int st = seg_start[s], en = seg_end[s];
    T *o = out + s * out_stride;
    for (int c0 = 0; c0 < D; c0 += COLS) {
      A acc[CPL][VEC];
#pragma unroll
      for (int k = 0; k < CPL; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          acc[k][e] = en > st ? identity<OP, A>() : empty_value;
      if (en > st) {
        combine_partials<T, OP, VEC, G, CPL, U>(partials, D, CH, st, en, c0, 0, 1, cl, acc);
#pragma unroll
        for (int k = 0; k < CPL; ++k)
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            acc[k][e] = finish<OP, A>(acc[k][e], en - st);
      }
      store_columns<T, VEC, G, CPL>(o, D, c0, cl, acc);
    }
  }
  __syncwarp();

  while (longs != 0) {
    const int src = __ffs(longs) - 1;
    longs &= longs - 1;
    const i64 s = first_segment + src;
    const int st = seg_start[s], en = seg_end[s];
    T *o = out + s * out_stride;
    for (int c0 = 0; c0 < D; c0 += COLS) {
      A acc[CPL][VEC];
      reset_to_identity<OP>(acc);
      combine_partials<T, OP, VEC, G, CPL, U>(partials, D, CH, st, en, c0, group, GROUPS, cl, acc);
#pragma unroll
      for (int m = G; m < 32; m <<= 1)
#pragma unroll
        for (int k = 0; k < CPL; ++k)
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            acc[k][e] = combine<OP, A>(acc[k][e], __shfl_xor_sync(0xffffffffu, acc[k][e], m));
#pragma unroll
      for (int k = 0; k < CPL; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          acc[k][e] = finish<OP, A>(acc[k][e], en - st);
      if (group == 0)
        store_columns<T, VEC, G, CPL>(o, D, c0, cl, acc);
    }
  }
}

// Segments that are empty or cross a chunk boundary. A warp looks after `segs` (<= 32, or a
// multiple of 32 up to 32 * JITOPS__SEGMENT_FIXUP_ROUNDS) consecutive segments, 32 at a time:
// the host's choice, fewer for wide rows, so that wide rows still spread over many warps; 128
// when such segments are sparse, so that the warps mostly just look (their bounds loaded at
// once). For each 32, the warp's 32/G groups of G lanes take the short ones, one group per
// segment, in parallel. Segments with more than LONG partials (a few huge segments) are then
// taken by the whole warp: row lane r combines partials r, r + 32/G, ... and a fixed butterfly
// combines the row lanes. Every order is fixed. `empty_value` is 0 for sum and mean, the fill
// for max/min.

template <class T, int OP, int VEC, int G, int CPL>
__global__ void __launch_bounds__(THREADS)
    segment_reduce_fixup(const jitops__segment_reduce_args a) {
  const int *__restrict__ seg_start = a.seg_start;
  const int *__restrict__ seg_end = a.seg_end;
  const int S = a.ids.segments, D = a.cols, CH = a.chunk_rows, segs = a.fixup_segments;
  const acc_t<T> *__restrict__ partials = (const acc_t<T> *)a.partials;
  T *__restrict__ out = (T *)a.tensors.out;
  const i64 out_stride = a.tensors.out_stride;
  const acc_t<T> empty_value = fill_value<acc_t<T>>(a.fill);
  const int *__restrict__ fallback = a.fallback;
  wait_for_previous_grid();
  if (!fallback_runs(fallback))
    return;
  constexpr int GROUPS = 32 / G;
  constexpr int U = CPL * VEC >= 16 ? 1 : 16 / (CPL * VEC) > 4 ? 4 : 16 / (CPL * VEC);
  constexpr int LONG = GROUPS > 1 ? 4 * U : 1 << 30;
  constexpr int FIXUP_ROUNDS = JITOPS__SEGMENT_FIXUP_ROUNDS;
  const int lane = threadIdx.x & 31;
  const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  // Every round's bounds are loaded at once; bit r of todo and is_long is round r's.
  static_assert(FIXUP_ROUNDS <= 32, "a round's flags are one bit of a 32-bit word");
  unsigned todo = 0, is_long = 0;
#pragma unroll
  for (int r = 0; r < FIXUP_ROUNDS; ++r) {
    const i64 s = warp * segs + r * 32 + lane;
    if (r * 32 + lane < segs && s < S) {
      const int st = seg_start[s], en = seg_end[s];
      const bool t = en == st || st / CH != (en - 1) / CH;
      todo |= (unsigned)t << r;
      is_long |= (unsigned)(t && en > st && (en - 1) / CH - st / CH + 1 > LONG) << r;
    }
  }
  // One copy of the rounds' work (rolled): unrolled, it was most of the kernel's compile.
#pragma unroll 1
  for (int r = 0; r < FIXUP_ROUNDS && r * 32 < segs; ++r)
    fixup_segments<T, OP, VEC, G, CPL>(seg_start, seg_end, D, CH, partials, out, out_stride,
                                       empty_value, warp * segs + r * 32, (todo >> r) & 1,
                                       (is_long >> r) & 1);
}

} // namespace segment
} // namespace jitops
