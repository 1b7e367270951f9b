// jitops/segment_backward.cuh — gradients of the segment reductions with respect to data.
//
//   sum:  dx[i] = dy[ids[i]]
//   mean: dx[i] = dy[ids[i]] / count[ids[i]]
//   max/min: dx[i, d] = dy[s, d] / ties[s, d] where data[i, d] == out[s, d] (TensorFlow's tie
//        split), or dy[s, d] only at the first such row (first_occurrence); 0 elsewhere. A NaN
//        result equals nothing, so it routes no gradient.
// Rows whose id is negative or >= S get 0. Everything runs over rows in their natural order
// (coalesced), O(N x D) in total. The only atomics are integer ones (counts, ties, first
// rows), so every result is deterministic.
#pragma once
#include "jitops/segment_common.cuh"

namespace jitops {
namespace segment {

// Column accesses a lane issues before it uses them (memory-level parallelism on wide rows).
constexpr int BATCH = JITOPS__SEGMENT_BACKWARD_BATCH;

// counts[s] += number of rows with id s. One warp takes 32 rows at a time; lanes with equal
// ids add once. With SHARED, each block counts into shared memory (S ints) first.
template <class I, bool SHARED>
__global__ void __launch_bounds__(THREADS) segment_count_rows(const jitops__segment_gather_args a) {
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const i64 id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments;
  int *__restrict__ counts = a.counts;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  int *target = counts;
  if constexpr (SHARED) {
    int *local = reinterpret_cast<int *>(smem_raw);
    for (int s = threadIdx.x; s < S; s += blockDim.x)
      local[s] = 0;
    __syncthreads();
    target = local;
  }
  const int lane = threadIdx.x & 31;
  const i64 warps = (i64)gridDim.x * (blockDim.x >> 5);
  for (i64 base = ((i64)blockIdx.x * blockDim.x + threadIdx.x - lane); base < N;
       base += warps * 32) {
    const i64 row = base + lane;
    int s = -1;
    if (row < N) {
      const I id = ids[row * id_stride];
      s = id >= 0 && id < (I)S ? (int)id : -1;
    }
    const unsigned peers = __match_any_sync(0xffffffffu, s);
    if (s >= 0 && lane == __ffs(peers) - 1)
      atomicAdd(target + s, __popc(peers));
  }
  if constexpr (SHARED) {
    __syncthreads();
    const int *local = reinterpret_cast<const int *>(smem_raw);
    for (int s = threadIdx.x; s < S; s += blockDim.x)
      if (local[s] != 0)
        atomicAdd(counts + s, local[s]);
  }
}

// sum and mean: G lanes per row, VEC columns per access. For mean, `counts` holds either
// per-segment counts or (OFFSETS) the offsets of sorted ids, count = offsets[s+1] - offsets[s].
template <class T, class I, int OP, int VEC, int G, bool OFFSETS>
__global__ void __launch_bounds__(THREADS)
    segment_backward_gather(const jitops__segment_gather_args a) {
  typedef acc_t<T> A;
  const T *__restrict__ dy = (const T *)a.tensors.dy;
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const int *__restrict__ counts = a.counts;
  T *__restrict__ dx = (T *)a.tensors.dx;
  const i64 dy_stride = a.tensors.dy_stride, id_stride = a.ids.stride,
            dx_stride = a.tensors.dx_stride;
  const int N = a.ids.rows, S = a.ids.segments, D = a.cols;
  const int nch = D / VEC;
  const int lane = threadIdx.x % G;
  const i64 groups = (i64)gridDim.x * (blockDim.x / G);
  for (i64 row = (i64)blockIdx.x * (blockDim.x / G) + threadIdx.x / G; row < N; row += groups) {
    const I id = ids[row * id_stride];
    const bool valid = id >= 0 && id < (I)S;
    A count = A(1);
    if (OP == MEAN && valid)
      count = OFFSETS ? (A)(counts[id + 1] - counts[id]) : (A)counts[id];
    // BATCH accesses per lane at a time: their loads are all issued before the first store.
    for (int ch0 = lane; ch0 < nch; ch0 += G * BATCH) {
      A v[BATCH][VEC];
#pragma unroll
      for (int b = 0; b < BATCH; ++b) {
        const int ch = ch0 + b * G;
        if (valid && ch < nch) {
          load_pack<T, VEC>(dy + (i64)id * dy_stride + ch * VEC, v[b]);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            v[b][e] = A(0);
        }
      }
#pragma unroll
      for (int b = 0; b < BATCH; ++b) {
        const int ch = ch0 + b * G;
        if (ch >= nch)
          break;
        if (OP == MEAN)
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            v[b][e] = v[b][e] / count;
        store_pack_stream<T, VEC>(dx + row * dx_stride + ch * VEC, v[b]);
      }
    }
  }
}

// max/min, pass 1: dx = dy where data equals the result, else 0, and count the matches of
// each cell (ties) — plus, with FIRST, the lowest matching row. Raises *tie_flag when any
// cell matches twice, so that pass 2 has work. A group of G lanes takes RF rows at a time
// (RF > 1 for rows of at most G accesses), BATCH / RF accesses of each, so that every lane
// has BATCH accesses in flight. data and grad_data stream through (evict-first), which keeps
// the result rows — read once per row of their segment — in L2; dy is read only where a value
// matches (one row per cell, usually).
// Blocks an SM for the mark pass: three (80 registers) while a lane keeps at most 16 loaded
// elements of data in flight, two above.
template <int VEC, int RF> struct mark_min_blocks {
  static constexpr int value = RF * (BATCH / RF) * VEC <= 16 ? 3 : 2;
};

template <class T, class I, int VEC, int G, bool FIRST, int RF>
__global__ void __launch_bounds__(THREADS, (mark_min_blocks<VEC, RF>::value))
    segment_backward_extreme_mark(const jitops__segment_extreme_args a) {
  typedef acc_t<T> A;
  const T *__restrict__ x = (const T *)a.tensors.x, *__restrict__ y = (const T *)a.tensors.y,
                        *__restrict__ dy = (const T *)a.tensors.dy;
  T *__restrict__ dx = (T *)a.tensors.dx;
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  int *__restrict__ ties = a.ties, *__restrict__ first_row = a.first_row,
                    *__restrict__ tie_flag = a.tie_flag;
  const i64 x_stride = a.tensors.x_stride, y_stride = a.tensors.y_stride,
            dy_stride = a.tensors.dy_stride, dx_stride = a.tensors.dx_stride,
            id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments, D = a.cols;
  constexpr int B = BATCH / RF;
  const int nch = D / VEC;
  const int lane = threadIdx.x % G;
  const i64 groups = (i64)gridDim.x * (blockDim.x / G);
  bool tie = false;
  for (i64 row0 = (i64)blockIdx.x * (blockDim.x / G) + threadIdx.x / G; row0 < N;
       row0 += groups * RF) {
    I id[RF];
    bool valid[RF];
#pragma unroll
    for (int r = 0; r < RF; ++r) {
      const i64 row = row0 + r * groups;
      id[r] = row < N ? ids[row * id_stride] : (I)-1;
      valid[r] = id[r] >= 0 && id[r] < (I)S;
    }
    for (int ch0 = lane; ch0 < nch; ch0 += G * B) {
      A xv[RF][B][VEC], yv[RF][B][VEC];
#pragma unroll
      for (int r = 0; r < RF; ++r)
#pragma unroll
        for (int b = 0; b < B; ++b) {
          // The data load waits for nothing (its address is the row); the result's for the id.
          const int ch = ch0 + b * G;
          if (row0 + r * groups < N && ch < nch)
            load_pack_stream<T, VEC>(x + (row0 + r * groups) * x_stride + ch * VEC, xv[r][b]);
          if (valid[r] && ch < nch)
            load_pack<T, VEC>(y + (i64)id[r] * y_stride + ch * VEC, yv[r][b]);
        }
#pragma unroll
      for (int r = 0; r < RF; ++r) {
        const i64 row = row0 + r * groups;
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const int ch = ch0 + b * G;
          if (row >= N || ch >= nch)
            continue;
          bool match[VEC], any = false;
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            match[e] = valid[r] && xv[r][b][e] == yv[r][b][e];
            any |= match[e];
          }
          A g[VEC];
          if (any)
            load_pack<T, VEC>(dy + (i64)id[r] * dy_stride + ch * VEC, g);
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            if (match[e]) {
              const i64 cell = (i64)id[r] * D + ch * VEC + e;
              if (atomicAdd(ties + cell, 1) > 0)
                tie = true;
              if (FIRST)
                atomicMin(first_row + cell, (int)row);
            } else {
              g[e] = A(0);
            }
          }
          store_pack_stream<T, VEC>(dx + row * dx_stride + ch * VEC, g);
        }
      }
    }
  }
  if (tie)
    atomicExch(tie_flag, 1);
}

// max/min, pass 2: only cells with ties change — dy / ties (split), or dy at the first
// matching row and 0 at the others (FIRST). Returns at once when pass 1 saw no tie.
template <class T, class I, int VEC, int G, bool FIRST>
__global__ void __launch_bounds__(THREADS)
    segment_backward_extreme_split(const jitops__segment_extreme_args a) {
  typedef acc_t<T> A;
  const T *__restrict__ x = (const T *)a.tensors.x, *__restrict__ y = (const T *)a.tensors.y,
                        *__restrict__ dy = (const T *)a.tensors.dy;
  T *__restrict__ dx = (T *)a.tensors.dx;
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const int *__restrict__ ties = a.ties, *__restrict__ first_row = a.first_row,
                          *__restrict__ tie_flag =
                              a.tie_flag; /* the mark pass's counts, read-only here */
  const i64 x_stride = a.tensors.x_stride, y_stride = a.tensors.y_stride,
            dy_stride = a.tensors.dy_stride, dx_stride = a.tensors.dx_stride,
            id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments, D = a.cols;
  if (*tie_flag == 0)
    return;
  const int nch = D / VEC;
  const int lane = threadIdx.x % G;
  const i64 groups = (i64)gridDim.x * (blockDim.x / G);
  for (i64 row = (i64)blockIdx.x * (blockDim.x / G) + threadIdx.x / G; row < N; row += groups) {
    const I id = ids[row * id_stride];
    if (id < 0 || id >= (I)S)
      continue;
    for (int ch = lane; ch < nch; ch += G) {
      const i64 cell = (i64)id * D + ch * VEC;
      const pack<int, VEC> t = *reinterpret_cast<const pack<int, VEC> *>(ties + cell);
      bool any = false;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        any |= t.v[e] > 1;
      if (!any)
        continue;
      A xv[VEC], yv[VEC], g[VEC];
      load_pack<T, VEC>(x + row * x_stride + ch * VEC, xv);
      load_pack<T, VEC>(y + (i64)id * y_stride + ch * VEC, yv);
      load_pack<T, VEC>(dy + (i64)id * dy_stride + ch * VEC, g);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        if (xv[e] != yv[e])
          g[e] = A(0);
        else if (t.v[e] > 1)
          g[e] = FIRST ? (first_row[cell + e] == (int)row ? g[e] : A(0)) : g[e] / (A)t.v[e];
      }
      store_pack<T, VEC>(dx + row * dx_stride + ch * VEC, g);
    }
  }
}

} // namespace segment
} // namespace jitops
