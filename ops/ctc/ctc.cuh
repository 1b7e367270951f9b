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
// runs in natural logs with exp/log1p. The public alpha/beta and nll are natural logs. In f32
// each thread keeps its states relative to an integer frame of its own, so that they stay
// small and accurate however long the sequence (ctc_common.cuh, frames); the gradient's
// workspace rows keep them in their frames, beside the frames.
//
// Files: ctc_common.cuh (the ABI's names, primitives, log-space arithmetic), ctc_sample.cuh
// (a sample's lengths, targets and labels), ctc_recursion.cuh (the tiers of the recursion),
// ctc_grad.cuh (the gradient), and this one: the recursion kernel and the batch reduction.
// What the host code shares with them (template parameters, capacities, block shapes, the
// argument structs) is in jitops/ctc_abi.h.
#pragma once
#include "jitops/ctc_common.cuh"
#include "jitops/ctc_grad.cuh"
#include "jitops/ctc_recursion.cuh"
#include "jitops/ctc_sample.cuh"

namespace jitops {
namespace ctc {

// ---- the recursion kernel -------------------------------------------------------------------

// Grid (N, directions): y = 0 alpha, y = 1 beta (MODE_AB), y = 2 label grouping (MODE_AB with
// a link buffer). F: log_probs type; TI: target index type; LI: length type (device lengths;
// host lengths arrive as long long); OFFS: target layout; CAP: state capacity bucket; STORE:
// where the states live; MODE: what is written; O: the loss type for MODE_LOSS.
template <class F, class TI, class LI, int OFFS, int CAP, int STORE, int MODE, class O>
__global__ void __launch_bounds__(config<CAP, STORE>::NT_MAX) alpha_kernel(const alpha_args a) {
  typedef acc_t<F> A;
  const int n = blockIdx.x;
  const int dir = MODE == MODE_AB ? (int)blockIdx.y : 0; // the loss modes run alpha only
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
    __shared__ float haloc[2][32];
    __shared__ A fin[2];
    __shared__ float finc[2];
    run_registers<F, TI, A, CAP, MODE, O>(a, n, sm, dir == 1, halo, haloc, fin, finc);
  } else {
    __shared__ A halo[2][JITOPS__CTC_MEM_MAX_THREADS];
    __shared__ float haloc[2][JITOPS__CTC_MEM_MAX_THREADS];
    __shared__ A fin[2];
    __shared__ float finc[2];
    constexpr int K = config<CAP, STORE>::K;
    A *st;
    int *lab;
    if constexpr (STORE == STORE_SHARED) {
      st = (A *)dynamic_smem();
    } else {
      st = (A *)((char *)a.mem + ((long long)n * 2 + dir) * a.mem_block_bytes);
    }
    lab = (int *)(st + (long long)K * blockDim.x);
    run_memory<F, TI, A, CAP, STORE, MODE, O>(a, n, sm, dir == 1, st, lab, halo, haloc, fin, finc);
  }
}

// ---- reduction over the batch ---------------------------------------------------------------

// One block. none: converts and copies; sum/mean: a fixed-order sum (deterministic).
template <class A, class O>
__global__ void __launch_bounds__(JITOPS__CTC_REDUCE_THREADS) reduce_kernel(const reduce_args r) {
  __shared__ A part[JITOPS__CTC_REDUCE_THREADS];
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
