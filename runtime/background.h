/* A runtime's background builds. An op call that found a kernel nowhere launches a quick build
 * of it (kernel_batch.h) and asks for the full build here: worker threads of the runtime's build
 * the requests in order through jitops_kernel_get, which files each in the registry and on
 * disk, so that the op's later calls find the full kernel in memory.
 *
 * Workers: up to a quarter of the online CPUs, at least 1 and at most
 * JITOPS__BACKGROUND_WORKERS, so that the application keeps most of the machine while a cold
 * start's full builds run behind it.
 *
 * Invariants: a (source, expression) pair is queued or being built at most once, and one
 * whose full build failed is not asked for again (its quick build stays; the failure is
 * logged once); items carry increasing sequence numbers, so a wait covers exactly what was
 * queued before it; a worker runs only while the queue has had work for it, and leaves when it
 * finds the queue empty (no thread lingers in an idle process); a worker that has left is
 * joined before its slot is used again and when the runtime is destroyed, which first waits
 * for every worker. Only the process that started the workers waits for them: a forked child
 * inherits the queue but no thread (and must not use the runtime: see jitops.h). An exit with
 * runtimes alive lets no build start and waits for those under way (background.c, "process
 * exit"). */
#ifndef JITOPS_RUNTIME_BACKGROUND_H
#define JITOPS_RUNTIME_BACKGROUND_H

#include <pthread.h>
#include <sys/types.h>

#include "jitops/jitops.h"

enum { JITOPS__BACKGROUND_WORKERS = 4 };

typedef struct jitops__background_item jitops__background_item;

typedef struct jitops__background_slot {
  jitops_runtime_t *runtime;
  pthread_t thread;
  int alive;                              /* the worker is in its loop */
  int joinable;                           /* `thread` has not been joined */
  const jitops__background_item *current; /* the item it builds, outside the queue */
} jitops__background_slot;

typedef struct jitops__background {
  pthread_mutex_t lock;
  pthread_cond_t changed; /* an item finished, or a worker left */
  jitops__background_item *head, *tail;
  jitops__background_item *failed; /* pairs whose full build failed: not asked for again */
  unsigned long long next_seq;     /* the sequence number of the next item queued */
  jitops__background_slot slot[JITOPS__BACKGROUND_WORKERS];
  int workers; /* the slots in use: from the CPU count, set at init */
  int alive;   /* workers in their loop */
  pid_t owner; /* the process whose threads the slots' are */
} jitops__background;

void jitops__background_init(jitops__background *bg);

/* Queues the full build of (source, expression), no options, unless it is already queued or
 * being built, and starts a worker if fewer than `workers` run. Best effort: without memory or
 * a thread, nothing is queued (the caller keeps its quick kernel; a later call asks again). */
void jitops__background_request(jitops_runtime_t *runtime, const char *source_name,
                                const char *name_expression);

/* Whether the full build of (source, expression) failed in this runtime: it is not asked for
 * again, so a caller that waits for it (a deferred kernel: kernel_batch.h) builds it itself. */
int jitops__background_failed(jitops__background *bg, const char *source_name,
                              const char *name_expression);

/* Returns once every build queued before the call is done (not those queued meanwhile, so
 * that threads waiting at once do not wait for each other's later builds). */
void jitops__background_finish(jitops__background *bg);

/* Waits until every worker has left and is joined, then frees what init made. */
void jitops__background_destroy(jitops__background *bg);

#endif
