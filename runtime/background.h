/* A runtime's background builds. An op call that found a kernel nowhere launches a quick build
 * of it (kernel_batch.h) and asks for the full build here: worker threads of the runtime's build
 * the requests in order through jitops_kernel_get, which files each in the registry and on
 * disk, so that the op's later calls find the full kernel in memory.
 *
 * Workers: up to a quarter of the online CPUs, at least 1 and at most
 * JITOPS__BACKGROUND_WORKERS, so that the application keeps most of the machine while a cold
 * start's full builds run behind it.
 *
 * Invariants: a (source, expression) pair is queued or being built at most once; a worker runs
 * only while the queue has had work for it, and leaves when it finds the queue empty (no
 * thread lingers in an idle process); a worker that has left is joined before its slot is used
 * again and when the runtime is destroyed, which first waits for the queue. Only the process
 * that started the workers waits for them: a forked child inherits the queue but no thread. */
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
  jitops__background_slot slot[JITOPS__BACKGROUND_WORKERS];
  int workers;  /* the slots in use: from the CPU count, set at init */
  int alive;    /* workers in their loop */
  pid_t owner;  /* the process whose threads the slots' are */
} jitops__background;

void jitops__background_init(jitops__background *bg);

/* Queues the full build of (source, expression), no options, unless it is already queued or
 * being built, and starts a worker if fewer than `workers` run. Best effort: without memory or
 * a thread, nothing is queued (the caller keeps its quick kernel; a later call asks again). */
void jitops__background_request(jitops_runtime_t *runtime, const char *source_name,
                                const char *name_expression);

/* Returns once every build queued before and during the call is done (and the workers have
 * left). */
void jitops__background_finish(jitops__background *bg);

/* jitops__background_finish, then frees what init made. */
void jitops__background_destroy(jitops__background *bg);

#endif
