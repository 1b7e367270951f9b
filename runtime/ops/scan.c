/* The scan entry points: validate (runtime/ops/scan_args.c), plan (runtime/ops/scan_plan.c),
 * get the kernel from "jitops/scan.cuh", zero the look-back flags when there are any, launch.
 * Also the scans' share of the prewarm catalogue. */
#include <stdio.h>
#include <string.h>

#include "jitops/scan.h"
#include "runtime/op_support.h"
#include "runtime/ops/scan_args.h"
#include "runtime/ops/scan_plan.h"

static const char *const SOURCE = "jitops/scan.cuh";

/* The look-back scratch as the template's Scratch struct sees it. */
typedef struct scratch_arg {
  void *ticket;
  void *flags;
  void *agg;
  void *inc;
  int64_t chains;
} scratch_arg;

static int is_empty(const jitops__scan_call *call) {
  return jitops__tensor_numel(call->tensors[0]) == 0;
}

static jitops_status plan_call(const char *fn, jitops_runtime_t *rt, const jitops__scan_call *call,
                               jitops__scan_geom *geom, jitops__scan_plan *plan) {
  jitops__scan_geom_build(geom, call->ntens, call->tensors, call->axis, call->kernel_reverse);
  return jitops__scan_plan_make(fn, plan, call->kop, call->dtype, geom,
                                jitops__runtime_props(rt)->sm_count);
}

static jitops_status launch(const char *fn, jitops_runtime_t *rt, const jitops__scan_geom *geom,
                            const jitops__scan_plan *plan, const jitops_workspace *workspace,
                            void *stream) {
  jitops_kernel_t *kernel;
  JITOPS__TRY(jitops_kernel_get(rt, SOURCE, plan->name, NULL, 0, &kernel));
  int64_t words[64];
  if (jitops__scan_geom_pack(geom, words, 64) == 0)
    return jitops__fail(JITOPS_ERR_INTERNAL, "%s: the scan geometry does not fit its buffer", fn);
  scratch_arg sa;
  memset(&sa, 0, sizeof sa);
  jitops__scratch scratch;
  JITOPS__TRY(jitops__scratch_acquire(rt, stream, workspace, plan->scratch_bytes, &scratch));
  jitops_status status = JITOPS_SUCCESS;
  if (plan->lookback) {
    char *base = scratch.ptr;
    sa.ticket = base;
    sa.flags = base + 16;
    sa.agg = base + plan->agg_offset;
    sa.inc = base + plan->inc_offset;
    sa.chains = geom->chains;
    status = jitops__memset32_async(rt, base, 0, plan->zero_words, stream);
  }
  void *args[] = {words, &sa};
  if (status == JITOPS_SUCCESS)
    status = jitops__launch(kernel, plan->grid, 1, 1, plan->block_x, plan->block_y, 1,
                            plan->shared_bytes, stream, args);
  jitops__scratch_release(rt, stream, &scratch);
  return status;
}

static jitops_status run(const char *fn, jitops_runtime_t *rt, const jitops__scan_call *call,
                         const jitops_workspace *workspace, void *stream) {
  if (is_empty(call))
    return JITOPS_SUCCESS;
  jitops__scan_geom geom;
  jitops__scan_plan plan;
  JITOPS__TRY(plan_call(fn, rt, call, &geom, &plan));
  return launch(fn, rt, &geom, &plan, workspace, stream);
}

static jitops_status workspace_of(const char *fn, jitops_runtime_t *rt,
                                  const jitops__scan_call *call, size_t *bytes) {
  *bytes = 0;
  if (is_empty(call))
    return JITOPS_SUCCESS;
  jitops__scan_geom geom;
  jitops__scan_plan plan;
  JITOPS__TRY(plan_call(fn, rt, call, &geom, &plan));
  *bytes = plan.scratch_bytes;
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

/* ---- prewarm catalogue --------------------------------------------------------------------- */

/* The layouts most calls collapse to: a contiguous matrix scanned along its rows (rows
 * kernel, one batch dimension) or along its columns (cols kernel with look-back, one batch
 * dimension: the long-axis case), for f32 and bf16. (A cumsum backward is a cumsum.) */
typedef struct catalogue_layout {
  jitops__scan_kind kind;
  int nb;
  int lookback;
} catalogue_layout;

static const catalogue_layout layouts[] = {{JITOPS__SCAN_ROWS, 1, 0}, {JITOPS__SCAN_COLS, 1, 1}};
static const jitops__scan_kop catalogue_kops[] = {
    JITOPS__SCAN_K_CUMSUM,       JITOPS__SCAN_K_CUMPROD, JITOPS__SCAN_K_CUMMAX,
    JITOPS__SCAN_K_CUMMIN,       JITOPS__SCAN_K_LCSE,    JITOPS__SCAN_K_CUMPROD_BWD,
    JITOPS__SCAN_K_EXTREMUM_BWD, JITOPS__SCAN_K_LCSE_BWD};
static const jitops__dtype catalogue_dtypes[] = {JITOPS__DTYPE_F32, JITOPS__DTYPE_BF16};

enum {
  N_LAYOUTS = sizeof layouts / sizeof layouts[0],
  N_KOPS = sizeof catalogue_kops / sizeof catalogue_kops[0],
  N_DTYPES = sizeof catalogue_dtypes / sizeof catalogue_dtypes[0]
};

static size_t scan_count(void) {
  return (size_t)N_LAYOUTS * N_KOPS * N_DTYPES;
}

static void scan_entry(size_t index, char *buf, size_t size) {
  const catalogue_layout *l = &layouts[index % N_LAYOUTS];
  index /= N_LAYOUTS;
  const jitops__dtype dtype = catalogue_dtypes[index % N_DTYPES];
  const jitops__scan_kop kop = catalogue_kops[index / N_DTYPES];
  jitops__scan_kernel_name(kop, dtype, l->kind, l->nb, l->lookback, buf, size);
}

static const char *scan_describe(size_t index) {
  static _Thread_local char text[256];
  scan_entry(index, text, sizeof text);
  return text;
}

static jitops_status scan_compile(jitops_runtime_t *runtime, size_t index) {
  char name[256];
  scan_entry(index, name, sizeof name);
  jitops_kernel_t *kernel;
  return jitops_kernel_get(runtime, SOURCE, name, NULL, 0, &kernel);
}

const jitops__catalogue_family jitops__catalogue_scan = {"scan", scan_count, scan_describe,
                                                         scan_compile};
