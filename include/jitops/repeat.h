/*
 * libjitops repeat: torch.Tensor.repeat and its backward. Included by jitops/jitops.h.
 *
 * Semantics (torch.Tensor.repeat): `repeats` has num_repeats ≥ x's rank entries, at most 8;
 * x's shape is padded with leading 1s to num_repeats dimensions, and the output's dimension d
 * is padded_shape[d] × repeats[d]. A zero repeat gives an empty output. A rank-0 x with no
 * repeats gives a rank-0 y (one element).
 *
 * Layouts: any strides (in elements) and byte_offset; each element aligned to its size; an
 * output must not overlap itself, nor overlap the input.
 *
 * Determinism: the forward copies bits. The backward sums, for each element of dx, the dy of
 * all its copies in one fixed order (copy index row-major over the repeats, innermost repeat
 * fastest), in f32 for f16/bf16 and in the element type otherwise, so reruns are
 * bit-identical. With a zero repeat dx is all zeros.
 *
 * Errors (each with a message that names the argument):
 *   JITOPS_ERR_INVALID_ARGUMENT  runtime, x/y/dy/dx NULL; repeats NULL while num_repeats > 0
 *   JITOPS_ERR_INVALID_SHAPE     num_repeats below x's rank or above 8, a y/dy shape other
 *                                than the repeated shape, a dx shape other than x's
 *   JITOPS_ERR_OUT_OF_RANGE      a negative repeat; an output dimension beyond int64
 *   JITOPS_ERR_INVALID_DTYPE     dtypes that disagree; the backward takes floats only
 *   JITOPS_ERR_INVALID_LAYOUT    a misaligned first element, an output that overlaps itself
 *   JITOPS_ERR_INVALID_DEVICE    a tensor not on the runtime's CUDA device
 *   JITOPS_ERR_NO_DEVICE, JITOPS_ERR_COMPILE, JITOPS_ERR_DRIVER, JITOPS_ERR_OUT_OF_MEMORY
 */
#ifndef JITOPS_REPEAT_H
#define JITOPS_REPEAT_H

#include "jitops/jitops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = x.repeat(repeats). dtypes: f32, f64, f16, bf16, int32, int64 (x and y alike). No
 * workspace. Asynchronous on `stream`. */
JITOPS_API jitops_status jitops_repeat(jitops_runtime_t *runtime, const DLTensor *x,
                                       const int64_t *repeats, int num_repeats, DLTensor *y,
                                       void *stream);

/* dx = the gradient of x.repeat(repeats) for the output gradient dy: each dx element is the
 * sum of dy over its copies. dtypes: f32, f64, f16, bf16 (dy and dx alike). Workspace: when dx
 * is too small to occupy the GPU, the copies are summed in parallel ranges whose partial sums
 * need scratch; jitops_repeat_backward_workspace_size gives the bytes (usually 0). */
JITOPS_API jitops_status jitops_repeat_backward(jitops_runtime_t *runtime, const DLTensor *dy,
                                                const int64_t *repeats, int num_repeats,
                                                DLTensor *dx, const jitops_workspace *workspace,
                                                void *stream);

/* The workspace bytes jitops_repeat_backward needs for these arguments. */
JITOPS_API jitops_status jitops_repeat_backward_workspace_size(jitops_runtime_t *runtime,
                                                               const DLTensor *dy,
                                                               const int64_t *repeats,
                                                               int num_repeats, const DLTensor *dx,
                                                               size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* JITOPS_REPEAT_H */
