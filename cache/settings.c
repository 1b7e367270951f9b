#include "cache/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/location.h"
#include "cache/remote.h"
#include "common/env.h"
#include "common/error.h"

enum { DEFAULT_MAX_BYTES = 1 << 30 };

jitops_cache_mode jitops__cache_mode_from_env(void) {
  static const jitops__env_word words[] = {
      {"off", JITOPS_CACHE_MODE_OFF},           {"0", JITOPS_CACHE_MODE_OFF},
      {"readonly", JITOPS_CACHE_MODE_READONLY}, {"readwrite", JITOPS_CACHE_MODE_READWRITE},
      {"on", JITOPS_CACHE_MODE_READWRITE},      {"1", JITOPS_CACHE_MODE_READWRITE}};
  return (jitops_cache_mode)jitops__env_word_value(
      "JITOPS_CACHE", words, sizeof words / sizeof words[0], JITOPS_CACHE_MODE_READWRITE);
}

int64_t jitops__cache_max_bytes_from_env(void) {
  return jitops__env_size("JITOPS_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES, JITOPS__SIZE_LIMIT);
}

static const char *nonempty_or_null(const char *text) {
  return text != NULL && text[0] != 0 ? text : NULL;
}

const char *jitops__remote_url_setting(const char *configured) {
  return nonempty_or_null(configured != NULL ? configured : getenv("JITOPS_CACHE_REMOTE"));
}

const char *jitops__remote_key_setting(const char *configured) {
  return nonempty_or_null(configured != NULL ? configured : getenv("JITOPS_CACHE_REMOTE_KEY"));
}

int jitops__remote_timeout_ms_from_env(void) {
  return (int)jitops__env_integer("JITOPS_CACHE_REMOTE_TIMEOUT_MS", JITOPS__REMOTE_TIMEOUT_MS, 1,
                                  60000, "a number of milliseconds from 1 to 60000");
}

/* The state a mode asks for, and why, when it is not read-write. */
static void asked_state(jitops_cache_mode configured, jitops__cache_plan *plan) {
  const char *by = configured == JITOPS_CACHE_MODE_DEFAULT ? "JITOPS_CACHE" : "config.cache_mode";
  plan->state = plan->mode == JITOPS_CACHE_MODE_OFF        ? JITOPS_CACHE_STATE_OFF
                : plan->mode == JITOPS_CACHE_MODE_READONLY ? JITOPS_CACHE_STATE_READONLY
                                                           : JITOPS_CACHE_STATE_READWRITE;
  if (plan->state != JITOPS_CACHE_STATE_READWRITE)
    snprintf(plan->reason, sizeof plan->reason, "%s asks for %s", by,
             plan->state == JITOPS_CACHE_STATE_OFF ? "no disk tier" : "a read-only one");
}

/* The plan falls short of what was asked: `state`, for the reason in the last error.
 * Returns 0. */
static int fall_short(jitops__cache_plan *plan, jitops_cache_state state) {
  plan->state = state;
  plan->degraded = 1;
  snprintf(plan->reason, sizeof plan->reason, "%s", jitops_last_error());
  return 0;
}

/* Checks the directory (which may not exist yet, when not `create`) and the database's path.
 * Returns 0 when the plan falls short: its state and reason say how. */
static int check_location(const char *configured, int create, jitops__cache_plan *plan) {
  char dir[4096];
  int make = create && plan->mode == JITOPS_CACHE_MODE_READWRITE;
  if (!make && access(configured, F_OK) != 0) {
    if (plan->mode == JITOPS_CACHE_MODE_READWRITE)
      return 1;                           /* a runtime creates it */
    plan->state = JITOPS_CACHE_STATE_OFF; /* read-only, and nothing to read: as asked */
    snprintf(plan->reason, sizeof plan->reason, "read-only, and there is no cache at %.400s yet",
             configured);
    return 0;
  }
  if (jitops__cache_dir_check(configured, make, dir, sizeof dir, &plan->dir_writable) !=
      JITOPS_SUCCESS)
    return fall_short(plan, JITOPS_CACHE_STATE_OFF);
  snprintf(plan->path, sizeof plan->path, "%s/%s", dir, JITOPS__CACHE_DB_NAME);
  if (jitops__cache_file_check(plan->path, 0) != JITOPS_SUCCESS)
    return fall_short(plan, JITOPS_CACHE_STATE_OFF);
  if (plan->state == JITOPS_CACHE_STATE_READWRITE && !plan->dir_writable) {
    jitops__fail(JITOPS_ERR_CACHE, "cache directory %s is read-only", dir);
    return fall_short(plan, JITOPS_CACHE_STATE_READONLY);
  }
  return 1;
}

void jitops__cache_plan_make(const char *dir, jitops_cache_mode configured_mode,
                             int64_t configured_max_bytes, int create, jitops__cache_plan *out) {
  memset(out, 0, sizeof *out);
  out->mode = configured_mode != JITOPS_CACHE_MODE_DEFAULT ? configured_mode
                                                           : jitops__cache_mode_from_env();
  out->max_bytes =
      configured_max_bytes != 0 ? configured_max_bytes : jitops__cache_max_bytes_from_env();
  if (out->max_bytes < 0)
    out->max_bytes = -1;
  asked_state(configured_mode, out);
  if (out->state == JITOPS_CACHE_STATE_OFF)
    return;
  char configured[4096];
  if (jitops__cache_dir_resolve(dir, configured, sizeof configured) == JITOPS_SUCCESS)
    check_location(configured, create, out);
  else
    fall_short(out, JITOPS_CACHE_STATE_OFF);
}
