// jitops/ctc_common.cuh — what every CTC kernel file uses: the ABI's names in the kernels'
// namespace, the few hardware primitives (replaceable on the CPU), and the log-space
// arithmetic of the recursion and the gradient.
#pragma once
#include "jitops/common.cuh"
#include "jitops/ctc_abi.h"

namespace jitops {
namespace ctc {

// ---- the host-kernel ABI (jitops/ctc_abi.h), as the kernels spell it ------------------------

typedef ::jitops__ctc_alpha_args alpha_args;
typedef ::jitops__ctc_grad_args grad_args;
typedef ::jitops__ctc_reduce_args reduce_args;

enum {
  MODE_LOSS = JITOPS__CTC_MODE_LOSS,
  MODE_VALUES = JITOPS__CTC_MODE_VALUES,
  MODE_AB = JITOPS__CTC_MODE_AB
};
enum {
  STORE_REG = JITOPS__CTC_STORE_REG,
  STORE_SHARED = JITOPS__CTC_STORE_SHARED,
  STORE_GLOBAL = JITOPS__CTC_STORE_GLOBAL
};
enum {
  OFFS_PADDED = JITOPS__CTC_OFFS_PADDED,
  OFFS_HOST = JITOPS__CTC_OFFS_HOST,
  OFFS_DEVICE = JITOPS__CTC_OFFS_DEVICE
};
// The gradient's bookkeeping: info and link entries, and link's encoding.
constexpr int INFO_INTS = JITOPS__CTC_INFO_INTS;
constexpr int LINK_INTS = JITOPS__CTC_LINK_INTS;
constexpr int LINK_FIRST_BIT = JITOPS__CTC_LINK_FIRST_BIT;
constexpr int LINK_END = JITOPS__CTC_LINK_END;

// ---- hardware primitives --------------------------------------------------------------------

// The few PTX instructions the kernels use beyond common.cuh's. tests/test_ctc_emulated.cpp
// runs these kernels on the CPU (threads and barriers standing in for the GPU's) and supplies
// its own definitions by defining JITOPS_HOST_EMULATION; NVRTC builds never define it.
#ifndef JITOPS_HOST_EMULATION
// max and min that propagate NaN (fmaxf would drop it and hide a NaN input): one instruction
// from sm_80 on.
#if __CUDA_ARCH__ >= 800
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float min_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
#else
__device__ __forceinline__ float max_nan(float a, float b) {
  return (a != a || b != b) ? a + b : fmaxf(a, b);
}
__device__ __forceinline__ float min_nan(float a, float b) {
  return (a != a || b != b) ? a + b : fminf(a, b);
}
#endif
__device__ __forceinline__ void prefetch_l2(const void *p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
// The block's dynamic shared memory.
__device__ __forceinline__ unsigned char *dynamic_smem() {
  extern __shared__ __align__(16) unsigned char ctc_dynamic_smem[];
  return ctc_dynamic_smem;
}

// A __shared__ array by its 32-bit shared-window address, held in a register. For sm_90, ptxas
// forms the address of a __shared__ array from SR_CgaCtaId, and where it has no register to
// spare it forms it again at each use: an S2R (tens of cycles) on every time step of the
// register tier, 35 of them in the alpha-only loss kernel, which made the forward 3-7% slower
// (bench/NOTES-jit.md). An address that comes out of a shuffle is a value ptxas cannot form
// again, so it stays in a register. Call it with the whole warp.
typedef unsigned smem_addr;
__device__ __forceinline__ smem_addr shared_address(const void *p) {
  return __shfl_sync(0xffffffffu, (unsigned)__cvta_generic_to_shared(p), 0);
}
__device__ __forceinline__ void load_shared(smem_addr at, float &v) {
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(at) : "memory");
}
__device__ __forceinline__ void load_shared(smem_addr at, double &v) {
  asm volatile("ld.shared.f64 %0, [%1];" : "=d"(v) : "r"(at) : "memory");
}
__device__ __forceinline__ void store_shared(smem_addr at, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(at), "f"(v) : "memory");
}
__device__ __forceinline__ void store_shared(smem_addr at, double v) {
  asm volatile("st.shared.f64 [%0], %1;" ::"r"(at), "d"(v) : "memory");
}
#endif

// ---- arithmetic -----------------------------------------------------------------------------

template <class T> __device__ __forceinline__ acc_t<T> cvt(T v) {
  return v;
}
template <> __device__ __forceinline__ float cvt<half>(half v) {
  return to_float(v);
}
template <> __device__ __forceinline__ float cvt<bfloat16>(bfloat16 v) {
  return to_float(v);
}

// The log space of the recursion, for the accumulation type A. f32 (f16 and bf16 accumulate
// in it) works in base-2 logs on the SFU: inputs are scaled by log2(e) on load and results by
// ln(2) on store. f64 works in natural logs with exp and log1p. max and min propagate NaN.
template <class A> struct logmath {
  static constexpr bool sfu = sizeof(A) == sizeof(float);
  static constexpr A to_log2 = sfu ? A(1.4426950408889634f) : A(1.0);
  static constexpr A to_ln = sfu ? A(0.6931471805599453f) : A(1.0);
  static __device__ __forceinline__ A ninf() {
    return -limits<A>::infinity();
  }
  static __device__ __forceinline__ A nan() {
    return limits<A>::quiet_nan();
  }
  static __device__ __forceinline__ A ex(A x) {
    if constexpr (sfu)
      return ex2_approx(x);
    else
      return exp(x);
  }
  // log(1 + x) in the policy's base, for x in [0, 2].
  static __device__ __forceinline__ A lg1p(A x) {
    if constexpr (sfu)
      return lg2_approx(1.0f + x);
    else
      return log1p(x);
  }
  static __device__ __forceinline__ A max(A a, A b) {
    if constexpr (sfu)
      return max_nan(a, b);
    else
      return (a != a || b != b) ? a + b : fmax(a, b);
  }
  static __device__ __forceinline__ A min(A a, A b) {
    if constexpr (sfu)
      return min_nan(a, b);
    else
      return (a != a || b != b) ? a + b : fmin(a, b);
  }
};

// log(e^a + e^b) in the policy's base; exact when both are -inf, NaN in -> NaN out.
template <class A> __device__ __forceinline__ A lae2(A a, A b) {
  typedef logmath<A> M;
  A hi = M::max(a, b);
  A lo = M::min(a, b);
  A r = hi + M::lg1p(M::ex(lo - hi));
  return hi == M::ninf() ? hi : r;
}

// log(e^a + e^b + e^c): one logarithm, two exponentials (the largest term is exactly 1).
template <class A> __device__ __forceinline__ A lae3(A a, A b, A c) {
  typedef logmath<A> M;
  A mab = M::max(a, b);
  A hi = M::max(mab, c);
  A l1 = M::min(a, b);
  A l2 = M::min(mab, c);
  A r = hi + M::lg1p(M::ex(l1 - hi) + M::ex(l2 - hi));
  return hi == M::ninf() ? hi : r;
}

// ---- frames (f32 accumulation) -------------------------------------------------------------

// Why: a log-space state's rounding error grows with its magnitude, and log alpha reaches
// about -T·log2(C) (2^14 at T = 5000, where an f32 ulp is 2e-3, accumulated over every step).
// Subtracting one offset per row is not enough: the states that carry the posterior sit up to
// ~1000 nats below the row's largest state. So each thread keeps its K states relative to an
// integer offset of its own, its frame (log2 units): before each step it moves the frame by the
// rounded value of its largest state, so the states stay within a few units of 0 (error
// ~1e-7 per step). Frames are integer-valued floats: their sums and differences are exact
// (below 2^24; beyond, neighbouring frames still differ exactly), and they need no int/float
// conversions, which share the SFU's quarter-rate pipe with the recursion's ex2/lg2 (int
// frames measured +16-33 % per step). Halo values cross frames by an exact difference. f64
// keeps one implicit frame, 0.
template <class A> struct frames_of { static constexpr bool on = logmath<A>::sfu; };

// A thread's frame for its next row, from its frame *c and the largest of its current states,
// `m` (a max that skips NaN). A thread with no finite state first takes its left neighbour's
// frame `left` into *c (its -inf and NaN states mean the same in any frame), so that the first
// finite value it receives crosses no frame difference.
__device__ __forceinline__ float frame_step(float *c, float m, float left) {
  if (!(m > -limits<float>::infinity())) {
    *c = left;
    return left;
  }
  if (!(m < limits<float>::infinity()))
    return *c;
  // Round to an integer with two adds (exact for |m| <= 2^22, hence the clamp).
  const float lim = 4194304.0f, magic = 12582912.0f; // 2^22, 1.5·2^23
  const float r = (fminf(fmaxf(m, -lim), lim) + magic) - magic;
  return *c + r;
}

// The largest of K states, skipping NaN (a NaN stays on its own paths, as without frames).
template <int K> __device__ __forceinline__ float max_of(const float *v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < K; ++k)
    m = fmaxf(m, v[k]);
  return m;
}

} // namespace ctc
} // namespace jitops
