/* jitops/segment_abi.h — what the segment host code (the C files of ops/segment/) and the
 * segment kernels (segment_*.cuh) share: the block shapes and capacities both sides size
 * launches and scratch by, the records kernels leave in the scratch for each other, and the
 * one argument each kernel takes. Written in the common subset of C and CUDA C++ (see
 * templates/abi.h); the layout checks at the end run in both compilers.
 *
 * A tensor's element pointer travels as `const void *` (or `void *` for an output): its type is
 * the kernel's template parameter T (values) or I (ids). Strides are in elements. */
#ifndef JITOPS_OPS_SEGMENT_ABI_H
#define JITOPS_OPS_SEGMENT_ABI_H

#if defined(__CUDACC_RTC__)
#include "jitops/abi.h"
#else
#include "templates/abi.h"
#endif

/* ---- block shapes and capacities ----------------------------------------------------------- */

/* Threads a block of the kernels that take no shape of their own below (the chunked reduction
 * and its fixup, the atomic path, the row counts, the gathers, the tie passes). */
#define JITOPS__SEGMENT_THREADS 256

/* The radix sort (segment_sort.cuh): a block ranks a tile of SORT_THREADS x SORT_ITEMS rows;
 * keys are sorted RADIX_BITS at a time, in at most PASSES_MAX passes (keys are below 2^31); a
 * histogram block reads SORT_THREADS x HIST_ITEMS ids at a time. */
#define JITOPS__SEGMENT_SORT_THREADS    256
#define JITOPS__SEGMENT_SORT_ITEMS      16
#define JITOPS__SEGMENT_SORT_TILE       (JITOPS__SEGMENT_SORT_THREADS * JITOPS__SEGMENT_SORT_ITEMS)
#define JITOPS__SEGMENT_SORT_RADIX_BITS 8
#define JITOPS__SEGMENT_SORT_RADIX_MAX  (1 << JITOPS__SEGMENT_SORT_RADIX_BITS)
#define JITOPS__SEGMENT_SORT_PASSES_MAX 4
#define JITOPS__SEGMENT_HIST_ITEMS      16

/* The chunked reduction (segment_reduce.cuh) asks for REDUCE_NARROW_BLOCKS blocks an SM when a
 * lane accumulates at most REDUCE_NARROW_ELEMENTS 4-byte values; the host sizes its chunks for
 * that many threads an SM. The fixup's warps look at 32 segments a round, at most FIXUP_ROUNDS
 * rounds. */
#define JITOPS__SEGMENT_REDUCE_NARROW_ELEMENTS 4
#define JITOPS__SEGMENT_REDUCE_NARROW_BLOCKS   3
#define JITOPS__SEGMENT_FIXUP_ROUNDS           4

/* Rows a lane group of the atomic path (segment_atomic.cuh) takes at a time. */
#define JITOPS__SEGMENT_ATOMIC_ROWS_IN_FLIGHT 4

/* The narrow path (segment_narrow.cuh): rows of at most NARROW_MAX_COLS columns, a thread an
 * element, NARROW_UNROLL elements in flight a thread; the fixed-point sums keep 2 bits of
 * non-finite marks a cell, NARROW_FLAG_CELLS cells a word. */
#define JITOPS__SEGMENT_NARROW_MAX_COLS   8
#define JITOPS__SEGMENT_NARROW_UNROLL     4
#define JITOPS__SEGMENT_NARROW_FLAG_CELLS 16

/* The per-tile sums (segment_tiles.cuh): a combine block adds 32 segments' tiles in
 * COMBINE_SPLITS ranges, a warp each. */
#define JITOPS__SEGMENT_COMBINE_SPLITS 8

/* The bucket path (segment_buckets.cuh): BUCKET_THREADS a block of the offsets pass and the
 * reduction; COUNTING_THREADS a block of the counting and scattering passes, which take
 * consecutive rows in multiples of COUNTING_THREADS x COUNTING_ITEMS; the offsets pass splits a
 * bucket's column of block counts into OFFSETS_PARTS parts of at most BUCKET_COLUMN_BATCH blocks
 * (which bounds the counting passes' blocks). */
#define JITOPS__SEGMENT_BUCKET_THREADS      256
#define JITOPS__SEGMENT_COUNTING_THREADS    1024
#define JITOPS__SEGMENT_COUNTING_ITEMS      4
#define JITOPS__SEGMENT_OFFSETS_PARTS       4
#define JITOPS__SEGMENT_BUCKET_COLUMN_BATCH 32
#define JITOPS__SEGMENT_OFFSETS_BUCKETS                                                            \
  (JITOPS__SEGMENT_BUCKET_THREADS / JITOPS__SEGMENT_OFFSETS_PARTS)

/* The digit path (segment_digit.cuh): a part's region of the entry list holds DIGIT_CAP rows;
 * at most DIGIT_PARTS_MAX parts of at most DIGIT_PART_SEGMENTS_MAX segments; DIGIT_THREADS a
 * block of the reduction. The scatter's blocks take SCATTER_THREADS x SCATTER_ITEMS rows, with
 * SCATTER_SHARED bytes of dynamic shared memory: a count and then a first staged slot a part
 * (one more: the total), each part's first slot in its region, and the staged entries. An
 * entry is {key, row}, DIGIT_ENTRY_BYTES. */
#define JITOPS__SEGMENT_DIGIT_CAP               2048
#define JITOPS__SEGMENT_DIGIT_PARTS_MAX         4096
#define JITOPS__SEGMENT_DIGIT_PART_SEGMENTS_MAX 1024
#define JITOPS__SEGMENT_DIGIT_THREADS           256
#define JITOPS__SEGMENT_DIGIT_ENTRY_BYTES       8
#define JITOPS__SEGMENT_SCATTER_THREADS         1024
#define JITOPS__SEGMENT_SCATTER_ITEMS           8
#define JITOPS__SEGMENT_SCATTER_TILE                                                               \
  (JITOPS__SEGMENT_SCATTER_THREADS * JITOPS__SEGMENT_SCATTER_ITEMS)
#define JITOPS__SEGMENT_SCATTER_FIRST_WORDS (JITOPS__SEGMENT_DIGIT_PARTS_MAX + 4)
#define JITOPS__SEGMENT_SCATTER_SHARED                                                             \
  ((JITOPS__SEGMENT_SCATTER_FIRST_WORDS + JITOPS__SEGMENT_DIGIT_PARTS_MAX) * 4 +                   \
   JITOPS__SEGMENT_SCATTER_TILE * JITOPS__SEGMENT_DIGIT_ENTRY_BYTES)

/* The digit reduction's dynamic shared memory for parts of `pp` segments, at byte offsets: the
 * segments' counts and then first slots (pp + 1 ints), the rows placed by segment, the rows in
 * final order and their segments (16-bit), then the lane groups' partials (two rows of a tile's
 * columns a group), which end the block's memory. */
#define JITOPS__SEGMENT_ALIGN16(bytes)   (((bytes) + 15) & ~15)
#define JITOPS__SEGMENT_DIGIT_PLACED(pp) JITOPS__SEGMENT_ALIGN16(((pp) + 1) * 4)
#define JITOPS__SEGMENT_DIGIT_ROWS(pp)                                                             \
  (JITOPS__SEGMENT_DIGIT_PLACED(pp) + JITOPS__SEGMENT_DIGIT_CAP * 4)
#define JITOPS__SEGMENT_DIGIT_LOCALS(pp)                                                           \
  (JITOPS__SEGMENT_DIGIT_ROWS(pp) + JITOPS__SEGMENT_DIGIT_CAP * 4)
#define JITOPS__SEGMENT_DIGIT_PARTIALS(pp)                                                         \
  (JITOPS__SEGMENT_DIGIT_LOCALS(pp) + JITOPS__SEGMENT_ALIGN16(JITOPS__SEGMENT_DIGIT_CAP * 2))

/* The max/min backward (segment_backward.cuh): accesses a lane of the tie-table passes has in
 * flight. Over grouped rows (segment_backward_runs.cuh): RUNS_THREADS a block of the mark pass,
 * which asks for RUNS_NARROW_BLOCKS blocks an SM when a lane takes fewer than RUNS_WIDE_ELEMENTS
 * 4-byte elements of a column tile, RUNS_WIDE_BLOCKS otherwise; a chunk's tile lists at most
 * RUNS_TIED_LIST tied whole segments for the fix pass. */
#define JITOPS__SEGMENT_BACKWARD_BATCH     4
#define JITOPS__SEGMENT_RUNS_THREADS       256
#define JITOPS__SEGMENT_RUNS_WIDE_ELEMENTS 8
#define JITOPS__SEGMENT_RUNS_NARROW_BLOCKS 3
#define JITOPS__SEGMENT_RUNS_WIDE_BLOCKS   2
#define JITOPS__SEGMENT_RUNS_TIED_LIST     4

/* ---- records kernels leave in the scratch -------------------------------------------------- */

/* The bucket path: a row in its bucket's slots ({row, segment within the bucket}), and one
 * block's work in the reduction (entries [first, end), all of `bucket`, which has `tiles`). */
typedef struct jitops__segment_bucket_entry {
  int32_t row;
  int32_t local;
} jitops__segment_bucket_entry;

typedef struct jitops__segment_bucket_tile {
  int32_t bucket, first, end, tiles;
} jitops__segment_bucket_tile;

/* The max/min backward over grouped rows: the tie bits of a run that crosses chunks (bit
 * k * VEC + e of a lane's words is its column (k, e) of the tile: `once` where some row matched,
 * `twice` where two did), and where a chunk's tile lists its tied whole segments: `count[ct]`
 * entries (RUNS_TIED_LIST + 1: overflowed), `runs[ct][i]` = {segment, first position, end},
 * `bits[ct][i][lane]` the lanes' tie bits, ct = chunk * tiles + tile. */
typedef struct jitops__segment_tie_bits {
  uint32_t once, twice;
} jitops__segment_tie_bits;

typedef struct jitops__segment_tied_list {
  int32_t *count;
  int32_t *runs;
  uint32_t *bits;
} jitops__segment_tied_list;

/* ---- what the arguments are made of -------------------------------------------------------- */

/* Each 32-bit count sits alone in 8 bytes (`<name>_pad`, zero): NVVM loads adjacent 32-bit
 * members of a kernel's parameter as one vector and keeps them in registers through the kernel;
 * apart, each is read from the parameter bank where it is used. Measured over the validation
 * test's and the catalogue's 354 instances (ptxas, sm_90): spills grew in 4 instances instead of
 * 8, registers in 77 instead of 81. */

/* The call's segment ids: `rows` (N) of them, int32 or int64 (the kernel's I), `stride` apart,
 * for `segments` (S) segments. `ptr` is NULL where a kernel reads sorted keys instead. */
typedef struct jitops__segment_ids {
  const void *ptr;
  int64_t stride;
  int32_t rows, rows_pad;
  int32_t segments, segments_pad;
} jitops__segment_ids;

/* The caller's counter of ids >= S, int64 or int32, or neither (both NULL). */
typedef struct jitops__segment_counter {
  uint64_t *count64;
  uint32_t *count32;
} jitops__segment_counter;

/* The forward's tensors: `data` rows in, `out` rows out. */
typedef struct jitops__segment_forward_tensors {
  const void *data;
  int64_t data_stride;
  void *out;
  int64_t out_stride;
} jitops__segment_forward_tensors;

/* The backward's: `x` (the forward's data), `y` (its out) and `dy` (grad_out) in, `dx`
 * (grad_data) out. */
typedef struct jitops__segment_backward_tensors {
  const void *x;
  int64_t x_stride;
  const void *y;
  int64_t y_stride;
  const void *dy;
  int64_t dy_stride;
  void *dx;
  int64_t dx_stride;
} jitops__segment_backward_tensors;

/* What empty segments get (0 for sum and mean, the fill for max and min), in each accumulation
 * type: f64 for double data, f32 for the others. */
typedef struct jitops__segment_fill {
  double f64;
  float f32;
  int32_t unused;
} jitops__segment_fill;

/* ---- kernel arguments ---------------------------------------------------------------------- */

/* What changes from one radix pass to the next: its keys and values in (later passes; NULL
 * for the first, which reads the ids, and which the kernel tells by that NULL) and out, its digit
 * counts, its look-back words (and those it clears for the pass after next, or NULL), its tile
 * counter, and the shift of its digit. */
typedef struct jitops__segment_sort_pass {
  const int32_t *keys_in, *vals_in;
  int32_t *keys_out, *vals_out;
  const int32_t *hist;
  uint64_t *lookback, *lookback_clear;
  int32_t *tile_counter;
  int32_t shift, shift_pad;
} jitops__segment_sort_pass;

/* segment_sort_histogram and segment_sort_pass: the ids, the values the first pass carries
 * (rows of one column; else unused), `passes` passes of `bits` bits, every pass's digit counts
 * (`hist`, zeroed), and behind the digit path's flag (`fallback`, else NULL) the segment
 * bounds the histogram zeroes. */
typedef struct jitops__segment_sort_args {
  jitops__segment_ids ids;
  const void *data;
  int64_t data_stride;
  int32_t passes, passes_pad;
  int32_t bits, bits_pad;
  int32_t *hist;
  const int32_t *fallback;
  int32_t *seg_start, *seg_end;
  jitops__segment_sort_pass pass;
} jitops__segment_sort_args;

/* segment_reduce_chunks and segment_reduce_fixup: rows in segment order, from sorted ids
 * (`ids`) or the radix sort's keys and rows (`keys`, `perm`: the rows, or the carried values),
 * in `chunks` chunks of `chunk_rows` positions; `partials` holds two accumulator rows a chunk,
 * seg_start/seg_end each segment's bounds; the fixup's warps take `fixup_segments` segments. */
typedef struct jitops__segment_reduce_args {
  jitops__segment_forward_tensors tensors;
  jitops__segment_ids ids;
  const int32_t *keys, *perm;
  int32_t cols, cols_pad;
  int32_t chunk_rows, chunk_rows_pad;
  int32_t chunks, chunks_pad;
  int32_t fixup_segments, fixup_segments_pad;
  void *partials;
  int32_t *seg_start, *seg_end;
  const int32_t *fallback;
  jitops__segment_counter counter;
  jitops__segment_fill fill;
} jitops__segment_reduce_args;

/* segment_count_too_large: only counts the dropped ids (an empty output). */
typedef struct jitops__segment_count_args {
  jitops__segment_ids ids;
  jitops__segment_counter counter;
} jitops__segment_count_args;

/* segment_atomic_extreme and segment_atomic_finalize: the S x `cols` table of codes. */
typedef struct jitops__segment_atomic_args {
  jitops__segment_forward_tensors tensors;
  jitops__segment_ids ids;
  void *table;
  int32_t cols, cols_pad;
  jitops__segment_counter counter;
  jitops__segment_fill fill;
} jitops__segment_atomic_args;

/* segment_tile_sums and segment_tile_combine: `tiles` tiles sorted in `passes` passes of `bits`
 * bits, into the tiles x S table of sums (and of row counts for mean, else NULL). */
/* The narrow path: `table` holds S x D cells (max/min: order-preserving codes; sum/mean: 64-bit
 * fixed point, with `flags`, the non-finite marks, `counts`, the rows of each segment for mean,
 * and `block_max`, each prepare block's largest finite |x| as float bits, bit 31 set when the
 * block saw a non-finite value). The prepare pass zeroes `zeroed_words` 16-byte words from
 * `zeroed` (the table, the marks and the counts). */
typedef struct jitops__segment_narrow_args {
  jitops__segment_forward_tensors tensors;
  jitops__segment_ids ids;
  void *table;
  uint32_t *flags;
  uint32_t *counts;
  uint32_t *block_max;
  void *zeroed;
  int64_t zeroed_words;
  int32_t prepare_blocks, prepare_blocks_pad;
  jitops__segment_counter counter;
  jitops__segment_fill fill;
} jitops__segment_narrow_args;

typedef struct jitops__segment_tiles_args {
  jitops__segment_forward_tensors tensors;
  jitops__segment_ids ids;
  float *sums;
  int32_t *counts;
  int32_t passes, passes_pad;
  int32_t bits, bits_pad;
  int32_t tiles, tiles_pad;
  jitops__segment_counter counter;
} jitops__segment_tiles_args;

/* segment_bucket_count, _offsets, _scatter and _extreme: `buckets` buckets of
 * `bucket_segments` segments; `blocks` counting blocks of `block_rows` rows each (their counts
 * in the blocks x buckets `matrix`, the buckets' rows in `counts`, the reduction's tickets in
 * `done`); the entries, and the tiles of at most `tile_rows` rows (`tile_count` of them). */
typedef struct jitops__segment_bucket_args {
  jitops__segment_forward_tensors tensors;
  jitops__segment_ids ids;
  int32_t cols, cols_pad;
  int32_t bucket_segments, bucket_segments_pad;
  int32_t buckets, buckets_pad;
  int32_t block_rows, block_rows_pad;
  int32_t tile_rows, tile_rows_pad;
  int32_t blocks, blocks_pad;
  int32_t *matrix, *counts;
  uint32_t *done;
  jitops__segment_bucket_entry *entries;
  jitops__segment_bucket_tile *tiles;
  int32_t *tile_count;
  jitops__segment_counter counter;
  jitops__segment_fill fill;
} jitops__segment_bucket_args;

/* segment_digit_scatter and segment_digit_reduce: `parts` parts of 2^part_log2 segments, each
 * with its rows' count (`part_rows`, zeroed) and its region of DIGIT_CAP entries; `fallback`
 * (zeroed) goes up when a region overflows. */
typedef struct jitops__segment_digit_args {
  jitops__segment_forward_tensors tensors;
  jitops__segment_ids ids;
  int32_t cols, cols_pad;
  int32_t part_log2, part_log2_pad;
  int32_t parts, parts_pad;
  int32_t *part_rows;
  void *entries;
  int32_t *fallback;
  jitops__segment_counter counter;
  jitops__segment_fill fill;
} jitops__segment_digit_args;

/* The sum and mean backward: segment_count_rows, segment_offsets (`counts` holds S + 1
 * offsets of sorted ids) and segment_backward_gather. */
typedef struct jitops__segment_gather_args {
  jitops__segment_backward_tensors tensors; /* dy and dx */
  jitops__segment_ids ids;
  int32_t *counts;
  int32_t cols, cols_pad;
} jitops__segment_gather_args;

/* The max/min backward by a tie table: segment_backward_extreme_mark and _split over `x`
 * (data), `y` (out), `dy` and `dx`; `ties` holds S x cols counts and then the tie flag
 * (`tie_flag`), `first_row` (first occurrence, else NULL) S x cols rows. */
typedef struct jitops__segment_extreme_args {
  jitops__segment_backward_tensors tensors;
  jitops__segment_ids ids;
  int32_t *ties, *first_row, *tie_flag;
  int32_t cols, cols_pad;
} jitops__segment_extreme_args;

/* The max/min backward over grouped rows: segment_backward_runs_mark and _fix over rows in
 * segment order (as jitops__segment_reduce_args), with the crossing runs' tie bits
 * ([chunks][2][tiles][lanes]), the segment each chunk owns (`owned`, -1 for none) and where it
 * starts, each crossing segment's end, and the chunks' lists of tied whole segments. */
typedef struct jitops__segment_runs_args {
  jitops__segment_backward_tensors tensors;
  jitops__segment_ids ids;
  const int32_t *keys, *perm;
  int32_t cols, cols_pad;
  int32_t chunk_rows, chunk_rows_pad;
  int32_t chunks, chunks_pad;
  jitops__segment_tie_bits *bits;
  int32_t *owned, *own_start, *seg_end;
  jitops__segment_tied_list tied;
} jitops__segment_runs_args;

/* ---- layout checks ------------------------------------------------------------------------- */

JITOPS__ABI_SIZE(jitops__segment_bucket_entry, 8);
JITOPS__ABI_SIZE(jitops__segment_bucket_tile, 16);
JITOPS__ABI_SIZE(jitops__segment_tie_bits, 8);
JITOPS__ABI_SIZE(jitops__segment_tied_list, 24);
JITOPS__ABI_OFFSET(jitops__segment_ids, rows, 16);
JITOPS__ABI_SIZE(jitops__segment_ids, 32);
JITOPS__ABI_SIZE(jitops__segment_counter, 16);
JITOPS__ABI_OFFSET(jitops__segment_fill, f32, 8);
JITOPS__ABI_SIZE(jitops__segment_fill, 16);
JITOPS__ABI_SIZE(jitops__segment_forward_tensors, 32);
JITOPS__ABI_OFFSET(jitops__segment_backward_tensors, dx, 48);
JITOPS__ABI_SIZE(jitops__segment_backward_tensors, 64);
JITOPS__ABI_OFFSET(jitops__segment_sort_pass, shift, 64);
JITOPS__ABI_SIZE(jitops__segment_sort_pass, 72);
JITOPS__ABI_OFFSET(jitops__segment_sort_args, passes, 48);
JITOPS__ABI_OFFSET(jitops__segment_sort_args, pass, 96);
JITOPS__ABI_SIZE(jitops__segment_sort_args, 168);
JITOPS__ABI_OFFSET(jitops__segment_reduce_args, ids, 32);
JITOPS__ABI_OFFSET(jitops__segment_reduce_args, cols, 80);
JITOPS__ABI_OFFSET(jitops__segment_reduce_args, counter, 144);
JITOPS__ABI_SIZE(jitops__segment_reduce_args, 176);
JITOPS__ABI_SIZE(jitops__segment_count_args, 48);
JITOPS__ABI_OFFSET(jitops__segment_atomic_args, cols, 72);
JITOPS__ABI_SIZE(jitops__segment_atomic_args, 112);
JITOPS__ABI_OFFSET(jitops__segment_narrow_args, table, 64);
JITOPS__ABI_OFFSET(jitops__segment_narrow_args, prepare_blocks, 112);
JITOPS__ABI_SIZE(jitops__segment_narrow_args, 152);
JITOPS__ABI_OFFSET(jitops__segment_tiles_args, passes, 80);
JITOPS__ABI_SIZE(jitops__segment_tiles_args, 120);
JITOPS__ABI_OFFSET(jitops__segment_bucket_args, matrix, 112);
JITOPS__ABI_OFFSET(jitops__segment_bucket_args, counter, 160);
JITOPS__ABI_SIZE(jitops__segment_bucket_args, 192);
JITOPS__ABI_OFFSET(jitops__segment_digit_args, part_rows, 88);
JITOPS__ABI_SIZE(jitops__segment_digit_args, 144);
JITOPS__ABI_OFFSET(jitops__segment_gather_args, counts, 96);
JITOPS__ABI_SIZE(jitops__segment_gather_args, 112);
JITOPS__ABI_OFFSET(jitops__segment_extreme_args, ids, 64);
JITOPS__ABI_OFFSET(jitops__segment_extreme_args, cols, 120);
JITOPS__ABI_SIZE(jitops__segment_extreme_args, 128);
JITOPS__ABI_OFFSET(jitops__segment_runs_args, keys, 96);
JITOPS__ABI_OFFSET(jitops__segment_runs_args, bits, 136);
JITOPS__ABI_OFFSET(jitops__segment_runs_args, tied, 168);
JITOPS__ABI_SIZE(jitops__segment_runs_args, 192);

#endif
