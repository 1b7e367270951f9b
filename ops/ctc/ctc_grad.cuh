// jitops/ctc_grad.cuh — the gradient with respect to log_probs, from the alpha and beta that
// the MODE_AB pass left in the workspace.
#pragma once
#include "jitops/ctc_common.cuh"

namespace jitops {
namespace ctc {

// ---- gradient -------------------------------------------------------------------------------

// One warp per (t, n) row. gamma_t(s) = exp(alpha_t(s) + beta_t(s) - lp[t, l'_s] + nll) is the
// posterior of state s at time t. In f32 it is formed from small quantities only: alpha and
// beta in their frames (log2), plus an exact integer, the frames' sum less that of log2 P, less
// P's small f32 remainder (jitops/ctc_abi.h, info and frames). The exact gradient of nll
// w.r.t. lp[t, c] is minus the sum of gamma over the states labelled c, and PyTorch's convention
// adds exp(lp[t, c]).
//
// A lane takes pairs of states: blank state 2j and label state 2j + 1 (one frame of alpha when
// K >= 2), so that every lane does the same work. Blank states are summed by a butterfly (every
// lane gets the same bits). Label posteriors are written to a row of their own and summed along
// their label's chain (link), first occurrence first. With TABLES (the common case: the
// sample's links, each class's first position and the warps' rows fit the default shared
// memory, jitops/ctc_abi.h) one pass over the classes writes every class once, each lane
// walking its class's chain. Otherwise the links may stay in global memory, the posteriors go
// over alpha's odd states, the row is filled with the value of a class absent from the target,
// and the lanes that own a label's first occurrence then write the label classes.
//
// The kernel's time goes to issuing instructions more than to waiting on memory: hence the
// pairs, the one pass over the classes, and shared memory the compiler can address as such
// (bench/NOTES-ctc.md).

// The posterior of one state from alpha + beta `ab`: in f32 (FR) in log2, with the state's two
// frames less log2 P's frame, `f`, and P's small remainder `rest`; in f64 in natural logs. 0
// where ab is -inf (the state is off every path, or past the row), not the NaN of -inf - -inf.
template <bool FR, class M, class A>
__device__ __forceinline__ A posterior(A ab, A f, A rest, A lp, A nll) {
  A x;
  if constexpr (FR)
    x = ab + fma_acc(-lp, M::to_log2, f - rest);
  else
    x = (ab - lp + nll) * M::to_log2;
  return ab == M::ninf() ? A(0) : M::ex(x);
}

// What every row of a block's sample shares.
template <class A> struct grad_sample {
  int n, in_len, tl, L;
  A base, rest, nll, g; // f32: log2 P = base + rest; g the upstream gradient, reduced
  bool valid, infinite;
};

// The sum of a label's posteriors along its chain from position `first`, in position order;
// position i's posterior is gamma[i << gamma_shift].
template <class A>
__device__ __forceinline__ A chain_sum(const int *link, const A *gamma, int gamma_shift,
                                       int first) {
  A sum = 0;
  for (int i = first; i < LINK_END; i = link[LINK_INTS * i + 1] & LINK_END)
    sum += gamma[i << gamma_shift];
  return sum;
}

// One row's label posteriors into gamma[j << gamma_shift] (label state 2j + 1); returns the sum
// of its blank posteriors, the same bits in every lane. P pairs per lane are in flight: loads
// first, then math.
template <int P, class F, class A, bool FR, class M>
__device__ __forceinline__ A row_posteriors(const grad_args &a, const grad_sample<A> &sm,
                                            const A *arow, const A *brow, const float *farow,
                                            const float *fbrow, const F *lrow, A lpb,
                                            const int *link, A *gamma, int gamma_shift, int lane) {
  const int tl = sm.tl, L = sm.L;
  A blank_sum = 0;
  for (int j0 = lane; j0 <= tl; j0 += 32 * P) {
    A a0[P], a1[P], b0[P], b1[P], f0[P], f1[P], lv[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int j = j0 + 32 * p, s = 2 * j;
      a0[p] = a1[p] = b0[p] = b1[p] = M::ninf();
      f0[p] = f1[p] = 0;
      lv[p] = lpb;
      if (j <= tl) {
        a0[p] = arow[s];
        b0[p] = brow[s];
        if constexpr (FR) {
          const A fa = farow[s >> a.frame_shift] - sm.base;
          f0[p] = fa + fbrow[(L - 1 - s) >> a.frame_shift];
          f1[p] = a.frame_shift ? fa : farow[s + 1] - sm.base;
        }
        if (j < tl) {
          a1[p] = arow[s + 1];
          b1[p] = brow[s + 1];
          lv[p] = cvt(lrow[(long long)link[LINK_INTS * j] * a.lp_st_c]);
          if constexpr (FR)
            f1[p] += fbrow[(L - 2 - s) >> a.frame_shift];
        }
      }
    }
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int j = j0 + 32 * p;
      blank_sum += posterior<FR, M>(a0[p] + b0[p], f0[p], sm.rest, lpb, sm.nll);
      const A gam = posterior<FR, M>(a1[p] + b1[p], f1[p], sm.rest, lv[p], sm.nll);
      if (j < tl)
        gamma[j << gamma_shift] = gam;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    blank_sum += __shfl_xor_sync(0xffffffffu, blank_sum, o);
  return blank_sum;
}

// With tables: every class of the row once. A class in the target is minus g times its chain's
// posteriors (head: its first position), the blank minus g times the blank sum; PyTorch's
// convention adds g·exp(lp) to every class.
template <class F, class A, bool TORCH, class M>
__device__ __forceinline__ void row_classes(const grad_args &a, const grad_sample<A> &sm,
                                            const F *lrow, F *grow, A blank_sum, const int *link,
                                            const int *head, const A *gamma, int lane) {
  constexpr int U = 4; // classes per lane in flight
  for (int c0 = lane; c0 < a.C; c0 += 32 * U) {
    A v[U];
    int h[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + 32 * u;
      v[u] = A(0);
      h[u] = LINK_END;
      if (c < a.C) {
        if (TORCH)
          v[u] = cvt(lrow[(long long)c * a.lp_st_c]);
        h[u] = head[c];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + 32 * u;
      if (c >= a.C)
        continue;
      const A e = TORCH ? mul_rn(sm.g, M::ex(v[u] * M::to_log2)) : A(0);
      A out = e;
      if (c == a.blank || h[u] != LINK_END) {
        const A sum = c == a.blank ? blank_sum : chain_sum(link, gamma, 0, h[u]);
        out = TORCH ? fma_acc(-sm.g, sum, e) : mul_rn(-sm.g, sum);
      }
      store(grow + (long long)c * a.g_st_c, out);
    }
  }
}

// Without tables: the row filled with the value of an absent class, then each label class by
// the lane owning its first occurrence (posteriors at gamma[2j], over alpha's odd states), then
// the blank.
template <class F, class A, bool TORCH, class M>
__device__ __forceinline__ void row_classes_global(const grad_args &a, const grad_sample<A> &sm,
                                                   const F *lrow, F *grow, A blank_sum, A lpb,
                                                   const int *link, const A *gamma, int lane) {
  constexpr int U = 4;
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
        store(grow + (long long)c * a.g_st_c, TORCH ? sm.g * M::ex(v[u] * M::to_log2) : A(0));
    }
  }
  __syncwarp();
  for (int j = lane; j < sm.tl; j += 32) {
    int w = link[LINK_INTS * j + 1];
    if (!(w >> LINK_FIRST_BIT))
      continue;
    int c = link[LINK_INTS * j];
    const A e =
        TORCH ? mul_rn(sm.g, M::ex(cvt(lrow[(long long)c * a.lp_st_c]) * M::to_log2)) : A(0);
    const A sum = chain_sum(link, gamma, 1, j);
    const A v = TORCH ? fma_acc(-sm.g, sum, e) : mul_rn(-sm.g, sum);
    store(grow + (long long)c * a.g_st_c, v);
  }
  if (lane == 0) {
    const A e = TORCH ? mul_rn(sm.g, M::ex(lpb * M::to_log2)) : A(0);
    const A v = TORCH ? fma_acc(-sm.g, blank_sum, e) : mul_rn(-sm.g, blank_sum);
    store(grow + (long long)a.blank * a.g_st_c, v);
  }
}

// The block's rows, t_begin + warp, + WARPS, ... below t_end. TABLES: link, head and gamma (this
// warp's row) are shared memory.
template <class F, bool TORCH, bool TABLES, class A>
__device__ __forceinline__ void grad_rows(const grad_args &a, const grad_sample<A> &sm, int t_begin,
                                          int t_end, const int *link, const int *head, A *gamma) {
  typedef logmath<A> M;
  constexpr bool FR = frames_of<A>::on;
  // Pairs in flight: as many as 64 registers hold without spilling (sm_90, ptxas -v).
  constexpr int PAIRS = sizeof(A) == 4 ? 3 : 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n = sm.n;
  for (int t = t_begin + warp; t < t_end; t += JITOPS__CTC_GRAD_WARPS) {
    const F *lrow = (const F *)a.lp + (long long)t * a.lp_st_t + (long long)n * a.lp_st_n;
    F *grow = (F *)a.grad + (long long)t * a.g_st_t + (long long)n * a.g_st_n;
    const bool active = sm.valid && t < sm.in_len;
    if (!active || sm.infinite) {
      A v = !sm.valid ? M::nan() : !active ? A(0) : a.zero_infinity ? A(0) : M::nan();
      for (int c = lane; c < a.C; c += 32)
        store(grow + (long long)c * a.g_st_c, v);
      continue;
    }
    A *arow = (A *)a.alpha + (long long)n * a.ab_st_n + (long long)t * a.ab_st_t;
    const A *brow = (const A *)a.beta + (long long)n * a.ab_st_n + (long long)t * a.ab_st_t;
    const float *farow = FR ? a.frames + ((long long)n * 2 * a.T + t) * a.frame_nt : nullptr;
    const float *fbrow = FR ? farow + (long long)a.T * a.frame_nt : nullptr;
    const A lpb = cvt(lrow[(long long)a.blank * a.lp_st_c]);
    A *row_gamma = TABLES ? gamma : arow + 1;
    const A blank_sum = row_posteriors<PAIRS, F, A, FR, M>(
        a, sm, arow, brow, farow, fbrow, lrow, lpb, link, row_gamma, TABLES ? 0 : 1, lane);
    __syncwarp();
    if constexpr (TABLES)
      row_classes<F, A, TORCH, M>(a, sm, lrow, grow, blank_sum, link, head, gamma, lane);
    else
      row_classes_global<F, A, TORCH, M>(a, sm, lrow, grow, blank_sum, lpb, link, row_gamma, lane);
    __syncwarp();
  }
}

// At most 64 registers (four blocks an SM): the f32 frames' loads and sums took it to 80
// registers and three blocks without the bound (no spills at 64). TABLES: the host found room
// for the tables in shared memory (jitops/ctc_abi.h); each path is a kernel of its own, so that
// neither's registers bound the other's.
template <class F, class G, bool TORCH, bool TABLES>
__global__ void __launch_bounds__(JITOPS__CTC_GRAD_THREADS, 4) grad_kernel(const grad_args a) {
  typedef acc_t<F> A;
  grad_sample<A> sm;
  sm.n = blockIdx.x / a.chunks;
  const int n = sm.n;
  const int chunk = blockIdx.x % a.chunks;
  const int rows_per_block = (a.T + a.chunks - 1) / a.chunks;
  const int t_begin = chunk * rows_per_block;
  const int t_end = min(a.T, t_begin + rows_per_block);

  sm.in_len = a.info[INFO_INTS * n];
  sm.tl = a.info[INFO_INTS * n + 1];
  sm.base = (A)__int_as_float(a.info[INFO_INTS * n + 2]);
  sm.rest = (A)__int_as_float(a.info[INFO_INTS * n + 3]);
  sm.valid = sm.in_len >= 0;
  sm.nll = ((const A *)a.nll)[n];
  if (a.reduction == 0)
    sm.g = (A)cvt(((const G *)a.grad_loss)[(long long)n * a.grad_loss_st]);
  else
    sm.g = (A)cvt(((const G *)a.grad_loss)[0]);
  if (a.reduction == 2)
    sm.g = sm.g / (A)(sm.tl > 1 ? sm.tl : 1) / (A)a.N;
  sm.infinite = sm.nll == limits<A>::infinity();
  sm.L = 2 * sm.tl + 1;
  const bool rows = sm.valid && !sm.infinite && t_begin < sm.in_len; // any row to work on
  // The sample's labels and chains, read once per block.
  const int *link = a.link + (long long)n * a.link_st;
  if constexpr (TABLES) {
    unsigned char *smem = dynamic_smem();
    int *my_link = (int *)smem;
    int *head = (int *)(smem + JITOPS__CTC_GRAD_HEAD_OFFSET(a.link_st));
    A *gamma = (A *)(smem + JITOPS__CTC_GRAD_GAMMA_OFFSET(a.link_st, a.C)) +
               (long long)(threadIdx.x >> 5) * (a.link_st / 2);
    if (rows) {
      for (int i = threadIdx.x; i < LINK_INTS * sm.tl; i += blockDim.x)
        my_link[i] = link[i];
      for (int c = threadIdx.x; c < a.C; c += blockDim.x)
        head[c] = LINK_END;
    }
    __syncthreads();
    if (rows)
      for (int j = threadIdx.x; j < sm.tl; j += blockDim.x) {
        const int c = my_link[LINK_INTS * j];
        if ((my_link[LINK_INTS * j + 1] >> LINK_FIRST_BIT) && (unsigned)c < (unsigned)a.C)
          head[c] = j;
      }
    __syncthreads();
    grad_rows<F, TORCH, true>(a, sm, t_begin, t_end, my_link, head, gamma);
  } else {
    if (a.link_smem && rows) {
      int *mine = (int *)dynamic_smem();
      for (int i = threadIdx.x; i < LINK_INTS * sm.tl; i += blockDim.x)
        mine[i] = link[i];
      link = mine;
    }
    __syncthreads();
    grad_rows<F, TORCH, false, A>(a, sm, t_begin, t_end, link, nullptr, nullptr);
  }
}

} // namespace ctc
} // namespace jitops
