/* The in-memory kernel registry: an open-addressing table from lookup key to kernel,
 * behind a reader-writer lock. A hit is one probe under the read lock. Kernels are only
 * ever removed while pending (a failed build) and never once ready, so a ready kernel's
 * pointer stays valid for the runtime's lifetime without reference counts. */
#ifndef JITOPS_RUNTIME_REGISTRY_H
#define JITOPS_RUNTIME_REGISTRY_H

#include <pthread.h>
#include <stddef.h>

#include "jitops/jitops.h"
#include "common/hash.h"

typedef struct jitops__registry {
  pthread_rwlock_t lock;
  jitops_kernel_t **slots; /* NULL, a kernel, or the tombstone */
  size_t capacity;         /* a power of two */
  size_t used;             /* kernels plus tombstones */
  size_t count;            /* kernels */
} jitops__registry;

jitops_status jitops__registry_init(jitops__registry *registry);
/* Frees the table only; the caller frees the kernels (jitops__registry_at walks them). */
void jitops__registry_free(jitops__registry *registry);

/* The ready kernel for `key`, or NULL (absent or still pending). The hot path. */
jitops_kernel_t *jitops__registry_find_ready(jitops__registry *registry, jitops__key key);

/* The kernel for `key` in any state, or NULL. */
jitops_kernel_t *jitops__registry_find(jitops__registry *registry, jitops__key key);

jitops_status jitops__registry_insert(jitops__registry *registry, jitops_kernel_t *kernel);
void jitops__registry_remove(jitops__registry *registry, jitops_kernel_t *kernel);

/* Walks every kernel (no concurrent changes allowed): slot index → kernel or NULL. */
size_t jitops__registry_capacity(const jitops__registry *registry);
jitops_kernel_t *jitops__registry_at(const jitops__registry *registry, size_t index);

#endif
