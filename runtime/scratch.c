/* Stream-ordered memory for the ops: scratch from the caller's workspace or the runtime's
 * memory pool, and device memset and memcpy. All of it runs in the runtime's primary context
 * on the caller's stream, and never synchronizes, but for the read of a deferred kernel's flag
 * (jitops__read_device_int32). */
#include "runtime/scratch.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "runtime/context.h"
#include "runtime/environment.h"
#include "runtime/runtime_internal.h"
#include "runtime/state.h"

/* Runs `call` (a driver call) in the runtime's context, unless `count` is 0: nothing to do. */
#define IN_CONTEXT(rt, count, what, call)                                                          \
  do {                                                                                             \
    if ((count) == 0)                                                                              \
      return JITOPS_SUCCESS;                                                                       \
    if ((rt)->context == NULL)                                                                     \
      return jitops__fail_no_device(what);                                                         \
    int pushed_;                                                                                   \
    JITOPS__TRY(jitops__context_push((rt), &pushed_));                                             \
    CUresult r_ = (call);                                                                          \
    jitops__context_restore((rt), pushed_);                                                        \
    if (r_ != CUDA_SUCCESS)                                                                        \
      return jitops__driver_fail((rt)->driver, r_, what);                                          \
    return JITOPS_SUCCESS;                                                                         \
  } while (0)

/* ---- the device's memory ------------------------------------------------------------- */

jitops_status jitops__device_memory(jitops_runtime_t *runtime, size_t *free_bytes,
                                    size_t *total_bytes) {
  IN_CONTEXT(runtime, 1, "reading the device's free memory",
             runtime->driver->cuMemGetInfo(free_bytes, total_bytes));
}

/* ---- the scratch pool ------------------------------------------------------------------ */

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
  cuuint64_t keep = jitops__env_scratch_keep_bytes();
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
    return jitops__fail_no_device("allocating scratch memory");
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

/* ---- the application's allocator ------------------------------------------------------- */

jitops_status jitops_runtime_set_allocator(jitops_runtime_t *runtime,
                                           const jitops_allocator *allocator) {
  static const char *const fn = "jitops_runtime_set_allocator";
  JITOPS__REQUIRE_NONNULL(fn, runtime);
  JITOPS__REQUIRE_NONNULL(fn, allocator);
  if (allocator->allocate == NULL || allocator->release == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: allocator->%s is NULL", fn,
                        allocator->allocate == NULL ? "allocate" : "release");
  pthread_mutex_lock(&runtime->state_lock);
  int installed = __atomic_load_n(&runtime->has_allocator, __ATOMIC_RELAXED);
  if (!installed) {
    runtime->allocator = *allocator;
    __atomic_store_n(&runtime->has_allocator, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&runtime->state_lock);
  if (installed)
    return jitops__fail(JITOPS_ERR_ALREADY_EXISTS, "%s: the runtime has an allocator already", fn);
  return JITOPS_SUCCESS;
}

static jitops_status alloc_from_application(jitops_runtime_t *rt, size_t bytes, void *stream,
                                            void **out) {
  *out = rt->allocator.allocate(rt->allocator.user, bytes, stream);
  if (*out == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY,
                        "the application's allocator returned no memory for %zu bytes of scratch",
                        bytes);
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
  if (__atomic_load_n(&rt->has_allocator, __ATOMIC_ACQUIRE)) {
    JITOPS__TRY(alloc_from_application(rt, bytes, stream, &out->ptr));
    out->source = JITOPS__SCRATCH_ALLOCATOR;
    return JITOPS_SUCCESS;
  }
  JITOPS__TRY(alloc_async(rt, bytes, stream, &out->ptr));
  out->source = JITOPS__SCRATCH_POOL;
  return JITOPS_SUCCESS;
}

void jitops__scratch_release(jitops_runtime_t *rt, void *stream, jitops__scratch *scratch) {
  if (scratch->source == JITOPS__SCRATCH_ALLOCATOR)
    rt->allocator.release(rt->allocator.user, scratch->ptr, scratch->bytes, stream);
  if (scratch->source == JITOPS__SCRATCH_POOL && scratch->ptr != NULL && rt->context != NULL) {
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
  IN_CONTEXT(
      rt, bytes, "cuMemsetD8Async",
      rt->driver->cuMemsetD8Async((CUdeviceptr)(uintptr_t)ptr, value, bytes, (CUstream)stream));
}

jitops_status jitops__memset32_async(jitops_runtime_t *rt, void *ptr, uint32_t value, size_t count,
                                     void *stream) {
  IN_CONTEXT(
      rt, count, "cuMemsetD32Async",
      rt->driver->cuMemsetD32Async((CUdeviceptr)(uintptr_t)ptr, value, count, (CUstream)stream));
}

jitops_status jitops__memcpy_async(jitops_runtime_t *rt, void *dst, const void *src, size_t bytes,
                                   void *stream) {
  IN_CONTEXT(rt, bytes, "cuMemcpyAsync",
             rt->driver->cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                       bytes, (CUstream)stream));
}

jitops_status jitops__read_device_int32(jitops_runtime_t *rt, const int32_t *value, void *stream,
                                        int32_t *out) {
  if (rt->context == NULL)
    return jitops__fail_no_device("reading a device flag");
  int pushed;
  JITOPS__TRY(jitops__context_push(rt, &pushed));
  /* Synchronizing: in the relaxed capture mode, so that another thread's capture survives it.
   * The launch stream itself is not capturing (kernel_batch.h defers nothing then). */
  const int saved = jitops__capture_relax(rt);
  /* To pageable memory, the copy returns once it is done, after the stream's earlier work. */
  CUresult r = rt->driver->cuMemcpyAsync((CUdeviceptr)(uintptr_t)out, (CUdeviceptr)(uintptr_t)value,
                                         sizeof *out, (CUstream)stream);
  if (r == CUDA_SUCCESS)
    r = rt->driver->cuStreamSynchronize((CUstream)stream);
  jitops__capture_restore(rt, saved);
  jitops__context_restore(rt, pushed);
  return r == CUDA_SUCCESS
             ? JITOPS_SUCCESS
             : jitops__driver_fail(rt->driver, r, "waiting for the stream to read a device flag");
}
