/* The backward's launch sequences (plan_backward.c):
 *   sum:     gather dy rows
 *   mean:    row counts (offsets of sorted ids, or integer-atomic counts) -> gather / count
 *   max/min: unsorted ids and a small S x D table: clear ties -> mark matches (dx = dy or 0,
 *            count ties) -> split the tied cells, over rows in their natural order;
 *            otherwise over rows grouped by segment: sort (unsorted ids) -> mark -> fix */
#include "ops/segment/launches.h"

/* The call's tensors, as the kernels take them (x and y are NULL for sum and mean). */
static jitops__segment_backward_tensors tensors_of(const jitops__segment_call *call) {
  return (jitops__segment_backward_tensors){call->x.ptr,    call->x.stride, call->y.ptr,
                                            call->y.stride, call->dy.ptr,   call->dy.stride,
                                            call->dx.ptr,   call->dx.stride};
}

static jitops_status run_gather(const jitops__segment_launch *l,
                                const jitops__segment_backward_plan *p,
                                const jitops__segment_backward_kernels *k,
                                const jitops__segment_gather_args *args) {
  void *params[] = {(void *)args};
  return jitops__launch(k->gather, p->rows_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1, 0,
                        l->stream, params);
}

static jitops_status run_sum_or_mean(const jitops__segment_launch *l,
                                     const jitops__segment_backward_plan *p,
                                     const jitops__segment_backward_kernels *k) {
  const jitops__segment_call *call = l->call;
  jitops__segment_gather_args args = {
      .tensors = tensors_of(call), .ids = l->ids, .cols = (int32_t)call->cols};
  if (call->reduction == JITOPS_SEGMENT_SUM)
    return run_gather(l, p, k, &args);
  args.counts = (int32_t *)(l->scratch + p->counts);
  void *params[] = {&args};
  if (call->sorted) {
    /* Sorted ids: counts are differences of the segment offsets, no atomics at all. */
    JITOPS__TRY(jitops__launch(k->offsets, p->offsets_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1,
                               0, l->stream, params));
  } else {
    JITOPS__TRY(jitops__memset8_async(l->runtime, args.counts, 0, p->count_table, l->stream));
    const uint32_t shared = p->count_shared ? (uint32_t)p->count_table : 0;
    JITOPS__TRY(jitops__launch(k->count_rows, p->count_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1,
                               shared, l->stream, params));
  }
  return run_gather(l, p, k, &args);
}

static jitops_status run_tie_table(const jitops__segment_launch *l,
                                   const jitops__segment_backward_plan *p,
                                   const jitops__segment_backward_kernels *k) {
  const jitops__segment_call *call = l->call;
  int32_t *ties = (int32_t *)(l->scratch + p->ties);
  jitops__segment_extreme_args args = {
      .tensors = tensors_of(call),
      .ids = l->ids,
      .ties = ties,
      .first_row = call->first_occurrence ? (int32_t *)(l->scratch + p->first_row) : NULL,
      .tie_flag = ties + p->tie_cells, /* the plan puts it after the counts */
      .cols = (int32_t)call->cols};
  JITOPS__TRY(
      jitops__memset8_async(l->runtime, ties, 0, (p->tie_cells + 1) * sizeof(int32_t), l->stream));
  if (args.first_row != NULL)
    JITOPS__TRY(
        jitops__memset32_async(l->runtime, args.first_row, 0x7fffffffu, p->tie_cells, l->stream));
  void *params[] = {&args};
  JITOPS__TRY(jitops__launch(k->mark, p->rows_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1, 0,
                             l->stream, params));
  return jitops__launch(k->split, p->split_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1, 0,
                        l->stream, params);
}

/* max/min over rows grouped by segment: clear the sort's counters -> sort (unsorted ids) ->
 * mark (dx, and tie bits in registers) -> fix the segments that cross chunks and the tied
 * whole segments the mark pass listed. */
static jitops_status run_runs(const jitops__segment_launch *l,
                              const jitops__segment_backward_plan *p,
                              const jitops__segment_backward_kernels *k) {
  const jitops__segment_call *call = l->call;
  const jitops__segment_forward_plan *g = &p->grouped;
  char *w = l->scratch;
  jitops__segment_sorted sorted = {NULL, NULL};
  jitops__segment_ids ids = l->ids;
  if (!call->sorted) {
    JITOPS__TRY(jitops__memset8_async(l->runtime, w + g->zeroed, 0, g->zeroed_bytes, l->stream));
    JITOPS__TRY(jitops__segment_launch_sort(g, &k->sort, w, l->ids, NULL, l->stream, &sorted));
    ids.ptr = NULL; /* unsorted ids are read through the sorted keys */
    ids.stride = 0;
  }
  jitops__segment_runs_args args = {.tensors = tensors_of(call),
                                    .ids = ids,
                                    .keys = sorted.keys,
                                    .perm = sorted.rows,
                                    .cols = (int32_t)call->cols,
                                    .chunk_rows = (int32_t)g->chunk_rows,
                                    .chunks = (int32_t)g->chunks,
                                    .bits = (jitops__segment_tie_bits *)(w + g->partials),
                                    .owned = (int32_t *)(w + p->owned),
                                    .own_start = (int32_t *)(w + p->own_start),
                                    .seg_end = (int32_t *)(w + g->seg_end),
                                    .tied = {(int32_t *)(w + p->tied_count),
                                             (int32_t *)(w + p->tied_runs),
                                             (uint32_t *)(w + p->tied_bits)}};
  void *params[] = {&args};
  /* Unsorted ids: the previous operation is the sort's last pass. */
  JITOPS__TRY((call->sorted ? jitops__launch : jitops__launch_after)(
      k->runs_mark, p->runs_mark_blocks, 1, 1, JITOPS__SEGMENT_RUNS_THREADS, 1, 1, 0, l->stream,
      params));
  return jitops__launch_after(k->runs_fix, p->runs_fix_blocks, 1, 1, JITOPS__SEGMENT_THREADS, 1, 1,
                              0, l->stream, params);
}

jitops_status jitops__segment_launch_backward(const jitops__segment_launch *l,
                                              const jitops__segment_backward_plan *p,
                                              const jitops__segment_backward_kernels *k) {
  switch (l->call->reduction) {
  case JITOPS_SEGMENT_SUM:
  case JITOPS_SEGMENT_MEAN:
    return run_sum_or_mean(l, p, k);
  case JITOPS_SEGMENT_MAX:
  case JITOPS_SEGMENT_MIN:
    return p->runs ? run_runs(l, p, k) : run_tie_table(l, p, k);
  }
  return jitops__fail(JITOPS_ERR_INTERNAL, "%s: unknown reduction %d", l->call->fn,
                      (int)l->call->reduction);
}
