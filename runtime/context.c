/* The runtime's primary context on the calling thread: made current around each block of
 * driver calls, and restored after, so the caller's own current context is left as it was. */
#include "runtime/context.h"

#include <stdint.h>

#include "common/error.h"
#include "runtime/runtime_internal.h"

jitops_status jitops__fail_no_device(const char *fn) {
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

int jitops__stream_is_foreign(jitops_runtime_t *rt, void *stream) {
  CUcontext owner = NULL;
  return (uintptr_t)stream > 2 &&
         rt->driver->cuStreamGetCtx((CUstream)stream, &owner) == CUDA_SUCCESS && owner != NULL &&
         owner != rt->context;
}

/* Per-thread memory of whether jitops__context_enter pushed. Entered blocks do not nest. */
static _Thread_local int entered_pushed;

jitops_status jitops__context_enter(jitops_runtime_t *rt) {
  if (rt->context == NULL)
    return jitops__fail_no_device("jitops__context_enter");
  return jitops__context_push(rt, &entered_pushed);
}

void jitops__context_leave(jitops_runtime_t *rt) {
  jitops__context_restore(rt, entered_pushed);
  entered_pushed = 0;
}

/* `saved`: 0 where the exchange failed (nothing to put back), else the thread's mode + 1. */
int jitops__capture_relax(jitops_runtime_t *rt) {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (rt->driver->cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS)
    return 0;
  return (int)mode + 1;
}

void jitops__capture_restore(jitops_runtime_t *rt, int saved) {
  if (saved == 0)
    return;
  CUstreamCaptureMode mode = (CUstreamCaptureMode)(saved - 1);
  rt->driver->cuThreadExchangeStreamCaptureMode(&mode);
}
