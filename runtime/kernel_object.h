/* The kernel object behind jitops_kernel_t: what the registry files under its lookup key, what
 * a build fills in, and what a launch uses. Pending while one thread builds it; ready (and
 * never changed again but for its usage counters and shared-memory limit) once built. */
#ifndef JITOPS_RUNTIME_KERNEL_OBJECT_H
#define JITOPS_RUNTIME_KERNEL_OBJECT_H

#include <cuda.h>
#include <stdint.h>

#include "common/hash.h"
#include "jitops/jitops.h"

typedef enum jitops__kernel_state {
  JITOPS__KERNEL_PENDING = 0, /* being built by one thread; others wait */
  JITOPS__KERNEL_READY = 1
} jitops__kernel_state;

struct jitops_kernel {
  jitops_runtime_t *runtime;
  jitops__key lookup_key;
  jitops__key cache_key;
  int state; /* jitops__kernel_state, read with acquire on the hot path */
  CUmodule module;
  CUfunction function; /* NULL on a compile-only runtime */
  char *lowered_name;
  char *op;               /* the source name, for usage by op */
  uint32_t static_shared; /* the kernel's static shared memory, which counts against limits */
  uint32_t shared_optin;  /* the dynamic shared memory limit set on `function` so far */
  /* The process-wide image it was loaded from (images.h), referenced while the kernel lives;
   * NULL when it could not be shared. */
  struct jitops__image *image;
  /* Usage since creation, flushed to disk when the runtime is destroyed. */
  uint64_t memory_hits, disk_hits, misses, compiles;
  uint64_t remote_hits, remote_misses, remote_errors;
};

/* Frees a kernel's host side (its module, if any, is the caller's to unload) and drops its
 * image reference. */
void jitops__kernel_free(jitops_kernel_t *kernel);

#endif
