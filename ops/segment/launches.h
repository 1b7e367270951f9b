/* The launch sequences of a planned segment call, all on the caller's stream: the forward's
 * paths (forward.c), the backward's (backward.c), and the radix sort both use (sort.c). Each
 * fills the kernels' arguments (segment_abi.h) from the call, the plan and the scratch, and
 * launches; a kernel that follows another of the call's kernels is a dependent launch
 * (jitops__launch_after) where it waits for its predecessor (wait_for_previous_grid). */
#ifndef JITOPS_OPS_SEGMENT_LAUNCHES_H
#define JITOPS_OPS_SEGMENT_LAUNCHES_H

#include "ops/segment/kernels.h"
#include "ops/segment/plan.h"
#include "ops/segment/segment_abi.h"
#include "runtime/op_support.h"

/* What run.c hands a launch sequence besides the plan and its kernels: the call, the scratch
 * (the workspace or stream-ordered memory, the plan's workspace_bytes of it), and the ids on the
 * device (the caller's, or the host ids' copy in the scratch). */
typedef struct jitops__segment_launch {
  jitops_runtime_t *runtime;
  const jitops__segment_call *call;
  char *scratch;
  jitops__segment_ids ids;
  void *stream;
} jitops__segment_launch;

jitops_status jitops__segment_launch_forward(const jitops__segment_launch *launch,
                                             const jitops__segment_forward_plan *plan,
                                             const jitops__segment_forward_kernels *kernels);
jitops_status jitops__segment_launch_backward(const jitops__segment_launch *launch,
                                              const jitops__segment_backward_plan *plan,
                                              const jitops__segment_backward_kernels *kernels);

/* The radix sort's keys and rows (or carried values) in segment order. */
typedef struct jitops__segment_sorted {
  const int32_t *keys, *rows;
} jitops__segment_sorted;

/* Sorts `ids` by the plan's radix passes (its zeroed range cleared before); `data` is read only
 * when the plan carries values. On the digit path every kernel follows the digit reduction and
 * runs only when the fallback flag is up; its histogram then also zeroes the segment bounds. */
jitops_status jitops__segment_launch_sort(const jitops__segment_forward_plan *plan,
                                          const jitops__segment_sort_kernels *kernels,
                                          char *scratch, jitops__segment_ids ids,
                                          const jitops__segment_rows *data, void *stream,
                                          jitops__segment_sorted *sorted);

#endif
