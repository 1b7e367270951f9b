// jitops/segment_backward_runs.cuh — the max/min gradient over rows grouped by segment, for
// large result tables (S x D cells): no S x D tie table, no atomics.
//
//   dx[i, d] = dy[s, d] / ties(s, d) where data[i, d] == out[s, d] (s = ids[i]), else 0;
//   with FIRST only the first such row (in row order) gets dy[s, d].
//
// Positions 0..N-1 are rows in segment order, as in the forward's chunked reduction: for
// sorted ids the rows themselves, for unsorted ids the forward's stable radix sort (keys[j],
// row perm[j]), so a segment's rows are consecutive and in row order. A group of G lanes
// owns a chunk of CH positions and walks it once per column tile:
//   mark — reads each row and its segment's result row (the same row for the whole run, so
//          it stays in L1), writes dx = dy where they match, else 0, and counts the matches
//          of each column in registers. A run that is a whole segment is finished at once:
//          only columns with ties (rare) are walked again to divide. A run that crosses the
//          chunk's start or end leaves its counts in slot 0 (the chunk's first run) or 1 (its
//          last run); the chunk where such a segment starts records it (`owned`).
//   fix  — per chunk that owns a crossing segment: adds its counts over the segment's chunks
//          in order; for columns with more than one match, walks the segment's rows again and
//          writes dy / ties (or, with FIRST, dy at the first match and 0 at the others).
// Every element is written by one lane per kernel and every count is an integer in a fixed
// order, so results are deterministic. A NaN result equals nothing and routes no gradient;
// rows with dropped ids get 0.
#pragma once
#include "jitops/segment_reduce.cuh"

namespace jitops {
namespace segment {

// Writes the final gradient of segment s's positions [a, b) in the lane's columns whose
// match count `ties` exceeds 1: dy / ties at every match (split), or dy at the first match
// and 0 at the others (FIRST). Other columns keep what the mark pass wrote. RB rows' loads go
// out at a time: one at a time makes a walk over a long segment one memory latency a row (the
// fix pass took 80 us at D = 1024, S = 10^4 so, 53 us with 4); the mark pass, whose walks are
// of segments inside one chunk, keeps 1 (4 cost its loop registers, and 5% of its time).
// Not inlined: a rare path (ties), kept out of the mark loop's registers.
template <class T, int VEC, int G, int CPL, bool SORTED, bool FIRST, int RB>
__device__ __noinline__ void
rewrite_tied(const T *__restrict__ x, i64 x_stride, const T *__restrict__ y, i64 y_stride,
             const T *__restrict__ dy, i64 dy_stride, const int *__restrict__ perm, int s, int a,
             int b, int D, int c0, int lane, const int (&ties)[CPL][VEC], T *__restrict__ dx,
             i64 dx_stride) {
  typedef acc_t<T> A;
#pragma unroll
  for (int k = 0; k < CPL; ++k) {
    const int col = c0 + (k * G + lane) * VEC;
    bool tied = false;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      tied |= ties[k][e] > 1;
    if (col >= D || !tied)
      continue;
    A yv[VEC], g[VEC];
    load_pack<T, VEC>(y + (i64)s * y_stride + col, yv);
    load_pack<T, VEC>(dy + (i64)s * dy_stride + col, g);
    bool seen[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      seen[e] = false;
    for (int j0 = a; j0 < b; j0 += RB) {
      i64 row[RB];
      A xv[RB][VEC];
#pragma unroll
      for (int u = 0; u < RB; ++u) {
        row[u] = 0;
        if (j0 + u < b) {
          row[u] = SORTED ? (i64)(j0 + u) : (i64)perm[j0 + u];
          load_pack<T, VEC>(x + row[u] * x_stride + col, xv[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < RB; ++u) {
        if (j0 + u >= b)
          break;
        A r[VEC];
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const bool match = xv[u][e] == yv[e];
          if (FIRST)
            r[e] = match && !seen[e] ? g[e] : A(0);
          else
            r[e] = match ? (ties[k][e] > 1 ? g[e] / (A)ties[k][e] : g[e]) : A(0);
          seen[e] |= match;
        }
        store_pack<T, VEC>(dx + row[u] * dx_stride + col, r);
      }
    }
  }
}

// Threads a block of the mark pass runs. Its lanes hold about 165 registers (a group's
// accesses of several rows in flight); with 128-thread blocks three fit an SM (12 warps), with
// 256 only one (8 warps) — a stream of wide rows needs the bytes the extra warps keep in flight.
constexpr int RUNS_THREADS = 128;
// Three blocks an SM for 4-byte accumulators; 8-byte ones (f64) need more registers than that
// allows (hundreds of bytes of spills), so they keep two.
template <class T> struct runs_min_blocks {
  static constexpr int value = sizeof(acc_t<T>) == 4 ? 3 : 2;
};

// The mark pass (see the top). `counts` is [nchunks][2][D]; `owned[c]` gets the segment that
// starts in chunk c and crosses its end (or -1) and `own_start[c]` where it starts;
// `seg_end[s]` gets the end of every segment that crosses a chunk boundary.
template <class T, class I, int VEC, int G, int CPL, bool SORTED, bool FIRST>
__global__ void __launch_bounds__(RUNS_THREADS, (runs_min_blocks<T>::value))
    segment_backward_runs_mark(const T *__restrict__ x, i64 x_stride, const T *__restrict__ y,
                               i64 y_stride, const T *__restrict__ dy, i64 dy_stride,
                               const I *__restrict__ ids, i64 id_stride,
                               const int *__restrict__ keys, const int *__restrict__ perm, int N,
                               int S, int D, int CH, int nchunks, T *__restrict__ dx, i64 dx_stride,
                               int *__restrict__ counts, int *__restrict__ owned,
                               int *__restrict__ own_start, int *__restrict__ seg_end) {
  typedef acc_t<T> A;
  // Rows a lane keeps in flight: in a general batch about 16 loaded elements of data (and as
  // many of the result); wide rows (8 elements a lane) take one row at a time there, but
  // 4 in a batch that continues the current run (its result and dy rows come from shared
  // memory), which is what long segments of wide rows take. Narrow rows have no such fast
  // batch: their general batches already fill the registers.
  constexpr bool WIDE = CPL * VEC >= 8;
  constexpr int U = WIDE ? 1 : (16 / (CPL * VEC) > 8 ? 8 : 16 / (CPL * VEC));
  constexpr int UF = WIDE ? (32 / (CPL * VEC) > 1 ? 32 / (CPL * VEC) : 1) : 1;
  constexpr int COLS = G * CPL * VEC;
  // Per group: the current run's result row and dy row in the group's columns; each lane only
  // touches its own elements, so no barrier is needed.
  __shared__ A run_rows[RUNS_THREADS / G][2][COLS];
  A *run_y = run_rows[threadIdx.x / G][0];
  A *run_dy = run_rows[threadIdx.x / G][1];
  const i64 chunk = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
  const int lane = threadIdx.x % G;
  if (chunk >= nchunks)
    return;
  const int lo = (int)(chunk * CH);
  const int hi = (int)min((i64)N, chunk * CH + CH);
  if (lane == 0)
    owned[chunk] = -1;

  for (int c0 = 0; c0 < D; c0 += COLS) {
    int cnt[CPL][VEC];
    auto reset = [&]() {
#pragma unroll
      for (int k = 0; k < CPL; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          cnt[k][e] = 0;
    };
    // The run [a, b) of segment s ends: finish a whole segment, else leave its counts.
    auto close = [&](int s, int a, int b) {
      if (s < 0 || s >= S)
        return;
      const bool starts =
          a > lo || lo == 0 || key_at<I, SORTED>(ids, id_stride, keys, lo - 1, S) != s;
      const bool ends = b < hi || hi == N || key_at<I, SORTED>(ids, id_stride, keys, hi, S) != s;
      if (c0 == 0 && lane == 0) {
        if (starts && !ends) {
          owned[chunk] = s;
          own_start[chunk] = a;
        }
        if (ends && !starts)
          seg_end[s] = b;
      }
      if (starts && ends) {
        if (!FIRST)
          rewrite_tied<T, VEC, G, CPL, SORTED, FIRST, 1>(x, x_stride, y, y_stride, dy, dy_stride,
                                                         perm, s, a, b, D, c0, lane, cnt, dx,
                                                         dx_stride);
        return;
      }
      int *p = counts + (chunk * 2 + (a == lo ? 0 : 1)) * D;
#pragma unroll
      for (int k = 0; k < CPL; ++k) {
        const int col = c0 + (k * G + lane) * VEC;
        if (col >= D)
          continue;
        pack<int, VEC> r;
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          r.v[e] = cnt[k][e];
        *reinterpret_cast<pack<int, VEC> *>(p + col) = r;
      }
    };

    // UF rows of segment s (valid or not) at positions [j, j + UF): compare with the staged
    // result row, write dy or 0, count.
    auto fast_batch = [&](int s, int j, int &staged_key) {
      const bool valid = s >= 0 && s < S;
      if (valid && staged_key != s) {
#pragma unroll
        for (int k = 0; k < CPL; ++k) {
          const int col = c0 + (k * G + lane) * VEC;
          if (col < D) {
            A yv[VEC], gv[VEC];
            load_pack<T, VEC>(y + (i64)s * y_stride + col, yv);
            load_pack<T, VEC>(dy + (i64)s * dy_stride + col, gv);
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              run_y[(k * G + lane) * VEC + e] = yv[e];
              run_dy[(k * G + lane) * VEC + e] = gv[e];
            }
          }
        }
        staged_key = s;
      }
      i64 row[UF];
      A xv[UF][CPL][VEC];
#pragma unroll
      for (int u = 0; u < UF; ++u) {
        row[u] = SORTED ? (i64)(j + u) : (i64)perm[j + u];
        if (valid)
#pragma unroll
          for (int k = 0; k < CPL; ++k) {
            const int col = c0 + (k * G + lane) * VEC;
            if (col < D)
              load_pack_stream<T, VEC>(x + row[u] * x_stride + col, xv[u][k]);
          }
      }
#pragma unroll
      for (int k = 0; k < CPL; ++k) {
        const int col = c0 + (k * G + lane) * VEC;
        if (col >= D)
          continue;
        A yv[VEC], gv[VEC];
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          yv[e] = valid ? run_y[(k * G + lane) * VEC + e] : A(0);
          gv[e] = valid ? run_dy[(k * G + lane) * VEC + e] : A(0);
        }
#pragma unroll
        for (int u = 0; u < UF; ++u) {
          A r[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const bool m = valid && xv[u][k][e] == yv[e];
            r[e] = m && !(FIRST && cnt[k][e] > 0) ? gv[e] : A(0);
            cnt[k][e] += m ? 1 : 0;
          }
          store_pack_stream<T, VEC>(dx + row[u] * dx_stride + col, r);
        }
      }
    };

    reset();
    int run_key = key_at<I, SORTED>(ids, id_stride, keys, lo, S), run_start = lo;
    int staged = -1; // the segment whose rows run_y / run_dy hold
    for (int j0 = lo; j0 < hi;) {
      // Fast batch: the next UF positions all continue the current run (long segments).
      bool fast = false;
      if (WIDE && j0 + UF <= hi) {
        fast = true;
#pragma unroll
        for (int u = 0; u < UF; ++u)
          fast &= key_at<I, SORTED>(ids, id_stride, keys, j0 + u, S) == run_key;
      }
      if (fast) {
        fast_batch(run_key, j0, staged);
        j0 += UF;
        continue;
      }
      int key[U];
      i64 row[U];
      unsigned match[U]; // bit k * VEC + e: column (k, e) equals the result
      A g[U][CPL][VEC];
      {
        // Loads first (data streams through, the result row stays cached for the run), then
        // the matches, then dy where anything matched: three rounds of independent loads.
        A xv[U][CPL][VEC], yv[U][CPL][VEC];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u;
          key[u] = j < hi ? key_at<I, SORTED>(ids, id_stride, keys, j, S) : -1;
          row[u] = SORTED ? (i64)j : (j < hi ? (i64)perm[j] : 0);
          if (key[u] >= 0 && key[u] < S) {
#pragma unroll
            for (int k = 0; k < CPL; ++k) {
              const int col = c0 + (k * G + lane) * VEC;
              if (col < D) {
                load_pack_stream<T, VEC>(x + row[u] * x_stride + col, xv[u][k]);
                load_pack<T, VEC>(y + (i64)key[u] * y_stride + col, yv[u][k]);
              }
            }
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          match[u] = 0;
          if (key[u] >= 0 && key[u] < S)
#pragma unroll
            for (int k = 0; k < CPL; ++k)
              if (c0 + (k * G + lane) * VEC < D)
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                  if (xv[u][k][e] == yv[u][k][e])
                    match[u] |= 1u << (k * VEC + e);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < CPL; ++k) {
          const unsigned bits = (match[u] >> (k * VEC)) & ((1u << VEC) - 1u);
          if (bits != 0)
            load_pack<T, VEC>(dy + (i64)key[u] * dy_stride + c0 + (k * G + lane) * VEC, g[u][k]);
        }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u;
        if (j >= hi)
          break;
        if (key[u] != run_key) {
          close(run_key, run_start, j);
          reset();
          run_key = key[u];
          run_start = j;
        }
#pragma unroll
        for (int k = 0; k < CPL; ++k) {
          const int col = c0 + (k * G + lane) * VEC;
          if (col >= D)
            continue;
          A r[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const bool m = (match[u] >> (k * VEC + e)) & 1u;
            r[e] = m && !(FIRST && cnt[k][e] > 0) ? g[u][k][e] : A(0);
            cnt[k][e] += m ? 1 : 0;
          }
          store_pack_stream<T, VEC>(dx + row[u] * dx_stride + col, r);
        }
      }
      j0 += U;
    }
    close(run_key, run_start, hi);
  }
}

// The fix pass (see the top): one group of G lanes per chunk; only chunks that own a crossing
// segment work. The counts of the segment's chunks are added in chunk order.
template <class T, int VEC, int G, int CPL, bool SORTED, bool FIRST>
__global__ void __launch_bounds__(256)
    segment_backward_runs_fix(const T *__restrict__ x, i64 x_stride, const T *__restrict__ y,
                              i64 y_stride, const T *__restrict__ dy, i64 dy_stride,
                              const int *__restrict__ perm, int N, int D, int CH, int nchunks,
                              T *__restrict__ dx, i64 dx_stride, const int *__restrict__ counts,
                              const int *__restrict__ owned, const int *__restrict__ own_start,
                              const int *__restrict__ seg_end) {
  constexpr int COLS = G * CPL * VEC;
  constexpr int BATCH_CHUNKS = 4;
  const i64 chunk = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
  const int lane = threadIdx.x % G;
  if (chunk >= nchunks)
    return;
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
    int ties[CPL][VEC];
#pragma unroll
    for (int k = 0; k < CPL; ++k)
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        ties[k][e] = 0;
    for (int c = first; c <= last; c += BATCH_CHUNKS) {
      pack<int, VEC> v[BATCH_CHUNKS][CPL];
#pragma unroll
      for (int b = 0; b < BATCH_CHUNKS; ++b)
#pragma unroll
        for (int k = 0; k < CPL; ++k) {
          const int col = c0 + (k * G + lane) * VEC;
          const int cc = c + b;
          if (cc <= last && col < D)
            v[b][k] = *reinterpret_cast<const pack<int, VEC> *>(
                counts + ((i64)cc * 2 + (cc == first ? first_slot : 0)) * D + col);
          else
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              v[b][k].v[e] = 0;
        }
#pragma unroll
      for (int b = 0; b < BATCH_CHUNKS; ++b)
#pragma unroll
        for (int k = 0; k < CPL; ++k)
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            ties[k][e] += v[b][k].v[e];
    }
    rewrite_tied<T, VEC, G, CPL, SORTED, FIRST, 4>(x, x_stride, y, y_stride, dy, dy_stride, perm, s,
                                                   st, en, D, c0, lane, ties, dx, dx_stride);
  }
}

} // namespace segment
} // namespace jitops
