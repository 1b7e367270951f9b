/* The runtime's primary context on the calling thread. Every driver call that needs a context
 * runs between a push and a restore, so a caller's own current context is left as it was. A
 * compile-only runtime has no context: device work there fails with jitops__fail_no_device. */
#ifndef JITOPS_RUNTIME_CONTEXT_H
#define JITOPS_RUNTIME_CONTEXT_H

#include "jitops/jitops.h"

/* JITOPS_ERR_NO_DEVICE, naming `fn`: what device work returns on a compile-only runtime. */
jitops_status jitops__fail_no_device(const char *fn);

/* Makes the runtime's context current for the calling thread if it is not already; returns
 * whether it pushed, to pass to jitops__context_restore. */
jitops_status jitops__context_push(jitops_runtime_t *runtime, int *pushed);
void jitops__context_restore(jitops_runtime_t *runtime, int pushed);

/* Whether `stream` belongs to another context than the runtime's (another device's, say).
 * NULL and the special handles (legacy, per-thread) belong to whatever context is current, so
 * they never do. */
int jitops__stream_is_foreign(jitops_runtime_t *runtime, void *stream);

/* For ops: makes the runtime's context current on this thread for a block of driver calls
 * that the launch and memory helpers do not cover (cuBLASLt, say); always pair with
 * jitops__context_leave. Blocks do not nest. */
jitops_status jitops__context_enter(jitops_runtime_t *runtime);
void jitops__context_leave(jitops_runtime_t *runtime);

/* For driver calls that the global capture mode refuses while any thread captures a graph, which
 * would spoil that capture (a module load, a synchronization): jitops__capture_relax puts the
 * calling thread in the relaxed mode and returns what jitops__capture_restore, called after
 * them, needs to put the thread's own mode back. */
int jitops__capture_relax(jitops_runtime_t *runtime);
void jitops__capture_restore(jitops_runtime_t *runtime, int saved);

#endif
