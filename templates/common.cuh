// jitops/common.cuh — what every kernel template shares.
//
// Templates never include the CUDA toolkit's headers: NVRTC then needs no include path at
// run time, and a compile parses a few hundred lines instead of tens of thousands. This file
// carries the little that is needed instead: 16-bit float storage types with conversions,
// numeric limits, accumulation types and a -inf-safe logaddexp.
#pragma once

namespace jitops {

typedef long long i64;
typedef unsigned long long u64;

// A kernel the host launches with jitops__launch_after (a programmatic dependent launch, sm_90
// and newer) calls this before it touches memory: it returns once the previous kernel on the
// stream has finished and its writes are visible. Elsewhere it returns at once.
__device__ __forceinline__ void wait_for_previous_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Quick builds (runtime/kernel_batch.h) compile with JITOPS_QUICK_BUILD defined. Where a kernel
// has specialized copies of a general path that compute the same values in the same order (a
// whole tile without range checks beside the tile with them; unrolled copies of a loop's body
// beside a rolled one), a quick build compiles the general path alone, as in
// `if (!QUICK_BUILD && whole) specialized; else general;`. It runs slower until the full build
// lands, and its first compile does not pay for the copies. The GPU suites hold each quick
// build to its full build's bits.
// (An enumerator, not a constexpr variable: NVRTC gave the variable 8 bytes of constant memory
// in every kernel of a file that reads it.)
#ifdef JITOPS_QUICK_BUILD
enum { QUICK_BUILD = 1 };
#else
enum { QUICK_BUILD = 0 };
#endif

// The SFU's base-2 exponential and logarithm: one instruction each, relative error about
// 2^-22, subnormals flushed. tests/test_ctc_emulated.cpp runs kernels on the CPU with its own
// definitions and defines JITOPS_HOST_EMULATION; NVRTC builds never define it.
#ifndef JITOPS_HOST_EMULATION
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float lg2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif

// A product that feeds a sum, rounded once (fma_acc) or on its own (mul_rn). Without fast-math,
// contracting such a pair into an fma is the one freedom NVRTC has over the source's IEEE
// roundings, and its choice may change with the optimization level; a kernel whose every such
// pair is spelled out has the same bits at any level, which lets it be a quick build
// (runtime/kernel_batch.h; tests/test_quick_kernels_contract_nothing.c checks it).
__device__ __forceinline__ float fma_acc(float a, float b, float c) {
  return fmaf(a, b, c);
}
__device__ __forceinline__ double fma_acc(double a, double b, double c) {
  return fma(a, b, c);
}
#ifndef JITOPS_HOST_EMULATION
__device__ __forceinline__ float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}
// A sum of a math-library result (expf, logf): the library's code may end in a product, which
// the optimizer would otherwise be free to contract into the sum.
__device__ __forceinline__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}
#endif

// Storage-only 16-bit floats. Arithmetic happens in the accumulation type (float).
struct half {
  unsigned short bits;
};
struct bfloat16 {
  unsigned short bits;
};

__device__ __forceinline__ float to_float(half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
__device__ __forceinline__ float to_float(bfloat16 b) {
  return __int_as_float(((unsigned)b.bits) << 16);
}

__device__ __forceinline__ half make_half(float f) {
  half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
__device__ __forceinline__ bfloat16 make_bfloat16(float f) {
  bfloat16 b;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(f));
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    b.bits = (unsigned short)((u >> 16) | 0x40u); // quiet NaN
  } else {
    u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even
    b.bits = (unsigned short)(u >> 16);
  }
#endif
  return b;
}

// acc_t<T>: the type arithmetic on T happens in. Half types accumulate in float.
template <class T> struct accumulate { typedef T type; };
template <> struct accumulate<half> { typedef float type; };
template <> struct accumulate<bfloat16> { typedef float type; };
template <class T> using acc_t = typename accumulate<T>::type;

// load/store convert between a storage type and its accumulation type.
template <class T> __device__ __forceinline__ acc_t<T> load(const T *p) {
  return *p;
}
template <> __device__ __forceinline__ float load<half>(const half *p) {
  return to_float(*p);
}
template <> __device__ __forceinline__ float load<bfloat16>(const bfloat16 *p) {
  return to_float(*p);
}

template <class T> __device__ __forceinline__ T from_acc(acc_t<T> v) {
  return (T)v;
}
template <> __device__ __forceinline__ half from_acc<half>(float v) {
  return make_half(v);
}
template <> __device__ __forceinline__ bfloat16 from_acc<bfloat16>(float v) {
  return make_bfloat16(v);
}

template <class T> __device__ __forceinline__ void store(T *p, acc_t<T> v) {
  *p = from_acc<T>(v);
}

// Numeric limits of the storage type, expressed in its accumulation type.
template <class T> struct limits;
template <> struct limits<float> {
  static __device__ __forceinline__ float infinity() {
    return __int_as_float(0x7f800000);
  }
  static __device__ __forceinline__ float quiet_nan() {
    return __int_as_float(0x7fc00000);
  }
  static __device__ __forceinline__ float lowest() {
    return -3.40282347e+38f;
  }
  static __device__ __forceinline__ float max() {
    return 3.40282347e+38f;
  }
};
template <> struct limits<double> {
  static __device__ __forceinline__ double infinity() {
    return __longlong_as_double(0x7ff0000000000000ll);
  }
  static __device__ __forceinline__ double quiet_nan() {
    return __longlong_as_double(0x7ff8000000000000ll);
  }
  static __device__ __forceinline__ double lowest() {
    return -1.7976931348623157e+308;
  }
  static __device__ __forceinline__ double max() {
    return 1.7976931348623157e+308;
  }
};
template <> struct limits<half> {
  static __device__ __forceinline__ float infinity() {
    return limits<float>::infinity();
  }
  static __device__ __forceinline__ float quiet_nan() {
    return limits<float>::quiet_nan();
  }
  static __device__ __forceinline__ float lowest() {
    return -65504.0f;
  }
  static __device__ __forceinline__ float max() {
    return 65504.0f;
  }
};
template <> struct limits<bfloat16> {
  static __device__ __forceinline__ float infinity() {
    return limits<float>::infinity();
  }
  static __device__ __forceinline__ float quiet_nan() {
    return limits<float>::quiet_nan();
  }
  static __device__ __forceinline__ float lowest() {
    return -3.38953139e+38f;
  }
  static __device__ __forceinline__ float max() {
    return 3.38953139e+38f;
  }
};
template <> struct limits<int> {
  static __device__ __forceinline__ int lowest() {
    return -2147483647 - 1;
  }
  static __device__ __forceinline__ int max() {
    return 2147483647;
  }
};
template <> struct limits<long long> {
  static __device__ __forceinline__ long long lowest() {
    return -9223372036854775807ll - 1;
  }
  static __device__ __forceinline__ long long max() {
    return 9223372036854775807ll;
  }
};

__device__ __forceinline__ bool is_nan(float x) {
  return x != x;
}
__device__ __forceinline__ bool is_nan(double x) {
  return x != x;
}
template <class I> __device__ __forceinline__ bool is_nan(I) {
  return false;
}

// log(exp(a) + exp(b)), exact when either or both are -inf (no -inf - -inf = NaN).
__device__ __forceinline__ float logaddexp(float a, float b) {
  float m = fmaxf(a, b);
  if (m == -limits<float>::infinity())
    return m;
  return m + log1pf(expf(-fabsf(a - b)));
}
__device__ __forceinline__ double logaddexp(double a, double b) {
  double m = fmax(a, b);
  if (m == -limits<double>::infinity())
    return m;
  return m + log1p(exp(-fabs(a - b)));
}

} // namespace jitops
