// jitops/segment_narrow.cuh — unsorted segment reductions over narrow rows (D <= 8 columns, a
// compile-time constant here) and many segments: one pass of integer atomics over the elements
// into a global S x D table, then a pass that turns the table into the output. No sort.
//
// A thread takes one element at a time (NARROW_UNROLL in flight), so a warp's 32 consecutive
// elements cover 32 / D consecutive rows and its atomics fall on the few sectors those rows'
// cells occupy, instead of 32 rows' worth of sectors per column as with a thread a row (the L2
// atomic units work per sector request: a thread a row cost D times the requests).
//
// max/min: the order-preserving codes of segment_atomic.cuh (an integer max does not depend on
// the order of the updates); the host clears the table to the "no row" code first.
//
// sum/mean (f32, f16, bf16): 64-bit fixed point. A prepare pass clears the table and finds the
// largest finite |x| over the data, m < 2^e; the sums then count in units of 2^-k with
// k = 62 - e - L, where N < 2^L, so each term is below 2^(62 - L) in magnitude and any sum of at
// most N terms stays below 2^63: integer additions, exact and order-independent, hence
// bit-identical from run to run whatever the atomics' order. The cost of exactness is the
// quantum: each term is rounded to 2^-k = 2^(e + L - 62), about m * 2^-41 at N = 2^20. A
// segment's error is at most its row count times half that, below one f32 ulp of the result
// whenever the segment's values are within about 2^(40 - log2 rows) of m; segments of values
// 10^6 or more times smaller than the call's largest lose relative precision (a float-atomic
// sum's error bound, n * 2^-24 * sum |x|, is smaller there, but it is not reproducible).
// Non-finite values stay out of the fixed-point sum: each sets 2 bits of its cell's marks (+inf
// 1, -inf 2, NaN 3), and a marked cell comes out as +inf, -inf or NaN, as any float summation
// order would give. The result is the exact fixed-point sum converted to double, scaled, divided
// by the count for mean (in double), and rounded to the output type.
#pragma once
#include "jitops/segment_atomic.cuh"

namespace jitops {
namespace segment {

constexpr int NARROW_UNROLL = JITOPS__SEGMENT_NARROW_UNROLL;
constexpr int FLAG_CELLS = JITOPS__SEGMENT_NARROW_FLAG_CELLS;

// The elements a thread takes on this round: e0 + u * step, u < NARROW_UNROLL.
__device__ __forceinline__ i64 narrow_first() {
  return (i64)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ i64 narrow_step() {
  return (i64)gridDim.x * blockDim.x;
}

// Row `r`'s id and the value of its column `c` (data rows may be strided; every row is read,
// dropped or not, so that the two loads do not wait on each other).
template <class T, class I> struct narrow_element {
  I id;
  acc_t<T> v;
};

// Whether the atomic passes read data and ids evict-first (ld.global.cs), leaving L2 to the
// table that the atomics and the finalize work on: for rows of 32 bytes or more. Measured on
// f32 rows of N = 2^20 (bench/NOTES-segment.md): at D = 8 the H100 ran 6-11% faster, the H200
// 7% faster over 10^6 segments and 5% slower over 10^5 (a table that fits in L2 anyway); at
// D <= 4 it gained nothing on the H100 and cost up to 4%. The rule also takes f64 rows of 4
// columns or more, f16/bf16 rows of 16 or more and the small calls' rows of up to 64 columns,
// none of them measured.
template <class T, int D> constexpr bool NARROW_STREAMS = D * sizeof(T) >= 32;

template <class T, class I, int D>
__device__ __forceinline__ narrow_element<T, I> narrow_load(const jitops__segment_narrow_args &a,
                                                            i64 e) {
  const i64 r = e / D, c = e - r * D;
  const I *id = (const I *)a.ids.ptr + r * a.ids.stride;
  const T *v = (const T *)a.tensors.data + r * a.tensors.data_stride + c;
  if constexpr (NARROW_STREAMS<T, D>)
    return narrow_element<T, I>{load_stream(id), load_stream(v)};
  else
    return narrow_element<T, I>{*id, load(v)};
}

// A thread's next NARROW_UNROLL elements from e0, `step` apart, all loads issued before any
// is used; those past the end get id -1, which every kernel skips.
template <class T, class I, int D>
__device__ __forceinline__ void narrow_load_batch(const jitops__segment_narrow_args &a, i64 e0,
                                                  i64 step, i64 total,
                                                  narrow_element<T, I> (&x)[NARROW_UNROLL]) {
#pragma unroll
  for (int u = 0; u < NARROW_UNROLL; ++u)
    x[u] = e0 + u * step < total ? narrow_load<T, I, D>(a, e0 + u * step)
                                 : narrow_element<T, I>{(I)-1, acc_t<T>(0)};
}

// Counts an element's row as dropped (id >= S) once, at its first column.
template <class I, int D> __device__ __forceinline__ int narrow_dropped(I id, int S, i64 e) {
  return (id >= (I)S && e % D == 0) ? 1 : 0;
}

__device__ __forceinline__ void narrow_count_dropped(const jitops__segment_narrow_args &a,
                                                     int dropped) {
  dropped = warp_sum(dropped);
  if ((threadIdx.x & 31) == 0)
    add_to_counter(a.counter.count64, a.counter.count32, dropped);
}

// max/min: every element's code into its cell (the table holds the "no row" code).
template <class T, class I, int OP, int D>
__global__ void __launch_bounds__(THREADS)
    segment_narrow_extreme(const jitops__segment_narrow_args a) {
  typedef acc_t<T> A;
  typedef typename ordered<A>::type K;
  K *__restrict__ table = (K *)a.table;
  const int S = a.ids.segments;
  const i64 total = (i64)a.ids.rows * D, step = narrow_step();
  int dropped = 0;
  for (i64 e0 = narrow_first(); e0 < total; e0 += step * NARROW_UNROLL) {
    narrow_element<T, I> x[NARROW_UNROLL];
    narrow_load_batch<T, I, D>(a, e0, step, total, x);
#pragma unroll
    for (int u = 0; u < NARROW_UNROLL; ++u) {
      const i64 e = e0 + u * step;
      if (x[u].id >= 0 && x[u].id < (I)S)
        atomic_extreme<OP, K>(table + (i64)x[u].id * D + e % D, code_of<OP, A>(x[u].v));
      else if (e < total)
        dropped += narrow_dropped<I, D>(x[u].id, S, e);
    }
  }
  narrow_count_dropped(a, dropped);
}

// out[s, c] = the decoded code of cell (s, c), or the fill where no row reached it. The table
// may be the output itself (the host's narrow_in_place): each thread reads a cell, then writes
// the same cell, so the two pointers are not declared __restrict__.
template <class T, int OP, int D>
__global__ void __launch_bounds__(THREADS)
    segment_narrow_extreme_finalize(const jitops__segment_narrow_args a) {
  typedef acc_t<T> A;
  typedef typename ordered<A>::type K;
  wait_for_previous_grid();
  const K *table = (const K *)a.table;
  T *out = (T *)a.tensors.out;
  const A fill = fill_value<A>(a.fill);
  const i64 cells = (i64)a.ids.segments * D, step = narrow_step();
  for (i64 e0 = narrow_first(); e0 < cells; e0 += step * NARROW_UNROLL) {
    K k[NARROW_UNROLL];
#pragma unroll
    for (int u = 0; u < NARROW_UNROLL; ++u)
      k[u] = e0 + u * step < cells ? table[e0 + u * step] : K(0);
#pragma unroll
    for (int u = 0; u < NARROW_UNROLL; ++u) {
      const i64 e = e0 + u * step, s = e / D;
      if (e < cells)
        store<T>(out + s * a.tensors.out_stride + (e - s * D), value_or_fill<OP, A>(k[u], fill));
    }
  }
}

// ---- sum and mean in 64-bit fixed point -----------------------------------------------------

// The call's scale, from the prepare blocks' words: k (units of 2^-k) and whether any value is
// non-finite. Every block of both later kernels computes it the same way from the same words.
struct fixed_scale {
  double scale, unit; // 2^k and 2^-k
  bool nonfinite;
};

// 2^k as a double, for |k| < 1000 (an exact power of two).
__device__ __forceinline__ double pow2(int k) {
  return __longlong_as_double((long long)(k + 1023) << 52);
}

// A block word: the largest finite |x| as float bits (bit 31 clear), and bit 31 when a
// non-finite value was seen. Merging keeps the larger magnitude and either's bit 31.
__device__ __forceinline__ unsigned merge_words(unsigned x, unsigned y) {
  return max(x & 0x7fffffffu, y & 0x7fffffffu) | ((x | y) & 0x80000000u);
}

// The block's words merged, in every thread (one call a kernel: its shared words are static).
__device__ __forceinline__ unsigned block_merge(unsigned w) {
  __shared__ unsigned words[THREADS / 32];
#pragma unroll
  for (int m = 16; m > 0; m >>= 1)
    w = merge_words(w, __shfl_xor_sync(0xffffffffu, w, m));
  if ((threadIdx.x & 31) == 0)
    words[threadIdx.x / 32] = w;
  __syncthreads();
  unsigned all = 0;
  for (int i = 0; i < (int)(blockDim.x / 32); ++i)
    all = merge_words(all, words[i]);
  return all;
}

__device__ __forceinline__ fixed_scale narrow_fixed_scale(const jitops__segment_narrow_args &a) {
  unsigned w = 0;
  for (int b = threadIdx.x; b < a.prepare_blocks; b += blockDim.x)
    w = merge_words(w, a.block_max[b]);
  const unsigned all = block_merge(w);
  const unsigned bits = all & 0x7fffffffu;
  // m < 2^e: e = the unbiased exponent + 1 (subnormals: below 2^-126); N < 2^L.
  const int biased = (int)(bits >> 23);
  const int e = (biased > 0 ? biased : 1) - 126;
  const int L = 32 - __clz(a.ids.rows);
  const int k = bits == 0 ? 0 : 62 - e - L;
  return fixed_scale{pow2(k), pow2(-k), (all & 0x80000000u) != 0};
}

// Whether a float is finite, from its bits.
__device__ __forceinline__ bool finite_bits(float v) {
  return (__float_as_uint(v) & 0x7fffffffu) < 0x7f800000u;
}

// Folds a value into a thread's largest finite |x| (as float bits, ordered as integers) and its
// non-finite bit.
__device__ __forceinline__ void fold_magnitude(float v, unsigned &most, unsigned &nonfinite) {
  if (finite_bits(v))
    most = max(most, __float_as_uint(v) & 0x7fffffffu);
  else
    nonfinite = 0x80000000u;
}

// The largest |x| over data whose rows are contiguous and 16-byte aligned, read as one flat
// array in 16-byte packs (NARROW_UNROLL in flight a thread: four times the bytes of the
// element-wise loop, whose 4-byte loads left the pass short of DRAM bandwidth), the elements
// past the last whole pack one a thread. For rows of 3 columns or more (NARROW_PACKED_PREPARE):
// f32 over 2^20 rows on an H100, the sums and means ran 2-8% faster at D = 3, 4 and 8; at
// D = 1, where a thread reads about one pack, 2-4% slower, and D = 2 the same.
template <int D> constexpr bool NARROW_PACKED_PREPARE = D >= 3;

template <class T>
__device__ __forceinline__ void fold_magnitudes_packed(const T *__restrict__ data, i64 total,
                                                       unsigned &most, unsigned &nonfinite) {
  static_assert(sizeof(acc_t<T>) == 4, "the fixed-point sums take f32, f16 and bf16 data");
  constexpr int VEC = 16 / sizeof(T);
  const i64 packs = total / VEC, step = narrow_step();
  for (i64 q0 = narrow_first(); q0 < packs; q0 += step * NARROW_UNROLL) {
    float v[NARROW_UNROLL][VEC];
#pragma unroll
    for (int u = 0; u < NARROW_UNROLL; ++u) {
      if (q0 + u * step < packs)
        load_pack<T, VEC>(data + (q0 + u * step) * VEC, v[u]);
      else
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          v[u][e] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < NARROW_UNROLL; ++u)
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        fold_magnitude(v[u][e], most, nonfinite);
  }
  for (i64 e = packs * VEC + narrow_first(); e < total; e += step)
    fold_magnitude(load(data + e), most, nonfinite);
}

// Clears the table, the marks and the counts, and writes this block's largest finite |x| (and
// whether it saw a non-finite value) to block_max[blockIdx.x].
template <class T, int D>
__global__ void __launch_bounds__(THREADS)
    segment_fixed_prepare(const jitops__segment_narrow_args a) {
  uint4 *__restrict__ zeroed = (uint4 *)a.zeroed;
  for (i64 w = narrow_first(); w < a.zeroed_words; w += narrow_step())
    zeroed[w] = make_uint4(0, 0, 0, 0);
  const T *__restrict__ data = (const T *)a.tensors.data;
  const i64 total = (i64)a.ids.rows * D, step = narrow_step();
  unsigned most = 0, nonfinite = 0;
  if (NARROW_PACKED_PREPARE<D> && a.tensors.data_stride == D &&
      ((unsigned long long)data & 15) == 0) {
    fold_magnitudes_packed(data, total, most, nonfinite);
  } else {
    for (i64 e0 = narrow_first(); e0 < total; e0 += step * NARROW_UNROLL) {
      float v[NARROW_UNROLL];
#pragma unroll
      for (int u = 0; u < NARROW_UNROLL; ++u) {
        const i64 e = e0 + u * step, r = e / D;
        v[u] = e < total ? load(data + r * a.tensors.data_stride + (e - r * D)) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < NARROW_UNROLL; ++u)
        fold_magnitude(v[u], most, nonfinite);
    }
  }
  const unsigned all = block_merge(most | nonfinite);
  if (threadIdx.x == 0)
    a.block_max[blockIdx.x] = all;
}

// 2-bit non-finite mark of a value: +inf 1, -inf 2, NaN 3.
__device__ __forceinline__ unsigned nonfinite_mark(float v) {
  return is_nan(v) ? 3u : (v > 0.0f ? 1u : 2u);
}

// Every finite element into its cell as a 64-bit fixed-point integer (round to nearest even);
// a non-finite one marks its cell; for mean, each row counts once in its segment.
template <class T, class I, bool MEAN, int D>
__global__ void __launch_bounds__(THREADS) segment_fixed_add(const jitops__segment_narrow_args a) {
  wait_for_previous_grid();
  const fixed_scale fs = narrow_fixed_scale(a);
  unsigned long long *__restrict__ table = (unsigned long long *)a.table;
  const int S = a.ids.segments;
  const i64 total = (i64)a.ids.rows * D, step = narrow_step();
  int dropped = 0;
  for (i64 e0 = narrow_first(); e0 < total; e0 += step * NARROW_UNROLL) {
    narrow_element<T, I> x[NARROW_UNROLL];
    narrow_load_batch<T, I, D>(a, e0, step, total, x);
#pragma unroll
    for (int u = 0; u < NARROW_UNROLL; ++u) {
      const i64 e = e0 + u * step;
      if (x[u].id < 0 || x[u].id >= (I)S) {
        if (e < total)
          dropped += narrow_dropped<I, D>(x[u].id, S, e);
        continue;
      }
      const i64 cell = (i64)x[u].id * D + e % D;
      if (finite_bits(x[u].v))
        atomicAdd(table + cell, (unsigned long long)__double2ll_rn((double)x[u].v * fs.scale));
      else
        atomicOr(a.flags + cell / FLAG_CELLS, nonfinite_mark(x[u].v) << (2 * (cell % FLAG_CELLS)));
      if (MEAN && e % D == 0)
        atomicAdd(a.counts + x[u].id, 1u);
    }
  }
  narrow_count_dropped(a, dropped);
}

// out[s, c] = the cell's exact sum (over its count for mean), rounded once; marked cells give
// +inf, -inf or NaN; empty segments give 0 (mean too).
template <class T, bool MEAN, int D>
__global__ void __launch_bounds__(THREADS)
    segment_fixed_finalize(const jitops__segment_narrow_args a) {
  wait_for_previous_grid();
  const fixed_scale fs = narrow_fixed_scale(a);
  const long long *__restrict__ table = (const long long *)a.table;
  T *__restrict__ out = (T *)a.tensors.out;
  const i64 cells = (i64)a.ids.segments * D, step = narrow_step();
  for (i64 e0 = narrow_first(); e0 < cells; e0 += step * NARROW_UNROLL) {
    long long q[NARROW_UNROLL];
    unsigned count[NARROW_UNROLL];
#pragma unroll
    for (int u = 0; u < NARROW_UNROLL; ++u) {
      const i64 e = e0 + u * step;
      q[u] = e < cells ? table[e] : 0;
      count[u] = MEAN && e < cells ? a.counts[e / D] : 1u;
    }
#pragma unroll
    for (int u = 0; u < NARROW_UNROLL; ++u) {
      const i64 e = e0 + u * step, s = e / D;
      if (e >= cells)
        continue;
      double v = (double)q[u] * fs.unit;
      if (fs.nonfinite) {
        const unsigned mark = (a.flags[e / FLAG_CELLS] >> (2 * (e % FLAG_CELLS))) & 3u;
        if (mark != 0)
          v = mark == 3u ? limits<double>::quiet_nan()
                         : (mark == 1u ? limits<double>::infinity() : -limits<double>::infinity());
      }
      if (MEAN)
        v = count[u] != 0 ? v / (double)count[u] : 0.0;
      store<T>(out + s * a.tensors.out_stride + (e - s * D), (acc_t<T>)v);
    }
  }
}

} // namespace segment
} // namespace jitops
