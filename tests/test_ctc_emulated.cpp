// CTC kernels on the CPU: ops/ctc/ctc.cuh compiled as host C++, with one std::thread per CUDA
// thread, std::barrier for __syncthreads and per-warp exchanges for the shuffles. It checks
// the kernels' logic (index mappings, the reversed beta pass, halos, every storage tier,
// the label grouping, the gradient and the reductions) against the double-precision reference
// without a GPU, so it runs in CI. Barriers order every shared access exactly as on the GPU,
// so building it with -fsanitize=thread also reports shared-memory races.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

extern "C" {
#include "testutil.h"
}

// ---- a CUDA-shaped world on the CPU ---------------------------------------------------------

struct emu_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__   static
#define __align__(n) alignas(n)

struct emu_block {
  std::unique_ptr<std::barrier<>> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<unsigned long long> lanes; // shuffle slots, one per thread
  std::vector<int> flags;                // __syncthreads_or
  std::vector<unsigned char> dynamic;    // dynamic shared memory
};
static emu_block block;

static inline void __syncthreads() {
  block.all->arrive_and_wait();
}
static inline int __syncthreads_or(int p) {
  block.flags[threadIdx.x] = p != 0;
  __syncthreads();
  int any = 0;
  for (unsigned i = 0; i < blockDim.x; ++i)
    any |= block.flags[i];
  __syncthreads();
  return any;
}
static inline void __syncwarp(unsigned = 0xffffffffu) {
  block.warps[threadIdx.x / 32]->arrive_and_wait();
}
template <class T> static inline T exchange(T v, int src_lane) {
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  block.lanes[threadIdx.x] = bits;
  __syncwarp();
  unsigned long long got = block.lanes[(threadIdx.x & ~31u) + (unsigned)src_lane];
  __syncwarp();
  T out;
  std::memcpy(&out, &got, sizeof out);
  return out;
}
template <class T> static inline T __shfl_up_sync(unsigned, T v, int d) {
  int lane = threadIdx.x & 31;
  return exchange(v, lane >= d ? lane - d : lane);
}
template <class T> static inline T __shfl_down_sync(unsigned, T v, int d) {
  int lane = threadIdx.x & 31;
  return exchange(v, lane + d < 32 ? lane + d : lane);
}
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int m) {
  return exchange(v, (threadIdx.x & 31) ^ m);
}
static inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
static inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
static inline double __longlong_as_double(long long i) {
  double d;
  std::memcpy(&d, &i, 8);
  return d;
}
static inline int min(int a, int b) {
  return a < b ? a : b;
}

// The template's hardware primitives.
#define JITOPS_HOST_EMULATION 1
static inline float ex2_approx(float x) {
  return exp2f(x);
}
static inline float lg2_approx(float x) {
  return log2f(x);
}
static inline float mul_rn(float a, float b) {
  return a * b;
}
static inline double mul_rn(double a, double b) {
  return a * b;
}
static inline float max_nan(float a, float b) {
  return (a != a || b != b) ? a + b : fmaxf(a, b);
}
static inline float min_nan(float a, float b) {
  return (a != a || b != b) ? a + b : fminf(a, b);
}
static inline void prefetch_l2(const void *) {}
static inline unsigned char *dynamic_smem() {
  return block.dynamic.data();
}
typedef unsigned char *smem_addr;
static inline smem_addr shared_address(const void *p) {
  return (smem_addr)p;
}
template <class T> static inline void load_shared(smem_addr at, T &v) {
  std::memcpy(&v, at, sizeof v);
}
template <class T> static inline void store_shared(smem_addr at, T v) {
  std::memcpy(at, &v, sizeof v);
}

#include "jitops/ctc.cuh"

#include "ctc_reference.h"

// Runs kernel(args) on a grid, one block at a time, each block's threads concurrently.
template <class Args>
static void launch(void (*kernel)(Args), unsigned gx, unsigned gy, unsigned threads,
                   size_t dynamic_bytes, const Args &args) {
  gridDim.x = gx;
  gridDim.y = gy;
  gridDim.z = 1;
  blockDim.x = threads;
  blockDim.y = blockDim.z = 1;
  for (unsigned by = 0; by < gy; ++by)
    for (unsigned bx = 0; bx < gx; ++bx) {
      block.all = std::make_unique<std::barrier<>>(threads);
      block.warps.clear();
      for (unsigned w = 0; w < threads / 32; ++w)
        block.warps.push_back(std::make_unique<std::barrier<>>(32));
      block.lanes.assign(threads, 0);
      block.flags.assign(threads, 0);
      block.dynamic.assign(dynamic_bytes + 16, 0xff);
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([=] {
          threadIdx.x = t;
          blockIdx.x = bx;
          blockIdx.y = by;
          kernel(args);
        });
      for (auto &th : pool)
        th.join();
    }
}

// ---- the host side, as ops/ctc/plan.c plans it ----------------------------------------------

using namespace jitops::ctc;

struct plan_t {
  int cap, k, nt;
  size_t dyn;
};

static plan_t plan_for(int s_max, int store, size_t acc) {
  plan_t p;
  int states = 2 * s_max + 1;
  p.cap = 32;
  while (p.cap < states)
    p.cap *= 2;
  p.k = JITOPS__CTC_K(p.cap, store);
  p.nt = ((states + p.k - 1) / p.k + 31) / 32 * 32;
  p.dyn = (size_t)p.k * p.nt * acc + (size_t)(p.k / 2) * p.nt * sizeof(int);
  return p;
}

template <class A, int CAP, int STORE, int OFFS, int MODE>
static void run_alpha(const plan_t &p, unsigned dirs, const alpha_args &a) {
  size_t words = (size_t)p.nt * p.k, staging = 2 * (words + words / 32 + 1) * sizeof(A);
  size_t dyn =
      STORE == STORE_SHARED ? p.dyn : (STORE == STORE_REG && MODE == MODE_AB ? staging : 0);
  launch(&alpha_kernel<A, long long, long long, OFFS, CAP, STORE, MODE, A>, (unsigned)a.N, dirs,
         (unsigned)p.nt, dyn, a);
}

// One problem, one storage tier: loss (none and mean) and the exact and PyTorch gradients.
// `corrupt` (optional) damages the device-side lengths or targets of some samples and returns
// a bit mask of the samples that must come out NaN.
typedef unsigned (*corrupt_fn)(std::vector<long long> &in_len, std::vector<long long> &tgt_len,
                               std::vector<long long> &targets, const ctc_case *c);

// The gradient kernel's arguments after run_alpha(p, ..., a): dense [T, N, C] log-probs and
// gradient, one upstream gradient per sequence; blank 0, no reduction, no zero_infinity.
template <class A>
static grad_args grad_args_for(const plan_t &p, const alpha_args &a, const A *lp, A *grad,
                               const A *grad_loss, int T, int N, int C) {
  grad_args ga;
  std::memset(&ga, 0, sizeof ga);
  ga.lp = lp;
  ga.lp_st_t = ga.g_st_t = (long long)N * C;
  ga.lp_st_n = ga.g_st_n = C;
  ga.lp_st_c = ga.g_st_c = 1;
  ga.grad = grad;
  ga.alpha = a.alpha;
  ga.beta = a.beta;
  ga.ab_st_n = a.ab_st_n;
  ga.ab_st_t = a.ab_st_t;
  ga.nll = a.nll;
  ga.info = a.info;
  ga.link = a.link;
  ga.link_st = a.link_st;
  ga.frames = a.frames;
  ga.frame_nt = p.nt;
  ga.frame_shift = __builtin_ctz((unsigned)p.k);
  ga.grad_loss = grad_loss;
  ga.grad_loss_st = 1;
  ga.T = T;
  ga.N = N;
  ga.C = C;
  ga.chunks = (T + 31) / 32;
  return ga;
}

// The gradient kernel's dynamic shared memory with tables or ga's link_smem, laid out as
// jitops/ctc_abi.h says.
template <class A> static size_t grad_smem_bytes(const grad_args &ga, bool tables) {
  if (tables)
    return JITOPS__CTC_GRAD_GAMMA_OFFSET(ga.link_st, ga.C) +
           (size_t)JITOPS__CTC_GRAD_WARPS * (size_t)(ga.link_st / 2) * sizeof(A);
  return ga.link_smem ? (size_t)ga.link_st * sizeof(int) : 0;
}

template <class A, int CAP, int STORE, int OFFS>
static void check_problem(ctc_case *c, const char *what, corrupt_fn corrupt = nullptr) {
  const int T = c->T, N = c->N, C = c->C, S = c->S;
  plan_t p = plan_for(S, STORE, sizeof(A));
  if (p.cap != CAP) {
    fprintf(stderr, "%s: capacity %d, instantiated %d\n", what, p.cap, CAP);
    ++test_failures;
    return;
  }
  // Rounds the inputs to A so that the reference sees what the kernels see.
  std::vector<A> lp((size_t)T * N * C + 1);
  for (size_t i = 0; i < (size_t)T * N * C; ++i) {
    lp[i] = (A)c->lp[i];
    c->lp[i] = (double)lp[i];
  }
  ref_out r = reference(c);
  std::vector<long long> targets((size_t)N * S + 1, -7), in_len(N), tgt_len(N);
  std::vector<int64_t> offsets(N); // the ABI's type (jitops/ctc_abi.h)
  long long total = 0;
  for (int n = 0; n < N; ++n) {
    in_len[n] = c->in_len[n];
    tgt_len[n] = c->tl[n];
    offsets[n] = total;
    for (int j = 0; j < c->tl[n]; ++j)
      targets[OFFS == OFFS_PADDED ? (size_t)n * S + j : (size_t)total + j] = c->labels[n * S + j];
    if (OFFS != OFFS_PADDED)
      total += c->tl[n];
  }
  unsigned bad = corrupt ? corrupt(in_len, tgt_len, targets, c) : 0u;
  alpha_args a;
  std::memset(&a, 0, sizeof a);
  a.lp = lp.data();
  a.lp_st_t = (long long)N * C;
  a.lp_st_n = C;
  a.lp_st_c = 1;
  a.tgt = targets.data();
  a.tgt_st_n = OFFS == OFFS_PADDED ? S : 0;
  a.tgt_st_s = 1;
  a.tgt_numel = OFFS == OFFS_PADDED ? (long long)N * S : total;
  a.in_len = in_len.data();
  a.tgt_len = tgt_len.data();
  a.in_len_st = a.tgt_len_st = 1;
  a.offsets = offsets.data();
  a.T = T;
  a.N = N;
  a.C = C;
  a.blank = c->blank;
  a.s_max = S;
  std::vector<unsigned char> mem((size_t)N * 2 * (p.dyn + 256) + 16);
  a.mem = mem.data();
  a.mem_block_bytes = (long long)((p.dyn + 255) / 256 * 256);

  // Forward, reduction none and mean.
  std::vector<A> loss(N + 1, (A)NAN), values(N + 1, (A)NAN), out(2, (A)NAN);
  a.loss = loss.data();
  a.loss_st = 1;
  a.reduction = 0;
  run_alpha<A, CAP, STORE, OFFS, MODE_LOSS>(p, 1, a);
  a.values = values.data();
  a.reduction = 2;
  run_alpha<A, CAP, STORE, OFFS, MODE_VALUES>(p, 1, a);
  reduce_args ra = {values.data(), out.data(), 1, N, 2};
  launch(&reduce_kernel<A, A>, 1, 1, 256, 0, ra);
  const double atol = sizeof(A) == 8 ? 1e-10 : 2e-4, rtol = sizeof(A) == 8 ? 1e-10 : 2e-5;
  for (int n = 0; n < N; ++n)
    if (!close_to(loss[n], (bad >> n) & 1 ? NAN : expected_loss(c, &r, 0, 0, n), atol, rtol)) {
      fprintf(stderr, "%s: loss[%d] = %.9g, want %.9g\n", what, n, (double)loss[n], r.nll[n]);
      ++test_failures;
    }
  if (!close_to(out[0], bad ? NAN : expected_loss(c, &r, 2, 0, 0), atol, rtol)) {
    fprintf(stderr, "%s: mean loss %.9g, want %.9g\n", what, (double)out[0],
            expected_loss(c, &r, 2, 0, 0));
    ++test_failures;
  }

  // Backward: fused alpha/beta/grouping, then the gradient (none, zero_infinity), both
  // conventions.
  const size_t L = 2 * (size_t)S + 1;
  std::vector<A> alpha((size_t)N * T * L + 1), beta((size_t)N * T * L + 1), nll(N + 1);
  std::vector<int> info(INFO_INTS * N + 2), link((size_t)N * 2 * std::max(S, 1) + 2);
  std::vector<float> frames((size_t)N * 2 * T * p.nt + 1, NAN);
  a.values = nullptr;
  a.reduction = 0;
  a.zero_infinity = 1;
  a.alpha = alpha.data();
  a.beta = beta.data();
  a.ab_st_n = (long long)(T * L);
  a.ab_st_t = (long long)L;
  a.ab_st_s = 1;
  a.ab_len = (int)L;
  a.nll = nll.data();
  a.nll_st = 1;
  a.info = info.data();
  a.link = link.data();
  a.link_st = 2 * std::max(S, 1);
  a.frames = frames.data();
  std::vector<A> g(N + 1);
  double gd[64];
  for (int n = 0; n < N; ++n)
    g[n] = (A)(gd[n] = 0.5 + 0.25 * n);
  for (int torch = 0; torch <= 1; ++torch) {
    run_alpha<A, CAP, STORE, OFFS, MODE_AB>(p, 3, a);
    std::vector<A> grad((size_t)T * N * C + 1, (A)NAN);
    grad_args ga = grad_args_for<A>(p, a, lp.data(), grad.data(), g.data(), T, N, C);
    ga.blank = c->blank;
    ga.zero_infinity = 1;
    // Both paths: the tables in shared memory, and everything in global memory.
    const size_t smem = grad_smem_bytes<A>(ga, torch);
    if (torch)
      launch(&grad_kernel<A, A, true, true>, (unsigned)(ga.chunks * N), 1, 256, smem, ga);
    else
      launch(&grad_kernel<A, A, false, false>, (unsigned)(ga.chunks * N), 1, 256, smem, ga);
    double gatol = sizeof(A) == 8 ? 1e-10 : 2e-4 + 4e-6 * T;
    int reported = 0;
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < C; ++k) {
          double want = (bad >> n) & 1 ? NAN : expected_grad(c, &r, 0, 1, torch, gd, t, n, k);
          double got = grad[((size_t)t * N + n) * C + k];
          if (!close_to(got, want, gatol, rtol)) {
            if (reported++ < 5)
              fprintf(stderr, "%s: grad torch=%d [t=%d n=%d c=%d] = %.9g, want %.9g\n", what, torch,
                      t, n, k, got, want);
            ++test_failures;
          }
        }
  }

  // The public alpha/beta: wider rows than needed, -inf outside the valid region (NaN for an
  // invalid sample), natural logs inside.
  const int W = (int)L + 3;
  std::vector<A> pa((size_t)N * T * W + 1, (A)7), pb((size_t)N * T * W + 1, (A)7);
  std::vector<double> ref_a((size_t)T * L + 1), ref_b((size_t)T * L + 1);
  a.alpha = pa.data();
  a.beta = pb.data();
  a.ab_st_n = (long long)T * W;
  a.ab_st_t = W;
  a.ab_len = W;
  a.fill = 1;
  a.info = nullptr;
  a.link = nullptr;
  a.frames = nullptr;
  run_alpha<A, CAP, STORE, OFFS, MODE_AB>(p, 2, a);
  int reported = 0;
  for (int n = 0; n < N; ++n) {
    ref_alpha_beta(c, n, ref_a.data(), ref_b.data());
    const int Ln = 2 * c->tl[n] + 1;
    for (int t = 0; t < T; ++t)
      for (int s = 0; s < W; ++s) {
        bool inside = t < c->in_len[n] && s < Ln;
        double wa = (bad >> n) & 1 ? NAN : inside ? ref_a[(size_t)t * Ln + s] : -INFINITY;
        double wb = (bad >> n) & 1 ? NAN : inside ? ref_b[(size_t)t * Ln + s] : -INFINITY;
        size_t at = ((size_t)n * T + t) * W + s;
        if (!close_to(pa[at], wa, atol, rtol) || !close_to(pb[at], wb, atol, rtol)) {
          if (reported++ < 5)
            fprintf(stderr, "%s: alpha/beta [n=%d t=%d s=%d] = %.9g %.9g, want %.9g %.9g\n", what,
                    n, t, s, (double)pa[at], (double)pb[at], wa, wb);
          ++test_failures;
        }
      }
  }
  ref_free(&r);
}

template <class A, int CAP, int OFFS>
static void all_tiers(uint64_t seed, int T, int N, int C, int S, int blank) {
  char what[160];
  static const char *const names[] = {"registers", "shared", "global"};
  for (int store = 0; store < 3; ++store) {
    ctc_case c = make_case(seed, T, N, C, S, blank, 1);
    snprintf(what, sizeof what, "%s %s offs=%d T=%d N=%d C=%d S=%d", sizeof(A) == 8 ? "f64" : "f32",
             names[store], OFFS, T, N, C, S);
    if (store == 0)
      check_problem<A, CAP, STORE_REG, OFFS>(&c, what);
    else if (store == 1)
      check_problem<A, CAP, STORE_SHARED, OFFS>(&c, what);
    else
      check_problem<A, CAP, STORE_GLOBAL, OFFS>(&c, what);
    case_free(&c);
  }
}

// Long sequences in f32 (issue 21): the exact gradient's relative error norm and each
// sample's loss relative error against the f64 reference, register tier, full lengths. Without
// frames (one log-space offset for all states) this case measured 3.3e-3 on the gradient and
// 9.8e-7 on the loss; with frames 2.2e-6 and 3.9e-8.
template <int CAP> static void check_long_f32(uint64_t seed, int T, int N, int C, int S) {
  ctc_case c = make_case(seed, T, N, C, S, 0, 0);
  for (int n = 0; n < N; ++n) {
    c.in_len[n] = T;
    c.tl[n] = S;
  }
  plan_t p = plan_for(S, STORE_REG, sizeof(float));
  std::vector<float> lp((size_t)T * N * C + 1);
  for (size_t i = 0; i < (size_t)T * N * C; ++i)
    c.lp[i] = (double)(lp[i] = (float)c.lp[i]);
  ref_out r = reference(&c);
  std::vector<long long> targets((size_t)N * S + 1), in_len(N, T), tgt_len(N, S);
  for (size_t i = 0; i < (size_t)N * S; ++i)
    targets[i] = c.labels[i];
  const size_t L = 2 * (size_t)S + 1;
  std::vector<float> alpha((size_t)N * T * L + 1), beta((size_t)N * T * L + 1), nll(N + 1);
  std::vector<float> grad((size_t)T * N * C + 1, NAN), g(N + 1, 1.0f);
  std::vector<int> info(INFO_INTS * N + 2), link((size_t)N * 2 * S + 2);
  std::vector<float> frames((size_t)N * 2 * T * p.nt + 1);
  alpha_args a;
  std::memset(&a, 0, sizeof a);
  a.lp = lp.data();
  a.lp_st_t = (long long)N * C;
  a.lp_st_n = C;
  a.lp_st_c = 1;
  a.tgt = targets.data();
  a.tgt_st_n = S;
  a.tgt_st_s = 1;
  a.tgt_numel = (long long)N * S;
  a.in_len = in_len.data();
  a.tgt_len = tgt_len.data();
  a.in_len_st = a.tgt_len_st = 1;
  a.T = T;
  a.N = N;
  a.C = C;
  a.s_max = S;
  a.alpha = alpha.data();
  a.beta = beta.data();
  a.ab_st_n = (long long)(T * L);
  a.ab_st_t = a.ab_len = (int)L;
  a.ab_st_s = 1;
  a.nll = nll.data();
  a.nll_st = 1;
  a.info = info.data();
  a.link = link.data();
  a.link_st = 2 * S;
  a.frames = frames.data();
  run_alpha<float, CAP, STORE_REG, OFFS_PADDED, MODE_AB>(p, 3, a);
  grad_args ga = grad_args_for<float>(p, a, lp.data(), grad.data(), g.data(), T, N, C);
  ga.link_smem = 1; // links alone in shared memory
  launch(&grad_kernel<float, float, false, false>, (unsigned)(ga.chunks * N), 1, 256,
         grad_smem_bytes<float>(ga, false), ga);
  double num = 0, den = 0;
  for (size_t i = 0; i < (size_t)T * N * C; ++i) {
    num += (grad[i] - r.grad[i]) * (grad[i] - r.grad[i]);
    den += r.grad[i] * r.grad[i];
  }
  const double grad_err = sqrt(num / den);
  printf("f32 T=%d N=%d C=%d S=%d: gradient relative error norm %.3g\n", T, N, C, S, grad_err);
  if (!(grad_err <= 1e-4) || !(den > 0)) {
    fprintf(stderr, "f32 T=%d S=%d: gradient relative error norm %.3g > 1e-4\n", T, S, grad_err);
    ++test_failures;
  }
  for (int n = 0; n < N; ++n) {
    const double rel = fabs(nll[n] - r.nll[n]) / fabs(r.nll[n]);
    printf("  loss[%d] %.9g, reference %.9g, relative error %.3g\n", n, (double)nll[n], r.nll[n],
           rel);
    if (!(rel <= 1e-6)) {
      fprintf(stderr, "f32 T=%d S=%d: loss[%d] relative error %.3g > 1e-6\n", T, S, n, rel);
      ++test_failures;
    }
  }
  ref_free(&r);
  case_free(&c);
}

// Device-memory values out of range: input length > T, target length > S (padded) or negative
// (concatenated: later samples lose their offsets too), a label equal to blank, a label >= C.
static unsigned corrupt_padded(std::vector<long long> &il, std::vector<long long> &tl,
                               std::vector<long long> &tg, const ctc_case *c) {
  il[1] = c->T + 1;
  tl[2] = c->S + 1;
  tl[3] = 2;
  tg[(size_t)3 * c->S + 1] = c->blank;
  tl[4] = 1;
  tg[(size_t)4 * c->S] = c->C;
  return 1u << 1 | 1u << 2 | 1u << 3 | 1u << 4;
}

static unsigned corrupt_concat(std::vector<long long> &il, std::vector<long long> &tl,
                               std::vector<long long> &tg, const ctc_case *c) {
  (void)tg;
  il[0] = -1;
  tl[3] = -2; /* samples 3.. lose their offsets */
  unsigned bad = 1u;
  for (int n = 3; n < c->N; ++n)
    bad |= 1u << n;
  return bad;
}

int main() {
  {
    ctc_case c = make_case(7, 16, 6, 5, 3, 0, 0);
    check_problem<float, 32, STORE_REG, OFFS_PADDED>(&c, "invalid padded", corrupt_padded);
    case_free(&c);
    c = make_case(8, 16, 6, 5, 3, 0, 0);
    check_problem<float, 32, STORE_SHARED, OFFS_DEVICE>(&c, "invalid concatenated", corrupt_concat);
    case_free(&c);
  }
  all_tiers<float, 32, OFFS_PADDED>(1, 12, 5, 6, 3, 0);        // one warp, K = 2
  all_tiers<double, 32, OFFS_HOST>(2, 20, 4, 7, 9, 2);         // concatenated, blank 2
  all_tiers<float, 128, OFFS_DEVICE>(3, 60, 4, 9, 40, 1);      // several warps, device offsets
  all_tiers<float, 512, OFFS_PADDED>(4, 160, 3, 12, 150, 0);   // K = 4
  all_tiers<double, 1024, OFFS_PADDED>(5, 300, 2, 20, 260, 3); // K = 8
  check_long_f32<2048>(9, 1200, 1, 40, 840);                   // issue 21: long f32
  return test_finish("test_ctc_emulated");
}
