/* Stream-ordered memory for the ops: scratch, memset and memcpy on the caller's stream. */
#ifndef JITOPS_RUNTIME_SCRATCH_H
#define JITOPS_RUNTIME_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitops/jitops.h"

/* Scratch memory: the caller's workspace when it is large enough, else the application's
 * allocator when one is installed (jitops_runtime_set_allocator), else a stream-ordered
 * allocation on `stream` from the runtime's own memory pool. Release with
 * jitops__scratch_release on the same stream (stream-ordered, so it is safe to release right
 * after the launches that use it, and graph-capturable). The pool keeps up to
 * $JITOPS_SCRATCH_KEEP_BYTES (default 256 MiB) of freed memory across synchronizations; the
 * device's default pool keeps none, so each call after a synchronization paid for fresh
 * memory (about 0.1 ms on an H100). */
typedef enum jitops__scratch_source {
  JITOPS__SCRATCH_NONE = 0,     /* no bytes, or the caller's workspace: nothing to release */
  JITOPS__SCRATCH_POOL = 1,     /* the runtime's pool: cuMemFreeAsync */
  JITOPS__SCRATCH_ALLOCATOR = 2 /* the application's allocator: its release */
} jitops__scratch_source;

typedef struct jitops__scratch {
  void *ptr;
  size_t bytes;
  jitops__scratch_source source;
} jitops__scratch;

jitops_status jitops__scratch_acquire(jitops_runtime_t *runtime, void *stream,
                                      const jitops_workspace *workspace, size_t bytes,
                                      jitops__scratch *out);
void jitops__scratch_release(jitops_runtime_t *runtime, void *stream, jitops__scratch *scratch);

/* The device's free and total memory now (cuMemGetInfo in the runtime's context);
 * JITOPS_ERR_NO_DEVICE on a compile-only runtime. */
jitops_status jitops__device_memory(jitops_runtime_t *runtime, size_t *free_bytes,
                                    size_t *total_bytes);

/* cuMemsetD8Async / cuMemsetD32Async and cuMemcpyAsync (device to device) on `stream`. */
jitops_status jitops__memset8_async(jitops_runtime_t *runtime, void *ptr, uint8_t value,
                                    size_t bytes, void *stream);
jitops_status jitops__memset32_async(jitops_runtime_t *runtime, void *ptr, uint32_t value,
                                     size_t count, void *stream);
jitops_status jitops__memcpy_async(jitops_runtime_t *runtime, void *dst, const void *src,
                                   size_t bytes, void *stream);

/* Copies the int32 at device address `value` to *out once the work queued on `stream` before
 * it is done: the host waits for the stream. Only a cold call that deferred a kernel
 * (kernel_batch.h) reads its flag so. */
jitops_status jitops__read_device_int32(jitops_runtime_t *runtime, const int32_t *value,
                                        void *stream, int32_t *out);

#endif
