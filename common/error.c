/* Status names and the thread-local last-error message. */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { LAST_ERROR_BYTES = 16384 };

/* Each thread's message of its latest failure, in one of two buffers: a new message is
 * formatted into the buffer not on show and then shown, so that a failure may quote
 * jitops_last_error() itself (context added to a failure from a lower layer) without
 * formatting a buffer into itself. Large enough for an NVRTC log of a failed template
 * instance; longer logs are truncated with a marker. */
static _Thread_local char messages[2][LAST_ERROR_BYTES];
static _Thread_local int shown;

const char *jitops_status_string(jitops_status status) {
  switch (status) {
  case JITOPS_SUCCESS:
    return "JITOPS_SUCCESS";
  case JITOPS_ERR_INVALID_ARGUMENT:
    return "JITOPS_ERR_INVALID_ARGUMENT";
  case JITOPS_ERR_INVALID_SHAPE:
    return "JITOPS_ERR_INVALID_SHAPE";
  case JITOPS_ERR_INVALID_DTYPE:
    return "JITOPS_ERR_INVALID_DTYPE";
  case JITOPS_ERR_INVALID_LAYOUT:
    return "JITOPS_ERR_INVALID_LAYOUT";
  case JITOPS_ERR_INVALID_DEVICE:
    return "JITOPS_ERR_INVALID_DEVICE";
  case JITOPS_ERR_OUT_OF_RANGE:
    return "JITOPS_ERR_OUT_OF_RANGE";
  case JITOPS_ERR_NOT_FOUND:
    return "JITOPS_ERR_NOT_FOUND";
  case JITOPS_ERR_ALREADY_EXISTS:
    return "JITOPS_ERR_ALREADY_EXISTS";
  case JITOPS_ERR_COMPILE:
    return "JITOPS_ERR_COMPILE";
  case JITOPS_ERR_NO_DEVICE:
    return "JITOPS_ERR_NO_DEVICE";
  case JITOPS_ERR_DRIVER:
    return "JITOPS_ERR_DRIVER";
  case JITOPS_ERR_OUT_OF_MEMORY:
    return "JITOPS_ERR_OUT_OF_MEMORY";
  case JITOPS_ERR_UNSUPPORTED:
    return "JITOPS_ERR_UNSUPPORTED";
  case JITOPS_ERR_CACHE:
    return "JITOPS_ERR_CACHE";
  case JITOPS_ERR_IO:
    return "JITOPS_ERR_IO";
  case JITOPS_ERR_INTERNAL:
    return "JITOPS_ERR_INTERNAL";
  }
  return "JITOPS_ERR_UNKNOWN_STATUS";
}

const char *jitops_last_error(void) {
  return messages[shown];
}

const char *jitops_version_string(void) {
#define JITOPS_STR2(x) #x
#define JITOPS_STR(x)  JITOPS_STR2(x)
  return JITOPS_STR(JITOPS_VERSION_MAJOR) "." JITOPS_STR(JITOPS_VERSION_MINOR) "." JITOPS_STR(
      JITOPS_VERSION_PATCH);
}

jitops_status jitops__fail(jitops_status status, const char *fmt, ...) {
  int next = !shown;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(messages[next], sizeof messages[next], fmt, ap);
  va_end(ap);
  shown = next;
  return status;
}

void jitops__fail_append(const char *text) {
  static const char marker[] = "\n[... log truncated]";
  char *last_error = messages[shown];
  size_t used = strlen(last_error);
  size_t room = LAST_ERROR_BYTES - used;
  size_t need = strlen(text);
  if (need < room) {
    memcpy(last_error + used, text, need + 1);
    return;
  }
  if (room > sizeof marker) {
    memcpy(last_error + used, text, room - sizeof marker);
    memcpy(last_error + LAST_ERROR_BYTES - sizeof marker, marker, sizeof marker);
  }
}
