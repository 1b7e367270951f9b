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
#include "runtime/launch.h"
#include "runtime/scratch.h"
#include "runtime/state.h"
#include "runtime/tuning.h"

/* ---- DLPack tensors ---------------------------------------------------------------------- */

typedef enum jitops__dtype {
  JITOPS__DTYPE_INVALID = 0,
  JITOPS__DTYPE_F16,
  JITOPS__DTYPE_BF16,
  JITOPS__DTYPE_F32,
  JITOPS__DTYPE_F64,
  JITOPS__DTYPE_I32,
  JITOPS__DTYPE_I64
} jitops__dtype;

/* The library's dtype for a DLDataType (lanes must be 1), or JITOPS__DTYPE_INVALID. */
jitops__dtype jitops__dtype_of(DLDataType dtype);

/* The template type's spelling, as used in name expressions: "jitops::half",
 * "jitops::bfloat16", "float", "double", "int", "long long". */
const char *jitops__dtype_cname(jitops__dtype dtype);

/* "f16", "bf16", "f32", "f64", "i32", "i64" for messages. */
const char *jitops__dtype_name(jitops__dtype dtype);

size_t jitops__dtype_size(jitops__dtype dtype);

/* Checks that `tensor` is non-NULL, lives on the runtime's device (kDLCUDA or
 * kDLCUDAManaged with the runtime's device_id; compile-only runtimes accept any CUDA device),
 * has 0 ≤ ndim ≤ max_ndim, non-negative shape, and non-NULL data unless it is empty. `fn` and
 * `arg` name the entry point and the argument in the message. */
jitops_status jitops__tensor_check(const char *fn, const char *arg, const DLTensor *tensor,
                                   const jitops_runtime_t *runtime, int max_ndim);

/* Checks that `tensor` lives in host memory (kDLCPU or kDLCUDAHost) with the given rank. */
jitops_status jitops__host_tensor_check(const char *fn, const char *arg, const DLTensor *tensor,
                                        int ndim);

/* Element strides of `tensor` (its own, or compact row-major when NULL) into out[ndim]. */
void jitops__tensor_strides(const DLTensor *tensor, int64_t *out);

int64_t jitops__tensor_numel(const DLTensor *tensor);

/* The first element's address: data + byte_offset. */
void *jitops__tensor_ptr(const DLTensor *tensor);

/* 1 when both have the same ndim and shape. */
int jitops__same_shape(const DLTensor *a, const DLTensor *b);

/* ---- catalogue --------------------------------------------------------------------------- */

/* An op family's share of the prewarm catalogue (runtime/catalogue.c lists the families). */
typedef struct jitops__catalogue_family {
  const char *op;
  size_t (*count)(void);
  const char *(*describe)(size_t index);
  jitops_status (*compile)(jitops_runtime_t *runtime, size_t index);
} jitops__catalogue_family;

#endif
