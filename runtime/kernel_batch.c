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
#include "common/log.h"
#include "runtime/context.h"
#include "runtime/runtime_internal.h"

const char *const jitops__quick_options[JITOPS__QUICK_OPTION_COUNT] = {JITOPS__QUICK_OPTION,
                                                                       JITOPS__QUICK_DEFINE};

void jitops__kernel_batch_init(jitops__kernel_batch *batch) {
  batch->count = 0;
  batch->launches = 0;
  batch->stream = NULL;
}

void jitops__kernel_batch_for_launch(jitops__kernel_batch *batch, void *stream) {
  batch->launches = 1;
  batch->stream = stream;
}

jitops_status jitops__kernel_batch_add_flagged(jitops__kernel_batch *batch, const char *source,
                                               const char *expr, jitops_kernel_t **out,
                                               unsigned flags) {
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
  item->flags = flags;
  item->quick = 0;
  item->deferred = 0;
  return JITOPS_SUCCESS;
}

jitops_status jitops__kernel_batch_add(jitops__kernel_batch *batch, const char *source,
                                       const char *expr, jitops_kernel_t **out) {
  return jitops__kernel_batch_add_flagged(batch, source, expr, out, 0);
}

void jitops__kernel_batch_defer_since(jitops__kernel_batch *batch, size_t first) {
  for (size_t i = first; i < batch->count; ++i)
    batch->item[i].flags |= JITOPS__KERNEL_DEFERRED;
}

/* ---- quick builds ------------------------------------------------------------------------ */

/* Whether the launch stream is capturing a graph; a stream the driver cannot answer for is
 * taken as capturing (the full build is then the safe choice). */
static int capturing(jitops_runtime_t *runtime, void *stream) {
  if (runtime->context == NULL)
    return 0;
  int pushed;
  if (jitops__context_push(runtime, &pushed) != JITOPS_SUCCESS)
    return 1;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = runtime->driver->cuStreamIsCapturing((CUstream)stream, &capture);
  jitops__context_restore(runtime, pushed);
  return r != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int quick_allowed(jitops_runtime_t *runtime, const jitops__kernel_batch *batch) {
  return batch->launches && __atomic_load_n(&runtime->quick_builds, __ATOMIC_RELAXED) &&
         !capturing(runtime, batch->stream);
}

/* Gets `item` as a quick build, or as a full one where the quick build does not compile while
 * the full one does: NVRTC refuses the quick options, or a template's quick path does not
 * compile (quick builds then stay off for the runtime, and the log says so). */
static jitops_status get_quick(jitops_runtime_t *runtime, jitops__kernel_batch_item *item) {
  jitops_status status = jitops_kernel_get(runtime, item->source, item->expr, jitops__quick_options,
                                           JITOPS__QUICK_OPTION_COUNT, item->out);
  if (status == JITOPS_SUCCESS || status != JITOPS_ERR_COMPILE)
    return status;
  jitops_status full = jitops_kernel_get(runtime, item->source, item->expr, NULL, 0, item->out);
  if (full == JITOPS_SUCCESS) {
    jitops__log(JITOPS__LOG_INFO, "quick builds off: %s did not compile with \"%s %s\"", item->expr,
                jitops__quick_options[0], jitops__quick_options[1]);
    __atomic_store_n(&runtime->quick_builds, 0, __ATOMIC_RELAXED);
    item->quick = 0;
  }
  return full;
}

static jitops_status get_item(jitops_runtime_t *runtime, jitops__kernel_batch_item *item) {
  if (item->quick)
    return get_quick(runtime, item);
  return jitops_kernel_get(runtime, item->source, item->expr, NULL, 0, item->out);
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
    b->status[i] = get_item(b->runtime, item);
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

/* Whether `item` is ready now: in memory, or (when the batch has several kernels to get, or it
 * may be a quick build) on disk, got on the calling thread. A warm process's first call thus
 * loads its kernels one after the other, each a fraction of a millisecond, instead of starting
 * builder threads that would take turns at the database's lock. A kernel another thread is
 * building is not ready here: a builder thread waits for it while the others build the rest,
 * where waiting on this thread would have put the whole batch behind that compile. */
static int ready_here(jitops_runtime_t *runtime, jitops__kernel_batch_item *item,
                      const char *const *options, size_t num_options, int from_disk) {
  if (!from_disk)
    *item->out = jitops__kernel_find_ready(runtime, item->source, item->expr, options, num_options);
  else if (jitops__kernel_get_stored(runtime, item->source, item->expr, options, num_options,
                                     item->out) != JITOPS_SUCCESS)
    *item->out = NULL;
  return *item->out != NULL;
}

/* Whether `item` is ready now (above), as its full build or, where it may be one, as its quick
 * build, whose full build it then asks the background for; or deferred (kernel_batch.h), with
 * *out NULL. The order: the full build in memory, the quick build in memory (this process
 * looked for the full one on disk before it built the quick one, and the calls until the full
 * build lands touch no disk), the full build on disk, the quick build on disk. An item that is
 * none of these is deferred where it may be, else marked to be built, quick where it may be. */
static int ready(jitops_runtime_t *runtime, const jitops__kernel_batch *batch,
                 jitops__kernel_batch_item *item, int *quick_allowed_memo) {
  if (ready_here(runtime, item, NULL, 0, 0))
    return 1;
  const int may_be_quick = (item->flags & JITOPS__KERNEL_QUICK) != 0;
  const int may_defer = (item->flags & JITOPS__KERNEL_DEFERRED) != 0;
  if ((may_be_quick || may_defer) && *quick_allowed_memo < 0)
    *quick_allowed_memo = quick_allowed(runtime, batch);
  const int quick = may_be_quick && *quick_allowed_memo;
  if (quick && ready_here(runtime, item, jitops__quick_options, JITOPS__QUICK_OPTION_COUNT, 0)) {
    jitops__background_request(runtime, item->source, item->expr);
    return 1;
  }
  if ((batch->count > 1 || may_be_quick || may_defer) && ready_here(runtime, item, NULL, 0, 1))
    return 1;
  if (quick && ready_here(runtime, item, jitops__quick_options, JITOPS__QUICK_OPTION_COUNT, 1)) {
    jitops__background_request(runtime, item->source, item->expr);
    return 1;
  }
  if (may_defer && *quick_allowed_memo &&
      !jitops__background_failed(&runtime->background, item->source, item->expr)) {
    *item->out = NULL;
    item->deferred = 1;
    return 1;
  }
  item->quick = quick;
  return 0;
}

/* Asks the background for the full builds of the items that were got as quick builds, then for
 * those of the deferred items. */
static void request_full_builds(jitops_runtime_t *runtime, const jitops__kernel_batch *batch,
                                const builds *b) {
  for (size_t i = 0; i < b->count; ++i)
    if (b->todo[i]->quick && b->status[i] == JITOPS_SUCCESS)
      jitops__background_request(runtime, b->todo[i]->source, b->todo[i]->expr);
  for (size_t i = 0; i < batch->count; ++i)
    if (batch->item[i].deferred)
      jitops__background_request(runtime, batch->item[i].source, batch->item[i].expr);
}

jitops_status jitops__kernel_batch_get(jitops_runtime_t *runtime, jitops__kernel_batch *batch) {
  builds b;
  memset(&b, 0, sizeof b);
  b.runtime = runtime;
  int quick_allowed_memo = -1;
  size_t deferred = 0;
  for (unsigned small = 0; small <= 1; ++small) /* the small ones after the others */
    for (size_t i = 0; i < batch->count; ++i) {
      jitops__kernel_batch_item *item = &batch->item[i];
      if ((item->flags & JITOPS__KERNEL_SMALL) / JITOPS__KERNEL_SMALL != small)
        continue;
      if (!ready(runtime, batch, item, &quick_allowed_memo))
        b.todo[b.count++] = item;
      deferred += (size_t)item->deferred;
    }
  if (b.count == 0 && deferred == 0) /* every call after a kernel's first, warm first calls */
    return JITOPS_SUCCESS;
  if (b.count == 1)
    b.status[0] = get_item(runtime, b.todo[0]);
  else if (b.count > 1)
    run_builders(&b);
  request_full_builds(runtime, batch, &b); /* after the builds, which it must not slow */
  if (b.count <= 1)
    return b.count == 0 ? JITOPS_SUCCESS : b.status[0];
  return first_failure(&b);
}
