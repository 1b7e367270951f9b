/* What the host side of a built-in op (runtime/ops/) needs from the core: the device's
 * properties, kernels from the embedded templates, launches, scratch memory, a few driver
 * calls, per-runtime state, and DLPack tensor checks. Ops include this and nothing deeper.
 *
 * The shape of an op entry point:
 *   1. validate every argument on the host (jitops__tensor_* below, jitops__fail),
 *   2. build the name expression for the template instance and get the kernel
 *      (jitops_kernel_get with a built-in source name such as "jitops/scan.cuh"),
 *   3. launch on the caller's stream (jitops__launch), with scratch from
 *      jitops__scratch_acquire / jitops__scratch_release.
 */
#ifndef JITOPS_RUNTIME_OP_SUPPORT_H
#define JITOPS_RUNTIME_OP_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitops/jitops.h"
#include "common/error.h"
#include "runtime/context.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/launch.h"
#include "runtime/scratch.h"
#include "runtime/state.h"
#include "runtime/tensor_checks.h"
#include "runtime/tuning.h"

#endif
