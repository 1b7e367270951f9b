/* Getting an op call's kernels together (kernel_batch.h). Builds go through
 * jitops_kernel_get, whose registry already lets one thread build a key while others wait, so
 * the builder threads need no locking of their own: each takes the next missing kernel from a
 * shared counter. A failure's message is per thread (jitops_last_error), so each builder keeps
 * a copy of its own for the calling thread to report. */
#include "runtime/kernel_batch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"

void jitops__kernel_batch_init(jitops__kernel_batch *batch) {
  batch->count = 0;
}

static jitops_status add(jitops__kernel_batch *batch, const char *source, const char *expr,
                         jitops_kernel_t **out, int small) {
  if (batch->count == JITOPS__KERNEL_BATCH_MAX)
    return jitops__fail(JITOPS_ERR_INTERNAL, "kernel batch: more than %d kernels for one call",
                        JITOPS__KERNEL_BATCH_MAX);
  size_t length = strlen(expr);
  if (length >= JITOPS__KERNEL_BATCH_EXPR)
    return jitops__fail(JITOPS_ERR_INTERNAL, "kernel batch: name expression too long: %s", expr);
  jitops__kernel_batch_item *item = &batch->item[batch->count++];
  item->source = source;
  memcpy(item->expr, expr, length + 1);
  item->out = out;
  item->small = small;
  return JITOPS_SUCCESS;
}

jitops_status jitops__kernel_batch_add(jitops__kernel_batch *batch, const char *source,
                                       const char *expr, jitops_kernel_t **out) {
  return add(batch, source, expr, out, 0);
}

jitops_status jitops__kernel_batch_add_small(jitops__kernel_batch *batch, const char *source,
                                             const char *expr, jitops_kernel_t **out) {
  return add(batch, source, expr, out, 1);
}

/* What the builders share: the kernels still to build, the next one to take, and each one's
 * outcome. */
typedef struct builds {
  jitops_runtime_t *runtime;
  jitops__kernel_batch_item *todo[JITOPS__KERNEL_BATCH_MAX];
  jitops_status status[JITOPS__KERNEL_BATCH_MAX];
  char *message[JITOPS__KERNEL_BATCH_MAX]; /* a copy of a failure's message, or NULL */
  size_t count;
  size_t next; /* taken with an atomic fetch-add */
} builds;

static void *build_some(void *arg) {
  builds *b = arg;
  for (;;) {
    size_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
    if (i >= b->count)
      return NULL;
    jitops__kernel_batch_item *item = b->todo[i];
    b->status[i] = jitops_kernel_get(b->runtime, item->source, item->expr, NULL, 0, item->out);
    if (b->status[i] != JITOPS_SUCCESS)
      b->message[i] = strdup(jitops_last_error());
  }
}

static size_t builder_count(size_t kernels) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t n = kernels < JITOPS__KERNEL_BATCH_THREADS ? kernels : JITOPS__KERNEL_BATCH_THREADS;
  return cpus > 0 && (size_t)cpus < n ? (size_t)cpus : n;
}

/* Builds b->todo on the calling thread and up to builder_count - 1 others (fewer where a
 * thread cannot start: the rest is done here). */
static void run_builders(builds *b) {
  pthread_t threads[JITOPS__KERNEL_BATCH_THREADS];
  size_t started = 0, wanted = builder_count(b->count);
  while (started + 1 < wanted && pthread_create(&threads[started], NULL, build_some, b) == 0)
    ++started;
  build_some(b);
  for (size_t t = 0; t < started; ++t)
    pthread_join(threads[t], NULL);
}

/* The first failure in the batch's order (todo holds small items last, and items lie in the
 * batch's array in its order), reported on the calling thread; frees the copies. */
static jitops_status first_failure(builds *b) {
  size_t first = b->count;
  for (size_t i = 0; i < b->count; ++i)
    if (b->status[i] != JITOPS_SUCCESS && (first == b->count || b->todo[i] < b->todo[first]))
      first = i;
  jitops_status status = JITOPS_SUCCESS;
  if (first < b->count)
    status =
        jitops__fail(b->status[first], "%s",
                     b->message[first] ? b->message[first] : "kernel batch: out of host memory");
  for (size_t i = 0; i < b->count; ++i)
    free(b->message[i]);
  return status;
}

/* Whether `item` is ready now: in memory, or (when the batch has several kernels to get) on
 * disk, got on the calling thread. A warm process's first call thus loads its kernels one
 * after the other, each a fraction of a millisecond, instead of starting builder threads
 * that would take turns at the database's lock. A kernel another thread is building is not
 * ready here: a builder thread waits for it while the others build the rest, where waiting
 * on this thread would have put the whole batch behind that compile. */
static int ready_here(jitops_runtime_t *runtime, jitops__kernel_batch_item *item, int from_disk) {
  if (!from_disk)
    *item->out = jitops__kernel_find_ready(runtime, item->source, item->expr);
  else if (jitops__kernel_get_stored(runtime, item->source, item->expr, item->out) !=
           JITOPS_SUCCESS)
    *item->out = NULL;
  return *item->out != NULL;
}

jitops_status jitops__kernel_batch_get(jitops_runtime_t *runtime, jitops__kernel_batch *batch) {
  builds b;
  memset(&b, 0, sizeof b);
  b.runtime = runtime;
  for (int small = 0; small <= 1; ++small) /* the small ones after the others */
    for (size_t i = 0; i < batch->count; ++i)
      if (batch->item[i].small == small && !ready_here(runtime, &batch->item[i], batch->count > 1))
        b.todo[b.count++] = &batch->item[i];
  if (b.count == 0) /* every call after a kernel's first, and warm first calls */
    return JITOPS_SUCCESS;
  if (b.count == 1) {
    jitops__kernel_batch_item *item = b.todo[0];
    return jitops_kernel_get(runtime, item->source, item->expr, NULL, 0, item->out);
  }
  run_builders(&b);
  return first_failure(&b);
}
