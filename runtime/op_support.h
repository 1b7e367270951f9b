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
#include "runtime/error.h"

/* ---- device ------------------------------------------------------------------------------ */

typedef struct jitops__device_props {
  int arch;                    /* 90 for sm_90 */
  int sm_count;                /* 0 on a compile-only runtime */
  int max_threads_per_block;   /* 1024 */
  size_t smem_per_block;       /* default limit, 48 KiB */
  size_t smem_per_block_optin; /* opt-in limit (227 KiB on sm_90) */
  size_t smem_per_sm;
  size_t l2_bytes;
} jitops__device_props;

/* Valid for the runtime's lifetime. A compile-only runtime reports its arch's typical values
 * (so that specialization choices can be made and prewarmed without a GPU). */
const jitops__device_props *jitops__runtime_props(const jitops_runtime_t *runtime);

/* ---- launches ---------------------------------------------------------------------------- */

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

/* Scratch memory: the caller's workspace when it is large enough, else a stream-ordered
 * allocation on `stream` from the runtime's own memory pool. Release with
 * jitops__scratch_release on the same stream (stream-ordered, so it is safe to release right
 * after the launches that use it, and graph-capturable). The pool keeps up to
 * $JITOPS_SCRATCH_KEEP_BYTES (default 256 MiB) of freed memory across synchronizations; the
 * device's default pool keeps none, so each call after a synchronization paid for fresh
 * memory (about 0.1 ms on an H100). */
typedef struct jitops__scratch {
  void *ptr;
  size_t bytes;
  bool owned;
} jitops__scratch;

jitops_status jitops__scratch_acquire(jitops_runtime_t *runtime, void *stream,
                                      const jitops_workspace *workspace, size_t bytes,
                                      jitops__scratch *out);
void jitops__scratch_release(jitops_runtime_t *runtime, void *stream, jitops__scratch *scratch);

/* cuMemsetD8Async / cuMemsetD32Async and cuMemcpyAsync (device to device) on `stream`. */
jitops_status jitops__memset8_async(jitops_runtime_t *runtime, void *ptr, uint8_t value,
                                    size_t bytes, void *stream);
jitops_status jitops__memset32_async(jitops_runtime_t *runtime, void *ptr, uint32_t value,
                                     size_t count, void *stream);
jitops_status jitops__memcpy_async(jitops_runtime_t *runtime, void *dst, const void *src,
                                   size_t bytes, void *stream);

/* Makes the runtime's context current on this thread for a block of driver calls that the
 * helpers above do not cover (cuBLASLt, say); always pair with jitops__context_leave. */
jitops_status jitops__context_enter(jitops_runtime_t *runtime);
void jitops__context_leave(jitops_runtime_t *runtime);

/* ---- per-runtime state for op families --------------------------------------------------- */

typedef enum jitops__state_slot {
  JITOPS__SLOT_CUBLASLT = 0,
  JITOPS__SLOT_FAMILY_1 = 1,
  JITOPS__SLOT_FAMILY_2 = 2,
  JITOPS__SLOT_FAMILY_3 = 3,
  JITOPS__SLOT_SCRATCH_POOL = 4, /* the core's: see jitops__scratch_acquire */
  JITOPS__SLOT_COUNT = 8
} jitops__state_slot;

/* Returns the state in `slot`, creating it with `create` on first use (under the runtime's
 * lock, so exactly once). `destroy` runs at jitops_runtime_destroy. */
jitops_status jitops__runtime_state(jitops_runtime_t *runtime, jitops__state_slot slot,
                                    jitops_status (*create)(jitops_runtime_t *, void **),
                                    void (*destroy)(jitops_runtime_t *, void *), void **out);

/* ---- tuned choices ----------------------------------------------------------------------- */

/* Some choices are made by timing candidates on the device (which cuBLASLt algorithm runs a
 * GEMM fastest, say). A timed choice is not reproducible, and a different choice gives
 * different bits, so it is made once per machine and kept in the kernel cache beside the
 * kernels: every later call, in this process and in the next, makes the same one.
 *
 * `what` names the kind of choice ("cublaslt-algo"), `id` holds everything the candidates
 * depend on (shape, dtypes, library version); the device's name is added to the key. */
typedef struct jitops__tuned {
  uint8_t key[16];
  bool claimed; /* we hold the cross-process claim: call _put or _abandon */
} jitops__tuned;

/* 1 with `size` bytes in `out` when the choice is on disk (or another process made it while
 * we waited for its claim). 0 when the caller should time the candidates; then, if
 * `tuned->claimed`, it must end with jitops__tuned_put or jitops__tuned_abandon. */
int jitops__tuned_get(jitops_runtime_t *runtime, const char *what, const void *id, size_t id_size,
                      void *out, size_t size, jitops__tuned *tuned);
/* Stores the choice (`description` is what `jitops-cache list` shows) and drops the claim. */
void jitops__tuned_put(jitops_runtime_t *runtime, const jitops__tuned *tuned, const char *op,
                       const char *description, const void *data, size_t size);
void jitops__tuned_abandon(jitops_runtime_t *runtime, const jitops__tuned *tuned);

/* Whether choices may be timed now: not with JITOPS_TUNE=0, not on a compile-only runtime, and
 * not while `stream` is being captured into a graph (timing needs a host synchronization).
 * This and jitops__time_candidates run inside jitops__context_enter. */
bool jitops__tuning_allowed(jitops_runtime_t *runtime, void *stream);

/* Times `count` candidates on `stream` after synchronizing it: `run(ctx, i)` enqueues
 * candidate i; each runs once to warm up, then `reps` times between events. The fastest
 * one's index goes to *best. A candidate that fails to enqueue is skipped; when all fail,
 * the first one's status is returned. */
jitops_status jitops__time_candidates(jitops_runtime_t *runtime, void *stream, int count, int reps,
                                      jitops_status (*run)(void *ctx, int index), void *ctx,
                                      int *best);

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
