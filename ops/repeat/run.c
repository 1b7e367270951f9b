/* The repeat entry points: validate (args.c), plan (plan.c), get the kernels from
 * "jitops/repeat.cuh", fill their argument (repeat_abi.h), launch. */
#include "jitops/repeat.h"
#include "ops/repeat/args.h"
#include "ops/repeat/plan.h"
#include "ops/repeat/repeat_abi.h"
#include "runtime/op_support.h"

/* ---- forward ------------------------------------------------------------------------------- */

static void fwd_args(const jitops__repeat_fwd_plan *p, const DLTensor *x, DLTensor *y,
                     jitops__repeat_fwd_args *a) {
  const jitops__repeat_dim *w = &p->g.d[p->g.n - 1]; /* the innermost */
  *a = (jitops__repeat_fwd_args){.x = jitops__tensor_ptr(x),
                                 .y = jitops__tensor_ptr(y),
                                 .rows = p->rows,
                                 .width = p->width,
                                 .in_w = w->in,
                                 .xs_w = w->in_stride,
                                 .ys_w = w->out_stride,
                                 .tc = p->tc,
                                 .col_blocks = p->col_blocks,
                                 .in_step = (p->tc * p->vec) % w->in};
  for (int i = 0; i < p->g.n - 1; ++i) { /* the outer dimensions */
    const jitops__repeat_dim *d = &p->g.d[i];
    a->oshape[i] = d->in * d->rep;
    a->ishape[i] = d->in;
    a->xs[i] = d->in_stride;
    a->ys[i] = d->out_stride;
  }
}

jitops_status jitops_repeat(jitops_runtime_t *runtime, const DLTensor *x, const int64_t *repeats,
                            int num_repeats, DLTensor *y, void *stream) {
  static const char fn[] = "jitops_repeat";
  JITOPS__TRY(jitops__repeat_check_forward(fn, runtime, x, repeats, num_repeats, y));
  if (jitops__tensor_numel(y) == 0)
    return JITOPS_SUCCESS;
  jitops__repeat_fwd_plan plan;
  JITOPS__TRY(jitops__repeat_plan_forward(fn, x, repeats, num_repeats, y, &plan));
  jitops_kernel_t *kernel;
  JITOPS__TRY(jitops_kernel_get(runtime, JITOPS__REPEAT_SOURCE, plan.name, NULL, 0, &kernel));
  jitops__repeat_fwd_args args;
  fwd_args(&plan, x, y, &args);
  void *params[] = {&args};
  return jitops__launch(kernel, (uint32_t)(plan.col_blocks * plan.row_blocks), 1, 1,
                        JITOPS__REPEAT_THREADS, 1, 1, 0, stream, params);
}

/* ---- backward ------------------------------------------------------------------------------ */

static void bwd_args(const jitops__repeat_bwd_plan *p, const DLTensor *dy, DLTensor *dx,
                     void *partial, jitops__repeat_bwd_args *a) {
  *a = (jitops__repeat_bwd_args){.dy = jitops__tensor_ptr(dy),
                                 .dx = jitops__tensor_ptr(dx),
                                 .partial = partial,
                                 .n = p->n,
                                 .combos = p->combos,
                                 .split_len = p->split_len,
                                 .splits = p->splits};
  for (int i = 0; i < p->g.n; ++i) {
    const jitops__repeat_dim *d = &p->g.d[i];
    a->ishape[i] = d->in;
    a->rep[i] = d->rep;
    a->dxs[i] = d->in_stride;
    a->dys[i] = d->out_stride;
    a->rstep[i] = d->in * d->out_stride;
  }
}

/* The sums, then (with split copies) the finish that adds their partial sums. */
static jitops_status bwd_launch(const char *fn, const jitops__repeat_bwd_plan *p,
                                const jitops_kernel_t *kernel, const jitops_kernel_t *finish,
                                const jitops__repeat_bwd_args *args, void *stream) {
  const int64_t blocks = (p->n + JITOPS__REPEAT_THREADS - 1) / JITOPS__REPEAT_THREADS;
  if (blocks > 2147483647ll)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED, "%s: dx is too large for one grid", fn);
  void *params[] = {(void *)args};
  JITOPS__TRY(jitops__launch(kernel, (uint32_t)blocks, (uint32_t)p->splits, 1,
                             JITOPS__REPEAT_THREADS, 1, 1, 0, stream, params));
  if (finish == NULL)
    return JITOPS_SUCCESS;
  return jitops__launch(finish, (uint32_t)blocks, 1, 1, JITOPS__REPEAT_THREADS, 1, 1, 0, stream,
                        params);
}

jitops_status jitops_repeat_backward(jitops_runtime_t *runtime, const DLTensor *dy,
                                     const int64_t *repeats, int num_repeats, DLTensor *dx,
                                     const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_repeat_backward";
  JITOPS__TRY(jitops__repeat_check_backward(fn, runtime, dy, repeats, num_repeats, dx));
  if (jitops__tensor_numel(dx) == 0)
    return JITOPS_SUCCESS;
  jitops__repeat_bwd_plan plan;
  jitops__repeat_plan_backward(jitops__runtime_props(runtime), dy, repeats, num_repeats, dx, &plan);
  /* The split sums' kernel and their finish, compiled in parallel on a cold call. */
  jitops_kernel_t *kernel, *finish = NULL;
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  JITOPS__TRY(jitops__kernel_batch_add(&batch, JITOPS__REPEAT_SOURCE, plan.name, &kernel));
  if (plan.splits > 1)
    JITOPS__TRY(jitops__kernel_batch_add(&batch, JITOPS__REPEAT_SOURCE, plan.finish_name, &finish));
  JITOPS__TRY(jitops__kernel_batch_get(runtime, &batch));
  jitops__scratch scratch;
  JITOPS__TRY(jitops__scratch_acquire(runtime, stream, workspace, plan.scratch_bytes, &scratch));
  jitops__repeat_bwd_args args;
  bwd_args(&plan, dy, dx, scratch.ptr, &args);
  jitops_status status = bwd_launch(fn, &plan, kernel, finish, &args, stream);
  jitops__scratch_release(runtime, stream, &scratch);
  return status;
}

jitops_status jitops_repeat_backward_workspace_size(jitops_runtime_t *runtime, const DLTensor *dy,
                                                    const int64_t *repeats, int num_repeats,
                                                    const DLTensor *dx, size_t *bytes) {
  static const char fn[] = "jitops_repeat_backward_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  JITOPS__TRY(jitops__repeat_check_backward(fn, runtime, dy, repeats, num_repeats, dx));
  *bytes = 0;
  if (jitops__tensor_numel(dx) == 0)
    return JITOPS_SUCCESS;
  jitops__repeat_bwd_plan plan;
  jitops__repeat_plan_backward(jitops__runtime_props(runtime), dy, repeats, num_repeats, dx, &plan);
  *bytes = plan.scratch_bytes;
  return JITOPS_SUCCESS;
}
