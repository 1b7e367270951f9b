// jitops/scan.cuh — prefix scans along one axis of a strided tensor, forward and backward.
//
// The host collapses the tensors to a scan axis of length `len` and up to 7 batch dimensions
// (the *chains*: independent scans), then picks one of two kernels:
//
//   rows  the axis is unit-stride in every tensor. A warp owns a chunk of 32·ITEMS positions:
//         it loads them coalesced (lane-striped) into shared memory, each lane takes ITEMS
//         consecutive ones (blocked), scans them in registers, and a shuffle scan joins the
//         lanes. Without LOOKBACK each warp walks one whole row chunk by chunk with a carry;
//         with LOOKBACK a block of WARPS warps scans one tile of a few long rows, and tiles
//         are joined by decoupled look-back (jitops/scan_lookback.cuh).
//   cols  any other layout: lanes run across chains (coalesced when the chains are the unit
//         stride dimension), and each thread scans R consecutive positions of its chain; 8
//         thread rows cover one tile of 8·R positions. Without LOOKBACK a block walks its
//         chains' whole axis tile by tile; with LOOKBACK tiles of a long axis run in parallel.
//
// Positions are counted in kernel order q (the scan's direction); m = reverse ? len-1-q : q is
// the position in memory. Every result is a fixed combination order of fixed values, so reruns
// are bit-identical.
#pragma once
#include "jitops/common.cuh"
#include "jitops/scan_lookback.cuh"
#include "jitops/scan_ops.cuh"

namespace jitops {
namespace scan {

// The host fills this word for word (every field is 8 bytes).
template <int NT, int NB> struct Geom {
  char *ptr[NT];   // each tensor's first element (data + byte_offset)
  i64 len;         // length of the scan axis
  i64 astride[NT]; // element stride of the scan axis
  i64 chains;      // number of independent scans: the product of bshape
  i64 bshape[NB > 0 ? NB : 1];
  i64 bstride[NT][NB > 0 ? NB : 1];
  i64 reverse; // non-zero: the scan runs from the last element to the first
};

template <int NT, int NB>
__device__ __forceinline__ void chain_offsets(const Geom<NT, NB> &g, i64 c, i64 (&off)[NT]) {
#pragma unroll
  for (int k = 0; k < NT; ++k)
    off[k] = 0;
#pragma unroll
  for (int d = NB - 1; d >= 0; --d) {
    const i64 n = g.bshape[d];
    const i64 i = d > 0 ? c % n : c;
    if (d > 0)
      c /= n;
#pragma unroll
    for (int k = 0; k < NT; ++k)
      off[k] += i * g.bstride[k][d];
  }
}

template <int NT, int NB> __device__ __forceinline__ i64 memory_pos(const Geom<NT, NB> &g, i64 q) {
  return g.reverse ? g.len - 1 - q : q;
}

template <class Op, int K> using tensor_t = typename type_at<K, typename Op::Tensors>::type;

template <class Op, int K, int NB>
__device__ __forceinline__ tensor_t<Op, K> *global_at(const Geom<Op::NTENS, NB> &g,
                                                      const i64 (&off)[Op::NTENS], i64 m) {
  return (tensor_t<Op, K> *)g.ptr[K] + off[K] + m * g.astride[K];
}

// Sum of the element sizes of tensors [B, E).
template <class Op, int B, int E> __host__ __device__ constexpr int bytes_of() {
  if constexpr (B >= E)
    return 0;
  else
    return (int)sizeof(tensor_t<Op, B>) + bytes_of<Op, B + 1, E>();
}

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
  unsigned w[sizeof(S) / 4];
  memcpy(w, &v, sizeof(S));
#pragma unroll
  for (int i = 0; i < (int)(sizeof(S) / 4); ++i)
    w[i] = __shfl_sync(0xffffffffu, w[i], lane);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}

// Inclusive scan across the warp's lanes (Hillis–Steele: fixed order, no identity needed).
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

// ---- rows: the axis is unit-stride --------------------------------------------------------

// Shared staging of one warp's chunk: input K lives at in_offset<K>, output J at
// out_offset<J> (outputs reuse the inputs' space once the states are built). Lane-striped
// index i is stored at i + i/32, which makes both the striped writes and the blocked reads
// (ITEMS a power of two) free of bank conflicts for 4-byte elements.
template <class Op, int ITEMS> struct RowsStage {
  static constexpr int CHUNK = 32 * ITEMS;
  static constexpr int SLOTS = CHUNK + ITEMS;
  static constexpr int IN_BYTES = bytes_of<Op, 0, Op::NIN>();
  static constexpr int OUT_BYTES = bytes_of<Op, Op::NIN, Op::NTENS>();
  static constexpr int BYTES = SLOTS * (IN_BYTES > OUT_BYTES ? IN_BYTES : OUT_BYTES);
  template <int K> __host__ __device__ static constexpr int in_offset() {
    return SLOTS * bytes_of<Op, 0, K>();
  }
  template <int J> __host__ __device__ static constexpr int out_offset() {
    return SLOTS * bytes_of<Op, Op::NIN, Op::NIN + J>();
  }
  __device__ static int slot(int i) {
    return i + (i >> 5);
  }
};

template <class Op, int NB, int ITEMS> struct RowsFetch {
  typedef RowsStage<Op, ITEMS> Stage;
  const Geom<Op::NTENS, NB> &g;
  const i64 (&off)[Op::NTENS];
  const char *stage;
  i64 q; // kernel-order position of this item
  int b; // its index within the chunk

  template <int K>
  __device__ __forceinline__ acc_t<tensor_t<Op, K>> get(int shift,
                                                        acc_t<tensor_t<Op, K>> dflt) const {
    typedef tensor_t<Op, K> U;
    const i64 qs = q + shift;
    if (qs < 0 || qs >= g.len)
      return dflt;
    const int bs = b + shift;
    if (bs >= 0 && bs < Stage::CHUNK)
      return load((const U *)(stage + Stage::template in_offset<K>()) + Stage::slot(bs));
    return load(global_at<Op, K>(g, off, memory_pos(g, qs)));
  }
};

template <class Op, int ITEMS> struct RowsOut {
  typedef RowsStage<Op, ITEMS> Stage;
  char *stage;
  int b;
  template <int J> __device__ __forceinline__ void put(acc_t<tensor_t<Op, Op::NIN + J>> v) {
    typedef tensor_t<Op, Op::NIN + J> U;
    store((U *)(stage + Stage::template out_offset<J>()) + Stage::slot(b), v);
  }
};

template <class Op, int K, int NB, int ITEMS>
__device__ __forceinline__ void rows_stage_inputs(const Geom<Op::NTENS, NB> &g,
                                                  const i64 (&off)[Op::NTENS], char *stage,
                                                  i64 base, int lane) {
  if constexpr (K < Op::NIN) {
    typedef RowsStage<Op, ITEMS> Stage;
    typedef tensor_t<Op, K> U;
    U *buf = (U *)(stage + Stage::template in_offset<K>());
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const int i = lane + 32 * j;
      const i64 q = base + i;
      if (q < g.len)
        buf[Stage::slot(i)] = *global_at<Op, K>(g, off, memory_pos(g, q));
    }
    rows_stage_inputs<Op, K + 1, NB, ITEMS>(g, off, stage, base, lane);
  }
}

template <class Op, int J, int NB, int ITEMS>
__device__ __forceinline__ void rows_store_outputs(const Geom<Op::NTENS, NB> &g,
                                                   const i64 (&off)[Op::NTENS], const char *stage,
                                                   i64 base, int lane) {
  if constexpr (Op::NIN + J < Op::NTENS) {
    typedef RowsStage<Op, ITEMS> Stage;
    typedef tensor_t<Op, Op::NIN + J> U;
    const U *buf = (const U *)(stage + Stage::template out_offset<J>());
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const int i = lane + 32 * j;
      const i64 q = base + i;
      if (q < g.len)
        *global_at<Op, Op::NIN + J>(g, off, memory_pos(g, q)) = buf[Stage::slot(i)];
    }
    rows_store_outputs<Op, J + 1, NB, ITEMS>(g, off, stage, base, lane);
  }
}

// Loads one warp chunk starting at `base` and leaves each lane's ITEMS inclusive states
// (relative to the lane's first item) in st.
template <class Op, int NB, int ITEMS>
__device__ __forceinline__ void
rows_load(const Geom<Op::NTENS, NB> &g, const i64 (&off)[Op::NTENS], char *stage, i64 base,
          int lane, typename Op::State (&st)[ITEMS], typename Op::Keep (&keep)[ITEMS]) {
  __syncwarp(); // the previous chunk's output staging has been read
  rows_stage_inputs<Op, 0, NB, ITEMS>(g, off, stage, base, lane);
  __syncwarp();
  const int b0 = lane * ITEMS;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const i64 q = base + b0 + i;
    if (q < g.len) {
      const RowsFetch<Op, NB, ITEMS> f{g, off, stage, q, b0 + i};
      st[i] = Op::make(f, q, memory_pos(g, q), keep[i]);
    } else {
      st[i] = Op::identity();
    }
  }
#pragma unroll
  for (int i = 1; i < ITEMS; ++i)
    st[i] = Op::combine(st[i - 1], st[i]);
}

// Emits one warp chunk given each lane's exclusive prefix, then stores it coalesced.
template <class Op, int NB, int ITEMS>
__device__ __forceinline__ void
rows_emit(const Geom<Op::NTENS, NB> &g, const i64 (&off)[Op::NTENS], char *stage, i64 base,
          int lane, const Prefix<typename Op::State> &prefix, const typename Op::State (&st)[ITEMS],
          const typename Op::Keep (&keep)[ITEMS]) {
  __syncwarp(); // every lane has finished reading the input staging
  const int b0 = lane * ITEMS;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const i64 q = base + b0 + i;
    if (q < g.len) {
      RowsOut<Op, ITEMS> o{stage, b0 + i};
      Op::emit(o, apply<Op>(prefix, st[i]), keep[i], q, memory_pos(g, q));
    }
  }
  __syncwarp();
  rows_store_outputs<Op, 0, NB, ITEMS>(g, off, stage, base, lane);
}

template <class Op, int NB, int WARPS, int ITEMS, bool LOOKBACK, int SBYTES>
__global__ void __launch_bounds__(WARPS * 32)
    rows(const Geom<Op::NTENS, NB> g, const Scratch scratch) {
  typedef typename Op::State State;
  typedef typename Op::Keep Keep;
  typedef RowsStage<Op, ITEMS> Stage;
  static_assert(sizeof(State) == SBYTES, "the host's state size disagrees with the template");
  static_assert(ITEMS == 4 || ITEMS == 8 || ITEMS == 16, "ITEMS is 4, 8 or 16");
  __shared__ __align__(16) char stage_all[WARPS * Stage::BYTES];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  char *stage = stage_all + warp * Stage::BYTES;
  State st[ITEMS];
  Keep keep[ITEMS];
  i64 off[Op::NTENS];

  if constexpr (!LOOKBACK) {
    // One warp per row, chunk by chunk, carrying the row's prefix.
    const i64 row = (i64)blockIdx.x * WARPS + warp;
    if (row >= g.chains)
      return;
    chain_offsets(g, row, off);
    Prefix<State> carry{Op::identity(), false};
    for (i64 base = 0; base < g.len; base += Stage::CHUNK) {
      rows_load<Op, NB, ITEMS>(g, off, stage, base, lane, st, keep);
      const State incl = warp_inclusive<Op>(st[ITEMS - 1], lane);
      const State excl = shfl_up_state(incl, 1);
      const Prefix<State> p = lane > 0 ? extend<Op>(carry, excl) : carry;
      rows_emit<Op, NB, ITEMS>(g, off, stage, base, lane, p, st, keep);
      carry = extend<Op>(carry, shfl_state(incl, 31));
    }
  } else {
    // One tile of WARPS chunks of one row; tiles joined by look-back.
    __shared__ i64 s_ticket;
    __shared__ State s_agg[WARPS];
    __shared__ Prefix<State> s_prefix[WARPS];
    if (threadIdx.x == 0)
      s_ticket = take_ticket(scratch);
    __syncthreads();
    const i64 tile = s_ticket / g.chains, row = s_ticket % g.chains;
    const i64 base = (tile * WARPS + warp) * Stage::CHUNK;
    chain_offsets(g, row, off);
    rows_load<Op, NB, ITEMS>(g, off, stage, base, lane, st, keep);
    const State incl = warp_inclusive<Op>(st[ITEMS - 1], lane);
    const State excl = shfl_up_state(incl, 1);
    if (lane == 31)
      s_agg[warp] = incl;
    __syncthreads();
    if (threadIdx.x == 0) {
      State agg = s_agg[0];
#pragma unroll
      for (int w = 1; w < WARPS; ++w)
        agg = Op::combine(agg, s_agg[w]);
      Prefix<State> run = tile_prefix<Op>(scratch, row, tile, agg);
#pragma unroll
      for (int w = 0; w < WARPS; ++w) {
        s_prefix[w] = run;
        run = extend<Op>(run, s_agg[w]);
      }
    }
    __syncthreads();
    const Prefix<State> wp = s_prefix[warp];
    const Prefix<State> p = lane > 0 ? extend<Op>(wp, excl) : wp;
    rows_emit<Op, NB, ITEMS>(g, off, stage, base, lane, p, st, keep);
  }
}

// ---- cols: any layout, lanes across chains ------------------------------------------------

template <class Op, int NB> struct ColsFetch {
  const Geom<Op::NTENS, NB> &g;
  const i64 (&off)[Op::NTENS];
  i64 q;
  template <int K>
  __device__ __forceinline__ acc_t<tensor_t<Op, K>> get(int shift,
                                                        acc_t<tensor_t<Op, K>> dflt) const {
    const i64 qs = q + shift;
    if (qs < 0 || qs >= g.len)
      return dflt;
    return load(global_at<Op, K>(g, off, memory_pos(g, qs)));
  }
};

template <class Op, int NB> struct ColsOut {
  const Geom<Op::NTENS, NB> &g;
  const i64 (&off)[Op::NTENS];
  i64 m;
  template <int J> __device__ __forceinline__ void put(acc_t<tensor_t<Op, Op::NIN + J>> v) {
    store(global_at<Op, Op::NIN + J>(g, off, m), v);
  }
};

constexpr int COLS_BX = 32, COLS_BY = 8;

template <class Op, int NB, int R, bool LOOKBACK, int SBYTES>
__global__ void __launch_bounds__(COLS_BX *COLS_BY)
    cols(const Geom<Op::NTENS, NB> g, const Scratch scratch) {
  typedef typename Op::State State;
  typedef typename Op::Keep Keep;
  static_assert(sizeof(State) == SBYTES, "the host's state size disagrees with the template");
  constexpr i64 SPAN = (i64)COLS_BY * R; // positions per tile
  __shared__ State s_agg[COLS_BY][COLS_BX];
  __shared__ Prefix<State> s_tile[COLS_BX];
  __shared__ i64 s_ticket;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const i64 strips = (g.chains + COLS_BX - 1) / COLS_BX;
  i64 strip, t0, t1;
  if constexpr (LOOKBACK) {
    if (tx == 0 && ty == 0)
      s_ticket = take_ticket(scratch);
    __syncthreads();
    t0 = s_ticket / strips;
    strip = s_ticket % strips;
    t1 = t0 + 1;
  } else {
    strip = blockIdx.x;
    t0 = 0;
    t1 = (g.len + SPAN - 1) / SPAN;
  }
  const i64 c = strip * COLS_BX + tx;
  const bool active = c < g.chains;
  i64 off[Op::NTENS];
  chain_offsets(g, active ? c : 0, off);
  Prefix<State> carry{Op::identity(), false};
  for (i64 tile = t0; tile < t1; ++tile) {
    const i64 q0 = tile * SPAN + (i64)ty * R;
    State st[R];
    Keep keep[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const i64 q = q0 + r;
      if (active && q < g.len) {
        const ColsFetch<Op, NB> f{g, off, q};
        st[r] = Op::make(f, q, memory_pos(g, q), keep[r]);
      } else {
        st[r] = Op::identity();
      }
    }
#pragma unroll
    for (int r = 1; r < R; ++r)
      st[r] = Op::combine(st[r - 1], st[r]);
    s_agg[ty][tx] = st[R - 1];
    __syncthreads();
    Prefix<State> group{Op::identity(), false};
    for (int y = 0; y < ty; ++y)
      group = extend<Op>(group, s_agg[y][tx]);
    Prefix<State> p;
    if constexpr (LOOKBACK) {
      if (ty == 0 && active) {
        State agg = s_agg[0][tx];
#pragma unroll
        for (int y = 1; y < COLS_BY; ++y)
          agg = Op::combine(agg, s_agg[y][tx]);
        s_tile[tx] = tile_prefix<Op>(scratch, c, tile, agg);
      }
      __syncthreads();
      p = s_tile[tx];
    } else {
      p = carry;
      State agg = s_agg[0][tx];
#pragma unroll
      for (int y = 1; y < COLS_BY; ++y)
        agg = Op::combine(agg, s_agg[y][tx]);
      carry = extend<Op>(carry, agg);
    }
    if (group.ok)
      p = extend<Op>(p, group.s);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const i64 q = q0 + r;
      if (active && q < g.len) {
        const i64 m = memory_pos(g, q);
        ColsOut<Op, NB> o{g, off, m};
        Op::emit(o, apply<Op>(p, st[r]), keep[r], q, m);
      }
    }
    __syncthreads(); // s_agg is rewritten by the next tile
  }
}

} // namespace scan
} // namespace jitops
