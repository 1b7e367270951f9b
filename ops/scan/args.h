/* Argument validation of the scan entry points, and what a valid call hands the kernel: the
 * kernel op, its tensors in template order (inputs, then outputs), and the kernel's direction
 * (a backward scan runs against its forward). All of it on the host, before any GPU work. */
#ifndef JITOPS_OPS_SCAN_ARGS_H
#define JITOPS_OPS_SCAN_ARGS_H

#include "jitops/scan.h"
#include "ops/scan/plan.h"
#include "runtime/op_support.h"

typedef struct jitops__scan_call {
  jitops__scan_kop kop;
  jitops__dtype dtype;
  int axis; /* normalized to [0, rank) */
  int kernel_reverse;
  int ntens;
  const DLTensor *tensors[JITOPS__SCAN_MAX_TENSORS];
} jitops__scan_call;

jitops_status jitops__scan_check_forward(const char *fn, jitops_runtime_t *runtime,
                                         jitops_scan_op op, const DLTensor *x, int axis,
                                         int reverse, const DLTensor *y, const DLTensor *indices,
                                         jitops__scan_call *call);

jitops_status jitops__scan_check_backward(const char *fn, jitops_runtime_t *runtime,
                                          jitops_scan_op op, const DLTensor *dy, const DLTensor *x,
                                          const DLTensor *y, const DLTensor *indices, int axis,
                                          int reverse, const DLTensor *dx, jitops__scan_call *call);

#endif
