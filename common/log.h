/* The library's log: JITOPS_LOG=off|error|warn|info|debug sets the threshold (default warn);
 * lines go to the application's callback (jitops_set_log_callback) or to stderr. At the
 * default, the library speaks only when something the user configured cannot be honoured (a
 * disk tier turned off, an environment value it does not understand). Compile times are
 * logged at info, cache decisions at debug. */
#ifndef JITOPS_COMMON_LOG_H
#define JITOPS_COMMON_LOG_H

#include "common/error.h"

/* The public jitops_log_level, plus OFF for the threshold. */
typedef enum jitops__log_level {
  JITOPS__LOG_OFF = 0,
  JITOPS__LOG_ERROR = JITOPS_LOG_ERROR,
  JITOPS__LOG_WARN = JITOPS_LOG_WARN,
  JITOPS__LOG_INFO = JITOPS_LOG_INFO,
  JITOPS__LOG_DEBUG = JITOPS_LOG_DEBUG
} jitops__log_level;

/* The level from $JITOPS_LOG, read once per process. */
jitops__log_level jitops__log_threshold(void);

void jitops__log(jitops__log_level level, const char *fmt, ...) JITOPS__PRINTF(2, 3);

/* Logs at warn the first time `*once` is seen zero, and sets it: for problems that would
 * otherwise repeat on every call (a read-only cache directory, say). Thread-safe. */
void jitops__warn_once(int *once, const char *fmt, ...) JITOPS__PRINTF(2, 3);

#endif
