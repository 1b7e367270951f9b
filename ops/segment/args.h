/* Argument validation of the segment entry points, on the host before any device work: every
 * tensor, scalar and option, into the call the planner takes (plan.h). */
#ifndef JITOPS_OPS_SEGMENT_ARGS_H
#define JITOPS_OPS_SEGMENT_ARGS_H

#include "jitops/segment.h"
#include "ops/segment/plan.h"
#include "runtime/op_support.h"

jitops_status jitops__segment_check_forward(const char *fn, jitops_runtime_t *runtime,
                                            jitops_segment_reduction reduction,
                                            const DLTensor *data, const DLTensor *segment_ids,
                                            int64_t num_segments, const DLTensor *out,
                                            const jitops_segment_options *options,
                                            jitops__segment_call *call);

jitops_status jitops__segment_check_backward(const char *fn, jitops_runtime_t *runtime,
                                             jitops_segment_reduction reduction,
                                             const DLTensor *grad_out, const DLTensor *data,
                                             const DLTensor *out, const DLTensor *segment_ids,
                                             int64_t num_segments, const DLTensor *grad_data,
                                             const jitops_segment_options *options,
                                             jitops__segment_call *call);

/* A workspace is optional, but one with bytes must have a pointer. */
jitops_status jitops__segment_check_workspace(const char *fn, const jitops_workspace *workspace);

#endif
