// jitops/ctc_sample.cuh — one sample as the kernels see it: its lengths (checked on the
// device, since they may live there), where its targets start, the label of each state, and
// the label grouping the gradient sums along.
#pragma once
#include "jitops/ctc_common.cuh"

namespace jitops {
namespace ctc {

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
  __shared__ long long red[JITOPS__CTC_OFFSET_WARPS];
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
template <class TI>
__device__ __forceinline__ int label_of(const alpha_args &a, const sample &sm, int s, bool rev,
                                        bool *skip, bool *bad) {
  int j = (s - 1) >> 1;
  int jj = rev ? sm.tl - 1 - j : j;
  long long c = target_at<TI>(a, sm, jj);
  if (c < 0 || c >= a.C || c == a.blank) {
    *bad = true;
    c = a.blank;
  }
  bool sk = false;
  if (j >= 1) {
    long long p = target_at<TI>(a, sm, rev ? jj + 1 : jj - 1);
    sk = p != c;
  }
  *skip = sk;
  return (int)c;
}

// ---- label grouping for the gradient --------------------------------------------------------

// For each target position j: its label, the next position with the same label (or LINK_END)
// and whether j is the label's first occurrence (jitops/ctc_abi.h has the encoding). The gradient
// sums the posteriors of a label along this chain, in position order: deterministic, no atomics.
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
    int next = LINK_END;
    for (int i = j + 1; i < tl; ++i)
      if (target_at<TI>(a, sm, i) == c) {
        next = i;
        break;
      }
    out[LINK_INTS * j] = (int)c;
    out[LINK_INTS * j + 1] = next | (first << LINK_FIRST_BIT);
  }
}

} // namespace ctc
} // namespace jitops
