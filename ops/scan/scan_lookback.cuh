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

// ---- shuffles of whole states -------------------------------------------------------------

template <class S> __device__ __forceinline__ S shfl_up_state(const S &v, int delta) {
  static_assert(sizeof(S) % 4 == 0, "scan states are whole 32-bit words");
  unsigned w[sizeof(S) / 4];
  memcpy(w, &v, sizeof(S));
#pragma unroll
  for (int i = 0; i < (int)(sizeof(S) / 4); ++i)
    w[i] = __shfl_up_sync(0xffffffffu, w[i], delta);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}

template <class S> __device__ __forceinline__ S shfl_state(const S &v, int lane) {
  static_assert(sizeof(S) % 4 == 0, "scan states are whole 32-bit words");
  unsigned w[sizeof(S) / 4];
  memcpy(w, &v, sizeof(S));
#pragma unroll
  for (int i = 0; i < (int)(sizeof(S) / 4); ++i)
    w[i] = __shfl_sync(0xffffffffu, w[i], lane);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}

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

// ---- grouped look-back: one chain per block (the rows kernel) --------------------------------
//
// The serial look-back above folds one aggregate per L2 round trip. With thousands of tiles on
// one axis the tiles in flight outrun that: the distance to the nearest inclusive prefix grows
// and the fold becomes the bottleneck (a 2^27-element cumsum ran at a fifth of copy speed, a
// cummax at a twentieth). So the tiles of one chain are taken in GROUPs of 32, and a tile's
// exclusive prefix is defined as
//
//   before(group) ⊕ within(tile)
//
// where within(tile) is lane pos - 1 of a warp's inclusive scan (warp_inclusive, a fixed tree)
// of the group's tile aggregates, and before(group) is the left fold of the earlier groups'
// aggregates (each lane 31 of that scan), found by a decoupled look-back over groups. Every
// term is a fixed combination of fixed aggregates, so reruns are bit-identical; the look-back
// folds a thirty-second of the aggregates the tile-level one would, 32 flags a round trip.
//
// Scratch: per tile a flag (FLAG_AGGREGATE once its aggregate is out) and the aggregate; per
// group a flag and the aggregate and inclusive states, all indexed index * chains + chain.

constexpr int GROUP = JITOPS__SCAN_GROUP;
static_assert(GROUP == 32, "a group is scanned across one warp");

// Inclusive scan across the warp's lanes (Hillis–Steele: fixed order, no identity needed).
// Lane j's result depends on lanes 0..j only.
template <class Op>
__device__ __forceinline__ typename Op::State warp_inclusive(typename Op::State v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const typename Op::State t = shfl_up_state(v, d);
    if (lane >= d)
      v = Op::combine(t, v);
  }
  return v;
}

// The search for the nearest entry below `index` with an inclusive state, every entry after it
// having an aggregate: lane l reads flag top - l, so a round trip reads 32 flags. Warp-uniform.
struct Search {
  i64 top; // the next window's highest entry
  i64 k;   // the inclusive entry, once done
  bool done;
};

__device__ __forceinline__ Search search_start(i64 index) {
  return Search{index - 1, 0, false};
}

// One round: lane l reads the flag of entry top - l; a window of aggregates moves the search
// down by 32; an entry without a state stops it there until the next round.
__device__ __forceinline__ void search_step(Search &q, const unsigned *flag_array, i64 chains,
                                            i64 chain, int lane) {
  const volatile unsigned *flags = flag_array;
  const i64 j = q.top - lane;
  const unsigned f = j >= 0 ? flags[j * chains + chain] : FLAG_NONE;
  const unsigned stops = __ballot_sync(0xffffffffu, f != FLAG_AGGREGATE);
  if (stops == 0) {
    q.top -= 32;
    return;
  }
  const int first = __ffs(stops) - 1;
  if (__shfl_sync(0xffffffffu, f, first) == FLAG_INCLUSIVE) {
    q.k = q.top - first;
    q.done = true;
  } else {
    q.top -= first; // the entries above it have aggregates; wait for this one
  }
}

// Each lane orders the flags it read before the states any lane loads next: its own fence,
// then the warp barrier (which orders memory among the lanes it joins).
__device__ __forceinline__ void search_acquire() {
  acquire_fence();
  __syncwarp();
}

// p ⊕ agg[from] ⊕ … ⊕ agg[to - 1]: the aggregates load 32 at a time and fold in order,
// broadcast lane by lane. All lanes call it and get the same state.
template <class Op>
__device__ typename Op::State fold_aggregates(typename Op::State p, const char *agg, i64 chains,
                                              i64 chain, i64 from, i64 to, int lane) {
  typedef typename Op::State State;
  for (i64 base = from; base < to; base += 32) {
    const i64 n = to - base;
    const State v = lane < n ? load_state<State>(agg, (base + lane) * chains + chain) : p;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const State vi = shfl_state(v, i);
      if (i < n)
        p = Op::combine(p, vi);
    }
  }
  return p;
}

// The left fold inc[k] ⊕ agg[k+1] ⊕ … ⊕ agg[index-1], after a search found k and acquired.
template <class Op>
__device__ typename Op::State fold_from(const char *agg, const char *inc, i64 chains, i64 chain,
                                        i64 k, i64 index, int lane) {
  typedef typename Op::State State;
  return fold_aggregates<Op>(load_state<State>(inc, k * chains + chain), agg, chains, chain, k + 1,
                             index, lane);
}

// The exclusive prefix of entry `index` (> 0) of a look-back array: search, then fold. All
// lanes call it and get the same state.
template <class Op>
__device__ typename Op::State warp_lookback(const unsigned *flags, const char *agg, const char *inc,
                                            i64 chains, i64 chain, i64 index, int lane) {
  Search q = search_start(index);
  while (!q.done)
    search_step(q, flags, chains, chain, lane);
  search_acquire();
  return fold_from<Op>(agg, inc, chains, chain, q.k, index, lane);
}

// ---- packed words: states of 4 or 8 bytes --------------------------------------------------
//
// A small state travels in one word with its flag, so that a reader that sees a flag holds the
// state it flags: no acquire fence and no second load, which saves two of the look-back's four
// L2 round trips. The host sizes and zeroes the flags as such words.
//   4 bytes: one 64-bit word, the flag in the high half and the state in the low half (an
//            aligned 64-bit access is single-copy atomic).
//   8 bytes: two 64-bit halves, each the flag in its high half and one of the state's 32-bit
//            words in its low half, stored and loaded as one vector access. Only each half is
//            single-copy atomic, so a reader takes the word only when both halves carry the
//            same flag: a word is written once per flag value (none, aggregate, inclusive), so
//            equal flags mean both halves come from the same write. Plain loads, not 128-bit
//            atomics: with one long row every tile reads the same few group words, and a
//            compare-and-swap per read serialized them in L2 (2^27 logcumsumexp 0.66 -> 0.96 ms).
// A group's word is overwritten from its aggregate to its inclusive prefix, so the group's
// aggregate is also kept in group_agg, for the rare look-back that reaches past one window.

template <class S> __host__ __device__ constexpr bool packs() {
  return sizeof(S) == 4 || sizeof(S) == 8;
}

template <class S, int BYTES = (int)sizeof(S)> struct Packed;

template <class S> struct Packed<S, 4> {
  typedef unsigned long long Word;
  __device__ static Word make(unsigned flag, const S &v) {
    unsigned bits;
    memcpy(&bits, &v, 4);
    return (Word)flag << 32 | bits;
  }
  __device__ static S state(const Word &w) {
    const unsigned bits = (unsigned)w;
    S v;
    memcpy(&v, &bits, 4);
    return v;
  }
  __device__ static unsigned flag(const Word &w) {
    return (unsigned)(w >> 32);
  }
  // Relaxed: the word carries its own payload (tile words). Group words are published with
  // release, which also orders the group_agg entry written before them.
  __device__ static void publish(Word *words, i64 index, const Word &w) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(words + index), "l"(w) : "memory");
  }
  __device__ static void publish_release(Word *words, i64 index, const Word &w) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(words + index), "l"(w) : "memory");
  }
  __device__ static Word read(const Word *words, i64 index) {
    Word w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(words + index) : "memory");
    return w;
  }
};

struct alignas(16) Halves {
  unsigned long long lo, hi;
};

template <class S> struct Packed<S, 8> {
  typedef Halves Word;
  __device__ static Word make(unsigned flag, const S &v) {
    unsigned bits[2];
    memcpy(bits, &v, 8);
    return Word{(unsigned long long)flag << 32 | bits[0], (unsigned long long)flag << 32 | bits[1]};
  }
  __device__ static S state(const Word &w) {
    const unsigned bits[2] = {(unsigned)w.lo, (unsigned)w.hi};
    S v;
    memcpy(&v, bits, 8);
    return v;
  }
  // FLAG_NONE while the halves disagree (a write in between): the reader waits, as for none.
  __device__ static unsigned flag(const Word &w) {
    const unsigned a = (unsigned)(w.lo >> 32), b = (unsigned)(w.hi >> 32);
    return a == b ? a : (unsigned)FLAG_NONE;
  }
  __device__ static void publish(Word *words, i64 index, const Word &w) {
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(words + index), "l"(w.lo),
                 "l"(w.hi)
                 : "memory");
  }
  __device__ static void publish_release(Word *words, i64 index, const Word &w) {
    asm volatile("st.release.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(words + index), "l"(w.lo),
                 "l"(w.hi)
                 : "memory");
  }
  __device__ static Word read(const Word *words, i64 index) {
    Word w;
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(w.lo), "=l"(w.hi)
                 : "l"(words + index)
                 : "memory");
    return w;
  }
};

// The exclusive prefix of group `index` (> 0) over packed group words: the same left fold as
// warp_lookback. Lane l reads word top - l; once the nearest inclusive word is in the window
// that started at index - 1, the fold needs nothing more than the window's own payloads. A
// search that had to move down first folds the aggregates above the window from group_agg.
template <class Op>
__device__ typename Op::State packed_lookback(const Scratch &s, i64 chain, i64 index, int lane) {
  typedef typename Op::State State;
  typedef Packed<State> P;
  typedef typename P::Word Word;
  const Word *words = (const Word *)s.group_flags;
  i64 top = index - 1;
  for (;;) {
    const i64 j = top - lane;
    const Word w = j >= 0 ? P::read(words, j * s.chains + chain) : Word{};
    const unsigned stops = __ballot_sync(0xffffffffu, P::flag(w) != FLAG_AGGREGATE);
    if (stops == 0) {
      top -= 32;
      continue;
    }
    const int first = __ffs(stops) - 1;
    if (__shfl_sync(0xffffffffu, P::flag(w), first) != FLAG_INCLUSIVE) {
      top -= first; // the entries above it have aggregates; wait for this one
      continue;
    }
    // Lane `first` holds inc[top - first], lanes first - 1 .. 0 the aggregates after it.
    const State v = P::state(w);
    State p = shfl_state(v, first);
    for (int i = first - 1; i >= 0; --i)
      p = Op::combine(p, shfl_state(v, i));
    if (top == index - 1)
      return p;
    // The window moved down: the aggregates top + 1 .. index - 1 (whose words may have turned
    // inclusive since) come from group_agg, published before their words.
    search_acquire();
    return fold_aggregates<Op>(p, s.group_agg, s.chains, chain, top + 1, index, lane);
  }
}

// grouped_tile_prefix over packed words.
template <class Op>
__device__ Prefix<typename Op::State> packed_tile_prefix(const Scratch &s, i64 chain, i64 tile,
                                                         const typename Op::State &agg, int lane) {
  typedef typename Op::State State;
  typedef Packed<State> P;
  typedef typename P::Word Word;
  Word *tile_words = (Word *)s.flags, *group_words = (Word *)s.group_flags;
  const i64 group = tile / GROUP;
  const int pos = (int)(tile - group * GROUP);
  const bool last = pos == GROUP - 1;
  if (lane == 0 && !last)
    P::publish(tile_words, tile * s.chains + chain, P::make(FLAG_AGGREGATE, agg));

  State mine = agg; // lane pos's own; lanes below it wait for their tile's word
  if (lane < pos) {
    Word w;
    do
      w = P::read(tile_words, (group * GROUP + lane) * s.chains + chain);
    while (P::flag(w) == FLAG_NONE);
    mine = P::state(w);
  }
  const State incl = warp_inclusive<Op>(mine, lane);
  const State within = shfl_state(incl, pos > 0 ? pos - 1 : 0);

  const State group_agg = shfl_state(incl, GROUP - 1); // meaningful where last
  const i64 g = group * s.chains + chain;
  if (last && lane == 0) {
    if (group > 0)
      store_state(s.group_agg, g, group_agg);
    P::publish_release(group_words, g,
                       P::make(group == 0 ? FLAG_INCLUSIVE : FLAG_AGGREGATE, group_agg));
  }
  if (group == 0)
    return Prefix<State>{within, pos > 0};
  const State before = packed_lookback<Op>(s, chain, group, lane);
  if (last && lane == 0) // release too: a reader that sees it may then read group_agg[g]
    P::publish_release(group_words, g, P::make(FLAG_INCLUSIVE, Op::combine(before, group_agg)));
  return Prefix<State>{pos > 0 ? Op::combine(before, within) : before, true};
}

// Publishes tile `tile`'s aggregate and returns its exclusive prefix (absent for tile 0): the
// whole grouped look-back, in one warp, once the tile is reduced. Every lane calls it.
template <class Op>
__device__ Prefix<typename Op::State> grouped_tile_prefix(const Scratch &s, i64 chain, i64 tile,
                                                          const typename Op::State &agg, int lane) {
  typedef typename Op::State State;
  if constexpr (packs<State>())
    return packed_tile_prefix<Op>(s, chain, tile, agg, lane);
  const i64 group = tile / GROUP;
  const int pos = (int)(tile - group * GROUP);
  // The group's last tile forms the group's aggregate itself: its own is read by no one.
  const bool last = pos == GROUP - 1;
  if (lane == 0 && !last) {
    store_state(s.agg, tile * s.chains + chain, agg);
    publish_flag(s.flags, tile * s.chains + chain, FLAG_AGGREGATE);
  }

  // within: the aggregates of the group's earlier tiles (earlier tickets, so already running),
  // each lane waiting for its own; lane pos holds this tile's (lanes past it do not matter).
  const i64 mine = (group * GROUP + lane) * s.chains + chain;
  if (lane < pos) {
    const volatile unsigned *flags = s.flags;
    while (flags[mine] == FLAG_NONE) {
    }
    acquire_fence(); // each lane loads only the state whose flag it saw
  }
  const State incl = warp_inclusive<Op>(lane < pos ? load_state<State>(s.agg, mine) : agg, lane);
  const State within = shfl_state(incl, pos > 0 ? pos - 1 : 0);

  // A group's last tile publishes the group's aggregate before it looks back, so that no later
  // group waits on its look-back, then the group's inclusive prefix.
  const State group_agg = shfl_state(incl, GROUP - 1); // meaningful where last
  const i64 g = group * s.chains + chain;
  if (last && lane == 0) {
    store_state(group == 0 ? s.group_inc : s.group_agg, g, group_agg);
    publish_flag(s.group_flags, g, group == 0 ? FLAG_INCLUSIVE : FLAG_AGGREGATE);
  }
  if (group == 0)
    return Prefix<State>{within, pos > 0};
  const State before =
      warp_lookback<Op>(s.group_flags, s.group_agg, s.group_inc, s.chains, chain, group, lane);
  if (last && lane == 0) {
    store_state(s.group_inc, g, Op::combine(before, group_agg));
    publish_flag(s.group_flags, g, FLAG_INCLUSIVE);
  }
  return Prefix<State>{pos > 0 ? Op::combine(before, within) : before, true};
}

} // namespace scan
} // namespace jitops
