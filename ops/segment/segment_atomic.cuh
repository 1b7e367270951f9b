// jitops/segment_atomic.cuh — unsorted max/min in one pass over the rows, with integer
// atomics on an order-preserving encoding of the values (deterministic: an integer max does
// not depend on the order of its updates).
//
// Encoding: a float's bits b map to b | sign (b >= 0) or ~b (b < 0), which orders all
// non-NaN values as unsigned integers, with -0 below +0. NaN inputs map to the all-ones code
// for max and to 0 for min, so a NaN wins; the other end of the range is the "no row yet"
// sentinel that segment_atomic_finalize turns into the fill value. 16-bit types go through
// float. The table is S x D codes (u32, or u64 for double); when it fits in shared memory
// each block reduces into its own copy first and merges it into the global table at the end,
// which removes the contention of few segments.
#pragma once
#include "jitops/segment_common.cuh"

namespace jitops {
namespace segment {

template <class A> struct ordered;

template <> struct ordered<float> {
  typedef unsigned type;
  static __device__ __forceinline__ type encode(float v) {
    const unsigned u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
  static __device__ __forceinline__ float decode(type k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
  }
};

template <> struct ordered<double> {
  typedef unsigned long long type;
  static __device__ __forceinline__ type encode(double v) {
    const unsigned long long u = (unsigned long long)__double_as_longlong(v);
    return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
  }
  static __device__ __forceinline__ double decode(type k) {
    return __longlong_as_double(
        (long long)((k & 0x8000000000000000ull) ? (k & 0x7fffffffffffffffull) : ~k));
  }
};

template <int OP, class K> __device__ __forceinline__ K empty_code() {
  return OP == MAX ? K(0) : ~K(0);
}

template <int OP, class A> __device__ __forceinline__ typename ordered<A>::type code_of(A v) {
  typedef typename ordered<A>::type K;
  if (is_nan(v))
    return OP == MAX ? ~K(0) : K(0);
  return ordered<A>::encode(v);
}

// The value a table cell holds: decoded, or `fill` where no row reached it.
template <int OP, class A>
__device__ __forceinline__ A value_or_fill(typename ordered<A>::type k, A fill) {
  typedef typename ordered<A>::type K;
  return k == empty_code<OP, K>() ? fill : ordered<A>::decode(k);
}

template <int OP, class K> __device__ __forceinline__ void atomic_extreme(K *p, K v) {
  if (OP == MAX)
    atomicMax(p, v);
  else
    atomicMin(p, v);
}

// G lanes per row, each VEC columns at a time; rows are strided over the grid, ROWS_IN_FLIGHT
// at a time so that the id and data loads of several rows overlap.
template <class T, class I, int OP, int VEC, int G, bool SHARED>
__global__ void __launch_bounds__(THREADS)
    segment_atomic_extreme(const jitops__segment_atomic_args a) {
  typedef acc_t<T> A;
  typedef typename ordered<A>::type K;
  constexpr int ROWS_IN_FLIGHT = JITOPS__SEGMENT_ATOMIC_ROWS_IN_FLIGHT;
  const T *__restrict__ data = (const T *)a.tensors.data;
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const i64 data_stride = a.tensors.data_stride, id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments, D = a.cols;
  K *__restrict__ table = (K *)a.table;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const i64 cells = (i64)S * D;
  K *target = table;
  if constexpr (SHARED) {
    K *local = reinterpret_cast<K *>(smem_raw);
    for (i64 e = threadIdx.x; e < cells; e += blockDim.x)
      local[e] = empty_code<OP, K>();
    __syncthreads();
    target = local;
  }
  const int nch = D / VEC;
  const int lane = threadIdx.x % G;
  const i64 groups = (i64)gridDim.x * (blockDim.x / G);
  const i64 group = (i64)blockIdx.x * (blockDim.x / G) + threadIdx.x / G;
  int dropped = 0;
  for (i64 row0 = group; row0 < N; row0 += groups * ROWS_IN_FLIGHT) {
    I id[ROWS_IN_FLIGHT];
#pragma unroll
    for (int u = 0; u < ROWS_IN_FLIGHT; ++u) {
      const i64 row = row0 + u * groups;
      id[u] = row < N ? ids[row * id_stride] : (I)-1;
      if (id[u] >= (I)S && lane == 0)
        ++dropped;
    }
    for (int ch = lane; ch < nch; ch += G) {
      A v[ROWS_IN_FLIGHT][VEC];
#pragma unroll
      for (int u = 0; u < ROWS_IN_FLIGHT; ++u)
        if (id[u] >= 0 && id[u] < (I)S)
          load_pack<T, VEC>(data + (row0 + u * groups) * data_stride + ch * VEC, v[u]);
#pragma unroll
      for (int u = 0; u < ROWS_IN_FLIGHT; ++u)
        if (id[u] >= 0 && id[u] < (I)S) {
          K *cell = target + (i64)id[u] * D + ch * VEC;
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            atomic_extreme<OP, K>(cell + e, code_of<OP, A>(v[u][e]));
        }
    }
  }
  if constexpr (SHARED) {
    __syncthreads();
    const K *local = reinterpret_cast<const K *>(smem_raw);
    for (i64 e = threadIdx.x; e < cells; e += blockDim.x) {
      const K k = local[e];
      if (k != empty_code<OP, K>())
        atomic_extreme<OP, K>(table + e, k);
    }
  }
  dropped = warp_sum(dropped);
  if ((threadIdx.x & 31) == 0)
    add_to_counter(a.counter.count64, a.counter.count32, dropped);
}

// out[s, :] = decoded table row, or `fill` where no row reached the cell (an empty segment).
template <class T, int OP, int VEC, int G>
__global__ void __launch_bounds__(THREADS)
    segment_atomic_finalize(const jitops__segment_atomic_args a) {
  typedef acc_t<T> A;
  typedef typename ordered<A>::type K;
  const K *__restrict__ table = (const K *)a.table;
  const int S = a.ids.segments, D = a.cols;
  T *__restrict__ out = (T *)a.tensors.out;
  const i64 out_stride = a.tensors.out_stride;
  const A fill = fill_value<A>(a.fill);
  const int nch = D / VEC;
  const int lane = threadIdx.x % G;
  const i64 groups = (i64)gridDim.x * (blockDim.x / G);
  for (i64 s = (i64)blockIdx.x * (blockDim.x / G) + threadIdx.x / G; s < S; s += groups) {
    for (int ch = lane; ch < nch; ch += G) {
      const pack<K, VEC> k = *reinterpret_cast<const pack<K, VEC> *>(table + s * D + ch * VEC);
      A v[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        v[e] = value_or_fill<OP, A>(k.v[e], fill);
      store_pack<T, VEC>(out + s * out_stride + ch * VEC, v);
    }
  }
}

} // namespace segment
} // namespace jitops
