/*
 * libjitops scans: cumsum, cumprod, cummax, cummin and logcumsumexp along one axis, and their
 * backward passes. Included by jitops/jitops.h.
 *
 * Shapes and layouts. Tensors have rank 1 to 8 and any strides (in elements, negative and zero
 * included for inputs), with byte_offset honoured; each element must be aligned to its size.
 * An output must not overlap itself (no two of its elements at one address). `axis` may be
 * negative, counted from the end as in Python. `reverse` non-zero scans from the last element
 * to the first (the result of flip → scan → flip, with indices in the original coordinates).
 * An empty tensor (any dimension 0) is valid and launches nothing.
 *
 * In place: y may be x itself (the same data, byte_offset and strides), and dx may be dy
 * itself; any other overlap between inputs and outputs is undefined.
 *
 * dtypes. f32, f64, f16 and bf16 for every op; cumsum and cumprod also take int32 and int64,
 * which wrap around on overflow. Half types accumulate in f32 and round each output once.
 * Outputs have the input's dtype; indices are int64.
 *
 * Semantics as in PyTorch:
 *   - cummax/cummin: values and int64 indices along the axis. Among equal values the later
 *     one (in scan order) wins; a NaN wins over everything before it and carries its own
 *     index, so after a NaN the values stay NaN and the index moves to each later NaN.
 *   - logcumsumexp: y_i = log Σ_{j≤i} exp(x_j), exact for -inf inputs (all -inf gives -inf).
 *
 * Determinism: results are bit-identical from run to run on the same GPU (no floating-point
 * atomics; every sum has a fixed order). The order differs from a sequential loop, so floats
 * can differ from PyTorch's in the last bits.
 *
 * Accuracy: logcumsumexp in f32, f16 and bf16 (forward and backward) uses the GPU's
 * approximate base-2 exp and log (relative error about 2^-22), so y carries an absolute error
 * of a few 1e-7 (about (1 + |y|)·2^-22), the f32 rounding of values of order 1; f64 uses the
 * exact functions.
 *
 * Workspace: one very long axis split over several blocks needs scratch for the blocks'
 * partial states (a few percent of the tensor's bytes at most; usually none).
 * jitops_scan_workspace_size and jitops_scan_backward_workspace_size give the exact number
 * of bytes for a call with these tensors (it follows their shapes and strides and, for 2-byte
 * element types, whether their data starts on a 4-byte boundary). Pass NULL (or a workspace too
 * small) to have the library take it from the runtime's memory pool, stream-ordered on `stream`,
 * and free it there.
 *
 * Errors (each with a message that names the argument):
 *   JITOPS_ERR_INVALID_ARGUMENT  runtime or a required tensor NULL, op not a jitops_scan_op,
 *                                indices missing for cummax/cummin or given for another op,
 *                                a saved tensor missing for the backward op that needs it
 *   JITOPS_ERR_INVALID_SHAPE     rank 0 or above 8, shapes that differ between the tensors
 *   JITOPS_ERR_OUT_OF_RANGE      axis outside [-rank, rank)
 *   JITOPS_ERR_INVALID_DTYPE     a dtype the op does not take, or tensors that disagree
 *   JITOPS_ERR_INVALID_LAYOUT    a misaligned first element, an output that overlaps itself
 *   JITOPS_ERR_INVALID_DEVICE    a tensor not on the runtime's CUDA device
 *   JITOPS_ERR_NO_DEVICE         a compile-only runtime (after compiling the kernel)
 *   JITOPS_ERR_COMPILE, JITOPS_ERR_DRIVER, JITOPS_ERR_OUT_OF_MEMORY from the core
 */
#ifndef JITOPS_SCAN_H
#define JITOPS_SCAN_H

#include "jitops/jitops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum jitops_scan_op {
  JITOPS_SCAN_CUMSUM = 0,
  JITOPS_SCAN_CUMPROD = 1,
  JITOPS_SCAN_CUMMAX = 2,
  JITOPS_SCAN_CUMMIN = 3,
  JITOPS_SCAN_LOGCUMSUMEXP = 4
} jitops_scan_op;

/* y = op(x) along `axis`. `indices` (int64, x's shape) receives cummax/cummin's indices and
 * must be NULL for the other ops. Asynchronous on `stream`. */
JITOPS_API jitops_status jitops_scan(jitops_runtime_t *runtime, jitops_scan_op op,
                                     const DLTensor *x, int axis, int reverse, DLTensor *y,
                                     DLTensor *indices, const jitops_workspace *workspace,
                                     void *stream);

/* dx = the gradient of the forward scan (same op, axis and reverse) for the output gradient
 * dy. The saved forward tensors each op needs (the others are ignored and may be NULL):
 *   cumsum        none
 *   cumprod       x and y   zero-safe: dx_j = (∏_{k<j} x_k)·R_j, R_j = dy_j + x_{j+1}·R_{j+1},
 *                           the exclusive product read from y, with no division
 *   cummax/min    indices   dy is routed to the saved indices (a segmented sum, no atomics);
 *                           the indices must be ones the forward produced
 *   logcumsumexp  x and y   dx_j = Σ_{i≥j} dy_i·exp(x_j − y_i), computed stably in the log
 *                           domain; dx_j is 0 where x_j is −inf. y is read as saved: in f16
 *                           and bf16 its rounding (up to 2^-11 or 2^-8 of |y|, absolute)
 *                           scales each term by exp of that error, so dx carries it too
 * dtypes: f32, f64, f16, bf16 (dy, dx, x and y alike). Asynchronous on `stream`. */
JITOPS_API jitops_status jitops_scan_backward(jitops_runtime_t *runtime, jitops_scan_op op,
                                              const DLTensor *dy, const DLTensor *x,
                                              const DLTensor *y, const DLTensor *indices, int axis,
                                              int reverse, DLTensor *dx,
                                              const jitops_workspace *workspace, void *stream);

/* The workspace bytes jitops_scan needs for these arguments (often 0). Validates them as
 * jitops_scan does; needs no GPU work. */
JITOPS_API jitops_status jitops_scan_workspace_size(jitops_runtime_t *runtime, jitops_scan_op op,
                                                    const DLTensor *x, int axis, int reverse,
                                                    const DLTensor *y, const DLTensor *indices,
                                                    size_t *bytes);

/* The workspace bytes jitops_scan_backward needs for these arguments (often 0). */
JITOPS_API jitops_status jitops_scan_backward_workspace_size(jitops_runtime_t *runtime,
                                                             jitops_scan_op op, const DLTensor *dy,
                                                             const DLTensor *x, const DLTensor *y,
                                                             const DLTensor *indices, int axis,
                                                             int reverse, const DLTensor *dx,
                                                             size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* JITOPS_SCAN_H */
