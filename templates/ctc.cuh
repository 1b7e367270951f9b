// jitops/ctc.cuh — CTC loss: the alpha recursion (forward), the fused alpha+beta pass and the
// gradient, for log_probs [T, N, C] with any strides.
//
// Notation. For a sample with target length tl, the blank-extended label sequence l' has
// L = 2*tl + 1 states: even states are blanks, odd state s carries target[(s - 1) / 2]. The
// recursion runs in log space with true -inf for unreachable states (no sentinels):
//   alpha_t(s) = lp[t, l'_s] + logaddexp(alpha_{t-1}(s), alpha_{t-1}(s-1), [skip] alpha_{t-1}(s-2))
// where the skip is allowed when l'_s is a label that differs from l'_{s-2}. It starts from a
// virtual row alpha_{-1} = (0, -inf, -inf, ...), which gives alpha_0 exactly and makes
// input_len = 0 need no special case (nll = 0 for an empty target, +inf otherwise).
//
// beta is alpha run on the reversed problem (time and states reversed): the same code with an
// index mapping, so both directions share every line of the recursion.
//
// Work split. One block per (sample, direction); each thread owns K consecutive states. In the
// register tier those K states live in registers across the whole time loop: the two halo
// values a thread needs from its left neighbour come by shuffle inside a warp, and through a
// ping-pong shared buffer across warps, so a time step costs one barrier (none for one warp).
// Beyond the register tier the states live in shared memory, and beyond shared memory in
// global memory (same code through a pointer), laid out interleaved [k][thread] so that the
// accesses of a warp are conflict-free and coalesced.
//
// f32 (and f16/bf16, which accumulate in f32) runs in base-2 logs with the SFU's ex2/lg2; f64
// runs in natural logs with exp/log1p. Stored alpha/beta and nll are natural logs.
//
// The host side (runtime/ops/ctc.c) mirrors the argument structs below field by field.
#pragma once
#include "jitops/common.cuh"

namespace jitops {
namespace ctc {

// ---- arguments (mirrored in runtime/ops/ctc.c) ----------------------------------------------

struct alpha_args {
  const void *lp; // [T, N, C] of F
  long long lp_st_t, lp_st_n, lp_st_c;
  const void *tgt;                     // targets of TI: padded [N, S] or concatenated
  long long tgt_st_n, tgt_st_s;        // padded: (n, s) strides; concatenated: (0, stride)
  long long tgt_numel;                 // concatenated: number of elements (bounds check)
  const void *in_len, *tgt_len;        // [N] of LI
  long long in_len_st, tgt_len_st;     //
  const long long *offsets;            // OFFS == 1: start of each sample in the targets
  void *loss;                          // MODE_LOSS: per-sample loss of type O
  long long loss_st;                   //
  void *values;                        // A[N]: contribution to sum/mean, or NULL
  void *alpha, *beta;                  // MODE_AB: A, [N, T, ab_len] with the strides below
  long long ab_st_n, ab_st_t, ab_st_s; //
  void *nll;                           // MODE_AB: A[N] with stride nll_st
  long long nll_st;                    //
  int *info;                           // MODE_AB: int2 per sample {input_len or -1, target_len}
  int *link;                           // MODE_AB: int2 per position {label, next | first << 30}
  long long link_st;                   // ints between samples in `link`
  void *mem;                           // global tier: the states of every block
  long long mem_block_bytes;           // bytes of one block's states
  int T, N, C, blank;                  //
  int s_max;                           // longest target this launch accepts (device lengths)
  int reduction;                       // 0 none, 1 sum, 2 mean
  int zero_infinity;                   //
  int ab_len;                          // MODE_AB: s extent of alpha/beta
  int fill;                            // MODE_AB: write -inf (NaN for invalid samples) elsewhere
  int pad_;
};

struct grad_args {
  const void *lp; // [T, N, C] of F
  long long lp_st_t, lp_st_n, lp_st_c;
  void *grad; // [T, N, C] of F
  long long g_st_t, g_st_n, g_st_c;
  void *alpha;                // A, natural logs; gamma overwrites the odd states in place
  const void *beta;           //
  long long ab_st_n, ab_st_t; // unit stride along s
  const void *nll;            // A[N]
  const int *info;            // int2 per sample
  const int *link;            // int2 per position
  long long link_st;          //
  const void *grad_loss;      // G: [N] (reduction none) or a scalar
  long long grad_loss_st;     //
  int T, N, C, blank;         //
  int reduction, zero_infinity;
  int chunks;    // blocks per sample along t
  int link_smem; // 1: copy the sample's links to dynamic shared memory (2 * S_max ints)
};

struct reduce_args {
  const void *values; // A[N]
  void *out;          // O: [N] with stride (none) or a scalar
  long long out_st;
  int N, reduction;
};

enum { MODE_LOSS = 0, MODE_VALUES = 1, MODE_AB = 2 };
enum { STORE_REG = 0, STORE_SHARED = 1, STORE_GLOBAL = 2 };
enum { OFFS_PADDED = 0, OFFS_HOST = 1, OFFS_DEVICE = 2 };

// ---- configuration shared with the host -----------------------------------------------------

// States per thread and threads per block for a capacity bucket. The host computes the same.
template <int CAP, int STORE> struct config;

// Row staging for MODE_AB in the register tier: index of state s in a row buffer, padded by one
// word per 32 so that a warp writing its K consecutive states per lane hits distinct banks.
__device__ __forceinline__ int staged(int s) {
  return s + (s >> 5);
}

template <int CAP, int STORE> struct config {
  // Register tier: few states per thread while that keeps the block at <= 128 threads, so
  // that the four SM sub-partitions share the work of small targets (one warp holding 256
  // states measured 1.45x slower at S = 100: its exp/log all ran on one sub-partition).
  static constexpr int K = STORE != STORE_REG ? (CAP / 1024 < 2 ? 2 : CAP / 1024)
                           : CAP <= 256       ? 2
                           : CAP <= 512       ? 4
                                              : 8;
  static constexpr int NT_MAX = CAP / K < 32 ? 32 : CAP / K;
  // Time steps of emissions loaded ahead (register tier): registers allow more with few threads.
  // The compiler still copies the ring's fresh loads into place once per PF steps, waiting
  // for their latency there: a deep ring (where two states per thread leave registers for it)
  // makes that wait rare.
  static constexpr int PF = K == 2 ? 8 : NT_MAX <= 256 ? 4 : 2;
};

// ---- hardware primitives --------------------------------------------------------------------

// The few PTX instructions the kernels use. tests/test_ctc_emulated.cpp runs these kernels on
// the CPU (threads and barriers standing in for the GPU's) and supplies its own definitions
// by defining JITOPS_CTC_HOST_EMULATION; NVRTC builds never define it.
#ifndef JITOPS_CTC_HOST_EMULATION
__device__ __forceinline__ float ex2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float lg2_approx(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// max/min that propagate NaN (fmaxf would drop it and hide a NaN input).
__device__ __forceinline__ float max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? a + b : fmaxf(a, b);
#endif
}
__device__ __forceinline__ float min_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? a + b : fminf(a, b);
#endif
}
__device__ __forceinline__ void prefetch_l2(const void *p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
// The block's dynamic shared memory.
__device__ __forceinline__ unsigned char *dynamic_smem() {
  extern __shared__ __align__(16) unsigned char ctc_dynamic_smem[];
  return ctc_dynamic_smem;
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

template <class A> struct logmath;

// Base-2 logs on the SFU. Inputs are scaled by log2(e) on load and results by ln(2) on store.
template <> struct logmath<float> {
  static constexpr float to_log2 = 1.4426950408889634f;
  static constexpr float to_ln = 0.6931471805599453f;
  static __device__ __forceinline__ float ninf() {
    return -limits<float>::infinity();
  }
  static __device__ __forceinline__ float nan() {
    return limits<float>::quiet_nan();
  }
  static __device__ __forceinline__ float ex(float x) {
    return ex2_approx(x);
  }
  // log2(1 + x) for x in [0, 2].
  static __device__ __forceinline__ float lg1p(float x) {
    return lg2_approx(1.0f + x);
  }
  static __device__ __forceinline__ float max(float a, float b) {
    return max_nan(a, b);
  }
  static __device__ __forceinline__ float min(float a, float b) {
    return min_nan(a, b);
  }
};

template <> struct logmath<double> {
  static constexpr double to_log2 = 1.0;
  static constexpr double to_ln = 1.0;
  static __device__ __forceinline__ double ninf() {
    return -limits<double>::infinity();
  }
  static __device__ __forceinline__ double nan() {
    return limits<double>::quiet_nan();
  }
  static __device__ __forceinline__ double ex(double x) {
    return exp(x);
  }
  static __device__ __forceinline__ double lg1p(double x) {
    return log1p(x);
  }
  static __device__ __forceinline__ double max(double a, double b) {
    return (a != a || b != b) ? a + b : fmax(a, b);
  }
  static __device__ __forceinline__ double min(double a, double b) {
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

// ---- per-sample lengths ---------------------------------------------------------------------

struct sample {
  int in_len, tl;
  long long tbase;   // element offset of the sample's first target
  long long tstride; // element stride between its targets
  bool valid;
};

template <class I> __device__ __forceinline__ long long read_int(const void *p, long long i) {
  return (long long)((const I *)p)[i];
}

// Sum of target lengths of samples [0, n) for concatenated targets with lengths in device
// memory, computed by the whole block (integer sums: any order gives the same result).
// `bad` is set when one of them is negative or absurd.
template <class LI>
__device__ long long prefix_offset(const alpha_args &a, int n, bool *bad, long long *red) {
  long long sum = 0;
  int neg = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    long long v = read_int<LI>(a.tgt_len, (long long)i * a.tgt_len_st);
    if (v < 0 || v > a.tgt_numel)
      neg = 1;
    else
      sum += v;
  }
  neg = __syncthreads_or(neg);
  for (int o = 16; o > 0; o >>= 1)
    sum += __shfl_down_sync(0xffffffffu, sum, o);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0)
    red[warp] = sum;
  __syncthreads();
  long long total = 0;
  int nwarps = (blockDim.x + 31) >> 5;
  for (int w = 0; w < nwarps; ++w)
    total += red[w];
  __syncthreads(); // red is reused by the caller
  *bad = neg != 0;
  return total;
}

// Reads and checks the sample's lengths. Every thread of the block must call it (it may
// synchronize). An invalid sample (device lengths out of range) must not touch memory.
template <class LI, int OFFS> __device__ sample load_sample(const alpha_args &a, int n) {
  __shared__ long long red[32];
  sample sm;
  long long il = read_int<LI>(a.in_len, (long long)n * a.in_len_st);
  long long tl = read_int<LI>(a.tgt_len, (long long)n * a.tgt_len_st);
  bool ok = il >= 0 && il <= a.T && tl >= 0 && tl <= a.s_max;
  long long base = 0;
  if (OFFS == OFFS_PADDED) {
    base = (long long)n * a.tgt_st_n;
  } else if (OFFS == OFFS_HOST) {
    long long off = a.offsets[n];
    ok = ok && off >= 0 && off + tl <= a.tgt_numel;
    base = off * a.tgt_st_s;
  } else {
    bool bad;
    long long off = prefix_offset<LI>(a, n, &bad, red);
    ok = ok && !bad && off + tl <= a.tgt_numel;
    base = off * a.tgt_st_s;
  }
  sm.in_len = ok ? (int)il : 0;
  sm.tl = ok ? (int)tl : 0;
  sm.tbase = base;
  sm.tstride = a.tgt_st_s;
  sm.valid = ok;
  return sm;
}

template <class TI>
__device__ __forceinline__ long long target_at(const alpha_args &a, const sample &sm, int j) {
  return (long long)((const TI *)a.tgt)[sm.tbase + (long long)j * sm.tstride];
}

// The label of odd state s (in the direction's own coordinates) and whether the skip into it
// is allowed. Flags a label outside [0, C) or equal to blank in *bad.
template <class TI, bool REV>
__device__ __forceinline__ int label_of(const alpha_args &a, const sample &sm, int s, bool *skip,
                                        bool *bad) {
  int j = (s - 1) >> 1;
  int jj = REV ? sm.tl - 1 - j : j;
  long long c = target_at<TI>(a, sm, jj);
  if (c < 0 || c >= a.C || c == a.blank) {
    *bad = true;
    c = a.blank;
  }
  bool sk = false;
  if (j >= 1) {
    long long p = target_at<TI>(a, sm, REV ? jj + 1 : jj - 1);
    sk = p != c;
  }
  *skip = sk;
  return (int)c;
}

// ---- outputs of one recursion ---------------------------------------------------------------

// Writes the per-sample results once the final states are known (forward direction only).
template <class A, class O, int MODE>
__device__ void finish_sample(const alpha_args &a, int n, const sample &sm, A last_blank,
                              A last_label) {
  typedef logmath<A> M;
  A nll = sm.valid ? A(0) - lae2(last_blank, last_label) * M::to_ln : M::nan();
  A v = nll;
  if (sm.valid && a.zero_infinity && nll == limits<A>::infinity())
    v = A(0);
  if (MODE == MODE_LOSS) {
    store((O *)a.loss + (long long)n * a.loss_st, v);
    return;
  }
  if (a.values) {
    A w = v;
    if (a.reduction == 2)
      w = v / (A)(sm.tl > 1 ? sm.tl : 1);
    ((A *)a.values)[n] = w;
  }
  if (MODE == MODE_AB) {
    ((A *)a.nll)[(long long)n * a.nll_st] = nll;
    if (a.info) {
      a.info[2 * n] = sm.valid ? sm.in_len : -1;
      a.info[2 * n + 1] = sm.tl;
    }
  }
}

// Public alpha/beta: -inf outside the valid region, NaN everywhere for an invalid sample.
template <class A>
__device__ void fill_outside(const alpha_args &a, int n, const sample &sm, bool rev) {
  typedef logmath<A> M;
  A *out = (A *)(rev ? a.beta : a.alpha) + (long long)n * a.ab_st_n;
  int L = 2 * sm.tl + 1;
  A v = sm.valid ? M::ninf() : M::nan();
  for (int t = 0; t < a.T; ++t) {
    const int from = (!sm.valid || t >= sm.in_len) ? 0 : L;
    A *row = out + (long long)t * a.ab_st_t;
    for (int s = from + threadIdx.x; s < a.ab_len; s += blockDim.x)
      row[(long long)s * a.ab_st_s] = v;
  }
}

// A sample whose labels turned out invalid on the device: its loss (the forward thread 0)
// and, when the caller wants them, its alpha or beta rows become the invalid sample's values.
template <class A, class O, int MODE>
__device__ void finish_invalid_sample(const alpha_args &a, int n, const sample &sm, bool rev) {
  typedef logmath<A> M;
  sample inv = sm;
  inv.valid = false;
  if (!rev && threadIdx.x == 0)
    finish_sample<A, O, MODE>(a, n, inv, M::ninf(), M::ninf());
  if (MODE == MODE_AB && a.fill)
    fill_outside<A>(a, n, inv, rev);
}

// ---- register tier --------------------------------------------------------------------------

// One direction of the recursion for one sample, K states per thread in registers.
// halo[2][32]: the last state of each warp, previous row (ping-pong); fin[2]: final states.
template <class F, class TI, class A, int CAP, bool REV, int MODE, class O>
__device__ void run_registers(const alpha_args &a, int n, const sample &sm, A (*halo)[32], A *fin) {
  typedef logmath<A> M;
  typedef config<CAP, STORE_REG> cfg;
  constexpr int K = cfg::K, H = K / 2, PF = cfg::PF;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nwarps = blockDim.x >> 5;
  const int L = 2 * sm.tl + 1;
  const int s0 = tid * K;

  // Labels, skip flags and class offsets of this thread's odd states.
  int cls[H];
  unsigned skipmask = 0;
  bool bad = false;
#pragma unroll
  for (int h = 0; h < H; ++h) {
    int s = s0 + 2 * h + 1;
    cls[h] = a.blank;
    if (s < L) {
      bool sk;
      cls[h] = label_of<TI, REV>(a, sm, s, &sk, &bad);
      if (sk)
        skipmask |= 1u << h;
    }
  }
  if (tid == 0)
    fin[1] = M::ninf();
  if (lane == 31)
    halo[0][warp] = M::ninf();
  if (__syncthreads_or(bad)) {
    finish_invalid_sample<A, O, MODE>(a, n, sm, REV);
    return;
  }

  const F *lp = (const F *)a.lp + (long long)n * a.lp_st_n;
  const long long stc = a.lp_st_c;
  const long long blank_off = (long long)a.blank * stc;
  const int in_len = sm.in_len;

  // s0 is even (a blank), so the only state a thread needs from its left neighbour is s0 - 1:
  // the blank at s0 reads s0 - 1, the label at s0 + 1 skips from s0 - 1.
  A st[K];
#pragma unroll
  for (int k = 0; k < K; ++k)
    st[k] = M::ninf();
  if (tid == 0)
    st[0] = A(0); // the virtual row alpha_{-1}

  // Emissions ring: slot p holds the row of every step t with t % PF == p. The time loop runs
  // PF steps per iteration with no exit inside, so each slot stays in fixed registers and the
  // loads for step t + PF are first read PF steps later. (With an exit inside the unrolled
  // steps, the compiler rotated the ring through register moves placed right after the loads:
  // every step waited for a fresh load's full latency, about half of the step time.)
  F ring[PF][H + 1];
  auto row_of = [&](int t) -> const F * {
    long long tt = REV ? (long long)(in_len - 1 - t) : (long long)t;
    return lp + tt * a.lp_st_t;
  };
  auto fetch = [&](int t, F *e) {
    const F *row = row_of(t);
    e[0] = row[blank_off];
#pragma unroll
    for (int h = 0; h < H; ++h)
      e[1 + h] = row[(long long)cls[h] * stc];
  };
  // Rows far ahead go to L2 (one line per thread) so the register ring hits L2, not HBM.
  const bool l2_prefetch = stc == 1 && (long long)tid * (128 / (int)sizeof(F)) < a.C;
  constexpr int PFL = 4 * PF > 16 ? 4 * PF : 16;

  if (in_len > 0) {
#pragma unroll
    for (int p = 0; p < PF; ++p)
      fetch(p < in_len ? p : in_len - 1, ring[p]);
  }

  A *out = nullptr;
  if (MODE == MODE_AB)
    out = (A *)(REV ? a.beta : a.alpha) + (long long)n * a.ab_st_n;
  int buf = 0;

  // MODE_AB: rows go through shared memory (two buffers, alternating) so that the global
  // stores are coalesced: during step t each thread writes positions tid, tid + NT, ... of
  // row t - 1. Stored straight from registers, each of a warp's K stores touched 32 sectors
  // (lanes K states apart), and the pass was store-bound.
  A *rowbuf = MODE == MODE_AB ? (A *)dynamic_smem() : nullptr;
  const int row_words = staged((int)blockDim.x * K) + 1;
  auto flush_row = [&](int t) {
    const A *src = rowbuf + (t & 1) * row_words;
    const long long tt = REV ? (long long)(in_len - 1 - t) : (long long)t;
    A *dst = out + tt * a.ab_st_t;
    for (int i = tid; i < L; i += blockDim.x)
      dst[(long long)i * a.ab_st_s] = src[staged(REV ? L - 1 - i : i)] * M::to_ln;
  };

  A up = __shfl_up_sync(0xffffffffu, st[K - 1], 1); // the left neighbour's last state
  // One time step, reading its emissions from `slot` and refilling it for step t + PF.
  auto step = [&](int t, F *slot) {
    if (l2_prefetch && t + PFL < in_len) {
      const F *fut = row_of(t + PFL) + (long long)tid * (128 / (int)sizeof(F));
      prefetch_l2(fut);
    }
    // This step's emissions, then the loads for step t + PF into the freed slot (clamped to
    // the last row, so that no branch splits the step): issued before the halo wait, they
    // cost no time on the step's critical path.
    const A eb = cvt(slot[0]) * M::to_log2;
    A em[H];
#pragma unroll
    for (int h = 0; h < H; ++h)
      em[h] = cvt(slot[1 + h]) * M::to_log2;
    fetch(t + PF < in_len ? t + PF : in_len - 1, slot);
    // Halo: the previous row's state s0 - 1 (shuffled at the end of the previous step).
    A h1 = up;
    if (lane == 0)
      h1 = warp > 0 ? halo[buf][warp - 1] : M::ninf();
    A nx[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      A p0 = st[k];
      A p1 = k >= 1 ? st[k - 1] : h1;
      if ((k & 1) == 0) {
        nx[k] = eb + lae2(p0, p1);
      } else {
        A p2 = k >= 2 ? st[k - 2] : h1;
        if (!((skipmask >> (k / 2)) & 1u))
          p2 = M::ninf();
        nx[k] = em[k / 2] + lae3(p0, p1, p2);
      }
    }
#pragma unroll
    for (int k = 0; k < K; ++k)
      st[k] = nx[k];
    up = __shfl_up_sync(0xffffffffu, st[K - 1], 1);
    if (MODE == MODE_AB) {
      if (t > 0)
        flush_row(t - 1);
      A *mine = rowbuf + (t & 1) * row_words;
#pragma unroll
      for (int k = 0; k < K; ++k)
        mine[staged(s0 + k)] = st[k];
    }
    if (nwarps > 1) {
      buf ^= 1;
      if (lane == 31)
        halo[buf][warp] = st[K - 1];
      __syncthreads();
    } else if (MODE == MODE_AB) {
      __syncwarp();
    }
  };
  int t0 = 0;
  for (; t0 + PF <= in_len; t0 += PF) {
#pragma unroll
    for (int p = 0; p < PF; ++p)
      step(t0 + p, ring[p]);
  }
#pragma unroll
  for (int p = 0; p < PF; ++p)
    if (t0 + p < in_len)
      step(t0 + p, ring[p]);
  if (MODE == MODE_AB && in_len > 0)
    flush_row(in_len - 1); // the last step ended with a barrier

  if (!REV) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (s0 + k == L - 1)
        fin[0] = st[k];
      if (s0 + k == L - 2)
        fin[1] = st[k];
    }
    __syncthreads();
    if (tid == 0)
      finish_sample<A, O, MODE>(a, n, sm, fin[0], fin[1]);
  }
  if (MODE == MODE_AB && a.fill)
    fill_outside<A>(a, n, sm, REV);
}

// ---- shared- and global-memory tiers --------------------------------------------------------

// Same recursion with the states in memory (shared or global, through one pointer). Thread
// `tid` owns states [tid*K, tid*K + K); state k of thread tid lives at st[k*NT + tid], and the
// word for its odd state 2h+1 (class, or ~class when the skip is allowed) at lab[h*NT + tid].
// halo[2][1024]: each thread's last state, previous row (ping-pong); fin[2]: final states.
template <class F, class TI, class A, int CAP, int STORE, bool REV, int MODE, class O>
__device__ void run_memory(const alpha_args &a, int n, const sample &sm, A *st, int *lab,
                           A (*halo)[1024], A *fin) {
  typedef logmath<A> M;
  constexpr int K = config<CAP, STORE>::K, H = K / 2;
  constexpr int B = 4; // pairs of states per batch of emission loads

  const int tid = threadIdx.x, NT = blockDim.x;
  const int L = 2 * sm.tl + 1;
  const int s0 = tid * K;

  bool bad = false;
  for (int h = 0; h < H; ++h) {
    int s = s0 + 2 * h + 1, w = a.blank;
    if (s < L) {
      bool sk;
      w = label_of<TI, REV>(a, sm, s, &sk, &bad);
      if (sk)
        w = ~w;
    }
    lab[h * NT + tid] = w;
  }
  for (int k = 0; k < K; ++k)
    st[k * NT + tid] = (tid == 0 && k == 0) ? A(0) : M::ninf();
  if (tid == 0)
    fin[1] = M::ninf();
  halo[0][tid] = M::ninf();
  if (__syncthreads_or(bad)) {
    finish_invalid_sample<A, O, MODE>(a, n, sm, REV);
    return;
  }

  const F *lp = (const F *)a.lp + (long long)n * a.lp_st_n;
  const long long stc = a.lp_st_c;
  const long long blank_off = (long long)a.blank * stc;
  const int in_len = sm.in_len;
  const bool l2_prefetch = stc == 1 && (long long)tid * (128 / (int)sizeof(F)) < a.C;
  A *out = nullptr;
  if (MODE == MODE_AB)
    out = (A *)(REV ? a.beta : a.alpha) + (long long)n * a.ab_st_n;
  int buf = 0;

  for (int t = 0; t < in_len; ++t) {
    const long long tt = REV ? (long long)(in_len - 1 - t) : (long long)t;
    const F *row = lp + tt * a.lp_st_t;
    if (l2_prefetch && t + 16 < in_len) {
      long long tf = REV ? (long long)(in_len - 17 - t) : (long long)(t + 16);
      const F *fut = lp + tf * a.lp_st_t + (long long)tid * (128 / (int)sizeof(F));
      prefetch_l2(fut);
    }
    A o1 = tid > 0 ? halo[buf][tid - 1] : M::ninf(); // previous row at s - 1
    const A eb = cvt(row[blank_off]) * M::to_log2;
    A *orow = MODE == MODE_AB ? out + tt * a.ab_st_t : nullptr;
    for (int h0 = 0; h0 < H; h0 += B) {
      F e[B];
      int w[B];
#pragma unroll
      for (int b = 0; b < B; ++b) {
        w[b] = h0 + b < H ? lab[(h0 + b) * NT + tid] : a.blank;
        int c = w[b] < 0 ? ~w[b] : w[b];
        e[b] = row[(long long)c * stc];
      }
#pragma unroll
      for (int b = 0; b < B; ++b) {
        int h = h0 + b;
        if (h >= H)
          break;
        // Blank state 2h, then label state 2h + 1, in place, keeping the old values.
        int k = 2 * h;
        A p0 = st[k * NT + tid];
        A nb = eb + lae2(p0, o1);
        A q0 = st[(k + 1) * NT + tid];
        A p2 = w[b] < 0 ? o1 : M::ninf();
        A nl = cvt(e[b]) * M::to_log2 + lae3(q0, p0, p2);
        st[k * NT + tid] = nb;
        st[(k + 1) * NT + tid] = nl;
        o1 = q0;
        if (MODE == MODE_AB) {
          int s = s0 + k;
          if (s < L)
            orow[(long long)(REV ? L - 1 - s : s) * a.ab_st_s] = nb * M::to_ln;
          if (s + 1 < L)
            orow[(long long)(REV ? L - 2 - s : s + 1) * a.ab_st_s] = nl * M::to_ln;
        }
      }
    }
    buf ^= 1;
    halo[buf][tid] = st[(K - 1) * NT + tid];
    __syncthreads();
  }

  if (!REV) {
    for (int k = 0; k < K; ++k) {
      if (s0 + k == L - 1)
        fin[0] = st[k * NT + tid];
      if (s0 + k == L - 2)
        fin[1] = st[k * NT + tid];
    }
    __syncthreads();
    if (tid == 0)
      finish_sample<A, O, MODE>(a, n, sm, fin[0], fin[1]);
  }
  if (MODE == MODE_AB && a.fill)
    fill_outside<A>(a, n, sm, REV);
}

// ---- label grouping for the gradient --------------------------------------------------------

// For each target position j: its label, the next position with the same label (or 2^30 - 1)
// and whether j is the label's first occurrence. The gradient sums the posteriors of a label
// along this chain, in position order: deterministic, no atomics.
template <class TI> __device__ void group_labels(const alpha_args &a, int n, const sample &sm) {
  if (!sm.valid)
    return;
  int *out = a.link + (long long)n * a.link_st;
  const int tl = sm.tl;
  for (int j = threadIdx.x; j < tl; j += blockDim.x) {
    long long c = target_at<TI>(a, sm, j);
    int first = 1;
    for (int i = j - 1; i >= 0; --i)
      if (target_at<TI>(a, sm, i) == c) {
        first = 0;
        break;
      }
    int next = (1 << 30) - 1;
    for (int i = j + 1; i < tl; ++i)
      if (target_at<TI>(a, sm, i) == c) {
        next = i;
        break;
      }
    out[2 * j] = (int)c;
    out[2 * j + 1] = next | (first << 30);
  }
}

// ---- the recursion kernel -------------------------------------------------------------------

// Grid (N, directions): y = 0 alpha, y = 1 beta (MODE_AB), y = 2 label grouping (MODE_AB with
// a link buffer). F: log_probs type; TI: target index type; LI: length type (device lengths;
// host lengths arrive as long long); OFFS: target layout; CAP: state capacity bucket; STORE:
// where the states live; MODE: what is written; O: the loss type for MODE_LOSS.
template <class F, class TI, class LI, int OFFS, int CAP, int STORE, int MODE, class O>
__global__ void __launch_bounds__(config<CAP, STORE>::NT_MAX) alpha_kernel(const alpha_args a) {
  typedef acc_t<F> A;
  const int n = blockIdx.x;
  const int dir = blockIdx.y;
  const sample sm = load_sample<LI, OFFS>(a, n);
  if (dir == 2) {
    group_labels<TI>(a, n, sm);
    return;
  }
  if (!sm.valid) {
    if (dir == 0 && threadIdx.x == 0)
      finish_sample<A, O, MODE>(a, n, sm, A(0), A(0));
    if (MODE == MODE_AB && a.fill)
      fill_outside<A>(a, n, sm, dir == 1);
    return;
  }
  if constexpr (STORE == STORE_REG) {
    __shared__ A halo[2][32];
    __shared__ A fin[2];
    if (dir == 0)
      run_registers<F, TI, A, CAP, false, MODE, O>(a, n, sm, halo, fin);
    else
      run_registers<F, TI, A, CAP, true, MODE, O>(a, n, sm, halo, fin);
  } else {
    __shared__ A halo[2][1024];
    __shared__ A fin[2];
    constexpr int K = config<CAP, STORE>::K;
    A *st;
    int *lab;
    if constexpr (STORE == STORE_SHARED) {
      st = (A *)dynamic_smem();
    } else {
      st = (A *)((char *)a.mem + ((long long)n * 2 + dir) * a.mem_block_bytes);
    }
    lab = (int *)(st + (long long)K * blockDim.x);
    if (dir == 0)
      run_memory<F, TI, A, CAP, STORE, false, MODE, O>(a, n, sm, st, lab, halo, fin);
    else
      run_memory<F, TI, A, CAP, STORE, true, MODE, O>(a, n, sm, st, lab, halo, fin);
  }
}

// ---- gradient -------------------------------------------------------------------------------

// One warp per (t, n) row. gamma_t(s) = exp(alpha_t(s) + beta_t(s) - lp[t, l'_s] + nll) is the
// posterior of state s at time t; the exact gradient of nll w.r.t. lp[t, c] is minus the sum of
// gamma over the states labelled c, and PyTorch's convention adds exp(lp[t, c]). Blank states
// are summed by a butterfly (every lane gets the same bits); label states are summed along
// their label chain by the lane that owns the first occurrence. The row is first filled with
// the value of a class absent from the target, then the blank and label classes are written.
template <class F, class G, bool TORCH>
__global__ void __launch_bounds__(256) grad_kernel(const grad_args a) {
  typedef acc_t<F> A;
  typedef logmath<A> M;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n = blockIdx.x / a.chunks;
  const int chunk = blockIdx.x % a.chunks;
  const int rows_per_block = (a.T + a.chunks - 1) / a.chunks;
  const int t_begin = chunk * rows_per_block;
  const int t_end = min(a.T, t_begin + rows_per_block);

  const int in_len = a.info[2 * n];
  const int tl = a.info[2 * n + 1];
  const bool valid = in_len >= 0;
  const A nll = ((const A *)a.nll)[n];
  A g;
  if (a.reduction == 0)
    g = (A)cvt(((const G *)a.grad_loss)[(long long)n * a.grad_loss_st]);
  else
    g = (A)cvt(((const G *)a.grad_loss)[0]);
  if (a.reduction == 2)
    g = g / (A)(tl > 1 ? tl : 1) / (A)a.N;
  const bool infinite = nll == limits<A>::infinity();
  const int L = 2 * tl + 1;
  // The sample's labels and chains, read once per block: into shared memory when the host
  // gave room for them (link_smem), else straight from global memory.
  const int *link = a.link + (long long)n * a.link_st;
  if (a.link_smem && valid) {
    int *mine = (int *)dynamic_smem();
    for (int i = threadIdx.x; i < 2 * tl; i += blockDim.x)
      mine[i] = link[i];
    link = mine;
  }
  __syncthreads();
  constexpr int U = 4; // states (and classes) per lane in flight: loads first, then math

  for (int t = t_begin + warp; t < t_end; t += 8) {
    const F *lrow = (const F *)a.lp + (long long)t * a.lp_st_t + (long long)n * a.lp_st_n;
    F *grow = (F *)a.grad + (long long)t * a.g_st_t + (long long)n * a.g_st_n;
    const bool active = valid && t < in_len;
    if (!active || infinite) {
      A v = !valid ? M::nan() : !active ? A(0) : a.zero_infinity ? A(0) : M::nan();
      for (int c = lane; c < a.C; c += 32)
        store(grow + (long long)c * a.g_st_c, v);
      continue;
    }
    A *arow = (A *)a.alpha + (long long)n * a.ab_st_n + (long long)t * a.ab_st_t;
    const A *brow = (const A *)a.beta + (long long)n * a.ab_st_n + (long long)t * a.ab_st_t;
    const A lpb = cvt(lrow[(long long)a.blank * a.lp_st_c]);
    A blank_sum = 0;
    for (int s0 = lane; s0 < L; s0 += 32 * U) {
      A av[U], bv[U], lv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int s = s0 + 32 * u;
        av[u] = bv[u] = M::ninf();
        lv[u] = lpb;
        if (s < L) {
          av[u] = arow[s];
          bv[u] = brow[s];
          if (s & 1)
            lv[u] = cvt(lrow[(long long)link[2 * ((s - 1) >> 1)] * a.lp_st_c]);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int s = s0 + 32 * u;
        // alpha + beta is -inf exactly when lp is (or the state is off every path): gamma = 0,
        // not the NaN of -inf - -inf.
        A ab = av[u] + bv[u];
        A gam = ab == M::ninf() ? A(0) : M::ex((ab - lv[u] + nll) * M::to_log2);
        if (s < L) {
          if (s & 1)
            arow[s] = gam;
          else
            blank_sum += gam;
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      blank_sum += __shfl_xor_sync(0xffffffffu, blank_sum, o);
    for (int c0 = lane; c0 < a.C; c0 += 32 * U) {
      A v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + 32 * u;
        v[u] = A(0);
        if (TORCH && c < a.C)
          v[u] = cvt(lrow[(long long)c * a.lp_st_c]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + 32 * u;
        if (c < a.C)
          store(grow + (long long)c * a.g_st_c, TORCH ? g * M::ex(v[u] * M::to_log2) : A(0));
      }
    }
    __syncwarp();
    for (int j = lane; j < tl; j += 32) {
      int w = link[2 * j + 1];
      if (!(w >> 30))
        continue;
      int c = link[2 * j];
      A sum = 0;
      for (int i = j; i < (1 << 30) - 1; i = link[2 * i + 1] & ((1 << 30) - 1))
        sum += arow[2 * i + 1];
      A v = -g * sum;
      if (TORCH)
        v += g * M::ex(cvt(lrow[(long long)c * a.lp_st_c]) * M::to_log2);
      store(grow + (long long)c * a.g_st_c, v);
    }
    if (lane == 0) {
      A v = -g * blank_sum;
      if (TORCH)
        v += g * M::ex(lpb * M::to_log2);
      store(grow + (long long)a.blank * a.g_st_c, v);
    }
    __syncwarp();
  }
}

// ---- reduction over the batch ---------------------------------------------------------------

// One block. none: converts and copies; sum/mean: a fixed-order sum (deterministic).
template <class A, class O>
__global__ void __launch_bounds__(256) reduce_kernel(const reduce_args r) {
  __shared__ A part[256];
  const A *v = (const A *)r.values;
  O *out = (O *)r.out;
  if (r.reduction == 0) {
    for (int i = threadIdx.x; i < r.N; i += blockDim.x)
      store(out + (long long)i * r.out_st, v[i]);
    return;
  }
  A sum = 0;
  for (int i = threadIdx.x; i < r.N; i += blockDim.x)
    sum += v[i];
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w)
      part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    A total = part[0];
    if (r.reduction == 2)
      total = total / (A)r.N; // N = 0 gives NaN, as PyTorch's mean of nothing
    store(out, total);
  }
}

} // namespace ctc
} // namespace jitops
