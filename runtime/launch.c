/* Launches and the stream-ordered helpers ops use: scratch memory, memset, memcpy. All of it
 * runs in the runtime's primary context on the caller's stream, and never synchronizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

static jitops_status no_device(const char *fn) {
  return jitops__fail(JITOPS_ERR_NO_DEVICE,
                      "%s: this runtime is compile-only (no GPU): it compiles and caches "
                      "kernels but cannot run them",
                      fn);
}

jitops_status jitops__context_push(jitops_runtime_t *rt, int *pushed) {
  *pushed = 0;
  CUcontext current = NULL;
  rt->driver->cuCtxGetCurrent(&current);
  if (current == rt->context)
    return JITOPS_SUCCESS;
  CUresult r = rt->driver->cuCtxPushCurrent(rt->context);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(rt->driver, r, "making the runtime's context current");
  *pushed = 1;
  return JITOPS_SUCCESS;
}

void jitops__context_restore(jitops_runtime_t *rt, int pushed) {
  if (pushed) {
    CUcontext popped;
    rt->driver->cuCtxPopCurrent(&popped);
  }
}

/* Per-thread memory of whether jitops__context_enter pushed. Entered blocks do not nest. */
static _Thread_local int entered_pushed;

jitops_status jitops__context_enter(jitops_runtime_t *rt) {
  if (rt->context == NULL)
    return no_device("jitops__context_enter");
  return jitops__context_push(rt, &entered_pushed);
}

void jitops__context_leave(jitops_runtime_t *rt) {
  jitops__context_restore(rt, entered_pushed);
  entered_pushed = 0;
}

static jitops_status check_dims(const jitops_kernel_t *k, const uint32_t grid[3],
                                const uint32_t block[3]) {
  static const uint32_t grid_max[3] = {2147483647u, 65535u, 65535u};
  static const uint32_t block_max[3] = {1024u, 1024u, 64u};
  static const char axis[3] = {'x', 'y', 'z'};
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0 || grid[i] > grid_max[i])
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "jitops_kernel_launch: params.grid[%d] (%c) is %u; expected 1..%u", i,
                          axis[i], grid[i], grid_max[i]);
    if (block[i] == 0 || block[i] > block_max[i])
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "jitops_kernel_launch: params.block[%d] (%c) is %u; expected 1..%u", i,
                          axis[i], block[i], block_max[i]);
  }
  uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
  if (threads > (uint64_t)k->runtime->props.max_threads_per_block)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "jitops_kernel_launch: params.block has %llu threads; the device allows "
                        "%d",
                        (unsigned long long)threads, k->runtime->props.max_threads_per_block);
  return JITOPS_SUCCESS;
}

/* Raises the kernel's dynamic shared memory limit when a launch needs more than the default.
 * The default (48 KiB) bounds static plus dynamic memory, so a kernel with static shared
 * memory needs the opt-in below 48 KiB of dynamic memory too. Racing threads may both set
 * the attribute; it only grows, so that is harmless. */
static jitops_status allow_shared(jitops_kernel_t *k, uint32_t bytes) {
  jitops_runtime_t *rt = k->runtime;
  uint64_t total = (uint64_t)bytes + k->static_shared;
  if (total <= rt->props.smem_per_block ||
      bytes <= __atomic_load_n(&k->shared_optin, __ATOMIC_RELAXED))
    return JITOPS_SUCCESS;
  if (total > rt->props.smem_per_block_optin)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "jitops_kernel_launch: params.shared_bytes %u plus the kernel's %u "
                        "static bytes exceed the device's %zu",
                        bytes, k->static_shared, rt->props.smem_per_block_optin);
  CUresult r = rt->driver->cuFuncSetAttribute(
      k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(rt->driver, r, "jitops_kernel_launch: cuFuncSetAttribute");
  __atomic_store_n(&k->shared_optin, bytes, __ATOMIC_RELAXED);
  return JITOPS_SUCCESS;
}

/* cuLaunchKernelEx with programmatic stream serialization allowed: the kernel may start before
 * the previous kernel on the stream has finished, and waits for it in griddepcontrol.wait. */
static CUresult launch_programmatic(const jitops_kernel_t *k, const uint32_t grid[3],
                                    const uint32_t block[3], uint32_t shared_bytes, void *stream,
                                    void **args) {
  CUlaunchAttribute attribute = {0};
  attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attribute.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config = {0};
  config.gridDimX = grid[0];
  config.gridDimY = grid[1];
  config.gridDimZ = grid[2];
  config.blockDimX = block[0];
  config.blockDimY = block[1];
  config.blockDimZ = block[2];
  config.sharedMemBytes = shared_bytes;
  config.hStream = (CUstream)stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return k->runtime->driver->cuLaunchKernelEx(&config, k->function, args, NULL);
}

static jitops_status launch(const jitops_kernel_t *kernel, const uint32_t grid[3],
                            const uint32_t block[3], uint32_t shared_bytes, void *stream,
                            void **args, bool after_previous) {
  jitops_kernel_t *k = (jitops_kernel_t *)kernel;
  jitops_runtime_t *rt = k->runtime;
  JITOPS__TRY(check_dims(k, grid, block));
  if (k->function == NULL)
    return no_device("jitops_kernel_launch");
  int pushed;
  JITOPS__TRY(jitops__context_push(rt, &pushed));
  jitops_status status = allow_shared(k, shared_bytes);
  CUresult r = CUDA_SUCCESS;
  if (status == JITOPS_SUCCESS && after_previous && rt->dependent_launches)
    r = launch_programmatic(k, grid, block, shared_bytes, stream, args);
  else if (status == JITOPS_SUCCESS)
    r = rt->driver->cuLaunchKernel(k->function, grid[0], grid[1], grid[2], block[0], block[1],
                                   block[2], shared_bytes, (CUstream)stream, args, NULL);
  jitops__context_restore(rt, pushed);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(rt->driver, r, "jitops_kernel_launch: cuLaunchKernel");
  return status;
}

jitops_status jitops_kernel_launch(const jitops_kernel_t *kernel,
                                   const jitops_launch_params *params, void **args) {
  JITOPS__REQUIRE_NONNULL("jitops_kernel_launch", kernel);
  JITOPS__REQUIRE_NONNULL("jitops_kernel_launch", params);
  return launch(kernel, params->grid, params->block, params->shared_bytes, params->stream, args,
                false);
}

jitops_status jitops__launch(const jitops_kernel_t *kernel, uint32_t gx, uint32_t gy, uint32_t gz,
                             uint32_t bx, uint32_t by, uint32_t bz, uint32_t shared_bytes,
                             void *stream, void **args) {
  const uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(kernel, grid, block, shared_bytes, stream, args, false);
}

jitops_status jitops__launch_after(const jitops_kernel_t *kernel, uint32_t gx, uint32_t gy,
                                   uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                                   uint32_t shared_bytes, void *stream, void **args) {
  const uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(kernel, grid, block, shared_bytes, stream, args, true);
}

/* ---- stream-ordered memory ------------------------------------------------------------- */

/* Runs `call` (a driver call) in the runtime's context. */
#define IN_CONTEXT(rt, what, call)                                                                 \
  do {                                                                                             \
    if ((rt)->context == NULL)                                                                     \
      return no_device(what);                                                                      \
    int pushed_;                                                                                   \
    JITOPS__TRY(jitops__context_push((rt), &pushed_));                                             \
    CUresult r_ = (call);                                                                          \
    jitops__context_restore((rt), pushed_);                                                        \
    if (r_ != CUDA_SUCCESS)                                                                        \
      return jitops__driver_fail((rt)->driver, r_, what);                                          \
    return JITOPS_SUCCESS;                                                                         \
  } while (0)

/* ---- the scratch pool ------------------------------------------------------------------ */

#define SCRATCH_KEEP_DEFAULT ((uint64_t)256 << 20)

static uint64_t scratch_keep_bytes(void) {
  const char *env = getenv("JITOPS_SCRATCH_KEEP_BYTES");
  if (env == NULL || *env == '\0')
    return SCRATCH_KEEP_DEFAULT;
  char *end = NULL;
  unsigned long long v = strtoull(env, &end, 10);
  return end != NULL && *end == '\0' && env[0] != '-' ? (uint64_t)v : SCRATCH_KEEP_DEFAULT;
}

static jitops_status pool_create(jitops_runtime_t *rt, void **out) {
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = rt->device;
  CUmemoryPool pool = NULL;
  CUresult r = rt->driver->cuMemPoolCreate(&pool, &props);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(rt->driver, r, "creating the scratch memory pool");
  cuuint64_t keep = scratch_keep_bytes();
  r = rt->driver->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
  if (r != CUDA_SUCCESS) {
    rt->driver->cuMemPoolDestroy(pool);
    return jitops__driver_fail(rt->driver, r, "setting the scratch pool's release threshold");
  }
  *out = pool;
  return JITOPS_SUCCESS;
}

/* Allocations still in flight keep the pool's memory until they are freed (the driver
 * releases a destroyed pool's resources once none remain). */
static void pool_destroy(jitops_runtime_t *rt, void *pool) {
  int pushed;
  if (jitops__context_push(rt, &pushed) == JITOPS_SUCCESS) {
    rt->driver->cuMemPoolDestroy((CUmemoryPool)pool);
    jitops__context_restore(rt, pushed);
  }
}

static jitops_status alloc_async(jitops_runtime_t *rt, size_t bytes, void *stream, void **out) {
  CUdeviceptr ptr = 0;
  if (rt->context == NULL)
    return no_device("allocating scratch memory");
  int pushed;
  JITOPS__TRY(jitops__context_push(rt, &pushed));
  void *pool = NULL;
  jitops_status status =
      jitops__runtime_state(rt, JITOPS__SLOT_SCRATCH_POOL, pool_create, pool_destroy, &pool);
  CUresult r = CUDA_SUCCESS;
  if (status == JITOPS_SUCCESS)
    r = rt->driver->cuMemAllocFromPoolAsync(&ptr, bytes, (CUmemoryPool)pool, (CUstream)stream);
  jitops__context_restore(rt, pushed);
  JITOPS__TRY(status);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(rt->driver, r,
                               "allocating scratch memory (cuMemAllocFromPoolAsync)");
  *out = (void *)(uintptr_t)ptr;
  return JITOPS_SUCCESS;
}

jitops_status jitops__scratch_acquire(jitops_runtime_t *rt, void *stream,
                                      const jitops_workspace *workspace, size_t bytes,
                                      jitops__scratch *out) {
  memset(out, 0, sizeof *out);
  out->bytes = bytes;
  if (bytes == 0)
    return JITOPS_SUCCESS;
  if (workspace != NULL && workspace->ptr != NULL && workspace->bytes >= bytes) {
    out->ptr = workspace->ptr;
    return JITOPS_SUCCESS;
  }
  JITOPS__TRY(alloc_async(rt, bytes, stream, &out->ptr));
  out->owned = true;
  return JITOPS_SUCCESS;
}

void jitops__scratch_release(jitops_runtime_t *rt, void *stream, jitops__scratch *scratch) {
  if (scratch->owned && scratch->ptr != NULL && rt->context != NULL) {
    int pushed;
    if (jitops__context_push(rt, &pushed) == JITOPS_SUCCESS) {
      rt->driver->cuMemFreeAsync((CUdeviceptr)(uintptr_t)scratch->ptr, (CUstream)stream);
      jitops__context_restore(rt, pushed);
    }
  }
  memset(scratch, 0, sizeof *scratch);
}

jitops_status jitops__memset8_async(jitops_runtime_t *rt, void *ptr, uint8_t value, size_t bytes,
                                    void *stream) {
  if (bytes == 0)
    return JITOPS_SUCCESS;
  IN_CONTEXT(
      rt, "cuMemsetD8Async",
      rt->driver->cuMemsetD8Async((CUdeviceptr)(uintptr_t)ptr, value, bytes, (CUstream)stream));
}

jitops_status jitops__memset32_async(jitops_runtime_t *rt, void *ptr, uint32_t value, size_t count,
                                     void *stream) {
  if (count == 0)
    return JITOPS_SUCCESS;
  IN_CONTEXT(
      rt, "cuMemsetD32Async",
      rt->driver->cuMemsetD32Async((CUdeviceptr)(uintptr_t)ptr, value, count, (CUstream)stream));
}

jitops_status jitops__memcpy_async(jitops_runtime_t *rt, void *dst, const void *src, size_t bytes,
                                   void *stream) {
  if (bytes == 0)
    return JITOPS_SUCCESS;
  IN_CONTEXT(rt, "cuMemcpyAsync",
             rt->driver->cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                       bytes, (CUstream)stream));
}
