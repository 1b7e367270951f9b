// jitops/segment_backward_runs.cuh — the max/min gradient over rows grouped by segment: no
// S x D tie table, no atomics.
//
//   dx[i, d] = dy[s, d] / ties(s, d) where data[i, d] == out[s, d] (s = ids[i]), else 0;
//   with FIRST only the first such row (in row order) gets dy[s, d].
//
// Positions 0..N-1 are rows in segment order, as in the forward's chunked reduction: for
// sorted ids the rows themselves, for unsorted ids the forward's stable radix sort (keys[j],
// row perm[j]), so a segment's rows are consecutive and in row order. A group of G lanes
// owns a chunk of CH positions and walks it once per column tile; a lane owns E = CPL x VEC
// columns of a tile.
//   mark — reads each row once, compares it with its segment's result, writes dx = dy where
//          they match (with FIRST, at a run's first match of each column) and 0 elsewhere, and
//          keeps two bits a column: matched once, matched again. Exact tie counts matter only
//          where a column ties, which is rare, so they are recomputed there rather than
//          counted for every column (counters took a quarter of the registers). A run that
//          crosses the chunk's start or end leaves its bits in slot 0 (the chunk's first run)
//          or 1 (its last run), and the chunk where such a segment starts records it
//          (`owned`); a whole segment with tied columns goes on the chunk's list.
//   fix  — rewrites the tied columns of the listed segments, and of the crossing segments the
//          chunk owns once their chunks' bits are merged in chunk order.
// A rewrite walks the segment's rows with the whole group — lanes take rows, not columns — so a
// tied column costs two round trips, not one per row: first the exact count and first matching
// row, then dy / ties (or dy at the first match, 0 elsewhere) at every match.
// Every element is written by one lane per kernel and every count is an integer, so results
// are deterministic. A NaN result equals nothing and routes no gradient; rows with dropped ids
// get 0.
#pragma once
#include "jitops/segment_reduce.cuh"

namespace jitops {
namespace segment {

// Threads a block of the mark pass runs, and how a lane batches its rows. What keeps a row stream
// at full bandwidth is the bytes in flight an SM (about 100 KB on an H100), not the warps:
// wide rows (E >= 8) keep 64 loaded elements a lane in two blocks an SM (128 registers), narrow
// rows 24 (half data, half their result columns) in three (80 registers; a fourth row spilled).
constexpr int RUNS_THREADS = JITOPS__SEGMENT_RUNS_THREADS;
template <class T, int E> struct runs_shape {
  static constexpr bool wide = E >= JITOPS__SEGMENT_RUNS_WIDE_ELEMENTS;
  static constexpr int min_blocks = wide || sizeof(acc_t<T>) == 8
                                        ? JITOPS__SEGMENT_RUNS_WIDE_BLOCKS
                                        : JITOPS__SEGMENT_RUNS_NARROW_BLOCKS;
  static constexpr int budget = sizeof(acc_t<T>) == 4 ? (wide ? 64 : 32) : (wide ? 32 : 16);
  static constexpr int u0 = wide ? budget / E : (budget - 8) / (2 * E);
  static constexpr int rows = u0 < 1 ? 1 : (u0 > 8 ? 8 : u0); // rows a batch (U)
};

// The tie bits of a run that crosses chunks (segment_abi.h).
typedef jitops__segment_tie_bits tie_bits;

// Where a lane keeps a crossing run's bits: bits[chunk][slot][tile][lane], slot 0 for the
// chunk's first run and 1 for its last.
__device__ __forceinline__ i64 tie_slot(i64 chunk, int slot, int tiles, int tile, int G, int lane) {
  return ((chunk * 2 + slot) * tiles + tile) * G + lane;
}

__device__ __forceinline__ void merge_bits(tie_bits &acc, tie_bits b) {
  acc.twice |= b.twice | (acc.once & b.once);
  acc.once |= b.once;
}

template <class T, int VEC, bool SORTED, int RB>
__device__ __forceinline__ void load_walk_rows(const T *__restrict__ x, i64 x_stride,
                                               const int *__restrict__ perm, int j0, int step,
                                               int b, int col, acc_t<T> (&xv)[RB][VEC]) {
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    const int j = j0 + r * step;
    if (j < b) {
      const i64 row = SORTED ? (i64)j : (i64)perm[j];
      load_pack<T, VEC>(x + row * x_stride + col, xv[r]);
    }
  }
}

// Rewrites dx over positions [a, b) of segment s in every column some lane of the group marks
// in `tied` (its bits, as in tie_bits): each tied VEC-column access is walked by the whole
// group, lanes taking rows a + lane, a + lane + G, ... (RB at a time). Called by all G lanes of
// the group together, from the fix pass only: its code in the mark pass's loop, even never run,
// made the compiler keep that loop's rows in flight in local memory.
template <class T, int VEC, int G, bool SORTED, bool FIRST>
__device__ __noinline__ void
rewrite_tied(const T *__restrict__ x, i64 x_stride, const T *__restrict__ y, i64 y_stride,
             const T *__restrict__ dy, i64 dy_stride, const int *__restrict__ perm, int s, int a,
             int b, int c0, int lane, unsigned tied, T *__restrict__ dx, i64 dx_stride) {
  typedef acc_t<T> A;
  constexpr int RB = 4;
  const unsigned mask = group_mask<G>();
  const bool one_round = b - a <= G * RB; // the first walk's rows are the whole segment
  // Lanes of the group may have stored to these rows in this kernel: those stores come first.
  __syncwarp(mask);
  for (int owner = 0; owner < G; ++owner) {
    unsigned t = __shfl_sync(mask, tied, owner, G);
    while (t != 0) {
      const int k = (__ffs(t) - 1) / VEC;
      t &= ~(((1u << VEC) - 1u) << (k * VEC));
      const int col = c0 + (k * G + owner) * VEC;
      A yv[VEC], g[VEC], xv[RB][VEC];
      load_pack<T, VEC>(y + (i64)s * y_stride + col, yv);
      load_pack<T, VEC>(dy + (i64)s * dy_stride + col, g);
      int count[VEC], first[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        count[e] = 0;
        first[e] = 0x7fffffff;
      }
      for (int j0 = a + lane; j0 < b; j0 += G * RB) {
        load_walk_rows<T, VEC, SORTED, RB>(x, x_stride, perm, j0, G, b, col, xv);
#pragma unroll
        for (int r = 0; r < RB; ++r)
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            if (j0 + r * G < b && xv[r][e] == yv[e]) {
              ++count[e];
              first[e] = min(first[e], j0 + r * G);
            }
      }
#pragma unroll
      for (int m = 1; m < G; m <<= 1)
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          count[e] += __shfl_xor_sync(mask, count[e], m, G);
          first[e] = min(first[e], __shfl_xor_sync(mask, first[e], m, G));
        }
      for (int j0 = a + lane; j0 < b; j0 += G * RB) {
        if (!one_round)
          load_walk_rows<T, VEC, SORTED, RB>(x, x_stride, perm, j0, G, b, col, xv);
#pragma unroll
        for (int r = 0; r < RB; ++r) {
          const int j = j0 + r * G;
          if (j >= b)
            break;
          A out[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const bool match = xv[r][e] == yv[e];
            out[e] = !match  ? A(0)
                     : FIRST ? (j == first[e] ? g[e] : A(0))
                             : divide_by_count(g[e], count[e]);
          }
          const i64 row = SORTED ? (i64)j : (i64)perm[j];
          store_pack<T, VEC>(dx + row * dx_stride + col, out);
        }
      }
    }
  }
}

// Tied whole segments a chunk lists for the fix pass, per column tile; a count of one more
// means the list overflowed and the fix pass finds them itself. Where a chunk's tile keeps its
// list: jitops__segment_tied_list (segment_abi.h).
constexpr int TIED_LIST = JITOPS__SEGMENT_RUNS_TIED_LIST;
typedef jitops__segment_tied_list tied_list;

// Entry i of the list of chunk tile ct: its run at runs[3 * entry], its lanes' bits at
// bits[G * entry].
__device__ __forceinline__ i64 tied_entry(i64 ct, int i) {
  return ct * TIED_LIST + i;
}

// Whether the run [a, b) of segment s, inside chunk [lo, hi), starts and ends the segment.
template <class I, bool SORTED>
__device__ __forceinline__ void run_extent(const I *ids, i64 id_stride, const int *keys, int N,
                                           int S, int lo, int hi, int s, int a, int b, bool &starts,
                                           bool &ends) {
  starts = a > lo || lo == 0 || key_at<I, SORTED>(ids, id_stride, keys, lo - 1, S) != s;
  ends = b < hi || hi == N || key_at<I, SORTED>(ids, id_stride, keys, hi, S) != s;
}

// The mark pass (see the top). `bits` is [nchunks][2][tiles][G]; `owned[c]` gets the segment
// that starts in chunk c and crosses its end (or -1) and `own_start[c]` where it starts;
// `seg_end[s]` gets the end of every segment that crosses a chunk boundary; `tied` lists the
// chunk's whole segments with tied columns.
//
// U rows a batch: every row's data loads go out at once (they wait for nothing: a row's address
// does not depend on its segment), then each row is compared with its segment's result and its
// dx written, and the match bits feed the runs' bookkeeping. No rewrite happens here: its code in
// this loop, even cold, made the compiler keep the rows in flight in local memory. Narrow rows
// (E < 8) load each row's result columns beside its data (L1 hits within a run); wide rows keep
// the current segment's result and dy columns in shared memory (each lane its own, no barrier).
template <class T, class I, int VEC, int G, int CPL, bool SORTED, bool FIRST>
__global__ void __launch_bounds__(RUNS_THREADS, (runs_shape<T, CPL * VEC>::min_blocks))
    segment_backward_runs_mark(const jitops__segment_runs_args a) {
  const T *__restrict__ x = (const T *)a.tensors.x, *__restrict__ y = (const T *)a.tensors.y,
                        *__restrict__ dy = (const T *)a.tensors.dy;
  T *__restrict__ dx = (T *)a.tensors.dx;
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const int *__restrict__ keys = a.keys, *__restrict__ perm = a.perm;
  tie_bits *__restrict__ bits = a.bits;
  int *__restrict__ owned = a.owned, *__restrict__ own_start = a.own_start,
                    *__restrict__ seg_end = a.seg_end;
  const tied_list tied = a.tied;
  const i64 x_stride = a.tensors.x_stride, y_stride = a.tensors.y_stride,
            dy_stride = a.tensors.dy_stride, dx_stride = a.tensors.dx_stride,
            id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments, D = a.cols, CH = a.chunk_rows, nchunks = a.chunks;
  wait_for_previous_grid();
  typedef acc_t<T> A;
  constexpr int E = CPL * VEC;
  static_assert(E <= 32, "a lane's columns must fit the 32 tie bits");
  constexpr bool WIDE = runs_shape<T, E>::wide;
  constexpr int U = runs_shape<T, E>::rows;
  constexpr int COLS = G * E;
  // WIDE: the current segment's result and dy columns, per group (sized 1 otherwise).
  __shared__ A seg_rows[WIDE ? RUNS_THREADS / G : 1][2][WIDE ? COLS : 1];
  const i64 chunk = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
  const int lane = threadIdx.x % G;
  if (chunk >= nchunks)
    return;
  A *seg_y = seg_rows[WIDE ? threadIdx.x / G : 0][0];
  A *seg_dy = seg_rows[WIDE ? threadIdx.x / G : 0][1];
  const unsigned mask = group_mask<G>();
  const int tiles = (D + COLS - 1) / COLS;
  const int lo = (int)(chunk * CH);
  const int hi = (int)min((i64)N, chunk * CH + CH);
  if (lane == 0)
    owned[chunk] = -1;

  for (int c0 = 0; c0 < D; c0 += COLS) {
    const i64 ct = chunk * tiles + c0 / COLS;
    int listed = 0;
    // The run [a, b) of segment s ends with tie bits tb: list a whole segment with tied
    // columns, leave a crossing run's bits for the fix pass.
    auto end_run = [&](int s, int a, int b, tie_bits tb) {
      if (s < 0 || s >= S)
        return;
      bool starts, ends;
      run_extent<I, SORTED>(ids, id_stride, keys, N, S, lo, hi, s, a, b, starts, ends);
      if (c0 == 0 && lane == 0) {
        if (starts && !ends) {
          owned[chunk] = s;
          own_start[chunk] = a;
        }
        if (ends && !starts)
          seg_end[s] = b;
      }
      if (!(starts && ends)) {
        bits[tie_slot(chunk, a == lo ? 0 : 1, tiles, c0 / COLS, G, lane)] = tb;
      } else if (!FIRST && __any_sync(mask, tb.twice != 0u)) { // FIRST holds within a run
        if (listed < TIED_LIST) {
          if (lane == 0) {
            int *r = tied.runs + tied_entry(ct, listed) * 3;
            r[0] = s;
            r[1] = a;
            r[2] = b;
          }
          tied.bits[tied_entry(ct, listed) * G + lane] = tb.twice;
        }
        listed = min(listed + 1, TIED_LIST + 1);
      }
    };

    tie_bits tb = {0u, 0u};
    int run_key = key_at<I, SORTED>(ids, id_stride, keys, lo, S), run_start = lo;
    int staged = -1;        // WIDE: the segment whose columns seg_y / seg_dy hold
    int seen_key = run_key; // FIRST: the segment whose matches `seen` holds
    unsigned seen = 0u;
    for (int j0 = lo; j0 < hi; j0 += U) {
      int key[U], row[U];
      A xv[U][CPL][VEC];
      A yv[WIDE ? 1 : U][CPL][VEC];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u;
        key[u] = j < hi ? key_at<I, SORTED>(ids, id_stride, keys, j, S) : -1;
        row[u] = SORTED ? j : (j < hi ? perm[j] : 0);
#pragma unroll
        for (int k = 0; k < CPL; ++k) {
          const int col = c0 + (k * G + lane) * VEC;
          if (j < hi && col < D)
            load_pack_stream<T, VEC>(x + (i64)row[u] * x_stride + col, xv[u][k]);
        }
      }
      if constexpr (!WIDE) {
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int k = 0; k < CPL; ++k) {
            const int col = c0 + (k * G + lane) * VEC;
            if (key[u] >= 0 && key[u] < S && col < D)
              load_pack<T, VEC>(y + (i64)key[u] * y_stride + col, yv[u][k]);
          }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u, s = key[u];
        if (j >= hi)
          break;
        const bool valid = s >= 0 && s < S;
        if (WIDE && valid && staged != s) {
#pragma unroll
          for (int k = 0; k < CPL; ++k) {
            const int col = c0 + (k * G + lane) * VEC;
            if (col < D) {
              A a[VEC], g[VEC];
              load_pack<T, VEC>(y + (i64)s * y_stride + col, a);
              load_pack<T, VEC>(dy + (i64)s * dy_stride + col, g);
#pragma unroll
              for (int e = 0; e < VEC; ++e) {
                seg_y[(k * G + lane) * VEC + e] = a[e];
                seg_dy[(k * G + lane) * VEC + e] = g[e];
              }
            }
          }
          staged = s;
        }
        if (FIRST && s != seen_key) {
          seen_key = s;
          seen = 0u;
        }
        unsigned match = 0u;
#pragma unroll
        for (int k = 0; k < CPL; ++k) {
          const int col = c0 + (k * G + lane) * VEC;
          if (col >= D)
            continue;
          unsigned m = 0u;
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const A target = WIDE ? seg_y[(k * G + lane) * VEC + e] : yv[WIDE ? 0 : u][k][e];
            m |= (valid && xv[u][k][e] == target ? 1u : 0u) << e;
          }
          A g[VEC];
          if (m != 0u) {
            if constexpr (WIDE) {
#pragma unroll
              for (int e = 0; e < VEC; ++e)
                g[e] = seg_dy[(k * G + lane) * VEC + e];
            } else {
              load_pack<T, VEC>(dy + (i64)s * dy_stride + col, g);
            }
          }
          const unsigned take = FIRST ? m & ~(seen >> (k * VEC)) : m;
          A r[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            r[e] = (take >> e) & 1u ? g[e] : A(0);
          store_pack_stream<T, VEC>(dx + (i64)row[u] * dx_stride + col, r);
          match |= m << (k * VEC);
        }
        if (FIRST)
          seen |= match;
        if (s != run_key) {
          end_run(run_key, run_start, j, tb);
          tb.once = tb.twice = 0u;
          run_key = s;
          run_start = j;
        }
        tb.twice |= tb.once & match;
        tb.once |= match;
      }
    }
    end_run(run_key, run_start, hi, tb);
    if (lane == 0)
      tied.count[ct] = listed;
  }
}

// The tied whole segments of a chunk's tile whose list overflowed: walks the chunk's rows again,
// one at a time, and rewrites each whole segment whose columns tie (a path for data with ties
// everywhere, which also needs the rewrites everywhere).
template <class T, class I, int VEC, int G, int CPL, bool SORTED, bool FIRST>
__device__ __noinline__ void
rewrite_chunk_ties(const T *__restrict__ x, i64 x_stride, const T *__restrict__ y, i64 y_stride,
                   const T *__restrict__ dy, i64 dy_stride, const I *__restrict__ ids,
                   i64 id_stride, const int *__restrict__ keys, const int *__restrict__ perm, int N,
                   int S, int D, int lo, int hi, int c0, int lane, T *__restrict__ dx,
                   i64 dx_stride) {
  typedef acc_t<T> A;
  const unsigned mask = group_mask<G>();
  tie_bits tb = {0u, 0u};
  int run_key = key_at<I, SORTED>(ids, id_stride, keys, lo, S), run_start = lo;
  for (int j = lo; j <= hi; ++j) {
    const int s = j < hi ? key_at<I, SORTED>(ids, id_stride, keys, j, S) : -2;
    if (s != run_key) {
      bool starts, ends;
      run_extent<I, SORTED>(ids, id_stride, keys, N, S, lo, hi, run_key, run_start, j, starts,
                            ends);
      if (run_key >= 0 && run_key < S && starts && ends && __any_sync(mask, tb.twice != 0u))
        rewrite_tied<T, VEC, G, SORTED, FIRST>(x, x_stride, y, y_stride, dy, dy_stride, perm,
                                               run_key, run_start, j, c0, lane, tb.twice, dx,
                                               dx_stride);
      tb.once = tb.twice = 0u;
      run_key = s;
      run_start = j;
    }
    if (j == hi || s < 0 || s >= S)
      continue;
    const i64 row = SORTED ? (i64)j : (i64)perm[j];
    unsigned match = 0u;
#pragma unroll
    for (int k = 0; k < CPL; ++k) {
      const int col = c0 + (k * G + lane) * VEC;
      if (col >= D)
        continue;
      A xv[VEC], yv[VEC];
      load_pack<T, VEC>(x + row * x_stride + col, xv);
      load_pack<T, VEC>(y + (i64)s * y_stride + col, yv);
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        match |= (xv[e] == yv[e] ? 1u : 0u) << (k * VEC + e);
    }
    tb.twice |= tb.once & match;
    tb.once |= match;
  }
}

// The fix pass (see the top): one group of G lanes per chunk. A chunk that owns a crossing
// segment merges the bits of the segment's chunks in chunk order and rewrites its tied columns;
// every chunk rewrites the tied whole segments the mark pass listed (or, where its list
// overflowed, finds them by walking its rows again).
template <class T, class I, int VEC, int G, int CPL, bool SORTED, bool FIRST>
__global__ void __launch_bounds__(THREADS)
    segment_backward_runs_fix(const jitops__segment_runs_args a) {
  const T *__restrict__ x = (const T *)a.tensors.x, *__restrict__ y = (const T *)a.tensors.y,
                        *__restrict__ dy = (const T *)a.tensors.dy;
  T *__restrict__ dx = (T *)a.tensors.dx;
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const int *__restrict__ keys = a.keys, *__restrict__ perm = a.perm;
  const i64 x_stride = a.tensors.x_stride, y_stride = a.tensors.y_stride,
            dy_stride = a.tensors.dy_stride, dx_stride = a.tensors.dx_stride,
            id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments, D = a.cols, CH = a.chunk_rows, nchunks = a.chunks;
  /* The mark pass's records, read-only here. */
  const tie_bits *__restrict__ bits = a.bits;
  const int *__restrict__ owned = a.owned, *__restrict__ own_start = a.own_start,
                          *__restrict__ seg_end = a.seg_end;
  const tied_list tied = a.tied;
  wait_for_previous_grid();
  constexpr int COLS = G * CPL * VEC;
  constexpr int BATCH_CHUNKS = 4;
  const i64 chunk = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
  const int lane = threadIdx.x % G;
  if (chunk >= nchunks)
    return;
  const unsigned mask = group_mask<G>();
  const int tiles = (D + COLS - 1) / COLS;
  const int lo = (int)(chunk * CH);
  const int hi = (int)min((i64)N, chunk * CH + CH);
  if constexpr (!FIRST) {
    for (int c0 = 0; c0 < D; c0 += COLS) {
      const i64 ct = chunk * tiles + c0 / COLS;
      const int listed = tied.count[ct];
      if (listed > TIED_LIST) {
        rewrite_chunk_ties<T, I, VEC, G, CPL, SORTED, FIRST>(
            x, x_stride, y, y_stride, dy, dy_stride, ids, id_stride, keys, perm, N, S, D, lo, hi,
            c0, lane, dx, dx_stride);
        continue;
      }
      for (int i = 0; i < listed; ++i) {
        const int *r = tied.runs + tied_entry(ct, i) * 3;
        rewrite_tied<T, VEC, G, SORTED, FIRST>(
            x, x_stride, y, y_stride, dy, dy_stride, perm, r[0], r[1], r[2], c0, lane,
            tied.bits[tied_entry(ct, i) * G + lane], dx, dx_stride);
      }
    }
  }
  const int s = owned[chunk];
  if (s < 0)
    return;
  const int st = own_start[chunk];
  const int en = seg_end[s];
  // Only broken promises about sorted ids can make these fail; stay in bounds then.
  if (en <= st || en > N)
    return;
  const int first = st / CH, last = (en - 1) / CH;
  const int first_slot = st == first * CH ? 0 : 1;
  for (int c0 = 0; c0 < D; c0 += COLS) {
    tie_bits acc = {0u, 0u};
    for (int c = first; c <= last; c += BATCH_CHUNKS) {
      tie_bits v[BATCH_CHUNKS];
#pragma unroll
      for (int i = 0; i < BATCH_CHUNKS; ++i) {
        const int cc = c + i;
        const int slot = cc == first ? first_slot : 0;
        v[i] = cc <= last ? bits[tie_slot(cc, slot, tiles, c0 / COLS, G, lane)] : tie_bits{0u, 0u};
      }
#pragma unroll
      for (int i = 0; i < BATCH_CHUNKS; ++i)
        merge_bits(acc, v[i]);
    }
    if (__any_sync(mask, acc.twice != 0u))
      rewrite_tied<T, VEC, G, SORTED, FIRST>(x, x_stride, y, y_stride, dy, dy_stride, perm, s, st,
                                             en, c0, lane, acc.twice, dx, dx_stride);
  }
}

} // namespace segment
} // namespace jitops
