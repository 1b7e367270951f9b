/* The forward's launch sequences, one a path (plan.h):
 *   sort:       clear -> digit histogram -> radix passes -> chunks -> fixup
 *   boundaries: clear -> chunks -> fixup                        (sorted ids)
 *   tiles:      per-tile sorts and sums -> combine              (one column, sum/mean)
 *   atomic:     clear the code table -> atomic pass -> finalize  (max/min)
 *   buckets:    count -> offsets -> layout and scatter -> reduce a tile a block (max/min)
 *   digit:      clear -> scatter into parts -> a block a part -> [digit histogram -> radix
 *               passes -> chunks -> fixup]      (sum/mean; [...] only when a part overflows)
 *   narrow:     clear the code table -> atomic pass -> finalize   (max/min, D <= 8)
 *               prepare (clear, largest |x|) -> fixed-point atomic pass -> finalize  (sum/mean)
 *   empty:      count the dropped ids, if asked                 (S = 0 or D = 0) */
#include "ops/segment/launches.h"

/* The caller's dropped-id counter, as the kernels take it. */
static jitops__segment_counter counter_of(const jitops__segment_call *call) {
  jitops__segment_counter c = {NULL, NULL};
  if (call->counter64)
    c.count64 = call->counter;
  else
    c.count32 = call->counter;
  return c;
}

/* The call's data and out rows, as the kernels take them. */
static jitops__segment_forward_tensors tensors_of(const jitops__segment_call *call) {
  return (jitops__segment_forward_tensors){call->data.ptr, call->data.stride, call->out.ptr,
                                           call->out.stride};
}

/* What empty segments get, in both accumulation types. */
static jitops__segment_fill fill_of(const jitops__segment_call *call) {
  return (jitops__segment_fill){.f64 = call->empty_value, .f32 = (float)call->empty_value};
}

static jitops_status run_empty(const jitops__segment_launch *l,
                               const jitops__segment_forward_plan *p,
                               const jitops__segment_forward_kernels *k) {
  jitops__segment_count_args args = {.ids = l->ids, .counter = counter_of(l->call)};
  void *params[] = {&args};
  return jitops__launch(k->count_too_large, p->count_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1, 0,
                        l->stream, params);
}

/* One memset for everything that starts zeroed (segment bounds, sort counters, look-back). */
static jitops_status clear_scratch(const jitops__segment_launch *l,
                                   const jitops__segment_forward_plan *p) {
  return jitops__memset8_async(l->runtime, l->scratch + p->zeroed, 0, p->zeroed_bytes, l->stream);
}

/* chunked reduction -> fixup, over sorted ids (no keys) or the sort's keys and rows; the
 * segment bounds are zeroed. With `fallback` (the digit path), both run only when that flag is
 * up, and the dropped ids are left to the digit path's scatter, which counts them on every
 * call. */
static jitops_status run_grouped(const jitops__segment_launch *l,
                                 const jitops__segment_forward_plan *p,
                                 const jitops__segment_forward_kernels *k,
                                 const jitops__segment_sorted *sorted, const int32_t *fallback) {
  const jitops__segment_call *call = l->call;
  jitops__segment_reduce_args args = {.tensors = tensors_of(call),
                                      .ids = l->ids,
                                      .keys = sorted->keys,
                                      .perm = sorted->rows,
                                      .cols = (int32_t)call->cols,
                                      .chunk_rows = (int32_t)p->chunk_rows,
                                      .chunks = (int32_t)p->chunks,
                                      .fixup_segments = p->fixup_segments,
                                      .partials = l->scratch + p->partials,
                                      .seg_start = (int32_t *)(l->scratch + p->seg_start),
                                      .seg_end = (int32_t *)(l->scratch + p->seg_end),
                                      .fallback = fallback,
                                      .counter = fallback != NULL ? (jitops__segment_counter){0}
                                                                  : counter_of(call),
                                      .fill = fill_of(call)};
  /* Sorted ids are read as they are; after a sort the kernels read its keys instead. */
  if (sorted->keys != NULL || p->path != JITOPS__SEGMENT_PATH_BOUNDARIES) {
    args.ids.ptr = NULL;
    args.ids.stride = 0;
  }
  void *params[] = {&args};
  if (p->chunks > 0) /* after a sort the previous operation is its last pass; else the memset */
    JITOPS__TRY((sorted->keys != NULL ? jitops__launch_after : jitops__launch)(
        k->reduce, p->reduce_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1, 0, l->stream, params));
  return (p->chunks > 0 ? jitops__launch_after : jitops__launch)(
      k->fixup, p->fixup_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1, 0, l->stream, params);
}

static jitops_status run_sort(const jitops__segment_launch *l,
                              const jitops__segment_forward_plan *p,
                              const jitops__segment_forward_kernels *k) {
  const jitops__segment_call *call = l->call;
  JITOPS__TRY(clear_scratch(l, p));
  jitops__segment_sorted sorted = {NULL, NULL};
  if (call->rows > 0)
    JITOPS__TRY(jitops__segment_launch_sort(p, &k->sort, l->scratch, l->ids, &call->data, l->stream,
                                            &sorted));
  return run_grouped(l, p, k, &sorted, NULL);
}

static jitops_status run_boundaries(const jitops__segment_launch *l,
                                    const jitops__segment_forward_plan *p,
                                    const jitops__segment_forward_kernels *k) {
  JITOPS__TRY(clear_scratch(l, p));
  const jitops__segment_sorted none = {NULL, NULL};
  return run_grouped(l, p, k, &none, NULL);
}

static jitops_status run_atomic(const jitops__segment_launch *l,
                                const jitops__segment_forward_plan *p,
                                const jitops__segment_forward_kernels *k) {
  const jitops__segment_call *call = l->call;
  jitops__segment_atomic_args args = {.tensors = tensors_of(call),
                                      .ids = l->ids,
                                      .table = l->scratch + p->codes,
                                      .cols = (int32_t)call->cols,
                                      .counter = counter_of(call),
                                      .fill = fill_of(call)};
  /* Every cell starts at the "no row yet" code: 0 for max, all ones for min. */
  const uint8_t empty_byte = call->reduction == JITOPS_SEGMENT_MAX ? 0x00 : 0xff;
  JITOPS__TRY(jitops__memset8_async(l->runtime, args.table, empty_byte, p->code_table, l->stream));
  void *params[] = {&args};
  const uint32_t shared = p->atomic_shared ? (uint32_t)p->code_table : 0;
  JITOPS__TRY(jitops__launch(k->atomic, p->atomic_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1,
                             shared, l->stream, params));
  return jitops__launch(k->finalize, p->finalize_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1, 0,
                        l->stream, params);
}

/* A counting sort of the rows by bucket (count a block, offsets, layout and scatter), then one
 * block a tile of a bucket reduces it through a shared table. Every kernel after the first is
 * a dependent launch. */
static jitops_status run_buckets(const jitops__segment_launch *l,
                                 const jitops__segment_forward_plan *p,
                                 const jitops__segment_forward_kernels *k) {
  const jitops__segment_call *call = l->call;
  char *w = l->scratch;
  jitops__segment_bucket_args args = {.tensors = tensors_of(call),
                                      .ids = l->ids,
                                      .cols = (int32_t)call->cols,
                                      .bucket_segments = (int32_t)p->bucket_segments,
                                      .buckets = (int32_t)p->buckets,
                                      .block_rows = (int32_t)p->bucket_block_rows,
                                      .tile_rows = (int32_t)p->bucket_tile_rows,
                                      .blocks = (int32_t)p->bucket_blocks,
                                      .matrix = (int32_t *)(w + p->bucket_matrix),
                                      .counts = (int32_t *)(w + p->bucket_counts),
                                      .done = (uint32_t *)(w + p->bucket_done),
                                      .entries =
                                          (jitops__segment_bucket_entry *)(w + p->bucket_entries),
                                      .tiles = (jitops__segment_bucket_tile *)(w + p->bucket_tiles),
                                      .tile_count = (int32_t *)(w + p->bucket_tile_count),
                                      .counter = counter_of(call),
                                      .fill = fill_of(call)};
  void *params[] = {&args};
  /* An int a bucket: the counting pass's shared memory, and twice that (plus the total) the
   * scatter's. */
  const uint32_t per_bucket = (uint32_t)((size_t)p->buckets * sizeof(int32_t));
  JITOPS__TRY(jitops__launch(k->bucket_count, p->bucket_blocks, 1, 1,
                             JITOPS__SEGMENT_COUNTING_THREADS, 1, 1, per_bucket, l->stream,
                             params));
  JITOPS__TRY(jitops__launch_after(k->bucket_offsets, p->bucket_offsets_blocks, 1, 1,
                                   JITOPS__SEGMENT_BUCKET_THREADS, 1, 1, 0, l->stream, params));
  JITOPS__TRY(jitops__launch_after(k->bucket_scatter, p->bucket_blocks, 1, 1,
                                   JITOPS__SEGMENT_COUNTING_THREADS, 1, 1,
                                   2 * per_bucket + (uint32_t)sizeof(int32_t), l->stream, params));
  return jitops__launch_after(k->bucket_extreme, (uint32_t)p->bucket_tiles_max, 1, 1,
                              JITOPS__SEGMENT_BUCKET_THREADS, 1, 1, p->bucket_table, l->stream,
                              params);
}

/* Per-tile sorts and sums into the tiles x S table, then each segment's tiles in order. */
static jitops_status run_tiles(const jitops__segment_launch *l,
                               const jitops__segment_forward_plan *p,
                               const jitops__segment_forward_kernels *k) {
  const jitops__segment_call *call = l->call;
  jitops__segment_tiles_args args = {
      .tensors = tensors_of(call),
      .ids = l->ids,
      .sums = (float *)(l->scratch + p->tile_sums),
      .counts = p->tile_counts != 0 ? (int32_t *)(l->scratch + p->tile_counts) : NULL,
      .passes = p->sort_passes,
      .bits = p->sort_bits,
      .tiles = (int32_t)p->sort_tiles,
      .counter = counter_of(call)};
  void *params[] = {&args};
  JITOPS__TRY(jitops__launch(k->tile_sums, (uint32_t)p->sort_tiles, 1, 1,
                             JITOPS__SEGMENT_SORT_THREADS, 1, 1, 0, l->stream, params));
  return jitops__launch(k->tile_combine, p->combine_blocks, 1, 1,
                        32 * JITOPS__SEGMENT_COMBINE_SPLITS, 1, 1, 0, l->stream, params);
}

/* Whether a cold call deferred some of the digit path's fallback kernels (kernels.h). */
static bool fallback_deferred(const jitops__segment_forward_plan *p,
                              const jitops__segment_forward_kernels *k) {
  return k->sort.histogram == NULL || k->sort.pass == NULL || k->fixup == NULL ||
         (p->chunks > 0 && k->reduce == NULL);
}

/* The digit path: the scatter into parts, the digit reduction, then the full sort, the chunked
 * reduction and the fixup, every kernel after the scatter a dependent launch. Those last
 * kernels return at once unless the scatter raised the fallback flag (some part over the cap),
 * in which case the digit reduction returns at once instead. A cold call that deferred them
 * reads the flag instead, and gets and launches them only if it is up. */
static jitops_status run_digit(const jitops__segment_launch *l,
                               const jitops__segment_forward_plan *p,
                               const jitops__segment_forward_kernels *k) {
  const jitops__segment_call *call = l->call;
  JITOPS__TRY(clear_scratch(l, p));
  jitops__segment_digit_args args = {.tensors = tensors_of(call),
                                     .ids = l->ids,
                                     .cols = (int32_t)call->cols,
                                     .part_log2 = p->digit_part_log2,
                                     .parts = (int32_t)p->digit_parts,
                                     .part_rows = (int32_t *)(l->scratch + p->digit_fill),
                                     .entries = l->scratch + p->digit_entries,
                                     .fallback = (int32_t *)(l->scratch + p->digit_fallback),
                                     .counter = counter_of(call),
                                     .fill = fill_of(call)};
  void *params[] = {&args};
  JITOPS__TRY(jitops__launch(k->digit_scatter, p->digit_scatter_blocks, 1, 1,
                             JITOPS__SEGMENT_SCATTER_THREADS, 1, 1, JITOPS__SEGMENT_SCATTER_SHARED,
                             l->stream, params));
  JITOPS__TRY(jitops__launch_after(k->digit_reduce, p->digit_parts, 1, 1,
                                   JITOPS__SEGMENT_DIGIT_THREADS, 1, 1, p->digit_shared, l->stream,
                                   params));
  jitops__segment_forward_kernels got;
  if (fallback_deferred(p, k)) {
    int32_t up = 0;
    JITOPS__TRY(jitops__read_device_int32(l->runtime, args.fallback, l->stream, &up));
    if (up == 0)
      return JITOPS_SUCCESS;
    got = *k;
    JITOPS__TRY(jitops__segment_get_digit_fallback(l->runtime, call, p, l->stream, &got));
    k = &got;
  }
  jitops__segment_sorted sorted;
  JITOPS__TRY(
      jitops__segment_launch_sort(p, &k->sort, l->scratch, l->ids, NULL, l->stream, &sorted));
  return run_grouped(l, p, k, &sorted, args.fallback);
}

/* The narrow path: max/min clear the code table by a memset, sum/mean by their prepare pass;
 * the atomic pass and the finalize follow, each a dependent launch of a kernel before it. */
static jitops_status run_narrow(const jitops__segment_launch *l,
                                const jitops__segment_forward_plan *p,
                                const jitops__segment_forward_kernels *k) {
  const jitops__segment_call *call = l->call;
  char *w = l->scratch;
  const bool fixed = k->narrow_prepare != NULL;
  jitops__segment_narrow_args args = {
      .tensors = tensors_of(call),
      .ids = l->ids,
      .table = p->narrow_in_place ? call->out.ptr : w + p->codes,
      .flags = fixed ? (uint32_t *)(w + p->narrow_flags) : NULL,
      .counts = call->reduction == JITOPS_SEGMENT_MEAN ? (uint32_t *)(w + p->narrow_counts) : NULL,
      .block_max = fixed ? (uint32_t *)(w + p->narrow_block_max) : NULL,
      .zeroed = w + p->zeroed,
      .zeroed_words = (int64_t)(p->zeroed_bytes / 16),
      .prepare_blocks = (int32_t)p->narrow_prepare_blocks,
      .counter = counter_of(call),
      .fill = fill_of(call)};
  void *params[] = {&args};
  if (fixed) {
    JITOPS__TRY(jitops__launch(k->narrow_prepare, p->narrow_prepare_blocks, 1, 1,
                               JITOPS__SEGMENT_THREADS, 1, 1, 0, l->stream, params));
    JITOPS__TRY(jitops__launch_after(k->narrow_add, p->narrow_blocks, 1, 1, JITOPS__SEGMENT_THREADS,
                                     1, 1, 0, l->stream, params));
  } else {
    /* Every cell starts at the "no row yet" code: 0 for max, all ones for min. */
    const uint8_t empty_byte = call->reduction == JITOPS_SEGMENT_MAX ? 0x00 : 0xff;
    JITOPS__TRY(
        jitops__memset8_async(l->runtime, args.table, empty_byte, p->code_table, l->stream));
    JITOPS__TRY(jitops__launch(k->narrow_add, p->narrow_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1,
                               0, l->stream, params));
  }
  return jitops__launch_after(k->narrow_finalize, p->narrow_finalize_blocks, 1, 1,
                              JITOPS__SEGMENT_THREADS, 1, 1, 0, l->stream, params);
}

jitops_status jitops__segment_launch_forward(const jitops__segment_launch *l,
                                             const jitops__segment_forward_plan *p,
                                             const jitops__segment_forward_kernels *k) {
  switch (p->path) {
  case JITOPS__SEGMENT_PATH_EMPTY:
    return run_empty(l, p, k);
  case JITOPS__SEGMENT_PATH_ATOMIC:
    return run_atomic(l, p, k);
  case JITOPS__SEGMENT_PATH_TILES:
    return run_tiles(l, p, k);
  case JITOPS__SEGMENT_PATH_BUCKETS:
    return run_buckets(l, p, k);
  case JITOPS__SEGMENT_PATH_BOUNDARIES:
    return run_boundaries(l, p, k);
  case JITOPS__SEGMENT_PATH_SORT:
    return run_sort(l, p, k);
  case JITOPS__SEGMENT_PATH_DIGIT:
    return run_digit(l, p, k);
  case JITOPS__SEGMENT_PATH_NARROW:
    return run_narrow(l, p, k);
  }
  return jitops__fail(JITOPS_ERR_INTERNAL, "%s: unknown segment path %d", l->call->fn,
                      (int)p->path);
}
