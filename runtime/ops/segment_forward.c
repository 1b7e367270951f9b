/* jitops_segment_reduce: validate, plan, get the kernels, then launch one of
 *   sort:       radix passes (upsweep, scan, downsweep) -> offsets -> chunks -> fixup
 *   boundaries: offsets -> chunks -> fixup                      (sorted ids)
 *   atomic:     clear the code table -> atomic pass -> finalize  (max/min)
 *   empty:      count the dropped ids, if asked                 (S = 0 or D = 0)
 * all on the caller's stream, with scratch from the workspace or stream-ordered memory. */
#include <string.h>

#include "runtime/ops/segment_internal.h"

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
} fwd_ctx;

static jitops_status run_empty(const fwd_ctx *c) {
  if (c->k->count_too_large == NULL)
    return JITOPS_SUCCESS;
  void *args[] = {(void *)&c->ids, (void *)&c->id_stride, (void *)&c->N,
                  (void *)&c->S,   (void *)&c->c64,       (void *)&c->c32};
  return seg_launch(c->k->count_too_large, seg_grid(c->props, c->N, 1, 8), 256, 0, c->stream, args);
}

/* One stable counting pass per `bits` bits of the keys; returns the final keys and rows. */
static jitops_status run_radix_sort(const fwd_ctx *c, const int32_t **keys, const int32_t **perm) {
  const seg_forward_plan *p = c->plan;
  const uint32_t tiles = (uint32_t)p->sort_tiles;
  int32_t *table = (int32_t *)(c->scratch + p->table);
  const int32_t bits = p->sort_bits;
  const int64_t table_len = ((int64_t)1 << bits) * p->sort_tiles;
  const int32_t *keys_in = NULL, *vals_in = NULL;
  for (int pass = 0; pass < p->sort_passes; ++pass) {
    const int32_t shift = pass * bits;
    int32_t *keys_out = (int32_t *)(c->scratch + p->keys[pass % 2]);
    int32_t *vals_out = (int32_t *)(c->scratch + p->vals[pass % 2]);
    const bool first = pass == 0;
    const void *ids = first ? c->ids : NULL;
    const int64_t id_stride = first ? c->id_stride : 0;
    void *up_args[] = {(void *)&ids,  (void *)&id_stride, (void *)&keys_in, (void *)&c->N,
                       (void *)&c->S, (void *)&shift,     (void *)&bits,    (void *)&table};
    JITOPS__TRY(seg_launch(first ? c->k->upsweep_first : c->k->upsweep, tiles, SEG_SORT_THREADS, 0,
                           c->stream, up_args));
    void *scan_args[] = {(void *)&table, (void *)&table_len};
    JITOPS__TRY(seg_launch(c->k->scan, 1, SEG_SCAN_THREADS, 0, c->stream, scan_args));
    void *down_args[] = {(void *)&ids,   (void *)&id_stride, (void *)&keys_in, (void *)&vals_in,
                         (void *)&c->N,  (void *)&c->S,      (void *)&shift,   (void *)&bits,
                         (void *)&table, (void *)&keys_out,  (void *)&vals_out};
    JITOPS__TRY(seg_launch(first ? c->k->downsweep_first : c->k->downsweep, tiles, SEG_SORT_THREADS,
                           0, c->stream, down_args));
    keys_in = keys_out;
    vals_in = vals_out;
  }
  *keys = keys_in;
  *perm = vals_in;
  return JITOPS_SUCCESS;
}

/* offsets -> chunked reduction -> fixup, over sorted ids (keys NULL) or sorted keys. */
static jitops_status run_grouped(const fwd_ctx *c, const int32_t *keys, const int32_t *perm) {
  const seg_forward_plan *p = c->plan;
  const seg_call *call = c->call;
  const bool sorted_ids = keys == NULL && c->plan->path == SEG_PATH_BOUNDARIES;
  const void *ids = sorted_ids ? c->ids : NULL;
  const int64_t id_stride = sorted_ids ? c->id_stride : 0;
  int32_t *offsets = (int32_t *)(c->scratch + p->offsets);
  void *partials = c->scratch + p->partials;

  void *off_args[] = {(void *)&ids,  (void *)&id_stride, (void *)&keys,   (void *)&c->N,
                      (void *)&c->S, (void *)&offsets,   (void *)&c->c64, (void *)&c->c32};
  JITOPS__TRY(seg_launch(c->k->offsets, (uint32_t)((call->segments + 1 + 255) / 256), 256, 0,
                         c->stream, off_args));

  const int32_t CH = (int32_t)p->chunk_rows, chunks = (int32_t)p->chunks;
  const void *data = call->data.ptr;
  void *out = call->out.ptr;
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
                        (void *)&partials};
    const int64_t threads = (int64_t)chunks * p->layout.lanes;
    JITOPS__TRY(
        seg_launch(c->k->reduce, (uint32_t)((threads + 255) / 256), 256, 0, c->stream, red_args));
  }

  const float empty32 = (float)call->empty_value;
  const double empty64 = call->empty_value;
  const void *empty = call->dtype == JITOPS__DTYPE_F64 ? (const void *)&empty64 : &empty32;
  void *fix_args[] = {(void *)&offsets,
                      (void *)&c->S,
                      (void *)&c->D,
                      (void *)&CH,
                      (void *)&partials,
                      (void *)&out,
                      (void *)&call->out.stride,
                      (void *)empty};
  const int64_t per_warp = seg_fixup_segments_per_warp(p->layout.lanes);
  const int64_t warps = (call->segments + per_warp - 1) / per_warp;
  return seg_launch(c->k->fixup, (uint32_t)((warps * 32 + 255) / 256), 256, 0, c->stream, fix_args);
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
  JITOPS__TRY(seg_launch(c->k->atomic, p->atomic_blocks, 256, shared, c->stream, atomic_args));

  void *out = call->out.ptr;
  const float fill32 = (float)call->empty_value;
  const double fill64 = call->empty_value;
  const void *fill = call->dtype == JITOPS__DTYPE_F64 ? (const void *)&fill64 : &fill32;
  void *fin_args[] = {
      (void *)&codes, (void *)&c->S, (void *)&c->D, (void *)&out, (void *)&call->out.stride,
      (void *)fill};
  return seg_launch(c->k->finalize, seg_grid(c->props, call->segments, p->layout.lanes, 32), 256, 0,
                    c->stream, fin_args);
}

static jitops_status run_forward(fwd_ctx *c) {
  const seg_call *call = c->call;
  c->ids = call->ids;
  c->id_stride = call->id_stride;
  if (call->host_ids != NULL) {
    void *copy = c->scratch + c->plan->ids_copy;
    JITOPS__TRY(seg_upload_host_ids(c->runtime, call, copy, c->stream));
    c->ids = copy;
    c->id_stride = 1;
  }
  c->c64 = call->counter64 ? (unsigned long long *)call->counter : NULL;
  c->c32 = call->counter64 ? NULL : (unsigned *)call->counter;
  c->N = (int32_t)call->rows;
  c->S = (int32_t)call->segments;
  c->D = (int32_t)call->cols;
  switch (c->plan->path) {
  case SEG_PATH_EMPTY:
    return run_empty(c);
  case SEG_PATH_ATOMIC:
    return run_atomic(c);
  case SEG_PATH_BOUNDARIES:
    return run_grouped(c, NULL, NULL);
  case SEG_PATH_SORT: {
    const int32_t *keys = NULL, *perm = NULL;
    if (call->rows > 0)
      JITOPS__TRY(run_radix_sort(c, &keys, &perm));
    return run_grouped(c, keys, perm);
  }
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
  JITOPS__TRY(seg_check_forward(fn, runtime, reduction, data, segment_ids, num_segments, out,
                                options, &call));
  JITOPS__TRY(seg_check_workspace(fn, workspace));
  fwd_ctx c;
  memset(&c, 0, sizeof c);
  seg_forward_plan plan;
  seg_forward_kernels kernels;
  c.props = jitops__runtime_props(runtime);
  seg_plan_forward(c.props, &call, &plan);
  JITOPS__TRY(seg_get_forward_kernels(runtime, &call, &plan, &kernels));
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
  JITOPS__TRY(seg_check_forward(fn, runtime, reduction, data, segment_ids, num_segments, out,
                                options, &call));
  seg_forward_plan plan;
  seg_plan_forward(jitops__runtime_props(runtime), &call, &plan);
  *bytes = plan.workspace_bytes;
  return JITOPS_SUCCESS;
}
