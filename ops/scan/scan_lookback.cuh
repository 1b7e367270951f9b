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
// folds a thirty-second of the aggregates the tile-level one would, 32 words a round trip.
//
// Every state travels in one word with its flag (Packed, below), so that a reader that sees a
// flag holds the state it flags: after a tile's loads land, one round trip for its group mates'
// words and one for the groups', with no acquire fence and no second load (with separate flags
// and states it was four).
//
// Scratch: per tile a word (aggregate once the tile is reduced); per group a word (aggregate,
// then inclusive) and the aggregate again in group_agg, for a search that has to reach past one
// window (the word may have turned inclusive by then). All indexed index * chains + chain.

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

// Each lane orders the words it read before the states any lane loads next: its own fence,
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

// ---- packed words -------------------------------------------------------------------------------
//
//   4 bytes: one 64-bit word, the flag in the high half and the state in the low half (an
//            aligned 64-bit access is single-copy atomic).
//   8 or 16 bytes: two or four 64-bit halves, each the flag in its high half and one of the
//            state's 32-bit words in its low half, stored and loaded as 128-bit vector accesses.
//            Only each half is single-copy atomic, so a reader takes the word only when all its
//            halves carry the same flag: a word is written once per flag value (none,
//            aggregate, inclusive), so equal flags mean the halves come from the same write.
//            Plain loads, not 128-bit atomics: with one long row every tile reads the same few
//            group words, and a compare-and-swap per read serialized them in L2 (2^27
//            logcumsumexp 0.66 -> 0.96 ms).
// Tile words are published relaxed (the word is the whole message); group words with release,
// which also orders the group_agg entry written before them.

template <class S> __host__ __device__ constexpr bool packs() {
  return sizeof(S) == 4 || sizeof(S) == 8 || sizeof(S) == 16;
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

// One 128-bit vector access of two halves.
__device__ __forceinline__ void store_halves(unsigned long long *p, unsigned long long a,
                                             unsigned long long b) {
  asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

__device__ __forceinline__ void store_halves_release(unsigned long long *p, unsigned long long a,
                                                     unsigned long long b) {
  asm volatile("st.release.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

__device__ __forceinline__ void load_halves(const unsigned long long *p, unsigned long long &a,
                                            unsigned long long &b) {
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(a), "=l"(b)
               : "l"(p)
               : "memory");
}

// A state of 8 or 16 bytes: N = 2 or 4 halves.
template <int N> struct alignas(16) Halves { unsigned long long h[N]; };

template <class S, int BYTES> struct Packed {
  static_assert(BYTES == 8 || BYTES == 16, "packed states are 4, 8 or 16 bytes");
  static constexpr int N = BYTES / 4;
  typedef Halves<N> Word;
  __device__ static Word make(unsigned flag, const S &v) {
    unsigned bits[N];
    memcpy(bits, &v, BYTES);
    Word w;
#pragma unroll
    for (int i = 0; i < N; ++i)
      w.h[i] = (unsigned long long)flag << 32 | bits[i];
    return w;
  }
  __device__ static S state(const Word &w) {
    unsigned bits[N];
#pragma unroll
    for (int i = 0; i < N; ++i)
      bits[i] = (unsigned)w.h[i];
    S v;
    memcpy(&v, bits, BYTES);
    return v;
  }
  // FLAG_NONE while the halves disagree (a write in between): the reader waits, as for none.
  __device__ static unsigned flag(const Word &w) {
    const unsigned f = (unsigned)(w.h[0] >> 32);
    bool same = true;
#pragma unroll
    for (int i = 1; i < N; ++i)
      same = same && (unsigned)(w.h[i] >> 32) == f;
    return same ? f : (unsigned)FLAG_NONE;
  }
  __device__ static void publish(Word *words, i64 index, const Word &w) {
#pragma unroll
    for (int i = 0; i < N; i += 2)
      store_halves(&words[index].h[i], w.h[i], w.h[i + 1]);
  }
  __device__ static void publish_release(Word *words, i64 index, const Word &w) {
#pragma unroll
    for (int i = 0; i < N; i += 2)
      store_halves_release(&words[index].h[i], w.h[i], w.h[i + 1]);
  }
  __device__ static Word read(const Word *words, i64 index) {
    Word w;
#pragma unroll
    for (int i = 0; i < N; i += 2)
      load_halves(&words[index].h[i], w.h[i], w.h[i + 1]);
    return w;
  }
};

// The exclusive prefix of group `index` (> 0): the left fold of inc[k] and the aggregates after
// it, k the nearest group with an inclusive word. Lane l reads word top - l; once the nearest
// inclusive word is in the window that started at index - 1, the fold needs nothing more than
// the window's own payloads. A search that had to move down first folds the aggregates above
// the window from group_agg.
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

// Publishes tile `tile`'s aggregate and returns its exclusive prefix (absent for tile 0): the
// whole grouped look-back, in one warp, once the tile is reduced. Every lane calls it.
template <class Op>
__device__ Prefix<typename Op::State> grouped_tile_prefix(const Scratch &s, i64 chain, i64 tile,
                                                          const typename Op::State &agg, int lane) {
  typedef typename Op::State State;
  static_assert(packs<State>(), "the rows kernel's states are 4, 8 or 16 bytes");
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

} // namespace scan
} // namespace jitops
