/* The background builds (background.h). */
#include "runtime/background.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "runtime/compiler.h"
#include "runtime/runtime_internal.h"

struct jitops__background_item {
  jitops__background_item *next;
  char *source_name;
  char *name_expression;
  unsigned long long seq;
};

void jitops__background_init(jitops__background *bg) {
  memset(bg, 0, sizeof *bg);
  pthread_mutex_init(&bg->lock, NULL);
  pthread_cond_init(&bg->changed, NULL);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const long workers = cpus / 4;
  bg->workers = workers < 1                            ? 1
                : workers > JITOPS__BACKGROUND_WORKERS ? JITOPS__BACKGROUND_WORKERS
                                                       : (int)workers;
  bg->owner = getpid();
}

static void free_item(jitops__background_item *item) {
  free(item->source_name);
  free(item->name_expression);
  free(item);
}

static int same(const jitops__background_item *item, const char *source_name,
                const char *name_expression) {
  return item != NULL && strcmp(item->source_name, source_name) == 0 &&
         strcmp(item->name_expression, name_expression) == 0;
}

static int listed(const jitops__background_item *list, const char *source_name,
                  const char *name_expression) {
  for (const jitops__background_item *item = list; item != NULL; item = item->next)
    if (same(item, source_name, name_expression))
      return 1;
  return 0;
}

/* Whether the pair is queued, being built, or failed before; the caller holds the lock. */
static int known(const jitops__background *bg, const char *source_name,
                 const char *name_expression) {
  for (int i = 0; i < JITOPS__BACKGROUND_WORKERS; ++i)
    if (same(bg->slot[i].current, source_name, name_expression))
      return 1;
  return listed(bg->head, source_name, name_expression) ||
         listed(bg->failed, source_name, name_expression);
}

/* ---- process exit ------------------------------------------------------------------------
 *
 * exit() runs the process's exit handlers, NVRTC's and the C++ library's static destructors
 * among them, while a background thread may be compiling: the compile then crashes the exit of
 * a program that did not destroy its runtimes (one that returns from main after a cold call,
 * say). So the library registers an exit handler that lets no worker of any runtime start
 * another build and waits for the background builds under way, whatever they wait for in turn
 * (another process's claim on the kernel, the remote tier). The builds left in the queues are
 * dropped; a later process asks for them again. Compiles on other threads (an op's parallel
 * builds, the application's own) are the caller's, as any call in flight at exit is.
 *
 * Exit handlers run newest first, and a process's first NVRTC compile registers fourteen of
 * NVRTC's and the C++ library's (none came later, in the runs of bench/NOTES-jit.md), so the
 * handler is registered after that compile: when the process's first worker starts, on the
 * caller's thread (an exit right after the call must find it), after a compile of an empty
 * kernel there if the process has compiled nothing yet (a cold call whose quick builds came
 * from disk; tens of milliseconds, once per process).
 *
 * Invariants: `building` counts the threads of this process inside build() and never grows once
 * `exiting` is set; `builds_here` is the calling thread's share of it, which an exit on a worker
 * (a signal handler, a log callback) does not wait for; fork() is made holding the lock, and the
 * child (which has no workers) starts with no build counted and not exiting. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t idle; /* `building` fell */
  int exiting;
  int building;
} process_builds = {.lock = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};
static _Thread_local int builds_here;
static pthread_once_t process_exit_once = PTHREAD_ONCE_INIT;

static void wait_for_builds_at_exit(void) {
  pthread_mutex_lock(&process_builds.lock);
  process_builds.exiting = 1;
  while (process_builds.building > builds_here)
    pthread_cond_wait(&process_builds.idle, &process_builds.lock);
  pthread_mutex_unlock(&process_builds.lock);
}

static void lock_before_fork(void) {
  pthread_mutex_lock(&process_builds.lock);
}
static void unlock_after_fork(void) {
  pthread_mutex_unlock(&process_builds.lock);
}
static void reset_in_child(void) {
  process_builds.building = 0;
  process_builds.exiting = 0;
  process_builds.idle = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
  pthread_mutex_unlock(&process_builds.lock);
}

static void register_process_handlers(void) {
  if (atexit(wait_for_builds_at_exit) != 0)
    jitops__log(JITOPS__LOG_WARN, "could not register the exit handler that waits for background "
                                  "builds: destroy every runtime before the process exits");
  pthread_atfork(lock_before_fork, unlock_after_fork, reset_in_child);
}

/* Before a worker starts; acts once per process (see above). */
static void prepare_for_exit(const jitops_runtime_t *rt) {
  if (!jitops__nvrtc_has_compiled())
    jitops__nvrtc_warm_up(&rt->target);
  pthread_once(&process_exit_once, register_process_handlers);
}

/* Whether a build may start (then it is counted): not once the process exits. */
static int build_may_start(void) {
  pthread_mutex_lock(&process_builds.lock);
  const int may = !process_builds.exiting;
  if (may) {
    ++process_builds.building;
    ++builds_here;
  }
  pthread_mutex_unlock(&process_builds.lock);
  return may;
}

static void build_ended(void) {
  pthread_mutex_lock(&process_builds.lock);
  --process_builds.building;
  --builds_here;
  pthread_cond_broadcast(&process_builds.idle);
  pthread_mutex_unlock(&process_builds.lock);
}

/* ---- the workers --------------------------------------------------------------------------- */

/* Builds the item in full; whether that succeeded. */
static int build(jitops_runtime_t *rt, const jitops__background_item *item) {
  jitops_kernel_t *kernel;
  if (jitops_kernel_get(rt, item->source_name, item->name_expression, NULL, 0, &kernel) ==
      JITOPS_SUCCESS)
    return 1;
  jitops__log(JITOPS__LOG_WARN, "the full build of %s failed; its quick build stays in use: %s",
              item->name_expression, jitops_last_error());
  return 0;
}

static void *work(void *arg) {
  jitops__background_slot *slot = arg;
  jitops_runtime_t *rt = slot->runtime;
  jitops__background *bg = &rt->background;
  pthread_mutex_lock(&bg->lock);
  while (bg->head != NULL && build_may_start()) {
    jitops__background_item *item = bg->head;
    bg->head = item->next;
    if (bg->head == NULL)
      bg->tail = NULL;
    slot->current = item;
    pthread_mutex_unlock(&bg->lock);
    const int built = build(rt, item);
    build_ended();
    pthread_mutex_lock(&bg->lock);
    slot->current = NULL;
    if (built) {
      free_item(item);
    } else {
      item->next = bg->failed;
      bg->failed = item;
    }
    pthread_cond_broadcast(&bg->changed);
  }
  slot->alive = 0;
  --bg->alive;
  pthread_cond_broadcast(&bg->changed);
  pthread_mutex_unlock(&bg->lock);
  return NULL;
}

int jitops__background_failed(jitops__background *bg, const char *source_name,
                              const char *name_expression) {
  pthread_mutex_lock(&bg->lock);
  const int failed = listed(bg->failed, source_name, name_expression);
  pthread_mutex_unlock(&bg->lock);
  return failed;
}

/* In a forked child, the slots describe its parent's threads: none of them runs here. The
 * caller holds the lock. */
static void forget_the_parents_workers(jitops__background *bg) {
  if (bg->owner == getpid())
    return;
  for (int i = 0; i < JITOPS__BACKGROUND_WORKERS; ++i)
    bg->slot[i] = (jitops__background_slot){0};
  bg->alive = 0;
  bg->owner = getpid();
}

/* Joins the workers that have left; the caller holds the lock (a worker needs it no more once
 * it has cleared `alive`). */
static void join_left(jitops__background *bg) {
  for (int i = 0; i < JITOPS__BACKGROUND_WORKERS; ++i)
    if (bg->slot[i].joinable && !bg->slot[i].alive) {
      pthread_join(bg->slot[i].thread, NULL);
      bg->slot[i].joinable = 0;
    }
}

static jitops__background_item *new_item(const char *source_name, const char *name_expression) {
  jitops__background_item *item = calloc(1, sizeof *item);
  if (item == NULL)
    return NULL;
  item->source_name = strdup(source_name);
  item->name_expression = strdup(name_expression);
  if (item->source_name == NULL || item->name_expression == NULL) {
    free_item(item);
    return NULL;
  }
  return item;
}

static void free_list(jitops__background_item *item) {
  while (item != NULL) {
    jitops__background_item *next = item->next;
    free_item(item);
    item = next;
  }
}

static void drop_queue(jitops__background *bg) {
  free_list(bg->head);
  bg->head = bg->tail = NULL;
}

/* Starts a worker in a free slot; whether one started. Workers take no asynchronous signal
 * (the mask is inherited): the application's handlers run on its own threads. */
static int spawn_worker(jitops_runtime_t *rt) {
  jitops__background *bg = &rt->background;
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  int started = 0;
  for (int i = 0; i < bg->workers && !started; ++i) {
    jitops__background_slot *slot = &bg->slot[i];
    if (slot->joinable)
      continue;
    slot->runtime = rt;
    if (pthread_create(&slot->thread, NULL, work, slot) != 0)
      break;
    slot->alive = slot->joinable = 1;
    ++bg->alive;
    started = 1;
  }
  pthread_sigmask(SIG_SETMASK, &before, NULL);
  return started;
}

/* Starts one more worker for the queue, up to `workers`; where none runs and none can start,
 * empties the queue again. The caller holds the lock and has forgotten a forked parent's
 * workers. */
static void start(jitops_runtime_t *rt) {
  jitops__background *bg = &rt->background;
  join_left(bg);
  if (bg->alive >= bg->workers)
    return;
  prepare_for_exit(rt);
  if (!spawn_worker(rt) && bg->alive == 0) {
    jitops__log(JITOPS__LOG_INFO, "no thread for background builds: quick builds stay in use");
    drop_queue(bg);
  }
}

void jitops__background_request(jitops_runtime_t *rt, const char *source_name,
                                const char *name_expression) {
  jitops__background *bg = &rt->background;
  pthread_mutex_lock(&bg->lock);
  forget_the_parents_workers(bg);
  if (!known(bg, source_name, name_expression)) {
    jitops__background_item *item = new_item(source_name, name_expression);
    if (item != NULL) {
      item->seq = bg->next_seq++;
      if (bg->tail != NULL)
        bg->tail->next = item;
      else
        bg->head = item;
      bg->tail = item;
      start(rt);
    }
  }
  pthread_mutex_unlock(&bg->lock);
}

/* Whether an item numbered below `end` is queued or being built; the caller holds the lock.
 * The queue is in sequence order, so its head is its lowest. */
static int pending_before(const jitops__background *bg, unsigned long long end) {
  if (bg->head != NULL && bg->head->seq < end)
    return 1;
  for (int i = 0; i < JITOPS__BACKGROUND_WORKERS; ++i)
    if (bg->slot[i].current != NULL && bg->slot[i].current->seq < end)
      return 1;
  return 0;
}

void jitops__background_finish(jitops__background *bg) {
  pthread_mutex_lock(&bg->lock);
  forget_the_parents_workers(bg);
  const unsigned long long end = bg->next_seq;
  while (bg->alive > 0 && pending_before(bg, end))
    pthread_cond_wait(&bg->changed, &bg->lock);
  join_left(bg);
  pthread_mutex_unlock(&bg->lock);
}

void jitops__background_destroy(jitops__background *bg) {
  pthread_mutex_lock(&bg->lock);
  forget_the_parents_workers(bg);
  while (bg->alive > 0)
    pthread_cond_wait(&bg->changed, &bg->lock);
  join_left(bg);
  pthread_mutex_unlock(&bg->lock);
  drop_queue(bg); /* empty but in a forked child, whose parent's workers held the queue */
  free_list(bg->failed);
  pthread_mutex_destroy(&bg->lock);
  pthread_cond_destroy(&bg->changed);
}
