// jitops/ctc_recursion.cuh — one direction of the alpha recursion for one sample: how a
// capacity bucket spreads its states over a block, the register tier, the shared- and
// global-memory tiers, and what a finished recursion writes.
#pragma once
#include "jitops/ctc_common.cuh"
#include "jitops/ctc_sample.cuh"

namespace jitops {
namespace ctc {

// ---- a capacity bucket's block ------------------------------------------------------------

// States per thread (K, jitops/ctc_abi.h, which the host sizes its launch by), the most
// threads a block of the bucket takes, and the emissions the register tier loads ahead.
template <int CAP, int STORE> struct config {
  static constexpr int K = JITOPS__CTC_K(CAP, STORE);
  static constexpr int NT_MAX = CAP / K < 32 ? 32 : CAP / K;
  // Time steps of emissions loaded ahead (register tier): registers allow more with few threads.
  // The compiler still copies the ring's fresh loads into place once per PF steps, waiting
  // for their latency there: a deep ring (where two states per thread leave registers for it)
  // makes that wait rare.
  static constexpr int PF = K == 2 ? 8 : NT_MAX <= 256 ? 4 : 2;
};

// Row staging for MODE_AB in the register tier: the word of state s in a row buffer
// (JITOPS__CTC_STAGED: one word of padding per 32, against bank conflicts).
__device__ __forceinline__ int staged(int s) {
  return JITOPS__CTC_STAGED(s);
}

// ---- outputs of one recursion ---------------------------------------------------------------

// Writes the per-sample results once the final states (in frames fb and fl) are known (forward
// direction only).
template <class A, class O, int MODE>
__device__ void finish_sample(const alpha_args &a, int n, const sample &sm, A last_blank,
                              A last_label, float fb = 0, float fl = 0) {
  typedef logmath<A> M;
  // log2 (f32) or ln (f64) of the sample's probability: base + p, with p small in f32 (the
  // larger final state's frame is the base), so that the nll is formed in f64 from exact parts.
  float base = 0;
  A p;
  if constexpr (frames_of<A>::on) {
    base = (double)fb + last_blank >= (double)fl + last_label ? fb : fl;
    p = lae2(last_blank + (A)(fb - base), last_label + (A)(fl - base));
  } else {
    p = lae2(last_blank, last_label);
  }
  A nll = M::nan();
  if (sm.valid) {
    if constexpr (frames_of<A>::on)
      nll = (A)(-((double)base + (double)p) * 0.6931471805599453);
    else
      nll = A(0) - p * M::to_ln;
  }
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
      a.info[INFO_INTS * n] = sm.valid ? sm.in_len : -1;
      a.info[INFO_INTS * n + 1] = sm.tl;
      a.info[INFO_INTS * n + 2] = frames_of<A>::on ? (int)__float_as_uint(base) : 0;
      a.info[INFO_INTS * n + 3] = frames_of<A>::on ? (int)__float_as_uint((float)p) : 0;
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

// Ends the sample as invalid when a thread of the block found an invalid label (`bad`); true
// when it did. Every thread of the block must call it: it synchronizes.
template <class A, class O, int MODE>
__device__ __forceinline__ bool end_if_bad_labels(const alpha_args &a, int n, const sample &sm,
                                                  bool rev, bool bad) {
  if (!__syncthreads_or(bad))
    return false;
  finish_invalid_sample<A, O, MODE>(a, n, sm, rev);
  return true;
}

// Where a direction's step t and state s lie in the sample's own coordinates: alpha runs
// forwards; beta (MODE_AB's second direction) backwards, over reversed rows and states. A
// run-time value rather than a template argument, so that the backward's kernel compiles the
// recursion once for both directions (its first call compiles less than half the code).
struct direction {
  int row0, row_sign, state0, state_sign;
  __device__ __forceinline__ static direction of(bool rev, int in_len, int L) {
    return rev ? direction{in_len - 1, -1, L - 1, -1} : direction{0, 1, 0, 1};
  }
  __device__ __forceinline__ int row(int t) const {
    return row0 + row_sign * t;
  }
  __device__ __forceinline__ int state(int s) const {
    return state0 + state_sign * s;
  }
};

// ---- register tier --------------------------------------------------------------------------

// One direction of the recursion for one sample, K states per thread in registers.
// halo[2][32]: the last state of each warp, previous row (ping-pong), and haloc its frame;
// fin[2]: final states, and finc their frames.
template <class F, class TI, class A, int CAP, int MODE, class O>
__device__ void run_registers(const alpha_args &a, int n, const sample &sm, bool rev, A (*halo)[32],
                              float (*haloc)[32], A *fin, float *finc) {
  typedef logmath<A> M;
  constexpr bool FR = frames_of<A>::on;
  typedef config<CAP, STORE_REG> cfg;
  // MODE_AB at K >= 4 loads two steps ahead, not four: its steps also stage and store a row,
  // which hides the loads' latency, and with the deeper ring it ran 4-17% slower (H100, S 150 to
  // 1000, f32 and bf16; the loss kernels keep theirs: for them PF 2 was 5-18% slower).
  constexpr int K = cfg::K, H = K / 2, PF = MODE == MODE_AB && K >= 4 ? 2 : cfg::PF;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nwarps = blockDim.x >> 5;
  const int L = 2 * sm.tl + 1;
  const int in_len = sm.in_len;
  const int s0 = tid * K;
  const direction dir = direction::of(rev, in_len, L);

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
      cls[h] = label_of<TI>(a, sm, s, rev, &sk, &bad);
      if (sk)
        skipmask |= 1u << h;
    }
  }
  if (tid == 0) {
    fin[1] = M::ninf();
    finc[1] = 0;
  }
  if (lane == 31) {
    halo[0][warp] = M::ninf();
    haloc[0][warp] = 0;
  }
  // The halo's slots by address (shared_address says why): *_own is this warp's slot in
  // buffer 0, halo_slot(own, size, b, w) warp w's in buffer b.
  const smem_addr halo_own = shared_address(&halo[0][0]) + warp * (int)sizeof(A);
  const smem_addr haloc_own =
      FR ? shared_address(&haloc[0][0]) + warp * (int)sizeof(float) : smem_addr();
  auto halo_slot = [&](smem_addr own, int size, int b, int w) {
    return own + (b * 32 + w - warp) * size;
  };
  if (end_if_bad_labels<A, O, MODE>(a, n, sm, rev, bad))
    return;

  const F *lp = (const F *)a.lp + (long long)n * a.lp_st_n;
  const long long stc = a.lp_st_c;
  const long long blank_off = (long long)a.blank * stc;

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
  auto row_of = [&](int t) -> const F * { return lp + (long long)dir.row(t) * a.lp_st_t; };
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
    out = (A *)(rev ? a.beta : a.alpha) + (long long)n * a.ab_st_n;
  int buf = 0;

  // MODE_AB: rows go through shared memory (two buffers, alternating) so that the global
  // stores are coalesced: during step t each thread writes positions tid, tid + NT, ... of
  // row t - 1. Stored straight from registers, each of a warp's K stores touched 32 sectors
  // (lanes K states apart), and the pass was store-bound.
  A *rowbuf = MODE == MODE_AB ? (A *)dynamic_smem() : nullptr;
  const int row_words = staged((int)blockDim.x * K) + 1;
  auto flush_row = [&](int t) {
    const A *src = rowbuf + (t & 1) * row_words;
    A *dst = out + (long long)dir.row(t) * a.ab_st_t;
    for (int i = tid; i < L; i += blockDim.x)
      dst[(long long)i * a.ab_st_s] = src[staged(dir.state(i))] * (FR ? A(1) : M::to_ln);
  };
  // f32: the frames of this row, for the gradient (f32 rows are staged in their final units:
  // log2 in frames for the workspace, natural logs for the public alpha/beta).
  float *frame_row = nullptr;
  if (MODE == MODE_AB && FR && a.frames)
    frame_row = a.frames + ((long long)n * 2 + (rev ? 1 : 0)) * a.T * blockDim.x;

  A up = __shfl_up_sync(0xffffffffu, st[K - 1], 1); // the left neighbour's last state
  // f32 frames move once per PF steps (p == 0): per step that costs one add (the halo's frame
  // difference, dh), where moving them every step cost up to 30 % of the step at small S.
  // fr: this thread's frame; hf: its left neighbour's; up_fr: hf after the last move.
  static_assert(PF >= 2, "frames move at p == 0 and the neighbours' are taken at p == 1");
  float fr = 0, hf = 0, dh = 0, up_fr = 0;
  // A state's new value from its emission `e` (scaled here to the log space) and its
  // predecessors' combined value `sum`: where the frame moves (f32, place 0), the emission less
  // the shift, then the sum; elsewhere the scaling fused with the sum. Each an explicit fma, so
  // that every build rounds alike (common.cuh, fma_acc).
  auto emit = [](A e, bool first, A shift, A sum) {
    return FR && first ? fma_acc(e, M::to_log2, -shift) + sum : fma_acc(e, M::to_log2, sum);
  };
  // One time step, reading its emissions from `slot` and refilling it for step t + PF; `first`
  // and `second` say whether its place in the ring is 0 or 1 (constants once unrolled), where
  // the f32 frames move.
  auto step = [&](int t, F *slot, bool first, bool second) {
    if (l2_prefetch && t + PFL < in_len) {
      const F *fut = row_of(t + PFL) + (long long)tid * (128 / (int)sizeof(F));
      prefetch_l2(fut);
    }
    // This step's emissions, then the loads for step t + PF into the freed slot (clamped to
    // the last row, so that no branch splits the step): issued before the halo wait, they
    // cost no time on the step's critical path.
    const A eb = cvt(slot[0]);
    A em[H];
#pragma unroll
    for (int h = 0; h < H; ++h)
      em[h] = cvt(slot[1 + h]);
    fetch(t + PF < in_len ? t + PF : in_len - 1, slot);
    // Halo: the previous row's state s0 - 1 (shuffled at the end of the previous step).
    A h1 = up;
    if (lane == 0) {
      h1 = M::ninf();
      if (warp > 0)
        load_shared(halo_slot(halo_own, (int)sizeof(A), buf, warp - 1), h1);
    }
    // f32: at p == 0 the new row's frame (the new row moves into it through its emissions); at
    // p == 1 the neighbour's new frame. The halo moves into this thread's frame (exact).
    A shift = 0;
    if constexpr (FR) {
      if (first) {
        const float nf = frame_step(&fr, max_of<K>(st), hf);
        shift = nf - fr;
        dh = hf - fr;
        fr = nf;
      } else if (second) {
        hf = up_fr;
        if (lane == 0) {
          hf = fr;
          if (warp > 0)
            load_shared(halo_slot(haloc_own, (int)sizeof(float), buf, warp - 1), hf);
        }
        dh = hf - fr;
      }
      h1 = h1 + dh;
    }
    A nx[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      A p0 = st[k];
      A p1 = k >= 1 ? st[k - 1] : h1;
      if ((k & 1) == 0) {
        nx[k] = emit(eb, first, shift, lae2(p0, p1));
      } else {
        A p2 = k >= 2 ? st[k - 2] : h1;
        if (!((skipmask >> (k / 2)) & 1u))
          p2 = M::ninf();
        nx[k] = emit(em[k / 2], first, shift, lae3(p0, p1, p2));
      }
    }
#pragma unroll
    for (int k = 0; k < K; ++k)
      st[k] = nx[k];
    up = __shfl_up_sync(0xffffffffu, st[K - 1], 1);
    if (FR && first)
      up_fr = __shfl_up_sync(0xffffffffu, fr, 1);
    if (MODE == MODE_AB) {
      if (t > 0)
        flush_row(t - 1);
      A *mine = rowbuf + (t & 1) * row_words;
#pragma unroll
      for (int k = 0; k < K; ++k)
        mine[staged(s0 + k)] = FR && !frame_row ? (st[k] + fr) * M::to_ln : st[k];
      if (frame_row)
        frame_row[(long long)dir.row(t) * blockDim.x + tid] = fr;
    }
    if (nwarps > 1) {
      buf ^= 1;
      if (lane == 31) {
        store_shared(halo_slot(halo_own, (int)sizeof(A), buf, warp), st[K - 1]);
        if (FR && first)
          store_shared(halo_slot(haloc_own, (int)sizeof(float), buf, warp), fr);
      }
      __syncthreads();
    } else if (MODE == MODE_AB) {
      __syncwarp();
    }
  };
  if constexpr (QUICK_BUILD && MODE == MODE_AB) {
    // A backward's quick build (common.cuh) runs every step through one rolled copy, its slot
    // taken out of the ring and put back by selects, with `first` and `second` as the unrolled
    // copies have them: the same arithmetic, step by step, in one copy of the step instead of
    // PF + 2 (this kernel's quick compile 0.7-0.8 of the unrolled one's; it runs about 1.5
    // times slower until the full build lands). The loss kernels, which compile in less, keep
    // their unrolled loop.
#pragma unroll 1
    for (int t = 0; t < in_len; ++t) {
      const int p = t % PF;
      F slot[H + 1];
#pragma unroll
      for (int q = 0; q < PF; ++q)
        if (q == 0 || q == p)
#pragma unroll
          for (int i = 0; i <= H; ++i)
            slot[i] = ring[q][i];
      step(t, slot, p == 0, p == 1);
#pragma unroll
      for (int q = 0; q < PF; ++q)
        if (q == p)
#pragma unroll
          for (int i = 0; i <= H; ++i)
            ring[q][i] = slot[i];
    }
  } else {
    int t0 = 0;
    for (; t0 + PF <= in_len; t0 += PF) {
#pragma unroll
      for (int p = 0; p < PF; ++p)
        step(t0 + p, ring[p], p == 0, p == 1);
    }
    // The last in_len % PF steps. For the loss, unrolled like the loop. For MODE_AB, whose
    // kernel runs the recursion in both directions and is what a backward's first call compiles
    // when it takes no quick build, place 0 is peeled and places 1 and on run one rolled copy of
    // the step, its slot picked out of the ring by selects (indexed, the ring would leave its
    // registers): PF + 2 copies of the step rather than 2 PF. `first` stays a constant in every
    // copy, so each step's arithmetic, and its rounding, is the unrolled loop's.
    if constexpr (MODE == MODE_AB) {
      if (t0 < in_len)
        step(t0, ring[0], true, false);
#pragma unroll 1
      for (int p = 1; t0 + p < in_len; ++p) {
        F slot[H + 1];
#pragma unroll
        for (int q = 1; q < PF; ++q)
          if (q == p)
#pragma unroll
            for (int i = 0; i <= H; ++i)
              slot[i] = ring[q][i];
        step(t0 + p, slot, false, p == 1);
      }
    } else {
#pragma unroll
      for (int p = 0; p < PF; ++p)
        if (t0 + p < in_len)
          step(t0 + p, ring[p], p == 0, p == 1);
    }
  }
  if (MODE == MODE_AB && in_len > 0)
    flush_row(in_len - 1); // the last step ended with a barrier

  if (!rev) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (s0 + k == L - 1) {
        fin[0] = st[k];
        finc[0] = fr;
      }
      if (s0 + k == L - 2) {
        fin[1] = st[k];
        finc[1] = fr;
      }
    }
    __syncthreads();
    if (tid == 0)
      finish_sample<A, O, MODE>(a, n, sm, fin[0], fin[1], finc[0], finc[1]);
  }
  if (MODE == MODE_AB && a.fill)
    fill_outside<A>(a, n, sm, rev);
}

// ---- shared- and global-memory tiers --------------------------------------------------------

// Same recursion with the states in memory (shared or global, through one pointer). Thread
// `tid` owns states [tid*K, tid*K + K); state k of thread tid lives at st[k*NT + tid], and the
// word for its odd state 2h+1 (class, or ~class when the skip is allowed) at lab[h*NT + tid].
// halo[2][MEM_MAX_THREADS]: each thread's last state, previous row (ping-pong), and haloc its
// frame; fin[2]: final states, and finc their frames.
template <class F, class TI, class A, int CAP, int STORE, int MODE, class O>
__device__ void run_memory(const alpha_args &a, int n, const sample &sm, bool rev, A *st, int *lab,
                           A (*halo)[JITOPS__CTC_MEM_MAX_THREADS],
                           float (*haloc)[JITOPS__CTC_MEM_MAX_THREADS], A *fin, float *finc) {
  typedef logmath<A> M;
  constexpr bool FR = frames_of<A>::on;
  constexpr int K = config<CAP, STORE>::K, H = K / 2;
  constexpr int B = 4; // pairs of states per batch of emission loads

  const int tid = threadIdx.x, NT = blockDim.x;
  const int L = 2 * sm.tl + 1;
  const int in_len = sm.in_len;
  const int s0 = tid * K;
  const direction dir = direction::of(rev, in_len, L);

  bool bad = false;
  for (int h = 0; h < H; ++h) {
    int s = s0 + 2 * h + 1, w = a.blank;
    if (s < L) {
      bool sk;
      w = label_of<TI>(a, sm, s, rev, &sk, &bad);
      if (sk)
        w = ~w;
    }
    lab[h * NT + tid] = w;
  }
  for (int k = 0; k < K; ++k)
    st[k * NT + tid] = (tid == 0 && k == 0) ? A(0) : M::ninf();
  if (tid == 0) {
    fin[1] = M::ninf();
    finc[1] = 0;
  }
  halo[0][tid] = M::ninf();
  haloc[0][tid] = 0;
  if (end_if_bad_labels<A, O, MODE>(a, n, sm, rev, bad))
    return;

  const F *lp = (const F *)a.lp + a.lp_st_n * n;
  const long long stc = a.lp_st_c;
  const long long blank_off = (long long)a.blank * stc;
  const bool l2_prefetch = stc == 1 && (long long)tid * (128 / (int)sizeof(F)) < a.C;
  A *out = nullptr;
  if (MODE == MODE_AB)
    out = (A *)(rev ? a.beta : a.alpha) + (long long)n * a.ab_st_n;
  float *frame_row = nullptr; // as in run_registers
  if (MODE == MODE_AB && FR && a.frames)
    frame_row = a.frames + ((long long)n * 2 + (rev ? 1 : 0)) * a.T * NT;
  int buf = 0;
  float fr = 0;                       // this thread's frame (f32)
  A mx = tid == 0 ? A(0) : M::ninf(); // the largest of its states (f32; NaN skipped)

  for (int t = 0; t < in_len; ++t) {
    const long long tt = dir.row(t);
    const F *row = lp + tt * a.lp_st_t;
    if (l2_prefetch && t + 16 < in_len) {
      const F *fut =
          lp + (long long)dir.row(t + 16) * a.lp_st_t + (long long)tid * (128 / (int)sizeof(F));
      prefetch_l2(fut);
    }
    A o1 = tid > 0 ? halo[buf][tid - 1] : M::ninf(); // previous row at s - 1
    A shift = 0;
    if constexpr (FR) { // as in run_registers
      const float hf = tid > 0 ? haloc[buf][tid - 1] : fr;
      const float nf = frame_step(&fr, mx, hf);
      shift = nf - fr;
      o1 = o1 + (hf - fr);
      fr = nf;
      mx = M::ninf();
    }
    const A eb = fma_acc(cvt(row[blank_off]), M::to_log2, -shift);
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
        A nl = fma_acc(cvt(e[b]), M::to_log2, -shift) + lae3(q0, p0, p2);
        st[k * NT + tid] = nb;
        st[(k + 1) * NT + tid] = nl;
        o1 = q0;
        if constexpr (FR)
          mx = fmaxf(mx, fmaxf(nb, nl));
        if (MODE == MODE_AB) {
          // f32: log2 in frames for the workspace, natural logs for the public alpha/beta.
          const A to = FR && !frame_row ? (A)fr : A(0);
          const A scale = FR && frame_row ? A(1) : M::to_ln;
          int s = s0 + k;
          if (s < L)
            orow[(long long)dir.state(s) * a.ab_st_s] = (nb + to) * scale;
          if (s + 1 < L)
            orow[(long long)dir.state(s + 1) * a.ab_st_s] = (nl + to) * scale;
        }
      }
    }
    if (frame_row)
      frame_row[tt * NT + tid] = fr;
    buf ^= 1;
    halo[buf][tid] = st[(K - 1) * NT + tid];
    haloc[buf][tid] = fr;
    __syncthreads();
  }

  if (!rev) {
    for (int k = 0; k < K; ++k) {
      if (s0 + k == L - 1) {
        fin[0] = st[k * NT + tid];
        finc[0] = fr;
      }
      if (s0 + k == L - 2) {
        fin[1] = st[k * NT + tid];
        finc[1] = fr;
      }
    }
    __syncthreads();
    if (tid == 0)
      finish_sample<A, O, MODE>(a, n, sm, fin[0], fin[1], finc[0], finc[1]);
  }
  if (MODE == MODE_AB && a.fill)
    fill_outside<A>(a, n, sm, rev);
}

} // namespace ctc
} // namespace jitops
