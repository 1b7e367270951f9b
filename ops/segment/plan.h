/* Planning a segment call: which algorithm (path) runs, how a row's columns map onto lanes,
 * how the positions are chunked, how many radix passes the ids need, every launch's grid, and
 * where each scratch buffer lives. Pure host arithmetic on a validated call and the device's
 * properties, no GPU: the workspace-size queries and the prewarm catalogue reach the same
 * decisions as the calls. */
#ifndef JITOPS_OPS_SEGMENT_PLAN_H
#define JITOPS_OPS_SEGMENT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitops/segment.h"
#include "ops/segment/segment_abi.h"
#include "runtime/op_support.h"

/* A tensor of rows, [rows, cols] once its trailing dims are flattened. */
typedef struct jitops__segment_rows {
  void *ptr;      /* first element */
  int64_t stride; /* elements between consecutive rows */
} jitops__segment_rows;

/* What a valid call hands the planner (args.c fills it). Forward: `data` -> `out`. Backward:
 * `dy` (grad_out), `x` (data), `y` (out) -> `dx` (grad_data). */
typedef struct jitops__segment_call {
  const char *fn;
  bool backward;
  jitops_segment_reduction reduction;
  jitops__dtype dtype;
  jitops__dtype id_dtype;
  int64_t rows;     /* N */
  int64_t cols;     /* D */
  int64_t segments; /* S */
  bool sorted;
  bool first_occurrence;
  double empty_value; /* what empty segments get: 0, or the max/min fill */
  jitops_segment_algorithm algorithm;
  jitops__segment_rows data, out;    /* forward */
  jitops__segment_rows dy, x, y, dx; /* backward */
  const void *ids;                   /* device ids (NULL when they are in host memory) */
  int64_t id_stride;
  const DLTensor *host_ids; /* host ids to copy into the workspace, else NULL */
  void *counter;            /* the dropped-id counter, or NULL */
  bool counter64;
  int vec_max; /* the widest packed access all row tensors allow, in elements */
} jitops__segment_call;

/* How a row's D columns map onto lanes: `lanes` lanes a row, each `vec` consecutive columns an
 * access, `cpl` accesses kept in registers (the kernels' VEC, G and CPL). */
typedef struct jitops__segment_layout {
  int vec;
  int lanes;
  int cpl;
} jitops__segment_layout;

typedef enum jitops__segment_path {
  JITOPS__SEGMENT_PATH_EMPTY,      /* empty output: at most count the dropped ids */
  JITOPS__SEGMENT_PATH_SORT,       /* unsorted ids: radix sort, chunked reduction, fixup */
  JITOPS__SEGMENT_PATH_BOUNDARIES, /* sorted ids: chunked reduction, fixup */
  JITOPS__SEGMENT_PATH_ATOMIC,     /* max/min: integer atomics into a code table, finalize */
  JITOPS__SEGMENT_PATH_TILES,      /* one column, sum/mean, few segments: per-tile sorts, sums */
  JITOPS__SEGMENT_PATH_BUCKETS,    /* max/min, many segments: rows into buckets, shared atomics */
  JITOPS__SEGMENT_PATH_DIGIT,      /* sum/mean, many segments: rows scattered into parts of
                                      segments, a block a part, the full sort behind a flag */
  JITOPS__SEGMENT_PATH_NARROW      /* rows of at most 8 columns, many segments: integer atomics
                                      over the elements into a global table (max/min: codes;
                                      sum/mean: 64-bit fixed point), then a finalize pass */
} jitops__segment_path;

typedef struct jitops__segment_forward_plan {
  jitops__segment_path path;
  jitops__segment_layout layout;
  /* Grids: the empty path's count, the atomic path's finalize, the chunked reduction and its
   * fixup (whose warps take fixup_segments segments each), the tiles' combine. */
  uint32_t count_blocks, finalize_blocks, reduce_blocks, fixup_blocks, combine_blocks;
  int fixup_segments;
  int64_t chunk_rows; /* CH */
  int64_t chunks;
  int sort_passes;
  int sort_bits; /* bits a pass */
  int64_t sort_tiles;
  uint32_t hist_blocks;
  bool sort_carry; /* the sort carries the values (one column) instead of row indices */
  bool atomic_shared;
  uint32_t atomic_blocks;
  size_t code_size;  /* 4 or 8 bytes a code (atomic and bucket tables) */
  size_t code_table; /* the atomic path's S x D table, in bytes */
  /* JITOPS__SEGMENT_PATH_BUCKETS: P segments a bucket, B buckets, tiles of at most
   * bucket_tile_rows rows (bucket_tiles_max: the most tiles any ids can make, the reduction's
   * grid), the counting and scattering passes' blocks, each taking bucket_block_rows
   * consecutive rows, the offsets pass's blocks, and the reduction's table bytes. */
  int64_t bucket_segments, buckets, bucket_tile_rows, bucket_tiles_max, bucket_block_rows;
  uint32_t bucket_blocks, bucket_offsets_blocks, bucket_table;
  /* JITOPS__SEGMENT_PATH_DIGIT: parts of 2^digit_part_log2 segments, digit_parts of them (a
   * block each of the reduction, with digit_shared bytes of shared memory), digit_scatter_blocks
   * scatter blocks; the entry list holds JITOPS__SEGMENT_DIGIT_CAP entries a part. The full sort
   * and the chunked reduction run instead when some part gets more (the fallback flag). */
  int digit_part_log2;
  uint32_t digit_parts, digit_scatter_blocks, digit_shared;
  /* JITOPS__SEGMENT_PATH_NARROW: the grids of the fixed-point prepare pass (sum/mean), of the
   * atomic pass over the elements and of the finalize pass over the cells. The table is at
   * `codes` (code_table bytes); sum/mean add the non-finite marks, the counts (mean) and the
   * prepare blocks' words. */
  uint32_t narrow_prepare_blocks, narrow_blocks, narrow_finalize_blocks;
  size_t narrow_flags, narrow_counts, narrow_block_max;
  /* max/min: the code table is the output itself (codes as wide as its elements, rows packed,
   * no overlap with the inputs), decoded in place; `codes` is then unused. */
  bool narrow_in_place;
  /* Byte offsets into the scratch memory. [zeroed, zeroed + zeroed_bytes) is cleared by one
   * memset first: the segment bounds (not on the digit path), the sort's digit counts, tile
   * counters and look-back words, and the digit path's part counts and flag. */
  size_t ids_copy, seg_start, seg_end, hist, tile_counters, lookback[2], keys[2], vals[2], partials,
      codes, tile_sums, tile_counts, digit_fill, digit_fallback, digit_entries;
  size_t bucket_matrix, bucket_counts, bucket_done, bucket_tiles, bucket_tile_count, bucket_entries;
  size_t zeroed, zeroed_bytes;
  size_t workspace_bytes;
} jitops__segment_forward_plan;

typedef struct jitops__segment_backward_plan {
  jitops__segment_layout layout;
  int rows_in_flight;   /* max/min: rows a lane group takes at a time (the mark pass's RF) */
  uint32_t rows_blocks; /* the grid of the kernels over rows (gather, mark) */
  uint32_t split_blocks, offsets_blocks, runs_mark_blocks, runs_fix_blocks;
  /* max/min with sorted ids or a large S x D table: over rows grouped by segment (the
   * forward's sort or the boundaries of sorted ids) instead of a tie table. `grouped` holds
   * that sort's plan and layout (its chunks, seg_end, and in `partials` the crossing runs' tie
   * bits); `runs_cpl` the accesses a lane takes a column tile. */
  bool runs;
  int runs_cpl;
  jitops__segment_forward_plan grouped;
  size_t owned, own_start;
  /* The tied whole segments each chunk lists a column tile: a count, then {segment, start,
   * end} and the lanes' tie bits of each (jitops__segment_tied_list). */
  size_t tied_count, tied_runs, tied_bits;
  bool count_shared;     /* mean, unsorted: shared-memory row counts */
  uint32_t count_blocks; /* and their grid */
  size_t count_table;    /* mean, unsorted: S row counts, in bytes */
  /* Scratch offsets; `ties` holds S x D counts and then the tie flag (tie_cells of them). */
  size_t ids_copy, counts, ties, first_row;
  size_t tie_cells;
  size_t workspace_bytes;
} jitops__segment_backward_plan;

/* The plans of a valid call. Fail with JITOPS_ERR_OUT_OF_RANGE, naming num_segments and the row
 * length, when the workspace would not fit in size_t. */
jitops_status jitops__segment_plan_forward(const jitops__device_props *props,
                                           const jitops__segment_call *call,
                                           jitops__segment_forward_plan *plan);
jitops_status jitops__segment_plan_backward(const jitops__device_props *props,
                                            const jitops__segment_call *call,
                                            jitops__segment_backward_plan *plan);

/* ---- what the two plans share (plan.c for plan_backward.c) --------------------------------- */

/* Shared-memory tables (the atomic path's S x D codes, the mean backward's S row counts): at
 * most SHARED_TABLE_BYTES a block, and only where each block brings at least
 * SHARED_ELEMENTS_PER_CELL row elements a cell (it initializes and merges every cell once). */
#define JITOPS__SEGMENT_SHARED_TABLE_BYTES       (48 * 1024)
#define JITOPS__SEGMENT_SHARED_ELEMENTS_PER_CELL 16

/* Where the next scratch buffer goes: `end` so far, and whether a size overflowed. */
typedef struct jitops__segment_scratch_cursor {
  size_t end;
  bool overflow;
} jitops__segment_scratch_cursor;

/* Reserves `count` items of `size` bytes, 256-byte aligned; returns their offset. */
size_t jitops__segment_take(jitops__segment_scratch_cursor *cursor, size_t count, size_t size);

/* Fails with JITOPS_ERR_OUT_OF_RANGE when the cursor overflowed; else sets *bytes. */
jitops_status jitops__segment_scratch_total(const jitops__segment_call *call,
                                            const jitops__segment_scratch_cursor *cursor,
                                            size_t *bytes);

jitops__segment_layout jitops__segment_choose_layout(int64_t cols, int vec_max);

/* A grid for `work` groups of `lanes` lanes, JITOPS__SEGMENT_THREADS threads a block, capped at
 * `per_sm` blocks an SM (grid-stride loops cover the rest). */
uint32_t jitops__segment_grid(const jitops__device_props *props, int64_t work, int lanes,
                              int per_sm);

/* The SMs to plan for: the device's, or a typical GPU's for compile-only runtimes. */
int64_t jitops__segment_sm_count(const jitops__device_props *props);

/* The bytes of the accumulation type of `dtype`. */
size_t jitops__segment_acc_size(jitops__dtype dtype);

/* The radix sort, the chunks and the scratch of the grouped rows, with `threads_per_sm`
 * threads of the reduction an SM and `partial_bytes` a chunk (the forward's two partial rows,
 * or the backward's tie bits). */
void jitops__segment_plan_grouped(const jitops__device_props *props,
                                  const jitops__segment_call *call, int64_t threads_per_sm,
                                  size_t partial_bytes, jitops__segment_forward_plan *plan,
                                  jitops__segment_scratch_cursor *cursor);

#endif
