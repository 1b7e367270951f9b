// jitops/flce.cuh — the kernels of fused linear cross-entropy (ops/flce/passes.c drives them).
//
// The GEMMs run in cuBLASLt; these kernels do everything between and after them:
//   count_valid   the number of non-ignored rows, kept on the device for the mean;
//   rows          per row of a logits buffer: the log-sum-exp and the loss (pass 1), and the
//                 gradient with respect to the logits, written over the logits in place;
//   colsum        grad_bias: column sums of a gradient buffer, in a fixed order;
//   convert       f32 accumulators to the caller's dtype and strides (zero: empty batches);
//   reduce_loss   the mean or sum of the per-row losses, divided by the device count;
//   scale         the backward: saved gradients times a scalar dy read on the device
//                 (convert_flat, scale_flat: the contiguous cases, vectorized).
// Every reduction runs in a fixed order (no floating-point atomics): reruns are bit-identical.
// Each kernel takes one argument struct of jitops/flce_abi.h, by value.
#pragma once
#include "jitops/common.cuh"
#include "jitops/flce_abi.h"

namespace jitops {
namespace flce {

__device__ __forceinline__ float fexp(float x) {
  return expf(x);
}
__device__ __forceinline__ double fexp(double x) {
  return ::exp(x);
}
__device__ __forceinline__ float flog(float x) {
  return logf(x);
}
__device__ __forceinline__ double flog(double x) {
  return ::log(x);
}
__device__ __forceinline__ float ftanh(float x) {
  return tanhf(x);
}
__device__ __forceinline__ double ftanh(double x) {
  return ::tanh(x);
}

template <class T, int N> struct alignas(JITOPS__FLCE_VECTOR_BYTES) Pack { T v[N]; };

// Merges the online-softmax state (m2, s2) into (m, s): s is the sum of exp(z - m).
template <class A> __device__ __forceinline__ void merge(A &m, A &s, A m2, A s2) {
  A mx = m > m2 ? m : m2;
  if (mx == -limits<A>::infinity())
    return;
  s = fma_acc(s, fexp(m - mx), mul_rn(s2, fexp(m2 - mx)));
  m = mx;
}

// Block-wide reduction of (max, sum-exp, sum) in a fixed order; every thread gets the result.
template <class A, int BLOCK>
__device__ __forceinline__ void block_reduce_stats(A &m, A &s, A &zsum) {
  __shared__ A sm[BLOCK / 32], ss[BLOCK / 32], sz[BLOCK / 32];
  for (int off = 16; off > 0; off >>= 1) {
    A m2 = __shfl_xor_sync(0xffffffffu, m, off);
    A s2 = __shfl_xor_sync(0xffffffffu, s, off);
    zsum += __shfl_xor_sync(0xffffffffu, zsum, off);
    merge(m, s, m2, s2);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
    sz[warp] = zsum;
  }
  __syncthreads();
  m = -limits<A>::infinity();
  s = 0;
  zsum = 0;
  for (int w = 0; w < BLOCK / 32; ++w) {
    merge(m, s, sm[w], ss[w]);
    zsum += sz[w];
  }
  __syncthreads(); // the caller may reuse the shared arrays through another reduction
}

// The logit the loss sees: bias added in the accumulation type, then the optional softcap.
template <class T, bool BIAS, bool SOFTCAP>
__device__ __forceinline__ acc_t<T> logit(acc_t<T> raw, const T *bias, long long bias_stride,
                                          long long v, acc_t<T> cap, acc_t<T> inv_cap) {
  if (BIAS)
    raw += load(bias + v * bias_stride);
  if (SOFTCAP)
    raw = mul_rn(cap, ftanh(mul_rn(raw, inv_cap)));
  return raw;
}

// p_j (1 + 2 zl lse) - eps / V, with p_j = e, pfac = 1 + 2 zl lse and eps_v = eps / V; the
// terms that are 1 and 0 without a z-loss or smoothing are left out, not multiplied in. (e is
// expf's, whose code ends in a product: hence add_rn.)
template <bool ZLOSS, bool SMOOTH, class A>
__device__ __forceinline__ A gradient_term(A e, A pfac, A eps_v) {
  if (ZLOSS)
    return fma_acc(e, pfac, -eps_v);
  return SMOOTH ? add_rn(e, -eps_v) : e;
}

// The softcap's derivative at the capped logit z, over cap: 1 - (z / cap)^2.
template <class A> __device__ __forceinline__ A softcap_slope(A z, A inv_cap) {
  const A q = mul_rn(z, inv_cap);
  return fma_acc(-q, q, (A)1);
}

// The target's logit as a vocabulary shard's statistics see it: read from the shard's buffer
// when target y is one of its columns, 0 when y is another shard's, NaN when y is no column of
// the vocabulary (the loss's NaN, as unsharded).
template <class T, bool BIAS, bool SOFTCAP>
__device__ __forceinline__ acc_t<T> shard_target_logit(const jitops__flce_rows_args &a,
                                                       const T *row, const T *bias, long long y,
                                                       acc_t<T> cap, acc_t<T> inv_cap) {
  if (y < 0 || y >= a.vocab)
    return limits<acc_t<T>>::quiet_nan();
  const long long yl = y - a.vocab0 - a.col0; // no overflow: every term is in [0, vocab]
  if (yl < 0 || yl >= a.ncols)
    return 0;
  return logit<T, BIAS, SOFTCAP>(load(row + yl), bias, a.bias_stride, yl, cap, inv_cap);
}

template <class T, int BLOCK> __device__ __forceinline__ void zero_row(T *row, long long ncols) {
  constexpr int VEC = JITOPS__FLCE_VECTOR_BYTES / sizeof(T);
  Pack<T, VEC> zero;
#pragma unroll
  for (int k = 0; k < VEC; ++k)
    zero.v[k] = from_acc<T>((acc_t<T>)0);
  const long long nvec = ncols / VEC;
  for (long long i = threadIdx.x; i < nvec; i += BLOCK)
    reinterpret_cast<Pack<T, VEC> *>(row)[i] = zero;
  for (long long j = nvec * VEC + threadIdx.x; j < ncols; j += BLOCK)
    row[j] = zero.v[0];
}

// One block per buffer row. MODE (JITOPS__FLCE_MODE_*): STATS computes the row's log-sum-exp
// and loss; FULL also overwrites the row with d(loss)/d(logits) times the row's scale; SLICE
// writes the gradient of a vocabulary slice from the log-sum-exp saved by an earlier pass (or
// the whole vocabulary's, given to a shard); SHARD_STATS computes a vocabulary shard's
// log-sum-exp and linear part (flce_abi.h), which the caller combines across shards.
// The gradient, with p = softmax(z), eps = label smoothing, zl = z-loss scale:
//   g_j = p_j (1 + 2 zl lse) - eps / V - (1 - eps) [j == y],  times 1 - (z_j / cap)^2 with a
//   softcap, times dy / count (mean) or dy; it is rounded to T once, after all the terms.
template <class T, class DY, int BLOCK, int MODE, bool BIAS, bool SOFTCAP, bool SMOOTH, bool ZLOSS,
          bool MEAN>
__global__ void __launch_bounds__(BLOCK) rows(jitops__flce_rows_args a) {
  typedef acc_t<T> A;
  constexpr int VEC = JITOPS__FLCE_VECTOR_BYTES / sizeof(T);
  static_assert(JITOPS__FLCE_LOGITS_LD_MULTIPLE % VEC == 0,
                "every row of a logits buffer must start on a vector access");
  typedef Pack<T, VEC> P;
  const long long t = a.row0 + blockIdx.x;
  T *row = static_cast<T *>(a.logits) + (long long)blockIdx.x * a.ld;
  const T *bias = static_cast<const T *>(a.bias) + (BIAS ? a.col0 * a.bias_stride : 0);
  A *lse_rows = static_cast<A *>(a.lse_rows);
  A *loss_rows = static_cast<A *>(a.loss_rows);
  const long long y = a.target[t * a.target_stride];
  const long long nvec = a.ncols / VEC;

  constexpr bool SHARD = MODE == JITOPS__FLCE_MODE_SHARD_STATS;
  constexpr bool GRADS = MODE == JITOPS__FLCE_MODE_FULL || MODE == JITOPS__FLCE_MODE_SLICE;

  if (y == a.ignore_index) { // no loss, no gradient, not counted
    if (GRADS)
      zero_row<T, BLOCK>(row, a.ncols);
    if (MODE != JITOPS__FLCE_MODE_SLICE && threadIdx.x == 0) {
      lse_rows[t] = 0;
      loss_rows[t] = 0;
    }
    return;
  }
  const A cap = SOFTCAP ? (A)a.softcap : (A)1, inv_cap = SOFTCAP ? (A)1 / cap : (A)1;
  const A eps = SMOOTH ? (A)a.label_smoothing : (A)0;
  const A eps_v = SMOOTH ? eps / (A)a.vocab : (A)0;
  A lse;
  if (MODE != JITOPS__FLCE_MODE_SLICE) {
    // The target's logit is read before any thread can overwrite the row.
    A zy = 0;
    if (threadIdx.x == 0 && SHARD)
      zy = shard_target_logit<T, BIAS, SOFTCAP>(a, row, bias, y, cap, inv_cap);
    else if (threadIdx.x == 0)
      zy = (y >= 0 && y < a.vocab)
               ? logit<T, BIAS, SOFTCAP>(load(row + y), bias, a.bias_stride, y, cap, inv_cap)
               : limits<A>::quiet_nan();
    A m = -limits<A>::infinity(), s = 0, zsum = 0;
    for (long long i = threadIdx.x; i < nvec; i += BLOCK) {
      const P p = reinterpret_cast<const P *>(row)[i];
      A z[VEC], vm = -limits<A>::infinity();
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        z[k] =
            logit<T, BIAS, SOFTCAP>(load(&p.v[k]), bias, a.bias_stride, i * VEC + k, cap, inv_cap);
        vm = vm > z[k] ? vm : z[k];
        if (SMOOTH)
          zsum += z[k];
      }
      if (vm > m) {
        s = mul_rn(s, fexp(m - vm));
        m = vm;
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k)
        s = add_rn(s, fexp(z[k] - m));
    }
    for (long long j = nvec * VEC + threadIdx.x; j < a.ncols; j += BLOCK) {
      const A z = logit<T, BIAS, SOFTCAP>(load(row + j), bias, a.bias_stride, j, cap, inv_cap);
      merge(m, s, z, (A)1);
      if (SMOOTH)
        zsum += z;
    }
    block_reduce_stats<A, BLOCK>(m, s, zsum);
    lse = add_rn(m, flog(s));
    if (SHARD && threadIdx.x == 0) {
      const A linear = SMOOTH ? fma_acc((A)1 - eps, zy, mul_rn(eps_v, zsum)) : zy;
      lse_rows[t] = lse;
      loss_rows[t] = linear;
    } else if (threadIdx.x == 0) {
      A loss = SMOOTH ? fma_acc(eps - (A)1, zy, lse) : lse - zy;
      if (SMOOTH)
        loss = fma_acc(-eps_v, zsum, loss);
      if (ZLOSS)
        loss = fma_acc(mul_rn((A)a.z_loss_scale, lse), lse, loss);
      lse_rows[t] = lse;
      loss_rows[t] = loss;
    }
    if (!GRADS)
      return;
  } else {
    lse = lse_rows[t];
  }

  A scale = 1;
  if (a.dy != nullptr)
    scale = load(static_cast<const DY *>(a.dy) + t * a.dy_stride);
  if (MEAN)
    scale /= (A)*a.count; // count >= 1: this row is not ignored
  const A pfac = ZLOSS ? fma_acc((A)2 * (A)a.z_loss_scale, lse, (A)1) : (A)1;
  // The target's column in this buffer, if it is here (a wrapped difference is no column).
  const long long yl = (long long)((unsigned long long)y - (unsigned long long)(a.vocab0 + a.col0));
  const A hit = (A)1 - eps;
  for (long long i = threadIdx.x; i < nvec; i += BLOCK) {
    P p = reinterpret_cast<const P *>(row)[i];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const long long j = i * VEC + k;
      const A z = logit<T, BIAS, SOFTCAP>(load(&p.v[k]), bias, a.bias_stride, j, cap, inv_cap);
      A g = gradient_term<ZLOSS, SMOOTH>(fexp(z - lse), pfac, eps_v);
      if (j == yl)
        g = add_rn(g, -hit);
      if (SOFTCAP)
        g *= softcap_slope(z, inv_cap);
      p.v[k] = from_acc<T>(g * scale);
    }
    reinterpret_cast<P *>(row)[i] = p;
  }
  for (long long j = nvec * VEC + threadIdx.x; j < a.ncols; j += BLOCK) {
    const A z = logit<T, BIAS, SOFTCAP>(load(row + j), bias, a.bias_stride, j, cap, inv_cap);
    A g = gradient_term<ZLOSS, SMOOTH>(fexp(z - lse), pfac, eps_v);
    if (j == yl)
      g = add_rn(g, -hit);
    if (SOFTCAP)
      g *= softcap_slope(z, inv_cap);
    store(row + j, g * scale);
  }
}

// The sum of every thread's v over a block of THREADS threads, in a fixed order (butterfly
// within each warp, then the warps in order), so that a floating-point sum is the same on
// every run. The result is thread 0's; other threads get 0.
template <int THREADS, class S> __device__ __forceinline__ S block_sum(S v) {
  constexpr int WARPS = THREADS / 32;
  __shared__ S partial[WARPS];
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0)
    partial[threadIdx.x / 32] = v;
  __syncthreads();
  S total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < WARPS; ++w)
      total += partial[w];
  return total;
}

// The number of rows whose target is not ignore_index. One block of REDUCE_THREADS threads;
// integer sums are exact in any order.
__global__ void __launch_bounds__(JITOPS__FLCE_REDUCE_THREADS)
    count_valid(jitops__flce_count_args a) {
  constexpr int THREADS = JITOPS__FLCE_REDUCE_THREADS;
  long long c = 0;
  for (long long i = threadIdx.x; i < a.n; i += THREADS)
    c += a.target[i * a.target_stride] != a.ignore_index;
  const long long total = block_sum<THREADS>(c);
  if (threadIdx.x == 0)
    *a.count = total;
}

// acc[j] (+)= sum over rows of g[r, j], rows in order: one thread per column.
template <class T, class A>
__global__ void __launch_bounds__(JITOPS__FLCE_FLAT_THREADS) colsum(jitops__flce_colsum_args a) {
  const long long j = (long long)blockIdx.x * JITOPS__FLCE_FLAT_THREADS + threadIdx.x;
  if (j >= a.ncols)
    return;
  A *acc = static_cast<A *>(a.acc);
  A s = a.accumulate ? acc[j] : (A)0;
  const T *p = static_cast<const T *>(a.g) + j;
#pragma unroll 8
  for (long long r = 0; r < a.nrows; ++r)
    s += load(p + r * a.ld);
  acc[j] = s;
}

// dst[r * dst_ld + c] = src[r * src_ld + c]. Threads (x, y) cover (columns, rows), so a
// column vector (ncols 1, dst_ld its stride) uses the whole block.
template <class S, class D> __global__ void convert(jitops__flce_convert_args a) {
  const S *src = static_cast<const S *>(a.src);
  D *dst = static_cast<D *>(a.dst);
  for (long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y; r < a.nrows;
       r += (long long)gridDim.x * blockDim.y)
    for (long long c = threadIdx.x; c < a.ncols; c += blockDim.x)
      store(dst + r * a.dst_ld + c, (acc_t<D>)load(src + r * a.src_ld + c));
}

// N elements of T with the alignment of their size (8 or 16 bytes, or 32 for 4 doubles).
template <class T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };

// dst[i] = src[i] for i < n, both contiguous, CONVERT_FLAT_VEC elements per access: src
// aligned to CONVERT_FLAT_VEC * sizeof(S) and dst to CONVERT_FLAT_VEC * sizeof(D) (the host
// checks). Converts the f32 grad_weight accumulator at full bandwidth.
template <class S, class D>
__global__ void __launch_bounds__(JITOPS__FLCE_FLAT_THREADS)
    convert_flat(jitops__flce_convert_flat_args a) {
  constexpr int THREADS = JITOPS__FLCE_FLAT_THREADS, N = JITOPS__FLCE_CONVERT_FLAT_VEC;
  const S *src = static_cast<const S *>(a.src);
  D *dst = static_cast<D *>(a.dst);
  const long long stride = (long long)gridDim.x * THREADS, nvec = a.n / N;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < nvec; i += stride) {
    const Vec<S, N> in = reinterpret_cast<const Vec<S, N> *>(src)[i];
    Vec<D, N> out;
#pragma unroll
    for (int k = 0; k < N; ++k)
      out.v[k] = from_acc<D>((acc_t<D>)load(&in.v[k]));
    reinterpret_cast<Vec<D, N> *>(dst)[i] = out;
  }
  for (long long j = nvec * N + (long long)blockIdx.x * THREADS + threadIdx.x; j < a.n; j += stride)
    store(dst + j, (acc_t<D>)load(src + j));
}

// x[i] *= dy[0] for i < n, contiguous and VECTOR_BYTES-aligned: the backward over a
// contiguous saved gradient, VECTOR_BYTES per access.
template <class T, class DY>
__global__ void __launch_bounds__(JITOPS__FLCE_FLAT_THREADS)
    scale_flat(jitops__flce_scale_flat_args a) {
  constexpr int THREADS = JITOPS__FLCE_FLAT_THREADS, VEC = JITOPS__FLCE_VECTOR_BYTES / sizeof(T);
  T *x = static_cast<T *>(a.x);
  const acc_t<T> f = (acc_t<T>)load(static_cast<const DY *>(a.dy));
  const long long stride = (long long)gridDim.x * THREADS, nvec = a.n / VEC;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < nvec; i += stride) {
    Pack<T, VEC> p = reinterpret_cast<Pack<T, VEC> *>(x)[i];
#pragma unroll
    for (int k = 0; k < VEC; ++k)
      p.v[k] = from_acc<T>(load(&p.v[k]) * f);
    reinterpret_cast<Pack<T, VEC> *>(x)[i] = p;
  }
  for (long long j = nvec * VEC + (long long)blockIdx.x * THREADS + threadIdx.x; j < a.n;
       j += stride)
    store(x + j, load(x + j) * f);
}

// x[r * ld + c] = 0: grad_weight and grad_bias of an empty batch (a.dy is not read).
template <class T> __global__ void zero(jitops__flce_scale_args a) {
  T *x = static_cast<T *>(a.x);
  for (long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y; r < a.nrows;
       r += (long long)gridDim.x * blockDim.y)
    for (long long c = threadIdx.x; c < a.ncols; c += blockDim.x)
      store(x + r * a.ld + c, (acc_t<T>)0);
}

// x[r * ld + c] *= dy[0], in place: the backward of a scalar loss, over saved gradients.
template <class T, class DY> __global__ void scale(jitops__flce_scale_args a) {
  T *x = static_cast<T *>(a.x);
  const acc_t<T> f = (acc_t<T>)load(static_cast<const DY *>(a.dy));
  for (long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y; r < a.nrows;
       r += (long long)gridDim.x * blockDim.y)
    for (long long c = threadIdx.x; c < a.ncols; c += blockDim.x)
      store(x + r * a.ld + c, load(x + r * a.ld + c) * f);
}

// out = sum of the per-row losses (divided by the device count for the mean: 0 / 0 is NaN,
// as PyTorch gives when every row is ignored). One block of REDUCE_THREADS threads, double
// sums in a fixed order.
template <class A, class L>
__global__ void __launch_bounds__(JITOPS__FLCE_REDUCE_THREADS)
    reduce_loss(jitops__flce_reduce_args a) {
  constexpr int THREADS = JITOPS__FLCE_REDUCE_THREADS;
  const A *loss_rows = static_cast<const A *>(a.loss_rows);
  double s = 0;
  for (long long i = threadIdx.x; i < a.n; i += THREADS)
    s += (double)loss_rows[i];
  double total = block_sum<THREADS>(s);
  if (threadIdx.x == 0) {
    if (a.mean)
      total /= (double)*a.count;
    store(static_cast<L *>(a.out), (acc_t<L>)total);
  }
}

} // namespace flce
} // namespace jitops
