/* The forward plan: which path runs, with which column layout, chunks, radix passes, grids and
 * scratch; and what the backward plan (plan_backward.c) shares of it: the layout, the grids, the
 * grouped rows' sort and chunks, and the scratch cursor. Every size that grows with the call's
 * arguments goes through the cursor's checked arithmetic. */
#include "ops/segment/plan.h"

#include <string.h>

/* Threads one SM keeps resident for the chunked reduction: about 100 registers a thread in
 * general (two blocks), at most 80 for narrow rows (JITOPS__SEGMENT_REDUCE_NARROW_BLOCKS blocks,
 * as the kernel asks for). The chunk size aims at one such wave, which keeps enough rows in
 * flight for full bandwidth while making each chunk long (fewer partials for the fixup). A
 * chunk's rows are walked batch after batch, each batch a dependent memory round trip, so on a
 * call too small to fill the wave the chunk length is the kernel's latency: the floor is one
 * batch of 8 rows (H100, N 1024, D 8, sorted sum: the reduction 12.7 us with chunks of 32 rows,
 * 4.5 with 8; calls of 2^20 rows plan longer chunks and do not change). */
#define SEG_THREADS_PER_SM 512
#define SEG_MIN_CHUNK      8
#define SEG_MAX_CHUNK      2048
/* The fixup treats its segments as sparse from this many segments a chunk on. */
#define SEG_FIXUP_SPARSE_SEGMENTS_PER_CHUNK 32
/* Unsorted max/min with rows of at most this many columns prefer global atomics when
 * segments hold at least SEG_ATOMIC_MIN_ROWS_PER_SEGMENT rows on average. Measured on an
 * H200 (N = 2^20, S = 10^4): D = 1 atomics 0.03 ms against sort 0.18 ms; D = 64 atomics
 * 0.36 ms against sort 0.29 ms; D = 1024 atomics 6.1 ms against sort 1.45 ms (global atomics
 * are bound by L2 atomic throughput once rows are wide). */
#define SEG_ATOMIC_MAX_COLS             4
#define SEG_ATOMIC_MIN_ROWS_PER_SEGMENT 16

/* Unsorted max/min over many segments go into buckets of P consecutive segments, each reduced
 * by shared-memory atomics in a P x D table (JITOPS__SEGMENT_PATH_BUCKETS): at most
 * SEG_BUCKET_TABLE_BYTES a table (three 256-thread blocks an SM: BUCKET_MIN_BLOCKS), at most
 * SEG_BUCKET_TILE_ROWS rows a block (larger buckets are split, so skewed ids still spread over the
 * grid), at most SEG_BUCKETS_MAX buckets (the counting passes keep a count a bucket in shared
 * memory). The reduction's tiles merge through the output read as codes, so only 4- and 8-byte
 * value types qualify. The automatic choice takes buckets when segments average at most
 * SEG_BUCKET_MAX_ROWS_PER_SEGMENT rows. Measured on an H100 (N = 2^20, max, buckets against
 * sort): D = 64, S = 10^6 0.294 against 0.308 ms; D = 8, S = 10^6 0.122 against 0.259; D = 64,
 * S = 3 x 10^5 (3.5 rows a segment) 0.218 against 0.214; D = 16, S = 10^5 0.143 against 0.117.
 * It also takes them, for 4-byte values, when the segments fit in at most SEG_BUCKETS_FEW
 * buckets: then every bucket holds many rows for its tables' few segments, and the sort's
 * passes cost more than counting the rows into buckets. H100, f32 max, N = 2^20 and 2^22, D 12
 * to 128, S 10^3 to 5 x 10^4, buckets / sort: 0.53-0.96 with 30 buckets or fewer (D 16, S 10^3:
 * 0.078 against 0.146 ms), and from 32 buckets on anywhere from 0.88 to 1.22. And for 8-byte
 * values with rows of at most SEG_BUCKETS_F64_MAX_COLS columns, however many buckets: f64 max,
 * D 12 to 32, S 10^3 to 4 x 10^5, N 2^20 and 2^22, 0.57-0.93 (D 24, S 10^5: 0.159 against 0.271
 * ms); at D 40 to 128, 0.98-1.47. */
#define SEG_BUCKET_TABLE_BYTES          (48 * 1024)
#define SEG_BUCKET_TILE_ROWS            4096
#define SEG_BUCKETS_MAX                 12288 /* 48 KB of shared counters a block */
#define SEG_BUCKET_MAX_ROWS_PER_SEGMENT 2
#define SEG_BUCKETS_FEW                 30
#define SEG_BUCKETS_F64_MAX_COLS        32
/* The counting sort by bucket: blocks of a multiple of SEG_BUCKET_ROWS_UNIT rows, at most
 * SEG_BUCKET_COUNT_BLOCKS of them, so that the offsets pass walks a short column of block counts
 * a bucket (256 blocks: offsets 24 -> 33 us at S = 10^6, and the scatter no faster). */
#define SEG_BUCKET_ROWS_UNIT    (JITOPS__SEGMENT_COUNTING_THREADS * JITOPS__SEGMENT_COUNTING_ITEMS)
#define SEG_BUCKET_COUNT_BLOCKS 128
_Static_assert(SEG_BUCKET_COUNT_BLOCKS <=
                   JITOPS__SEGMENT_OFFSETS_PARTS * JITOPS__SEGMENT_BUCKET_COLUMN_BATCH,
               "the offsets pass takes a bucket's column of block counts in one round");

/* Unsorted sum and mean of one column take per-tile sorts and a tiles x S table of sums when
 * the table stays small: at most this many segments (keys of at most 15 bits, two passes in
 * shared memory; the table at most 4 cells a row) and tiles (the combine adds each segment's
 * tiles in 8 runs). Measured on an H200 (N = 2^20, S = 10^4, f32): sum 0.035 ms, mean 0.051 ms
 * this way, 0.077 ms either by the global sort. */
#define SEG_TILES_MAX_SEGMENTS 16384
#define SEG_TILES_MAX_TILES    1024

/* Unsorted sum and mean over many segments of about one row (JITOPS__SEGMENT_PATH_DIGIT): one
 * scatter puts the rows into parts of PP consecutive segments, a region of DIGIT_CAP entries a
 * part, and a block a part orders and reduces the part's rows in shared memory. The host takes
 * the largest PP (a power of two from DIGIT_PART_SEGMENTS_MAX down to SEG_DIGIT_PART_SEGMENTS_MIN)
 * at which a part of uniform ids expects at most SEG_DIGIT_PART_ROWS rows (Poisson spread at 1280:
 * +-36, and the cap 21 spreads above); a region over the cap at run time (skewed ids) sends the
 * call through the full sort and the chunked reduction instead, chosen on the device. Taken for
 * at least SEG_DIGIT_MIN_SEGMENTS segments, at most DIGIT_PARTS_MAX parts, and
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
_Static_assert(JITOPS__SEGMENT_DIGIT_PART_SEGMENTS_MAX <= 65536, "a part's segments are 16-bit");

/* Unsorted reductions over rows of at most JITOPS__SEGMENT_NARROW_MAX_COLS columns take the
 * narrow path (segment_narrow.cuh, a thread an element, atomics into a global S x D table): max
 * and min wherever the shared-memory table does not fit, sum and mean (not f64: the fixed-point
 * table holds about 40 bits below the largest |x|) from SEG_NARROW_SUM_MIN_SEGMENTS segments on
 * (below, the per-tile sums and the sort keep their measured targets, and the table's cells
 * would see long runs of same-address atomics) where the digit path does not fit (D = 8, S >= 2^17
 * and about 5 rows a segment or fewer: there both take the same time and the digit path sums
 * in row order, without the fixed point's quantum). Measured on an H200 (N = 2^20, f32, int64
 * ids, ms, before -> after): max D = 1 S = 10^6 0.092 (buckets) -> 0.022, D = 3 0.112 -> 0.036,
 * D = 8 0.091 -> 0.059, D = 3 S = 10^5 0.092 (sort) -> 0.034; sum D = 1 S = 10^6 0.129 (sort)
 * -> 0.025, D = 3 0.169 -> 0.053, D = 8 S = 10^5 0.096 -> 0.052, D = 8 S = 10^6 digit 0.123
 * against narrow 0.126. A thread a row (the old global table) paid D sector requests a row:
 * 0.092 ms at D = 1, 0.112 ms at D = 3, S = 10^6. The sweep: bench/NOTES-segment.md, "Narrow
 * rows". The prepare pass (sum/mean) runs at most SEG_NARROW_PREPARE_PER_SM blocks an SM (full
 * occupancy): each later block merges one word a prepare block. */
#define SEG_NARROW_SUM_MIN_SEGMENTS 16384
/* Below those segments, sum and mean take the narrow path too when the call is small (at most
 * SEG_NARROW_SUM_SMALL_ROWS rows) or its segments average at most
 * SEG_NARROW_SUM_MAX_ROWS_PER_SEGMENT rows (few same-address atomics a cell), ahead of the
 * per-tile sums for one column. A small call through the sort or the tiles is a chain of
 * launches and passes whose latencies the work never amortizes. Measured on an H100 (f32, CUDA
 * graph replay, narrow over the path before, bench/NOTES-segment.md "Small calls"): N <= 16384
 * 0.15-0.58 at D 1 to 8, S 16 to 4096 (N 4096, D 8, S 256 sum: 6.3 against 27.1 us, PyTorch's
 * scatter_reduce 9.5); at 64 rows a segment or fewer 0.20-0.80; at 256 rows a segment one
 * column of mean lost (1.15-1.43), and at 1024 or more the contention loses (1.3-13x at D <= 2). */
#define SEG_NARROW_SUM_SMALL_ROWS           16384
#define SEG_NARROW_SUM_MAX_ROWS_PER_SEGMENT 64
/* Small calls (at most SEG_NARROW_SUM_SMALL_ROWS rows) over rows of up to
 * SEG_NARROW_SUM_SMALL_MAX_COLS columns take it too, max and min as well, while the table stays
 * at most SEG_NARROW_SUM_SMALL_MAX_CELLS cells: at large S x D the table's bytes (8 a cell for
 * sums, cleared and read back) would outweigh the data's (S 10^6, D 64: 512 MB). H100, graph
 * replay, N 1024 to 16384, D 12 to 64, S 16 to 4096: sums 0.21-0.55 of the sort's time (N 4096,
 * D 64, S 256: 27.4 -> 6.9 us, PyTorch 8.6), max and min 0.11-0.77 of the shared-memory
 * atomics', the buckets' or the sort's. */
#define SEG_NARROW_SUM_SMALL_MAX_COLS  64
#define SEG_NARROW_SUM_SMALL_MAX_CELLS ((int64_t)1 << 18)
/* Sorted ids take the boundaries (a memset, the chunked reduction, its fixup) unless the call
 * is small as above; sums and means also at most SEG_NARROW_SORTED_SUM_MAX_ELEMENTS elements,
 * as sorted ids put a warp's atomics on the same cells. H100, graph replay, N 1024 to 16384,
 * D 1 to 64, S 16 to 4096, narrow over the boundaries: max 0.07-0.95; sum and mean 0.19-0.94
 * up to 2^18 elements (one exception, 16384 x 1 over 256 segments, mean 1.25: 9.4 -> 11.8 us),
 * 1.19-1.58 at 16384 x 64 over 256 or more segments. */
#define SEG_NARROW_SORTED_SUM_MAX_ELEMENTS ((int64_t)1 << 18)
#ifndef SEG_NARROW_SUM_MAX_COLS
#define SEG_NARROW_SUM_MAX_COLS JITOPS__SEGMENT_NARROW_MAX_COLS
#endif
#define SEG_NARROW_PREPARE_PER_SM 8
#define SEG_NARROW_BLOCKS_PER_SM  8

/* ---- what the forward and backward plans share --------------------------------------------- */

size_t jitops__segment_take(jitops__segment_scratch_cursor *cursor, size_t count, size_t size) {
  const size_t at = cursor->end;
  size_t bytes, end;
  if (!jitops__mul_size(count, size, &bytes) || !jitops__add_size(at, bytes, &end) ||
      !jitops__add_size(end, 255, &end)) {
    cursor->overflow = true;
    return 0;
  }
  cursor->end = end & ~(size_t)255;
  return at;
}

jitops_status jitops__segment_scratch_total(const jitops__segment_call *call,
                                            const jitops__segment_scratch_cursor *cursor,
                                            size_t *bytes) {
  if (cursor->overflow)
    return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                        "%s: the workspace for %lld rows, num_segments %lld and rows of %lld "
                        "elements would not fit in size_t",
                        call->fn, (long long)call->rows, (long long)call->segments,
                        (long long)call->cols);
  *bytes = cursor->end;
  return JITOPS_SUCCESS;
}

int64_t jitops__segment_sm_count(const jitops__device_props *props) {
  return props != NULL && props->sm_count > 0 ? props->sm_count : 132;
}

size_t jitops__segment_acc_size(jitops__dtype dtype) {
  return jitops__dtype_size(jitops__dtype_accumulator(dtype));
}

static int pow2_at_least(int64_t v) {
  int p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

jitops__segment_layout jitops__segment_choose_layout(int64_t cols, int vec_max) {
  jitops__segment_layout l = {1, 1, 1};
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

uint32_t jitops__segment_grid(const jitops__device_props *props, int64_t work, int lanes,
                              int per_sm) {
  int64_t blocks = (work * lanes + JITOPS__SEGMENT_THREADS - 1) / JITOPS__SEGMENT_THREADS;
  const int64_t cap = jitops__segment_sm_count(props) * per_sm;
  if (blocks > cap)
    blocks = cap;
  return blocks < 1 ? 1u : (uint32_t)blocks;
}

/* Blocks of JITOPS__SEGMENT_THREADS threads for `threads` threads. */
static uint32_t blocks_for(int64_t threads) {
  return (uint32_t)((threads + JITOPS__SEGMENT_THREADS - 1) / JITOPS__SEGMENT_THREADS);
}

/* The rows spread evenly over the groups `threads_per_sm` make on every SM, rounded up to a
 * multiple of 8: the last wave is as full as the others (rounding up to a power of two could
 * leave a third of the SMs' slots empty, or the SMs one block short of full). */
static int64_t choose_chunk_rows(const jitops__device_props *props, int64_t rows, int lanes,
                                 int64_t threads_per_sm) {
  const int64_t groups = jitops__segment_sm_count(props) * threads_per_sm / lanes;
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

/* The radix sort's passes: the keys (up to S + 1: ids >= S) balanced over as few passes of at
 * most RADIX_BITS bits as they need. */
static void plan_sort_passes(const jitops__segment_call *call, jitops__segment_forward_plan *plan) {
  const int total_bits = bit_width(call->segments + 1);
  plan->sort_passes =
      (total_bits + JITOPS__SEGMENT_SORT_RADIX_BITS - 1) / JITOPS__SEGMENT_SORT_RADIX_BITS;
  plan->sort_bits = (total_bits + plan->sort_passes - 1) / plan->sort_passes;
}

/* The radix sort's tiles, its histogram grid, and its scratch that starts zeroed: the digit
 * counts, the tile counters and the look-back words. Passes alternate between two sets of
 * look-back words; a pass clears the other set for the pass after it. */
static void plan_radix_scratch(const jitops__device_props *props, const jitops__segment_call *call,
                               jitops__segment_forward_plan *plan,
                               jitops__segment_scratch_cursor *cursor) {
  plan->sort_tiles = (call->rows + JITOPS__SEGMENT_SORT_TILE - 1) / JITOPS__SEGMENT_SORT_TILE;
  plan->hist = jitops__segment_take(
      cursor, JITOPS__SEGMENT_SORT_PASSES_MAX * JITOPS__SEGMENT_SORT_RADIX_MAX, sizeof(int32_t));
  plan->tile_counters =
      jitops__segment_take(cursor, JITOPS__SEGMENT_SORT_PASSES_MAX, sizeof(int32_t));
  const int sets = plan->sort_passes > 1 ? 2 : 1;
  for (int b = 0; b < sets; ++b)
    plan->lookback[b] = jitops__segment_take(cursor, (size_t)plan->sort_tiles,
                                             JITOPS__SEGMENT_SORT_RADIX_MAX * sizeof(uint64_t));
  const int64_t hist_rows = JITOPS__SEGMENT_SORT_THREADS * JITOPS__SEGMENT_HIST_ITEMS;
  int64_t blocks = (call->rows + hist_rows - 1) / hist_rows;
  if (blocks > 2 * jitops__segment_sm_count(props))
    blocks = 2 * jitops__segment_sm_count(props);
  plan->hist_blocks = (uint32_t)blocks;
}

/* The key and row (or value) lists of the sort: twice (ping-pong) when it takes several passes. */
static void plan_sort_lists(const jitops__segment_call *call, jitops__segment_forward_plan *plan,
                            jitops__segment_scratch_cursor *cursor) {
  const int buffers = plan->sort_passes > 1 ? 2 : 1;
  for (int b = 0; b < buffers; ++b) {
    plan->keys[b] = jitops__segment_take(cursor, (size_t)call->rows, sizeof(int32_t));
    plan->vals[b] = jitops__segment_take(cursor, (size_t)call->rows, sizeof(int32_t));
  }
}

/* The chunks of the reduction over grouped rows, its grid and its fixup's. */
static void plan_chunks(const jitops__device_props *props, const jitops__segment_call *call,
                        int64_t threads_per_sm, jitops__segment_forward_plan *plan) {
  const jitops__segment_layout *l = &plan->layout;
  plan->chunk_rows = choose_chunk_rows(props, call->rows, l->lanes, threads_per_sm);
  plan->chunks = (call->rows + plan->chunk_rows - 1) / plan->chunk_rows;
  plan->reduce_blocks = blocks_for(plan->chunks * l->lanes);
  /* At most one segment a chunk crosses into the next; with many more segments than that the
   * fixup's segments are sparse (crossing ones and long gaps: the reduction writes short gaps),
   * and its warps mostly read bounds: a warp looks at 32 a round, FIXUP_ROUNDS rounds. Not below
   * 32 segments a chunk: with one in 4 segments crossing, a warp's groups combined ~32
   * segments' partials one after another (H100, D = 1024, S = 10^4: 117 us against 15 us). */
  const int groups = 32 / l->lanes;
  if (call->segments >= SEG_FIXUP_SPARSE_SEGMENTS_PER_CHUNK * plan->chunks)
    plan->fixup_segments = 32 * JITOPS__SEGMENT_FIXUP_ROUNDS;
  else
    plan->fixup_segments = groups * 4 < 32 ? groups * 4 : 32;
  const int64_t warps = (call->segments + plan->fixup_segments - 1) / plan->fixup_segments;
  plan->fixup_blocks = blocks_for(warps * 32);
}

void jitops__segment_plan_grouped(const jitops__device_props *props,
                                  const jitops__segment_call *call, int64_t threads_per_sm,
                                  size_t partial_bytes, jitops__segment_forward_plan *plan,
                                  jitops__segment_scratch_cursor *cursor) {
  /* What starts zeroed comes first, in one range: the bounds of every segment (untouched
   * bounds mean an empty segment), then the sort's counters and look-back words. */
  plan->zeroed = cursor->end;
  plan->seg_start = jitops__segment_take(cursor, (size_t)call->segments, sizeof(int32_t));
  plan->seg_end = jitops__segment_take(cursor, (size_t)call->segments, sizeof(int32_t));
  const bool sort = plan->path == JITOPS__SEGMENT_PATH_SORT && call->rows > 0;
  if (sort) {
    plan_sort_passes(call, plan);
    plan_radix_scratch(props, call, plan, cursor);
    /* One column of a 32-bit-or-narrower type: the sort carries the values, and the
     * reduction streams them instead of gathering rows. */
    plan->sort_carry = call->cols == 1 && call->dtype != JITOPS__DTYPE_F64;
  }
  plan->zeroed_bytes = cursor->end - plan->zeroed;
  plan_chunks(props, call, threads_per_sm, plan);
  plan->partials = jitops__segment_take(cursor, (size_t)plan->chunks, partial_bytes);
  if (sort)
    plan_sort_lists(call, plan, cursor);
}

/* ---- the forward's paths ------------------------------------------------------------------- */

static bool extreme(const jitops__segment_call *call) {
  return call->reduction == JITOPS_SEGMENT_MAX || call->reduction == JITOPS_SEGMENT_MIN;
}

static bool sum_or_mean(const jitops__segment_call *call) {
  return call->reduction == JITOPS_SEGMENT_SUM || call->reduction == JITOPS_SEGMENT_MEAN;
}

static size_t code_size(const jitops__segment_call *call) {
  return call->dtype == JITOPS__DTYPE_F64 ? 8 : 4;
}

/* The shared-memory atomic path: the S x D code table fits in a block's shared memory and
 * each block brings enough row elements to amortize its table; sets the grid when it does. */
static bool shared_atomics(const jitops__device_props *props, const jitops__segment_call *call,
                           uint32_t *blocks) {
  const size_t code = code_size(call);
  const int64_t cells = call->segments * call->cols; /* both below 2^31 */
  if (cells <= 0 || (size_t)cells > JITOPS__SEGMENT_SHARED_TABLE_BYTES / code)
    return false;
  const size_t per_block = (size_t)cells * code + 1024;
  int64_t per_sm =
      props != NULL && props->smem_per_sm > 0 ? (int64_t)(props->smem_per_sm / per_block) : 1;
  if (per_sm > 4)
    per_sm = 4;
  if (per_sm < 1)
    per_sm = 1;
  const int64_t useful =
      call->rows * call->cols / (JITOPS__SEGMENT_SHARED_ELEMENTS_PER_CELL * cells);
  const int64_t sms = jitops__segment_sm_count(props);
  if (useful < sms)
    return false;
  *blocks = (uint32_t)(useful < sms * per_sm ? useful : sms * per_sm);
  return true;
}

static void plan_atomic(const jitops__device_props *props, const jitops__segment_call *call,
                        jitops__segment_forward_plan *plan,
                        jitops__segment_scratch_cursor *cursor) {
  plan->code_size = code_size(call);
  const size_t cells = (size_t)(call->segments * call->cols);
  plan->codes = jitops__segment_take(cursor, cells, plan->code_size);
  plan->code_table = cells * plan->code_size; /* checked by the take */
  plan->atomic_shared = shared_atomics(props, call, &plan->atomic_blocks);
  if (!plan->atomic_shared)
    plan->atomic_blocks =
        jitops__segment_grid(props,
                             (call->rows + JITOPS__SEGMENT_ATOMIC_ROWS_IN_FLIGHT - 1) /
                                 JITOPS__SEGMENT_ATOMIC_ROWS_IN_FLIGHT,
                             plan->layout.lanes, 32);
  plan->finalize_blocks = jitops__segment_grid(props, call->segments, plan->layout.lanes, 32);
}

/* Whether a sum or mean is small, or its segments sparse, enough for the narrow path at any
 * number of segments (SEG_NARROW_SUM_SMALL_ROWS). */
static bool small_or_sparse(const jitops__segment_call *call) {
  return call->rows <= SEG_NARROW_SUM_SMALL_ROWS ||
         call->rows <= SEG_NARROW_SUM_MAX_ROWS_PER_SEGMENT * call->segments;
}

/* Whether the narrow path takes a call (unsorted max/min: when the shared table does not fit,
 * which the caller checks first; sorted ids only in small calls). */
static bool narrow_fits(const jitops__segment_call *call) {
  if (call->rows <= 0)
    return false;
  const bool small_wide = call->cols <= SEG_NARROW_SUM_SMALL_MAX_COLS &&
                          call->rows <= SEG_NARROW_SUM_SMALL_ROWS &&
                          call->segments * call->cols <= SEG_NARROW_SUM_SMALL_MAX_CELLS;
  if (call->sorted) /* the boundaries' chain of launches, unless the call is small */
    return small_wide && call->algorithm == JITOPS_SEGMENT_ALGORITHM_AUTO &&
           (extreme(call) || (call->dtype != JITOPS__DTYPE_F64 &&
                              call->rows * call->cols <= SEG_NARROW_SORTED_SUM_MAX_ELEMENTS));
  if (extreme(call))
    return call->cols <= JITOPS__SEGMENT_NARROW_MAX_COLS || small_wide;
  if (call->dtype == JITOPS__DTYPE_F64 || call->algorithm != JITOPS_SEGMENT_ALGORITHM_AUTO)
    return false;
  if (call->cols <= SEG_NARROW_SUM_MAX_COLS)
    return call->segments >= SEG_NARROW_SUM_MIN_SEGMENTS || small_or_sparse(call);
  return small_wide;
}

/* The byte range [begin, end) of `count` (> 0) rows of `cols` elements of `elem` bytes, the
 * first at `ptr`, `stride` elements apart (any sign: a flipped or broadcast view). The offsets
 * fit int64: args.c checked that every tensor is addressable. */
static void rows_range(const void *ptr, int64_t count, int64_t stride, int64_t cols, size_t elem,
                       uintptr_t *begin, uintptr_t *end) {
  const int64_t last = (count - 1) * stride;
  const int64_t low = last < 0 ? last : 0, high = (last > 0 ? last : 0) + cols;
  *begin = (uintptr_t)ptr + (uintptr_t)(low * (int64_t)elem);
  *end = (uintptr_t)ptr + (uintptr_t)(high * (int64_t)elem);
}

static bool ranges_meet(uintptr_t a0, uintptr_t a1, uintptr_t b0, uintptr_t b1) {
  return a0 < b1 && b0 < a1;
}

/* Whether max/min's code table can be the output itself: codes as wide as the output's
 * elements (f32, f64 and 32-bit integers; not f16/bf16, whose codes are f32's), the output's
 * rows packed (cell s * D + c is out[s, c]), and no input in the output's bytes (the memset
 * and the atomics write it before the data is read). Saves the table's scratch and, in L2, the
 * write-back of a table nobody reads again. */
static bool narrow_in_place(const jitops__segment_call *call) {
  const size_t elem = jitops__dtype_size(call->dtype);
  if (code_size(call) != elem || call->out.stride != call->cols)
    return false;
  uintptr_t o0, o1, d0, d1;
  rows_range(call->out.ptr, call->segments, call->cols, call->cols, elem, &o0, &o1);
  rows_range(call->data.ptr, call->rows, call->data.stride, call->cols, elem, &d0, &d1);
  if (ranges_meet(o0, o1, d0, d1))
    return false;
  if (call->ids != NULL) {
    uintptr_t i0, i1;
    rows_range(call->ids, call->rows, call->id_stride, 1, jitops__dtype_size(call->id_dtype), &i0,
               &i1);
    if (ranges_meet(o0, o1, i0, i1))
      return false;
  }
  const uintptr_t c0 = (uintptr_t)call->counter;
  return call->counter == NULL || !ranges_meet(o0, o1, c0, c0 + (call->counter64 ? 8 : 4));
}

/* The table (max/min: codes, cleared by a memset, in the output itself where it can be; sum/mean:
 * 64-bit fixed point, then the non-finite marks and the counts, all cleared by the prepare pass,
 * which needs them to end on a 16-byte boundary: every take ends on a 256-byte one), the prepare
 * blocks' words, the grids. */
static void plan_narrow(const jitops__device_props *props, const jitops__segment_call *call,
                        jitops__segment_forward_plan *plan,
                        jitops__segment_scratch_cursor *cursor) {
  const bool fixed = sum_or_mean(call);
  const size_t cells = (size_t)(call->segments * call->cols); /* below 2^34 */
  const int64_t elements = call->rows * call->cols;
  const int64_t per_thread = JITOPS__SEGMENT_NARROW_UNROLL;
  plan->code_size = fixed ? sizeof(uint64_t) : code_size(call);
  plan->zeroed = cursor->end;
  plan->narrow_in_place = !fixed && narrow_in_place(call);
  if (!plan->narrow_in_place)
    plan->codes = jitops__segment_take(cursor, cells, plan->code_size);
  plan->code_table = cells * plan->code_size; /* checked by the take, or the output's size */
  if (fixed) {
    plan->narrow_flags = jitops__segment_take(
        cursor, (cells + JITOPS__SEGMENT_NARROW_FLAG_CELLS - 1) / JITOPS__SEGMENT_NARROW_FLAG_CELLS,
        sizeof(uint32_t));
    if (call->reduction == JITOPS_SEGMENT_MEAN)
      plan->narrow_counts = jitops__segment_take(cursor, (size_t)call->segments, sizeof(uint32_t));
    plan->zeroed_bytes = cursor->end - plan->zeroed;
    plan->narrow_prepare_blocks = jitops__segment_grid(
        props, (elements + per_thread - 1) / per_thread, 1, SEG_NARROW_PREPARE_PER_SM);
    plan->narrow_block_max =
        jitops__segment_take(cursor, plan->narrow_prepare_blocks, sizeof(uint32_t));
  }
  plan->narrow_blocks = jitops__segment_grid(props, (elements + per_thread - 1) / per_thread, 1,
                                             SEG_NARROW_BLOCKS_PER_SM);
  plan->narrow_finalize_blocks =
      jitops__segment_grid(props, (int64_t)cells, 1, SEG_NARROW_BLOCKS_PER_SM);
}

/* Whether the bucket path can take the call; sets P (segments a bucket) and B (buckets). */
static bool buckets_fit(const jitops__segment_call *call, int64_t *per_bucket, int64_t *buckets) {
  const size_t code = jitops__segment_acc_size(call->dtype);
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

static void plan_buckets(const jitops__segment_call *call, jitops__segment_forward_plan *plan,
                         jitops__segment_scratch_cursor *cursor) {
  buckets_fit(call, &plan->bucket_segments, &plan->buckets);
  const int64_t B = plan->buckets;
  plan->code_size = jitops__segment_acc_size(call->dtype);
  plan->bucket_table = (uint32_t)((size_t)plan->bucket_segments * (size_t)call->cols *
                                  plan->code_size); /* at most SEG_BUCKET_TABLE_BYTES */
  plan->bucket_tile_rows = SEG_BUCKET_TILE_ROWS;
  plan->bucket_tiles_max = B + call->rows / SEG_BUCKET_TILE_ROWS;
  const int64_t units = (call->rows + SEG_BUCKET_ROWS_UNIT - 1) / SEG_BUCKET_ROWS_UNIT;
  const int64_t units_per_block = (units + SEG_BUCKET_COUNT_BLOCKS - 1) / SEG_BUCKET_COUNT_BLOCKS;
  plan->bucket_block_rows = (units_per_block < 1 ? 1 : units_per_block) * SEG_BUCKET_ROWS_UNIT;
  const int64_t blocks = (call->rows + plan->bucket_block_rows - 1) / plan->bucket_block_rows;
  plan->bucket_blocks = blocks < 1 ? 1u : (uint32_t)blocks;
  plan->bucket_offsets_blocks =
      (uint32_t)((B + JITOPS__SEGMENT_OFFSETS_BUCKETS - 1) / JITOPS__SEGMENT_OFFSETS_BUCKETS);
  plan->bucket_done = jitops__segment_take(cursor, (size_t)B, sizeof(int32_t)); /* zeroed by the
                                                                                   offsets pass */
  plan->bucket_matrix =
      jitops__segment_take(cursor, (size_t)B * plan->bucket_blocks, sizeof(int32_t));
  plan->bucket_counts = jitops__segment_take(cursor, (size_t)B, sizeof(int32_t));
  plan->bucket_tiles = jitops__segment_take(cursor, (size_t)plan->bucket_tiles_max,
                                            sizeof(jitops__segment_bucket_tile));
  plan->bucket_tile_count = jitops__segment_take(cursor, 1, sizeof(int32_t));
  plan->bucket_entries =
      jitops__segment_take(cursor, (size_t)call->rows, sizeof(jitops__segment_bucket_entry));
}

/* log2 of the digit path's segments a part, or 0 when the path does not fit the call. */
static int digit_part_log2(const jitops__segment_call *call) {
  if (!sum_or_mean(call) || call->sorted || call->algorithm != JITOPS_SEGMENT_ALGORITHM_AUTO ||
      call->rows <= 0 || call->segments < SEG_DIGIT_MIN_SEGMENTS ||
      call->cols < SEG_DIGIT_MIN_COLS || call->cols > SEG_DIGIT_MAX_COLS)
    return 0;
  for (int log2 = 0;
       ((int64_t)JITOPS__SEGMENT_DIGIT_PART_SEGMENTS_MAX >> log2) >= SEG_DIGIT_PART_SEGMENTS_MIN;
       ++log2) {
    const int64_t pp = (int64_t)JITOPS__SEGMENT_DIGIT_PART_SEGMENTS_MAX >> log2;
    if (call->rows * pp > SEG_DIGIT_PART_ROWS * call->segments)
      continue;
    const int64_t parts = (call->segments + pp - 1) / pp;
    return parts <= JITOPS__SEGMENT_DIGIT_PARTS_MAX ? bit_width(pp) - 1 : 0;
  }
  return 0;
}

/* The digit reduction's shared memory (its layout in segment_abi.h) for parts of pp segments:
 * the lane groups' partials, two rows of a column tile a group, end it. */
static int64_t digit_shared_bytes(const jitops__segment_call *call, const jitops__segment_layout *l,
                                  int64_t pp) {
  const int64_t groups = JITOPS__SEGMENT_DIGIT_THREADS / l->lanes;
  const int64_t cols = (int64_t)l->lanes * l->cpl * l->vec;
  return JITOPS__SEGMENT_DIGIT_PARTIALS(pp) +
         groups * 2 * cols * (int64_t)jitops__segment_acc_size(call->dtype);
}

static bool digit_fits(const jitops__device_props *props, const jitops__segment_call *call,
                       const jitops__segment_layout *layout) {
  const int log2 = digit_part_log2(call);
  if (log2 == 0)
    return false;
  const size_t most =
      props != NULL && props->smem_per_block_optin > 0 ? props->smem_per_block_optin : 227 * 1024;
  return (size_t)digit_shared_bytes(call, layout, (int64_t)1 << log2) <= most &&
         JITOPS__SEGMENT_SCATTER_SHARED <= most;
}

/* The parts and grids, the full sort's plan and the chunked reduction's chunks (the fallback).
 * The part counts and the flag start zeroed; the segment bounds are zeroed only when the
 * fallback runs (by its histogram), so they stay out of the memset. */
static void plan_digit(const jitops__device_props *props, const jitops__segment_call *call,
                       int64_t threads_per_sm, jitops__segment_forward_plan *plan,
                       jitops__segment_scratch_cursor *cursor) {
  plan->digit_part_log2 = digit_part_log2(call);
  const int64_t pp = (int64_t)1 << plan->digit_part_log2;
  const int64_t parts = (call->segments + pp - 1) / pp;
  plan->digit_parts = (uint32_t)parts;
  plan->digit_scatter_blocks =
      (uint32_t)((call->rows + JITOPS__SEGMENT_SCATTER_TILE - 1) / JITOPS__SEGMENT_SCATTER_TILE);
  plan->digit_shared = (uint32_t)digit_shared_bytes(call, &plan->layout, pp);
  plan_sort_passes(call, plan);

  plan->zeroed = cursor->end;
  plan->digit_fill = jitops__segment_take(cursor, (size_t)parts, sizeof(int32_t));
  plan->digit_fallback = jitops__segment_take(cursor, 1, sizeof(int32_t));
  plan_radix_scratch(props, call, plan, cursor);
  plan->zeroed_bytes = cursor->end - plan->zeroed;

  plan->seg_start = jitops__segment_take(cursor, (size_t)call->segments, sizeof(int32_t));
  plan->seg_end = jitops__segment_take(cursor, (size_t)call->segments, sizeof(int32_t));
  plan_chunks(props, call, threads_per_sm, plan);
  plan->partials = jitops__segment_take(
      cursor, (size_t)plan->chunks, 2 * (size_t)call->cols * jitops__segment_acc_size(call->dtype));
  /* Only the digit reduction reads the entries, and the fallback's sort writes its lists only
   * after it: they share memory. */
  jitops__segment_scratch_cursor lists = *cursor, entries = *cursor;
  plan_sort_lists(call, plan, &lists);
  plan->digit_entries = jitops__segment_take(&entries, (size_t)parts * JITOPS__SEGMENT_DIGIT_CAP,
                                             JITOPS__SEGMENT_DIGIT_ENTRY_BYTES);
  cursor->end = lists.end > entries.end ? lists.end : entries.end;
  cursor->overflow = lists.overflow || entries.overflow;
}

static void plan_tiles(const jitops__segment_call *call, jitops__segment_forward_plan *plan,
                       jitops__segment_scratch_cursor *cursor) {
  plan_sort_passes(call, plan);
  plan->sort_tiles = (call->rows + JITOPS__SEGMENT_SORT_TILE - 1) / JITOPS__SEGMENT_SORT_TILE;
  const size_t cells = (size_t)plan->sort_tiles * (size_t)call->segments;
  plan->tile_sums = jitops__segment_take(cursor, cells, sizeof(float));
  if (call->reduction == JITOPS_SEGMENT_MEAN)
    plan->tile_counts = jitops__segment_take(cursor, cells, sizeof(int32_t));
  plan->combine_blocks = (uint32_t)((call->segments + 31) / 32); /* 32 segments a block */
}

static bool tiles_fit(const jitops__segment_call *call) {
  const bool narrow = call->dtype != JITOPS__DTYPE_F64; /* accumulates in float */
  const int64_t tiles = (call->rows + JITOPS__SEGMENT_SORT_TILE - 1) / JITOPS__SEGMENT_SORT_TILE;
  return sum_or_mean(call) && narrow && !call->sorted && call->cols == 1 && call->rows > 0 &&
         call->segments <= SEG_TILES_MAX_SEGMENTS && tiles <= SEG_TILES_MAX_TILES;
}

/* Whether buckets beat the sort whatever the rows a segment (the measurements above
 * SEG_BUCKETS_FEW): few of them for 4-byte values, rows of few columns for 8-byte ones. */
static bool few_or_narrow_buckets(const jitops__segment_call *call, int64_t buckets) {
  const size_t code = jitops__segment_acc_size(call->dtype);
  return (code == 4 && buckets <= SEG_BUCKETS_FEW) ||
         (code == 8 && call->cols <= SEG_BUCKETS_F64_MAX_COLS);
}

/* The atomic algorithm's layout: one shared table, buckets of shared tables, or a global
 * table; JITOPS__SEGMENT_PATH_SORT when the automatic choice prefers the sort. */
static jitops__segment_path choose_atomic_layout(const jitops__device_props *props,
                                                 const jitops__segment_call *call) {
  const bool forced = call->algorithm == JITOPS_SEGMENT_ALGORITHM_ATOMIC;
  uint32_t blocks;
  int64_t per_bucket, buckets;
  if (shared_atomics(props, call, &blocks))
    return JITOPS__SEGMENT_PATH_ATOMIC;
  if (narrow_fits(call))
    return JITOPS__SEGMENT_PATH_NARROW;
  if (call->cols <= SEG_ATOMIC_MAX_COLS &&
      call->segments * SEG_ATOMIC_MIN_ROWS_PER_SEGMENT <= call->rows)
    return JITOPS__SEGMENT_PATH_ATOMIC;
  if (buckets_fit(call, &per_bucket, &buckets) &&
      (forced || call->rows <= SEG_BUCKET_MAX_ROWS_PER_SEGMENT * call->segments ||
       few_or_narrow_buckets(call, buckets)))
    return JITOPS__SEGMENT_PATH_BUCKETS;
  return forced ? JITOPS__SEGMENT_PATH_ATOMIC : JITOPS__SEGMENT_PATH_SORT;
}

static jitops__segment_path choose_path(const jitops__device_props *props,
                                        const jitops__segment_call *call,
                                        jitops__segment_layout layout) {
  if (call->segments == 0 || call->cols == 0)
    return JITOPS__SEGMENT_PATH_EMPTY;
  if (call->algorithm == JITOPS_SEGMENT_ALGORITHM_ATOMIC)
    return choose_atomic_layout(props, call);
  if (call->sorted)
    return narrow_fits(call) ? JITOPS__SEGMENT_PATH_NARROW : JITOPS__SEGMENT_PATH_BOUNDARIES;
  if (tiles_fit(call) && !(narrow_fits(call) && small_or_sparse(call)))
    return JITOPS__SEGMENT_PATH_TILES;
  if (digit_fits(props, call, &layout))
    return JITOPS__SEGMENT_PATH_DIGIT;
  if (!extreme(call) && narrow_fits(call))
    return JITOPS__SEGMENT_PATH_NARROW;
  if (call->algorithm == JITOPS_SEGMENT_ALGORITHM_AUTO && extreme(call))
    return choose_atomic_layout(props, call);
  return JITOPS__SEGMENT_PATH_SORT;
}

/* Threads of the chunked reduction an SM holds: narrow rows ask for more blocks an SM
 * (reduce_min_blocks in segment_reduce.cuh). */
static int64_t reduce_threads_per_sm(const jitops__segment_call *call,
                                     const jitops__segment_layout *layout) {
  const bool narrow = call->dtype != JITOPS__DTYPE_F64 &&
                      layout->cpl * layout->vec <= JITOPS__SEGMENT_REDUCE_NARROW_ELEMENTS;
  return narrow ? JITOPS__SEGMENT_REDUCE_NARROW_BLOCKS * JITOPS__SEGMENT_THREADS
                : SEG_THREADS_PER_SM;
}

jitops_status jitops__segment_plan_forward(const jitops__device_props *props,
                                           const jitops__segment_call *call,
                                           jitops__segment_forward_plan *plan) {
  memset(plan, 0, sizeof *plan);
  plan->layout = jitops__segment_choose_layout(call->cols, call->vec_max);
  jitops__segment_scratch_cursor cursor = {0, false};
  if (call->host_ids != NULL)
    plan->ids_copy =
        jitops__segment_take(&cursor, (size_t)call->rows, jitops__dtype_size(call->id_dtype));
  plan->path = choose_path(props, call, plan->layout);
  const int64_t reduce_threads = reduce_threads_per_sm(call, &plan->layout);
  switch (plan->path) {
  case JITOPS__SEGMENT_PATH_EMPTY:
    plan->count_blocks = jitops__segment_grid(props, call->rows, 1, 8);
    break;
  case JITOPS__SEGMENT_PATH_ATOMIC:
    plan_atomic(props, call, plan, &cursor);
    break;
  case JITOPS__SEGMENT_PATH_BUCKETS:
    plan_buckets(call, plan, &cursor);
    break;
  case JITOPS__SEGMENT_PATH_TILES:
    plan_tiles(call, plan, &cursor);
    break;
  case JITOPS__SEGMENT_PATH_DIGIT:
    plan_digit(props, call, reduce_threads, plan, &cursor);
    break;
  case JITOPS__SEGMENT_PATH_NARROW:
    plan_narrow(props, call, plan, &cursor);
    break;
  case JITOPS__SEGMENT_PATH_SORT:
  case JITOPS__SEGMENT_PATH_BOUNDARIES:
    jitops__segment_plan_grouped(props, call, reduce_threads,
                                 2 * (size_t)call->cols * jitops__segment_acc_size(call->dtype),
                                 plan, &cursor);
    break;
  }
  return jitops__segment_scratch_total(call, &cursor, &plan->workspace_bytes);
}
