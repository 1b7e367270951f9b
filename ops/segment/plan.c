/* Planning for the segment family: which algorithm runs, how columns map onto lanes, how the
 * positions are chunked, how many radix passes the ids need, and where each scratch buffer
 * lives. Pure arithmetic on the validated call and the device's properties, so the
 * workspace-size queries and the prewarm catalogue reach the same decisions as the calls. */
#include "ops/segment/internal.h"

#include <string.h>

/* Threads one SM keeps resident for the chunked reduction: about 100 registers a thread in
 * general (two blocks), at most 80 for narrow rows (three blocks: reduce_min_blocks in
 * templates/segment_reduce.cuh). The chunk size aims at one such wave, which keeps enough rows
 * in flight for full bandwidth while making each chunk long (fewer partials for the fixup). */
#define SEG_THREADS_PER_SM               512
#define SEG_REDUCE_NARROW_THREADS_PER_SM 768
#define SEG_REDUCE_NARROW_LANE_ELEMENTS  4
#define SEG_MIN_CHUNK                    32
#define SEG_MAX_CHUNK                    2048
/* The fixup treats its segments as sparse from this many segments a chunk on. */
#define SEG_FIXUP_SPARSE_SEGMENTS_PER_CHUNK 32
/* The atomic path's shared table pays for itself when each block brings at least this many
 * row elements per table cell (it initializes and merges every cell once). */
#define SEG_SHARED_ELEMENTS_PER_CELL 16
/* Unsorted max/min with rows of at most this many columns prefer global atomics when
 * segments hold at least SEG_ATOMIC_MIN_ROWS_PER_SEGMENT rows on average. Measured on an
 * H200 (N = 2^20, S = 10^4): D = 1 atomics 0.03 ms against sort 0.18 ms; D = 64 atomics
 * 0.36 ms against sort 0.29 ms; D = 1024 atomics 6.1 ms against sort 1.45 ms (global atomics
 * are bound by L2 atomic throughput once rows are wide). */
#define SEG_ATOMIC_MAX_COLS             4
#define SEG_ATOMIC_MIN_ROWS_PER_SEGMENT 16
#define SEG_ATOMIC_ROWS_IN_FLIGHT       4 /* matches templates/segment_atomic.cuh */
#define SEG_BACKWARD_BATCH              4 /* matches BATCH in templates/segment_backward.cuh */
/* max/min backward, unsorted ids: with at least this many result cells the tie table (4 bytes
 * a cell, 8 with first_occurrence, cleared every call) and the per-row gathers of random result
 * rows cost more than grouping the rows by segment (the forward's sort) and keeping tie bits in
 * registers. Measured on an H200 (N = 2^20, tie table): D = 1024 / S = 10^4 3.6x the forward,
 * D = 64 / S = 10^6 2.6x; below, D = 64 / S = 10^4 1.2x and S = 100 1.8x. Sorted ids always
 * take the grouped rows: they need no sort. */
#define SEG_BACKWARD_RUNS_MIN_CELLS ((int64_t)1 << 22)
/* The grouped kernels' chunks: two full waves of the mark pass (runs_shape in
 * templates/segment_backward_runs.cuh: three 256-thread blocks an SM for narrow rows of 4-byte
 * types, two otherwise). A lane takes at most 16 elements of a row per column tile (8 for f64):
 * f32 D = 1024 walks two tiles of 512 columns. Whole rows a tile (32 elements, the current
 * segment's result reloaded from L1 by each access) measured 10% slower on an H100. */
#define SEG_BACKWARD_RUNS_WAVES 2
#define SEG_BACKWARD_RUNS_WIDE  8 /* elements a lane from which a row is wide */

/* Unsorted max/min over many segments go into buckets of P consecutive segments, each reduced
 * by shared-memory atomics in a P x D table (SEG_PATH_BUCKETS): at most SEG_BUCKET_TABLE_BYTES
 * a table (three 256-thread blocks an SM: BUCKET_MIN_BLOCKS), at most SEG_BUCKET_TILE_ROWS rows a
 * block (larger buckets are split, so skewed ids still spread over the grid), at most
 * SEG_BUCKETS_MAX buckets (the counting passes keep a count a bucket in shared memory). The
 * reduction's tiles merge through the output read as codes, so only 4- and 8-byte value types
 * qualify. The automatic choice takes buckets when segments average at most
 * SEG_BUCKET_MAX_ROWS_PER_SEGMENT rows. Measured on an H100 (N = 2^20, max, buckets against
 * sort): D = 64, S = 10^6 0.294 against 0.308 ms; D = 8, S = 10^6 0.122 against 0.259; D = 64,
 * S = 3 x 10^5 (3.5 rows a segment) 0.218 against 0.214; D = 16, S = 10^5 0.143 against 0.117. */
#define SEG_BUCKET_TABLE_BYTES          (48 * 1024)
#define SEG_BUCKET_TILE_ROWS            4096
#define SEG_BUCKETS_MAX                 12288 /* 48 KB of shared counters a block */
#define SEG_BUCKET_MAX_ROWS_PER_SEGMENT 2
/* The counting sort by bucket: blocks of a multiple of 4096 rows (COUNTING_THREADS x
 * COUNTING_ITEMS), at most SEG_BUCKET_COUNT_BLOCKS of them, so that the offsets pass walks a
 * short column of block counts a bucket (256 blocks: offsets 24 -> 33 us at S = 10^6, and the
 * scatter no faster). */
#define SEG_BUCKET_ROWS_UNIT    4096
#define SEG_BUCKET_COUNT_BLOCKS 128
/* The offsets pass takes a column in OFFSETS_PARTS x BUCKET_COLUMN_BATCH (4 x 32) rows. */
_Static_assert(SEG_BUCKET_COUNT_BLOCKS <= 4 * 32, "the bucket offsets pass's column length");

/* Unsorted sum and mean of one column take per-tile sorts and a tiles x S table of sums when
 * the table stays small: at most this many segments (keys of at most 15 bits, two passes in
 * shared memory; the table at most 4 cells a row) and tiles (the combine adds each segment's
 * tiles in 8 runs). Measured on an H200 (N = 2^20, S = 10^4, f32): sum 0.035 ms, mean 0.051 ms
 * this way, 0.077 ms either by the global sort. */
#define SEG_TILES_MAX_SEGMENTS 16384
#define SEG_TILES_MAX_TILES    1024

/* Unsorted sum and mean over many segments of about one row (SEG_PATH_DIGIT): one scatter puts
 * the rows into parts of PP consecutive segments, a region of SEG_DIGIT_CAP entries a part, and a
 * block a part orders and reduces the part's rows in shared memory. The host takes the largest
 * PP (a power of two from SEG_DIGIT_PART_SEGMENTS_MAX down to SEG_DIGIT_PART_SEGMENTS_MIN) at
 * which a part of uniform ids expects at most SEG_DIGIT_PART_ROWS rows (Poisson spread at 1280:
 * +-36, and the cap 21 spreads above); a region over the cap at run time (skewed ids) sends the
 * call through the full sort and the chunked reduction instead, chosen on the device. Taken for
 * at least SEG_DIGIT_MIN_SEGMENTS segments, at most SEG_DIGIT_PARTS_MAX parts, and
 * SEG_DIGIT_MIN_COLS to SEG_DIGIT_MAX_COLS columns. Measured on an H200 (N = 2^20, f32 sum,
 * against the path's earlier form, a top radix pass into buckets of 4096 segments): S = 10^6
 * D = 64 0.184 against 0.213 ms, D = 128 0.316 / 0.343, D = 8 0.126 / 0.172; S = 2^18 (parts
 * of 256 segments) D = 64 0.132 / 0.163; skewed ids (the fallback) 0.364 / 0.358. Parts of 512
 * segments at S = 10^6 (H100): reduction 198 against 203 us, scatter 19 against 15, no gain. */
#define SEG_DIGIT_PART_ROWS         1280
#define SEG_DIGIT_PART_SEGMENTS_MIN 256
#define SEG_DIGIT_MIN_SEGMENTS      ((int64_t)1 << 17)
#define SEG_DIGIT_MIN_COLS          8
#define SEG_DIGIT_MAX_COLS          128
_Static_assert(SEG_DIGIT_PART_SEGMENTS_MAX <= 65536, "a part's segments are 16-bit");

static size_t take(size_t *cursor, size_t bytes) {
  const size_t at = *cursor;
  *cursor = (at + bytes + 255) & ~(size_t)255;
  return at;
}

static int64_t sm_count(const jitops__device_props *props) {
  return props != NULL && props->sm_count > 0 ? props->sm_count : 132;
}

static int pow2_at_least(int64_t v) {
  int p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

static size_t acc_size(jitops__dtype dtype) {
  return jitops__dtype_size(jitops__dtype_accumulator(dtype));
}

seg_layout jitops__segment_choose_layout(int64_t cols, int vec_max) {
  seg_layout l = {1, 1, 1};
  int vec = vec_max > 0 ? vec_max : 1;
  while (vec > 1 && cols % vec != 0)
    vec >>= 1;
  l.vec = vec;
  const int64_t accesses = cols / vec;
  if (accesses <= 0)
    return l;
  /* Registers: at most 32 accumulated elements per lane, and 8 accesses (doubles come at
   * most 2 to an access, so they stop at 16). */
  int cpl_max = 32 / vec;
  if (cpl_max > 8)
    cpl_max = 8;
  if (cols <= 8) {
    /* Small rows: one lane owns a whole row, so a chunk's rows are independent lanes. */
    l.lanes = 1;
    l.cpl = pow2_at_least(accesses);
  } else {
    l.lanes = accesses >= 32 ? 32 : pow2_at_least(accesses);
    l.cpl = pow2_at_least((accesses + l.lanes - 1) / l.lanes);
  }
  if (l.cpl > cpl_max)
    l.cpl = cpl_max;
  return l;
}

int jitops__segment_fixup_segments_per_warp(int lanes, int64_t segments, int64_t chunks) {
  /* At most one segment a chunk crosses into the next; with many more segments than that the
   * fixup's segments are sparse (crossing ones and long gaps: the reduction writes short gaps),
   * and its warps mostly read bounds: a warp looks at 128, 32 at a time (FIXUP_ROUNDS). Not
   * below 32 segments a chunk: with one in 4 segments crossing, a warp's groups combined ~32
   * segments' partials one after another (H100, D = 1024, S = 10^4: 117 us against 15 us). */
  if (segments >= SEG_FIXUP_SPARSE_SEGMENTS_PER_CHUNK * chunks)
    return 128;
  const int groups = 32 / lanes;
  return groups * 4 < 32 ? groups * 4 : 32;
}

uint32_t jitops__segment_grid(const jitops__device_props *props, int64_t work, int lanes,
                              int per_sm) {
  int64_t blocks = (work * lanes + 255) / 256;
  const int64_t cap = sm_count(props) * per_sm;
  if (blocks > cap)
    blocks = cap;
  return blocks < 1 ? 1u : (uint32_t)blocks;
}

/* The rows spread evenly over the groups `threads_per_sm` make on every SM, rounded up to a
 * multiple of 8: the last wave is as full as the others (rounding up to a power of two could
 * leave a third of the SMs' slots empty, or the SMs one block short of full). */
static int64_t choose_chunk_rows(const jitops__device_props *props, int64_t rows, int lanes,
                                 int64_t threads_per_sm) {
  const int64_t groups = sm_count(props) * threads_per_sm / lanes;
  int64_t ch = ((rows + groups - 1) / groups + 7) & ~(int64_t)7;
  if (ch < SEG_MIN_CHUNK)
    ch = SEG_MIN_CHUNK;
  if (ch > SEG_MAX_CHUNK)
    ch = SEG_MAX_CHUNK;
  return ch;
}

static int bit_width(int64_t v) {
  int bits = 1;
  while (bits < 62 && (v >> bits) != 0)
    ++bits;
  return bits;
}

static int total_sort_bits(const seg_call *call) {
  return bit_width(call->segments + 1); /* keys run to S + 1 (ids >= S) */
}

/* The radix sort's passes: the key's bits balanced over as few passes of <= 8 bits as needed. */
static void plan_sort_passes(const seg_call *call, seg_forward_plan *plan) {
  const int total_bits = total_sort_bits(call);
  plan->sort_passes = (total_bits + 7) / 8;
  plan->sort_bits = (total_bits + plan->sort_passes - 1) / plan->sort_passes;
}

static bool extreme(const seg_call *call) {
  return call->reduction == JITOPS_SEGMENT_MAX || call->reduction == JITOPS_SEGMENT_MIN;
}

/* The shared-memory atomic path: the S x D code table fits in a block's shared memory and
 * each block brings enough row elements to amortize its table; sets the grid when it does. */
static bool shared_atomics(const jitops__device_props *props, const seg_call *call,
                           uint32_t *blocks) {
  const size_t code = call->dtype == JITOPS__DTYPE_F64 ? 8 : 4;
  const int64_t cells = call->segments * call->cols;
  const size_t table_bytes = (size_t)cells * code;
  if (cells <= 0 || table_bytes > SEG_SHARED_TABLE_BYTES)
    return false;
  const size_t per_block = table_bytes + 1024;
  int64_t per_sm =
      props != NULL && props->smem_per_sm > 0 ? (int64_t)(props->smem_per_sm / per_block) : 1;
  if (per_sm > 4)
    per_sm = 4;
  if (per_sm < 1)
    per_sm = 1;
  const int64_t useful = call->rows * call->cols / (SEG_SHARED_ELEMENTS_PER_CELL * cells);
  if (useful < sm_count(props))
    return false;
  const int64_t most = sm_count(props) * per_sm;
  *blocks = (uint32_t)(useful < most ? useful : most);
  return true;
}

static void plan_atomic(const jitops__device_props *props, const seg_call *call,
                        seg_forward_plan *plan, size_t *cursor) {
  plan->code_size = call->dtype == JITOPS__DTYPE_F64 ? 8 : 4;
  plan->codes = take(cursor, (size_t)(call->segments * call->cols) * plan->code_size);
  plan->atomic_shared = shared_atomics(props, call, &plan->atomic_blocks);
  if (!plan->atomic_shared)
    plan->atomic_blocks = jitops__segment_grid(
        props, (call->rows + SEG_ATOMIC_ROWS_IN_FLIGHT - 1) / SEG_ATOMIC_ROWS_IN_FLIGHT,
        plan->layout.lanes, 32);
}

/* The radix sort's tiles, its histogram grid, and its scratch that starts zeroed: the digit
 * counts, the tile counters and the look-back words. Passes alternate between two sets of
 * look-back words; a pass clears the other set for the pass after it. */
static void plan_radix_scratch(const jitops__device_props *props, const seg_call *call,
                               seg_forward_plan *plan, size_t *cursor) {
  plan->sort_tiles = (call->rows + SEG_SORT_TILE - 1) / SEG_SORT_TILE;
  plan->hist = take(cursor, SEG_SORT_PASSES_MAX * SEG_SORT_RADIX_MAX * sizeof(int32_t));
  plan->tile_counters = take(cursor, SEG_SORT_PASSES_MAX * sizeof(int32_t));
  const size_t words = (size_t)plan->sort_tiles * SEG_SORT_RADIX_MAX * sizeof(uint64_t);
  const int sets = plan->sort_passes > 1 ? 2 : 1;
  for (int b = 0; b < sets; ++b)
    plan->lookback[b] = take(cursor, words);
  int64_t blocks = (call->rows + SEG_HIST_ROWS - 1) / SEG_HIST_ROWS;
  if (blocks > 2 * sm_count(props))
    blocks = 2 * sm_count(props);
  plan->hist_blocks = (uint32_t)blocks;
}

/* `partial_bytes` per chunk: the forward's two partial rows, or the backward's tie bits. */
static void plan_sort(const jitops__device_props *props, const seg_call *call,
                      int64_t threads_per_sm, size_t partial_bytes, seg_forward_plan *plan,
                      size_t *cursor) {
  /* What starts zeroed comes first, in one range: the bounds of every segment (untouched
   * bounds mean an empty segment), then the sort's counters and look-back words. */
  plan->zeroed = *cursor;
  plan->seg_start = take(cursor, (size_t)call->segments * sizeof(int32_t));
  plan->seg_end = take(cursor, (size_t)call->segments * sizeof(int32_t));
  const bool sort = plan->path == SEG_PATH_SORT && call->rows > 0;
  if (sort) {
    plan_sort_passes(call, plan);
    plan_radix_scratch(props, call, plan, cursor);
    /* One column of a 32-bit-or-narrower type: the sort carries the values, and the
     * reduction streams them instead of gathering rows. */
    plan->sort_carry = call->cols == 1 && call->dtype != JITOPS__DTYPE_F64;
  }
  plan->zeroed_bytes = *cursor - plan->zeroed;

  plan->chunk_rows = choose_chunk_rows(props, call->rows, plan->layout.lanes, threads_per_sm);
  plan->chunks = (call->rows + plan->chunk_rows - 1) / plan->chunk_rows;
  plan->partials = take(cursor, (size_t)plan->chunks * partial_bytes);
  if (sort) {
    const size_t list = (size_t)call->rows * sizeof(int32_t);
    const int buffers = plan->sort_passes > 1 ? 2 : 1;
    for (int b = 0; b < buffers; ++b) {
      plan->keys[b] = take(cursor, list);
      plan->vals[b] = take(cursor, list);
    }
  }
}

/* Whether the bucket path can take the call; sets P (segments a bucket) and B (buckets). */
static bool buckets_fit(const seg_call *call, int64_t *per_bucket, int64_t *buckets) {
  const size_t code = acc_size(call->dtype);
  if (jitops__dtype_size(call->dtype) != code || call->cols <= 0 || call->segments <= 0)
    return false;
  int64_t P = SEG_BUCKET_TABLE_BYTES / ((int64_t)code * call->cols);
  if (P < 1)
    return false;
  if (P > call->segments)
    P = call->segments;
  const int64_t B = (call->segments + P - 1) / P;
  if (B > SEG_BUCKETS_MAX)
    return false;
  *per_bucket = P;
  *buckets = B;
  return true;
}

static void plan_buckets(const seg_call *call, seg_forward_plan *plan, size_t *cursor) {
  buckets_fit(call, &plan->bucket_segments, &plan->buckets);
  const int64_t B = plan->buckets;
  plan->code_size = acc_size(call->dtype);
  plan->bucket_tile_rows = SEG_BUCKET_TILE_ROWS;
  plan->bucket_tiles_max = B + call->rows / SEG_BUCKET_TILE_ROWS;
  const int64_t units = (call->rows + SEG_BUCKET_ROWS_UNIT - 1) / SEG_BUCKET_ROWS_UNIT;
  const int64_t units_per_block = (units + SEG_BUCKET_COUNT_BLOCKS - 1) / SEG_BUCKET_COUNT_BLOCKS;
  plan->bucket_block_rows = (units_per_block < 1 ? 1 : units_per_block) * SEG_BUCKET_ROWS_UNIT;
  const int64_t blocks = (call->rows + plan->bucket_block_rows - 1) / plan->bucket_block_rows;
  plan->bucket_blocks = blocks < 1 ? 1u : (uint32_t)blocks;
  const size_t per_bucket = (size_t)B * sizeof(int32_t);
  plan->bucket_done = take(cursor, per_bucket); /* zeroed by the offsets pass */
  plan->bucket_matrix = take(cursor, per_bucket * plan->bucket_blocks);
  plan->bucket_counts = take(cursor, per_bucket);
  plan->bucket_tiles = take(cursor, (size_t)plan->bucket_tiles_max * 4 * sizeof(int32_t));
  plan->bucket_tile_count = take(cursor, sizeof(int32_t));
  plan->bucket_entries = take(cursor, (size_t)call->rows * 2 * sizeof(int32_t));
}

/* log2 of the digit path's segments a part, or 0 when the path does not fit the call. */
static int digit_part_log2(const seg_call *call) {
  const bool sum_or_mean =
      call->reduction == JITOPS_SEGMENT_SUM || call->reduction == JITOPS_SEGMENT_MEAN;
  if (!sum_or_mean || call->sorted || call->algorithm != JITOPS_SEGMENT_ALGORITHM_AUTO ||
      call->rows <= 0 || call->segments < SEG_DIGIT_MIN_SEGMENTS ||
      call->cols < SEG_DIGIT_MIN_COLS || call->cols > SEG_DIGIT_MAX_COLS)
    return 0;
  for (int log2 = 0; ((int64_t)SEG_DIGIT_PART_SEGMENTS_MAX >> log2) >= SEG_DIGIT_PART_SEGMENTS_MIN;
       ++log2) {
    const int64_t pp = (int64_t)SEG_DIGIT_PART_SEGMENTS_MAX >> log2;
    if (call->rows * pp > SEG_DIGIT_PART_ROWS * call->segments)
      continue;
    const int64_t parts = (call->segments + pp - 1) / pp;
    return parts <= SEG_DIGIT_PARTS_MAX ? bit_width(pp) - 1 : 0;
  }
  return 0;
}

static int64_t align16(int64_t bytes) {
  return (bytes + 15) & ~(int64_t)15;
}

/* Matches digit_shared in templates/segment_digit.cuh. */
static int64_t digit_shared_bytes(const seg_call *call, const seg_layout *l, int64_t pp) {
  const int64_t groups = SEG_DIGIT_THREADS / l->lanes;
  const int64_t cols = (int64_t)l->lanes * l->cpl * l->vec;
  return align16((pp + 1) * 4) + 2 * SEG_DIGIT_CAP * 4 + align16(SEG_DIGIT_CAP * 2) +
         groups * 2 * cols * (int64_t)acc_size(call->dtype);
}

static bool digit_fits(const jitops__device_props *props, const seg_call *call,
                       const seg_layout *layout) {
  const int log2 = digit_part_log2(call);
  if (log2 == 0)
    return false;
  const size_t most =
      props != NULL && props->smem_per_block_optin > 0 ? props->smem_per_block_optin : 227 * 1024;
  return (size_t)digit_shared_bytes(call, layout, (int64_t)1 << log2) <= most &&
         SEG_DIGIT_SCATTER_SHARED <= most;
}

/* The parts and grids, the full sort's plan and the chunked reduction's chunks (the fallback).
 * The part counts and the flag start zeroed; the segment bounds are zeroed only when the
 * fallback runs (by its histogram), so they stay out of the memset. */
static void plan_digit(const jitops__device_props *props, const seg_call *call,
                       int64_t threads_per_sm, seg_forward_plan *plan, size_t *cursor) {
  plan->digit_part_log2 = digit_part_log2(call);
  const int64_t pp = (int64_t)1 << plan->digit_part_log2;
  const int64_t parts = (call->segments + pp - 1) / pp;
  plan->digit_parts = (uint32_t)parts;
  plan->digit_scatter_blocks =
      (uint32_t)((call->rows + SEG_DIGIT_SCATTER_TILE - 1) / SEG_DIGIT_SCATTER_TILE);
  plan->digit_shared = (uint32_t)digit_shared_bytes(call, &plan->layout, pp);
  plan_sort_passes(call, plan);

  plan->zeroed = *cursor;
  plan->digit_fill = take(cursor, (size_t)parts * sizeof(int32_t));
  plan->digit_fallback = take(cursor, sizeof(int32_t));
  plan_radix_scratch(props, call, plan, cursor);
  plan->zeroed_bytes = *cursor - plan->zeroed;

  plan->seg_start = take(cursor, (size_t)call->segments * sizeof(int32_t));
  plan->seg_end = take(cursor, (size_t)call->segments * sizeof(int32_t));
  plan->chunk_rows = choose_chunk_rows(props, call->rows, plan->layout.lanes, threads_per_sm);
  plan->chunks = (call->rows + plan->chunk_rows - 1) / plan->chunk_rows;
  plan->partials =
      take(cursor, (size_t)plan->chunks * 2 * (size_t)call->cols * acc_size(call->dtype));
  /* Only the digit reduction reads the entries, and the fallback's sort writes its lists only
   * after it: they share memory. */
  const size_t list = (size_t)call->rows * sizeof(int32_t);
  size_t lists_end = *cursor, entries_end = *cursor;
  for (int b = 0; b < (plan->sort_passes > 1 ? 2 : 1); ++b) {
    plan->keys[b] = take(&lists_end, list);
    plan->vals[b] = take(&lists_end, list);
  }
  plan->digit_entries = take(&entries_end, (size_t)parts * SEG_DIGIT_CAP * 2 * sizeof(int32_t));
  *cursor = lists_end > entries_end ? lists_end : entries_end;
}

static void plan_tiles(const seg_call *call, seg_forward_plan *plan, size_t *cursor) {
  plan_sort_passes(call, plan);
  plan->sort_tiles = (call->rows + SEG_SORT_TILE - 1) / SEG_SORT_TILE;
  const size_t cells = (size_t)plan->sort_tiles * (size_t)call->segments;
  plan->tile_sums = take(cursor, cells * sizeof(float));
  if (call->reduction == JITOPS_SEGMENT_MEAN)
    plan->tile_counts = take(cursor, cells * sizeof(int32_t));
}

static bool tiles_fit(const seg_call *call) {
  const bool sum_or_mean =
      call->reduction == JITOPS_SEGMENT_SUM || call->reduction == JITOPS_SEGMENT_MEAN;
  const bool narrow = call->dtype != JITOPS__DTYPE_F64; /* accumulates in float */
  const int64_t tiles = (call->rows + SEG_SORT_TILE - 1) / SEG_SORT_TILE;
  return sum_or_mean && narrow && !call->sorted && call->cols == 1 && call->rows > 0 &&
         call->segments <= SEG_TILES_MAX_SEGMENTS && tiles <= SEG_TILES_MAX_TILES;
}

/* The atomic algorithm's layout: one shared table, buckets of shared tables, or a global
 * table; SEG_PATH_SORT when the automatic choice prefers the sort. */
static seg_path choose_atomic_layout(const jitops__device_props *props, const seg_call *call) {
  const bool forced = call->algorithm == JITOPS_SEGMENT_ALGORITHM_ATOMIC;
  uint32_t blocks;
  int64_t per_bucket, buckets;
  if (shared_atomics(props, call, &blocks))
    return SEG_PATH_ATOMIC;
  if (call->cols <= SEG_ATOMIC_MAX_COLS &&
      call->segments * SEG_ATOMIC_MIN_ROWS_PER_SEGMENT <= call->rows)
    return SEG_PATH_ATOMIC;
  if (buckets_fit(call, &per_bucket, &buckets) &&
      (forced || call->rows <= SEG_BUCKET_MAX_ROWS_PER_SEGMENT * call->segments))
    return SEG_PATH_BUCKETS;
  return forced ? SEG_PATH_ATOMIC : SEG_PATH_SORT;
}

static seg_path choose_path(const jitops__device_props *props, const seg_call *call,
                            seg_layout layout) {
  if (call->segments == 0 || call->cols == 0)
    return SEG_PATH_EMPTY;
  if (call->algorithm == JITOPS_SEGMENT_ALGORITHM_ATOMIC)
    return choose_atomic_layout(props, call);
  if (call->sorted)
    return SEG_PATH_BOUNDARIES;
  if (tiles_fit(call))
    return SEG_PATH_TILES;
  if (digit_fits(props, call, &layout))
    return SEG_PATH_DIGIT;
  if (call->algorithm == JITOPS_SEGMENT_ALGORITHM_AUTO && extreme(call))
    return choose_atomic_layout(props, call);
  return SEG_PATH_SORT;
}

/* Matches reduce_min_blocks in templates/segment_reduce.cuh. */
static int64_t reduce_threads_per_sm(const seg_call *call, const seg_layout *layout) {
  const bool narrow = call->dtype != JITOPS__DTYPE_F64 &&
                      layout->cpl * layout->vec <= SEG_REDUCE_NARROW_LANE_ELEMENTS;
  return narrow ? SEG_REDUCE_NARROW_THREADS_PER_SM : SEG_THREADS_PER_SM;
}

void jitops__segment_plan_forward(const jitops__device_props *props, const seg_call *call,
                                  seg_forward_plan *plan) {
  memset(plan, 0, sizeof *plan);
  plan->layout = jitops__segment_choose_layout(call->cols, call->vec_max);
  size_t cursor = 0;
  if (call->host_ids != NULL)
    plan->ids_copy = take(&cursor, (size_t)call->rows * jitops__dtype_size(call->id_dtype));
  plan->path = choose_path(props, call, plan->layout);
  if (plan->path == SEG_PATH_ATOMIC)
    plan_atomic(props, call, plan, &cursor);
  else if (plan->path == SEG_PATH_BUCKETS)
    plan_buckets(call, plan, &cursor);
  else if (plan->path == SEG_PATH_TILES)
    plan_tiles(call, plan, &cursor);
  else if (plan->path == SEG_PATH_DIGIT)
    plan_digit(props, call, reduce_threads_per_sm(call, &plan->layout), plan, &cursor);
  else if (plan->path == SEG_PATH_SORT || plan->path == SEG_PATH_BOUNDARIES)
    plan_sort(props, call, reduce_threads_per_sm(call, &plan->layout),
              2 * (size_t)call->cols * acc_size(call->dtype), plan, &cursor);
  plan->workspace_bytes = cursor;
}

/* max/min over grouped rows: the forward's sort plan (never carrying values: the kernels
 * need the rows), with chunks for the mark pass's waves; the crossing runs' tie bits take the
 * partials (a pair of words per lane, slot and column tile), their ends seg_end. */
static void plan_backward_runs(const jitops__device_props *props, const seg_call *call,
                               seg_backward_plan *plan, size_t *cursor) {
  seg_forward_plan *g = &plan->grouped;
  plan->runs = true;
  g->layout = plan->layout;
  g->path = call->sorted ? SEG_PATH_BOUNDARIES : SEG_PATH_SORT;
  const int lane_elements = acc_size(call->dtype) == 8 ? 8 : 16;
  int cpl = lane_elements / plan->layout.vec;
  if (cpl < 1)
    cpl = 1;
  plan->runs_cpl = cpl < plan->layout.cpl ? cpl : plan->layout.cpl;
  const int elements = plan->runs_cpl * plan->layout.vec;
  const bool narrow = elements < SEG_BACKWARD_RUNS_WIDE && acc_size(call->dtype) == 4;
  const int64_t threads_per_sm = (narrow ? 3 : 2) * SEG_RUNS_THREADS * SEG_BACKWARD_RUNS_WAVES;
  const int64_t cols_per_tile = (int64_t)plan->layout.lanes * elements;
  const int64_t tiles = (call->cols + cols_per_tile - 1) / cols_per_tile;
  const size_t bits_per_chunk =
      2 * (size_t)tiles * (size_t)plan->layout.lanes * 2 * sizeof(uint32_t);
  plan_sort(props, call, threads_per_sm, bits_per_chunk, g, cursor);
  g->sort_carry = false;
  plan->owned = take(cursor, (size_t)g->chunks * sizeof(int32_t));
  plan->own_start = take(cursor, (size_t)g->chunks * sizeof(int32_t));
  const size_t chunk_tiles = (size_t)g->chunks * (size_t)tiles;
  plan->tied_count = take(cursor, chunk_tiles * sizeof(int32_t));
  plan->tied_runs = take(cursor, chunk_tiles * SEG_RUNS_TIED_LIST * 3 * sizeof(int32_t));
  plan->tied_bits = take(cursor, chunk_tiles * SEG_RUNS_TIED_LIST * (size_t)plan->layout.lanes *
                                     sizeof(uint32_t));
}

void jitops__segment_plan_backward(const jitops__device_props *props, const seg_call *call,
                                   seg_backward_plan *plan) {
  memset(plan, 0, sizeof *plan);
  plan->layout = jitops__segment_choose_layout(call->cols, call->vec_max);
  /* Rows whose accesses all fit in one lane group: several rows at a time (matches BATCH). */
  plan->rows_in_flight =
      call->cols / plan->layout.vec <= plan->layout.lanes ? SEG_BACKWARD_BATCH : 1;
  size_t cursor = 0;
  if (call->host_ids != NULL)
    plan->ids_copy = take(&cursor, (size_t)call->rows * jitops__dtype_size(call->id_dtype));
  if (call->rows == 0 || call->cols == 0) {
    plan->workspace_bytes = cursor;
    return;
  }
  const size_t cells = (size_t)(call->segments * call->cols);
  switch (call->reduction) {
  case JITOPS_SEGMENT_MEAN:
    if (call->sorted) {
      plan->counts = take(&cursor, (size_t)(call->segments + 1) * sizeof(int32_t));
    } else {
      plan->counts = take(&cursor, (size_t)call->segments * sizeof(int32_t));
      const size_t table = (size_t)call->segments * sizeof(int32_t);
      const int64_t useful =
          call->segments > 0 ? call->rows / (SEG_SHARED_ELEMENTS_PER_CELL * call->segments) : 0;
      plan->count_shared = table <= SEG_SHARED_TABLE_BYTES && useful >= sm_count(props);
      const int64_t most = sm_count(props) * 4;
      plan->count_blocks = plan->count_shared ? (uint32_t)(useful < most ? useful : most)
                                              : jitops__segment_grid(props, call->rows, 1, 16);
    }
    break;
  case JITOPS_SEGMENT_MAX:
  case JITOPS_SEGMENT_MIN:
    if (call->sorted || (int64_t)cells >= SEG_BACKWARD_RUNS_MIN_CELLS) {
      plan_backward_runs(props, call, plan, &cursor);
      break;
    }
    /* The tie flag follows the tie counts (ties[cells]), so that one memset clears both. */
    plan->ties = take(&cursor, (cells + 1) * sizeof(int32_t));
    if (call->first_occurrence)
      plan->first_row = take(&cursor, cells * sizeof(int32_t));
    break;
  default:
    break;
  }
  plan->workspace_bytes = cursor;
}
