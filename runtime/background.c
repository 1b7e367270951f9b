/* The background builds (background.h). */
#include "runtime/background.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
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
  while (bg->head != NULL) {
    jitops__background_item *item = bg->head;
    bg->head = item->next;
    if (bg->head == NULL)
      bg->tail = NULL;
    slot->current = item;
    pthread_mutex_unlock(&bg->lock);
    const int built = build(rt, item);
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

/* Starts one more worker for the queue, up to `workers`; where none runs and none can start,
 * empties the queue again. The caller holds the lock and has forgotten a forked parent's
 * workers. */
static void start(jitops_runtime_t *rt) {
  jitops__background *bg = &rt->background;
  join_left(bg);
  if (bg->alive >= bg->workers)
    return;
  for (int i = 0; i < bg->workers; ++i) {
    jitops__background_slot *slot = &bg->slot[i];
    if (slot->joinable)
      continue;
    slot->runtime = rt;
    if (pthread_create(&slot->thread, NULL, work, slot) != 0)
      break;
    slot->alive = slot->joinable = 1;
    ++bg->alive;
    return;
  }
  if (bg->alive == 0) {
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
