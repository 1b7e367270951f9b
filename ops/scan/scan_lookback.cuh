// jitops/scan_lookback.cuh — decoupled look-back between the tiles of one long scan axis.
//
// When one axis is split over several blocks, each block (a *tile*) takes a ticket from a
// counter, so tiles start in ticket order and every tile a block waits on has started; the
// tile publishes its aggregate, then looks back over its predecessors' published states
// until it finds one with an inclusive prefix, and publishes its own inclusive prefix.
//
// Determinism: the exclusive prefix of tile t is always the left fold
// ((agg_0 ⊕ agg_1) ⊕ …) ⊕ agg_{t-1}, whichever predecessor happened to be complete: the look
// back starts from the nearest inclusive prefix (itself such a left fold) and folds the
// aggregates after it forward, in order. So reruns are bit-identical.
//
// Memory ordering: a state is written, then its flag with a release store; a reader reads
// flags (volatile, relaxed), then an acquire fence, then the states it saw flagged. Both are
// cheaper than the sequentially consistent __threadfence().
#pragma once
#include "jitops/common.cuh"
#include "jitops/scan_abi.h"

namespace jitops {
namespace scan {

// The scratch area, laid out by the host (jitops/scan_abi.h): a ticket counter, one flag per
// (tile, chain), and the aggregate and inclusive state arrays, all indexed tile * chains +
// chain.
typedef ::jitops__scan_scratch Scratch;

enum : unsigned { FLAG_NONE = 0, FLAG_AGGREGATE = 1, FLAG_INCLUSIVE = 2 };

// An optional state: the prefix that precedes a position, absent at the start of the axis.
template <class S> struct Prefix {
  S s;
  bool ok;
};

template <class Op>
__device__ __forceinline__ typename Op::State apply(const Prefix<typename Op::State> &p,
                                                    const typename Op::State &s) {
  return p.ok ? Op::combine(p.s, s) : s;
}

template <class Op>
__device__ __forceinline__ Prefix<typename Op::State> extend(const Prefix<typename Op::State> &p,
                                                             const typename Op::State &s) {
  return Prefix<typename Op::State>{apply<Op>(p, s), true};
}

template <class S> __device__ __forceinline__ void store_state(char *base, i64 index, const S &v) {
  static_assert(sizeof(S) % 4 == 0, "scan states are whole 32-bit words");
  unsigned w[sizeof(S) / 4];
  memcpy(w, &v, sizeof(S));
  volatile unsigned *p = (volatile unsigned *)(base + index * (i64)sizeof(S));
#pragma unroll
  for (int i = 0; i < (int)(sizeof(S) / 4); ++i)
    p[i] = w[i];
}

template <class S> __device__ __forceinline__ S load_state(const char *base, i64 index) {
  unsigned w[sizeof(S) / 4];
  const volatile unsigned *p = (const volatile unsigned *)(base + index * (i64)sizeof(S));
#pragma unroll
  for (int i = 0; i < (int)(sizeof(S) / 4); ++i)
    w[i] = p[i];
  S v;
  memcpy(&v, w, sizeof(S));
  return v;
}

__device__ __forceinline__ void publish_flag(unsigned *flags, i64 index, unsigned flag) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + index), "r"(flag) : "memory");
}

__device__ __forceinline__ void acquire_fence() {
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

// Takes the block's ticket (call from one thread; the caller broadcasts it).
__device__ __forceinline__ i64 take_ticket(const Scratch &s) {
  return (i64)atomicAdd(s.ticket, 1u);
}

// Publishes tile `tile`'s aggregate for `chain` and returns the tile's exclusive prefix
// (absent for tile 0). Called by one thread per chain.
template <class Op>
__device__ Prefix<typename Op::State> tile_prefix(const Scratch &s, i64 chain, i64 tile,
                                                  const typename Op::State &agg) {
  typedef typename Op::State State;
  const i64 here = tile * s.chains + chain;
  if (tile == 0) {
    store_state(s.inc, here, agg);
    publish_flag(s.flags, here, FLAG_INCLUSIVE);
    return Prefix<State>{agg, false};
  }
  store_state(s.agg, here, agg);
  publish_flag(s.flags, here, FLAG_AGGREGATE);

  // Find the nearest predecessor with an inclusive prefix, every tile after it having at
  // least its aggregate published. WINDOW flags are read at once to cut round trips.
  constexpr int WINDOW = 8;
  const volatile unsigned *flags = s.flags;
  i64 k = tile - 1;
  for (;;) {
    unsigned f[WINDOW];
#pragma unroll
    for (int w = 0; w < WINDOW; ++w)
      f[w] = k - w >= 0 ? flags[(k - w) * s.chains + chain] : FLAG_NONE;
    int found = -1;
    bool blocked = false;
#pragma unroll
    for (int w = 0; w < WINDOW; ++w) {
      if (found < 0 && !blocked) {
        if (f[w] == FLAG_INCLUSIVE)
          found = w;
        else if (f[w] == FLAG_NONE)
          blocked = true;
      }
    }
    if (found >= 0) {
      k -= found;
      break;
    }
    if (!blocked)
      k -= WINDOW; // all aggregates: the inclusive prefix is further back
  }
  acquire_fence();
  State p = load_state<State>(s.inc, k * s.chains + chain);
  for (i64 j = k + 1; j < tile; ++j)
    p = Op::combine(p, load_state<State>(s.agg, j * s.chains + chain));
  store_state(s.inc, here, Op::combine(p, agg));
  publish_flag(s.flags, here, FLAG_INCLUSIVE);
  return Prefix<State>{p, true};
}

} // namespace scan
} // namespace jitops
