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
// adds exp(lp[t, c]). Blank states are summed by a butterfly (every lane gets the same bits); label
// states are summed along their label chain by the lane that owns the first occurrence. The row is
// first filled with the value of a class absent from the target, then the blank and label classes
// are written.
//
// At most 64 registers (four blocks an SM): the kernel is latency-bound, and the f32 frames'
// loads and sums took it to 80 registers and three blocks without the bound (no spills at 64).
template <class F, class G, bool TORCH>
__global__ void __launch_bounds__(JITOPS__CTC_GRAD_THREADS, 4) grad_kernel(const grad_args a) {
  typedef acc_t<F> A;
  typedef logmath<A> M;
  constexpr bool FR = frames_of<A>::on;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n = blockIdx.x / a.chunks;
  const int chunk = blockIdx.x % a.chunks;
  const int rows_per_block = (a.T + a.chunks - 1) / a.chunks;
  const int t_begin = chunk * rows_per_block;
  const int t_end = min(a.T, t_begin + rows_per_block);

  const int in_len = a.info[INFO_INTS * n];
  const int tl = a.info[INFO_INTS * n + 1];
  const A base = (A)__int_as_float(a.info[INFO_INTS * n + 2]); // f32: log2 P = base + rest
  const A rest = (A)__int_as_float(a.info[INFO_INTS * n + 3]);
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
    for (int i = threadIdx.x; i < LINK_INTS * tl; i += blockDim.x)
      mine[i] = link[i];
    link = mine;
  }
  __syncthreads();
  constexpr int U = 4; // states (and classes) per lane in flight: loads first, then math

  constexpr int WARPS = JITOPS__CTC_GRAD_THREADS / 32;
  for (int t = t_begin + warp; t < t_end; t += WARPS) {
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
    const float *farow = FR ? a.frames + ((long long)n * 2 * a.T + t) * a.frame_nt : nullptr;
    const float *fbrow = FR ? farow + (long long)a.T * a.frame_nt : nullptr;
    A blank_sum = 0;
    for (int s0 = lane; s0 < L; s0 += 32 * U) {
      A av[U], bv[U], lv[U];
      A fv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int s = s0 + 32 * u;
        av[u] = bv[u] = M::ninf();
        lv[u] = lpb;
        fv[u] = 0;
        if (s < L) {
          av[u] = arow[s];
          bv[u] = brow[s];
          if (s & 1)
            lv[u] = cvt(lrow[(long long)link[LINK_INTS * ((s - 1) >> 1)] * a.lp_st_c]);
          if constexpr (FR)
            fv[u] = (farow[s >> a.frame_shift] - base) + fbrow[(L - 1 - s) >> a.frame_shift];
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int s = s0 + 32 * u;
        // alpha + beta is -inf exactly when lp is (or the state is off every path): gamma = 0,
        // not the NaN of -inf - -inf.
        A ab = av[u] + bv[u];
        A x;
        if constexpr (FR)
          x = ab + ((fv[u] - rest) - lv[u] * M::to_log2);
        else
          x = (ab - lv[u] + nll) * M::to_log2;
        A gam = ab == M::ninf() ? A(0) : M::ex(x);
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
      int w = link[LINK_INTS * j + 1];
      if (!(w >> LINK_FIRST_BIT))
        continue;
      int c = link[LINK_INTS * j];
      A sum = 0;
      for (int i = j; i < LINK_END; i = link[LINK_INTS * i + 1] & LINK_END)
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

} // namespace ctc
} // namespace jitops
