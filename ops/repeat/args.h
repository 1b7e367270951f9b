/* Argument validation of the repeat entry points, on the host before any GPU work. */
#ifndef JITOPS_OPS_REPEAT_ARGS_H
#define JITOPS_OPS_REPEAT_ARGS_H

#include "runtime/op_support.h"

/* jitops_repeat: x repeated by `repeats` must give y's shape; one dtype (a float or an int). */
jitops_status jitops__repeat_check_forward(const char *fn, jitops_runtime_t *runtime,
                                           const DLTensor *x, const int64_t *repeats,
                                           int num_repeats, const DLTensor *y);

/* jitops_repeat_backward: dx repeated by `repeats` must give dy's shape; one float dtype. */
jitops_status jitops__repeat_check_backward(const char *fn, jitops_runtime_t *runtime,
                                            const DLTensor *dy, const int64_t *repeats,
                                            int num_repeats, const DLTensor *dx);

#endif
