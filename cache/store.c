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

/* Warnings that would repeat on every runtime are given once per process. */
static int warned_unusable_dir, warned_unusable_shipped;

int64_t jitops__store_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- opening --------------------------------------------------------------------------- */

/* Opens the main database, setting a corrupt one aside and starting afresh (once). */
static jitops_status open_main(jitops__store *store, const char *path, int dir_writable) {
  jitops__db_mode mode = store->writable ? JITOPS__DB_READWRITE
                         : dir_writable  ? JITOPS__DB_READONLY
                                         : JITOPS__DB_IMMUTABLE;
  for (int attempt = 0;; ++attempt) {
    JITOPS__TRY(jitops__cache_file_check(path, store->writable));
    if (!store->writable && access(path, F_OK) != 0)
      return jitops__fail(JITOPS_ERR_CACHE, "no cache database at %s (read-only)", path);
    jitops_status status = jitops__db_open(path, mode, JITOPS__STORE_BUSY_MS, &store->main);
    if (status == JITOPS_SUCCESS || attempt > 0 || !store->writable || !store->main.damaged)
      return status;
    ++store->errors;
    char aside[4200];
    jitops__db_set_aside(&store->main, jitops_last_error(), aside, sizeof aside);
  }
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
  char path[4096];
  if (given == NULL || given[0] == 0)
    return;
  if (jitops__real_parent_path(given, path, sizeof path) != JITOPS_SUCCESS ||
      !shipped_file_is_safe(path)) {
    jitops__warn_once(&warned_unusable_shipped,
                      "shipped cache %s is missing, a symlink, or writable by others: ignored",
                      given);
    return;
  }
  if (jitops__db_open(path, JITOPS__DB_IMMUTABLE, JITOPS__STORE_BUSY_MS, &store->shipped) !=
      JITOPS_SUCCESS)
    jitops__warn_once(&warned_unusable_shipped, "shipped cache ignored: %s", jitops_last_error());
}

static void open_tiers(jitops__store *store, const jitops__store_options *options,
                       jitops_cache_mode mode) {
  char configured[4096], dir[4096], path[4200];
  int dir_writable = 0;
  jitops_status status = jitops__cache_dir_resolve(options->dir, configured, sizeof configured);
  if (status == JITOPS_SUCCESS)
    status = jitops__cache_dir_check(configured, mode == JITOPS_CACHE_MODE_READWRITE, dir,
                                     sizeof dir, &dir_writable);
  if (status == JITOPS_SUCCESS) {
    store->writable = mode == JITOPS_CACHE_MODE_READWRITE && dir_writable;
    if (mode == JITOPS_CACHE_MODE_READWRITE && !dir_writable)
      jitops__warn_once(&warned_unusable_dir,
                        "cache directory %s is read-only: kernels compiled now stay in memory",
                        dir);
    snprintf(path, sizeof path, "%s/%s", dir, JITOPS__CACHE_DB_NAME);
    status = open_main(store, path, dir_writable);
    if (status == JITOPS_SUCCESS && store->writable)
      jitops__claim_locks_open(&store->claim_locks, path);
  }
  if (status != JITOPS_SUCCESS) {
    store->writable = 0;
    if (mode == JITOPS_CACHE_MODE_READWRITE)
      jitops__warn_once(&warned_unusable_dir, "disk cache off: %s", jitops_last_error());
    else
      jitops__log(JITOPS__LOG_DEBUG, "no main disk tier: %s", jitops_last_error());
  }
  const char *shipped = options->shipped ? options->shipped : getenv("JITOPS_CACHE_SHIPPED");
  open_shipped(store, shipped);
}

jitops__store *jitops__store_open(const jitops__store_options *options) {
  jitops_cache_mode mode = jitops__cache_mode_resolve(options->mode);
  if (mode == JITOPS_CACHE_MODE_OFF)
    return NULL;
  jitops__store *store = calloc(1, sizeof *store);
  if (store == NULL)
    return NULL;
  pthread_mutex_init(&store->lock, NULL);
  store->max_bytes = jitops__cache_max_bytes_resolve(options->max_bytes);
  store->claim_locks.fd = -1;
  open_tiers(store, options, mode);
  if (store->main.handle == NULL && store->shipped.handle == NULL) {
    pthread_mutex_destroy(&store->lock);
    free(store);
    return NULL;
  }
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
  char path[4096];
  snprintf(path, sizeof path, "%s", store->main.path);
  if (!store->writable || store->recoveries >= RECOVERIES_MAX) {
    jitops__db_close(&store->main);
    jitops__log(JITOPS__LOG_WARN, "disk cache %s is damaged: continuing without it", path);
    return;
  }
  ++store->recoveries;
  char aside[4200];
  jitops__db_set_aside(&store->main, sqlite3_errstr(rc), aside, sizeof aside);
  if (jitops__cache_file_check(path, 1) != JITOPS_SUCCESS ||
      jitops__db_open(path, JITOPS__DB_READWRITE, JITOPS__STORE_BUSY_MS, &store->main) !=
          JITOPS_SUCCESS) {
    jitops__log(JITOPS__LOG_WARN, "disk cache %s could not be rebuilt: %s", path,
                jitops_last_error());
    store->writable = 0;
  }
}
