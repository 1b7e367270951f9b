// jitops/segment_common.cuh — what the segment reduction kernels share: the algebra of the
// four reductions (identity, combine, finish), the mapping of raw ids to sort keys, packed
// loads and stores, the dropped-id counter, and the kernels' arguments (segment_abi.h).
//
// Determinism: every kernel of the family either reduces in an order fixed by the row order
// (sum, mean and the sort path of max/min) or uses integer atomics, whose result does not
// depend on their order (counts, and max/min through an order-preserving integer encoding).
#pragma once
#include "jitops/common.cuh"
#include "jitops/segment_abi.h"

namespace jitops {
namespace segment {

enum { SUM = 0, MEAN = 1, MAX = 2, MIN = 3 };

// Threads a block of the kernels without a shape of their own.
constexpr int THREADS = JITOPS__SEGMENT_THREADS;

template <int OP, class A> __device__ __forceinline__ A identity() {
  if (OP == MAX)
    return -limits<A>::infinity();
  if (OP == MIN)
    return limits<A>::infinity();
  return A(0);
}

// A lane's accumulators (CPL packs of VEC columns), every one back to the identity.
template <int OP, class A, int CPL, int VEC>
__device__ __forceinline__ void reset_to_identity(A (&acc)[CPL][VEC]) {
#pragma unroll
  for (int k = 0; k < CPL; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      acc[k][e] = identity<OP, A>();
}

// max/min propagate NaN: once the running value is NaN it stays; a NaN input replaces it.
template <int OP, class A> __device__ __forceinline__ A combine(A acc, A v) {
  if (OP == MAX)
    return (v > acc || (is_nan(v) && !is_nan(acc))) ? v : acc;
  if (OP == MIN)
    return (v < acc || (is_nan(v) && !is_nan(acc))) ? v : acc;
  return acc + v;
}

// A lane's accumulators combined with one row's values, access by access (CPL accesses of VEC
// columns, from column c0 with G lanes a row), skipping accesses past the row's D columns.
template <int OP, class A, int CPL, int VEC, int G>
__device__ __forceinline__ void combine_accesses(A (&acc)[CPL][VEC], const A (&v)[CPL][VEC], int c0,
                                                 int lane, int D) {
#pragma unroll
  for (int k = 0; k < CPL; ++k)
    if (c0 + (k * G + lane) * VEC < D)
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        acc[k][e] = combine<OP, A>(acc[k][e], v[k][e]);
}

// The segment's result from its accumulated value and its row count (mean divides).
template <int OP, class A> __device__ __forceinline__ A finish(A acc, int count) {
  if (OP == MEAN)
    return acc / (A)count;
  return acc;
}

// Keys of a non-decreasing id sequence: negative ids become -1 and ids >= S become S, which
// keeps the sequence non-decreasing, so that segment s occupies [lower_bound(s), lower_bound(s+1)).
template <class I> __device__ __forceinline__ int clamp_id(I id, int S) {
  return id < 0 ? -1 : (id >= (I)S ? S : (int)id);
}

// Keys of the first radix pass over unsorted ids: valid ids keep their value, negative ids
// become S and ids >= S become S + 1, so both sort after every segment and stay countable.
template <class I> __device__ __forceinline__ int radix_key(I id, int S) {
  return id < 0 ? S : (id >= (I)S ? S + 1 : (int)id);
}

// VEC consecutive elements, loaded or stored as one access (the host checks the alignment).
template <class T, int VEC> struct alignas(sizeof(T) * VEC) pack { T v[VEC]; };

template <class T, int VEC>
__device__ __forceinline__ void load_pack(const T *p, acc_t<T> (&out)[VEC]) {
  const pack<T, VEC> r = *reinterpret_cast<const pack<T, VEC> *>(p);
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    out[e] = load(&r.v[e]);
}

template <class T, int VEC>
__device__ __forceinline__ void store_pack(T *p, const acc_t<T> (&in)[VEC]) {
  pack<T, VEC> r;
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    r.v[e] = from_acc<T>(in[e]);
  *reinterpret_cast<pack<T, VEC> *>(p) = r;
}

// A segment's result from a lane's VEC accumulators over `count` rows, stored as one pack.
template <int OP, class T, int VEC>
__device__ __forceinline__ void store_result(T *p, const acc_t<T> (&acc)[VEC], int count) {
  acc_t<T> r[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    r[e] = finish<OP, acc_t<T>>(acc[e], count);
  store_pack<T, VEC>(p, r);
}

// A pack as the words the streaming accesses below move (16-bit packs as one halfword).
template <class T, int VEC> union stream_words {
  static constexpr int BYTES = (int)sizeof(T) * VEC;
  pack<T, VEC> t;
  unsigned u[BYTES >= 4 ? BYTES / 4 : 1];
  unsigned short h;
};

// The same, for data touched exactly once (the rows of data and grad_data in the backward):
// evict-first ("streaming") accesses, which leave L2 to what is reused — the segments' rows.
template <class T, int VEC>
__device__ __forceinline__ void load_pack_stream(const T *p, acc_t<T> (&out)[VEC]) {
  constexpr int BYTES = stream_words<T, VEC>::BYTES;
  stream_words<T, VEC> r;
  if constexpr (BYTES == 16)
    asm("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.u[0]), "=r"(r.u[1]), "=r"(r.u[2]), "=r"(r.u[3])
        : "l"(p));
  else if constexpr (BYTES == 8)
    asm("ld.global.cs.v2.u32 {%0, %1}, [%2];" : "=r"(r.u[0]), "=r"(r.u[1]) : "l"(p));
  else if constexpr (BYTES == 4)
    asm("ld.global.cs.u32 %0, [%1];" : "=r"(r.u[0]) : "l"(p));
  else
    asm("ld.global.cs.u16 %0, [%1];" : "=h"(r.h) : "l"(p));
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    out[e] = load(&r.t.v[e]);
}

// One element read evict-first, in its accumulation type (an integer id as itself).
template <class T> __device__ __forceinline__ acc_t<T> load_stream(const T *p) {
  acc_t<T> v[1];
  load_pack_stream<T, 1>(p, v);
  return v[0];
}

template <class T, int VEC>
__device__ __forceinline__ void store_pack_stream(T *p, const acc_t<T> (&in)[VEC]) {
  constexpr int BYTES = stream_words<T, VEC>::BYTES;
  stream_words<T, VEC> r;
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    r.t.v[e] = from_acc<T>(in[e]);
  if constexpr (BYTES == 16)
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(r.u[0]), "r"(r.u[1]),
                 "r"(r.u[2]), "r"(r.u[3])
                 : "memory");
  else if constexpr (BYTES == 8)
    asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(r.u[0]), "r"(r.u[1])
                 : "memory");
  else if constexpr (BYTES == 4)
    asm volatile("st.global.cs.u32 [%0], %1;" ::"l"(p), "r"(r.u[0]) : "memory");
  else
    asm volatile("st.global.cs.u16 [%0], %1;" ::"l"(p), "h"(r.h) : "memory");
}

// What empty segments get, in the accumulation type A (float or double).
template <class A> __device__ __forceinline__ A fill_value(const jitops__segment_fill &fill) {
  if constexpr (sizeof(A) == 8)
    return fill.f64;
  else
    return fill.f32;
}

// Adds n to the caller's dropped-id counter: int64 (c64) or int32 (c32), or neither.
__device__ __forceinline__ void add_to_counter(unsigned long long *c64, unsigned *c32, int n) {
  if (n == 0)
    return;
  if (c64 != nullptr)
    atomicAdd(c64, (unsigned long long)n);
  else if (c32 != nullptr)
    atomicAdd(c32, (unsigned)n);
}

// g / count for a count >= 1, without the IEEE division's slow-path subroutine: a call in a
// kernel ties its loop's registers to the call ABI (the max/min backward's mark pass spilled its
// rows in flight for it). A reciprocal estimate, Newton steps, then one residual correction:
// within an ulp of g / count (exact but for rare last-bit cases), and deterministic.
template <class A> __device__ __forceinline__ A divide_by_count(A g, int count) {
  const A c = (A)count;
  A r = (A)__fdividef(1.0f, (float)count);
  if constexpr (sizeof(A) == 8) {
    r = fma(fma(-c, r, 1.0), r, r);
    r = fma(fma(-c, r, 1.0), r, r);
    const A q = g * r;
    return fma(fma(-q, c, g), r, q);
  } else {
    r = fmaf(fmaf(-c, r, 1.0f), r, r);
    const A q = g * r;
    return fmaf(fmaf(-q, c, g), r, q);
  }
}

// The shuffle mask of the calling lane's group of G consecutive lanes (G divides 32).
template <int G> __device__ __forceinline__ unsigned group_mask() {
  if constexpr (G >= 32)
    return 0xffffffffu;
  else
    return ((1u << G) - 1u) << ((threadIdx.x & 31) / G * G);
}

// The radix sort's digits (segment_sort.cuh): at most 8 bits a pass.
constexpr int SORT_RADIX_BITS = JITOPS__SEGMENT_SORT_RADIX_BITS;
constexpr int SORT_RADIX_MAX = JITOPS__SEGMENT_SORT_RADIX_MAX;

// Whether a kernel behind the digit path's fallback runs: always without a flag (every other
// path), else only when the digit path's scatter raised it (segment_digit.cuh). Read after
// wait_for_previous_grid, when the flag is final; the same for every thread.
__device__ __forceinline__ bool fallback_runs(const int *fallback) {
  return fallback == nullptr || *fallback != 0;
}

__device__ __forceinline__ int warp_sum(int v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

} // namespace segment
} // namespace jitops
