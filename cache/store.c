/* The runtime's disk tier: opening it as the settings' plan says (cache/settings.h), its state,
 * closing it, and what a failed statement does. Reading, writing and claims are in
 * store_read.c, store_write.c and claims.c. */
#include "cache/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/damage.h"
#include "cache/location.h"
#include "cache/settings.h"
#include "cache/store_internal.h"
#include "common/log.h"

enum { RECOVERIES_MAX = 3 }; /* per store: a disk that keeps corrupting is given up */

int64_t jitops__store_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- opening --------------------------------------------------------------------------- */

/* Turns the main database off, `reason` saying why (and `degraded` whether nobody asked for
 * it). The caller holds the lock, or is opening the store. */
static void turn_off(jitops__store *store, int degraded, const char *reason) {
  jitops__db_close(&store->main);
  store->writable = 0;
  store->state = JITOPS_CACHE_STATE_OFF;
  store->degraded = store->degraded || degraded;
  snprintf(store->reason, sizeof store->reason, "%.511s", reason); /* truncated if need be */
}

/* A read-only tier with no database yet: nothing to read, which is a problem only when the
 * tier was meant to be writable. */
static void no_database_yet(jitops__store *store, const char *path) {
  char reason[4400];
  snprintf(reason, sizeof reason, "%s%sthere is no cache database at %.1000s yet", store->reason,
           store->reason[0] ? ", and " : "read-only, and ", path);
  turn_off(store, store->degraded, reason);
}

/* Opens the main database as the plan says, setting a damaged one aside and starting afresh
 * (once). */
static void open_main(jitops__store *store, const jitops__cache_plan *plan) {
  store->writable = plan->state == JITOPS_CACHE_STATE_READWRITE;
  jitops__db_mode mode = store->writable      ? JITOPS__DB_READWRITE
                         : plan->dir_writable ? JITOPS__DB_READONLY
                                              : JITOPS__DB_IMMUTABLE;
  for (int attempt = 0;; ++attempt) {
    if (jitops__cache_file_check(plan->path, store->writable) != JITOPS_SUCCESS) {
      turn_off(store, 1, jitops_last_error());
      return;
    }
    if (!store->writable && access(plan->path, F_OK) != 0) {
      no_database_yet(store, plan->path);
      return;
    }
    if (jitops__db_open(plan->path, mode, JITOPS__STORE_BUSY_MS, &store->main) == JITOPS_SUCCESS)
      break;
    if (attempt > 0 || !store->writable || !store->main.damaged) {
      turn_off(store, 1, jitops_last_error());
      return;
    }
    ++store->errors;
    char aside[4200];
    jitops__db_set_aside(&store->main, jitops_last_error(), aside, sizeof aside);
  }
  if (store->writable)
    jitops__claim_locks_open(&store->claim_locks, plan->path);
}

/* A tier lowered for a reason nobody asked for is warned about, once per process. */
static void warn_if_degraded(const jitops__store *store) {
  static int warned_off, warned_readonly;
  if (store->degraded && store->state == JITOPS_CACHE_STATE_OFF)
    jitops__warn_once(&warned_off, "disk cache off: %s", store->reason);
  else if (store->degraded)
    jitops__warn_once(&warned_readonly,
                      "disk cache read-only: %s; kernels compiled now stay in "
                      "memory",
                      store->reason);
}

/* A shipped tier may belong to root (an application installed system-wide), but must not be
 * writable by others; the file itself must not be a symlink. */
static int shipped_file_is_safe(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return 0;
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return 0;
  return (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

static void open_shipped(jitops__store *store, const char *given) {
  static int warned;
  char path[4096];
  if (given == NULL || given[0] == 0)
    return;
  if (jitops__real_parent_path(given, path, sizeof path) != JITOPS_SUCCESS ||
      !shipped_file_is_safe(path)) {
    jitops__warn_once(
        &warned, "shipped cache %s is missing, a symlink, or writable by others: ignored", given);
    return;
  }
  if (jitops__db_open(path, JITOPS__DB_IMMUTABLE, JITOPS__STORE_BUSY_MS, &store->shipped) !=
      JITOPS_SUCCESS)
    jitops__warn_once(&warned, "shipped cache ignored: %s", jitops_last_error());
}

jitops__store *jitops__store_open(const jitops__store_options *options) {
  jitops__store *store = calloc(1, sizeof *store);
  if (store == NULL)
    return NULL;
  pthread_mutex_init(&store->lock, NULL);
  store->claim_locks.fd = -1;
  jitops__cache_plan plan;
  jitops__cache_plan_make(options->dir, options->mode, options->max_bytes, 1, &plan);
  store->max_bytes = plan.max_bytes;
  store->state = plan.state;
  store->degraded = plan.degraded;
  memcpy(store->reason, plan.reason, sizeof store->reason);
  if (plan.state != JITOPS_CACHE_STATE_OFF)
    open_main(store, &plan);
  warn_if_degraded(store);
  if (plan.mode != JITOPS_CACHE_MODE_OFF)
    open_shipped(store, options->shipped ? options->shipped : getenv("JITOPS_CACHE_SHIPPED"));
  return store;
}

void jitops__store_close(jitops__store *store) {
  if (store == NULL)
    return;
  jitops__db_close(&store->main);
  jitops__db_close(&store->shipped);
  jitops__claim_locks_close(&store->claim_locks);
  pthread_mutex_destroy(&store->lock);
  free(store);
}

const char *jitops__store_path(const jitops__store *store) {
  if (store == NULL)
    return "";
  return store->main.handle ? store->main.path : store->shipped.path;
}

void jitops__store_describe(jitops__store *store, jitops_runtime_info *info) {
  if (store == NULL) {
    info->cache_state = JITOPS_CACHE_STATE_OFF;
    info->cache_degraded = 1;
    snprintf(info->cache_reason, sizeof info->cache_reason, "out of host memory");
    return;
  }
  pthread_mutex_lock(&store->lock);
  snprintf(info->cache_path, sizeof info->cache_path, "%.1023s", jitops__store_path(store));
  info->cache_writable = jitops__store_writable(store);
  info->cache_state = store->state;
  info->cache_degraded = store->degraded;
  snprintf(info->cache_reason, sizeof info->cache_reason, "%s", store->reason);
  info->cache_max_bytes = store->max_bytes;
  pthread_mutex_unlock(&store->lock);
}

int jitops__store_writable(const jitops__store *store) {
  return store != NULL && store->writable && store->main.handle != NULL;
}

uint64_t jitops__store_errors(const jitops__store *store) {
  return store ? __atomic_load_n(&store->errors, __ATOMIC_RELAXED) : 0;
}

/* ---- failures -------------------------------------------------------------------------- */

/* Handles a failed statement on the main database: a damaged file is set aside and a fresh
 * one opened (a few times at most); anything else is counted and logged once. The caller
 * holds the lock. */
void jitops__store_failed(jitops__store *store, int rc, const char *what) {
  ++store->errors;
  if (!jitops__db_rc_is_damage(rc)) {
    jitops__warn_once(&store->warned_write, "disk cache %s: %s: %s", store->main.path, what,
                      sqlite3_errstr(rc));
    return;
  }
  char path[4096], reason[4400];
  snprintf(path, sizeof path, "%s", store->main.path);
  if (!store->writable || store->recoveries >= RECOVERIES_MAX) {
    snprintf(reason, sizeof reason, "%s is damaged (%s): continuing without it", path,
             sqlite3_errstr(rc));
    jitops__log(JITOPS__LOG_WARN, "disk cache %s", reason);
    turn_off(store, 1, reason);
    return;
  }
  ++store->recoveries;
  char aside[4200];
  jitops__db_set_aside(&store->main, sqlite3_errstr(rc), aside, sizeof aside);
  if (jitops__cache_file_check(path, 1) != JITOPS_SUCCESS ||
      jitops__db_open(path, JITOPS__DB_READWRITE, JITOPS__STORE_BUSY_MS, &store->main) !=
          JITOPS_SUCCESS) {
    snprintf(reason, sizeof reason, "%s could not be rebuilt: %s", path, jitops_last_error());
    jitops__log(JITOPS__LOG_WARN, "disk cache %s", reason);
    turn_off(store, 1, reason);
  }
}
