/* The kernels a segment plan uses, each one template instance of the family's sources, fetched
 * through jitops_kernel_get (memory, then disk, then NVRTC) before the first launch: a compile
 * failure then leaves no half-done work on the stream, and a compile-only runtime can prewarm
 * a whole call (the catalogue). */
#ifndef JITOPS_OPS_SEGMENT_KERNELS_H
#define JITOPS_OPS_SEGMENT_KERNELS_H

#include "ops/segment/plan.h"
#include "runtime/op_support.h"

/* The radix sort's kernels: the digit histogram and the counting pass (every pass). */
typedef struct jitops__segment_sort_kernels {
  jitops_kernel_t *histogram, *pass;
} jitops__segment_sort_kernels;

/* NULL where the plan's path does not use one. */
typedef struct jitops__segment_forward_kernels {
  jitops__segment_sort_kernels sort;
  jitops_kernel_t *reduce, *fixup;
  jitops_kernel_t *atomic, *finalize;
  jitops_kernel_t *tile_sums, *tile_combine;
  jitops_kernel_t *bucket_count, *bucket_offsets, *bucket_scatter, *bucket_extreme;
  jitops_kernel_t *digit_scatter, *digit_reduce;
  jitops_kernel_t *narrow_prepare, *narrow_add, *narrow_finalize;
  jitops_kernel_t *count_too_large;
} jitops__segment_forward_kernels;

typedef struct jitops__segment_backward_kernels {
  jitops_kernel_t *offsets, *count_rows; /* mean */
  jitops_kernel_t *gather;               /* sum, mean */
  jitops_kernel_t *mark, *split;         /* max, min by a tie table */
  jitops__segment_sort_kernels sort;     /* max, min by runs, unsorted ids */
  jitops_kernel_t *runs_mark, *runs_fix; /* max, min by runs */
} jitops__segment_backward_kernels;

/* The kernels of `plan`, for a call that `launches` them on `stream` (whose cold kernels may
 * then be quick builds, and the digit path's fallback kernels NULL: runtime/kernel_batch.h) or
 * for the prewarm catalogue (full builds, every one). */
jitops_status jitops__segment_get_forward_kernels(jitops_runtime_t *runtime,
                                                  const jitops__segment_call *call,
                                                  const jitops__segment_forward_plan *plan,
                                                  bool launches, void *stream,
                                                  jitops__segment_forward_kernels *out);
/* The digit path's fallback kernels (sort, chunked reduction, fixup) into `kernels`, for a call
 * that deferred them (runtime/kernel_batch.h) and found the fallback flag up. */
jitops_status jitops__segment_get_digit_fallback(jitops_runtime_t *runtime,
                                                 const jitops__segment_call *call,
                                                 const jitops__segment_forward_plan *plan,
                                                 void *stream,
                                                 jitops__segment_forward_kernels *kernels);
jitops_status jitops__segment_get_backward_kernels(jitops_runtime_t *runtime,
                                                   const jitops__segment_call *call,
                                                   const jitops__segment_backward_plan *plan,
                                                   bool launches, void *stream,
                                                   jitops__segment_backward_kernels *out);

#endif
