// jitops/scan.cuh — prefix scans along one axis of a strided tensor, forward and backward.
//
// The host collapses the tensors to a scan axis of length `len` and up to 7 batch dimensions
// (the *chains*: independent scans), then picks one of two kernels:
//
//   rows  the axis is unit-stride in every tensor. A warp owns a chunk of 32·ITEMS positions:
//         it loads them coalesced (lane-striped) into shared memory, and each lane takes ITEMS
//         consecutive ones (blocked): a first pass folds them, a shuffle scan joins the lanes,
//         a second pass scans them from the lane's prefix and stages the outputs for coalesced
//         stores. Without LOOKBACK each warp walks one whole row chunk by chunk with a carry,
//         the next chunk's loads in flight (in registers) while it scans the current one;
//         with LOOKBACK a block of WARPS warps scans one tile of a few long rows, and tiles
//         are joined by a grouped decoupled look-back (jitops/scan_lookback.cuh); the
//         largest tiles load by cp.async instead of through registers (rows_stages_async).
//   cols  any other layout: lanes run across chains (coalesced when the chains are the unit
//         stride dimension). A block stages a tile of 8·R positions × 32 chains in shared
//         memory with cp.async (nothing held in registers while the loads fly), then each
//         thread folds, and later scans, R consecutive positions of its chain. Two or three
//         buffers: the next tiles' loads fly while the current one is scanned. Without LOOKBACK a
//         block walks its chains' whole axis tile by tile; with LOOKBACK persistent blocks take the
//         tiles of a long axis by ticket, and tiles are joined by look-back.
//
// Positions are counted in kernel order q (the scan's direction); m = reverse ? len-1-q : q is
// the position in memory. Every result is a fixed combination order of fixed values, so reruns
// are bit-identical.
#pragma once
#include "jitops/common.cuh"
#include "jitops/scan_abi.h"
#include "jitops/scan_lookback.cuh"
#include "jitops/scan_ops.cuh"

namespace jitops {
namespace scan {

// The collapsed problem (jitops/scan_abi.h): a kernel instance uses its first Op::NTENS
// tensors and NB batch dimensions.
typedef ::jitops__scan_geom Geom;

// Offsets of chain c in every tensor, from its coordinates over the NB batch dimensions.
template <int NB, int NT>
__device__ __forceinline__ void chain_offsets(const Geom &g, i64 c, i64 (&off)[NT]) {
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

__device__ __forceinline__ i64 memory_pos(const Geom &g, i64 q) {
  return g.reverse ? g.len - 1 - q : q;
}

template <class Op, int K> using tensor_t = typename type_at<K, typename Op::Tensors>::type;

template <class Op, int K>
__device__ __forceinline__ tensor_t<Op, K> *global_at(const Geom &g, const i64 (&off)[Op::NTENS],
                                                      i64 m) {
  return (tensor_t<Op, K> *)g.ptr[K] + off[K] + m * g.astride[K];
}

// Sum of the element sizes of tensors [B, E).
template <class Op, int B, int E> __host__ __device__ constexpr int bytes_of() {
  if constexpr (B >= E)
    return 0;
  else
    return (int)sizeof(tensor_t<Op, B>) + bytes_of<Op, B + 1, E>();
}

// The element size of tensor k (k need not be a constant expression: an unrolled loop's
// index folds it to one).
template <class Op, int K = 0> __host__ __device__ constexpr int elem_size(int k) {
  if constexpr (K >= Op::NTENS)
    return 0;
  else
    return k == K ? (int)sizeof(tensor_t<Op, K>) : elem_size<Op, K + 1>(k);
}

// Shared address of a generic pointer into shared memory, for cp.async.
__device__ __forceinline__ unsigned shared_address(const void *p) {
  unsigned long long a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return (unsigned)a;
}

// Stages one element into shared memory: cp.async for 4- and 8-byte elements (the data
// travels without occupying registers), a plain copy for 2-byte ones.
template <class U> __device__ __forceinline__ void stage_element(U *dst, const U *src) {
  if constexpr (sizeof(U) == 4)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(shared_address(dst)), "l"(src)
                 : "memory");
  else if constexpr (sizeof(U) == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(shared_address(dst)), "l"(src)
                 : "memory");
  else
    *dst = *src;
}

// ---- rows: the axis is unit-stride --------------------------------------------------------

// The type a position of a tensor of type T is staged as: its own, but 32 bits for the 64-bit
// axis positions that a wide tile narrows (RowsStage::narrowed).
template <class T, bool NARROWED> struct staged_type { typedef T type; };
template <> struct staged_type<long long, true> { typedef int type; };

// Shared staging of one warp's chunk: input K at in_offset<K>, then output J at out_offset<J>.
// Lane-striped index i is stored at i + i/32, which makes both the striped accesses and the
// blocked ones (ITEMS a power of two) free of bank conflicts for 4-byte elements.
//
// With SHARED (rows_shares_staging) output 0 is staged over input 0, which has its size: a
// policy reads input 0 only at the position itself (scan_ops.cuh), and a lane reads each of its
// items (make) before it writes that item's outputs (emit) to the same slot, while no lane reads
// another's input 0. For an op of one input and one output, half the staging.
//
// PAIRS (2-byte elements staged by cp.async, rows_stages_async: 64 positions a lane in place, 32
// beside) pads by 32-bit words instead: the chunk moves as lane-striped words w (positions 2w and
// 2w + 1) at word slot w + w/32, so index i is at i + 2·(i/64), and a lane's 32 words are free of
// bank conflicts too (16 beside: lanes 2m and 2m + 1 share padded row m, word slots 33m to 33m +
// 31, and each row starts one bank after the one before). A word is copied as it lies in memory, so
// in a reverse scan its two positions are swapped: kernel index i is then at slot(i ^ 1)
// (RowsFetch::swap). Every tensor keeps that convention.
//
// The 8-byte tensors beside 2- and 4-byte data are axis positions (the indices cummax and cummin
// write and their backward reads), which a wide tile (WIDE: rows_stages_async) stages as their
// low 32 bits (narrowed): 6 bytes a position instead of 10 in a PAIRS tile, where a lane's blocked
// accesses to them meet 2-way bank conflicts, and 8 instead of 12 beside f32.
template <class Op, int ITEMS, bool SHARED = false, bool WIDE = false> struct RowsStage {
  static constexpr bool PAIRS = elem_size<Op>(0) == 2 && ITEMS >= 32;
  static_assert(!PAIRS || WIDE, "word pairs are the staging of a wide tile");
  // Whether tensor k is staged as 32 bits: 64-bit axis positions beside 2- or 4-byte data in a
  // wide tile (the host plans such tiles only for axes whose positions are below 2^31). An
  // 8-byte tensor of another type there fails to compile: staged_type narrows only long long,
  // and the readers assert that the staged type has the staged size.
  __host__ __device__ static constexpr bool narrowed(int k) {
    return WIDE && elem_size<Op>(0) < 8 && elem_size<Op>(k) == 8;
  }
  // The bytes a position of tensor k takes in the staging.
  __host__ __device__ static constexpr int staged_size(int k) {
    return narrowed(k) ? 4 : elem_size<Op>(k);
  }
  __host__ __device__ static constexpr int staged_bytes(int b, int e) {
    return b >= e ? 0 : staged_size(b) + staged_bytes(b + 1, e);
  }
  template <int K> using staged_t = typename staged_type<tensor_t<Op, K>, narrowed(K)>::type;
  static constexpr int CHUNK = 32 * ITEMS;
  // How far a lane's loops over a chunk unroll: fully, except where the chunk may pass the end
  // of the axis (the last one of a row), whose loops roll up by 4: they run once a row, and
  // unrolled they doubled the 64-item tile's compile time and cost cummax's narrow tile a
  // third of its (0.39 s against 0.29 s on two cores).
  template <bool FULL> static constexpr int UNROLL = FULL ? ITEMS : 4;
  static constexpr int SLOTS = CHUNK + ITEMS;
  static constexpr int IN_BYTES = staged_bytes(0, Op::NIN);
  static constexpr int OUT_BYTES = staged_bytes(Op::NIN, Op::NTENS);
  // The bytes of output 0 that live in input 0's slots.
  static constexpr int OVERLAID = SHARED ? staged_size(Op::NIN) : 0;
  static_assert(!SHARED || staged_size(0) == OVERLAID,
                "output 0 shares the staging only with an input 0 of its size");
  static constexpr int BYTES = SLOTS * (IN_BYTES + OUT_BYTES - OVERLAID);
  template <int K> __host__ __device__ static constexpr int in_offset() {
    return SLOTS * staged_bytes(0, K);
  }
  template <int J> __host__ __device__ static constexpr int out_offset() {
    if constexpr (SHARED && J == 0)
      return 0;
    else
      return SLOTS * (IN_BYTES - OVERLAID + staged_bytes(Op::NIN, Op::NIN + J));
  }
  __device__ static int slot(int i) {
    return PAIRS ? i + 2 * (i >> 6) : i + (i >> 5);
  }
};

// One chunk's inputs in registers, lane-striped: input K's ITEMS values, then the next input's.
template <class Op, int K, int ITEMS, bool END = (K >= Op::NIN)> struct RowsRegs {
  tensor_t<Op, K> v[ITEMS];
  RowsRegs<Op, K + 1, ITEMS> next;
};
template <class Op, int K, int ITEMS> struct RowsRegs<Op, K, ITEMS, true> {};

// A lane's first lane-striped element of tensor K in the chunk at `base`, and the step to its
// next one (the axis is unit-stride here: ±32 elements). FULL chunks skip every range check.
template <class Op, int K>
__device__ __forceinline__ tensor_t<Op, K> *
rows_lane_ptr(const Geom &g, const i64 (&off)[Op::NTENS], i64 base, int lane) {
  const i64 q = base + lane;
  return (tensor_t<Op, K> *)g.ptr[K] + off[K] + (g.reverse ? g.len - 1 - q : q);
}

// Issues the loads of the chunk at `base` (the registers fill while the warp goes on).
template <class Op, int K, int NB, int ITEMS, bool FULL>
__device__ __forceinline__ void rows_fetch(RowsRegs<Op, K, ITEMS> &r, const Geom &g,
                                           const i64 (&off)[Op::NTENS], i64 base, int lane) {
  if constexpr (K < Op::NIN) {
    const tensor_t<Op, K> *p = rows_lane_ptr<Op, K>(g, off, base, lane);
    const int step = g.reverse ? -32 : 32;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)
      if (FULL || base + lane + 32 * j < g.len)
        r.v[j] = p[j * step];
    rows_fetch<Op, K + 1, NB, ITEMS, FULL>(r.next, g, off, base, lane);
  }
}

// Writes fetched registers into the warp's input staging (lane-striped i = lane + 32j lives
// at slot i + i/32 = lane + 33j).
template <class Op, int K, int ITEMS, bool FULL>
__device__ __forceinline__ void rows_put(const RowsRegs<Op, K, ITEMS> &r, char *stage, i64 base,
                                         i64 len, int lane) {
  if constexpr (K < Op::NIN) {
    typedef RowsStage<Op, ITEMS> Stage;
    tensor_t<Op, K> *buf = (tensor_t<Op, K> *)(stage + Stage::template in_offset<K>()) + lane;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)
      if (FULL || base + lane + 32 * j < len)
        buf[33 * j] = r.v[j];
    rows_put<Op, K + 1, ITEMS, FULL>(r.next, stage, base, len, lane);
  }
}

// The first 32-bit word of tensor K a lane moves in a PAIRS chunk at `base` (kernel positions
// base + 2·lane and the next; in reverse the word starts at the second, as it lies in memory).
// The lane's next words are 64 positions apart, towards the row's start in reverse.
template <class Op, int K>
__device__ __forceinline__ tensor_t<Op, K> *
rows_lane_pair(const Geom &g, const i64 (&off)[Op::NTENS], i64 base, int lane) {
  const i64 q = base + 2 * lane;
  tensor_t<Op, K> *row = (tensor_t<Op, K> *)g.ptr[K] + off[K];
  return g.reverse ? row + (g.len - 2 - q) : row + q;
}

// Issues the cp.async copies of input K onwards of the chunk at `base`. 4- and 8-byte elements
// go where rows_put would put them (lane-striped i = lane + 32j at slot lane + 33j); 2-byte ones
// as lane-striped words (RowsStage::PAIRS), which the host has checked are aligned: every row
// starts on a word and, in reverse, has an even length. A word half past the end (a forward row
// of odd length) is copied alone. Narrowed axis positions go as their low 32 bits: beside 4-byte
// data where rows_put would put them, beside words at kernel index i's slot(i ^ swap).
template <class Op, int K, int ITEMS, bool FULL>
__device__ __forceinline__ void rows_stage_async_inputs(const Geom &g, const i64 (&off)[Op::NTENS],
                                                        char *stage, i64 base, int lane) {
  if constexpr (K < Op::NIN) {
    typedef RowsStage<Op, ITEMS, false, true> Stage;
    constexpr int UNROLL = Stage::template UNROLL<FULL>;
    typedef tensor_t<Op, K> U;
    typedef typename Stage::template staged_t<K> S;
    char *input = stage + Stage::template in_offset<K>();
    if constexpr (sizeof(U) >= 4 && !Stage::PAIRS) {
      // Lane-striped; narrowed axis positions as the low 32-bit word of each.
      S *buf = (S *)input + lane;
      const U *p = rows_lane_ptr<Op, K>(g, off, base, lane);
      const int step = g.reverse ? -32 : 32;
#pragma unroll(UNROLL)
      for (int j = 0; j < ITEMS; ++j)
        if (FULL || base + lane + 32 * j < g.len)
          stage_element(buf + 33 * j, (const S *)(p + j * step));
    } else if constexpr (sizeof(U) == 8) {
      // Axis positions beside words: the low 32 bits of each, lane-striped by position, kernel
      // index i at slot(i ^ swap) like the words' halves.
      static_assert(Stage::staged_size(K) == 4, "64-bit positions staged as 32 bits");
      const int swap = g.reverse;
      const U *p = rows_lane_ptr<Op, K>(g, off, base, lane ^ swap);
      const int step = g.reverse ? -32 : 32;
#pragma unroll(UNROLL)
      for (int j = 0; j < ITEMS; ++j)
        if (FULL || base + ((lane + 32 * j) ^ swap) < g.len)
          stage_element((int *)input + Stage::slot(lane + 32 * j), (const int *)(p + j * step));
    } else {
      static_assert(sizeof(U) == 2 && ITEMS % 2 == 0, "words of two 2-byte elements");
      unsigned *buf = (unsigned *)input + lane;
      const i64 q = base + 2 * lane; // the first position of the lane's first word
      const U *p = rows_lane_pair<Op, K>(g, off, base, lane);
      const int step = g.reverse ? -64 : 64;
#pragma unroll(UNROLL / 2)
      for (int j = 0; j < ITEMS / 2; ++j) {
        if (FULL || q + 64 * j + 1 < g.len)
          stage_element(buf + 33 * j, (const unsigned *)(p + j * step));
        else if (q + 64 * j < g.len)
          *(U *)(buf + 33 * j) = p[j * step];
      }
    }
    rows_stage_async_inputs<Op, K + 1, ITEMS, FULL>(g, off, stage, base, lane);
  }
}

// Copies the inputs of the chunk at `base` into the warp's staging with cp.async and waits for
// them (the caller then joins the warp).
template <class Op, int ITEMS, bool FULL>
__device__ __forceinline__ void rows_stage_async(const Geom &g, const i64 (&off)[Op::NTENS],
                                                 char *stage, i64 base, int lane) {
  rows_stage_async_inputs<Op, 0, ITEMS, FULL>(g, off, stage, base, lane);
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// Stores output 0 of a PAIRS chunk (staged over input 0) as the lane-striped words its inputs
// were loaded as.
template <class Op, int ITEMS, bool FULL>
__device__ __forceinline__ void rows_store_pairs(const Geom &g, const i64 (&off)[Op::NTENS],
                                                 const char *stage, i64 base, int lane) {
  constexpr int UNROLL = RowsStage<Op, ITEMS, true, true>::template UNROLL<FULL>;
  typedef tensor_t<Op, Op::NIN> U;
  static_assert(sizeof(U) == 2, "pairs of a 2-byte output 0");
  static_assert(RowsStage<Op, ITEMS, true, true>::template out_offset<0>() == 0,
                "the output is staged over input 0");
  const unsigned *buf = (const unsigned *)stage + lane;
  const i64 q = base + 2 * lane;
  U *p = rows_lane_pair<Op, Op::NIN>(g, off, base, lane);
  const int step = g.reverse ? -64 : 64;
#pragma unroll(UNROLL / 2)
  for (int j = 0; j < ITEMS / 2; ++j) {
    if (FULL || q + 64 * j + 1 < g.len)
      *(unsigned *)(p + j * step) = buf[33 * j];
    else if (q + 64 * j < g.len)
      p[j * step] = *(const U *)(buf + 33 * j);
  }
}

template <class Op, int NB, int ITEMS, bool WIDE> struct RowsFetch {
  typedef RowsStage<Op, ITEMS, false, WIDE> Stage;
  const Geom &g;
  const i64 (&off)[Op::NTENS];
  const char *stage;
  i64 q;    // kernel-order position of this item
  int b;    // its index within the chunk
  int sb;   // its staging slot
  int swap; // 1 where a staged word's two positions are swapped (RowsStage::PAIRS)

  template <int K>
  __device__ __forceinline__ acc_t<tensor_t<Op, K>> get(int shift,
                                                        acc_t<tensor_t<Op, K>> dflt) const {
    typedef typename Stage::template staged_t<K> S;
    static_assert(sizeof(S) == Stage::staged_size(K), "the staged type has the staged size");
    const S *buf = (const S *)(stage + Stage::template in_offset<K>());
    if (shift == 0) // the item itself: staged (folded at compile time)
      return load(buf + sb);
    const i64 qs = q + shift;
    if (qs < 0 || qs >= g.len)
      return dflt;
    const int bs = b + shift;
    if (bs >= 0 && bs < Stage::CHUNK)
      return load(buf + Stage::slot(bs ^ swap));
    return load(global_at<Op, K>(g, off, memory_pos(g, qs)));
  }
};

template <class Op, int ITEMS, bool SHARED, bool WIDE> struct RowsOut {
  typedef RowsStage<Op, ITEMS, SHARED, WIDE> Stage;
  char *stage;
  int sb;
  template <int J> __device__ __forceinline__ void put(acc_t<tensor_t<Op, Op::NIN + J>> v) {
    typedef typename Stage::template staged_t<Op::NIN + J> S;
    static_assert(sizeof(S) == Stage::staged_size(Op::NIN + J), "the staged type's size");
    store((S *)(stage + Stage::template out_offset<J>()) + sb, (acc_t<S>)v);
  }
};

// Stores output J onwards of a staged chunk, coalesced: lane-striped elements (narrowed axis
// positions widened from their 32 bits), or for a PAIRS chunk output 0 in words and axis
// positions from their 32 bits (in the words' order: kernel index i at slot(i ^ swap)).
template <class Op, int J, int NB, int ITEMS, bool FULL, bool SHARED, bool WIDE>
__device__ __forceinline__ void rows_store_outputs(const Geom &g, const i64 (&off)[Op::NTENS],
                                                   const char *stage, i64 base, int lane) {
  if constexpr (Op::NIN + J < Op::NTENS) {
    typedef RowsStage<Op, ITEMS, SHARED, WIDE> Stage;
    constexpr int UNROLL = Stage::template UNROLL<FULL>;
    typedef tensor_t<Op, Op::NIN + J> U;
    const int step = g.reverse ? -32 : 32;
    if constexpr (Stage::PAIRS && J == 0) {
      rows_store_pairs<Op, ITEMS, FULL>(g, off, stage, base, lane);
    } else if constexpr (Stage::PAIRS) {
      static_assert(Stage::staged_size(Op::NIN + J) == 4, "64-bit positions staged as 32 bits");
      const int *buf = (const int *)(stage + Stage::template out_offset<J>());
      const int swap = g.reverse;
      U *p = rows_lane_ptr<Op, Op::NIN + J>(g, off, base, lane ^ swap);
#pragma unroll(UNROLL)
      for (int j = 0; j < ITEMS; ++j)
        if (FULL || base + ((lane + 32 * j) ^ swap) < g.len)
          p[j * step] = buf[Stage::slot(lane + 32 * j)];
    } else {
      typedef typename Stage::template staged_t<Op::NIN + J> S;
      const S *buf = (const S *)(stage + Stage::template out_offset<J>()) + lane;
      U *p = rows_lane_ptr<Op, Op::NIN + J>(g, off, base, lane);
#pragma unroll(UNROLL)
      for (int j = 0; j < ITEMS; ++j)
        if (FULL || base + lane + 32 * j < g.len)
          p[j * step] = buf[33 * j];
    }
    rows_store_outputs<Op, J + 1, NB, ITEMS, FULL, SHARED, WIDE>(g, off, stage, base, lane);
  }
}

// The lane's item i: its fetch view of the staged inputs.
template <class Op, int NB, int ITEMS, bool WIDE>
__device__ __forceinline__ RowsFetch<Op, NB, ITEMS, WIDE>
rows_item(const Geom &g, const i64 (&off)[Op::NTENS], const char *stage, i64 base, int lane,
          int i) {
  const int b0 = lane * ITEMS;
  // A lane's items share one i/32 (one i/64 for PAIRS): slot(b0 + i) = slot(b0) + i. (The
  // other layouts spell slot(b0) out: through slot() the f32 cumprod backward's code changed.)
  // A swapped word's item is at i ^ 1: i + 1 for an even i, i - 1 for an odd one, so that in
  // the unrolled passes (i a constant) each item's slot is one of two bases plus a constant.
  typedef RowsStage<Op, ITEMS, false, WIDE> Stage;
  typedef RowsFetch<Op, NB, ITEMS, WIDE> Fetch;
  const int swap = Stage::PAIRS && g.reverse;
  const int s0 = Stage::PAIRS ? Stage::slot(b0) : b0 + (b0 >> 5);
  if constexpr (Stage::PAIRS)
    return Fetch{g, off, stage, base + b0 + i, b0 + i, (i & 1 ? s0 - swap : s0 + swap) + i, swap};
  else
    return Fetch{g, off, stage, base + b0 + i, b0 + i, s0 + (i ^ swap), swap};
}

// First pass over a staged chunk: the fold of the lane's ITEMS positions (unchecked with FULL;
// checked, the identity for a lane wholly past the end; such lanes only ever precede positions
// that are not emitted).
template <class Op, int NB, int ITEMS, bool FULL, bool WIDE = false>
__device__ __forceinline__ typename Op::State
rows_reduce(const Geom &g, const i64 (&off)[Op::NTENS], const char *stage, i64 base, int lane) {
  typedef typename Op::State State;
  typename Op::Keep keep;
  if constexpr (FULL) {
    const RowsFetch<Op, NB, ITEMS, WIDE> f0 =
        rows_item<Op, NB, ITEMS, WIDE>(g, off, stage, base, lane, 0);
    State agg = Op::make(f0, f0.q, memory_pos(g, f0.q), keep);
#pragma unroll
    for (int i = 1; i < ITEMS; ++i) {
      const RowsFetch<Op, NB, ITEMS, WIDE> f =
          rows_item<Op, NB, ITEMS, WIDE>(g, off, stage, base, lane, i);
      agg = Op::combine(agg, Op::make(f, f.q, memory_pos(g, f.q), keep));
    }
    return agg;
  } else {
    constexpr int UNROLL = RowsStage<Op, ITEMS, false, WIDE>::template UNROLL<false>;
    Prefix<State> agg{Op::identity(), false};
#pragma unroll(UNROLL)
    for (int i = 0; i < ITEMS; ++i) {
      const RowsFetch<Op, NB, ITEMS, WIDE> f =
          rows_item<Op, NB, ITEMS, WIDE>(g, off, stage, base, lane, i);
      if (f.q < g.len)
        agg = extend<Op>(agg, Op::make(f, f.q, memory_pos(g, f.q), keep));
    }
    return agg.s;
  }
}

// Whether the second pass takes Op's steady(run, s): combine for an item that leaves the run's
// maximum where it is, cheaper, where steady_fits(run, s) says so. Where Op sets STEADY
// (logcumsumexp and its backward, scan_ops.cuh).
template <class Op, class = void> struct steady_pass { static constexpr bool value = false; };
template <class Op> struct steady_pass<Op, decltype((void)Op::STEADY)> {
  static constexpr bool value = Op::STEADY;
};

// The second pass's scan of the lane's items, each output staged as it is made.
template <class Op, int NB, int ITEMS, bool FULL, bool SHARED, bool WIDE>
__device__ __forceinline__ void rows_scan_items(const Geom &g, const i64 (&off)[Op::NTENS],
                                                char *stage, i64 base, int lane,
                                                const Prefix<typename Op::State> &prefix) {
  typedef typename Op::State State;
  constexpr int UNROLL = RowsStage<Op, ITEMS, SHARED, WIDE>::template UNROLL<FULL>;
  State run = prefix.s;
#pragma unroll(UNROLL)
  for (int i = 0; i < ITEMS; ++i) {
    const RowsFetch<Op, NB, ITEMS, WIDE> f =
        rows_item<Op, NB, ITEMS, WIDE>(g, off, stage, base, lane, i);
    if (FULL || f.q < g.len) {
      typename Op::Keep keep;
      const i64 m = memory_pos(g, f.q);
      const State s = Op::make(f, f.q, m, keep);
      run = i == 0 ? (prefix.ok ? Op::combine(run, s) : s) : Op::combine(run, s);
      RowsOut<Op, ITEMS, SHARED, WIDE> o{stage, f.sb};
      Op::emit(o, run, keep, f.q, m);
    }
  }
}

// rows_scan_items for an Op with steady() and an unchecked (FULL) chunk. The items go in
// batches of STEADY_BATCH: a batch's inputs are read first, and where steady_fits() holds for
// every item of every lane of the warp (a warp-uniform branch, so no divergent code runs) the
// batch is scanned by steady(), otherwise by combine(). Either way the results are combine()'s,
// bit for bit, and no item is scanned twice.
//
// Contract: steady_fits(run, s) reads only what steady() leaves unchanged (the running
// maximum), so testing every item of a batch against the batch's first run covers the batch.
// Where a FULL chunk passes the row's end (SCAN_ALL), the items past it come after every
// in-range item in scan order and can only change which branch runs, not an output.
constexpr int STEADY_BATCH = 4;
// Chunks of fewer positions a lane keep rows_scan_items: the walks of short rows in bulk (4 and
// 8 a lane), whose lanes' first batches, the likeliest to raise the maximum, are most of their
// batches; this also leaves the backwards' narrow tiles and walks (8 a lane) as they were.
constexpr int STEADY_MIN_ITEMS = 16;
template <class Op, int NB, int ITEMS, bool SHARED, bool WIDE>
__device__ __forceinline__ void rows_scan_items_steady(const Geom &g, const i64 (&off)[Op::NTENS],
                                                       char *stage, i64 base, int lane,
                                                       const Prefix<typename Op::State> &prefix) {
  typedef typename Op::State State;
  typedef RowsFetch<Op, NB, ITEMS, WIDE> Fetch;
  static_assert(ITEMS % STEADY_BATCH == 0, "whole batches");
  State run = prefix.s;
  // Stages item i's output from the run through it.
  auto stage_output = [&](int i, const typename Op::Keep &keep) {
    const Fetch f = rows_item<Op, NB, ITEMS, WIDE>(g, off, stage, base, lane, i);
    RowsOut<Op, ITEMS, SHARED, WIDE> o{stage, f.sb};
    Op::emit(o, run, keep, f.q, memory_pos(g, f.q));
  };
#pragma unroll
  for (int i0 = 0; i0 < ITEMS; i0 += STEADY_BATCH) {
    const bool started = i0 > 0 || prefix.ok; // otherwise item 0 starts the run
    State s[STEADY_BATCH];
    typename Op::Keep keep[STEADY_BATCH];
    bool fits = started;
#pragma unroll
    for (int j = 0; j < STEADY_BATCH; ++j) {
      const Fetch f = rows_item<Op, NB, ITEMS, WIDE>(g, off, stage, base, lane, i0 + j);
      s[j] = Op::make(f, f.q, memory_pos(g, f.q), keep[j]);
      fits &= Op::steady_fits(run, s[j]);
    }
    if (__all_sync(0xffffffffu, fits)) {
#pragma unroll
      for (int j = 0; j < STEADY_BATCH; ++j) {
        run = Op::steady(run, s[j]);
        stage_output(i0 + j, keep[j]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < STEADY_BATCH; ++j) {
        run = j > 0 || started ? Op::combine(run, s[j]) : s[j];
        stage_output(i0 + j, keep[j]);
      }
    }
  }
}

// Second pass: scans the lane's positions from its exclusive prefix, stages the outputs, and
// stores the chunk coalesced. FULL scans every item unchecked; the stores check the end unless
// the chunk is whole (`whole`, which FULL alone does not imply).
template <class Op, int NB, int ITEMS, bool FULL, bool SHARED = false, bool WIDE = false>
__device__ __forceinline__ void
rows_emit(const Geom &g, const i64 (&off)[Op::NTENS], char *stage, i64 base, int lane,
          const Prefix<typename Op::State> &prefix, bool whole = FULL) {
  if constexpr (FULL && steady_pass<Op>::value && ITEMS >= STEADY_MIN_ITEMS)
    rows_scan_items_steady<Op, NB, ITEMS, SHARED, WIDE>(g, off, stage, base, lane, prefix);
  else
    rows_scan_items<Op, NB, ITEMS, FULL, SHARED, WIDE>(g, off, stage, base, lane, prefix);
  __syncwarp();
  if (FULL && whole)
    rows_store_outputs<Op, 0, NB, ITEMS, true, SHARED, WIDE>(g, off, stage, base, lane);
  else
    rows_store_outputs<Op, 0, NB, ITEMS, false, SHARED, WIDE>(g, off, stage, base, lane);
}

// One warp chunk once its inputs are staged: fold, shuffle scan, emit. Returns the chunk's
// inclusive aggregate in every lane (lane 31's inclusive state).
template <class Op, int NB, int ITEMS, bool FULL>
__device__ __forceinline__ typename Op::State rows_chunk(const Geom &g, const i64 (&off)[Op::NTENS],
                                                         char *stage, i64 base, int lane,
                                                         const Prefix<typename Op::State> &carry) {
  typedef typename Op::State State;
  const State incl =
      warp_inclusive<Op>(rows_reduce<Op, NB, ITEMS, FULL>(g, off, stage, base, lane), lane);
  const State excl = shfl_up_state(incl, 1);
  rows_emit<Op, NB, ITEMS, FULL>(g, off, stage, base, lane,
                                 lane > 0 ? extend<Op>(carry, excl) : carry);
  return shfl_state(incl, 31);
}

// The kernels take one jitops__scan_args (jitops/scan_abi.h), whose arrays must hold the
// instance's tensors and batch dimensions. They start by copying its geometry and scratch
// into locals, as the two separate parameters of their earlier signature were: the compiler
// then keeps what it reads of them in registers, as before, instead of re-reading fields of
// the larger parameter inside loops (which changed the register use of several instances).
template <class Op, int NB> __host__ __device__ constexpr bool fits_args() {
  return Op::NTENS <= JITOPS__SCAN_MAX_TENSORS && NB >= 0 && NB <= JITOPS__SCAN_MAX_BATCH;
}

// One input and one output of its size (cumsum, cumprod, logcumsumexp): the output can be staged
// over the input.
template <class Op> __host__ __device__ constexpr bool in_place_op() {
  return Op::NIN == 1 && Op::NTENS == 2 && bytes_of<Op, 0, 1>() == bytes_of<Op, 1, 2>();
}

// Where the staging is in place, a look-back tile's input can go to shared memory by cp.async:
// no registers hold it on the way, so a lane can take 128 bytes (16 positions of 8 bytes, 32 of
// 4, or 64 of 2 copied in pairs) and a block of 8 warps a whole 32 KiB tile. Blocks an SM are
// then bounded by shared memory (six of 33 KiB) instead of threads (four of 16 warps of 16
// positions through registers): one and a half times the bytes in flight while tiles wait on
// their predecessors for 4-byte elements, three times for 2-byte ones. States of up to 8 bytes
// (the 16-byte ones would not fit the registers of six blocks).
//
// The other ops (cummax and cummin, the backwards of cumprod, cummax, cummin and logcumsumexp)
// take wide tiles of 64 bytes a lane of input 0 where every input has 4- or 8-byte elements:
// output 0 is staged over input 0 and the rest beside, in dynamic shared memory
// (rows_dynamic_staging): 50 KiB a block for the f32 and f64 three-input backwards, four blocks
// an SM (64 registers); 33 KiB for f32 and f64 cummax, cummin and the cummax backward, six blocks
// an SM (40 registers), their int64 indices staged as 32 bits in f32 (narrowed). Measured so: f64
// cummax spills 56 bytes, f32 cummax 8; on an H200 the f32 ones ran 0.88-0.93 of the time of four
// blocks of 64 registers at 2^24 to 2^27 positions, the backward 1.02-1.05 at 2^22 to 2^23
// (512 to 1056 tiles). Their narrow tiles, loaded through registers, hold at most 32 registers of
// prefetch a lane: 8 positions of f32, half a wide tile. (128 bytes a lane, two blocks an SM,
// measured slower for f32.) In f16 and bf16 every one of them takes 64 bytes a lane in word pairs
// (PAIRS), int64 indices staged as 32 bits: 50 KiB again, four blocks an SM (64 registers). 128
// bytes a lane in blocks of 4 warps, the same staging, ran at 128 registers and a quarter of the
// SM's warps, and 1.1-1.5x slower at 2^27 (bench/NOTES-scan.md).
//
// Whether every input's elements have lo to hi bytes.
template <class Op> __host__ __device__ constexpr bool inputs_sized(int lo, int hi, int k = 0) {
  return k >= Op::NIN ||
         (elem_size<Op>(k) >= lo && elem_size<Op>(k) <= hi && inputs_sized<Op>(lo, hi, k + 1));
}

// Whether every tensor of Op, inputs and outputs, has elements of `bytes` bytes.
template <class Op> __host__ __device__ constexpr bool tensors_sized(int bytes, int k = 0) {
  return k >= Op::NTENS || (elem_size<Op>(k) == bytes && tensors_sized<Op>(bytes, k + 1));
}

// Whether every tensor of Op can be staged in a PAIRS tile: 2-byte elements, and 8-byte ones,
// which beside 2-byte data are int64 axis positions (RowsStage::narrowed checks it).
template <class Op> __host__ __device__ constexpr bool pairs_tensors(int k = 0) {
  return k >= Op::NTENS ||
         ((elem_size<Op>(k) == 2 || elem_size<Op>(k) == 8) && pairs_tensors<Op>(k + 1));
}

template <class Op, int ITEMS, bool LOOKBACK>
__host__ __device__ constexpr bool rows_stages_async() {
  if constexpr (!LOOKBACK)
    return false;
  else if constexpr (in_place_op<Op>())
    return ITEMS * sizeof(tensor_t<Op, 0>) == 128 && sizeof(typename Op::State) <= 8;
  else if constexpr (sizeof(tensor_t<Op, 0>) == 2)
    return ITEMS == 32 && sizeof(tensor_t<Op, Op::NIN>) == 2 && pairs_tensors<Op>();
  else
    return ITEMS * sizeof(tensor_t<Op, 0>) == 64 && inputs_sized<Op>(4, 8) && Op::NTENS > Op::NIN &&
           sizeof(tensor_t<Op, 0>) == sizeof(tensor_t<Op, Op::NIN>);
}

// Whether a look-back tile of Op stages its output 0 over its input 0, and the blocks an SM the
// compiler must then fit in registers: every tile staged by cp.async, and the narrow tiles of
// the cumsum and cumprod family (a packed 4-byte state), as many as the halved staging and the
// threads allow, so that more loads are in flight while tiles wait on their predecessors (8
// blocks of 256 with 16 positions a lane: at most 32 registers a thread, the instances measured
// spill 4 bytes; 6 of the in-place cp.async tiles, bounded by shared memory: 40 registers; of
// the others' as many as their staging allows, above). Every other instance states no minimum,
// as before.
template <class Op, int ITEMS, bool LOOKBACK>
__host__ __device__ constexpr bool rows_shares_staging() {
  if constexpr (!LOOKBACK)
    return false;
  else if constexpr (!in_place_op<Op>())
    return rows_stages_async<Op, ITEMS, LOOKBACK>();
  else
    return sizeof(typename Op::State) == 4 || rows_stages_async<Op, ITEMS, LOOKBACK>();
}

// The dynamic shared memory of a rows kernel's staging: the wide tiles of ops that are not in
// place (rows_stages_async); 0 where the staging is a static array. The host passes it in the
// name expression (DYN) and at launch, and the kernel checks that the two agree.
template <class Op, int WARPS, int ITEMS, bool LOOKBACK>
__host__ __device__ constexpr int rows_dynamic_staging() {
  if constexpr (in_place_op<Op>() || !rows_stages_async<Op, ITEMS, LOOKBACK>())
    return 0;
  else
    return WARPS * RowsStage<Op, ITEMS, true, true>::BYTES;
}

template <class Op, int WARPS, int ITEMS, bool LOOKBACK>
__host__ __device__ constexpr int rows_blocks_per_sm() {
  if constexpr (!rows_shares_staging<Op, ITEMS, LOOKBACK>()) {
    return 0; // no minimum: a minimum of 1 lets ptxas spend more registers than it does unasked
  } else {
    constexpr int stage =
        WARPS * RowsStage<Op, ITEMS, true, rows_stages_async<Op, ITEMS, LOOKBACK>()>::BYTES;
    constexpr int by_threads = 2048 / (WARPS * 32);
    constexpr int by_shared =
        JITOPS__SCAN_SM_SHARED / (stage + 2 * JITOPS__SCAN_BLOCK_RESERVED_SHARED);
    constexpr int n = by_threads < by_shared ? by_threads : by_shared;
    return n < 1 ? 1 : n;
  }
}

// ---- L2 prefetch for the wide tiles ------------------------------------------------------
//
// A wide tile holds its staging from its loads until its prefix arrives, so the tiles an SM
// holds bound the bytes in flight, and every wait on a predecessor leaves DRAM idle. Each
// block therefore asks L2 for the inputs of the block PREFETCH_TICKETS tickets after its own
// (which starts about that many tiles later, about a DRAM latency from now), and that block's
// cp.async then finds them in L2 (bench/NOTES-scan.md has the measurements behind each rule):
// - 64 tickets ahead: 128 measured the same, 256 gained less and lost on some ops;
// - only calls of at least PREFETCH_MIN_BYTES of input 0: at 2^24 f32 elements the prefetch made
//   most ops 0-7% slower (at 2^22 up to 15%); from 2^26 on it paid for every op it is on, at 2^25
//   for all but logcumsumexp (1.01-1.02);
// - only ops whose tensors are all 4 bytes (cumsum, cumprod and logcumsumexp in f32 and their
//   backwards; cumsum and cumprod in i32, the same tiles, tested but not timed), or in place with
//   a 4-byte state (cumsum and cumprod in bf16 and f16): the others gained at most 3% (cummax,
//   whose tiles then spilled and lost as much on calls too small to prefetch) or nothing (2-byte
//   logcumsumexp and backwards).
enum : i64 { PREFETCH_TICKETS = 64, PREFETCH_MIN_BYTES = (i64)1 << 27 };

template <class Op> __host__ __device__ constexpr bool rows_prefetches() {
  return tensors_sized<Op>(4) || (in_place_op<Op>() && sizeof(typename Op::State) == 4);
}

// Prefetches input K onwards of `count` kernel positions from `first` on row `off`: a
// contiguous memory range per input (the rows kernel's axis is unit-stride), one 128-byte line
// per thread and step.
template <class Op, int K>
__device__ __forceinline__ void rows_prefetch_inputs(const Geom &g, const i64 (&off)[Op::NTENS],
                                                     i64 first, i64 count, int thread,
                                                     int threads) {
  if constexpr (K < Op::NIN) {
    const i64 low = g.reverse ? g.len - first - count : first;
    const char *from = (const char *)((const tensor_t<Op, K> *)g.ptr[K] + off[K] + low);
    const char *line = (const char *)((unsigned long long)from & ~127ull);
    const i64 lines = (from + count * (i64)sizeof(tensor_t<Op, K>) - line + 127) / 128;
    for (i64 i = thread; i < lines; i += threads)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(line + 128 * i));
    rows_prefetch_inputs<Op, K + 1>(g, off, first, count, thread, threads);
  }
}

// Prefetches the inputs of the tile that ticket `ticket` names, if there is one: TILE
// positions of row ticket % chains from (ticket / chains) * TILE, over the block's THREADS.
template <class Op, int NB, int TILE, int THREADS>
__device__ __forceinline__ void rows_prefetch_ticket(const Geom &g, i64 ticket) {
  const i64 tile = ticket / g.chains, first = tile * TILE;
  if (first >= g.len)
    return;
  i64 off[Op::NTENS];
  chain_offsets<NB>(g, ticket - tile * g.chains, off);
  const i64 count = g.len - first < TILE ? g.len - first : (i64)TILE;
  rows_prefetch_inputs<Op, 0>(g, off, first, count, (int)threadIdx.x, THREADS);
}

template <class Op, int NB, int WARPS, int ITEMS, bool LOOKBACK, int SBYTES, int DYN = 0>
__global__ void __launch_bounds__(WARPS * 32, rows_blocks_per_sm<Op, WARPS, ITEMS, LOOKBACK>())
    rows(const jitops__scan_args args) {
  typedef typename Op::State State;
  constexpr bool SHARED = rows_shares_staging<Op, ITEMS, LOOKBACK>();
  constexpr bool ASYNC = rows_stages_async<Op, ITEMS, LOOKBACK>();
  typedef RowsStage<Op, ITEMS, SHARED, ASYNC> Stage;
  static_assert(sizeof(State) == SBYTES, "the host's state size disagrees with the template");
  static_assert(ITEMS == 4 || ITEMS == 8 || ITEMS == 16 || ASYNC,
                "ITEMS is 4, 8 or 16, or a wide tile's 64 or 128 bytes staged by cp.async");
  static_assert(fits_args<Op, NB>(), "more tensors or batch dimensions than the arguments hold");
  static_assert(DYN == rows_dynamic_staging<Op, WARPS, ITEMS, LOOKBACK>(),
                "the host's dynamic staging size disagrees with the template");
  static_assert(DYN > 0 || WARPS * Stage::BYTES <= JITOPS__SCAN_ROWS_STAGE_BUDGET,
                "the staging exceeds what the host sized ITEMS for");
  const Geom g = args.geom; // see fits_args
  const Scratch scratch = args.scratch;
  char *stage_all;
  if constexpr (DYN > 0) {
    extern __shared__ __align__(16) char stage_dynamic[];
    stage_all = stage_dynamic;
  } else {
    __shared__ __align__(16) char stage_static[WARPS * Stage::BYTES];
    stage_all = stage_static;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  char *stage = stage_all + warp * Stage::BYTES;
  RowsRegs<Op, 0, ITEMS> regs;
  constexpr int CHUNK = Stage::CHUNK;

  if constexpr (!LOOKBACK) {
    // One warp per row, chunk by chunk, carrying the row's prefix; the next chunk's loads
    // are in flight while the current one is scanned.
    i64 off[Op::NTENS];
    const i64 row = (i64)blockIdx.x * WARPS + warp;
    if (row >= g.chains)
      return;
    chain_offsets<NB>(g, row, off);
    if (!QUICK_BUILD && CHUNK <= g.len)
      rows_fetch<Op, 0, NB, ITEMS, true>(regs, g, off, 0, lane);
    else
      rows_fetch<Op, 0, NB, ITEMS, false>(regs, g, off, 0, lane);
    Prefix<State> carry{Op::identity(), false};
    for (i64 base = 0; base < g.len; base += CHUNK) {
      const bool full = !QUICK_BUILD && base + CHUNK <= g.len;
      __syncwarp(); // the previous chunk's staging has been read
      if (full)
        rows_put<Op, 0, ITEMS, true>(regs, stage, base, g.len, lane);
      else
        rows_put<Op, 0, ITEMS, false>(regs, stage, base, g.len, lane);
      if (!QUICK_BUILD && base + 2 * CHUNK <= g.len)
        rows_fetch<Op, 0, NB, ITEMS, true>(regs, g, off, base + CHUNK, lane);
      else if (base + CHUNK < g.len)
        rows_fetch<Op, 0, NB, ITEMS, false>(regs, g, off, base + CHUNK, lane);
      __syncwarp();
      const State total = full ? rows_chunk<Op, NB, ITEMS, true>(g, off, stage, base, lane, carry)
                               : rows_chunk<Op, NB, ITEMS, false>(g, off, stage, base, lane, carry);
      carry = extend<Op>(carry, total);
    }
  } else {
    // One tile of WARPS chunks of one row; tiles joined by the grouped look-back. A row that
    // one tile holds (the host's one-tile rows) is the whole of block blockIdx.x: no ticket, no
    // predecessor, no scratch.
    __shared__ i64 s_ticket;
    __shared__ State s_agg[WARPS];
    __shared__ Prefix<State> s_prefix[WARPS];
    const bool alone = g.len <= (i64)WARPS * CHUNK;
    if (threadIdx.x == 0)
      s_ticket = alone ? (i64)blockIdx.x : take_ticket(scratch);
    __syncthreads();
    i64 off[Op::NTENS];
    const i64 tile = s_ticket / g.chains, row = s_ticket % g.chains;
    const i64 base = (tile * WARPS + warp) * CHUNK;
    const bool full = !QUICK_BUILD && base + CHUNK <= g.len;
    chain_offsets<NB>(g, row, off);
    if constexpr (ASYNC) {
      if (rows_prefetches<Op>() && !alone &&
          g.len * g.chains * (i64)sizeof(tensor_t<Op, 0>) >= PREFETCH_MIN_BYTES)
        rows_prefetch_ticket<Op, NB, WARPS * CHUNK, WARPS * 32>(g, s_ticket + PREFETCH_TICKETS);
      if (full)
        rows_stage_async<Op, ITEMS, true>(g, off, stage, base, lane);
      else
        rows_stage_async<Op, ITEMS, false>(g, off, stage, base, lane);
    } else if (full) {
      rows_fetch<Op, 0, NB, ITEMS, true>(regs, g, off, base, lane);
      rows_put<Op, 0, ITEMS, true>(regs, stage, base, g.len, lane);
    } else {
      rows_fetch<Op, 0, NB, ITEMS, false>(regs, g, off, base, lane);
      rows_put<Op, 0, ITEMS, false>(regs, stage, base, g.len, lane);
    }
    __syncwarp();
    // A chunk that passes the end of its row lies in the row's last tile, whose aggregate and
    // prefixes nothing reads, and an in-range output reads no item past the end: the states
    // before it are of earlier items, and a neighbour past the end reads as the policy's default
    // (RowsFetch::get tests the axis before the staging). So its passes can run unrolled over
    // every item (past the end they scan whatever the staging holds), and only the loads and the
    // stores check the end. That pays for the backwards, whose items read several inputs:
    // bf16, 1 x (2^22 + 4998), the cumprod and logcumsumexp backwards 0.72-0.73 of the time,
    // f32 1 x (2^20 + 3) the cummax backward 0.73 (NVIDIA H200, results bit-identical). Quick
    // builds keep the checked, rolled passes (less code), and so do the forwards: cummax's
    // unrolled so ran bf16 2^27 1.07x slower, and the ops in place spilled (176 bytes in the bf16
    // cumsum's wide tile).
    constexpr bool SCAN_ALL = !QUICK_BUILD && Op::NIN > 1;
    const State agg = SCAN_ALL || full
                          ? rows_reduce<Op, NB, ITEMS, true, ASYNC>(g, off, stage, base, lane)
                          : rows_reduce<Op, NB, ITEMS, false, ASYNC>(g, off, stage, base, lane);
    const State incl = warp_inclusive<Op>(agg, lane);
    const State excl = shfl_up_state(incl, 1);
    if (lane == 31)
      s_agg[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      State all = s_agg[0];
#pragma unroll
      for (int w = 1; w < WARPS; ++w)
        all = Op::combine(all, s_agg[w]);
      Prefix<State> run = alone ? Prefix<State>{Op::identity(), false}
                                : grouped_tile_prefix<Op>(scratch, row, tile, all, lane);
      if (lane == 0) {
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
          s_prefix[w] = run;
          run = extend<Op>(run, s_agg[w]);
        }
      }
    }
    __syncthreads();
    const Prefix<State> wp = s_prefix[warp];
    const Prefix<State> p = lane > 0 ? extend<Op>(wp, excl) : wp;
    if (SCAN_ALL || full)
      rows_emit<Op, NB, ITEMS, true, SHARED, ASYNC>(g, off, stage, base, lane, p, full);
    else
      rows_emit<Op, NB, ITEMS, false, SHARED, ASYNC>(g, off, stage, base, lane, p);
  }
}

// ---- cols: any layout, lanes across chains ------------------------------------------------

constexpr int COLS_BX = JITOPS__SCAN_COLS_BX, COLS_BY = JITOPS__SCAN_COLS_BY;

// Input K of a cols tile: SPAN positions × 32 chains, position-major.
template <class Op, int K, int R>
__device__ __forceinline__ tensor_t<Op, K> *cols_buffer(char *tile) {
  return (tensor_t<Op, K> *)(tile + COLS_BY * R * COLS_BX * bytes_of<Op, 0, K>());
}

// The element of tensor K at kernel position q of this thread's chain, and the step (in
// elements) from one kernel position to the next.
template <class Op, int K>
__device__ __forceinline__ tensor_t<Op, K> *cols_ptr(const Geom &g, const i64 (&off)[Op::NTENS],
                                                     i64 q) {
  return (tensor_t<Op, K> *)g.ptr[K] + off[K] + memory_pos(g, q) * g.astride[K];
}
template <class Op, int K> __device__ __forceinline__ i64 cols_step(const Geom &g) {
  return g.reverse ? -g.astride[K] : g.astride[K];
}

// How far cols_stage's cp.async loop unrolls: by 4 for a one-input op, whose loop is the
// kernel's largest after the passes (it halved the cumsum kernel's compile, at equal speed);
// fully for the backwards, whose several inputs' loops ran 4% slower rolled.
template <class Op> constexpr int COLS_STAGE_UNROLL = Op::NIN == 1 ? 4 : 16;

// Loads the tile starting at q0 into shared memory; warp ty takes positions ty, ty + 8, ...
// FULL tiles lie wholly inside the axis and skip the range checks.
template <class Op, int K, int NB, int R, bool FULL>
__device__ __forceinline__ void cols_stage(const Geom &g, const i64 (&off)[Op::NTENS], char *tile,
                                           i64 q0, int tx, int ty) {
  if constexpr (K < Op::NIN) {
    typedef tensor_t<Op, K> U;
    U *buf = cols_buffer<Op, K, R>(tile) + ty * COLS_BX + tx;
    const U *src = cols_ptr<Op, K>(g, off, q0 + ty);
    const i64 step = COLS_BY * cols_step<Op, K>(g);
    if constexpr (sizeof(U) >= 4) {
      constexpr int UNROLL = COLS_STAGE_UNROLL<Op>;
#pragma unroll(UNROLL)
      for (int j = 0; j < R; ++j)
        if (FULL || q0 + ty + COLS_BY * j < g.len)
          stage_element(buf + COLS_BY * COLS_BX * j, src + j * step);
    } else {
      // 2-byte elements go through registers, eight loads in flight at a time.
      for (int j0 = 0; j0 < R; j0 += 8) {
        U v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j)
          if (FULL || q0 + ty + COLS_BY * (j0 + j) < g.len)
            v[j] = src[(j0 + j) * step];
#pragma unroll
        for (int j = 0; j < 8; ++j)
          if (FULL || q0 + ty + COLS_BY * (j0 + j) < g.len)
            buf[COLS_BY * COLS_BX * (j0 + j)] = v[j];
      }
    }
    cols_stage<Op, K + 1, NB, R, FULL>(g, off, tile, q0, tx, ty);
  }
}

template <class Op, int NB, int R> struct ColsFetch {
  const Geom &g;
  const i64 (&off)[Op::NTENS];
  char *tile;
  i64 q0; // the tile's first position
  i64 q;  // this position
  int tx;
  int row;    // q - q0
  int rr;     // q - q1: the position among the thread's own R
  int window; // the thread's own positions that lie inside the axis (R in a whole tile)
  template <int K>
  __device__ __forceinline__ acc_t<tensor_t<Op, K>> get(int shift,
                                                        acc_t<tensor_t<Op, K>> dflt) const {
    if (shift == 0) // the position itself: staged, in range (folded at compile time)
      return load(cols_buffer<Op, K, R>(tile) + row * COLS_BX + tx);
    // A neighbour among the thread's own positions inside the axis is staged too. In the
    // unrolled whole-tile passes rr and window are constants, so this folds and only a part's
    // first or last position keeps the general path below (cold, on two cores: the cumprod
    // backward's kernel 0.39 -> 0.36 s, cummax's 0.33 -> 0.30 s).
    if ((unsigned)(rr + shift) < (unsigned)window)
      return load(cols_buffer<Op, K, R>(tile) + (row + shift) * COLS_BX + tx);
    const i64 qs = q + shift;
    if (qs < 0 || qs >= g.len)
      return dflt;
    const i64 rs = qs - q0;
    if (rs >= 0 && rs < (i64)COLS_BY * R)
      return load(cols_buffer<Op, K, R>(tile) + rs * COLS_BX + tx);
    return load(global_at<Op, K>(g, off, memory_pos(g, qs)));
  }
};

// Output J at a cursor: the pointers advance by one step per position instead of being
// recomputed from the position (a 64-bit multiply) for every store.
template <class Op> struct ColsCursor {
  static constexpr int NOUT = Op::NTENS - Op::NIN;
  char *(&at)[NOUT];
  template <int J> __device__ __forceinline__ void put(acc_t<tensor_t<Op, Op::NIN + J>> v) {
    store((tensor_t<Op, Op::NIN + J> *)at[J], v);
  }
};

// One thread's view of a staged tile: its R consecutive positions from q1 (row1 in the tile).
template <class Op, int NB, int R> struct ColsThread {
  typedef typename Op::State State;
  const Geom &g;
  const i64 (&off)[Op::NTENS];
  char *tile;
  i64 q0, q1;
  int row1, tx;
  // The state of the thread's position rr, of its first `window` positions inside the axis.
  __device__ __forceinline__ State make(int rr, int window, typename Op::Keep &keep) const {
    const i64 q = q1 + rr;
    return Op::make(ColsFetch<Op, NB, R>{g, off, tile, q0, q, tx, row1 + rr, rr, window}, q,
                    memory_pos(g, q), keep);
  }
  __device__ __forceinline__ void emit_at(int rr, const State &s, const typename Op::Keep &keep,
                                          char *(&at)[ColsCursor<Op>::NOUT]) const {
    const i64 q = q1 + rr;
    ColsCursor<Op> o{at};
    Op::emit(o, s, keep, q, memory_pos(g, q));
  }
  // Bytes from one position of output j to the next in kernel order.
  __device__ __forceinline__ i64 step_bytes(int j) const {
    const int k = Op::NIN + j;
    return (g.reverse ? -g.astride[k] : g.astride[k]) * (i64)elem_size<Op>(k);
  }
  // The output cursors of position rr.
  __device__ __forceinline__ void cursors(int rr, char *(&at)[ColsCursor<Op>::NOUT]) const {
#pragma unroll
    for (int j = 0; j < ColsCursor<Op>::NOUT; ++j) {
      const int k = Op::NIN + j;
      at[j] = g.ptr[k] + (off[k] + memory_pos(g, q1) * g.astride[k]) * (i64)elem_size<Op>(k) +
              rr * step_bytes(j);
    }
  }
  __device__ __forceinline__ void advance(char *(&at)[ColsCursor<Op>::NOUT],
                                          const i64 (&step_bytes)[ColsCursor<Op>::NOUT]) const {
#pragma unroll
    for (int j = 0; j < ColsCursor<Op>::NOUT; ++j)
      at[j] += step_bytes[j];
  }
};

// The fold of a thread's R positions runs as Q independent folds of R/Q consecutive positions,
// interleaved: Q dependency chains instead of one, so that a combine's latency (an exp in a
// log-sum-exp) overlaps the others'. The parts are then folded in order, so the result is
// still a fixed left-to-right association.
constexpr int COLS_Q = 4;

// How far the whole-tile passes unroll over a part's positions: fully, but by 2 for 16-byte
// states (cummax/cummin's value-index pairs, and in f64 logcumsumexp and the backwards, whose
// two-position parts unroll fully either way), whose fully unrolled passes made cummax's first
// compile 0.40 s on two cores (0.28 s by 2) for about 2% of its speed.
template <class Op, int RQ>
constexpr int COLS_FULL_UNROLL = sizeof(typename Op::State) >= 16 ? 2 : RQ;

// Either pass over a tile that is whole and whose chain exists: the fold (EMIT false: `run`
// starts absent) or the scan from the prefixes in `run`, storing at cursors. Every position
// is valid and only the first step of a part may meet an absent prefix, so that step is
// peeled and the rest are unconditional: the compiler can interleave the Q chains freely.
template <class Op, int NB, int R, bool EMIT>
__device__ __forceinline__ void cols_pass_full(const ColsThread<Op, NB, R> &t,
                                               Prefix<typename Op::State> (&run)[COLS_Q]) {
  constexpr int RQ = R / COLS_Q, NOUT = ColsCursor<Op>::NOUT;
  char *at[COLS_Q][NOUT];
  i64 step_bytes[NOUT];
#pragma unroll
  for (int j = 0; j < NOUT; ++j)
    step_bytes[j] = t.step_bytes(j);
  typename Op::State s[COLS_Q];
#pragma unroll
  for (int k = 0; k < COLS_Q; ++k) {
    typename Op::Keep keep;
    s[k] = apply<Op>(run[k], t.make(k * RQ, R, keep));
    if constexpr (EMIT) {
      t.cursors(k * RQ, at[k]);
      t.emit_at(k * RQ, s[k], keep, at[k]);
    }
  }
  constexpr int UNROLL = COLS_FULL_UNROLL<Op, RQ>;
#pragma unroll(UNROLL)
  for (int r = 1; r < RQ; ++r) {
#pragma unroll
    for (int k = 0; k < COLS_Q; ++k) {
      typename Op::Keep keep;
      s[k] = Op::combine(s[k], t.make(k * RQ + r, R, keep));
      if constexpr (EMIT) {
        t.advance(at[k], step_bytes);
        t.emit_at(k * RQ + r, s[k], keep, at[k]);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < COLS_Q; ++k)
    run[k] = Prefix<typename Op::State>{s[k], true};
}

// Either pass over the first `valid` positions (a tile's end, or no chain at all): the fold
// (EMIT false: `run` starts absent) or the scan from the prefixes in `run`, with its stores.
// Rolled over r (the Q chains still interleave): it runs for a chain's last tile only, and
// unrolled it was as large as the whole-tile passes, which is compile time on a first call.
template <class Op, int NB, int R, bool EMIT>
__device__ __forceinline__ void cols_pass_partial(const ColsThread<Op, NB, R> &t, int valid,
                                                  Prefix<typename Op::State> (&run)[COLS_Q]) {
  constexpr int RQ = R / COLS_Q, NOUT = ColsCursor<Op>::NOUT;
#pragma unroll 1
  for (int r = 0; r < RQ; ++r) {
#pragma unroll
    for (int k = 0; k < COLS_Q; ++k) {
      const int rr = k * RQ + r;
      if (rr < valid) {
        typename Op::Keep keep;
        run[k] = extend<Op>(run[k], t.make(rr, valid, keep));
        if constexpr (EMIT) {
          char *at[NOUT];
          t.cursors(rr, at);
          t.emit_at(rr, run[k].s, keep, at);
        }
      }
    }
  }
}

// The fold, look-back (or carry) and second pass of one staged tile: tile `tile_index` of the
// strip whose chain this thread runs (chain c, offsets `off`).
template <class Op, int NB, int R, bool LOOKBACK>
__device__ __forceinline__ void
cols_scan_tile(const Geom &g, const Scratch &scratch, const i64 (&off)[Op::NTENS], char *tile,
               i64 tile_index, i64 c, bool active, int tx, int ty,
               Prefix<typename Op::State> &carry, typename Op::State (&s_agg)[COLS_BY][COLS_BX],
               Prefix<typename Op::State> (&s_tile)[COLS_BX]) {
  typedef typename Op::State State;
  static_assert(R % COLS_Q == 0, "R is a multiple of the fold's parts");
  constexpr i64 SPAN = (i64)COLS_BY * R;
  const i64 q0 = tile_index * SPAN;
  const bool full = q0 + SPAN <= g.len;
  const int row1 = ty * R;
  const i64 q1 = q0 + row1;
  const int valid = !active ? 0
                    : full  ? R
                            : (int)(g.len - q1 < 0   ? 0
                                    : g.len - q1 < R ? g.len - q1
                                                     : R);
  const ColsThread<Op, NB, R> t{g, off, tile, q0, q1, row1, tx};
  Prefix<State> part[COLS_Q];
#pragma unroll
  for (int k = 0; k < COLS_Q; ++k)
    part[k] = Prefix<State>{Op::identity(), false};
  if (!QUICK_BUILD && valid == R)
    cols_pass_full<Op, NB, R, false>(t, part);
  else
    cols_pass_partial<Op, NB, R, false>(t, valid, part);
  Prefix<State> all_parts = part[0];
#pragma unroll
  for (int k = 1; k < COLS_Q; ++k)
    if (part[k].ok)
      all_parts = extend<Op>(all_parts, part[k].s);
  const State agg = all_parts.ok ? all_parts.s : Op::identity();
  s_agg[ty][tx] = agg;
  __syncthreads();
  Prefix<State> p;
  if constexpr (LOOKBACK) {
    if (ty == 0 && active) {
      State all = s_agg[0][tx];
#pragma unroll
      for (int y = 1; y < COLS_BY; ++y)
        all = Op::combine(all, s_agg[y][tx]);
      s_tile[tx] = tile_prefix<Op>(scratch, c, tile_index, all);
    }
    __syncthreads();
    p = s_tile[tx];
  } else {
    p = carry;
    State all = s_agg[0][tx];
#pragma unroll
    for (int y = 1; y < COLS_BY; ++y)
      all = Op::combine(all, s_agg[y][tx]);
    carry = extend<Op>(carry, all);
  }
  for (int y = 0; y < ty; ++y)
    p = extend<Op>(p, s_agg[y][tx]);
  if (valid == 0)
    return;
  Prefix<State> run[COLS_Q];
  run[0] = p;
#pragma unroll
  for (int k = 1; k < COLS_Q; ++k)
    run[k] = part[k - 1].ok ? extend<Op>(run[k - 1], part[k - 1].s) : run[k - 1];
  if (!QUICK_BUILD && valid == R)
    cols_pass_full<Op, NB, R, true>(t, run);
  else
    cols_pass_partial<Op, NB, R, true>(t, valid, run);
}

// A cols work item: tile `tile` of the strip of chains [strip·32, strip·32 + 32).
struct ColsItem {
  i64 strip, tile;
};

// Starts the cp.async loads of one work item's tile into `buf` as one commit group (an empty
// group when there is nothing to load, so that waiting for "all but the newest group" always
// means the current tile).
template <class Op, int NB, int R>
__device__ __forceinline__ void cols_prefetch(const Geom &g, const ColsItem &w, bool valid,
                                              char *buf, int tx, int ty) {
  constexpr i64 SPAN = (i64)COLS_BY * R;
  const i64 c = w.strip * COLS_BX + tx;
  if (valid && c < g.chains) {
    i64 off[Op::NTENS];
    chain_offsets<NB>(g, c, off);
    const i64 q0 = w.tile * SPAN;
    if (!QUICK_BUILD && q0 + SPAN <= g.len)
      cols_stage<Op, 0, NB, R, true>(g, off, buf, q0, tx, ty);
    else
      cols_stage<Op, 0, NB, R, false>(g, off, buf, q0, tx, ty);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// The cols blocks that shared memory admits on an SM (228 KiB on sm_90, less 1 KiB the driver
// keeps per block), at most 3. The kernel asks the compiler for registers that admit as many:
// the unrolled whole-tile passes would otherwise take up to 164 registers and let registers,
// not shared memory, bound the blocks. (ops/scan/plan.c sizes persistent grids by its own
// count from the same figures of jitops/scan_abi.h.)
template <class Op, int R, int STAGES> __host__ __device__ constexpr int cols_blocks_per_sm() {
  typedef typename Op::State State;
  constexpr int tile = COLS_BY * R * COLS_BX * bytes_of<Op, 0, Op::NIN>();
  constexpr int fixed = (int)(sizeof(State) * COLS_BY * COLS_BX + sizeof(Prefix<State>) * COLS_BX +
                              sizeof(i64) * STAGES) +
                        JITOPS__SCAN_BLOCK_RESERVED_SHARED;
  constexpr int n = JITOPS__SCAN_SM_SHARED / (STAGES * tile + fixed);
  return n < 1 ? 1 : n > 3 ? 3 : n;
}

// Dynamic shared memory: STAGES buffers of COLS_BY · R · COLS_BX positions of every input
// (the host sizes them). A block has the loads of its next STAGES - 1 tiles in flight (cp.async)
// while it scans the current one, so a tile's load latency hides behind the scans, look-backs
// and stores before it. Without LOOKBACK block b walks strip b tile by tile with a carry; with
// LOOKBACK the blocks are persistent and take tickets (tile-major: ticket = tile · strips +
// strip) until the work runs out, and tiles are joined by look-back. A block scans its tickets
// in the order it took them, so the smallest unfinished ticket always belongs to a block that
// is scanning it: the look-back cannot deadlock, whether or not every block is resident.
template <class Op, int NB, int R, int STAGES, bool LOOKBACK, int SBYTES>
__global__ void __launch_bounds__(COLS_BX *COLS_BY, cols_blocks_per_sm<Op, R, STAGES>())
    cols(const jitops__scan_args args) {
  typedef typename Op::State State;
  static_assert(sizeof(State) == SBYTES, "the host's state size disagrees with the template");
  static_assert(STAGES == 2 || STAGES == 3, "two or three tile buffers");
  static_assert(fits_args<Op, NB>(), "more tensors or batch dimensions than the arguments hold");
  const Geom g = args.geom; // see fits_args
  const Scratch scratch = args.scratch;
  constexpr i64 SPAN = (i64)COLS_BY * R; // positions per tile
  constexpr int TILE_BYTES = (int)SPAN * COLS_BX * bytes_of<Op, 0, Op::NIN>();
  extern __shared__ __align__(16) char tiles[];
  __shared__ State s_agg[COLS_BY][COLS_BX];
  __shared__ Prefix<State> s_tile[COLS_BX];
  __shared__ i64 s_ticket[STAGES]; // the work item of each buffer (LOOKBACK)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const i64 strips = (g.chains + COLS_BX - 1) / COLS_BX;
  const i64 ntiles = (g.len + SPAN - 1) / SPAN;
  const i64 items = LOOKBACK ? strips * ntiles : ntiles;
  // Work item n: a ticket with LOOKBACK, else the n-th tile of strip blockIdx.x.
  auto item = [&](i64 n) {
    return LOOKBACK ? ColsItem{n % strips, n / strips} : ColsItem{(i64)blockIdx.x, n};
  };
  if constexpr (LOOKBACK) {
    if (tx == 0 && ty == 0)
      for (int j = 0; j < STAGES - 1; ++j)
        s_ticket[j] = take_ticket(scratch);
    __syncthreads();
  }
  // Rolled: this runs once a block, and each unrolled copy of cols_prefetch is every input's
  // staging loops twice over (whole and partial tiles): 20-60 ms of a backward's first compile.
#pragma unroll 1
  for (int j = 0; j < STAGES - 1; ++j) {
    const i64 n = LOOKBACK ? s_ticket[j] : j;
    cols_prefetch<Op, NB, R>(g, item(n), n < items, tiles + j * TILE_BYTES, tx, ty);
  }
  Prefix<State> carry{Op::identity(), false};
  // Buffer b holds work item k; buffer nb receives item k + STAGES - 1.
  for (i64 k = 0, b = 0, nb = STAGES - 1;; ++k) {
    const i64 cur = LOOKBACK ? s_ticket[b] : k;
    if (cur >= items) // a block's items only grow
      break;
    if constexpr (LOOKBACK) {
      if (tx == 0 && ty == 0)
        s_ticket[nb] = take_ticket(scratch);
    }
    __syncthreads(); // the ticket is visible, and buffer nb's last tile has been read
    const i64 next = LOOKBACK ? s_ticket[nb] : k + STAGES - 1;
    cols_prefetch<Op, NB, R>(g, item(next), next < items, tiles + nb * TILE_BYTES, tx, ty);
    if constexpr (STAGES == 2)
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    else
      asm volatile("cp.async.wait_group 2;" ::: "memory");
    __syncthreads(); // every thread's part of the current tile has landed
    const ColsItem w = item(cur);
    const i64 c = w.strip * COLS_BX + tx;
    const bool active = c < g.chains;
    i64 off[Op::NTENS];
    chain_offsets<NB>(g, active ? c : 0, off);
    cols_scan_tile<Op, NB, R, LOOKBACK>(g, scratch, off, tiles + b * TILE_BYTES, w.tile, c, active,
                                        tx, ty, carry, s_agg, s_tile);
    b = b + 1 == STAGES ? 0 : b + 1;
    nb = nb + 1 == STAGES ? 0 : nb + 1;
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
}

} // namespace scan
} // namespace jitops
