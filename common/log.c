/* The library's log: lines at or above the threshold that $JITOPS_LOG sets (default warn) go
 * to the application's callback when one is set, else to stderr.
 *
 * Invariants:
 *   - The threshold is read once per process. A value of JITOPS_LOG the library does not
 *     understand leaves the default (warn) and is itself warned about, once.
 *   - A message is formatted only when it passes the threshold, so a debug line costs one
 *     comparison when nobody reads it.
 *   - The callback and its user pointer change together, under the write side of a
 *     reader-writer lock; every delivery holds the read side. So deliveries run in parallel,
 *     and once jitops_set_log_callback returns, the previous callback is neither running nor
 *     ever called again. */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/env.h"

static pthread_once_t threshold_once = PTHREAD_ONCE_INIT;
static jitops__log_level threshold = JITOPS__LOG_WARN;

static pthread_rwlock_t callback_lock = PTHREAD_RWLOCK_INITIALIZER;
static jitops_log_callback callback;
static void *callback_user;

static const jitops__env_word level_words[] = {
    {"off", JITOPS__LOG_OFF},      {"error", JITOPS__LOG_ERROR}, {"warn", JITOPS__LOG_WARN},
    {"warning", JITOPS__LOG_WARN}, {"info", JITOPS__LOG_INFO},   {"debug", JITOPS__LOG_DEBUG}};

/* JITOPS_LOG's value when the library did not understand it; warned about once. */
static const char *rejected_value;
static int rejected_warned;

/* Runs once, before any line is written. It must not log: jitops__log_threshold would wait
 * on this very initialization. */
static void read_threshold(void) {
  const char *value = getenv("JITOPS_LOG");
  int level = JITOPS__LOG_WARN;
  if (value == NULL || value[0] == 0)
    return;
  if (jitops__env_word_lookup(value, level_words, sizeof level_words / sizeof level_words[0],
                              &level))
    threshold = (jitops__log_level)level;
  else
    rejected_value = value;
}

jitops__log_level jitops__log_threshold(void) {
  pthread_once(&threshold_once, read_threshold);
  if (rejected_value != NULL && !__atomic_exchange_n(&rejected_warned, 1, __ATOMIC_RELAXED))
    jitops__env_warn("JITOPS_LOG", rejected_value, "off, error, warn, info or debug");
  return threshold;
}

/* Writes one formatted line to the callback, or to stderr. */
static void deliver(jitops__log_level level, const char *line) {
  static const char *const tags[] = {"", "error", "warn", "info", "debug"};
  pthread_rwlock_rdlock(&callback_lock);
  if (callback != NULL)
    callback(callback_user, (int)level, line);
  else /* one fprintf per line keeps lines from different threads whole */
    fprintf(stderr, "[jitops %s] %s\n", tags[level], line);
  pthread_rwlock_unlock(&callback_lock);
}

static void vlog(jitops__log_level level, const char *fmt, va_list ap) {
  if (level > jitops__log_threshold())
    return;
  char line[2048];
  vsnprintf(line, sizeof line, fmt, ap);
  deliver(level, line);
}

void jitops__log(jitops__log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(level, fmt, ap);
  va_end(ap);
}

void jitops__warn_once(int *once, const char *fmt, ...) {
  if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
    return;
  va_list ap;
  va_start(ap, fmt);
  vlog(JITOPS__LOG_WARN, fmt, ap);
  va_end(ap);
}

jitops_status jitops_set_log_callback(jitops_log_callback fn, void *user) {
  pthread_rwlock_wrlock(&callback_lock);
  callback = fn;
  callback_user = fn != NULL ? user : NULL;
  pthread_rwlock_unlock(&callback_lock);
  return JITOPS_SUCCESS;
}
