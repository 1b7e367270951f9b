/* What the segment family's host files share: the validated call, the plan (algorithm,
 * column layout, chunking, radix passes, workspace layout), and the kernels a plan uses.
 *
 * The flow of an entry point: segment_args.c validates every argument into a seg_call;
 * segment_plan.c turns the call into a plan (pure arithmetic, no device work, so the
 * workspace-size queries and the prewarm catalogue use it too); segment_kernels.c gets every
 * kernel the plan needs; segment_forward.c / segment_backward.c launch them. */
#ifndef JITOPS_OPS_SEGMENT_INTERNAL_H
#define JITOPS_OPS_SEGMENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitops/segment.h"
#include "runtime/op_support.h"

/* Positions are int in the kernels, and a radix tile may run 64 Ki past the last row. */
#define SEG_MAX_ROWS ((int64_t)INT32_MAX - 65536)
/* Radix keys go up to S + 1 and offsets have S + 1 entries, all int. */
#define SEG_MAX_SEGMENTS ((int64_t)INT32_MAX - 1)
/* Match templates/segment_sort.cuh. */
#define SEG_SORT_TILE       4096
#define SEG_SORT_THREADS    256
#define SEG_SORT_RADIX_BITS 8
#define SEG_SORT_RADIX_MAX  256
#define SEG_SORT_PASSES_MAX 4
#define SEG_HIST_ROWS       (SEG_SORT_THREADS * 16) /* rows a histogram block takes at a time */
/* Threads a block of the max/min backward's mark pass (RUNS_THREADS in
 * templates/segment_backward_runs.cuh). */
#define SEG_RUNS_THREADS 256
/* Tied whole segments a chunk's column tile lists for the backward's fix pass (TIED_LIST). */
#define SEG_RUNS_TIED_LIST 4
/* Shared memory a block may use for the atomic path's and the row counts' local tables. */
#define SEG_SHARED_TABLE_BYTES (48 * 1024)
/* The digit path (templates/segment_digit.cuh): threads a block of the reduction, its most
 * segments and rows a part (DIGIT_THREADS, DIGIT_PART_SEGMENTS_MAX, DIGIT_CAP), the most parts
 * (DIGIT_PARTS_MAX), and the scatter's threads, rows and shared bytes a block (SCATTER_THREADS,
 * SCATTER_TILE, SCATTER_SHARED). */
#define SEG_DIGIT_THREADS           256
#define SEG_DIGIT_PART_SEGMENTS_MAX 1024
#define SEG_DIGIT_CAP               2048
#define SEG_DIGIT_PARTS_MAX         4096
#define SEG_DIGIT_SCATTER_THREADS   1024
#define SEG_DIGIT_SCATTER_TILE      (SEG_DIGIT_SCATTER_THREADS * 8)
#define SEG_DIGIT_SCATTER_SHARED    ((2 * SEG_DIGIT_PARTS_MAX + 4) * 4 + SEG_DIGIT_SCATTER_TILE * 8)
/* Threads a block of the bucket kernels (BUCKET_THREADS in templates/segment_buckets.cuh), and
 * of their counting and scattering passes (COUNTING_THREADS). */
#define SEG_BUCKET_THREADS          256
#define SEG_BUCKET_COUNTING_THREADS 1024
/* Buckets a block of the bucket offsets pass (OFFSETS_BUCKETS). */
#define SEG_BUCKET_OFFSETS_BUCKETS 64

/* A tensor of rows, [rows, cols] after flattening the trailing dims. */
typedef struct seg_rows {
  void *ptr;      /* first element */
  int64_t stride; /* elements between consecutive rows */
} seg_rows;

/* One validated call. Forward: `data` -> `out`. Backward: `dy` (grad_out), `x` (data),
 * `y` (out) -> `dx` (grad_data). */
typedef struct seg_call {
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
  seg_rows data, out;    /* forward */
  seg_rows dy, x, y, dx; /* backward */
  const void *ids;       /* device ids (NULL when they are in host memory) */
  int64_t id_stride;
  const DLTensor *host_ids; /* host ids to copy into the workspace, else NULL */
  void *counter;            /* the dropped-id counter, or NULL */
  bool counter64;
  int vec_max; /* the widest packed access all row tensors allow, in elements */
} seg_call;

/* How a row's D columns map onto lanes: G lanes per row, each VEC consecutive columns per
 * access, CPL accesses kept in registers (forward reduction). */
typedef struct seg_layout {
  int vec;
  int lanes;
  int cpl;
} seg_layout;

typedef enum seg_path {
  SEG_PATH_EMPTY,      /* empty output: at most count the dropped ids */
  SEG_PATH_SORT,       /* unsorted ids: radix sort, chunked reduction, fixup */
  SEG_PATH_BOUNDARIES, /* sorted ids: chunked reduction, fixup */
  SEG_PATH_ATOMIC,     /* max/min: integer atomics into a code table, then finalize */
  SEG_PATH_TILES,      /* one column, sum/mean, few segments: per-tile sorts and sums */
  SEG_PATH_BUCKETS,    /* max/min, many segments: rows into buckets, shared atomics a bucket */
  SEG_PATH_DIGIT       /* sum/mean, many segments: rows scattered into parts of segments, a block
                          a part, the full sort behind a flag (templates/segment_digit.cuh) */
} seg_path;

typedef struct seg_forward_plan {
  seg_path path;
  seg_layout layout;
  int64_t chunk_rows; /* CH */
  int64_t chunks;
  int sort_passes;
  int sort_bits; /* bits per pass */
  int64_t sort_tiles;
  uint32_t hist_blocks;
  bool sort_carry; /* the sort carries the values (one column) instead of row indices */
  bool atomic_shared;
  uint32_t atomic_blocks;
  size_t code_size; /* 4 or 8 bytes per atomic table cell */
  /* SEG_PATH_BUCKETS: P segments a bucket, B buckets, tiles of at most bucket_tile_rows rows
   * (bucket_tiles_max: the most tiles any ids can make, the reduction's grid), and the counting
   * and scattering passes' blocks, each taking bucket_block_rows consecutive rows. */
  int64_t bucket_segments, buckets, bucket_tile_rows, bucket_tiles_max, bucket_block_rows;
  uint32_t bucket_blocks;
  size_t bucket_matrix, bucket_counts, bucket_done, bucket_tiles, bucket_tile_count, bucket_entries;
  /* SEG_PATH_DIGIT: parts of 2^digit_part_log2 segments, digit_parts of them (a block each of
   * the reduction, with digit_shared bytes of shared memory), digit_scatter_blocks scatter
   * blocks; the entry list holds SEG_DIGIT_CAP entries a part. The full sort and the chunked
   * reduction run instead when some part gets more (the fallback flag). */
  int digit_part_log2;
  uint32_t digit_parts, digit_scatter_blocks, digit_shared;
  /* Byte offsets into the scratch memory. [zeroed, zeroed + zeroed_bytes) is cleared by one
   * memset first: the segment bounds (not on the digit path), the sort's digit counts, tile
   * counters and look-back words, and the digit path's part counts and flag. */
  size_t ids_copy, seg_start, seg_end, hist, tile_counters, lookback[2], keys[2], vals[2], partials,
      codes, tile_sums, tile_counts, digit_fill, digit_fallback, digit_entries;
  size_t zeroed, zeroed_bytes;
  size_t workspace_bytes;
} seg_forward_plan;

typedef struct seg_backward_plan {
  seg_layout layout;
  int rows_in_flight; /* max/min: rows a lane group takes at a time (RF) */
  /* max/min with sorted ids or a large S x D table: over rows grouped by segment (the
   * forward's sort or the boundaries of sorted ids) instead of a tie table. `grouped` holds
   * that sort's plan and layout (its chunks, seg_end, and in `partials` the crossing runs' tie
   * bits); `runs_cpl` the accesses a lane takes per column tile. */
  bool runs;
  int runs_cpl;
  seg_forward_plan grouped;
  size_t owned, own_start;
  /* The tied whole segments each chunk lists per column tile (TIED_LIST in the template): a
   * count, then {segment, start, end} and the lanes' tie bits of each. */
  size_t tied_count, tied_runs, tied_bits;
  bool count_shared;     /* mean, unsorted: shared-memory row counts */
  uint32_t count_blocks; /* and their grid */
  /* Scratch offsets; `ties` holds S x D counts and then the tie flag. */
  size_t ids_copy, counts, ties, first_row;
  size_t workspace_bytes;
} seg_backward_plan;

/* ---- segment_args.c ---------------------------------------------------------------------- */

jitops_status jitops__segment_check_forward(const char *fn, jitops_runtime_t *runtime,
                                            jitops_segment_reduction reduction,
                                            const DLTensor *data, const DLTensor *segment_ids,
                                            int64_t num_segments, const DLTensor *out,
                                            const jitops_segment_options *options, seg_call *call);

jitops_status jitops__segment_check_backward(const char *fn, jitops_runtime_t *runtime,
                                             jitops_segment_reduction reduction,
                                             const DLTensor *grad_out, const DLTensor *data,
                                             const DLTensor *out, const DLTensor *segment_ids,
                                             int64_t num_segments, const DLTensor *grad_data,
                                             const jitops_segment_options *options, seg_call *call);

/* A workspace is optional, but one with bytes must have a pointer. */
jitops_status jitops__segment_check_workspace(const char *fn, const jitops_workspace *workspace);

/* Copies host ids (call->host_ids) to `device_copy` on `stream`, compacted. */
jitops_status jitops__segment_upload_host_ids(jitops_runtime_t *runtime, const seg_call *call,
                                              void *device_copy, void *stream);

/* ---- segment_plan.c ---------------------------------------------------------------------- */

seg_layout jitops__segment_choose_layout(int64_t cols, int vec_max);
void jitops__segment_plan_forward(const jitops__device_props *props, const seg_call *call,
                                  seg_forward_plan *plan);
void jitops__segment_plan_backward(const jitops__device_props *props, const seg_call *call,
                                   seg_backward_plan *plan);
/* A grid of `blocks` for `work` groups of `lanes` lanes, 256 threads a block, capped at
 * `per_sm` blocks per SM (grid-stride loops cover the rest). */
uint32_t jitops__segment_grid(const jitops__device_props *props, int64_t work, int lanes,
                              int per_sm);
/* How many consecutive segments (<= 32, or 128) one warp of segment_reduce_fixup looks after. */
int jitops__segment_fixup_segments_per_warp(int lanes, int64_t segments, int64_t chunks);

/* ---- segment_kernels.c ------------------------------------------------------------------- */

typedef struct seg_forward_kernels {
  jitops_kernel_t *histogram, *pass_first, *pass;
  jitops_kernel_t *reduce, *fixup;
  jitops_kernel_t *atomic, *finalize;
  jitops_kernel_t *tile_sums, *tile_combine;
  jitops_kernel_t *bucket_count, *bucket_offsets, *bucket_scatter, *bucket_extreme;
  jitops_kernel_t *digit_scatter, *digit_reduce;
  jitops_kernel_t *count_too_large;
} seg_forward_kernels;

typedef struct seg_backward_kernels {
  jitops_kernel_t *offsets, *count_rows; /* mean */
  jitops_kernel_t *gather;               /* sum, mean */
  jitops_kernel_t *mark, *split;         /* max, min by a tie table */
  jitops_kernel_t *histogram, *pass_first, *pass, *runs_mark, *runs_fix; /* max, min by runs */
} seg_backward_kernels;

jitops_status jitops__segment_get_forward_kernels(jitops_runtime_t *runtime, const seg_call *call,
                                                  const seg_forward_plan *plan,
                                                  seg_forward_kernels *out);
jitops_status jitops__segment_get_backward_kernels(jitops_runtime_t *runtime, const seg_call *call,
                                                   const seg_backward_plan *plan,
                                                   seg_backward_kernels *out);

/* The radix sort's kernels: the digit histogram, the first pass and the later passes. */
typedef struct seg_sort_kernels {
  const jitops_kernel_t *histogram, *pass_first, *pass;
} seg_sort_kernels;

/* ---- segment_forward.c ------------------------------------------------------------------- */

/* Sorts the ids by the plan's radix passes on `stream` (the plan's zeroed range cleared
 * before); `data` is read only when the plan carries values. Returns the sorted keys and rows
 * (or values). On the digit path every kernel follows the digit reduction and runs only when
 * the fallback flag is up. */
jitops_status jitops__segment_run_radix_sort(const seg_forward_plan *plan,
                                             const seg_sort_kernels *k, char *scratch,
                                             const void *ids, int64_t id_stride, const void *data,
                                             int64_t data_stride, int32_t N, int32_t S,
                                             void *stream, const int32_t **keys,
                                             const int32_t **vals);

/* jitops__launch of a 1-D grid, and jitops__launch_after of one (for a kernel that calls
 * wait_for_previous_grid first and follows another kernel). */
jitops_status jitops__segment_launch(const jitops_kernel_t *kernel, uint32_t blocks,
                                     uint32_t threads, uint32_t shared_bytes, void *stream,
                                     void **args);
jitops_status jitops__segment_launch_after(const jitops_kernel_t *kernel, uint32_t blocks,
                                           uint32_t threads, uint32_t shared_bytes, void *stream,
                                           void **args);

#endif
