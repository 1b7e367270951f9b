/* JITOPS_LOG: the library's only output, to stderr, off unless the variable asks for it. */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static pthread_once_t threshold_once = PTHREAD_ONCE_INIT;
static jitops__log_level threshold = JITOPS__LOG_OFF;

static void read_threshold(void) {
  const char *value = getenv("JITOPS_LOG");
  if (value == NULL)
    return;
  static const struct {
    const char *name;
    jitops__log_level level;
  } names[] = {{"error", JITOPS__LOG_ERROR},
               {"warn", JITOPS__LOG_WARN},
               {"warning", JITOPS__LOG_WARN},
               {"info", JITOPS__LOG_INFO},
               {"debug", JITOPS__LOG_DEBUG}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (strcasecmp(value, names[i].name) == 0)
      threshold = names[i].level;
}

jitops__log_level jitops__log_threshold(void) {
  pthread_once(&threshold_once, read_threshold);
  return threshold;
}

/* Writes one line at `level` when the threshold lets it through. */
static void vlog(jitops__log_level level, const char *fmt, va_list ap) {
  static const char *const tags[] = {"", "error", "warn", "info", "debug"};
  if (level > jitops__log_threshold())
    return;
  char line[2048];
  vsnprintf(line, sizeof line, fmt, ap);
  /* One fprintf per line keeps lines from different threads whole. */
  fprintf(stderr, "[jitops %s] %s\n", tags[level], line);
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
