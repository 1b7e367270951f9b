/* The device work of one forward call, in order (passes.c explains it): GEMMs on cuBLASLt
 * and the kernels between and after them, on the caller's stream. */
#ifndef JITOPS_OPS_FLCE_PASSES_H
#define JITOPS_OPS_FLCE_PASSES_H

#include "ops/flce/args.h"
#include "ops/flce/kernels.h"
#include "ops/flce/plan.h"
#include "runtime/op_support.h"

/* A forward call ready to run: validated, planned, its kernels loaded, its scratch acquired. */
typedef struct jitops__flce_forward {
  jitops_runtime_t *runtime;
  const jitops__flce_call *call;
  const jitops__flce_plan *plan;
  const jitops__flce_kernel_plan *kernel_plan;
  jitops_kernel_t *kernels[JITOPS__FLCE_K_ROLES]; /* NULL where kernel_plan names none */
  void *scratch; /* plan->workspace_bytes of device memory, any alignment */
  void *stream;
} jitops__flce_forward;

/* Enqueues every GEMM and kernel of the call. */
jitops_status jitops__flce_forward_run(const jitops__flce_forward *forward);

#endif
