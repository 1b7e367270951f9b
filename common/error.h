/* Error reporting inside the library: every failure goes through jitops__fail, which stores
 * the message in the calling thread's buffer (jitops_last_error) and returns the status, so
 * that a check reads `return jitops__fail(JITOPS_ERR_..., "fn: arg ...")`. */
#ifndef JITOPS_COMMON_ERROR_H
#define JITOPS_COMMON_ERROR_H

#include "jitops/jitops.h"

#if defined(__GNUC__)
#define JITOPS__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define JITOPS__PRINTF(fmt, args)
#endif

/* Formats the message into the thread's last-error buffer and returns `status`. The
 * arguments may include jitops_last_error() itself (a caller adding context to a failure). */
jitops_status jitops__fail(jitops_status status, const char *fmt, ...) JITOPS__PRINTF(2, 3);

/* Appends text (an NVRTC log, say) to the thread's last error, truncating if needed. */
void jitops__fail_append(const char *text);

/* Propagates a failure that already set its message. */
#define JITOPS__TRY(expr)                                                                          \
  do {                                                                                             \
    jitops_status try_status_ = (expr);                                                            \
    if (try_status_ != JITOPS_SUCCESS)                                                             \
      return try_status_;                                                                          \
  } while (0)

/* Argument checks for entry points: `fn` names the entry point, the message the argument. */
#define JITOPS__REQUIRE_NONNULL(fn, arg)                                                           \
  do {                                                                                             \
    if ((arg) == NULL)                                                                             \
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, #arg);                \
  } while (0)

#endif
