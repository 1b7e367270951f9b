#include "runtime/registry.h"

#include <stdlib.h>

#include "common/error.h"
#include "runtime/kernel_object.h"

static jitops_kernel_t tombstone_storage;
#define TOMBSTONE (&tombstone_storage)

enum { INITIAL_CAPACITY = 64 };

jitops_status jitops__registry_init(jitops__registry *r) {
  r->slots = calloc(INITIAL_CAPACITY, sizeof *r->slots);
  if (r->slots == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_runtime_create: out of host memory");
  r->capacity = INITIAL_CAPACITY;
  r->used = r->count = 0;
  pthread_rwlock_init(&r->lock, NULL);
  return JITOPS_SUCCESS;
}

void jitops__registry_free(jitops__registry *r) {
  free(r->slots);
  r->slots = NULL;
  pthread_rwlock_destroy(&r->lock);
}

/* Probe for `key`: its slot, or the first empty slot (NULL) after it. Caller holds a lock. */
static size_t probe(const jitops__registry *r, jitops__key key) {
  size_t mask = r->capacity - 1;
  for (size_t i = (size_t)key.lo & mask;; i = (i + 1) & mask) {
    jitops_kernel_t *k = r->slots[i];
    if (k == NULL || (k != TOMBSTONE && jitops__key_equal(k->lookup_key, key)))
      return i;
  }
}

jitops_kernel_t *jitops__registry_find_ready(jitops__registry *r, jitops__key key) {
  pthread_rwlock_rdlock(&r->lock);
  jitops_kernel_t *k = r->slots[probe(r, key)];
  if (k != NULL && __atomic_load_n(&k->state, __ATOMIC_ACQUIRE) != JITOPS__KERNEL_READY)
    k = NULL;
  pthread_rwlock_unlock(&r->lock);
  return k;
}

jitops_kernel_t *jitops__registry_find(jitops__registry *r, jitops__key key) {
  pthread_rwlock_rdlock(&r->lock);
  jitops_kernel_t *k = r->slots[probe(r, key)];
  pthread_rwlock_unlock(&r->lock);
  return k;
}

static jitops_status grow(jitops__registry *r) {
  size_t capacity = r->capacity * 2;
  jitops_kernel_t **slots = calloc(capacity, sizeof *slots);
  if (slots == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_kernel_get: out of host memory");
  jitops_kernel_t **old = r->slots;
  size_t old_capacity = r->capacity;
  r->slots = slots;
  r->capacity = capacity;
  r->used = r->count;
  for (size_t i = 0; i < old_capacity; ++i)
    if (old[i] != NULL && old[i] != TOMBSTONE)
      r->slots[probe(r, old[i]->lookup_key)] = old[i];
  free(old);
  return JITOPS_SUCCESS;
}

jitops_status jitops__registry_insert(jitops__registry *r, jitops_kernel_t *kernel) {
  pthread_rwlock_wrlock(&r->lock);
  jitops_status status = JITOPS_SUCCESS;
  /* Keep the load under one half so probes stay short. */
  if (2 * (r->used + 1) > r->capacity)
    status = grow(r);
  if (status == JITOPS_SUCCESS) {
    r->slots[probe(r, kernel->lookup_key)] = kernel;
    ++r->used;
    ++r->count;
  }
  pthread_rwlock_unlock(&r->lock);
  return status;
}

void jitops__registry_remove(jitops__registry *r, jitops_kernel_t *kernel) {
  pthread_rwlock_wrlock(&r->lock);
  size_t i = probe(r, kernel->lookup_key);
  if (r->slots[i] == kernel) {
    r->slots[i] = TOMBSTONE;
    --r->count;
  }
  pthread_rwlock_unlock(&r->lock);
}

size_t jitops__registry_capacity(const jitops__registry *r) {
  return r->capacity;
}

jitops_kernel_t *jitops__registry_at(const jitops__registry *r, size_t index) {
  jitops_kernel_t *k = r->slots[index];
  return k == TOMBSTONE ? NULL : k;
}
