#include "ops/scan/plan.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Rows are scanned by the rows kernel from this length up; shorter ones (and every other
 * layout) go to the cols kernel, whose lanes run across chains, unless they are short rows in
 * bulk (below). */
enum { ROWS_MIN_LEN = 128 };
/* Short rows in bulk: many rows of at most ~1000 positions, scanned forward. One warp walks
 * each row in chunks of 32 x items positions, and a chunk that the row ends inside is slow: its
 * passes visit every lane's items, each with a range check (bench/NOTES-scan.md, "A row's
 * partial last chunk"), and the cols kernel that took rows under 128 positions touches 32
 * rows' sectors with every load and store. So such rows are walked in chunks of 4 positions a
 * lane up to 768 positions, of 8 up to 1024, from 32 positions up. NVIDIA H200, 2^24 elements
 * in rows of 32 to 1000, queued, time over the layout before: at 32-128 positions 0.18-0.48
 * (cumsum, bf16 cumsum, f64 cumsum, cummax; 128 positions of f32 0.141 -> 0.036 ms, a copy's
 * time), logcumsumexp 0.26-0.81; at 200-768 0.48-0.94; at 1000 (8 a lane) 0.89-0.97; rows of
 * 1100 unchanged. Measured with many rows only (16384 and more): fewer rows keep the usual
 * chunks, which the one-tile rows' and look-back rules were measured with.
 *
 * The backwards with kernels of their own (cumprod's, cummax's and cummin's, logcumsumexp's;
 * a cumsum backward is a cumsum) walk rows of 64 to 600 positions in chunks of 4 a lane (their
 * usual 8 elsewhere). Same GPU and sizes, forward + backward against the layouts before: at
 * 64-128 positions 0.39-0.67 (f32 and bf16 cumprod and cummax, f32 logcumsumexp), at 300-600
 * 0.81-0.95; at 32 positions 0.89-1.04 and at 768 0.97-1.09, so those keep their layouts. */
enum {
  SHORT_ROWS_MIN_CHAINS = 4096,
  SHORT_ROWS_MIN_LEN = 32,
  SHORT_ROWS_ITEMS4_MAX_LEN = 768,
  SHORT_ROWS_ITEMS8_MAX_LEN = 1024,
  SHORT_ROWS_BACKWARD_MIN_LEN = 64,
  SHORT_ROWS_BACKWARD_MAX_LEN = 600
};
/* Fewer independent scans than this many per SM leave the GPU idle, so a long axis is then
 * split into tiles joined by look-back (cols: unless the strips fill one wave exactly, see
 * jitops__scan_plan_make). */
enum { CHAINS_PER_SM = 16, STRIPS_PER_SM = 16 };
/* ... provided the axis is long enough to be worth the scratch and its zeroing. */
enum { COLS_MIN_TILES = 4 };
/* The dynamic shared memory of one of a cols block's tile buffers. */
enum { COLS_TILE_BUDGET = 32768 };
/* Tile buffers of a cols block: the loads of stages - 1 tiles fly while one is scanned. A block
 * that walks a strip's whole axis keeps two tiles in flight (three buffers, measured best); the
 * persistent look-back blocks do better with two buffers and more blocks per SM. */
enum { COLS_STAGES_WALK = 3, COLS_STAGES_LOOKBACK = 2 };
/* The persistent cols grid is sized by the shared memory per SM (JITOPS__SCAN_SM_SHARED): a
 * smaller GPU just runs fewer of those blocks at once. */
enum { COLS_MAX_BLOCKS_PER_SM = 8 };
enum { COLS_BX = JITOPS__SCAN_COLS_BX, COLS_BY = JITOPS__SCAN_COLS_BY };
enum { ROWS_WARPS = 4, ROWS_LOOKBACK_WARPS = 8 };
/* Bytes of input 0 a lane of a wide tile stages by cp.async (scan.cuh, rows_stages_async): an op
 * in place takes 128, the others (several inputs or outputs, their staging beside) 64. */
enum { ROWS_ASYNC_LANE_BYTES = 128, ROWS_ASYNC_LANE_BYTES_BESIDE = 64 };
/* Wide look-back tiles when there are at least this many per SM. */
enum { WIDE_TILES_PER_SM = 2 };
/* The wide tiles of word pairs beside (2-byte ops not in place: 8192 positions a tile) whose
 * rows end inside a tile: their tiles must be at least 85% full (the positions over the tiles'),
 * or at least 5 for every 2 SMs and 4 a row, else narrow tiles (which waste less of a row's last
 * one). NVIDIA H200, bf16, GPU time, wide over narrow (cummax, the backwards of cummax, cumprod
 * and logcumsumexp): 85-100% full 0.66-0.95 (1 x 2170000, 1 x 2500000, 2 x 1100000, 4 x 540000,
 * 8 x 300000, 16 x 140000, 32 x 70000, 40 x 62000, 132 x 21000 to 23000, 264 x 14000 to 16000);
 * 81% 1.05-1.09 (200 x 20000), 61% 1.21-1.45 (200 x 10000). The second clause is the rule measured
 * for the earlier tiles of 4 warps of 2048 positions (200 x 10000 1.59-1.79 on them); the cells
 * that only it makes wide (76-83% full, 4-5 a row: 100 x 26000, 150 x 25000, 90 x 34000, 120 x
 * 33000, 84 x 27000) ran 0.89-1.11 of their time on narrow tiles, no side ahead: kept. */
enum {
  WIDE_PAIRS_MIN_FILL_PERCENT = 85,
  WIDE_PAIRS_TILES_PER_2_SMS = 5,
  WIDE_PAIRS_MIN_PARTIAL_ROW_TILES = 4
};
/* One-tile rows: a row that one narrow look-back tile holds, with at most one row an SM, is one
 * block of 8 warps (no look-back, no scratch, no memset) when one warp would walk it in more than
 * a few chunks, each waiting for the one before: more than four for cumsum and cumprod, whose
 * chunks are short, more than one for the others. NVIDIA H200, CUDA graph replay, 1 to 132 rows,
 * one tile over the path before (the walk, or 4-warp look-back tiles of 8 positions for rows of
 * 2049 to 4096): cumsum and cumprod f32/bf16 at 2560 to 4096 0.50-0.76 (1 x 4096 cumsum 4.73 ->
 * 2.39 us), but 1.15-1.57 at 1024-1536 (2-3 chunks: walked); logcumsumexp 0.60-0.75 from 1536,
 * 0.96-1.02 at 1024; cummax 0.36-0.64 at 600 to 2048. */
enum { ONE_TILE_MIN_CHUNKS_CHEAP = 4, ONE_TILE_MIN_CHUNKS = 1 };
/* The look-back scratch starts with a 16-byte slot for the ticket, then the flags. */
enum { TICKET_BYTES = 16 };
#define GRID_MAX 2147483647ll

static const char *const kop_templates[JITOPS__SCAN_K_COUNT] = {
    "Cumsum", "Cumprod",         "Extremum",         "Extremum",
    "Lcse",   "CumprodBackward", "ExtremumBackward", "LcseBackward"};

int jitops__scan_kop_tensors(jitops__scan_kop kop) {
  switch (kop) {
  case JITOPS__SCAN_K_CUMMAX:
  case JITOPS__SCAN_K_CUMMIN:
  case JITOPS__SCAN_K_EXTREMUM_BWD:
    return 3;
  case JITOPS__SCAN_K_CUMPROD_BWD:
  case JITOPS__SCAN_K_LCSE_BWD:
    return 4;
  default:
    return 2;
  }
}

int jitops__scan_kop_quick(jitops__scan_kop kop, jitops__dtype dtype) {
  const int log_domain = kop == JITOPS__SCAN_K_LCSE || kop == JITOPS__SCAN_K_LCSE_BWD;
  return !log_domain || jitops__dtype_accumulator(dtype) != JITOPS__DTYPE_F64;
}

int jitops__scan_kop_takes(jitops__scan_kop kop, jitops__dtype dtype) {
  if (kop == JITOPS__SCAN_K_CUMSUM || kop == JITOPS__SCAN_K_CUMPROD)
    return jitops__dtype_is_float(dtype) || jitops__dtype_is_int(dtype);
  return jitops__dtype_is_float(dtype);
}

/* sizeof(Op::State) in scan_ops.cuh; it travels in the name expression (SBYTES), and the
 * kernels static_assert that it agrees. */
static size_t state_bytes(jitops__scan_kop kop, jitops__dtype dtype) {
  const size_t a = jitops__dtype_size(jitops__dtype_accumulator(dtype));
  switch (kop) {
  case JITOPS__SCAN_K_CUMMAX:
  case JITOPS__SCAN_K_CUMMIN:
    return 16; /* value, padding, int64 index */
  case JITOPS__SCAN_K_LCSE:
  case JITOPS__SCAN_K_CUMPROD_BWD:
  case JITOPS__SCAN_K_LCSE_BWD:
    return 2 * a;
  case JITOPS__SCAN_K_EXTREMUM_BWD:
    return a == 4 ? 8 : 16; /* int flag, value */
  default:
    return a;
  }
}

/* Bytes per position of the staged inputs and of the outputs. */
static void io_bytes(jitops__scan_kop kop, jitops__dtype dtype, size_t *in, size_t *out) {
  const size_t e = jitops__dtype_size(dtype);
  switch (kop) {
  case JITOPS__SCAN_K_CUMMAX:
  case JITOPS__SCAN_K_CUMMIN:
    *in = e;
    *out = e + 8;
    return;
  case JITOPS__SCAN_K_CUMPROD_BWD:
  case JITOPS__SCAN_K_LCSE_BWD:
    *in = 3 * e;
    *out = e;
    return;
  case JITOPS__SCAN_K_EXTREMUM_BWD:
    *in = e + 8;
    *out = e;
    return;
  default:
    *in = e;
    *out = e;
    return;
  }
}

/* 32-bit registers that one position of every input takes while it is prefetched. */
static int input_registers(jitops__scan_kop kop, jitops__dtype dtype) {
  const int e = jitops__dtype_size(dtype) > 4 ? 2 : 1;
  switch (kop) {
  case JITOPS__SCAN_K_CUMPROD_BWD:
  case JITOPS__SCAN_K_LCSE_BWD:
    return 3 * e;
  case JITOPS__SCAN_K_EXTREMUM_BWD:
    return e + 2;
  default:
    return e;
  }
}

/* One input and one output of its size (scan.cuh, in_place_op): cumsum, cumprod, logcumsumexp. */
static int in_place_op(jitops__scan_kop kop, jitops__dtype dtype) {
  size_t in, out;
  io_bytes(kop, dtype, &in, &out);
  return jitops__scan_kop_tensors(kop) == 2 && in == out;
}

/* Whether a narrow look-back tile of kop stages its outputs over its inputs (scan.cuh,
 * rows_shares_staging): in place, a 4-byte state. */
static int rows_stage_in_place(jitops__scan_kop kop, jitops__dtype dtype, int lookback) {
  return lookback && in_place_op(kop, dtype) && state_bytes(kop, dtype) == 4;
}

/* Rows: positions per lane and chunk for blocks of `warps`. The next chunk's inputs wait in
 * registers (at most 32 per lane) and each warp stages inputs and outputs (or, in place, the
 * inputs alone) in shared memory (40 KiB per block). */
static int rows_items(jitops__scan_kop kop, jitops__dtype dtype, int lookback, int warps) {
  size_t in, out;
  io_bytes(kop, dtype, &in, &out);
  const size_t staged = rows_stage_in_place(kop, dtype, lookback) ? in : in + out;
  const int regs = input_registers(kop, dtype);
  int items = 16;
  while (items > 4 && (regs * items > 32 || (size_t)33 * (size_t)items * staged * (size_t)warps >
                                                JITOPS__SCAN_ROWS_STAGE_BUDGET))
    items /= 2;
  return items;
}

int jitops__scan_rows_wide(jitops__scan_kop kop, jitops__dtype dtype) {
  /* The others stage by cp.async elements of 4 and 8 bytes, and 2-byte ones in words, with
   * int64 indices beside 2- and 4-byte data as 32 bits (lookback_width checks that the axis
   * allows it). */
  return !in_place_op(kop, dtype) || state_bytes(kop, dtype) <= 8;
}

/* Whether a wide tile of kop stages 2-byte elements of several tensors in words. */
static int wide_pairs_beside(jitops__scan_kop kop, jitops__dtype dtype) {
  return !in_place_op(kop, dtype) && jitops__dtype_size(dtype) == 2;
}

/* Positions a lane of a wide tile takes. */
static int wide_items(jitops__scan_kop kop, jitops__dtype dtype) {
  const int lane_bytes =
      in_place_op(kop, dtype) ? ROWS_ASYNC_LANE_BYTES : ROWS_ASYNC_LANE_BYTES_BESIDE;
  return lane_bytes / (int)jitops__dtype_size(dtype);
}

/* The int64 indices of cummax and cummin (an output) and of their backward (an input). */
static int has_indices(jitops__scan_kop kop) {
  return kop == JITOPS__SCAN_K_CUMMAX || kop == JITOPS__SCAN_K_CUMMIN ||
         kop == JITOPS__SCAN_K_EXTREMUM_BWD;
}

/* Whether a wide tile of kop stages int64 indices as their low 32 bits: beside 2- and 4-byte
 * data (scan.cuh, RowsStage::narrowed), which lookback_width allows only on axes whose
 * positions are below 2^31. */
static int indices_narrowed(jitops__scan_kop kop, jitops__dtype dtype) {
  return jitops__dtype_size(dtype) < 8 && has_indices(kop);
}

/* The dynamic shared memory of a rows kernel (scan.cuh, rows_dynamic_staging): the staging of
 * the wide tiles of an op not in place, output 0 over input 0 and the other outputs beside, in
 * slots of 33 positions per 32 (RowsStage), int64 indices beside 2- and 4-byte data as 32 bits;
 * 0 for every other rows kernel. */
static size_t rows_dynamic_staging(jitops__scan_kop kop, jitops__dtype dtype, int lookback,
                                   jitops__scan_width width, int warps, int items) {
  if (!lookback || width != JITOPS__SCAN_WIDE || in_place_op(kop, dtype) ||
      !jitops__scan_rows_wide(kop, dtype))
    return 0;
  size_t in, out;
  io_bytes(kop, dtype, &in, &out);
  const size_t e = jitops__dtype_size(dtype);
  const size_t narrowed = indices_narrowed(kop, dtype) ? 4 : 0;
  const size_t slots = (size_t)33 * (size_t)items;
  return (size_t)warps * slots * (in + out - e - narrowed);
}

/* Rows blocks: 4 warps walk a row each; a look-back tile is 8 warps of rows_items positions a
 * lane, or, wide, of 128 bytes a lane (32 KiB a tile) for an op that stages in place and of 64
 * bytes of input 0 a lane for the others (4096 positions of f32, every input beside; 8192 of f16
 * and bf16, staged as words), on an axis long enough to keep every SM busy with them. A look-back
 * tile waits for its predecessors' prefix about one L2 round trip after its own loads land, with
 * nothing of its own in flight: the larger the tile, the less of its time that wait takes, and the
 * more tiles an SM holds, the more bytes stay in flight meanwhile. A wide tile is staged by
 * cp.async (no registers hold the loads, so shared memory alone bounds its blocks: six of 33 KiB an
 * SM in place, four of 50 KiB (six of 33 KiB: f32 and f64 cummax, cummin and its backward) for the
 * others, against four blocks of 16 warps of 16 positions through registers). On a short axis the
 * fewer, larger tiles leave SMs idle instead. */
static void rows_shape(jitops__scan_kop kop, jitops__dtype dtype, int lookback,
                       jitops__scan_width width, int *warps, int *items) {
  const int wide = lookback && width == JITOPS__SCAN_WIDE && jitops__scan_rows_wide(kop, dtype);
  *warps = lookback ? ROWS_LOOKBACK_WARPS : ROWS_WARPS;
  *items = wide ? wide_items(kop, dtype) : rows_items(kop, dtype, lookback, *warps);
}

static int backward_kop(jitops__scan_kop kop) {
  return kop == JITOPS__SCAN_K_CUMPROD_BWD || kop == JITOPS__SCAN_K_EXTREMUM_BWD ||
         kop == JITOPS__SCAN_K_LCSE_BWD;
}

/* Whether the problem is short rows in bulk (SHORT_ROWS_*). */
static int short_rows(jitops__scan_kop kop, const jitops__scan_geom *g) {
  if (g->chains < SHORT_ROWS_MIN_CHAINS)
    return 0;
  if (backward_kop(kop))
    return g->len >= SHORT_ROWS_BACKWARD_MIN_LEN && g->len <= SHORT_ROWS_BACKWARD_MAX_LEN;
  return g->len >= SHORT_ROWS_MIN_LEN && g->len <= SHORT_ROWS_ITEMS8_MAX_LEN;
}

/* The positions a lane of the walk takes: the op's `usual`, fewer for short rows in bulk. */
static int walk_items(jitops__scan_kop kop, const jitops__scan_geom *g, int usual) {
  if (!short_rows(kop, g))
    return usual;
  const int want = backward_kop(kop) || g->len <= SHORT_ROWS_ITEMS4_MAX_LEN ? 4 : 8;
  return want < usual ? want : usual;
}

/* Cols: positions per thread and tile. A tile of 8·R positions × 32 chains of every input
 * fills up to 32 KiB of shared memory, and a block holds two or three (the next ones load
 * while the current one is scanned). */
static int cols_items(jitops__scan_kop kop, jitops__dtype dtype) {
  size_t in, out;
  io_bytes(kop, dtype, &in, &out);
  int r = 64;
  while (r > 8 && (size_t)COLS_BY * (size_t)r * COLS_BX * in > COLS_TILE_BUDGET)
    r /= 2;
  return r;
}

/* The dynamic shared memory a cols launch asks for: its tile buffers. */
static size_t cols_shared_bytes(jitops__scan_kop kop, jitops__dtype dtype, int stages) {
  size_t in, out;
  io_bytes(kop, dtype, &in, &out);
  return (size_t)stages * (size_t)COLS_BY * (size_t)cols_items(kop, dtype) * COLS_BX * in;
}

/* Cols blocks one SM holds at once, bounded by shared memory: the tile buffers plus the
 * kernel's static arrays (8×32 aggregates, 32 prefixes, the tickets). */
static int64_t cols_blocks_per_sm(jitops__scan_kop kop, jitops__dtype dtype, int stages) {
  const size_t sb = state_bytes(kop, dtype);
  const size_t stat = (size_t)COLS_BY * COLS_BX * sb + COLS_BX * (sb + 8) + 16;
  const size_t block =
      cols_shared_bytes(kop, dtype, stages) + stat + JITOPS__SCAN_BLOCK_RESERVED_SHARED;
  const int64_t n = (int64_t)(JITOPS__SCAN_SM_SHARED / block);
  return n < 1 ? 1 : n > COLS_MAX_BLOCKS_PER_SM ? COLS_MAX_BLOCKS_PER_SM : n;
}

static void op_expression(jitops__scan_kop kop, jitops__dtype dtype, char *buf, size_t size) {
  const char *t = jitops__dtype_cname(dtype);
  if (kop == JITOPS__SCAN_K_CUMMAX || kop == JITOPS__SCAN_K_CUMMIN)
    snprintf(buf, size, "jitops::scan::Extremum<%s, %s>", t,
             kop == JITOPS__SCAN_K_CUMMAX ? "true" : "false");
  else
    snprintf(buf, size, "jitops::scan::%s<%s>", kop_templates[kop], t);
}

void jitops__scan_kernel_name(jitops__scan_kop kop, jitops__dtype dtype, jitops__scan_kind kind,
                              int nb, int lookback, jitops__scan_width width, int items, char *buf,
                              size_t size) {
  char op[96];
  op_expression(kop, dtype, op, sizeof op);
  const size_t sb = state_bytes(kop, dtype);
  const char *lb = lookback ? "true" : "false";
  if (kind == JITOPS__SCAN_ROWS) {
    int warps, usual;
    rows_shape(kop, dtype, lookback, width, &warps, &usual);
    if (items <= 0)
      items = usual;
    const size_t dyn = rows_dynamic_staging(kop, dtype, lookback, width, warps, items);
    if (dyn > 0)
      snprintf(buf, size, "jitops::scan::rows<%s, %d, %d, %d, %s, %zu, %zu>", op, nb, warps, items,
               lb, sb, dyn);
    else
      snprintf(buf, size, "jitops::scan::rows<%s, %d, %d, %d, %s, %zu>", op, nb, warps, items, lb,
               sb);
  } else {
    snprintf(buf, size, "jitops::scan::cols<%s, %d, %d, %d, %s, %zu>", op, nb,
             cols_items(kop, dtype), lookback ? COLS_STAGES_LOOKBACK : COLS_STAGES_WALK, lb, sb);
  }
}

/* ---- collapsing ---------------------------------------------------------------------------- */

typedef struct batch_dim {
  int64_t size;
  int64_t stride[JITOPS__SCAN_MAX_TENSORS];
  uint64_t weight; /* Σ |stride| (each below 2^62, so the sum fits): the sort key */
} batch_dim;

void jitops__scan_geom_build(jitops__scan_geom *g, int ntens, const DLTensor *const *tensors,
                             int axis, int reverse) {
  memset(g, 0, sizeof *g);
  const int ndim = tensors[0]->ndim;
  int64_t strides[JITOPS__SCAN_MAX_TENSORS][8];
  g->ntens = ntens;
  g->reverse = reverse != 0;
  for (int k = 0; k < ntens; ++k) {
    g->ptr[k] = (char *)jitops__tensor_ptr(tensors[k]);
    jitops__tensor_strides(tensors[k], strides[k]);
    g->astride[k] = strides[k][axis];
  }
  g->len = tensors[0]->shape[axis];

  batch_dim dims[8];
  int n = 0;
  for (int d = 0; d < ndim; ++d) {
    if (d == axis || tensors[0]->shape[d] == 1)
      continue;
    dims[n].size = tensors[0]->shape[d];
    dims[n].weight = 0;
    for (int k = 0; k < ntens; ++k) {
      dims[n].stride[k] = strides[k][d];
      dims[n].weight += strides[k][d] < 0 ? 0 - (uint64_t)strides[k][d] : (uint64_t)strides[k][d];
    }
    ++n;
  }
  /* Chains are independent, so their order is free: put the smallest strides last (insertion
   * sort, stable), where the cols kernel's lanes run. */
  for (int i = 1; i < n; ++i) {
    batch_dim key = dims[i];
    int j = i - 1;
    while (j >= 0 && dims[j].weight < key.weight) {
      dims[j + 1] = dims[j];
      --j;
    }
    dims[j + 1] = key;
  }
  /* Merge a dimension into the previous one where every tensor steps over both evenly. */
  int m = 0;
  for (int i = 0; i < n; ++i) {
    if (m > 0) {
      batch_dim *prev = &dims[m - 1];
      int contiguous = 1;
      for (int k = 0; k < ntens; ++k)
        contiguous &= prev->stride[k] == dims[i].stride[k] * dims[i].size;
      if (contiguous) {
        prev->size *= dims[i].size;
        for (int k = 0; k < ntens; ++k)
          prev->stride[k] = dims[i].stride[k];
        continue;
      }
    }
    dims[m++] = dims[i];
  }
  g->nb = m;
  g->chains = 1;
  for (int i = 0; i < m; ++i) {
    g->bshape[i] = dims[i].size;
    g->chains *= dims[i].size;
    for (int k = 0; k < ntens; ++k)
      g->bstride[k][i] = dims[i].stride[k];
  }
  for (int i = m; i < JITOPS__SCAN_MAX_BATCH; ++i) /* unused: a dimension of one */
    g->bshape[i] = 1;
}

/* ---- strategy ------------------------------------------------------------------------------ */

static size_t align16(size_t n) {
  return (n + 15) & ~(size_t)15;
}

/* The look-back scratch (jitops/scan_abi.h): the ticket's slot, the flags (per tile, then per
 * group), then the state arrays. Rows: the words carry the states; only the groups'
 * aggregates stand beside them. Cols: per tile aggregates and inclusive states. */
static void plan_scratch(jitops__scan_plan *p, int64_t chains) {
  const size_t n = (size_t)p->tiles * (size_t)chains;
  const bool rows = p->kind == JITOPS__SCAN_ROWS;
  const size_t groups =
      rows ? (size_t)((p->tiles + JITOPS__SCAN_GROUP - 1) / JITOPS__SCAN_GROUP) : 0;
  const size_t ng = groups * (size_t)chains, sb = p->state_bytes;
  /* A rows word: 8 bytes for a 4-byte state, else an 8-byte half per 4 bytes of state. */
  const size_t flag_bytes = rows ? (sb == 4 ? 8 : 2 * sb) : 4;
  p->flags_offset = TICKET_BYTES;
  p->group_flags_offset = TICKET_BYTES + flag_bytes * n;
  p->zero_words = (TICKET_BYTES + flag_bytes * (n + ng)) / 4;
  const size_t states = align16(4 * p->zero_words);
  if (rows) {
    p->group_agg_offset = states;
    p->scratch_bytes = states + ng * sb;
  } else {
    p->agg_offset = states;
    p->inc_offset = states + align16(n * sb);
    p->scratch_bytes = p->inc_offset + n * sb;
  }
}

static int is_inner(const jitops__scan_geom *g) {
  if (g->len <= 1)
    return 0;
  for (int k = 0; k < g->ntens; ++k)
    if (g->astride[k] != 1)
      return 0;
  return 1;
}

/* Look-back tiles of `warps` warps of `items` positions a lane along an axis of `len`. */
static int64_t tiles_of(int64_t len, int warps, int items) {
  const int64_t span = (int64_t)warps * 32 * items;
  return (len + span - 1) / span;
}

/* Whether 2-byte elements can be staged in 32-bit words (scan.cuh, rows_stage_async): every
 * row of both tensors starts on a word, and a reverse scan's words, which run from the row's
 * end, line up with them (an even length). Else the axis takes narrow tiles. */
static int pairs_aligned(const jitops__scan_geom *g) {
  if (g->reverse && g->len % 2 != 0)
    return 0;
  for (int k = 0; k < g->ntens; ++k) {
    if ((uintptr_t)g->ptr[k] % 4 != 0)
      return 0;
    for (int d = 0; d < g->nb; ++d)
      if (g->bstride[k][d] % 2 != 0)
        return 0;
  }
  return 1;
}

/* Whether the rows are one-tile rows (ONE_TILE_MIN_CHUNKS): at most one an SM, each held by one
 * narrow look-back tile, and longer than the walk's chunks that the op's chunk cost allows. */
static int one_tile_rows(jitops__scan_kop kop, jitops__dtype dtype, const jitops__scan_geom *g,
                         int sm_count) {
  if (g->chains > sm_count)
    return 0;
  int warps, items;
  rows_shape(kop, dtype, 1, JITOPS__SCAN_NARROW, &warps, &items);
  if (tiles_of(g->len, warps, items) > 1)
    return 0;
  rows_shape(kop, dtype, 0, JITOPS__SCAN_NARROW, &warps, &items);
  const bool cheap = kop == JITOPS__SCAN_K_CUMSUM || kop == JITOPS__SCAN_K_CUMPROD;
  const int chunks = cheap ? ONE_TILE_MIN_CHUNKS_CHEAP : ONE_TILE_MIN_CHUNKS;
  return g->len > (int64_t)chunks * 32 * items;
}

/* The look-back tiles of this axis: wide where the op has them, each row gets at least two (one
 * tile would need no look-back: the walk or a one-tile row takes it) and there are at least
 * WIDE_TILES_PER_SM of them (word pairs beside: WIDE_PAIRS_*); else narrow. */
static jitops__scan_width lookback_width(jitops__scan_kop kop, jitops__dtype dtype,
                                         const jitops__scan_geom *g, int sm_count) {
  if (!jitops__scan_rows_wide(kop, dtype))
    return JITOPS__SCAN_NARROW;
  /* Word pairs need aligned rows; indices staged as 32 bits (beside data narrower than they
   * are) positions below 2^31. */
  const size_t e = jitops__dtype_size(dtype);
  if ((e == 2 && !pairs_aligned(g)) || (indices_narrowed(kop, dtype) && g->len - 1 > INT32_MAX))
    return JITOPS__SCAN_NARROW;
  int warps, items;
  rows_shape(kop, dtype, 1, JITOPS__SCAN_WIDE, &warps, &items);
  const int64_t tiles = tiles_of(g->len, warps, items);
  if (tiles < 2 || g->chains * tiles < (int64_t)sm_count * WIDE_TILES_PER_SM)
    return JITOPS__SCAN_NARROW;
  const int64_t tile = (int64_t)warps * 32 * items;
  const int64_t unused = tiles * tile - g->len; /* past the row's end in its last tile */
  const int full_enough = 100 * unused <= (100 - WIDE_PAIRS_MIN_FILL_PERCENT) * tiles * tile;
  if (wide_pairs_beside(kop, dtype) && !full_enough &&
      (tiles < WIDE_PAIRS_MIN_PARTIAL_ROW_TILES ||
       2 * g->chains * tiles < (int64_t)sm_count * WIDE_PAIRS_TILES_PER_2_SMS))
    return JITOPS__SCAN_NARROW;
  return JITOPS__SCAN_WIDE;
}

jitops_status jitops__scan_plan_make(const char *fn, jitops__scan_plan *p, jitops__scan_kop kop,
                                     jitops__dtype dtype, const jitops__scan_geom *g,
                                     int sm_count) {
  memset(p, 0, sizeof *p);
  if (sm_count <= 0)
    sm_count = 132;
  p->state_bytes = state_bytes(kop, dtype);
  p->quick = jitops__scan_kop_quick(kop, dtype);
  if (is_inner(g) && (g->len >= ROWS_MIN_LEN || short_rows(kop, g))) {
    p->kind = JITOPS__SCAN_ROWS;
    /* A one-tile row is a look-back tile that looks back at nothing: it takes no scratch. */
    const int one_tile = one_tile_rows(kop, dtype, g, sm_count);
    const jitops__scan_width width =
        one_tile ? JITOPS__SCAN_NARROW : lookback_width(kop, dtype, g, sm_count);
    int warps, items;
    rows_shape(kop, dtype, 1, width, &warps, &items);
    const int64_t tiles = tiles_of(g->len, warps, items);
    if (one_tile || (tiles > 1 && g->chains < (int64_t)sm_count * CHAINS_PER_SM &&
                     g->chains * tiles <= GRID_MAX)) {
      p->lookback = 1;
      p->width = width;
      p->warps = warps;
      p->items = items;
      p->tiles = tiles;
      p->grid = (uint32_t)(g->chains * tiles);
      p->shared_bytes = (uint32_t)rows_dynamic_staging(kop, dtype, 1, width, warps, items);
      if (!one_tile)
        plan_scratch(p, g->chains);
    } else {
      rows_shape(kop, dtype, 0, JITOPS__SCAN_NARROW, &p->warps, &p->items);
      p->items = walk_items(kop, g, p->items);
      const int64_t blocks = (g->chains + ROWS_WARPS - 1) / ROWS_WARPS;
      if (blocks > GRID_MAX)
        return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                            "%s: %lld independent scans exceed the grid limit", fn,
                            (long long)g->chains);
      p->grid = (uint32_t)blocks;
    }
    p->block_x = (uint32_t)p->warps * 32;
    p->block_y = 1;
  } else {
    p->kind = JITOPS__SCAN_COLS;
    p->items = cols_items(kop, dtype);
    const int64_t span = (int64_t)COLS_BY * p->items;
    const int64_t tiles = (g->len + span - 1) / span;
    const int64_t strips = (g->chains + COLS_BX - 1) / COLS_BX;
    /* Blocks walking whole strips need no scratch and no look-back: they are chosen when the
     * strips cover every SM in one wave (a second wave of whole-axis walks would double the
     * time), or when there are so many that the last wave hardly matters. */
    const int64_t one_wave = (int64_t)sm_count * cols_blocks_per_sm(kop, dtype, COLS_STAGES_WALK);
    const int walk =
        (strips >= sm_count && strips <= one_wave) || strips >= (int64_t)sm_count * STRIPS_PER_SM;
    if (tiles >= COLS_MIN_TILES && !walk && strips * tiles <= GRID_MAX) {
      /* Persistent blocks: as many as fit at once, and at most half the tiles, so that every
       * block scans at least two (the prefetch always has work to overlap). */
      const int64_t resident =
          (int64_t)sm_count * cols_blocks_per_sm(kop, dtype, COLS_STAGES_LOOKBACK);
      const int64_t half = (strips * tiles + 1) / 2;
      p->shared_bytes = (uint32_t)cols_shared_bytes(kop, dtype, COLS_STAGES_LOOKBACK);
      p->lookback = 1;
      p->tiles = tiles;
      p->grid = (uint32_t)(half < resident ? half : resident);
      plan_scratch(p, g->chains);
    } else {
      if (strips > GRID_MAX)
        return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                            "%s: %lld independent scans exceed the grid limit", fn,
                            (long long)g->chains);
      p->shared_bytes = (uint32_t)cols_shared_bytes(kop, dtype, COLS_STAGES_WALK);
      p->grid = (uint32_t)strips;
    }
    p->block_x = COLS_BX;
    p->block_y = COLS_BY;
  }
  jitops__scan_kernel_name(kop, dtype, p->kind, g->nb, p->lookback, p->width,
                           p->kind == JITOPS__SCAN_ROWS ? p->items : 0, p->name, sizeof p->name);
  return JITOPS_SUCCESS;
}
