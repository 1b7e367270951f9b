/* Kernel launches for the ops, on the caller's stream in the runtime's primary context. */
#ifndef JITOPS_RUNTIME_LAUNCH_H
#define JITOPS_RUNTIME_LAUNCH_H

#include <stdint.h>

#include "jitops/jitops.h"

/* A launch with grid and block as (x, y, z). Returns JITOPS_ERR_NO_DEVICE on a compile-only
 * runtime and JITOPS_ERR_DRIVER (with the driver's message) when the launch fails. */
jitops_status jitops__launch(const jitops_kernel_t *kernel, uint32_t gx, uint32_t gy, uint32_t gz,
                             uint32_t bx, uint32_t by, uint32_t bz, uint32_t shared_bytes,
                             void *stream, void **args);

/* The same launch, for a kernel that follows another of the op's kernels on the stream: on
 * sm_90 and newer (with a driver for CUDA 12.3 or newer, unless JITOPS_DEPENDENT_LAUNCHES=0) it
 * is a programmatic dependent launch, so the GPU may set its blocks up while the previous
 * kernel's last blocks drain. Contract: the kernel calls
 * jitops::wait_for_previous_grid() (common.cuh) before it touches any memory, and the previous
 * operation on the stream is a kernel (after a memset or a copy, use jitops__launch). */
jitops_status jitops__launch_after(const jitops_kernel_t *kernel, uint32_t gx, uint32_t gy,
                                   uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                                   uint32_t shared_bytes, void *stream, void **args);

#endif
