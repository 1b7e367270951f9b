/* The library's only output: JITOPS_LOG=error|warn|info|debug sends log lines to stderr.
 * Unset, nothing is ever printed. Compile times are logged at info, cache decisions at debug. */
#ifndef JITOPS_COMMON_LOG_H
#define JITOPS_COMMON_LOG_H

#include "common/error.h"

typedef enum jitops__log_level {
  JITOPS__LOG_OFF = 0,
  JITOPS__LOG_ERROR = 1,
  JITOPS__LOG_WARN = 2,
  JITOPS__LOG_INFO = 3,
  JITOPS__LOG_DEBUG = 4
} jitops__log_level;

/* The level from $JITOPS_LOG, read once per process. */
jitops__log_level jitops__log_threshold(void);

void jitops__log(jitops__log_level level, const char *fmt, ...) JITOPS__PRINTF(2, 3);

/* Logs at warn the first time `*once` is seen zero, and sets it: for problems that would
 * otherwise repeat on every call (a read-only cache directory, say). Thread-safe. */
void jitops__warn_once(int *once, const char *fmt, ...) JITOPS__PRINTF(2, 3);

#endif
