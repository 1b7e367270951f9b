/* How each kernel of flce.cuh is launched: its one argument (flce_abi.h), filled by the
 * caller, and the grid and block the kernel expects. All on the caller's stream. */
#ifndef JITOPS_OPS_FLCE_LAUNCHES_H
#define JITOPS_OPS_FLCE_LAUNCHES_H

#include "ops/flce/flce_abi.h"
#include "runtime/op_support.h"

/* rows: one block of `block` threads per row of the buffer. */
jitops_status jitops__flce_launch_rows(const jitops_kernel_t *kernel, int block, int64_t nrows,
                                       const jitops__flce_rows_args *args, void *stream);

/* count_valid and reduce_loss: one block of JITOPS__FLCE_REDUCE_THREADS. */
jitops_status jitops__flce_launch_count(const jitops_kernel_t *kernel,
                                        const jitops__flce_count_args *args, void *stream);
jitops_status jitops__flce_launch_reduce(const jitops_kernel_t *kernel,
                                         const jitops__flce_reduce_args *args, void *stream);

/* colsum: one thread per column. */
jitops_status jitops__flce_launch_colsum(const jitops_kernel_t *kernel,
                                         const jitops__flce_colsum_args *args, void *stream);

/* convert, and scale or zero: threads (x, y) over (columns, rows). */
jitops_status jitops__flce_launch_convert(const jitops_kernel_t *kernel,
                                          const jitops__flce_convert_args *args, void *stream);
jitops_status jitops__flce_launch_scale(const jitops_kernel_t *kernel,
                                        const jitops__flce_scale_args *args, void *stream);

/* convert_flat and scale_flat (over elements of `elem` bytes): grid-stride, at most 16 blocks
 * per SM. */
jitops_status jitops__flce_launch_convert_flat(jitops_runtime_t *runtime,
                                               const jitops_kernel_t *kernel,
                                               const jitops__flce_convert_flat_args *args,
                                               void *stream);
jitops_status jitops__flce_launch_scale_flat(jitops_runtime_t *runtime,
                                             const jitops_kernel_t *kernel,
                                             const jitops__flce_scale_flat_args *args, size_t elem,
                                             void *stream);

#endif
