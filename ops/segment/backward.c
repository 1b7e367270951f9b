/* jitops_segment_reduce_backward: validate, plan, get the kernels, then
 *   sum:     gather dy rows
 *   mean:    row counts (offsets of sorted ids, or integer-atomic counts) -> gather / count
 *   max/min: unsorted ids and a small S x D table: clear ties -> mark matches (dx = dy or 0,
 *            count ties) -> split the tied cells, over rows in their natural order;
 *            otherwise over rows grouped by segment: sort (unsorted ids) -> mark -> fix
 * all on the caller's stream. */
#include <string.h>

#include "ops/segment/internal.h"

typedef struct bwd_ctx {
  jitops_runtime_t *runtime;
  const seg_call *call;
  const seg_backward_plan *plan;
  const seg_backward_kernels *k;
  const jitops__device_props *props;
  char *scratch;
  void *stream;
  const void *ids;
  int64_t id_stride;
  int32_t N, S, D;
  uint32_t blocks; /* the row kernels' grid */
} bwd_ctx;

static jitops_status run_gather(const bwd_ctx *c, const int32_t *counts) {
  const seg_call *call = c->call;
  const void *dy = call->dy.ptr;
  void *dx = call->dx.ptr;
  void *args[] = {(void *)&dy,     (void *)&call->dy.stride,
                  (void *)&c->ids, (void *)&c->id_stride,
                  (void *)&counts, (void *)&c->N,
                  (void *)&c->S,   (void *)&c->D,
                  (void *)&dx,     (void *)&call->dx.stride};
  return jitops__segment_launch(c->k->gather, c->blocks, 256, 0, c->stream, args);
}

static jitops_status run_mean(const bwd_ctx *c) {
  const seg_call *call = c->call;
  int32_t *counts = (int32_t *)(c->scratch + c->plan->counts);
  if (call->sorted) {
    /* Sorted ids: counts are differences of the segment offsets, no atomics at all. */
    const int32_t *no_keys = NULL;
    unsigned long long *no_c64 = NULL;
    unsigned *no_c32 = NULL;
    void *args[] = {(void *)&c->ids, (void *)&c->id_stride, (void *)&no_keys, (void *)&c->N,
                    (void *)&c->S,   (void *)&counts,       (void *)&no_c64,  (void *)&no_c32};
    JITOPS__TRY(jitops__segment_launch(c->k->offsets, (uint32_t)((call->segments + 1 + 255) / 256),
                                       256, 0, c->stream, args));
  } else {
    JITOPS__TRY(jitops__memset8_async(c->runtime, counts, 0,
                                      (size_t)call->segments * sizeof(int32_t), c->stream));
    const uint32_t shared =
        c->plan->count_shared ? (uint32_t)((size_t)call->segments * sizeof(int32_t)) : 0;
    void *args[] = {(void *)&c->ids, (void *)&c->id_stride, (void *)&c->N, (void *)&c->S,
                    (void *)&counts};
    JITOPS__TRY(jitops__segment_launch(c->k->count_rows, c->plan->count_blocks, 256, shared,
                                       c->stream, args));
  }
  return run_gather(c, counts);
}

static jitops_status run_extreme(const bwd_ctx *c) {
  const seg_call *call = c->call;
  const seg_backward_plan *p = c->plan;
  const size_t cells = (size_t)(call->segments * call->cols);
  int32_t *ties = (int32_t *)(c->scratch + p->ties);
  int32_t *first_row = call->first_occurrence ? (int32_t *)(c->scratch + p->first_row) : NULL;
  int32_t *tie_flag = ties + cells; /* the plan puts it after the counts */
  JITOPS__TRY(jitops__memset8_async(c->runtime, ties, 0, (cells + 1) * sizeof(int32_t), c->stream));
  if (first_row != NULL)
    JITOPS__TRY(jitops__memset32_async(c->runtime, first_row, 0x7fffffffu, cells, c->stream));

  const void *x = call->x.ptr, *y = call->y.ptr, *dy = call->dy.ptr;
  void *dx = call->dx.ptr;
  void *args[] = {(void *)&x,
                  (void *)&call->x.stride,
                  (void *)&y,
                  (void *)&call->y.stride,
                  (void *)&dy,
                  (void *)&call->dy.stride,
                  (void *)&c->ids,
                  (void *)&c->id_stride,
                  (void *)&c->N,
                  (void *)&c->S,
                  (void *)&c->D,
                  (void *)&dx,
                  (void *)&call->dx.stride,
                  (void *)&ties,
                  (void *)&first_row,
                  (void *)&tie_flag};
  JITOPS__TRY(jitops__segment_launch(c->k->mark, c->blocks, 256, 0, c->stream, args));
  /* The split usually finds no tie and returns at once: one wave of blocks (it loops over
   * the rows) costs less to launch and retire than the mark's several. */
  const uint32_t wave = jitops__segment_grid(c->props, call->rows, c->plan->layout.lanes, 8);
  return jitops__segment_launch(c->k->split, wave, 256, 0, c->stream, args);
}

/* max/min over rows grouped by segment: clear the sort's counters -> sort (unsorted ids) ->
 * mark (dx, and tie bits in registers) -> fix the segments that cross chunks and the tied
 * whole segments the mark pass listed. */
static jitops_status run_extreme_runs(const bwd_ctx *c) {
  const seg_call *call = c->call;
  const seg_backward_plan *plan = c->plan;
  const seg_forward_plan *g = &plan->grouped;
  const int32_t *keys = NULL, *perm = NULL;
  if (!call->sorted) {
    JITOPS__TRY(
        jitops__memset8_async(c->runtime, c->scratch + g->zeroed, 0, g->zeroed_bytes, c->stream));
    const seg_sort_kernels sk = {c->k->histogram, c->k->pass_first, c->k->pass};
    JITOPS__TRY(jitops__segment_run_radix_sort(g, &sk, c->scratch, c->ids, c->id_stride, NULL, 0,
                                               c->N, c->S, c->stream, &keys, &perm));
  }
  /* Sorted ids are read through `ids`, unsorted ones through the sorted keys. */
  const void *ids = call->sorted ? c->ids : NULL;
  const int64_t id_stride = call->sorted ? c->id_stride : 0;
  const int32_t CH = (int32_t)g->chunk_rows, chunks = (int32_t)g->chunks;
  void *bits = c->scratch + g->partials;
  int32_t *seg_end = (int32_t *)(c->scratch + g->seg_end);
  int32_t *owned = (int32_t *)(c->scratch + plan->owned);
  int32_t *own_start = (int32_t *)(c->scratch + plan->own_start);
  /* Laid out as the template's tied_list. */
  struct {
    void *count, *runs, *bits;
  } tied = {c->scratch + plan->tied_count, c->scratch + plan->tied_runs,
            c->scratch + plan->tied_bits};
  const void *x = call->x.ptr, *y = call->y.ptr, *dy = call->dy.ptr;
  void *dx = call->dx.ptr;
  const int64_t lanes = (int64_t)chunks * plan->layout.lanes;
  void *args[] = {(void *)&x,
                  (void *)&call->x.stride,
                  (void *)&y,
                  (void *)&call->y.stride,
                  (void *)&dy,
                  (void *)&call->dy.stride,
                  (void *)&ids,
                  (void *)&id_stride,
                  (void *)&keys,
                  (void *)&perm,
                  (void *)&c->N,
                  (void *)&c->S,
                  (void *)&c->D,
                  (void *)&CH,
                  (void *)&chunks,
                  (void *)&dx,
                  (void *)&call->dx.stride,
                  (void *)&bits,
                  (void *)&owned,
                  (void *)&own_start,
                  (void *)&seg_end,
                  (void *)&tied};
  /* Unsorted ids: the previous operation is the sort's last pass. */
  JITOPS__TRY((call->sorted ? jitops__segment_launch : jitops__segment_launch_after)(
      c->k->runs_mark, (uint32_t)((lanes + SEG_RUNS_THREADS - 1) / SEG_RUNS_THREADS),
      SEG_RUNS_THREADS, 0, c->stream, args));
  return jitops__segment_launch_after(c->k->runs_fix, (uint32_t)((lanes + 255) / 256), 256, 0,
                                      c->stream, args);
}

static jitops_status run_backward(bwd_ctx *c) {
  const seg_call *call = c->call;
  c->ids = call->ids;
  c->id_stride = call->id_stride;
  if (call->host_ids != NULL) {
    void *copy = c->scratch + c->plan->ids_copy;
    JITOPS__TRY(jitops__segment_upload_host_ids(c->runtime, call, copy, c->stream));
    c->ids = copy;
    c->id_stride = 1;
  }
  c->N = (int32_t)call->rows;
  c->S = (int32_t)call->segments;
  c->D = (int32_t)call->cols;
  c->blocks = jitops__segment_grid(c->props, call->rows, c->plan->layout.lanes, 32);
  switch (call->reduction) {
  case JITOPS_SEGMENT_SUM:
    return run_gather(c, NULL);
  case JITOPS_SEGMENT_MEAN:
    return run_mean(c);
  case JITOPS_SEGMENT_MAX:
  case JITOPS_SEGMENT_MIN:
    return c->plan->runs ? run_extreme_runs(c) : run_extreme(c);
  }
  return jitops__fail(JITOPS_ERR_INTERNAL, "%s: unknown reduction", call->fn);
}

jitops_status jitops_segment_reduce_backward(jitops_runtime_t *runtime,
                                             jitops_segment_reduction reduction,
                                             const DLTensor *grad_out, const DLTensor *data,
                                             const DLTensor *out, const DLTensor *segment_ids,
                                             int64_t num_segments, const DLTensor *grad_data,
                                             const jitops_segment_options *options,
                                             const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_segment_reduce_backward";
  seg_call call;
  JITOPS__TRY(jitops__segment_check_backward(fn, runtime, reduction, grad_out, data, out,
                                             segment_ids, num_segments, grad_data, options, &call));
  JITOPS__TRY(jitops__segment_check_workspace(fn, workspace));
  bwd_ctx c;
  memset(&c, 0, sizeof c);
  seg_backward_plan plan;
  seg_backward_kernels kernels;
  c.props = jitops__runtime_props(runtime);
  jitops__segment_plan_backward(c.props, &call, &plan);
  JITOPS__TRY(jitops__segment_get_backward_kernels(runtime, &call, &plan, &kernels));
  if (call.rows == 0 || call.cols == 0)
    return JITOPS_SUCCESS; /* grad_data is empty */
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
  jitops_status status = run_backward(&c);
  if (plan.workspace_bytes > 0)
    jitops__scratch_release(runtime, stream, &scratch);
  return status;
}

jitops_status jitops_segment_reduce_backward_workspace_size(
    jitops_runtime_t *runtime, jitops_segment_reduction reduction, const DLTensor *grad_out,
    const DLTensor *data, const DLTensor *out, const DLTensor *segment_ids, int64_t num_segments,
    const DLTensor *grad_data, const jitops_segment_options *options, size_t *bytes) {
  static const char fn[] = "jitops_segment_reduce_backward_workspace_size";
  if (bytes == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: bytes is NULL", fn);
  seg_call call;
  JITOPS__TRY(jitops__segment_check_backward(fn, runtime, reduction, grad_out, data, out,
                                             segment_ids, num_segments, grad_data, options, &call));
  seg_backward_plan plan;
  jitops__segment_plan_backward(jitops__runtime_props(runtime), &call, &plan);
  *bytes = plan.workspace_bytes;
  return JITOPS_SUCCESS;
}
