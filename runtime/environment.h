/* The runtime's environment variables (the disk cache's are in cache/settings.h). Each is read
 * where it is used; jitops__environment_check reads them all once, when the first runtime is
 * created, so that a value the library does not understand is warned about even where the
 * code that uses it never runs (the GPU's variables on a machine without one). */
#ifndef JITOPS_RUNTIME_ENVIRONMENT_H
#define JITOPS_RUNTIME_ENVIRONMENT_H

#include <stdint.h>

/* $JITOPS_TUNE: 0 when choices must never be timed (0/off), else 1. */
int jitops__env_tuning(void);

/* $JITOPS_DEPENDENT_LAUNCHES: 0 when every kernel must launch plainly (0/off), else 1. */
int jitops__env_dependent_launches(void);

/* $JITOPS_SCRATCH_KEEP_BYTES: freed scratch the memory pool keeps (default 256 MiB). */
uint64_t jitops__env_scratch_keep_bytes(void);

/* $JITOPS_QUICK_BUILDS: 0 when a cold call must build its kernels in full (0/off), else 1
 * (runtime/kernel_batch.h). */
int jitops__env_quick_builds(void);

/* Reads every variable the library reads, once per process. */
void jitops__environment_check(void);

#endif
