// jitops/repeat.cuh — torch.Tensor.repeat, forward and backward, on strided tensors.
//
// The host collapses dimensions first (a dimension that is not repeated merges into its outer
// neighbour when both tensors are contiguous across them), so the common cases reach here
// with one or two dimensions.
//
//   fwd  the output as rows × width (its innermost dimension). Threads run along a row, VEC
//        elements each (16-byte accesses when the innermost dimensions are contiguous), and a
//        row's input offset is computed once. Only bits are copied, so one kernel per element
//        size serves every dtype.
//   bwd  one thread per VEC elements of dx sums dy over every copy, in a fixed order (an
//        odometer over the repeat counts), in f32 for half types. When dx is too small to fill
//        the GPU, the copies are split in fixed ranges over blockIdx.y into partial sums
//        (MODE 1), which bwd_finish adds in order: deterministic either way.
#pragma once
#include "jitops/common.cuh"
#include "jitops/repeat_abi.h"

namespace jitops {
namespace repeat {

// BYTES bytes moved as one access: word-typed, since a byte array is copied byte by byte.
template <int BYTES> struct Bits;
template <> struct alignas(2) Bits<2> { unsigned short w; };
template <> struct alignas(4) Bits<4> { unsigned w; };
template <> struct alignas(8) Bits<8> { unsigned long long w; };
template <> struct alignas(16) Bits<16> { unsigned long long w0, w1; };

// Stores one access. A 16-byte struct assignment compiles to two 8-byte stores; the inline
// st.global.v2.u64 makes it one (half the store instructions of a copy-bound kernel).
template <class V> __device__ __forceinline__ void put(V *p, const V &v) {
  if constexpr (sizeof(V) == 16)
    asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.w0), "l"(v.w1) : "memory");
  else
    *p = v;
}

// Quotient and remainder, in 32 bits unless WIDE (64-bit division is a long subroutine that
// also costs registers; the host picks WIDE only for extents beyond 2^31).
template <bool WIDE> __device__ __forceinline__ i64 div_of(i64 a, i64 b) {
  return WIDE ? a / b : (i64)((unsigned)a / (unsigned)b);
}
template <bool WIDE> __device__ __forceinline__ i64 rem_of(i64 a, i64 b) {
  return WIDE ? a % b : (i64)((unsigned)a % (unsigned)b);
}

// The arguments (jitops/repeat_abi.h): fwd's geometry over NB outer dimensions, and bwd's
// over D dimensions of dx.
typedef ::jitops__repeat_fwd_args FwdGeom;
typedef ::jitops__repeat_bwd_args BwdGeom;

// UNROLL: column vectors per thread (fwd).
constexpr int THREADS = JITOPS__REPEAT_THREADS, UNROLL = JITOPS__REPEAT_UNROLL;

template <class U, int NB, int VEC, bool WIDE>
__global__ void __launch_bounds__(THREADS) fwd(const FwdGeom g) {
  static_assert(NB >= 0 && NB < JITOPS__REPEAT_MAX_RANK, "more dimensions than the arguments hold");
  typedef Bits<(int)sizeof(U) * VEC> V;
  const int tc = (int)g.tc, tr = THREADS / tc;
  const i64 cb = rem_of<WIDE>(blockIdx.x, g.col_blocks),
            rb = div_of<WIDE>(blockIdx.x, g.col_blocks);
  const int ty = threadIdx.x / tc, tx = threadIdx.x % tc;
  const i64 row = rb * tr + ty;
  if (row >= g.rows)
    return;
  i64 xo = 0, yo = 0, r = row;
#pragma unroll
  for (int d = NB - 1; d >= 0; --d) {
    const i64 o = rem_of<WIDE>(r, g.oshape[d]);
    r = div_of<WIDE>(r, g.oshape[d]);
    xo += rem_of<WIDE>(o, g.ishape[d]) * g.xs[d];
    yo += o * g.ys[d];
  }
  const U *__restrict__ x = (const U *)g.x + xo;
  U *__restrict__ y = (U *)g.y + yo;
  // A thread's columns are c0 + u·tc·VEC; their input columns step by in_step (mod in_w),
  // so one remainder serves all of them. When in_step is 0 (the row's copies line up with
  // the thread's stride) every column reads the same input vector: one load, UNROLL stores.
  const i64 c0 = (cb * UNROLL * tc + tx) * VEC, cstep = tc * VEC;
  const i64 ic0 = rem_of<WIDE>(c0, g.in_w);
  const U *__restrict__ xv = VEC == 1 ? x + ic0 * g.xs_w : x + ic0;
  U *yv = VEC == 1 ? y + c0 * g.ys_w : y + c0;
  const i64 ystep = VEC == 1 ? cstep * g.ys_w : cstep;
  if (g.in_step == 0) {
    if (c0 < g.width) {
      const V v = *(const V *)xv;
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        if (c0 + u * cstep < g.width)
          put((V *)(yv + u * ystep), v);
    }
    return;
  }
  V v[UNROLL];
  i64 ic = ic0;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    if (c0 + u * cstep < g.width)
      v[u] = *(const V *)(VEC == 1 ? x + ic * g.xs_w : x + ic);
    ic += g.in_step;
    if (ic >= g.in_w)
      ic -= g.in_w;
  }
#pragma unroll
  for (int u = 0; u < UNROLL; ++u)
    if (c0 + u * cstep < g.width)
      put((V *)(yv + u * ystep), v[u]);
}

// Offsets of element e (row-major over ishape) in dx and in dy's first copy.
template <int D, bool WIDE>
__device__ __forceinline__ void bwd_offsets(const BwdGeom &g, i64 e, i64 &dxo, i64 &dyo) {
  dxo = 0;
  dyo = 0;
#pragma unroll
  for (int d = D - 1; d >= 0; --d) {
    const i64 i = d > 0 ? rem_of<WIDE>(e, g.ishape[d]) : e;
    if (d > 0)
      e = div_of<WIDE>(e, g.ishape[d]);
    dxo += i * g.dxs[d];
    dyo += i * g.dys[d];
  }
}

// The next copy in odometer order (innermost dimension fastest). No early exit, so the loop
// unrolls and the geometry stays in parameter space instead of a local copy.
template <int D> __device__ __forceinline__ void next_copy(const BwdGeom &g, i64 (&r)[D], i64 &o) {
  bool carry = true;
#pragma unroll
  for (int d = D - 1; d >= 0; --d) {
    if (carry) {
      if (++r[d] < g.rep[d]) {
        o += g.rstep[d];
        carry = false;
      } else {
        r[d] = 0;
        o -= (g.rep[d] - 1) * g.rstep[d];
      }
    }
  }
}

template <class T, int VEC> struct Loaded { T v[VEC]; };

// Reads VEC consecutive elements (one access when VEC > 1); memcpy keeps them in registers.
template <class T, int VEC> __device__ __forceinline__ Loaded<T, VEC> read(const T *p) {
  Loaded<T, VEC> l;
  if constexpr (VEC == 1) {
    l.v[0] = *p;
  } else {
    const Bits<(int)sizeof(T) *VEC> b = *(const Bits<(int)sizeof(T) * VEC> *)p;
    memcpy(&l, &b, sizeof l);
  }
  return l;
}

template <class T, int D, int VEC, int MODE, bool WIDE>
__global__ void __launch_bounds__(THREADS) bwd(const BwdGeom g) {
  static_assert(D >= 1 && D <= JITOPS__REPEAT_MAX_RANK, "more dimensions than the arguments hold");
  typedef acc_t<T> A;
  typedef Bits<(int)sizeof(T) * VEC> V;
  const i64 v = (i64)blockIdx.x * THREADS + threadIdx.x;
  if (v >= g.n)
    return;
  i64 dxo, o;
  bwd_offsets<D, WIDE>(g, v * VEC, dxo, o);
  const i64 c0 = (i64)blockIdx.y * g.split_len;
  const i64 c1 = g.combos < c0 + g.split_len ? g.combos : c0 + g.split_len;
  i64 r[D];
  if (c0 < c1) {
    i64 c = c0;
#pragma unroll
    for (int d = D - 1; d >= 0; --d) {
      r[d] = rem_of<WIDE>(c, g.rep[d]);
      c = div_of<WIDE>(c, g.rep[d]);
      o += r[d] * g.rstep[d];
    }
  }
  const T *dy = (const T *)g.dy;
  A sum[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j)
    sum[j] = A(0);
  i64 k = c0;
  // Eight copies' loads in flight at once; they are still added in copy order.
  for (; k + 8 <= c1; k += 8) {
    Loaded<T, VEC> l[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      l[u] = read<T, VEC>(dy + o);
      next_copy(g, r, o);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u)
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        sum[j] += load(&l[u].v[j]);
  }
  for (; k < c1; ++k) {
    const Loaded<T, VEC> l = read<T, VEC>(dy + o);
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      sum[j] += load(&l.v[j]);
    if (k + 1 < c1)
      next_copy(g, r, o);
  }
  if constexpr (MODE == 1) {
    A *p = (A *)g.partial + ((i64)blockIdx.y * g.n + v) * VEC;
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      p[j] = sum[j];
  } else {
    T *dx = (T *)g.dx + dxo;
    if constexpr (VEC == 1) {
      store(dx, sum[0]);
    } else {
      Loaded<T, VEC> out;
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        out.v[j] = from_acc<T>(sum[j]);
      V b;
      memcpy(&b, &out, sizeof b);
      put((V *)dx, b);
    }
  }
}

// Adds the partial sums of every split (g.splits of them), in split order.
template <class T, int D, int VEC, bool WIDE>
__global__ void __launch_bounds__(THREADS) bwd_finish(const BwdGeom g) {
  static_assert(D >= 1 && D <= JITOPS__REPEAT_MAX_RANK, "more dimensions than the arguments hold");
  typedef acc_t<T> A;
  const i64 v = (i64)blockIdx.x * THREADS + threadIdx.x;
  if (v >= g.n)
    return;
  i64 dxo, dyo;
  bwd_offsets<D, WIDE>(g, v * VEC, dxo, dyo);
  A sum[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j)
    sum[j] = A(0);
  const A *p = (const A *)g.partial + v * VEC;
  for (i64 s = 0; s < g.splits; ++s)
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      sum[j] += p[s * g.n * VEC + j];
  T *dx = (T *)g.dx + dxo;
#pragma unroll
  for (int j = 0; j < VEC; ++j)
    store(dx + j, sum[j]); // VEC > 1 only when dx is unit-stride innermost
}

} // namespace repeat
} // namespace jitops
