#include "cache/store.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/damage.h"
#include "cache/db.h"
#include "cache/location.h"
#include "cache/settings.h"
#include "common/log.h"

enum {
  CLAIM_STALE_MS = 300 * 1000, /* a claim this old is abandoned, whoever holds it */
  CLAIM_WAIT_MS = 600 * 1000,  /* waiting longer than this, compile anyway */
  RECOVERIES_MAX = 3           /* per store: a disk that keeps corrupting is given up */
};

struct jitops__store {
  pthread_mutex_t lock; /* one connection per tier, used by one thread at a time */
  jitops__db main;      /* handle NULL when only the shipped tier exists */
  jitops__db shipped;   /* handle NULL when there is none */
  int writable;
  int64_t max_bytes;
  int recoveries;
  uint64_t errors;
  int warned_write;
  char host[256];
};

/* Warnings that would repeat on every runtime are given once per process. */
static int warned_unusable_dir, warned_unusable_shipped;

static int64_t now_ms(void) {
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
    jitops_status status = jitops__db_open(path, mode, &store->main);
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
  if (jitops__db_open(path, JITOPS__DB_IMMUTABLE, &store->shipped) != JITOPS_SUCCESS)
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
  if (gethostname(store->host, sizeof store->host - 1) != 0)
    strcpy(store->host, "?");
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
static void main_failed(jitops__store *store, int rc, const char *what) {
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
      jitops__db_open(path, JITOPS__DB_READWRITE, &store->main) != JITOPS_SUCCESS) {
    jitops__log(JITOPS__LOG_WARN, "disk cache %s could not be rebuilt: %s", path,
                jitops_last_error());
    store->writable = 0;
  }
}

/* ---- reading --------------------------------------------------------------------------- */

void jitops__blob_free(jitops__blob *blob) {
  free(blob->image);
  free(blob->lowered_name);
  memset(blob, 0, sizeof *blob);
}

/* Copies a row's blob out if its hash verifies. Returns 1 on success, 0 on a bad row. */
static int take_verified(sqlite3_stmt *stmt, jitops__blob *out) {
  const void *image = sqlite3_column_blob(stmt, 1);
  int size = sqlite3_column_bytes(stmt, 1);
  const void *hash = sqlite3_column_blob(stmt, 2);
  const char *lowered = (const char *)sqlite3_column_text(stmt, 0);
  uint8_t actual[16];
  if (image == NULL || size <= 0 || hash == NULL || sqlite3_column_bytes(stmt, 2) != 16 ||
      lowered == NULL)
    return 0;
  jitops__blob_hash(image, (size_t)size, actual);
  if (memcmp(actual, hash, 16) != 0)
    return 0;
  out->image = malloc((size_t)size);
  out->lowered_name = strdup(lowered);
  if (out->image == NULL || out->lowered_name == NULL) {
    jitops__blob_free(out);
    return 0;
  }
  memcpy(out->image, image, (size_t)size);
  out->size = (size_t)size;
  return 1;
}

typedef enum { ROW_ABSENT, ROW_FOUND, ROW_BAD, ROW_ERROR } row_result;

static row_result read_row(jitops__db *db, const uint8_t key[16], jitops__blob *out, int *rc) {
  sqlite3_stmt *stmt = NULL;
  *rc = sqlite3_prepare_v2(db->handle,
                           "SELECT lowered_name, blob, blob_hash FROM kernels WHERE key = ?", -1,
                           &stmt, NULL);
  if (*rc != SQLITE_OK)
    return ROW_ERROR;
  sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
  row_result result = ROW_ABSENT;
  *rc = sqlite3_step(stmt);
  if (*rc == SQLITE_ROW)
    result = take_verified(stmt, out) ? ROW_FOUND : ROW_BAD;
  else if (*rc != SQLITE_DONE)
    result = ROW_ERROR;
  *rc = sqlite3_finalize(stmt) == SQLITE_OK ? SQLITE_OK : *rc;
  if (result == ROW_ERROR && *rc == SQLITE_OK)
    *rc = SQLITE_ERROR;
  return result;
}

static void delete_row(jitops__store *store, const uint8_t key[16]) {
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(store->main.handle, "DELETE FROM kernels WHERE key = ?", -1, &stmt,
                         NULL) != SQLITE_OK)
    return;
  sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
  int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE)
    main_failed(store, rc, "deleting a damaged row");
}

/* Reads the main tier; bad rows are deleted. The caller holds the lock. */
static int get_main(jitops__store *store, const uint8_t key[16], jitops__blob *out) {
  if (store->main.handle == NULL)
    return 0;
  int rc;
  switch (read_row(&store->main, key, out, &rc)) {
  case ROW_FOUND:
    return 1;
  case ROW_BAD:
    ++store->errors;
    jitops__log(JITOPS__LOG_WARN, "disk cache: a blob failed its hash check; recompiling it");
    if (store->writable)
      delete_row(store, key);
    return 0;
  case ROW_ERROR:
    main_failed(store, rc, "reading a kernel");
    return 0;
  case ROW_ABSENT:
    return 0;
  }
  return 0;
}

int jitops__store_get(jitops__store *store, const uint8_t key[16], jitops__blob *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&store->lock);
  int found = get_main(store, key, out);
  if (!found && store->shipped.handle != NULL) {
    int rc;
    found = read_row(&store->shipped, key, out, &rc) == ROW_FOUND;
  }
  pthread_mutex_unlock(&store->lock);
  return found;
}

/* ---- claims ---------------------------------------------------------------------------- */

static int claim_is_live(jitops__store *store, sqlite3_stmt *claim) {
  int64_t pid = sqlite3_column_int64(claim, 0);
  const char *host = (const char *)sqlite3_column_text(claim, 1);
  int64_t claimed_at = sqlite3_column_int64(claim, 2);
  if (now_ms() - claimed_at > CLAIM_STALE_MS)
    return 0;
  if (host != NULL && strcmp(host, store->host) == 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
    return 0;
  return 1;
}

typedef enum { CLAIM_TAKEN, CLAIM_HELD_ELSEWHERE, CLAIM_ROW_FOUND, CLAIM_FAILED } claim_step;

/* One transaction: the row if present, else the claim if free. Caller holds the lock. */
static claim_step try_claim(jitops__store *store, const uint8_t key[16], jitops__blob *found) {
  int rc = jitops__db_begin_write(&store->main);
  if (rc != SQLITE_OK) {
    main_failed(store, rc, "starting a claim");
    return CLAIM_FAILED;
  }
  claim_step step = CLAIM_FAILED;
  if (read_row(&store->main, key, found, &rc) == ROW_FOUND) {
    step = CLAIM_ROW_FOUND;
  } else {
    sqlite3_stmt *stmt = NULL;
    rc = sqlite3_prepare_v2(store->main.handle,
                            "SELECT pid, host, claimed_at FROM claims WHERE key = ?", -1, &stmt,
                            NULL);
    if (rc == SQLITE_OK) {
      sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
      rc = sqlite3_step(stmt);
      step = rc == SQLITE_ROW && claim_is_live(store, stmt) ? CLAIM_HELD_ELSEWHERE : CLAIM_TAKEN;
      rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
      sqlite3_finalize(stmt);
    }
    if (rc == SQLITE_OK && step == CLAIM_TAKEN) {
      rc = sqlite3_prepare_v2(store->main.handle,
                              "INSERT OR REPLACE INTO claims(key, pid, host, claimed_at) "
                              "VALUES(?, ?, ?, ?)",
                              -1, &stmt, NULL);
      if (rc == SQLITE_OK) {
        sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 2, getpid());
        sqlite3_bind_text(stmt, 3, store->host, -1, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 4, now_ms());
        rc = sqlite3_step(stmt) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(store->main.handle);
        sqlite3_finalize(stmt);
      }
    }
    if (rc != SQLITE_OK)
      step = CLAIM_FAILED;
  }
  int end = jitops__db_exec(&store->main, step == CLAIM_FAILED ? "ROLLBACK" : "COMMIT");
  if (step == CLAIM_FAILED || end != SQLITE_OK) {
    if (step != CLAIM_FAILED)
      jitops__db_exec(&store->main, "ROLLBACK");
    main_failed(store, end != SQLITE_OK ? end : rc, "taking a claim");
    if (step == CLAIM_ROW_FOUND)
      return CLAIM_ROW_FOUND; /* the blob was read and verified before the failure */
    return CLAIM_FAILED;
  }
  return step;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

jitops__claim jitops__store_claim(jitops__store *store, const uint8_t key[16], jitops__blob *found,
                                  int *waited) {
  memset(found, 0, sizeof *found);
  *waited = 0;
  int64_t start = now_ms();
  int pause = 2;
  for (;;) {
    pthread_mutex_lock(&store->lock);
    claim_step step = CLAIM_FAILED;
    if (store->writable && store->main.handle != NULL)
      step = try_claim(store, key, found);
    pthread_mutex_unlock(&store->lock);
    if (step == CLAIM_ROW_FOUND)
      return JITOPS__CLAIM_FOUND;
    if (step != CLAIM_HELD_ELSEWHERE || now_ms() - start > CLAIM_WAIT_MS)
      return JITOPS__CLAIM_COMPILE;
    *waited = 1;
    sleep_ms(pause);
    pause = pause < 50 ? pause * 2 : 50;
  }
}

static void delete_claim(jitops__store *store, const uint8_t key[16]) {
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(store->main.handle, "DELETE FROM claims WHERE key = ? AND pid = ?", -1,
                         &stmt, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, getpid());
  sqlite3_step(stmt);
  sqlite3_finalize(stmt);
}

void jitops__store_unclaim(jitops__store *store, const uint8_t key[16]) {
  if (store == NULL)
    return;
  pthread_mutex_lock(&store->lock);
  if (store->writable && store->main.handle != NULL)
    delete_claim(store, key);
  pthread_mutex_unlock(&store->lock);
}

/* ---- writing --------------------------------------------------------------------------- */

static int insert_row(jitops__store *store, const jitops__store_row *row) {
  sqlite3_stmt *stmt = NULL;
  int rc = sqlite3_prepare_v2(
      store->main.handle,
      "INSERT OR REPLACE INTO kernels(key, op, name_expr, lowered_name, target, nvrtc_version,"
      " options, kind, blob, blob_hash, size, compile_ms, created, last_used, use_count)"
      " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
      -1, &stmt, NULL);
  if (rc != SQLITE_OK)
    return rc;
  uint8_t hash[16];
  jitops__blob_hash(row->image, row->size, hash);
  int64_t now = now_ms();
  sqlite3_bind_blob(stmt, 1, row->key, 16, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 2, row->op, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 3, row->name_expression, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 4, row->lowered_name, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 5, row->target, -1, SQLITE_STATIC);
  sqlite3_bind_int(stmt, 6, row->nvrtc_version);
  sqlite3_bind_text(stmt, 7, row->options, -1, SQLITE_STATIC);
  sqlite3_bind_int(stmt, 8, (int)row->kind);
  sqlite3_bind_blob64(stmt, 9, row->image, row->size, SQLITE_STATIC);
  sqlite3_bind_blob(stmt, 10, hash, 16, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 11, (int64_t)row->size);
  sqlite3_bind_double(stmt, 12, row->compile_ms);
  sqlite3_bind_int64(stmt, 13, now);
  sqlite3_bind_int64(stmt, 14, now);
  rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int64_t total_bytes(jitops__store *store) {
  sqlite3_stmt *stmt = NULL;
  int64_t total = 0;
  if (sqlite3_prepare_v2(store->main.handle, "SELECT COALESCE(SUM(size), 0) FROM kernels", -1,
                         &stmt, NULL) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    total = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return total;
}

/* Deletes least recently used rows (oldest last use, then oldest insert) until the total
 * fits, sparing `keep`. Runs inside the caller's write transaction. */
static int evict(jitops__store *store, const uint8_t keep[16]) {
  if (store->max_bytes < 0)
    return SQLITE_OK;
  int64_t excess = total_bytes(store) - store->max_bytes;
  if (excess <= 0)
    return SQLITE_OK;
  sqlite3_stmt *pick = NULL;
  int rc = sqlite3_prepare_v2(store->main.handle,
                              "SELECT rowid, size FROM kernels WHERE key != ?"
                              " ORDER BY last_used ASC, rowid ASC",
                              -1, &pick, NULL);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_blob(pick, 1, keep, 16, SQLITE_STATIC);
  int64_t last_rowid = -1, evicted = 0;
  while (excess > 0 && sqlite3_step(pick) == SQLITE_ROW) {
    last_rowid = sqlite3_column_int64(pick, 0);
    excess -= sqlite3_column_int64(pick, 1);
    ++evicted;
  }
  sqlite3_finalize(pick);
  if (last_rowid < 0)
    return SQLITE_OK;
  sqlite3_stmt *del = NULL;
  rc = sqlite3_prepare_v2(store->main.handle,
                          "DELETE FROM kernels WHERE rowid IN (SELECT rowid FROM kernels"
                          " WHERE key != ? ORDER BY last_used ASC, rowid ASC LIMIT ?)",
                          -1, &del, NULL);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_blob(del, 1, keep, 16, SQLITE_STATIC);
  sqlite3_bind_int64(del, 2, evicted);
  rc = sqlite3_step(del);
  sqlite3_finalize(del);
  jitops__log(JITOPS__LOG_DEBUG, "disk cache: evicted %lld least recently used kernel(s)",
              (long long)evicted);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

void jitops__store_put(jitops__store *store, const jitops__store_row *row) {
  if (store == NULL)
    return;
  pthread_mutex_lock(&store->lock);
  if (store->writable && store->main.handle != NULL) {
    int rc = jitops__db_begin_write(&store->main);
    if (rc == SQLITE_OK)
      rc = insert_row(store, row);
    if (rc == SQLITE_OK)
      rc = evict(store, row->key);
    if (rc == SQLITE_OK) {
      delete_claim(store, row->key);
      rc = jitops__db_exec(&store->main, "COMMIT");
    }
    if (rc != SQLITE_OK) {
      jitops__db_exec(&store->main, "ROLLBACK");
      main_failed(store, rc, "storing a kernel");
      if (store->main.handle != NULL)
        delete_claim(store, row->key);
    }
  }
  pthread_mutex_unlock(&store->lock);
}

/* ---- usage ----------------------------------------------------------------------------- */

static int flush_one(jitops__store *store, const jitops__usage *u, int64_t now) {
  sqlite3_stmt *stmt = NULL;
  int rc = sqlite3_prepare_v2(store->main.handle,
                              "UPDATE kernels SET use_count = use_count + ?,"
                              " last_used = max(last_used, ?) WHERE key = ?",
                              -1, &stmt, NULL);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_int64(stmt, 1, (int64_t)(u->memory_hits + u->disk_hits + u->misses));
  sqlite3_bind_int64(stmt, 2, now);
  sqlite3_bind_blob(stmt, 3, u->key, 16, SQLITE_STATIC);
  rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE)
    return rc;
  rc = sqlite3_prepare_v2(store->main.handle,
                          "INSERT INTO usage(op, target, memory_hits, disk_hits, misses, compiles)"
                          " VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(op, target) DO UPDATE SET"
                          " memory_hits = memory_hits + excluded.memory_hits,"
                          " disk_hits = disk_hits + excluded.disk_hits,"
                          " misses = misses + excluded.misses,"
                          " compiles = compiles + excluded.compiles",
                          -1, &stmt, NULL);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_text(stmt, 1, u->op, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 2, u->target, -1, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 3, (int64_t)u->memory_hits);
  sqlite3_bind_int64(stmt, 4, (int64_t)u->disk_hits);
  sqlite3_bind_int64(stmt, 5, (int64_t)u->misses);
  sqlite3_bind_int64(stmt, 6, (int64_t)u->compiles);
  rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

void jitops__store_flush(jitops__store *store, const jitops__usage *usage, size_t count) {
  if (store == NULL || count == 0)
    return;
  pthread_mutex_lock(&store->lock);
  if (store->writable && store->main.handle != NULL) {
    int64_t now = now_ms();
    int rc = jitops__db_begin_write(&store->main);
    for (size_t i = 0; i < count && rc == SQLITE_OK; ++i)
      rc = flush_one(store, &usage[i], now);
    if (rc == SQLITE_OK)
      rc = jitops__db_exec(&store->main, "COMMIT");
    if (rc != SQLITE_OK) {
      jitops__db_exec(&store->main, "ROLLBACK");
      main_failed(store, rc, "recording usage");
    }
  }
  pthread_mutex_unlock(&store->lock);
}
