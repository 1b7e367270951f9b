/* The process-wide image table (images.h): chained buckets under one mutex. It is consulted
 * only when a runtime's own registry misses, once per kernel and runtime, so one lock and
 * short chains are plenty; the hot path never comes here. */
#include "runtime/images.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { BUCKETS = 256 };

typedef struct entry {
  jitops__image image; /* first, so an image pointer is its entry's */
  struct entry *next;
  jitops__key key;
  size_t refs;
  int ready; /* 0 while its builder builds */
} entry;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t table_changed = PTHREAD_COND_INITIALIZER;
static entry *buckets[BUCKETS];

static entry **slot_of(jitops__key key) {
  entry **at = &buckets[key.lo % BUCKETS];
  while (*at != NULL && !jitops__key_equal((*at)->key, key))
    at = &(*at)->next;
  return at;
}

/* Unlinks and frees `e`. Caller holds the lock. */
static void remove_entry(entry *e) {
  entry **at = slot_of(e->key);
  *at = e->next;
  free((void *)e->image.bytes);
  free((void *)e->image.lowered_name);
  free(e);
}

/* acquire and try_acquire: `wait` says whether a pending entry is waited for or reported. */
static jitops__image *acquire(jitops__key key, int wait, int *build) {
  pthread_mutex_lock(&table_lock);
  entry **at;
  while (*(at = slot_of(key)) != NULL && !(*at)->ready) {
    if (!wait) {
      pthread_mutex_unlock(&table_lock);
      *build = 0;
      return NULL;
    }
    pthread_cond_wait(&table_changed, &table_lock);
  }
  entry *e = *at;
  *build = e == NULL;
  if (e == NULL && (e = calloc(1, sizeof *e)) != NULL) {
    e->key = key;
    *at = e;
  }
  if (e != NULL)
    ++e->refs;
  pthread_mutex_unlock(&table_lock);
  return e != NULL ? &e->image : NULL;
}

jitops__image *jitops__images_acquire(jitops__key key, int *build) {
  return acquire(key, 1, build);
}

jitops__image *jitops__images_try_acquire(jitops__key key, int *build) {
  return acquire(key, 0, build);
}

int jitops__images_publish(jitops__image *pending, const void *bytes, size_t size,
                           const char *lowered_name) {
  void *copy = malloc(size);
  char *name = strdup(lowered_name);
  if (copy == NULL || name == NULL) {
    free(copy);
    free(name);
    jitops__images_abandon(pending);
    return 0;
  }
  memcpy(copy, bytes, size);
  entry *e = (entry *)pending;
  pthread_mutex_lock(&table_lock);
  e->image.bytes = copy;
  e->image.size = size;
  e->image.lowered_name = name;
  e->ready = 1;
  pthread_cond_broadcast(&table_changed);
  pthread_mutex_unlock(&table_lock);
  return 1;
}

void jitops__images_abandon(jitops__image *pending) {
  pthread_mutex_lock(&table_lock);
  remove_entry((entry *)pending);
  pthread_cond_broadcast(&table_changed);
  pthread_mutex_unlock(&table_lock);
}

void jitops__images_release(jitops__image *image) {
  if (image == NULL)
    return;
  entry *e = (entry *)image;
  pthread_mutex_lock(&table_lock);
  if (--e->refs == 0)
    remove_entry(e);
  pthread_mutex_unlock(&table_lock);
}
