// jitops/scan_ops.cuh — the operator policies of the scan kernels (jitops/scan.cuh).
//
// A policy says what one scan computes. The kernels walk positions in *kernel order* (the
// order the scan runs in; a backward scan runs against its forward) and only ever combine an
// earlier state with a later one, so a policy needs associativity, not commutativity, and no
// identity element is ever combined into a result (identity() only fills lanes past the end,
// which the backwards' look-back tiles may instead fill with whatever their staging holds).
//
//   Tensors          a types<...> list of every tensor's storage type: inputs first, then outputs
//   NIN, NTENS       how many inputs, how many tensors
//   State            the scanned value (a multiple of 4 bytes, trivially copyable)
//   Keep             what emit() needs of the inputs besides the state (an empty struct if none)
//   identity()       any state: it fills positions past the end of the axis
//   combine(a, b)    a is earlier in kernel order
//   make(f, q, m, k) the state of one position: f.get<K>(shift, dflt) reads input K at kernel
//                    position q + shift (dflt outside the axis); q is the kernel-order position
//                    and m the position along the axis in memory order (what indices count).
//                    Input 0 is read only at the position itself (shift 0): the kernels may
//                    stage output 0 over it (scan.cuh, RowsStage)
//   emit(o, s, k, q, m)  writes the outputs of one position from its inclusive state:
//                    o.put<J>(value) stores output J (tensor NIN + J)
#pragma once
#include "jitops/common.cuh"

namespace jitops {
namespace scan {

template <class... Ts> struct types {};
template <int K, class L> struct type_at;
template <class T, class... Ts> struct type_at<0, types<T, Ts...>> { typedef T type; };
template <int K, class T, class... Ts> struct type_at<K, types<T, Ts...>> {
  typedef typename type_at<K - 1, types<Ts...>>::type type;
};

// Integer sums and products wrap (two's complement) instead of overflowing, which C++ leaves
// undefined; floating point is plain IEEE arithmetic.
__device__ __forceinline__ float add(float a, float b) {
  return a + b;
}
__device__ __forceinline__ double add(double a, double b) {
  return a + b;
}
__device__ __forceinline__ int add(int a, int b) {
  return (int)((unsigned)a + (unsigned)b);
}
__device__ __forceinline__ long long add(long long a, long long b) {
  return (long long)((u64)a + (u64)b);
}
__device__ __forceinline__ float mul(float a, float b) {
  return a * b;
}
__device__ __forceinline__ double mul(double a, double b) {
  return a * b;
}
__device__ __forceinline__ int mul(int a, int b) {
  return (int)((unsigned)a * (unsigned)b);
}
__device__ __forceinline__ long long mul(long long a, long long b) {
  return (long long)((u64)a * (u64)b);
}

// exp of a non-positive argument, as log-sum-exp combines need it. In f32 it is one ex2 after
// a multiply: the multiply's rounding costs |x|·2^-24 relative, which, weighted by
// exp(x) ≤ 1, stays below 2^-25 absolute against terms of order 1. logcumsumexp stays
// memory-bound rather than instruction-bound.
__device__ __forceinline__ float exp_nonpos(float x) {
  return ex2_approx(x * 1.4426950408889634f);
}
__device__ __forceinline__ double exp_nonpos(double x) {
  return exp(x);
}
// exp of a moderate argument (a log-domain gradient): relative error ~|x|·2^-24 in f32.
__device__ __forceinline__ float exp_acc(float x) {
  return ex2_approx(x * 1.4426950408889634f);
}
__device__ __forceinline__ double exp_acc(double x) {
  return exp(x);
}
// m + log(1 + t) for t ≥ 0 (a log-sum-exp's maximum plus its scaled remainder): absolute error
// below 2^-22 in f32, which is the output's own rounding for |y| ≥ 1/4.
__device__ __forceinline__ float plus_log1p(float m, float t) {
  return fma_acc(lg2_approx(1.0f + t), 0.6931471805599453f, m);
}
__device__ __forceinline__ double plus_log1p(double m, double t) {
  return m + log1p(t);
}
// log(x) - y for a positive x: the log's relative error ~2^-22 in f32.
__device__ __forceinline__ float log_minus(float x, float y) {
  return fma_acc(lg2_approx(x), 0.6931471805599453f, -y);
}
__device__ __forceinline__ double log_minus(double x, double y) {
  return log(x) - y;
}
__device__ __forceinline__ float abs_acc(float x) {
  return fabsf(x);
}
__device__ __forceinline__ double abs_acc(double x) {
  return fabs(x);
}

// ---- forward ------------------------------------------------------------------------------

// Tensors: x, y. int32/int64 wrap; half types accumulate in f32.
template <class T> struct Cumsum {
  typedef types<T, T> Tensors;
  static constexpr int NIN = 1, NTENS = 2;
  typedef acc_t<T> State;
  struct Keep {};
  __device__ static State identity() {
    return State(0);
  }
  __device__ static State combine(const State &a, const State &b) {
    return add(a, b);
  }
  template <class F> __device__ static State make(const F &f, i64, i64, Keep &) {
    return f.template get<0>(0, State(0));
  }
  template <class O> __device__ static void emit(O &o, const State &s, const Keep &, i64, i64) {
    o.template put<0>(s);
  }
};

// Tensors: x, y.
template <class T> struct Cumprod {
  typedef types<T, T> Tensors;
  static constexpr int NIN = 1, NTENS = 2;
  typedef acc_t<T> State;
  struct Keep {};
  __device__ static State identity() {
    return State(1);
  }
  __device__ static State combine(const State &a, const State &b) {
    return mul(a, b);
  }
  template <class F> __device__ static State make(const F &f, i64, i64, Keep &) {
    return f.template get<0>(0, State(1));
  }
  template <class O> __device__ static void emit(O &o, const State &s, const Keep &, i64, i64) {
    o.template put<0>(s);
  }
};

// cummax (MAX) or cummin, PyTorch's rules: the later of equal values wins (in kernel order,
// so a reverse scan reports the lowest index among ties), and a NaN wins over everything
// before it and carries its own index. Tensors: x, values, int64 indices.
template <class T, bool MAX> struct Extremum {
  typedef types<T, T, long long> Tensors;
  static constexpr int NIN = 1, NTENS = 3;
  typedef acc_t<T> V;
  struct State {
    V v;
    long long i;
  };
  struct Keep {};
  __device__ static State identity() {
    return State{V(0), -1};
  }
  __device__ static State combine(const State &a, const State &b) {
    if (is_nan(b.v))
      return b;
    if (is_nan(a.v))
      return a;
    return (MAX ? b.v >= a.v : b.v <= a.v) ? b : a;
  }
  template <class F> __device__ static State make(const F &f, i64, i64 m, Keep &) {
    return State{f.template get<0>(0, V(0)), m};
  }
  template <class O> __device__ static void emit(O &o, const State &s, const Keep &, i64, i64) {
    o.template put<0>(s.v);
    o.template put<1>(s.i);
  }
};

// log(sum(exp)) kept as (m, t), meaning exp(m)·(1 + t): m is the running maximum and t the
// sum of the other terms scaled by exp(-m). One exp per combine, and y = m + log1p(t) keeps
// full relative accuracy when y is near 0. Empty is (-inf, 0).
//
// Invariants, which keep the combine free of branches (so that independent chains of them
// interleave): a NaN lives in m, never in t, and t is finite. The maximum's selection sends a
// NaN m from either operand to the result's m, where it stays; an infinite maximum (or a
// NaN) absorbs the rest with t = 0, which also covers inf - inf, the NaN difference of two
// equal infinite maxima, and makes -inf combined with -inf the empty state again.
template <class A> struct LogSumExp { A m, t; };
template <class A>
__device__ __forceinline__ LogSumExp<A> lse_combine(const LogSumExp<A> &a, const LogSumExp<A> &b) {
  // Selects by value: a reference to either operand would put both in local memory.
  const bool a_hi = a.m >= b.m || is_nan(a.m);
  const A hm = a_hi ? a.m : b.m, ht = a_hi ? a.t : b.t;
  const A lm = a_hi ? b.m : a.m, lt = a_hi ? b.t : a.t;
  const A e = exp_nonpos(lm - hm);
  const bool finite = abs_acc(hm) < limits<A>::infinity();
  return LogSumExp<A>{hm, finite ? ht + fma_acc(lt, e, e) : A(0)};
}

// Tensors: x, y.
template <class T> struct Lcse {
  typedef types<T, T> Tensors;
  static constexpr int NIN = 1, NTENS = 2;
  typedef acc_t<T> A;
  typedef LogSumExp<A> State;
  struct Keep {};
  __device__ static State identity() {
    return State{-limits<A>::infinity(), A(0)};
  }
  __device__ static State combine(const State &a, const State &b) {
    return lse_combine(a, b);
  }
  template <class F> __device__ static State make(const F &f, i64, i64, Keep &) {
    return State{f.template get<0>(0, A(0)), A(0)};
  }
  // The second pass's shortcut (scan.cuh, rows_scan_items_steady), for items only: an item
  // s = make(x) (so s.t = 0, which steady relies on) with x ≤ run.m and run.m finite
  // (steady_fits) combines as run.t + exp(x − run.m), which is what combine computes then, bit
  // for bit (the maximum stays run's, and fma(0, e, e) = e). Deep in a row the running maximum
  // rarely rises, so most items skip combine's selections and tests. Taken where measured:
  // f32, f16 and bf16 (bench/NOTES-scan.md, "logcumsumexp's steady pass"). Once a row's
  // maximum is +inf every later item takes combine.
  static constexpr bool STEADY = sizeof(T) <= 4;
  __device__ static bool steady_fits(const State &run, const State &s) {
    return (s.m <= run.m) & (abs_acc(run.m) < limits<A>::infinity()); // & : no branch
  }
  __device__ static State steady(const State &run, const State &s) {
    return State{run.m, run.t + exp_nonpos(s.m - run.m)};
  }
  template <class O> __device__ static void emit(O &o, const State &s, const Keep &, i64, i64) {
    o.template put<0>(plus_log1p(s.m, s.t));
  }
};

// ---- backward (the kernel runs against the forward direction) -----------------------------

// dx_j = L_j·R_j with L_j = y_{j-1} (the exclusive product, read from the saved output, so
// no division by x and zeros are exact) and R_j = dy_j + x_{j+1}·R_{j+1}, a reverse affine
// scan. A state (a, b) is the map R ↦ a·R + b; combine composes the earlier map first.
// Tensors: dy, x, y, dx. In kernel order forward-next is shift -1 and forward-previous +1.
template <class T> struct CumprodBackward {
  typedef types<T, T, T, T> Tensors;
  static constexpr int NIN = 3, NTENS = 4;
  typedef acc_t<T> A;
  struct State {
    A a, b;
  };
  struct Keep {
    A l;
  };
  __device__ static State identity() {
    return State{A(1), A(0)};
  }
  __device__ static State combine(const State &x, const State &y) {
    return State{y.a * x.a, fma_acc(y.a, x.b, y.b)};
  }
  template <class F> __device__ static State make(const F &f, i64, i64, Keep &k) {
    k.l = f.template get<2>(1, A(1));
    return State{f.template get<1>(-1, A(0)), f.template get<0>(0, A(0))};
  }
  template <class O> __device__ static void emit(O &o, const State &s, const Keep &k, i64, i64) {
    o.template put<0>(k.l * s.b);
  }
};

// cummax/cummin backward: dx_j sums dy_i over the i whose saved index is j. The indices are
// monotone along the scan, so those i form one run that starts at i = j: a segmented sum
// that restarts at the (forward) end of every run, written where the index names its own
// position. Deterministic, no atomics. Tensors: dy, indices, dx.
template <class T> struct ExtremumBackward {
  typedef types<T, long long, T> Tensors;
  static constexpr int NIN = 2, NTENS = 3;
  typedef acc_t<T> A;
  struct State {
    int reset;
    A v;
  };
  struct Keep {
    int own;
  };
  __device__ static State identity() {
    return State{0, A(0)};
  }
  __device__ static State combine(const State &x, const State &y) {
    return y.reset ? y : State{x.reset, x.v + y.v};
  }
  template <class F> __device__ static State make(const F &f, i64 q, i64 m, Keep &k) {
    const long long here = f.template get<1>(0, -1ll);
    const long long next = f.template get<1>(-1, -1ll);
    k.own = here == m;
    return State{(q == 0 || here != next) ? 1 : 0, f.template get<0>(0, A(0))};
  }
  template <class O> __device__ static void emit(O &o, const State &s, const Keep &k, i64, i64) {
    o.template put<0>(k.own ? s.v : A(0));
  }
};

// A signed sum in the log domain, exp(m)·s: m is the running maximum of the terms' logs and
// s the signed sum of the terms scaled by exp(-m), so |s| is at most their count. One exp per
// combine. Empty is (-inf, 0). Equal maxima combine with a scale of 1 rather than
// exp(m - m), which for infinite maxima would be NaN: two empty states stay empty, and two
// infinite terms add their signs. A NaN m travels as in LogSumExp.
template <class A> struct SignedLogSum { A m, s; };
template <class A>
__device__ __forceinline__ SignedLogSum<A> sls_combine(const SignedLogSum<A> &a,
                                                       const SignedLogSum<A> &b) {
  const bool a_hi = a.m >= b.m || is_nan(a.m);
  const A hm = a_hi ? a.m : b.m, hs = a_hi ? a.s : b.s;
  const A lm = a_hi ? b.m : a.m, ls = a_hi ? b.s : a.s;
  const A e = lm == hm ? A(1) : exp_nonpos(lm - hm);
  return SignedLogSum<A>{hm, fma_acc(ls, e, hs)};
}

// logcumsumexp backward: dx_j = Σ_{i ≥ j} dy_i·exp(x_j − y_i), computed stably as a reverse
// signed log-domain sum of dy_i·exp(−y_i) (terms log|dy_i| − y_i with the sign of dy_i):
// dx_j = exp(x_j + m_j)·s_j. Since y_i ≥ x_j for i ≥ j, exp(x_j + m_j) ≤ max |dy|: no overflow.
// A position with x_j = −inf gets 0 (its term is 0 whenever y_i is finite; where every x up
// to i is −inf the gradient is undefined and 0 is the limit we pick), and a position with
// y_i = −inf or dy_i = 0 adds nothing. Tensors: dy, x, y, dx.
template <class T> struct LcseBackward {
  typedef types<T, T, T, T> Tensors;
  static constexpr int NIN = 3, NTENS = 4;
  typedef acc_t<T> A;
  typedef SignedLogSum<A> State;
  struct Keep {
    A x;
  };
  __device__ static State identity() {
    return State{-limits<A>::infinity(), A(0)};
  }
  __device__ static State combine(const State &a, const State &b) {
    return sls_combine(a, b);
  }
  // The second pass's shortcut, as Lcse's: where s's maximum is at most run's, combine
  // (sls_combine) keeps run's and adds s's scaled sum below it; so does steady, bit for bit,
  // without the selections. (Written apart: sls_combine through a shared helper spilled.)
  // Taken in f16 and bf16 only: the f32 backward moves 16 bytes a position, and its test cost
  // more than the selections it saves (2^27 positions 1.01x slower, NVIDIA H100).
  static constexpr bool STEADY = sizeof(T) == 2;
  __device__ static bool steady_fits(const State &run, const State &s) {
    return s.m <= run.m;
  }
  __device__ static State steady(const State &run, const State &s) {
    const A e = s.m == run.m ? A(1) : exp_nonpos(s.m - run.m);
    return State{run.m, fma_acc(s.s, e, run.s)};
  }
  template <class F> __device__ static State make(const F &f, i64, i64, Keep &k) {
    const A g = f.template get<0>(0, A(0));
    const A y = f.template get<2>(0, A(0));
    k.x = f.template get<1>(0, A(0));
    const bool term = y != -limits<A>::infinity() && g != A(0);
    return State{term ? log_minus(abs_acc(g), y) : -limits<A>::infinity(),
                 term ? (g > A(0) ? A(1) : A(-1)) : A(0)};
  }
  template <class O> __device__ static void emit(O &o, const State &s, const Keep &k, i64, i64) {
    o.template put<0>(k.x == -limits<A>::infinity() ? A(0) : exp_acc(k.x + s.m) * s.s);
  }
};

} // namespace scan
} // namespace jitops
