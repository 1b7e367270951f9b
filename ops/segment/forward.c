/* jitops_segment_reduce: validate, plan, get the kernels, then launch one of
 *   sort:       clear -> digit histogram -> radix passes -> chunks -> fixup
 *   boundaries: clear -> chunks -> fixup                        (sorted ids)
 *   tiles:      per-tile sorts and sums -> combine              (one column, sum/mean)
 *   atomic:     clear the code table -> atomic pass -> finalize  (max/min)
 *   buckets:    count -> offsets -> layout and scatter -> reduce a tile a block
 *               (max/min)
 *   digit:      clear -> scatter into parts -> a block a part -> [digit histogram -> radix
 *               passes -> chunks -> fixup]      (sum/mean; [...] only when a part overflows)
 *   empty:      count the dropped ids, if asked                 (S = 0 or D = 0)
 * all on the caller's stream, with scratch from the workspace or stream-ordered memory. */
#include <string.h>

#include "ops/segment/internal.h"

/* Everything a launch sequence needs, resolved once. */
typedef struct fwd_ctx {
  jitops_runtime_t *runtime;
  const seg_call *call;
  const seg_forward_plan *plan;
  const seg_forward_kernels *k;
  const jitops__device_props *props;
  char *scratch;
  void *stream;
  const void *ids;
  int64_t id_stride;
  unsigned long long *c64;
  unsigned *c32;
  int32_t N, S, D;
  /* What empty segments get (0, or the max/min fill), in the accumulation type: `empty` points
   * at empty32 or empty64. */
  float empty32;
  double empty64;
  const void *empty;
} fwd_ctx;

static jitops_status run_empty(const fwd_ctx *c) {
  if (c->k->count_too_large == NULL)
    return JITOPS_SUCCESS;
  void *args[] = {(void *)&c->ids, (void *)&c->id_stride, (void *)&c->N,
                  (void *)&c->S,   (void *)&c->c64,       (void *)&c->c32};
  return jitops__segment_launch(c->k->count_too_large, jitops__segment_grid(c->props, c->N, 1, 8),
                                256, 0, c->stream, args);
}

/* The digit counts of every pass, then one stable counting pass per `bits` bits of the keys;
 * returns the final keys and rows (or values). The counters and look-back words are zeroed.
 * On the digit path every kernel follows the digit reduction and runs only when the fallback
 * flag is up; its histogram then also zeroes the segment bounds. */
jitops_status jitops__segment_run_radix_sort(const seg_forward_plan *p, const seg_sort_kernels *k,
                                             char *scratch, const void *ids, int64_t id_stride,
                                             const void *data, int64_t data_stride, int32_t N,
                                             int32_t S, void *stream, const int32_t **keys,
                                             const int32_t **vals) {
  int32_t *hist = (int32_t *)(scratch + p->hist);
  int32_t *counters = (int32_t *)(scratch + p->tile_counters);
  const int32_t passes = p->sort_passes, bits = p->sort_bits;
  const bool digit = p->path == SEG_PATH_DIGIT;
  const int32_t *fallback = digit ? (const int32_t *)(scratch + p->digit_fallback) : NULL;
  int32_t *seg_start = digit ? (int32_t *)(scratch + p->seg_start) : NULL;
  int32_t *seg_end = digit ? (int32_t *)(scratch + p->seg_end) : NULL;
  void *hist_args[] = {(void *)&ids,       (void *)&id_stride, (void *)&N,    (void *)&S,
                       (void *)&passes,    (void *)&bits,      (void *)&hist, (void *)&fallback,
                       (void *)&seg_start, (void *)&seg_end};
  JITOPS__TRY((digit ? jitops__segment_launch_after : jitops__segment_launch)(
      k->histogram, p->hist_blocks, SEG_SORT_THREADS, 0, stream, hist_args));
  const int32_t *keys_in = NULL, *vals_in = NULL;
  for (int pass = 0; pass < passes; ++pass) {
    const int32_t shift = pass * bits;
    int32_t *keys_out = (int32_t *)(scratch + p->keys[pass % 2]);
    int32_t *vals_out = (int32_t *)(scratch + p->vals[pass % 2]);
    const bool first = pass == 0;
    const void *pass_ids = first ? ids : NULL;
    const int64_t pass_id_stride = first ? id_stride : 0;
    const void *pass_data = first ? data : NULL;
    const int64_t pass_data_stride = first ? data_stride : 0;
    const int32_t *pass_hist = hist + pass * SEG_SORT_RADIX_MAX;
    uint64_t *lookback = (uint64_t *)(scratch + p->lookback[pass % 2]);
    /* The other set was zeroed by the memset for pass 1; later passes are cleared by the pass
     * before them. */
    uint64_t *clear =
        pass >= 1 && pass + 1 < passes ? (uint64_t *)(scratch + p->lookback[(pass + 1) % 2]) : NULL;
    int32_t *counter = counters + pass;
    void *args[] = {
        (void *)&pass_ids, (void *)&pass_id_stride, (void *)&pass_data, (void *)&pass_data_stride,
        (void *)&keys_in,  (void *)&vals_in,        (void *)&N,         (void *)&S,
        (void *)&shift,    (void *)&bits,           (void *)&pass_hist, (void *)&lookback,
        (void *)&clear,    (void *)&counter,        (void *)&keys_out,  (void *)&vals_out,
        (void *)&fallback};
    JITOPS__TRY(jitops__segment_launch_after(first ? k->pass_first : k->pass,
                                             (uint32_t)p->sort_tiles, SEG_SORT_THREADS, 0, stream,
                                             args));
    keys_in = keys_out;
    vals_in = vals_out;
  }
  *keys = keys_in;
  *vals = vals_in;
  return JITOPS_SUCCESS;
}

/* chunked reduction -> fixup, over sorted ids (keys NULL) or sorted keys; the segment bounds
 * are zeroed. With `fallback` (the digit path), both run only when that flag is up, and the
 * dropped ids are left to the digit path's scatter, which counts them on every call. */
static jitops_status run_grouped(const fwd_ctx *c, const int32_t *keys, const int32_t *perm,
                                 const int32_t *fallback) {
  const seg_forward_plan *p = c->plan;
  const seg_call *call = c->call;
  const bool sorted_ids = keys == NULL && c->plan->path == SEG_PATH_BOUNDARIES;
  const void *ids = sorted_ids ? c->ids : NULL;
  const int64_t id_stride = sorted_ids ? c->id_stride : 0;
  int32_t *seg_start = (int32_t *)(c->scratch + p->seg_start);
  int32_t *seg_end = (int32_t *)(c->scratch + p->seg_end);
  void *partials = c->scratch + p->partials;

  const int32_t CH = (int32_t)p->chunk_rows, chunks = (int32_t)p->chunks;
  const void *data = call->data.ptr;
  void *out = call->out.ptr;
  /* Both kernels write empty segments: short gaps, or the rest. */
  const void *empty = c->empty;
  unsigned long long *c64 = fallback != NULL ? NULL : c->c64;
  unsigned *c32 = fallback != NULL ? NULL : c->c32;
  if (chunks > 0) {
    void *red_args[] = {(void *)&data,
                        (void *)&call->data.stride,
                        (void *)&c->D,
                        (void *)&ids,
                        (void *)&id_stride,
                        (void *)&keys,
                        (void *)&perm,
                        (void *)&c->N,
                        (void *)&c->S,
                        (void *)&CH,
                        (void *)&chunks,
                        (void *)&out,
                        (void *)&call->out.stride,
                        (void *)&partials,
                        (void *)&seg_start,
                        (void *)&seg_end,
                        (void *)&c64,
                        (void *)&c32,
                        (void *)empty,
                        (void *)&fallback};
    const int64_t threads = (int64_t)chunks * p->layout.lanes;
    /* After a sort the previous operation is its last pass; else the memset. */
    JITOPS__TRY((keys != NULL ? jitops__segment_launch_after : jitops__segment_launch)(
        c->k->reduce, (uint32_t)((threads + 255) / 256), 256, 0, c->stream, red_args));
  }

  const int32_t per_warp =
      jitops__segment_fixup_segments_per_warp(p->layout.lanes, call->segments, chunks);
  void *fix_args[] = {
      (void *)&seg_start, (void *)&seg_end,  (void *)&c->S,    (void *)&c->D,
      (void *)&CH,        (void *)&partials, (void *)&out,     (void *)&call->out.stride,
      (void *)empty,      (void *)&per_warp, (void *)&fallback};
  const int64_t warps = (call->segments + per_warp - 1) / per_warp;
  return (chunks > 0 ? jitops__segment_launch_after : jitops__segment_launch)(
      c->k->fixup, (uint32_t)((warps * 32 + 255) / 256), 256, 0, c->stream, fix_args);
}

static jitops_status run_atomic(const fwd_ctx *c) {
  const seg_forward_plan *p = c->plan;
  const seg_call *call = c->call;
  void *codes = c->scratch + p->codes;
  const size_t table_bytes = (size_t)(call->segments * call->cols) * p->code_size;
  /* Every cell starts at the "no row yet" code: 0 for max, all ones for min. */
  const uint8_t empty_byte = call->reduction == JITOPS_SEGMENT_MAX ? 0x00 : 0xff;
  JITOPS__TRY(jitops__memset8_async(c->runtime, codes, empty_byte, table_bytes, c->stream));

  const void *data = call->data.ptr;
  const uint32_t shared = p->atomic_shared ? (uint32_t)table_bytes : 0;
  void *atomic_args[] = {(void *)&data,         (void *)&call->data.stride,
                         (void *)&c->D,         (void *)&c->ids,
                         (void *)&c->id_stride, (void *)&c->N,
                         (void *)&c->S,         (void *)&codes,
                         (void *)&c->c64,       (void *)&c->c32};
  JITOPS__TRY(
      jitops__segment_launch(c->k->atomic, p->atomic_blocks, 256, shared, c->stream, atomic_args));

  void *out = call->out.ptr;
  const void *fill = c->empty;
  void *fin_args[] = {
      (void *)&codes, (void *)&c->S, (void *)&c->D, (void *)&out, (void *)&call->out.stride,
      (void *)fill};
  return jitops__segment_launch(c->k->finalize,
                                jitops__segment_grid(c->props, call->segments, p->layout.lanes, 32),
                                256, 0, c->stream, fin_args);
}

/* One memset for everything that starts zeroed (segment bounds, sort counters, look-back). */
static jitops_status clear_scratch(const fwd_ctx *c) {
  return jitops__memset8_async(c->runtime, c->scratch + c->plan->zeroed, 0, c->plan->zeroed_bytes,
                               c->stream);
}

/* A counting sort of the rows by bucket (count a block, offsets, layout and scatter), then one
 * block a tile of a bucket reduces it through a shared table. Every kernel after the first is
 * a dependent launch. */
static jitops_status run_buckets(const fwd_ctx *c) {
  const seg_forward_plan *p = c->plan;
  const seg_call *call = c->call;
  char *w = c->scratch;
  int32_t *matrix = (int32_t *)(w + p->bucket_matrix), *counts = (int32_t *)(w + p->bucket_counts);
  uint32_t *done = (uint32_t *)(w + p->bucket_done);
  void *tiles = w + p->bucket_tiles;
  int32_t *tile_count = (int32_t *)(w + p->bucket_tile_count);
  void *entries = w + p->bucket_entries;
  const int32_t P = (int32_t)p->bucket_segments, B = (int32_t)p->buckets;
  const int32_t tile_rows = (int32_t)p->bucket_tile_rows;
  const int32_t block_rows = (int32_t)p->bucket_block_rows, blocks = (int32_t)p->bucket_blocks;
  /* An int a bucket: the counting pass's shared memory, and twice that the scatter's. */
  const uint32_t per_bucket = (uint32_t)(B * sizeof(int32_t));
  void *count_args[] = {
      (void *)&c->ids, (void *)&c->id_stride, (void *)&c->N,   (void *)&c->S,   (void *)&P,
      (void *)&B,      (void *)&block_rows,   (void *)&matrix, (void *)&c->c64, (void *)&c->c32};
  JITOPS__TRY(jitops__segment_launch(c->k->bucket_count, p->bucket_blocks,
                                     SEG_BUCKET_COUNTING_THREADS, per_bucket, c->stream,
                                     count_args));
  void *offsets_args[] = {(void *)&matrix, (void *)&blocks, (void *)&B, (void *)&counts,
                          (void *)&done};
  JITOPS__TRY(jitops__segment_launch_after(
      c->k->bucket_offsets,
      (uint32_t)((B + SEG_BUCKET_OFFSETS_BUCKETS - 1) / SEG_BUCKET_OFFSETS_BUCKETS),
      SEG_BUCKET_THREADS, 0, c->stream, offsets_args));
  void *out = call->out.ptr;
  void *scatter_args[] = {(void *)&c->ids,
                          (void *)&c->id_stride,
                          (void *)&c->N,
                          (void *)&c->S,
                          (void *)&P,
                          (void *)&B,
                          (void *)&block_rows,
                          (void *)&tile_rows,
                          (void *)&matrix,
                          (void *)&counts,
                          (void *)&entries,
                          (void *)&tiles,
                          (void *)&tile_count,
                          (void *)&out,
                          (void *)&call->out.stride,
                          (void *)&c->D};
  JITOPS__TRY(jitops__segment_launch_after(
      c->k->bucket_scatter, p->bucket_blocks, SEG_BUCKET_COUNTING_THREADS,
      2 * per_bucket + (uint32_t)sizeof(int32_t), c->stream, scatter_args));

  const void *data = call->data.ptr;
  const void *fill = c->empty;
  void *reduce_args[] = {
      (void *)&data,  (void *)&call->data.stride, (void *)&c->D, (void *)&entries,
      (void *)&tiles, (void *)&tile_count,        (void *)&P,    (void *)&c->S,
      (void *)&out,   (void *)&call->out.stride,  (void *)fill,  (void *)&done};
  const uint32_t table_bytes = (uint32_t)((size_t)P * (size_t)call->cols * p->code_size);
  return jitops__segment_launch_after(c->k->bucket_extreme, (uint32_t)p->bucket_tiles_max,
                                      SEG_BUCKET_THREADS, table_bytes, c->stream, reduce_args);
}

/* Per-tile sorts and sums into the tiles x S table, then each segment's tiles in order. */
static jitops_status run_tiles(const fwd_ctx *c) {
  const seg_forward_plan *p = c->plan;
  const seg_call *call = c->call;
  float *sums = (float *)(c->scratch + p->tile_sums);
  int32_t *counts = p->tile_counts != 0 ? (int32_t *)(c->scratch + p->tile_counts) : NULL;
  const int32_t passes = p->sort_passes, bits = p->sort_bits, tiles = (int32_t)p->sort_tiles;
  const void *data = call->data.ptr;
  void *sum_args[] = {(void *)&data,   (void *)&call->data.stride,
                      (void *)&c->ids, (void *)&c->id_stride,
                      (void *)&c->N,   (void *)&c->S,
                      (void *)&passes, (void *)&bits,
                      (void *)&sums,   (void *)&counts,
                      (void *)&c->c64, (void *)&c->c32};
  JITOPS__TRY(jitops__segment_launch(c->k->tile_sums, (uint32_t)tiles, SEG_SORT_THREADS, 0,
                                     c->stream, sum_args));
  void *out = call->out.ptr;
  void *combine_args[] = {(void *)&sums, (void *)&counts, (void *)&tiles,
                          (void *)&c->S, (void *)&out,    (void *)&call->out.stride};
  return jitops__segment_launch(c->k->tile_combine, (uint32_t)((call->segments + 31) / 32), 256, 0,
                                c->stream, combine_args);
}

/* The digit path: the scatter into parts, the digit reduction, then the full sort, the
 * chunked reduction and the fixup, every kernel after the scatter a dependent launch. Those last
 * kernels return at once unless the scatter raised the fallback flag (some part over the cap),
 * in which case the digit reduction returns at once instead. */
static jitops_status run_digit(const fwd_ctx *c) {
  const seg_forward_plan *p = c->plan;
  const seg_call *call = c->call;
  JITOPS__TRY(clear_scratch(c));
  int32_t *fill = (int32_t *)(c->scratch + p->digit_fill);
  int32_t *fallback = (int32_t *)(c->scratch + p->digit_fallback);
  void *entries = c->scratch + p->digit_entries;
  const int32_t part_log2 = p->digit_part_log2, parts = (int32_t)p->digit_parts;
  void *scatter_args[] = {(void *)&c->ids, (void *)&c->id_stride, (void *)&c->N,
                          (void *)&c->S,   (void *)&part_log2,    (void *)&parts,
                          (void *)&fill,   (void *)&entries,      (void *)&fallback,
                          (void *)&c->c64, (void *)&c->c32};
  JITOPS__TRY(jitops__segment_launch(c->k->digit_scatter, p->digit_scatter_blocks,
                                     SEG_DIGIT_SCATTER_THREADS, SEG_DIGIT_SCATTER_SHARED, c->stream,
                                     scatter_args));
  const void *data = call->data.ptr;
  void *out = call->out.ptr;
  void *args[] = {(void *)&data,      (void *)&call->data.stride,
                  (void *)&c->D,      (void *)&entries,
                  (void *)&fill,      (void *)&c->S,
                  (void *)&part_log2, (void *)&fallback,
                  (void *)&out,       (void *)&call->out.stride,
                  (void *)c->empty};
  JITOPS__TRY(jitops__segment_launch_after(c->k->digit_reduce, p->digit_parts, SEG_DIGIT_THREADS,
                                           p->digit_shared, c->stream, args));
  const seg_sort_kernels sk = {c->k->histogram, c->k->pass_first, c->k->pass};
  const int32_t *keys = NULL, *rows = NULL;
  JITOPS__TRY(jitops__segment_run_radix_sort(p, &sk, c->scratch, c->ids, c->id_stride, NULL, 0,
                                             c->N, c->S, c->stream, &keys, &rows));
  return run_grouped(c, keys, rows, fallback);
}

static jitops_status run_forward(fwd_ctx *c) {
  const seg_call *call = c->call;
  c->ids = call->ids;
  c->id_stride = call->id_stride;
  if (call->host_ids != NULL) {
    void *copy = c->scratch + c->plan->ids_copy;
    JITOPS__TRY(jitops__segment_upload_host_ids(c->runtime, call, copy, c->stream));
    c->ids = copy;
    c->id_stride = 1;
  }
  c->c64 = call->counter64 ? (unsigned long long *)call->counter : NULL;
  c->c32 = call->counter64 ? NULL : (unsigned *)call->counter;
  c->N = (int32_t)call->rows;
  c->S = (int32_t)call->segments;
  c->D = (int32_t)call->cols;
  c->empty32 = (float)call->empty_value;
  c->empty64 = call->empty_value;
  c->empty = call->dtype == JITOPS__DTYPE_F64 ? (const void *)&c->empty64 : &c->empty32;
  switch (c->plan->path) {
  case SEG_PATH_EMPTY:
    return run_empty(c);
  case SEG_PATH_ATOMIC:
    return run_atomic(c);
  case SEG_PATH_TILES:
    return run_tiles(c);
  case SEG_PATH_BUCKETS:
    return run_buckets(c);
  case SEG_PATH_BOUNDARIES:
    JITOPS__TRY(clear_scratch(c));
    return run_grouped(c, NULL, NULL, NULL);
  case SEG_PATH_SORT: {
    JITOPS__TRY(clear_scratch(c));
    const int32_t *keys = NULL, *perm = NULL;
    if (call->rows > 0) {
      const seg_sort_kernels sk = {c->k->histogram, c->k->pass_first, c->k->pass};
      JITOPS__TRY(jitops__segment_run_radix_sort(c->plan, &sk, c->scratch, c->ids, c->id_stride,
                                                 call->data.ptr, call->data.stride, c->N, c->S,
                                                 c->stream, &keys, &perm));
    }
    return run_grouped(c, keys, perm, NULL);
  }
  case SEG_PATH_DIGIT:
    return run_digit(c);
  }
  return jitops__fail(JITOPS_ERR_INTERNAL, "%s: unknown segment path", call->fn);
}

jitops_status jitops_segment_reduce(jitops_runtime_t *runtime, jitops_segment_reduction reduction,
                                    const DLTensor *data, const DLTensor *segment_ids,
                                    int64_t num_segments, const DLTensor *out,
                                    const jitops_segment_options *options,
                                    const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_segment_reduce";
  seg_call call;
  JITOPS__TRY(jitops__segment_check_forward(fn, runtime, reduction, data, segment_ids, num_segments,
                                            out, options, &call));
  JITOPS__TRY(jitops__segment_check_workspace(fn, workspace));
  fwd_ctx c;
  memset(&c, 0, sizeof c);
  seg_forward_plan plan;
  seg_forward_kernels kernels;
  c.props = jitops__runtime_props(runtime);
  jitops__segment_plan_forward(c.props, &call, &plan);
  JITOPS__TRY(jitops__segment_get_forward_kernels(runtime, &call, &plan, &kernels));
  if (plan.path == SEG_PATH_EMPTY && kernels.count_too_large == NULL)
    return JITOPS_SUCCESS;
  jitops__scratch scratch = {NULL, 0, false};
  if (plan.workspace_bytes > 0)
    JITOPS__TRY(
        jitops__scratch_acquire(runtime, stream, workspace, plan.workspace_bytes, &scratch));
  c.runtime = runtime;
  c.call = &call;
  c.plan = &plan;
  c.k = &kernels;
  c.scratch = (char *)scratch.ptr;
  c.stream = stream;
  jitops_status status = run_forward(&c);
  if (plan.workspace_bytes > 0)
    jitops__scratch_release(runtime, stream, &scratch);
  return status;
}

jitops_status
jitops_segment_reduce_workspace_size(jitops_runtime_t *runtime, jitops_segment_reduction reduction,
                                     const DLTensor *data, const DLTensor *segment_ids,
                                     int64_t num_segments, const DLTensor *out,
                                     const jitops_segment_options *options, size_t *bytes) {
  static const char fn[] = "jitops_segment_reduce_workspace_size";
  if (bytes == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: bytes is NULL", fn);
  seg_call call;
  JITOPS__TRY(jitops__segment_check_forward(fn, runtime, reduction, data, segment_ids, num_segments,
                                            out, options, &call));
  seg_forward_plan plan;
  jitops__segment_plan_forward(jitops__runtime_props(runtime), &call, &plan);
  *bytes = plan.workspace_bytes;
  return JITOPS_SUCCESS;
}
