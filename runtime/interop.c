/* What a binding needs to launch a kernel on another framework's arrays: ordering the launch
 * after the stream that produced them (jitops_stream_wait), and refusing another device's
 * memory (jitops_pointer_check). */
#include <stdint.h>

#include "common/error.h"
#include "runtime/context.h"
#include "runtime/runtime_internal.h"

/* NULL and CU_STREAM_LEGACY (1) name the same stream. */
static uintptr_t stream_identity(void *stream) {
  return stream == NULL ? (uintptr_t)CU_STREAM_LEGACY : (uintptr_t)stream;
}

/* One event a call, destroyed at once: the wait already enqueued keeps what it needs (the
 * driver frees an event's resources when its work completes), and no state is shared between
 * threads. Only the cross-stream case pays for it. */
static jitops_status wait_on_event(jitops_runtime_t *rt, void *stream, void *producer) {
  const jitops__driver *d = rt->driver;
  CUevent event = NULL;
  CUresult r = d->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(d, r, "jitops_stream_wait: cuEventCreate");
  const char *what = "jitops_stream_wait: cuEventRecord";
  r = d->cuEventRecord(event, (CUstream)producer);
  if (r == CUDA_SUCCESS) {
    what = "jitops_stream_wait: cuStreamWaitEvent";
    r = d->cuStreamWaitEvent((CUstream)stream, event, 0);
  }
  d->cuEventDestroy(event);
  return r == CUDA_SUCCESS ? JITOPS_SUCCESS : jitops__driver_fail(d, r, what);
}

/* The capture `stream` is recording into (its id + 1), or 0 when it records none; a stream the
 * driver will not say it of (the legacy stream during another thread's global capture, say)
 * counts as recording none. */
static cuuint64_t capture_of(jitops_runtime_t *rt, void *stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  if (rt->driver->cuStreamGetCaptureInfo((CUstream)stream, &status, &id, NULL, NULL, NULL) !=
          CUDA_SUCCESS ||
      status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
    return 0;
  return id + 1;
}

jitops_status jitops_stream_wait(jitops_runtime_t *runtime, void *stream, void *producer) {
  JITOPS__REQUIRE_NONNULL("jitops_stream_wait", runtime);
  if (runtime->context == NULL)
    return jitops__fail_no_device("jitops_stream_wait");
  if (stream_identity(stream) == stream_identity(producer))
    return JITOPS_SUCCESS;
  /* Asked first: the driver would let a stream wait for another context's event. */
  if (jitops__stream_is_foreign(runtime, stream) || jitops__stream_is_foreign(runtime, producer))
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "jitops_stream_wait: a stream belongs to another context (another "
                        "device's, say) than the runtime's, which is device %d's",
                        runtime->device);
  int pushed;
  JITOPS__TRY(jitops__context_push(runtime, &pushed));
  /* Work is ordered across streams only on one side of a capture: a graph cannot depend on
   * work outside it (the driver refuses and invalidates the capture), nor work outside on a
   * graph that has not run (the wait would pull the stream into the capture), nor one graph on
   * another. Across a capture's edge, ordering is the caller's, as for any captured work. */
  jitops_status status = JITOPS_SUCCESS;
  if (capture_of(runtime, stream) == capture_of(runtime, producer))
    status = wait_on_event(runtime, stream, producer);
  jitops__context_restore(runtime, pushed);
  return status;
}

/* What the driver says of a pointer. Each attribute gets zeroed storage wider than the driver
 * writes (a bool, an int or an enum), and pointers it does not know get zeros: "not device
 * memory". */
typedef struct pointer_facts {
  unsigned long long memory_type, managed, ordinal;
} pointer_facts;

static CUresult ask_driver(jitops_runtime_t *rt, const void *pointer, pointer_facts *facts) {
  CUpointer_attribute attributes[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void *data[3] = {&facts->memory_type, &facts->managed, &facts->ordinal};
  *facts = (pointer_facts){0};
  return rt->driver->cuPointerGetAttributes(3, attributes, data, (CUdeviceptr)(uintptr_t)pointer);
}

jitops_status jitops_pointer_check(jitops_runtime_t *runtime, const void *pointer) {
  static const char fn[] = "jitops_pointer_check";
  JITOPS__REQUIRE_NONNULL(fn, runtime);
  if (runtime->context == NULL)
    return jitops__fail_no_device(fn);
  pointer_facts facts;
  int pushed;
  JITOPS__TRY(jitops__context_push(runtime, &pushed));
  CUresult r = ask_driver(runtime, pointer, &facts);
  jitops__context_restore(runtime, pushed);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(runtime->driver, r, "jitops_pointer_check: cuPointerGetAttributes");
  int ordinal = (int)(unsigned)facts.ordinal;
  if ((CUmemorytype)facts.memory_type == CU_MEMORYTYPE_DEVICE && !facts.managed &&
      ordinal != runtime->device)
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "%s: %p is device %d's memory; the runtime runs on device %d", fn, pointer,
                        ordinal, runtime->device);
  return JITOPS_SUCCESS;
}
