/* The fused linear cross-entropy entry points: validate (args.c), plan (plan.c), choose and get
 * the kernels of "jitops/flce.cuh" (kernels.c), take scratch, run the passes (passes.c),
 * release; the vocabulary shard's two phases the same way. The backward scales saved gradients
 * in place. */
#include <string.h>

#include "jitops/flce.h"
#include "ops/flce/args.h"
#include "ops/flce/flce_abi.h"
#include "ops/flce/kernels.h"
#include "ops/flce/launches.h"
#include "ops/flce/passes.h"
#include "ops/flce/plan.h"
#include "runtime/op_support.h"

/* The automatic budget, from the device's memory now. */
static int64_t auto_budget(jitops_runtime_t *runtime) {
  size_t free_bytes = 0, total_bytes = 0;
  if (jitops__device_memory(runtime, &free_bytes, &total_bytes) != JITOPS_SUCCESS)
    free_bytes = total_bytes = 0; /* compile-only, or no answer: the least automatic budget */
  return jitops__flce_auto_budget(free_bytes, total_bytes);
}

/* The planner's view of a valid call. A call that sets no budget is planned with the least
 * automatic one first: when that already holds every row in one chunk (every small call), no
 * larger budget could change the plan, and the device's memory is not asked (cuMemGetInfo
 * costs microseconds). */
static jitops_status plan_call(const char *fn, jitops_runtime_t *runtime,
                               const jitops__flce_call *c, jitops__flce_plan *plan) {
  jitops__flce_problem p;
  jitops__flce_problem_of(c, &p);
  jitops_status least = jitops__flce_plan_make(fn, &p, plan);
  if (c->opt.scratch_budget_bytes > 0 ||
      (least == JITOPS_SUCCESS && plan->algorithm == JITOPS__FLCE_ROWS && plan->chunk_rows >= p.bt))
    return least;
  p.budget = auto_budget(runtime);
  return jitops__flce_plan_make(fn, &p, plan);
}

static jitops_status require_device(const char *fn, jitops_runtime_t *runtime) {
  jitops_runtime_info info;
  JITOPS__TRY(jitops_runtime_get_info(runtime, &info));
  if (!info.has_device)
    return jitops__fail(JITOPS_ERR_NO_DEVICE,
                        "%s: this runtime is compile-only (no GPU); the call was validated but "
                        "cannot run",
                        fn);
  return JITOPS_SUCCESS;
}

/* Every kernel the plan names, compiled (in parallel, when several are new) or loaded before
 * any device work. They may be quick builds (runtime/kernel_batch.h) unless the call
 * accumulates in f64, whose row kernel calls the math library's exp and log: in f32 the row
 * kernel spells out its products that feed sums, and adds expf's and logf's results with an
 * explicit rounding, so its bits do not depend on the optimization level; the other kernels
 * have no product that feeds a sum. */
static jitops_status get_kernels(jitops_runtime_t *runtime, const jitops__flce_call *call,
                                 const jitops__flce_kernel_plan *plan, void *stream,
                                 jitops_kernel_t *kernels[JITOPS__FLCE_K_ROLES]) {
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops__kernel_batch_for_launch(&batch, stream);
  const unsigned flags = call->acc == JITOPS__DTYPE_F64 ? 0 : JITOPS__KERNEL_QUICK;
  for (int role = 0; role < JITOPS__FLCE_K_ROLES; ++role) {
    kernels[role] = NULL;
    if (plan->name[role][0] != '\0')
      JITOPS__TRY(jitops__kernel_batch_add_flagged(&batch, JITOPS__FLCE_SOURCE, plan->name[role],
                                                   &kernels[role], flags));
  }
  return jitops__kernel_batch_get(runtime, &batch);
}

/* Plans a validated call, and reports its scratch bytes. */
static jitops_status workspace_size(const char *fn, jitops_runtime_t *runtime,
                                    const jitops__flce_call *call, size_t *bytes) {
  jitops__flce_plan plan;
  JITOPS__TRY(plan_call(fn, runtime, call, &plan));
  *bytes = plan.workspace_bytes;
  return JITOPS_SUCCESS;
}

/* Plans a validated call and runs it: kernels, scratch, the passes. */
static jitops_status run_call(const char *fn, jitops_runtime_t *runtime,
                              const jitops__flce_call *call, const jitops_workspace *workspace,
                              void *stream) {
  jitops__flce_plan plan;
  JITOPS__TRY(plan_call(fn, runtime, call, &plan));
  jitops__flce_kernel_plan kernel_plan;
  jitops__flce_kernels_choose(call, &plan, &kernel_plan);
  jitops__flce_forward forward = {runtime, call, &plan, &kernel_plan, {NULL}, NULL, stream};
  /* The kernels before the device check, as the other ops do: a compile-only runtime compiles
   * (and caches) what this call would launch with its plan, which is the least automatic
   * budget's unless the call sets one. */
  JITOPS__TRY(get_kernels(runtime, call, &kernel_plan, stream, forward.kernels));
  JITOPS__TRY(require_device(fn, runtime));
  jitops__scratch scratch;
  JITOPS__TRY(jitops__scratch_acquire(runtime, stream, workspace, plan.workspace_bytes, &scratch));
  forward.scratch = scratch.ptr;
  jitops_status status = jitops__flce_forward_run(&forward);
  jitops__scratch_release(runtime, stream, &scratch);
  return status;
}

jitops_status jitops_flce_workspace_size(jitops_runtime_t *runtime,
                                         const jitops_flce_tensors *tensors,
                                         const jitops_flce_options *options, size_t *bytes) {
  static const char fn[] = "jitops_flce_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  jitops__flce_call call;
  JITOPS__TRY(jitops__flce_check_forward(fn, runtime, tensors, options, &call));
  return workspace_size(fn, runtime, &call, bytes);
}

jitops_status jitops_flce_forward(jitops_runtime_t *runtime, const jitops_flce_tensors *tensors,
                                  const jitops_flce_options *options,
                                  const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_flce_forward";
  jitops__flce_call call;
  JITOPS__TRY(jitops__flce_check_forward(fn, runtime, tensors, options, &call));
  return run_call(fn, runtime, &call, workspace, stream);
}

jitops_status jitops_flce_shard_stats_workspace_size(jitops_runtime_t *runtime,
                                                     const jitops_flce_tensors *tensors,
                                                     const jitops_flce_options *options,
                                                     const DLTensor *lse_local,
                                                     const DLTensor *linear, size_t *bytes) {
  static const char fn[] = "jitops_flce_shard_stats_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  jitops__flce_call call;
  JITOPS__TRY(
      jitops__flce_check_shard_stats(fn, runtime, tensors, options, lse_local, linear, &call));
  return workspace_size(fn, runtime, &call, bytes);
}

jitops_status jitops_flce_shard_stats(jitops_runtime_t *runtime, const jitops_flce_tensors *tensors,
                                      const jitops_flce_options *options, DLTensor *lse_local,
                                      DLTensor *linear, const jitops_workspace *workspace,
                                      void *stream) {
  static const char fn[] = "jitops_flce_shard_stats";
  jitops__flce_call call;
  JITOPS__TRY(
      jitops__flce_check_shard_stats(fn, runtime, tensors, options, lse_local, linear, &call));
  return run_call(fn, runtime, &call, workspace, stream);
}

jitops_status jitops_flce_shard_backward_workspace_size(jitops_runtime_t *runtime,
                                                        const jitops_flce_tensors *tensors,
                                                        const jitops_flce_options *options,
                                                        const DLTensor *lse, size_t *bytes) {
  static const char fn[] = "jitops_flce_shard_backward_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  jitops__flce_call call;
  JITOPS__TRY(jitops__flce_check_shard_backward(fn, runtime, tensors, options, lse, &call));
  return workspace_size(fn, runtime, &call, bytes);
}

jitops_status jitops_flce_shard_backward(jitops_runtime_t *runtime,
                                         const jitops_flce_tensors *tensors,
                                         const jitops_flce_options *options, const DLTensor *lse,
                                         const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_flce_shard_backward";
  jitops__flce_call call;
  JITOPS__TRY(jitops__flce_check_shard_backward(fn, runtime, tensors, options, lse, &call));
  return run_call(fn, runtime, &call, workspace, stream);
}

/* The scale kernel of each gradient to scale (NULL for the others), got together; quick builds
 * in any dtype, since a scale is one product, rounded on its own. */
static jitops_status scale_kernels(jitops_runtime_t *runtime, const jitops__flce_grad grads[3],
                                   jitops__dtype dy_dtype, void *stream,
                                   jitops_kernel_t *kernels[3]) {
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops__kernel_batch_for_launch(&batch, stream);
  for (int i = 0; i < 3; ++i) {
    kernels[i] = NULL;
    if (grads[i].data == NULL || grads[i].rows == 0 || grads[i].cols == 0)
      continue;
    char name[JITOPS__FLCE_NAME_SIZE];
    jitops__flce_scale_name(&grads[i], dy_dtype, name, sizeof name);
    JITOPS__TRY(jitops__kernel_batch_add_flagged(&batch, JITOPS__FLCE_SOURCE, name, &kernels[i],
                                                 JITOPS__KERNEL_QUICK));
  }
  return jitops__kernel_batch_get(runtime, &batch);
}

/* grad *= dy, in place. */
static jitops_status scale_grad(jitops_runtime_t *runtime, const jitops_kernel_t *kernel,
                                const jitops__flce_grad *g, const void *dy, void *stream) {
  if (jitops__flce_scale_is_flat(g)) {
    jitops__flce_scale_flat_args a = {g->data, g->rows * g->cols, dy};
    return jitops__flce_launch_scale_flat(runtime, kernel, &a, jitops__dtype_size(g->dtype),
                                          stream);
  }
  jitops__flce_scale_args a = {g->data, g->ld, g->rows, g->cols, dy};
  return jitops__flce_launch_scale(kernel, &a, stream);
}

jitops_status jitops_flce_backward(jitops_runtime_t *runtime, const DLTensor *grad_output,
                                   DLTensor *grad_input, DLTensor *grad_weight, DLTensor *grad_bias,
                                   void *stream) {
  static const char fn[] = "jitops_flce_backward";
  jitops__dtype dy_dtype;
  jitops__flce_grad grads[3];
  JITOPS__TRY(jitops__flce_check_backward(fn, runtime, grad_output, grad_input, grad_weight,
                                          grad_bias, &dy_dtype, grads));
  jitops_kernel_t *kernels[3];
  JITOPS__TRY(scale_kernels(runtime, grads, dy_dtype, stream, kernels));
  JITOPS__TRY(require_device(fn, runtime));
  const void *dy = jitops__tensor_ptr(grad_output);
  for (int i = 0; i < 3; ++i)
    if (kernels[i] != NULL)
      JITOPS__TRY(scale_grad(runtime, kernels[i], &grads[i], dy, stream));
  return JITOPS_SUCCESS;
}
