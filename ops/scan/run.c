/* The scan entry points: validate (args.c), plan (plan.c), get the kernel from
 * "jitops/scan.cuh", zero the look-back flags when there are any, launch. */
#include <string.h>

#include "jitops/scan.h"
#include "ops/scan/args.h"
#include "ops/scan/plan.h"
#include "ops/scan/scan_abi.h"
#include "runtime/op_support.h"

/* Plans a valid call; *empty when its tensors are empty (no kernel, no scratch). */
static jitops_status plan_call(const char *fn, jitops_runtime_t *rt, const jitops__scan_call *call,
                               jitops__scan_geom *geom, jitops__scan_plan *plan, bool *empty) {
  *empty = jitops__tensor_numel(call->tensors[0]) == 0;
  if (*empty)
    return JITOPS_SUCCESS;
  jitops__scan_geom_build(geom, call->ntens, call->tensors, call->axis, call->kernel_reverse);
  return jitops__scan_plan_make(fn, plan, call->kop, call->dtype, geom,
                                jitops__runtime_props(rt)->sm_count);
}

/* The plan's kernel, which for the ops that allow it may be a quick build on a cold cache. A
 * call after the kernel's first finds it in memory at once. */
static jitops_status get_kernel(jitops_runtime_t *rt, const jitops__scan_plan *plan, void *stream,
                                jitops_kernel_t **kernel) {
  *kernel = jitops__kernel_find_ready(rt, JITOPS__SCAN_SOURCE, plan->name, NULL, 0);
  if (*kernel != NULL)
    return JITOPS_SUCCESS;
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops__kernel_batch_for_launch(&batch, stream);
  unsigned flags = plan->quick ? JITOPS__KERNEL_QUICK : 0;
  JITOPS__TRY(
      jitops__kernel_batch_add_flagged(&batch, JITOPS__SCAN_SOURCE, plan->name, kernel, flags));
  return jitops__kernel_batch_get(rt, &batch);
}

static jitops_status launch(jitops_runtime_t *rt, const jitops__scan_geom *geom,
                            const jitops__scan_plan *plan, const jitops_workspace *workspace,
                            void *stream) {
  jitops_kernel_t *kernel;
  JITOPS__TRY(get_kernel(rt, plan, stream, &kernel));
  jitops__scan_args args;
  memset(&args, 0, sizeof args);
  args.geom = *geom;
  jitops__scratch scratch;
  JITOPS__TRY(jitops__scratch_acquire(rt, stream, workspace, plan->scratch_bytes, &scratch));
  jitops_status status = JITOPS_SUCCESS;
  if (plan->lookback && plan->tiles > 1) { /* one-tile rows need no scratch */
    char *base = scratch.ptr;
    args.scratch.ticket = (uint32_t *)base;
    args.scratch.flags = (uint32_t *)(base + plan->flags_offset);
    args.scratch.agg = plan->agg_offset ? base + plan->agg_offset : NULL;
    args.scratch.inc = plan->inc_offset ? base + plan->inc_offset : NULL;
    args.scratch.chains = geom->chains;
    if (plan->group_agg_offset) {
      args.scratch.group_flags = (uint32_t *)(base + plan->group_flags_offset);
      args.scratch.group_agg = base + plan->group_agg_offset;
    }
    status = jitops__memset32_async(rt, base, 0, plan->zero_words, stream);
  }
  void *params[] = {&args};
  if (status == JITOPS_SUCCESS)
    status = jitops__launch(kernel, plan->grid, 1, 1, plan->block_x, plan->block_y, 1,
                            plan->shared_bytes, stream, params);
  jitops__scratch_release(rt, stream, &scratch);
  return status;
}

static jitops_status run(const char *fn, jitops_runtime_t *rt, const jitops__scan_call *call,
                         const jitops_workspace *workspace, void *stream) {
  jitops__scan_geom geom;
  jitops__scan_plan plan;
  bool empty;
  JITOPS__TRY(plan_call(fn, rt, call, &geom, &plan, &empty));
  return empty ? JITOPS_SUCCESS : launch(rt, &geom, &plan, workspace, stream);
}

static jitops_status workspace_of(const char *fn, jitops_runtime_t *rt,
                                  const jitops__scan_call *call, size_t *bytes) {
  *bytes = 0;
  jitops__scan_geom geom;
  jitops__scan_plan plan;
  bool empty;
  JITOPS__TRY(plan_call(fn, rt, call, &geom, &plan, &empty));
  *bytes = empty ? 0 : plan.scratch_bytes;
  return JITOPS_SUCCESS;
}

jitops_status jitops_scan(jitops_runtime_t *runtime, jitops_scan_op op, const DLTensor *x, int axis,
                          int reverse, DLTensor *y, DLTensor *indices,
                          const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_scan";
  jitops__scan_call call;
  JITOPS__TRY(jitops__scan_check_forward(fn, runtime, op, x, axis, reverse, y, indices, &call));
  return run(fn, runtime, &call, workspace, stream);
}

jitops_status jitops_scan_backward(jitops_runtime_t *runtime, jitops_scan_op op, const DLTensor *dy,
                                   const DLTensor *x, const DLTensor *y, const DLTensor *indices,
                                   int axis, int reverse, DLTensor *dx,
                                   const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_scan_backward";
  jitops__scan_call call;
  JITOPS__TRY(
      jitops__scan_check_backward(fn, runtime, op, dy, x, y, indices, axis, reverse, dx, &call));
  return run(fn, runtime, &call, workspace, stream);
}

jitops_status jitops_scan_workspace_size(jitops_runtime_t *runtime, jitops_scan_op op,
                                         const DLTensor *x, int axis, int reverse,
                                         const DLTensor *y, const DLTensor *indices,
                                         size_t *bytes) {
  static const char fn[] = "jitops_scan_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  jitops__scan_call call;
  JITOPS__TRY(jitops__scan_check_forward(fn, runtime, op, x, axis, reverse, y, indices, &call));
  return workspace_of(fn, runtime, &call, bytes);
}

jitops_status jitops_scan_backward_workspace_size(jitops_runtime_t *runtime, jitops_scan_op op,
                                                  const DLTensor *dy, const DLTensor *x,
                                                  const DLTensor *y, const DLTensor *indices,
                                                  int axis, int reverse, const DLTensor *dx,
                                                  size_t *bytes) {
  static const char fn[] = "jitops_scan_backward_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  jitops__scan_call call;
  JITOPS__TRY(
      jitops__scan_check_backward(fn, runtime, op, dy, x, y, indices, axis, reverse, dx, &call));
  return workspace_of(fn, runtime, &call, bytes);
}
